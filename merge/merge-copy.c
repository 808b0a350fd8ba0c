/* Copying: the bytes of a source into the output, and the one-source step
 * of the copy pass.
 *
 * copy_file_range(2) lets the kernel copy (or, on filesystems that can,
 * share extents) without the data passing through user space. It may copy
 * less than asked and returns 0 at the end of the input, so it runs in a
 * loop; and when the kernel, the filesystem or the pair of files cannot do
 * it (EXDEV, EINVAL, EOPNOTSUPP, ENOSYS) the rest is copied with
 * pread/write. Either way the copy writes at a given offset when asked, so
 * the two threads of the copy pass (merge-passes.c) can fill one output at
 * once.
 *
 * A source is copied from the very file the check pass read, kept open in
 * between where the open-file limit allows; a source opened again is
 * checked by identity (device, inode, size) so that a file swapped between
 * the passes cannot slip in unchecked, and with --delete so is the name of
 * a kept one. */
#include "merge-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"

/* copy_file_range takes a size_t but returns ssize_t; asking for at most
 * 1 GiB per call keeps every count far from either limit. */
#define COPY_CHUNK (1u << 30)
#define FALLBACK_BUFFER (1u << 20)

static bool copy_unsupported(int err)
{
    /* What copy_file_range(2) reports when the kernel, the filesystem or the
     * pair of files cannot do it; the data is fine, only the method is not. */
    return err == EXDEV || err == EINVAL || err == EOPNOTSUPP || err == ENOSYS;
}

/* Writes all of buf at out_off, or at the file offset when out_off < 0. */
static int write_at(int fd, const unsigned char *buf, size_t len, int64_t out_off)
{
    if (out_off < 0)
        return write_all(fd, buf, len);
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, (off_t)out_off);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        buf += n;
        len -= (size_t)n;
        out_off += n;
    }
    return 0;
}

int merge_copy_at(int in_fd, int out_fd, int64_t out_off, uint64_t len, bool force_fallback,
                  bool *ret_fell_back)
{
    uint64_t done = 0;
    bool fallback = force_fallback;
    unsigned char *buf;
    int r = 0;

    while (!fallback && done < len) {
        off64_t off_in = (off64_t)done;
        off64_t off_out = out_off + (off64_t)done;
        size_t want = len - done > COPY_CHUNK ? COPY_CHUNK : (size_t)(len - done);
        ssize_t n = copy_file_range(in_fd, &off_in, out_fd, out_off < 0 ? NULL : &off_out,
                                    want, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (copy_unsupported(errno)) {
                fallback = true; /* continue from done with read/write */
                break;
            }
            return -errno;
        }
        /* 0 means end of input, and we know the size: the file shrank. */
        if (n == 0)
            return -ENODATA;
        done += (uint64_t)n;
    }

    if (done < len) {
        buf = malloc(FALLBACK_BUFFER);
        if (!buf)
            return -ENOMEM;
        while (done < len) {
            size_t want = len - done > FALLBACK_BUFFER ? FALLBACK_BUFFER : (size_t)(len - done);
            ssize_t n = pread(in_fd, buf, want, (off_t)done);

            if (n < 0) {
                if (errno == EINTR)
                    continue;
                r = -errno;
                break;
            }
            if (n == 0) {
                r = -ENODATA;
                break;
            }
            r = write_at(out_fd, buf, (size_t)n, out_off < 0 ? -1 : out_off + (int64_t)done);
            if (r < 0)
                break;
            done += (uint64_t)n;
        }
        free(buf);
        if (r < 0)
            return r;
    }
    if (ret_fell_back)
        *ret_fell_back = fallback;
    return 0;
}

int merge_copy(int in_fd, int out_fd, uint64_t len, bool force_fallback, bool *ret_fell_back)
{
    return merge_copy_at(in_fd, out_fd, -1, len, force_fallback, ret_fell_back);
}

/* Opens a source read-only (never through a symlink, never blocking on
 * anything but a regular file) and stats it. */
static int open_source(int done_fd, const struct merge_source *s, const char *path,
                       int *ret_fd, struct stat *ret_st, struct merge_result *res)
{
    mode_t mode = 0;
    int fd, r = open_regular_at(done_fd, s->name, O_NOFOLLOW, &fd, &mode);

    if (r == -EISDIR || r == -EBADFD)
        return merge_fail(res, -ESTALE, "%s: now a %s, not the file that was checked", path,
                          file_type_name(mode));
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    if (fstat(fd, ret_st) < 0) {
        int e = errno;
        (void)close(fd); /* read-only; the fstat error is what matters */
        return merge_fail(res, -e, "%s: %s", path, strerror(e));
    }
    *ret_fd = fd;
    return 0;
}

int merge_copy_source(int done_fd, const char *done_path, struct merge_source *s, int out_fd,
                      int64_t out_off, const char *tmp_path, bool deleting, bool *fallback,
                      struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(done_path, s->name);
    _cleanup_close_ int fd = s->fd;
    struct stat st;
    bool fell_back = false;
    int r;

    s->fd = -1; /* closed here, whatever happens */
    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* A reopened file may be another one; a kept one matters only when
     * its name is to be deleted. */
    bool check_identity = fd < 0 || deleting;

    if (fd >= 0 && deleting) {
        /* The file is the one checked; the name must still be its name,
         * with nothing added, or --delete would remove what was never
         * copied. Without --delete the checked bytes are copied from the
         * checked file, whatever became of its name. */
        if (fstatat(done_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return merge_fail(res, -errno, "%s: %s", path, strerror(errno));
    } else if (fd < 0) {
        r = open_source(done_fd, s, path, &fd, &st, res);
        if (r < 0)
            return r;
    }
    if (check_identity &&
        (st.st_dev != s->dev || st.st_ino != s->ino || (uint64_t)st.st_size != s->bytes))
        return merge_fail(res, -ESTALE, "%s: replaced or changed since it was checked", path);

    /* fallback may be shared by two copying threads. */
    r = merge_copy_at(fd, out_fd, out_off, s->bytes, __atomic_load_n(fallback, __ATOMIC_RELAXED),
                      &fell_back);
    if (r == -ENODATA)
        return merge_fail(res, r,
                          "%s: ended before its %" PRIu64
                          " bytes were copied (changed during the merge?)",
                          path, s->bytes);
    if (r < 0)
        return merge_fail(res, r, "%s: copying to %s: %s", path, tmp_path, strerror(-r));
    /* Once the kernel said no, asking again for every shard is pointless. */
    if (fell_back)
        __atomic_store_n(fallback, true, __ATOMIC_RELAXED);
    return 0;
}
