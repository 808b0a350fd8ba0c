/* Unix socket addresses and connecting to one. */
#include "sockutil.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

int unix_address(const char *path, struct sockaddr_un *ret, socklen_t *ret_len)
{
    size_t len = strlen(path);

    if (len >= sizeof(ret->sun_path))
        return -ENAMETOOLONG;
    memset(ret, 0, sizeof(*ret));
    ret->sun_family = AF_UNIX;
    memcpy(ret->sun_path, path, len + 1);
    *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return 0;
}

int unix_connect(const char *path, int *ret_fd)
{
    struct sockaddr_un sa;
    socklen_t sa_len;
    int fd, r;

    r = unix_address(path, &sa, &sa_len);
    if (r < 0)
        return r;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sa_len) < 0) {
        r = -errno;
        (void)close(fd); /* never connected */
        return r;
    }
    *ret_fd = fd;
    return 0;
}
