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

int open_regular_stat_at(int dirfd, const char *name, int extra_flags, int *ret_fd,
                         struct stat *ret_st)
{
    int fd, r;

    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra_flags);
    if (fd < 0)
        return -errno;
    if (fstat(fd, ret_st) < 0)
        goto fail;
    if (!S_ISREG(ret_st->st_mode)) {
        (void)close(fd); /* never read from: nothing to report */
        return S_ISDIR(ret_st->st_mode) ? -EISDIR : -EBADFD;
    }
    /* Only the open had to be non-blocking; reads of a regular file ignore
     * the flag, but callers may hand the descriptor to code that checks it.
     * F_SETFL sets only the flags it can change, of which the open gave
     * this one and what extra_flags holds: no F_GETFL needed. A caller that
     * asked for O_NONBLOCK itself keeps it. */
    if (!(extra_flags & O_NONBLOCK) && fcntl(fd, F_SETFL, extra_flags) < 0)
        goto fail;
    *ret_fd = fd;
    return 0;

fail:
    r = -errno;
    (void)close(fd); /* the error above is the one to report */
    return r;
}

int open_regular_at(int dirfd, const char *name, int extra_flags, int *ret_fd, mode_t *ret_mode)
{
    struct stat st;
    int r = open_regular_stat_at(dirfd, name, extra_flags, ret_fd, &st);

    if ((r == -EISDIR || r == -EBADFD) && ret_mode)
        *ret_mode = st.st_mode;
    return r;
}

const char *file_type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "regular file";
    case S_IFDIR:
        return "directory";
    case S_IFIFO:
        return "FIFO";
    case S_IFSOCK:
        return "socket";
    case S_IFCHR:
        return "character device";
    case S_IFBLK:
        return "block device";
    case S_IFLNK:
        return "symbolic link";
    default:
        return "file of unknown type";
    }
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

int opendir_at(int dirfd, DIR **ret_dir)
{
    int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d;

    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        int r = -errno;

        (void)close(fd); /* nothing was read through it */
        return r;
    }
    *ret_dir = d;
    return 0;
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
