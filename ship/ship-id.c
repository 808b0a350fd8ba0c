/* The spool's transactional.id, <spool>/ship/id: made once, from the host
 * name and a random part, and kept, so that every shipper of the spool
 * after a restart is the same producer to Kafka (which fences an older one
 * with the same id and aborts what it left open). Made under a temp name and
 * renamed without replacing, so that two shippers starting at once agree on
 * one id. */
#include "ship.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"

int ship_transactional_id(const struct config *config, const char *spool, bool create,
                          char **ret)
{
    _cleanup_close_ int spool_fd = -1;
    _cleanup_close_ int dir_fd = -1;
    _cleanup_close_ int fd = -1;
    char buf[512], host[256] = "localhost", tmp[] = ".id.tmp";
    uint64_t nonce = 0;
    ssize_t got;
    int n, r;

    if (config->ship_transactional_id) {
        *ret = strdup(config->ship_transactional_id);
        return *ret ? 0 : -ENOMEM;
    }
    spool_fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (spool_fd < 0)
        return -errno;
    dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd >= 0 && open_regular_at(dir_fd, SHIP_ID_FILE, O_NOFOLLOW, &fd, NULL) == 0) {
        got = read_full(fd, buf, sizeof(buf) - 1);
        if (got < 0)
            return (int)got;
        while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
            got--;
        buf[got] = '\0';
        if (got == 0 || strchr(buf, '\n'))
            return -EBADMSG;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
    }
    if (!create)
        return -ENOENT;
    if (dir_fd < 0) {
        if (mkdirat(spool_fd, SHIP_DIR, 0750) < 0 && errno != EEXIST)
            return -errno;
        if (fsync(spool_fd) < 0)
            return -errno;
        dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir_fd < 0)
            return -errno;
    }
    (void)gethostname(host, sizeof(host) - 1);
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        return -EIO;
    n = snprintf(buf, sizeof(buf), "logshard-%s-%08x", host, (unsigned)(nonce & 0xffffffffu));
    if (n < 0 || (size_t)n >= sizeof(buf) - 1)
        return -ENAMETOOLONG;
    buf[n] = '\n';
    (void)unlinkat(dir_fd, tmp, 0);
    fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    r = write_all(fd, buf, (size_t)n + 1);
    if (r == 0 && fdatasync(fd) < 0)
        r = -errno;
    /* Never replaces an id another shipper made meanwhile: that one wins. */
    if (r == 0)
        r = spool_rename_noreplace(dir_fd, tmp, dir_fd, SHIP_ID_FILE, 0, NULL);
    (void)unlinkat(dir_fd, tmp, 0);
    if (r == -EEXIST)
        return ship_transactional_id(config, spool, false, ret);
    if (r < 0)
        return r;
    r = fsync_dir_fd(dir_fd);
    if (r < 0)
        return r;
    buf[n] = '\0';
    *ret = strdup(buf);
    return *ret ? 0 : -ENOMEM;
}
