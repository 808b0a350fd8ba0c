/* Small file and time helpers that every binary of the project needs. */
#include "fileutil.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>

int write_all(int fd, const void *buf, size_t len)
{
    const unsigned char *p = buf;

    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

ssize_t read_full(int fd, void *buf, size_t len)
{
    unsigned char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int fsync_dir_fd(int dirfd)
{
    return fsync(dirfd) < 0 ? -errno : 0;
}

int fsync_dir_path(const char *path)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
        return -errno;
    return fsync_dir_fd(fd);
}

int mkdir_if_missing(const char *path, mode_t mode)
{
    struct stat st;

    if (mkdir(path, mode) == 0)
        return 0;
    if (errno != EEXIST)
        return -errno;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

char *path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir), nl = strlen(name);
    char *p = malloc(dl + 1 + nl + 1);

    if (!p)
        return NULL;
    memcpy(p, dir, dl);
    while (dl > 1 && p[dl - 1] == '/')
        dl--;
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl + 1);
    return p;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec ts;

    (void)clock_gettime(id, &ts); /* cannot fail for these clocks */
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t now_realtime_ns(void)
{
    return clock_ns(CLOCK_REALTIME);
}

uint64_t now_monotonic_ns(void)
{
    return clock_ns(CLOCK_MONOTONIC);
}

long fs_block_size(int fd, size_t max)
{
    struct statfs sf;
    unsigned long bs;

    if (fstatfs(fd, &sf) < 0)
        return -errno;
    bs = (unsigned long)sf.f_bsize;
    if (bs < 512 || bs > max || (bs & (bs - 1)) != 0)
        return 0;
    return (long)bs;
}
