/* The shard format's codec: headers, records and seal trailers encoded and
 * checked, and a sealed shard found from its trailer (shard_locate_before).
 * The sequential reader over whole files is shard_reader.c. */
#include "shard_format.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"

const char *shard_source_name(unsigned source)
{
    switch (source) {
    case SHARD_SOURCE_CLIENT:
        return "client";
    case SHARD_SOURCE_SYSLOG_DATAGRAM:
        return "syslog-datagram";
    case SHARD_SOURCE_SYSLOG_STREAM:
        return "syslog-stream";
    default:
        return NULL;
    }
}

bool shard_header_has_stream(const struct shard_header *h)
{
    static const uint8_t none[SHARD_STREAM_ID_SIZE];

    return h->version >= SHARD_FORMAT_VERSION_STREAM &&
           memcmp(h->stream_id, none, sizeof(none)) != 0;
}

size_t shard_encode_header(unsigned char *out, const struct shard_header *h)
{
    unsigned version = shard_header_write_version(h);
    size_t size = shard_header_size_v(version, h->producer_len);
    size_t name_at = SHARD_HEADER_FIXED;
    unsigned char *p = out;

    memcpy(p, SHARD_MAGIC, SHARD_MAGIC_SIZE);
    wire_put_u16(p + 8, (uint16_t)version);
    wire_put_u16(p + 10, (uint16_t)size);
    wire_put_u32(p + 12, h->uid);
    wire_put_u32(p + 16, h->gid);
    wire_put_u32(p + 20, h->pid);
    wire_put_u64(p + 24, h->shard_id);
    wire_put_u64(p + 32, h->created_ns);
    wire_put_u16(p + 40, (uint16_t)h->producer_len);
    if (version >= SHARD_FORMAT_VERSION_STREAM) {
        memcpy(p + SHARD_HEADER_FIXED, h->stream_id, SHARD_STREAM_ID_SIZE);
        wire_put_u64(p + SHARD_HEADER_FIXED + SHARD_STREAM_ID_SIZE, h->first_position);
        name_at += SHARD_HEADER_STREAM;
    }
    if (version >= SHARD_FORMAT_VERSION_SOURCE) {
        wire_put_u16(p + name_at, h->source);
        wire_put_u16(p + name_at + 2, 0); /* flags: none defined */
        name_at += SHARD_HEADER_SOURCE;
    }
    memcpy(p + name_at, h->producer, h->producer_len);
    wire_put_u32(p + size - 4, crc32c(p, size - 4));
    return size;
}

int shard_decode_header(const unsigned char *in, size_t avail, struct shard_header *ret,
                        const char **ret_why)
{
    struct shard_header h;
    size_t size, name_at = SHARD_HEADER_FIXED;
    uint16_t flags = 0;

    if (memcmp(in, SHARD_MAGIC, avail < SHARD_MAGIC_SIZE ? avail : SHARD_MAGIC_SIZE) != 0) {
        *ret_why = "no shard header (bad magic)";
        return -EBADMSG;
    }
    /* The fixed part holds the version and the name's length, which give
     * the header's size in every version. */
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
    if (h.version < SHARD_FORMAT_VERSION_MIN || h.version > SHARD_FORMAT_VERSION_MAX) {
        *ret_why = "unsupported shard format version";
        return -EBADMSG;
    }
    if (h.producer_len < 1 || h.producer_len > WIRE_PRODUCER_NAME_MAX) {
        *ret_why = "producer name length out of range in shard header";
        return -EBADMSG;
    }
    size = shard_header_size_v(h.version, h.producer_len);
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
    if (h.version >= SHARD_FORMAT_VERSION_STREAM) {
        memcpy(h.stream_id, in + SHARD_HEADER_FIXED, SHARD_STREAM_ID_SIZE);
        h.first_position = wire_get_u64(in + SHARD_HEADER_FIXED + SHARD_STREAM_ID_SIZE);
        name_at += SHARD_HEADER_STREAM;
    }
    if (h.version >= SHARD_FORMAT_VERSION_SOURCE) {
        h.source = wire_get_u16(in + name_at);
        flags = wire_get_u16(in + name_at + 2);
        name_at += SHARD_HEADER_SOURCE;
    }
    memcpy(h.producer, in + name_at, h.producer_len);
    h.producer[h.producer_len] = '\0';
    if (wire_check_producer_name(h.producer, h.producer_len) < 0) {
        *ret_why = "producer name in shard header breaks the naming rule";
        return -EBADMSG;
    }
    if (h.first_position >= SHARD_POSITION_LIMIT) {
        *ret_why = "first position out of range in shard header";
        return -EBADMSG;
    }
    if (h.first_position != 0 && !shard_header_has_stream(&h)) {
        *ret_why = "first position without a stream in shard header";
        return -EBADMSG;
    }
    /* No flag has a meaning yet; one that did would change how the shard
     * reads, so a reader that does not know it must not guess. */
    if (flags != 0) {
        *ret_why = "unknown flags in shard header";
        return -EBADMSG;
    }
    /* Client shards are written in version 3; a version 4 header for one
     * would be a second spelling of the same header. */
    if (h.version >= SHARD_FORMAT_VERSION_SOURCE && h.source == SHARD_SOURCE_CLIENT) {
        *ret_why = "client source in a version 4 shard header";
        return -EBADMSG;
    }
    *ret = h;
    return 0;
}

int shard_record_length(uint32_t field, unsigned version, uint32_t *ret_len, bool *ret_has_creds)
{
    uint32_t len = field & SHARD_RECORD_LENGTH_MASK;
    uint32_t flags = field & ~SHARD_RECORD_LENGTH_MASK;

    /* Before version 4 every high bit makes the length impossible, as it
     * always did (the value is above SHARD_RECORD_MAX). */
    if (flags != 0 && (version < SHARD_FORMAT_VERSION_SOURCE || flags != SHARD_RECORD_FLAG_CREDS))
        return -EBADMSG;
    if (len == 0 || len > SHARD_RECORD_MAX)
        return -EBADMSG;
    *ret_len = len;
    *ret_has_creds = flags != 0;
    return 0;
}

uint32_t shard_record_crc(const unsigned char *hdr, const void *payload, uint32_t len)
{
    /* The credentials sit right after the timestamp, so the bytes after
     * the CRC field up to the payload are one run either way. */
    size_t run = 8u + ((wire_get_u32(hdr) & SHARD_RECORD_FLAG_CREDS) ? SHARD_RECORD_CREDS : 0u);
    uint32_t crc = crc32c_extend(0, hdr, 4);

    crc = crc32c_extend(crc, hdr + 8, run);
    return crc32c_extend(crc, payload, len);
}

size_t shard_encode_record_unsummed(unsigned char *out, const void *payload, uint32_t len,
                                    uint64_t timestamp_ns)
{
    wire_put_u32(out, len);
    wire_put_u32(out + 4, 0);
    wire_put_u64(out + 8, timestamp_ns);
    memcpy(out + SHARD_RECORD_HEADER, payload, len);
    return SHARD_RECORD_HEADER + len;
}

size_t shard_encode_record(unsigned char *out, const void *payload, uint32_t len,
                           uint64_t timestamp_ns)
{
    size_t size = shard_encode_record_unsummed(out, payload, len, timestamp_ns);

    wire_put_u32(out + 4, shard_record_crc(out, out + SHARD_RECORD_HEADER, len));
    return size;
}

size_t shard_encode_record_creds_unsummed(unsigned char *out, const void *payload, uint32_t len,
                                          uint64_t timestamp_ns, const struct shard_creds *creds)
{
    wire_put_u32(out, len | SHARD_RECORD_FLAG_CREDS);
    wire_put_u32(out + 4, 0);
    wire_put_u64(out + 8, timestamp_ns);
    wire_put_u32(out + 16, creds->pid);
    wire_put_u32(out + 20, creds->uid);
    wire_put_u32(out + 24, creds->gid);
    memcpy(out + SHARD_RECORD_HEADER + SHARD_RECORD_CREDS, payload, len);
    return shard_record_size(len, true);
}

size_t shard_encode_record_creds(unsigned char *out, const void *payload, uint32_t len,
                                 uint64_t timestamp_ns, const struct shard_creds *creds)
{
    size_t size = shard_encode_record_creds_unsummed(out, payload, len, timestamp_ns, creds);

    wire_put_u32(out + 4, shard_record_crc(out, out + SHARD_RECORD_HEADER + SHARD_RECORD_CREDS,
                                           len));
    return size;
}

/* Bytes of an encoded record the CRC covers after its length field: the
 * timestamp, the credentials if any, and the payload, which follow one
 * another. */
static size_t summed_run(const unsigned char *rec)
{
    uint32_t field = wire_get_u32(rec);

    return shard_record_size(field & SHARD_RECORD_LENGTH_MASK,
                             (field & SHARD_RECORD_FLAG_CREDS) != 0) -
           8u;
}

void shard_records_sum(unsigned char *const rec[], size_t n)
{
    size_t k = 0;

    for (; k + 3 <= n; k += 3) {
        static const size_t field_len[3] = { 4, 4, 4 };
        uint32_t crc[3] = { 0, 0, 0 };
        const void *field[3] = { rec[k], rec[k + 1], rec[k + 2] };
        const void *run[3];
        size_t run_len[3];

        for (int j = 0; j < 3; j++) {
            run[j] = rec[k + j] + 8;
            run_len[j] = summed_run(rec[k + j]);
        }
        crc32c_extend3(crc, field, field_len);
        crc32c_extend3(crc, run, run_len);
        for (int j = 0; j < 3; j++)
            wire_put_u32(rec[k + j] + 4, crc[j]);
    }
    for (; k < n; k++)
        wire_put_u32(rec[k] + 4, crc32c_extend(crc32c_extend(0, rec[k], 4), rec[k] + 8,
                                               summed_run(rec[k])));
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

int shard_decode_trailer(const unsigned char *head, const unsigned char *tail,
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
    int r = shard_decode_trailer(head, tail, &t, ret_why);

    if (r < 0)
        return r;
    if (t.shard_len < shard_header_size(1) || t.shard_len + t.trailer_len != file_size) {
        *ret_why = "the seal trailer's lengths do not add up to the file size";
        return -EBADMSG;
    }
    *ret = t;
    return 0;
}

/* Reads exactly len bytes at off. Returns 0, -EBADMSG when the file ends
 * first, or the error of pread(2). */
static int pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, (unsigned char *)buf + got, len - got, (off_t)(off + got));

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EBADMSG;
        got += (size_t)n;
    }
    return 0;
}

/* How much of a shard's end shard_locate_before takes in one read. The
 * trailer pads to the file system's block, so on one of 4 KiB blocks its
 * first bytes are in that read too, and so is the header of a shard that
 * small: one read instead of three for most shards, which is what a time
 * or producer filter over a spool of many small shards pays per shard. */
#define LOCATE_WINDOW 4096u

int shard_locate_before(int fd, uint64_t end, uint64_t *ret_start, struct shard_header *ret_header,
                        struct shard_trailer *ret_trailer)
{
    unsigned char window[LOCATE_WINDOW], head_buf[8], hbuf[SHARD_HEADER_MAX];
    const unsigned char *tail, *head, *hp;
    struct shard_trailer t;
    struct shard_header h;
    const char *why = NULL;
    uint64_t start, shard_len, window_start;
    uint32_t trailer_len;
    size_t hlen, window_len;
    int r;

    if (end > (uint64_t)INT64_MAX || end < SHARD_TRAILER_MIN + shard_header_size(1))
        return -EBADMSG;
    window_len = end < LOCATE_WINDOW ? (size_t)end : LOCATE_WINDOW;
    window_start = end - window_len;
    r = pread_all(fd, window, window_len, window_start);
    if (r < 0)
        return r;
    tail = window + window_len - SHARD_TRAILER_TAIL;
    /* The tail alone says where the trailer and the shard start; both ends
     * are then checked together, as for a file of one shard. */
    shard_len = wire_get_u64(tail);
    trailer_len = wire_get_u32(tail + 24);
    if (trailer_len < SHARD_TRAILER_MIN || trailer_len >= SHARD_TRAILER_MAX ||
        shard_len > end - trailer_len)
        return -EBADMSG;
    start = end - trailer_len - shard_len;
    if (start + shard_len >= window_start) {
        head = window + (start + shard_len - window_start);
    } else {
        r = pread_all(fd, head_buf, sizeof(head_buf), start + shard_len);
        if (r < 0)
            return r;
        head = head_buf;
    }
    r = shard_decode_trailer_ends(head, tail, end - start, &t, &why);
    if (r < 0)
        return r;
    hlen = shard_len < sizeof(hbuf) ? (size_t)shard_len : sizeof(hbuf);
    if (start >= window_start) {
        hp = window + (start - window_start);
    } else {
        r = pread_all(fd, hbuf, hlen, start);
        if (r < 0)
            return r;
        hp = hbuf;
    }
    r = shard_decode_header(hp, hlen, &h, &why);
    if (r < 0)
        return -EBADMSG;
    /* A version 1 shard has no trailer: a marker there is damage. */
    if (h.version < 2 || h.header_len > shard_len)
        return -EBADMSG;
    *ret_start = start;
    *ret_header = h;
    if (ret_trailer)
        *ret_trailer = t;
    return 0;
}
