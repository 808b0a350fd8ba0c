/* Spool layout and its directory descriptors. Every shard file is created
 * and renamed relative to these descriptors, never through a path built
 * from a producer's name alone. */
#include "spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"
#include "shard_format.h"

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

/* The id in "<producer>.<16 hex>.shard", or 0 for any other name. */
static uint64_t done_name_id(const char *name)
{
    size_t len = strlen(name);
    const char *suffix = ".shard";
    uint64_t id = 0;

    if (len < 6 + 17 || strcmp(name + len - 6, suffix) != 0 || name[len - 6 - 17] != '.')
        return 0;
    for (const char *p = name + len - 6 - 16; p < name + len - 6; p++) {
        int v = (*p >= '0' && *p <= '9') ? *p - '0' : (*p >= 'a' && *p <= 'f') ? *p - 'a' + 10 : -1;
        if (v < 0)
            return 0;
        id = id << 4 | (uint64_t)v;
    }
    return id;
}

/* New shard ids come from the clock; starting above every id in done/ keeps
 * them unique even if the clock was set back since those were made. */
static int find_highest_done_id(struct daemon *d, uint64_t *ret_id)
{
    int fd = openat(d->done_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    uint64_t highest = 0;
    struct dirent *de;
    DIR *dir;

    if (fd < 0)
        return -errno;
    dir = fdopendir(fd);
    if (!dir) {
        int e = errno;
        (void)close(fd);
        return -e;
    }
    while ((de = readdir(dir)) != NULL) {
        uint64_t id = done_name_id(de->d_name);
        if (id > highest)
            highest = id;
    }
    closedir(dir);
    *ret_id = highest;
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
    /* Shards padded to the block size stay block-aligned when merged, so
     * copy_file_range can share their extents on reflink filesystems. */
    long bs = fs_block_size(d->done_fd, SHARD_ALIGN_MAX);
    d->seal_align = bs > 0 ? (size_t)bs : 0;
    r = find_highest_done_id(d, &d->last_shard_id);
    if (r < 0) {
        snprintf(why, why_len, "cannot list %s/done: %s", spool, strerror(-r));
        return r;
    }
    /* New subdirectories must survive a crash before anything is renamed
     * into them. */
    r = fsync_dir_fd(d->spool_fd);
    if (r < 0) {
        snprintf(why, why_len, "cannot sync spool %s: %s", spool, strerror(-r));
        return r;
    }
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

/* Whether the mount of device dev is ext4 with data=journal, where data
 * goes through the journal and a write-back alone puts nothing in place. */
static bool ext4_data_journal(dev_t dev)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    char *line = NULL;
    size_t cap = 0;
    bool found = false, journal = false;

    if (!f)
        return true; /* cannot tell: assume the unsafe case */
    while (!found && getline(&line, &cap, f) > 0) {
        unsigned maj, min;
        char *sep, *opts;

        /* "id parent major:minor root mount-point options ... - type source super-options" */
        if (sscanf(line, "%*u %*u %u:%u", &maj, &min) != 2 || makedev(maj, min) != dev)
            continue;
        sep = strstr(line, " - ");
        if (!sep || strncmp(sep + 3, "ext4 ", 5) != 0)
            continue;
        found = true;
        opts = strchr(sep + 8, ' '); /* after the source */
        journal = opts && strstr(opts, "data=journal") != NULL;
    }
    free(line);
    (void)fclose(f);
    return journal;
}

enum sync_method spool_batch_sync(const struct daemon *d, const char **ret_why)
{
    enum sync_method want = (enum sync_method)d->config.sync_method;
    struct stat active, spool, parent;
    struct statfs fs;
    bool one_flush_safe = false;

    if (want == SYNC_METHOD_FDATASYNC || want == SYNC_METHOD_SYNCFS) {
        *ret_why = "as configured";
        return want;
    }
    if (fstatfs(d->active_fd, &fs) == 0 && fstat(d->active_fd, &active) == 0) {
        if (fs.f_type == XFS_SUPER_MAGIC)
            one_flush_safe = true;
        else if (fs.f_type == EXT4_SUPER_MAGIC)
            one_flush_safe = !ext4_data_journal(active.st_dev);
    }
    if (one_flush_safe) {
        *ret_why = want == SYNC_METHOD_AUTO ? "auto: ext4 or XFS" : "as configured";
        return SYNC_METHOD_ONE_FLUSH;
    }
    if (want == SYNC_METHOD_ONE_FLUSH) {
        *ret_why = "one-flush configured, but the spool is on neither ext4 (without "
                   "data=journal) nor XFS";
        return SYNC_METHOD_FDATASYNC;
    }
    if (fstat(d->spool_fd, &spool) == 0 && fstatat(d->spool_fd, "..", &parent, 0) == 0 &&
        spool.st_dev != parent.st_dev) {
        *ret_why = "auto: the spool is a file system of its own";
        return SYNC_METHOD_SYNCFS;
    }
    *ret_why = "auto";
    return SYNC_METHOD_FDATASYNC;
}
