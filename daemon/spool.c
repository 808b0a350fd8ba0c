/* Spool layout and its directory descriptors. Every shard file is created
 * and renamed relative to these descriptors, never through a path built
 * from a producer's name alone. */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"

static int open_subdir(int parent, const char *spool, const char *name, int *ret_fd, char *why,
                       size_t why_len)
{
    int fd;

    if (mkdirat(parent, name, 0750) < 0 && errno != EEXIST) {
        snprintf(why, why_len, "cannot create %s/%s: %s", spool, name, strerror(errno));
        return -errno;
    }
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, why_len, "cannot open %s/%s: %s", spool, name, strerror(errno));
        return -errno;
    }
    *ret_fd = fd;
    return 0;
}

int spool_open(struct daemon *d, char *why, size_t why_len)
{
    const char *spool = d->config.spool;
    int r;

    r = mkdir_if_missing(spool, 0750);
    if (r < 0) {
        snprintf(why, why_len, "cannot create spool %s: %s", spool, strerror(-r));
        return r;
    }
    d->spool_fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->spool_fd < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot open spool %s: %s", spool, strerror(errno));
        return r;
    }
    r = open_subdir(d->spool_fd, spool, "active", &d->active_fd, why, why_len);
    if (r < 0)
        return r;
    r = open_subdir(d->spool_fd, spool, "done", &d->done_fd, why, why_len);
    if (r < 0)
        return r;
    /* New subdirectories must survive a crash before anything is renamed
     * into them. */
    r = fsync_dir_fd(d->spool_fd);
    if (r < 0) {
        snprintf(why, why_len, "cannot sync spool %s: %s", spool, strerror(-r));
        return r;
    }
    return 0;
}

int spool_count_leftovers(struct daemon *d, size_t *ret_count)
{
    int fd = dup(d->active_fd);
    DIR *dir;
    struct dirent *de;
    size_t n = 0;

    if (fd < 0)
        return -errno;
    dir = fdopendir(fd);
    if (!dir) {
        int e = errno;
        (void)close(fd);
        return -e;
    }
    while ((de = readdir(dir)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
            n++;
    }
    closedir(dir);
    *ret_count = n;
    return 0;
}

void spool_close(struct daemon *d)
{
    int *fds[] = { &d->done_fd, &d->active_fd, &d->spool_fd };

    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++) {
        if (*fds[i] >= 0)
            (void)close(*fds[i]); /* read-only directory descriptors */
        *fds[i] = -1;
    }
}
