/* Shard header and record encoding, and the one reader that logctl cat, merge
 * checks and recovery share. The reader refuses anything it cannot prove
 * valid: a record whose length, CRC or place in the file is wrong ends the
 * valid prefix there. */
#include "shard_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"

size_t shard_encode_header(unsigned char *out, const struct shard_header *h)
{
    size_t size = shard_header_size(h->producer_len);
    unsigned char *p = out;

    memcpy(p, SHARD_MAGIC, SHARD_MAGIC_SIZE);
    wire_put_u16(p + 8, SHARD_FORMAT_VERSION);
    wire_put_u16(p + 10, (uint16_t)size);
    wire_put_u32(p + 12, h->uid);
    wire_put_u32(p + 16, h->gid);
    wire_put_u32(p + 20, h->pid);
    wire_put_u64(p + 24, h->shard_id);
    wire_put_u64(p + 32, h->created_ns);
    wire_put_u16(p + 40, (uint16_t)h->producer_len);
    memcpy(p + SHARD_HEADER_FIXED, h->producer, h->producer_len);
    wire_put_u32(p + size - 4, crc32c(p, size - 4));
    return size;
}

int shard_decode_header(const unsigned char *in, size_t avail, struct shard_header *ret,
                        const char **ret_why)
{
    struct shard_header h;
    size_t size;

    if (memcmp(in, SHARD_MAGIC, avail < SHARD_MAGIC_SIZE ? avail : SHARD_MAGIC_SIZE) != 0) {
        *ret_why = "no shard header (bad magic)";
        return -EBADMSG;
    }
    if (avail < SHARD_HEADER_FIXED)
        return -EAGAIN;
    memset(&h, 0, sizeof(h));
    h.version = wire_get_u16(in + 8);
    h.header_len = wire_get_u16(in + 10);
    h.uid = wire_get_u32(in + 12);
    h.gid = wire_get_u32(in + 16);
    h.pid = wire_get_u32(in + 20);
    h.shard_id = wire_get_u64(in + 24);
    h.created_ns = wire_get_u64(in + 32);
    h.producer_len = wire_get_u16(in + 40);
    if (h.version < SHARD_FORMAT_VERSION_MIN || h.version > SHARD_FORMAT_VERSION) {
        *ret_why = "unsupported shard format version";
        return -EBADMSG;
    }
    if (h.producer_len < 1 || h.producer_len > WIRE_PRODUCER_NAME_MAX) {
        *ret_why = "producer name length out of range in shard header";
        return -EBADMSG;
    }
    size = shard_header_size(h.producer_len);
    if (h.header_len != size) {
        *ret_why = "shard header length does not match its producer name";
        return -EBADMSG;
    }
    if (avail < size)
        return -EAGAIN;
    if (wire_get_u32(in + size - 4) != crc32c(in, size - 4)) {
        *ret_why = "shard header CRC mismatch";
        return -EBADMSG;
    }
    memcpy(h.producer, in + SHARD_HEADER_FIXED, h.producer_len);
    h.producer[h.producer_len] = '\0';
    if (wire_check_producer_name(h.producer, h.producer_len) < 0) {
        *ret_why = "producer name in shard header breaks the naming rule";
        return -EBADMSG;
    }
    *ret = h;
    return 0;
}

static uint32_t record_crc(const unsigned char *hdr, const void *payload, uint32_t len)
{
    uint32_t crc = crc32c_extend(0, hdr, 4);
    crc = crc32c_extend(crc, hdr + 8, 8);
    return crc32c_extend(crc, payload, len);
}

size_t shard_encode_record(unsigned char *out, const void *payload, uint32_t len,
                           uint64_t timestamp_ns)
{
    wire_put_u32(out, len);
    wire_put_u64(out + 8, timestamp_ns);
    memcpy(out + SHARD_RECORD_HEADER, payload, len);
    wire_put_u32(out + 4, record_crc(out, out + SHARD_RECORD_HEADER, len));
    return SHARD_RECORD_HEADER + len;
}

size_t shard_trailer_size(uint64_t shard_len, size_t align)
{
    uint64_t end = shard_len + SHARD_TRAILER_MIN;

    if (align <= 1)
        return SHARD_TRAILER_MIN;
    end = (end + align - 1) & ~(uint64_t)(align - 1);
    return (size_t)(end - shard_len);
}

static uint32_t trailer_crc(const unsigned char *head, const unsigned char *tail)
{
    return crc32c_extend(crc32c_extend(0, head, 8), tail, SHARD_TRAILER_TAIL - 4);
}

void shard_encode_trailer(unsigned char *out, const struct shard_trailer *t)
{
    unsigned char *tail = out + t->trailer_len - SHARD_TRAILER_TAIL;

    memset(out, 0, t->trailer_len);
    wire_put_u32(out, SHARD_TRAILER_MARKER);
    wire_put_u32(out + 4, t->trailer_len);
    wire_put_u64(tail, t->shard_len);
    wire_put_u64(tail + 8, t->records);
    wire_put_u64(tail + 16, t->newest_ns);
    wire_put_u32(tail + 24, t->trailer_len);
    wire_put_u32(tail + 28, trailer_crc(out, tail));
}

/* Decodes and checks the fields both ends of a trailer carry. */
static int decode_trailer(const unsigned char *head, const unsigned char *tail,
                          struct shard_trailer *ret, const char **ret_why)
{
    struct shard_trailer t;

    t.trailer_len = wire_get_u32(head + 4);
    t.shard_len = wire_get_u64(tail);
    t.records = wire_get_u64(tail + 8);
    t.newest_ns = wire_get_u64(tail + 16);
    if (wire_get_u32(head) != SHARD_TRAILER_MARKER) {
        *ret_why = "no seal trailer";
        return -EBADMSG;
    }
    if (t.trailer_len < SHARD_TRAILER_MIN || t.trailer_len >= SHARD_TRAILER_MAX) {
        *ret_why = "impossible seal trailer length";
        return -EBADMSG;
    }
    if (wire_get_u32(tail + 24) != t.trailer_len) {
        *ret_why = "the seal trailer's two length fields disagree";
        return -EBADMSG;
    }
    if (wire_get_u32(tail + 28) != trailer_crc(head, tail)) {
        *ret_why = "seal trailer CRC mismatch";
        return -EBADMSG;
    }
    *ret = t;
    return 0;
}

int shard_decode_trailer_ends(const unsigned char *head, const unsigned char *tail,
                              uint64_t file_size, struct shard_trailer *ret,
                              const char **ret_why)
{
    struct shard_trailer t;
    int r = decode_trailer(head, tail, &t, ret_why);

    if (r < 0)
        return r;
    if (t.shard_len < shard_header_size(1) || t.shard_len + t.trailer_len != file_size) {
        *ret_why = "the seal trailer's lengths do not add up to the file size";
        return -EBADMSG;
    }
    *ret = t;
    return 0;
}

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
};

int shard_reader_new(struct shard_reader **ret, int fd)
{
    struct shard_reader *r = calloc(1, sizeof(*r));

    if (!r)
        return -ENOMEM;
    r->buf = malloc(READER_MIN_BUFFER);
    if (!r->buf) {
        free(r);
        return -ENOMEM;
    }
    r->cap = READER_MIN_BUFFER;
    r->fd = fd;
    *ret = r;
    return 0;
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
        ssize_t n = read(r->fd, r->buf + r->end, r->cap - r->end);
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

static int reader_fail(struct shard_reader *r, int err, const char *why)
{
    r->error = err;
    r->error_offset = r->buf_offset + r->start;
    r->error_why = why;
    return err;
}

static bool all_zero(const unsigned char *p, size_t n)
{
    while (n > 0 && *p == 0) {
        p++;
        n--;
    }
    return n == 0;
}

static int read_trailer(struct shard_reader *r, struct shard_item *ret)
{
    const unsigned char *p;
    uint64_t offset = r->buf_offset + r->start;
    uint32_t len;
    ssize_t avail = reader_fill(r, SHARD_TRAILER_MIN);
    const char *why = NULL;

    if (avail < 0)
        return reader_fail(r, (int)avail, "read error");
    if ((size_t)avail < SHARD_TRAILER_MIN)
        return reader_fail(r, -ENODATA, "file ends inside the seal trailer");
    len = wire_get_u32(r->buf + r->start + 4);
    if (len < SHARD_TRAILER_MIN || len >= SHARD_TRAILER_MAX)
        return reader_fail(r, -EBADMSG, "impossible seal trailer length");
    avail = reader_fill(r, len);
    if (avail < 0)
        return reader_fail(r, (int)avail, "read error");
    if ((size_t)avail < len)
        return reader_fail(r, -ENODATA, "file ends inside the seal trailer");
    p = r->buf + r->start;
    if (decode_trailer(p, p + len - SHARD_TRAILER_TAIL, &r->trailer, &why) < 0)
        return reader_fail(r, -EBADMSG, why);
    if (!all_zero(p + 8, len - SHARD_TRAILER_MIN))
        return reader_fail(r, -EBADMSG, "the seal trailer's padding is not all zero");
    if (r->trailer.shard_len != offset - r->header_offset)
        return reader_fail(r, -EBADMSG, "the seal trailer gives the wrong shard length");
    if (r->trailer.records != r->shard_records)
        return reader_fail(r, -EBADMSG, "the seal trailer gives the wrong record count");
    r->sealed = true;
    ret->kind = SHARD_ITEM_TRAILER;
    ret->offset = offset;
    ret->header = &r->header;
    ret->timestamp_ns = 0;
    ret->payload = NULL;
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
        if (!r->have_header)
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
        ret->timestamp_ns = 0;
        ret->payload = NULL;
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
        return reader_fail(r, -ENODATA, "file ends inside a record header");

    {
        uint32_t len = wire_get_u32(p);
        uint32_t crc = wire_get_u32(p + 4);
        uint64_t ts = wire_get_u64(p + 8);

        if (len == 0 || len > SHARD_RECORD_MAX)
            return reader_fail(r, -EBADMSG, "impossible record length");
        avail = reader_fill(r, SHARD_RECORD_HEADER + (size_t)len);
        if (avail < 0)
            return reader_fail(r, (int)avail, "read error");
        p = r->buf + r->start;
        if ((size_t)avail < SHARD_RECORD_HEADER + (size_t)len)
            return reader_fail(r, -ENODATA, "file ends inside a record");
        if (record_crc(p, p + SHARD_RECORD_HEADER, len) != crc)
            return reader_fail(r, -EBADMSG, "record CRC mismatch");
        ret->kind = SHARD_ITEM_RECORD;
        ret->offset = r->buf_offset + r->start;
        ret->header = &r->header;
        ret->timestamp_ns = ts;
        ret->payload = p + SHARD_RECORD_HEADER;
        ret->len = len;
        ret->trailer = NULL;
        r->start += SHARD_RECORD_HEADER + (size_t)len;
        r->records++;
        r->shard_records++;
        return 1;
    }
}

int shard_reader_continue(struct shard_reader *r)
{
    if (r->error && r->error != -ENODATA)
        return r->error;
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

uint64_t shard_reader_records(const struct shard_reader *r)
{
    return r->records;
}

uint64_t shard_reader_valid_end(const struct shard_reader *r)
{
    return r->error ? r->error_offset : r->buf_offset + r->start;
}
