/* <spool>/ship/progress: see ship_progress.h. */
#include "ship_progress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"

void ship_stream_key(const struct shard_header *h, uint8_t ret_id[SHARD_STREAM_ID_SIZE])
{
    if (shard_header_has_stream(h)) {
        memcpy(ret_id, h->stream_id, SHARD_STREAM_ID_SIZE);
        return;
    }
    memset(ret_id, SHIP_SHARD_KEY_PREFIX, 8);
    for (unsigned i = 0; i < 8; i++)
        ret_id[8 + i] = (uint8_t)(h->shard_id >> (56 - 8 * i));
}

uint64_t ship_first_position(const struct shard_header *h)
{
    return shard_header_has_stream(h) ? h->first_position : 0;
}

int ship_progress_load(int spool_fd, struct positions_entry **ret_v, size_t *ret_n,
                       const char **ret_why)
{
    _cleanup_close_ int dir_fd = -1;
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    struct stat st;
    ssize_t got;
    size_t line;
    int r;

    dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    r = open_regular_at(dir_fd, SHIP_PROGRESS_FILE, O_NOFOLLOW, &fd, NULL);
    if (r == -EISDIR || r == -EBADFD || r == -ELOOP) {
        if (ret_why)
            *ret_why = "not a regular file";
        return -EBADMSG;
    }
    if (r < 0)
        return r;
    if (fstat(fd, &st) < 0)
        return -errno;
    if ((uint64_t)st.st_size > POSITIONS_FILE_MAX) {
        if (ret_why)
            *ret_why = "larger than a positions file may be";
        return -EBADMSG;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return -ENOMEM;
    got = read_full(fd, buf, (size_t)st.st_size + 1);
    if (got < 0)
        return (int)got;
    if ((uint64_t)got != (uint64_t)st.st_size) {
        if (ret_why)
            *ret_why = "changed size while read";
        return -EBADMSG;
    }
    return positions_parse(buf, (size_t)got, ret_v, ret_n, &line, ret_why);
}

static int entry_cmp(const void *a, const void *b)
{
    const struct positions_entry *x = a, *y = b;

    return memcmp(x->stream_id, y->stream_id, SHARD_STREAM_ID_SIZE);
}

int ship_progress_store(int spool_fd, struct positions_entry *v, size_t n)
{
    _cleanup_close_ int dir_fd = -1;
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *text = NULL;
    size_t len;
    int r;

    if (n)
        qsort(v, n, sizeof(*v), entry_cmp);
    r = positions_format(v, n, &text, &len);
    if (r < 0)
        return r;
    if (mkdirat(spool_fd, SHIP_DIR, 0750) == 0) {
        if (fsync(spool_fd) < 0)
            return -errno;
    } else if (errno != EEXIST) {
        return -errno;
    }
    dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    /* A temp left by a shipper killed while writing is ours to replace:
     * only the holder of ship/lock writes here. */
    (void)unlinkat(dir_fd, SHIP_PROGRESS_TMP, 0);
    fd = openat(dir_fd, SHIP_PROGRESS_TMP, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                0640);
    if (fd < 0)
        return -errno;
    r = write_all(fd, text, len);
    if (r == 0 && fdatasync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dir_fd, SHIP_PROGRESS_TMP, dir_fd, SHIP_PROGRESS_FILE) < 0)
        r = -errno;
    if (r < 0) {
        (void)unlinkat(dir_fd, SHIP_PROGRESS_TMP, 0);
        return r;
    }
    return fsync_dir_fd(dir_fd);
}

uint64_t ship_progress_next(const struct positions_entry *v, size_t n,
                            const uint8_t id[SHARD_STREAM_ID_SIZE])
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(v[mid].stream_id, id, SHARD_STREAM_ID_SIZE);

        if (c == 0)
            return v[mid].next_position;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

bool ship_progress_covers(const struct positions_entry *v, size_t n, const struct shard_header *h,
                          uint64_t records)
{
    uint8_t id[SHARD_STREAM_ID_SIZE];

    ship_stream_key(h, id);
    return ship_progress_next(v, n, id) >= ship_first_position(h) + records;
}
