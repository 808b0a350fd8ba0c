/* The one reader of shards and merged files that logctl cat, merge checks
 * and recovery share (shard_format.h). It refuses anything it cannot prove
 * valid: a record whose length, CRC or place in the file is wrong ends the
 * valid prefix there. Readers that want to salvage what follows (cat,
 * verify) ask it to skip the damage: a record alone when its framing
 * provably holds, else everything up to the next shard header, so damage
 * never costs a later shard. */
#include "shard_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- reader ---- */

#define READER_MIN_BUFFER (256u * 1024u)

struct shard_reader {
    int fd;
    unsigned char *buf;
    size_t cap;
    size_t start; /* first unconsumed byte in buf */
    size_t end;   /* one past the last byte read into buf */
    bool eof;
    uint64_t buf_offset; /* file offset of buf[0] */
    uint64_t records;
    bool have_header;
    struct shard_header header;
    uint64_t header_offset; /* where the current shard begins */
    uint64_t shard_records; /* records of the current shard so far */
    bool sealed;            /* the current shard's trailer was read */
    struct shard_trailer trailer;
    int error;
    uint64_t error_offset;
    const char *error_why;
    bool error_in_shard; /* the failed item is a record or trailer of the shard */
    size_t error_size;   /* a record whose CRC failed: its bytes in the file
                            (credentials included), else 0 */
    bool skipped;        /* damage was skipped: an end without a header is no error */
    off_t fd_base;       /* fd's offset at the start (file offset 0), -1: not seekable */
    uint64_t limit;      /* the file offset read as the end of the file; UINT64_MAX: none */
    bool active;         /* shard_reader_set_active(): zeros may stand for bytes
                            not written yet, and bytes read may since have changed */
    bool error_unwritten; /* the -ENODATA is such zeros, not the end of the file */
};

int shard_reader_new(struct shard_reader **ret, int fd)
{
    struct shard_reader *r = calloc(1, sizeof(*r));
    int saved_errno;

    if (!r)
        return -ENOMEM;
    r->buf = malloc(READER_MIN_BUFFER);
    if (!r->buf) {
        free(r);
        return -ENOMEM;
    }
    r->cap = READER_MIN_BUFFER;
    r->fd = fd;
    r->limit = UINT64_MAX;
    /* Only skipping damage seeks; a pipe reads fine until then. */
    saved_errno = errno;
    r->fd_base = lseek(fd, 0, SEEK_CUR);
    errno = saved_errno;
    *ret = r;
    return 0;
}

int shard_reader_new_range(struct shard_reader **ret, int fd, uint64_t offset, uint64_t len)
{
    struct shard_reader *r;
    int rc;

    if (offset > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - offset)
        return -EINVAL;
    if (lseek(fd, (off_t)offset, SEEK_SET) < 0)
        return -errno;
    rc = shard_reader_new(&r, fd);
    if (rc < 0)
        return rc;
    /* Offsets stay those of the file, so that what is reported about the
     * range names the same bytes as a reader of the whole file would. */
    r->fd_base = 0;
    r->buf_offset = offset;
    r->limit = offset + len;
    *ret = r;
    return 0;
}

void shard_reader_set_active(struct shard_reader *r)
{
    r->active = true;
}

void shard_reader_free(struct shard_reader *r)
{
    if (!r)
        return;
    free(r->buf);
    free(r);
}

/* Makes at least want bytes available from start, or as many as the file
 * has. Returns the number available, or a negative errno. */
static ssize_t reader_fill(struct shard_reader *r, size_t want)
{
    if (r->end - r->start >= want || r->eof)
        return (ssize_t)(r->end - r->start);
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->buf_offset += r->start;
        r->end -= r->start;
        r->start = 0;
    }
    if (want > r->cap) {
        size_t cap = r->cap;
        unsigned char *nb;

        while (cap < want)
            cap *= 2;
        nb = realloc(r->buf, cap);
        if (!nb)
            return -ENOMEM;
        r->buf = nb;
        r->cap = cap;
    }
    while (r->end < want) {
        size_t room = r->cap - r->end;
        ssize_t n;

        if (r->limit != UINT64_MAX) {
            /* A range reader: the bytes after the range are not its file. */
            uint64_t left = r->limit - (r->buf_offset + r->end);

            if (left == 0) {
                r->eof = true;
                break;
            }
            if (room > left)
                room = (size_t)left;
        }
        n = read(r->fd, r->buf + r->end, room);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0) {
            r->eof = true;
            break;
        }
        r->end += (size_t)n;
    }
    return (ssize_t)(r->end - r->start);
}

/* The position of the current shard's next record: every framed record of
 * the shard counts, the ones skipped as damage too, so that a record keeps
 * the position it was written with whatever was lost before it. */
static uint64_t reader_position(const struct shard_reader *r)
{
    return shard_header_has_stream(&r->header) ? r->header.first_position + r->shard_records : 0;
}

static int reader_fail(struct shard_reader *r, int err, const char *why)
{
    r->error = err;
    r->error_offset = r->buf_offset + r->start;
    r->error_why = why;
    r->error_in_shard = false;
    r->error_size = 0;
    r->error_unwritten = false;
    return err;
}

/* A failure inside the current shard (a record or its trailer); size is the
 * record's size in the file when only its CRC failed, so its framing may
 * hold. */
static int item_fail(struct shard_reader *r, int err, const char *why, size_t size)
{
    reader_fail(r, err, why);
    r->error_in_shard = true;
    r->error_size = size;
    return err;
}

/* Fills the parts of an item that only records have, for any other item. */
static void item_not_record(struct shard_item *ret)
{
    ret->timestamp_ns = 0;
    ret->position = 0;
    ret->payload = NULL;
    ret->has_creds = false;
    memset(&ret->creds, 0, sizeof(ret->creds));
}

static bool all_zero(const unsigned char *p, size_t n)
{
    while (n > 0 && *p == 0) {
        p++;
        n--;
    }
    return n == 0;
}

/* An active shard's writer that writes zeros ahead of its records
 * overwrites them in place while we read: zeros where an item may start
 * are space not written yet, and an item that fails its checks while its
 * last byte is still zero is one caught while it was being copied in, its
 * end not there yet. Both are where the written part ends, as a torn tail
 * is; reading on once they are overwritten finds the item. */
static int unwritten(struct shard_reader *r, const char *why)
{
    item_fail(r, -ENODATA, why, 0);
    r->error_unwritten = true;
    return -ENODATA;
}

static int read_trailer(struct shard_reader *r, struct shard_item *ret)
{
    const unsigned char *p;
    uint64_t offset = r->buf_offset + r->start;
    uint32_t len;
    ssize_t avail = reader_fill(r, SHARD_TRAILER_MIN);
    const char *why = NULL;
    bool bad;

    if (avail < 0)
        return reader_fail(r, (int)avail, "read error");
    if ((size_t)avail < SHARD_TRAILER_MIN)
        return item_fail(r, -ENODATA, "file ends inside the seal trailer", 0);
    len = wire_get_u32(r->buf + r->start + 4);
    if (len < SHARD_TRAILER_MIN || len >= SHARD_TRAILER_MAX)
        return item_fail(r, -EBADMSG, "impossible seal trailer length", 0);
    avail = reader_fill(r, len);
    if (avail < 0)
        return reader_fail(r, (int)avail, "read error");
    if ((size_t)avail < len)
        return item_fail(r, -ENODATA, "file ends inside the seal trailer", 0);
    p = r->buf + r->start;
    bad = shard_decode_trailer(p, p + len - SHARD_TRAILER_TAIL, &r->trailer, &why) < 0;
    if (!bad) {
        bad = true;
        if (!all_zero(p + 8, len - SHARD_TRAILER_MIN))
            why = "the seal trailer's padding is not all zero";
        else if (r->trailer.shard_len != offset - r->header_offset)
            why = "the seal trailer gives the wrong shard length";
        else if (r->trailer.records != r->shard_records)
            why = "the seal trailer gives the wrong record count";
        else
            bad = false;
    }
    if (bad) {
        if (r->active && p[len - 1] == 0)
            return unwritten(r, "seal trailer being written (ends in zeros)");
        return item_fail(r, -EBADMSG, why, 0);
    }
    r->sealed = true;
    ret->kind = SHARD_ITEM_TRAILER;
    ret->offset = offset;
    ret->header = &r->header;
    item_not_record(ret);
    ret->len = len;
    ret->trailer = &r->trailer;
    r->start += len;
    return 1;
}

int shard_reader_next(struct shard_reader *r, struct shard_item *ret)
{
    ssize_t avail;
    const unsigned char *p;

    if (r->error)
        return r->error;

    avail = reader_fill(r, SHARD_RECORD_HEADER);
    if (avail < 0)
        return reader_fail(r, (int)avail, "read error");
    if (avail == 0) {
        if (!r->have_header && !r->skipped)
            return reader_fail(r, -ENODATA, "empty file (no shard header)");
        return 0;
    }
    p = r->buf + r->start;

    /* A shard header: at the start of the file, or where a merged file
     * continues with the next shard. */
    if ((size_t)avail >= SHARD_MAGIC_SIZE ? memcmp(p, SHARD_MAGIC, SHARD_MAGIC_SIZE) == 0
                                         : memcmp(p, SHARD_MAGIC, (size_t)avail) == 0) {
        const char *why = NULL;
        int rc;

        avail = reader_fill(r, SHARD_HEADER_MAX);
        if (avail < 0)
            return reader_fail(r, (int)avail, "read error");
        p = r->buf + r->start;
        rc = shard_decode_header(p, (size_t)avail, &r->header, &why);
        if (rc == -EAGAIN)
            return reader_fail(r, -ENODATA, "file ends inside a shard header");
        if (rc < 0)
            return reader_fail(r, rc, why);
        r->have_header = true;
        r->header_offset = r->buf_offset + r->start;
        r->shard_records = 0;
        r->sealed = false;
        ret->kind = SHARD_ITEM_HEADER;
        ret->offset = r->header_offset;
        ret->header = &r->header;
        item_not_record(ret);
        ret->len = 0;
        ret->trailer = NULL;
        r->start += r->header.header_len;
        return 1;
    }
    if (!r->have_header)
        return reader_fail(r, -EBADMSG, "no shard header (bad magic)");
    if (r->sealed)
        return reader_fail(r, -EBADMSG, "data after the shard's seal trailer");
    if (r->header.version >= 2 && (size_t)avail >= 4 &&
        wire_get_u32(p) == SHARD_TRAILER_MARKER)
        return read_trailer(r, ret);
    if ((size_t)avail < SHARD_RECORD_HEADER)
        return item_fail(r, -ENODATA, "file ends inside a record header", 0);
    if (r->active && all_zero(p, SHARD_RECORD_HEADER))
        return unwritten(r, "unwritten space (zeros) after the last record");

    {
        uint32_t crc = wire_get_u32(p + 4);
        uint64_t ts = wire_get_u64(p + 8);
        uint32_t len;
        bool has_creds;
        size_t size, body;

        if (shard_record_length(wire_get_u32(p), r->header.version, &len, &has_creds) < 0)
            return item_fail(r, -EBADMSG, "impossible record length", 0);
        size = shard_record_size(len, has_creds);
        body = size - len;
        avail = reader_fill(r, size);
        if (avail < 0)
            return reader_fail(r, (int)avail, "read error");
        p = r->buf + r->start;
        if ((size_t)avail < size)
            return item_fail(r, -ENODATA, "file ends inside a record", 0);
        if (shard_record_crc(p, p + body, len) != crc) {
            if (r->active && p[size - 1] == 0)
                return unwritten(r, "record being written (ends in zeros)");
            return item_fail(r, -EBADMSG, "record CRC mismatch", size);
        }
        ret->kind = SHARD_ITEM_RECORD;
        ret->offset = r->buf_offset + r->start;
        ret->header = &r->header;
        ret->timestamp_ns = ts;
        ret->position = reader_position(r);
        ret->payload = p + body;
        ret->len = len;
        ret->trailer = NULL;
        ret->has_creds = has_creds;
        if (has_creds) {
            ret->creds.pid = wire_get_u32(p + SHARD_RECORD_HEADER);
            ret->creds.uid = wire_get_u32(p + SHARD_RECORD_HEADER + 4);
            ret->creds.gid = wire_get_u32(p + SHARD_RECORD_HEADER + 8);
        } else {
            memset(&ret->creds, 0, sizeof(ret->creds));
        }
        r->start += size;
        r->records++;
        r->shard_records++;
        return 1;
    }
}

/* ---- skipping damage ---- */

/* Puts the reader at file offset off: inside the buffer when it is there,
 * else by seeking fd and starting an empty buffer. */
static int reader_seek(struct shard_reader *r, uint64_t off)
{
    if (off >= r->buf_offset && off - r->buf_offset <= r->end) {
        r->start = (size_t)(off - r->buf_offset);
        return 0;
    }
    if (r->fd_base < 0)
        return -ESPIPE;
    if (lseek(r->fd, r->fd_base + (off_t)off, SEEK_SET) < 0)
        return -errno;
    r->buf_offset = off;
    r->start = 0;
    r->end = 0;
    r->eof = false;
    return 0;
}

enum next_check {
    NEXT_VALID = 1,      /* a valid item, or the exact end of the file */
    NEXT_INVALID = 2,    /* bytes that are no valid item */
    NEXT_INCOMPLETE = 3, /* the start of an item that the file cuts short */
};

/* Checks, without consuming it, that the bytes at the reader's position
 * are a whole valid item of the current shard, which then holds records
 * records before it. Returns an enum next_check or a negative errno. */
static int check_next_item(struct shard_reader *r, uint64_t records)
{
    uint64_t offset = r->buf_offset + r->start;
    ssize_t avail = reader_fill(r, SHARD_RECORD_HEADER);
    const unsigned char *p;
    uint32_t len;

    if (avail <= 0)
        return avail < 0 ? (int)avail : NEXT_VALID;
    p = r->buf + r->start;
    if (memcmp(p, SHARD_MAGIC, (size_t)avail < SHARD_MAGIC_SIZE ? (size_t)avail
                                                                : SHARD_MAGIC_SIZE) == 0) {
        struct shard_header h;
        const char *why = NULL;
        int rc;

        avail = reader_fill(r, SHARD_HEADER_MAX);
        if (avail < 0)
            return (int)avail;
        rc = shard_decode_header(r->buf + r->start, (size_t)avail, &h, &why);
        return rc == 0 ? NEXT_VALID : rc == -EAGAIN ? NEXT_INCOMPLETE : NEXT_INVALID;
    }
    if (r->header.version >= 2 && (size_t)avail >= 4 && wire_get_u32(p) == SHARD_TRAILER_MARKER) {
        struct shard_trailer t;
        const char *why = NULL;

        avail = reader_fill(r, SHARD_TRAILER_MIN);
        if (avail < 0)
            return (int)avail;
        if ((size_t)avail < SHARD_TRAILER_MIN)
            return NEXT_INCOMPLETE;
        len = wire_get_u32(r->buf + r->start + 4);
        if (len < SHARD_TRAILER_MIN || len >= SHARD_TRAILER_MAX)
            return NEXT_INVALID;
        avail = reader_fill(r, len);
        if (avail < 0)
            return (int)avail;
        if ((size_t)avail < len)
            return NEXT_INCOMPLETE;
        p = r->buf + r->start;
        if (shard_decode_trailer(p, p + len - SHARD_TRAILER_TAIL, &t, &why) < 0 ||
            !all_zero(p + 8, len - SHARD_TRAILER_MIN) ||
            t.shard_len != offset - r->header_offset || t.records != records)
            return NEXT_INVALID;
        return NEXT_VALID;
    }
    if ((size_t)avail < SHARD_RECORD_HEADER)
        return NEXT_INCOMPLETE;
    {
        bool has_creds;
        size_t size;

        if (shard_record_length(wire_get_u32(p), r->header.version, &len, &has_creds) < 0)
            return NEXT_INVALID;
        size = shard_record_size(len, has_creds);
        avail = reader_fill(r, size);
        if (avail < 0)
            return (int)avail;
        if ((size_t)avail < size)
            return NEXT_INCOMPLETE;
        p = r->buf + r->start;
        return shard_record_crc(p, p + (size - len), len) == wire_get_u32(p + 4) ? NEXT_VALID
                                                                                : NEXT_INVALID;
    }
}

/* Whether a valid shard header lies wholly within the len bytes at p. */
static bool span_has_header(const unsigned char *p, size_t len)
{
    const unsigned char *end = p + len, *hit;

    while ((hit = memmem(p, (size_t)(end - p), SHARD_MAGIC, SHARD_MAGIC_SIZE)) != NULL) {
        struct shard_header h;
        const char *why = NULL;

        if (shard_decode_header(hit, (size_t)(end - hit), &h, &why) == 0)
            return true;
        p = hit + 1;
    }
    return false;
}

/* Moves the reader forward to the next valid shard header at or after its
 * position. Returns 1 with the reader there, 0 with the reader at the end
 * of the file when there is none, or a negative errno. The search reads the
 * file once, a buffer at a time, keeping the last bytes that could begin a
 * magic split between two reads. */
static int seek_header(struct shard_reader *r)
{
    for (;;) {
        ssize_t avail = reader_fill(r, SHARD_HEADER_MAX);
        const unsigned char *p, *hit;
        size_t keep;

        if (avail < 0)
            return (int)avail;
        p = r->buf + r->start;
        hit = memmem(p, (size_t)avail, SHARD_MAGIC, SHARD_MAGIC_SIZE);
        if (hit) {
            struct shard_header h;
            const char *why = NULL;

            r->start += (size_t)(hit - p);
            avail = reader_fill(r, SHARD_HEADER_MAX);
            if (avail < 0)
                return (int)avail;
            if (shard_decode_header(r->buf + r->start, (size_t)avail, &h, &why) == 0)
                return 1;
            r->start++; /* magic in damaged bytes or in a payload: not a shard */
            continue;
        }
        if (r->eof) {
            r->start = r->end;
            return 0;
        }
        keep = (size_t)avail < SHARD_MAGIC_SIZE - 1 ? (size_t)avail : SHARD_MAGIC_SIZE - 1;
        r->start = r->end - keep;
    }
}

int shard_reader_skip_damage(struct shard_reader *r, unsigned flags, struct shard_skip *ret)
{
    bool growing = flags & SHARD_SKIP_GROWING;
    uint64_t from = r->error_offset;
    struct shard_skip s;
    int rc;

    if (!r->error)
        return -EINVAL;
    if (r->error != -EBADMSG && r->error != -ENODATA)
        return r->error;
    if (growing && r->error == -ENODATA)
        return -EAGAIN; /* a write in progress, not damage */

    memset(&s, 0, sizeof(s));
    s.offset = from;
    s.why = r->error_why;
    s.in_shard = r->error_in_shard;
    if (s.in_shard)
        s.header = r->header;
    if (growing)
        r->eof = false; /* look at what was appended since */
    rc = reader_seek(r, from);
    if (rc == 0)
        rc = (int)reader_fill(r, 1);
    if (rc < 0)
        goto fail;
    if (rc == 0) {
        /* Nothing at all where an item should be: an empty file. */
        s.torn = true;
        goto done;
    }

    if (r->error == -EBADMSG && r->error_size > 0) {
        /* Only the CRC failed. The record's length is trusted only when a
         * valid item follows it, since a flipped bit in the length (or in
         * its credentials flag) is a CRC failure too. (After an -EAGAIN the
         * record is buffered anew.) */
        size_t size = r->error_size;
        uint64_t end = from + size;
        ssize_t avail = reader_fill(r, size);

        if (avail < 0) {
            rc = (int)avail;
            goto fail;
        }
        /* A length that reaches into a later shard can land on one of its
         * record boundaries; the shard header it passes gives it away. */
        if ((size_t)avail < size || span_has_header(r->buf + r->start + 1, size - 1))
            goto resync;
        rc = reader_seek(r, end);
        if (rc == 0)
            rc = check_next_item(r, r->shard_records + 1);
        if (rc < 0)
            goto fail;
        if (rc == NEXT_VALID) {
            /* The trailer counts the record: it was written whole, and
             * so does the position of every record after it. */
            s.position = reader_position(r);
            r->shard_records++;
            s.bytes = end - from;
            s.records = 1;
            rc = 1;
            goto done;
        }
        if (rc == NEXT_INCOMPLETE && growing) {
            rc = -EAGAIN;
            goto fail;
        }
    }

resync:
    /* The framing is lost. The damaged item's own length may be what is
     * wrong, so the search starts right after its first byte. */
    rc = reader_seek(r, from + 1);
    if (rc == 0)
        rc = seek_header(r);
    if (rc < 0)
        goto fail;
    s.resync = true;
    s.bytes = r->buf_offset + r->start - from;
    if (rc == 0 && r->error == -ENODATA)
        s.torn = true;
    else if (r->error == -ENODATA)
        s.why = "an item runs past the end of the file, yet a valid shard follows "
                "(a bad length)";

done:
    r->error = 0;
    r->error_why = NULL;
    r->error_in_shard = false;
    r->error_size = 0;
    r->error_unwritten = false;
    r->skipped = true;
    *ret = s;
    return rc;

fail:
    /* Best effort: the error stays, so the position matters only to a
     * later attempt, which seeks again anyway. */
    (void)reader_seek(r, from);
    return rc;
}

int shard_reader_continue(struct shard_reader *r)
{
    if (r->error && r->error != -ENODATA)
        return r->error;
    if (r->error_unwritten) {
        /* The buffered bytes from the error on were zeros that the writer
         * has overwritten since, or is overwriting: read them anew. */
        if (r->fd_base < 0)
            return -ESPIPE;
        if (lseek(r->fd, r->fd_base + (off_t)r->error_offset, SEEK_SET) < 0)
            return -errno;
        r->buf_offset = r->error_offset;
        r->start = 0;
        r->end = 0;
        r->error_unwritten = false;
    }
    /* A torn item was never consumed (reader_fail leaves start where the
     * item begins), so reading on from the buffered bytes is exact. */
    r->error = 0;
    r->error_why = NULL;
    r->eof = false;
    return 0;
}

void shard_reader_error(const struct shard_reader *r, uint64_t *ret_offset,
                        const char **ret_why)
{
    *ret_offset = r->error ? r->error_offset : r->buf_offset + r->start;
    *ret_why = r->error ? r->error_why : NULL;
}

bool shard_reader_error_unwritten(const struct shard_reader *r)
{
    return r->error == -ENODATA && r->error_unwritten;
}

uint64_t shard_reader_records(const struct shard_reader *r)
{
    return r->records;
}

uint64_t shard_reader_valid_end(const struct shard_reader *r)
{
    return r->error ? r->error_offset : r->buf_offset + r->start;
}
