/* Careful file helpers: whole writes, directory syncs, cleanup attributes.
 * Every function returns 0 (or a count) or a negative errno. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

/* Writes all len bytes at fd's current offset, retrying on EINTR and short
 * writes. Returns 0 or a negative errno. */
int write_all(int fd, const void *buf, size_t len);

/* Reads until len bytes or end of file; returns the number read or -errno. */
ssize_t read_full(int fd, void *buf, size_t len);

/* Opens name (relative to dirfd, or AT_FDCWD) for reading only if it is a
 * regular file, without ever blocking on it: the open itself is
 * non-blocking, so a FIFO or a device cannot wedge the caller, and the type
 * is checked on the open descriptor (no race with a rename). extra_flags is
 * or-ed into O_RDONLY|O_CLOEXEC|O_NOCTTY (e.g. O_NOFOLLOW). On success
 * *ret_fd is a blocking descriptor, unless extra_flags held O_NONBLOCK.
 * Returns 0, -EISDIR for a directory, -EBADFD for any other non-regular
 * file (*ret_mode, when not NULL, then tells which: file_type_name() names
 * it), or the error of openat(2). */
int open_regular_at(int dirfd, const char *name, int extra_flags, int *ret_fd, mode_t *ret_mode);

/* open_regular_at, telling in *ret_st what fstat(2) said of the file: on
 * success its size and the rest, on -EISDIR or -EBADFD its type. */
int open_regular_stat_at(int dirfd, const char *name, int extra_flags, int *ret_fd,
                         struct stat *ret_st);

/* A short name for the file type in mode: "regular file", "directory",
 * "FIFO", "socket", "character device", "block device", "symbolic link". */
const char *file_type_name(mode_t mode);

/* A directory stream over the open directory dirfd, through a fresh open
 * file description, so that dirfd keeps its offset and stays open after
 * closedir(*ret_dir). Returns 0 or a negative errno. */
int opendir_at(int dirfd, DIR **ret_dir);

/* fsync(2) on an open directory, or on the directory at path. */
int fsync_dir_fd(int dirfd);
int fsync_dir_path(const char *path);

/* Creates the directory at path with mode if it is missing; an existing
 * directory is fine. Returns 0, -ENOTDIR or another negative errno. */
int mkdir_if_missing(const char *path, mode_t mode);

/* The block size of the filesystem fd is on (statfs f_bsize) when it is a
 * power of two from 512 to max, else 0. Returns that size or a negative errno. */
long fs_block_size(int fd, size_t max);

/* Joins dir and name with one '/' into a new string; NULL when out of memory. */
char *path_join(const char *dir, const char *name);

/* Nanoseconds since the epoch (CLOCK_REALTIME) and of CLOCK_MONOTONIC. */
uint64_t now_realtime_ns(void);
uint64_t now_monotonic_ns(void);

static inline void close_fdp(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        (void)close(*fd); /* cleanup on a path that already has its result */
        errno = saved;
    }
}
static inline void freep(void *p)
{
    free(*(void **)p);
}
#define _cleanup_close_ __attribute__((cleanup(close_fdp)))
#define _cleanup_free_ __attribute__((cleanup(freep)))
