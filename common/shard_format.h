/* The on-disk shard format (docs/FORMAT.md): a header, then records, each
 * with its length, a CRC32C and a receive timestamp. A merged file is sealed
 * shards back to back, and the reader here reads both. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define SHARD_MAGIC "LOGSHRD\x01"
#define SHARD_MAGIC_SIZE 8u
#define SHARD_FORMAT_VERSION 1u

/* Header: magic[8], u16 version, u16 header_len, u32 uid, u32 gid, u32 pid,
 * u64 shard_id, u64 created_ns, u16 producer_len, producer, u32 crc32c of all
 * bytes before it. */
#define SHARD_HEADER_FIXED 42u
#define SHARD_HEADER_MAX (SHARD_HEADER_FIXED + WIRE_PRODUCER_NAME_MAX + 4u)

/* Record: u32 length, u32 crc32c, u64 timestamp_ns, payload. The CRC covers
 * the length, the timestamp and the payload. */
#define SHARD_RECORD_HEADER 16u

/* The largest record the format allows. It is far below the value that the
 * first four magic bytes would give as a length, so a reader can always
 * tell a record from the next shard's header. */
#define SHARD_RECORD_MAX (256u * 1024u * 1024u)

struct shard_header {
    uint16_t version;
    uint32_t header_len;
    uint32_t uid;
    uint32_t gid;
    uint32_t pid;
    uint64_t shard_id;
    uint64_t created_ns; /* CLOCK_REALTIME, nanoseconds since the epoch */
    size_t producer_len;
    char producer[WIRE_PRODUCER_NAME_MAX + 1]; /* NUL-terminated */
};

/* Bytes a header with a producer name of producer_len bytes takes. */
static inline size_t shard_header_size(size_t producer_len)
{
    return SHARD_HEADER_FIXED + producer_len + 4u;
}

/* Encodes h into out (at least shard_header_size(h->producer_len) bytes) and
 * returns the number of bytes written. header_len and version are filled in
 * from the producer name; the caller sets the rest. */
size_t shard_encode_header(unsigned char *out, const struct shard_header *h);

/* Decodes a header from the avail bytes at in. Returns 0 and fills *ret,
 * -EAGAIN when more bytes are needed, -EBADMSG when the bytes are not a
 * valid header (magic, version, length, name rule or CRC); *ret_why then
 * says which. */
int shard_decode_header(const unsigned char *in, size_t avail, struct shard_header *ret,
                        const char **ret_why);

/* Writes one record (16-byte header and payload) to out, which must hold
 * SHARD_RECORD_HEADER + len bytes, and returns the bytes written. */
size_t shard_encode_record(unsigned char *out, const void *payload, uint32_t len,
                           uint64_t timestamp_ns);

/* A sequential reader over a shard or merged file. */
struct shard_reader;

enum shard_item_kind {
    SHARD_ITEM_HEADER = 1, /* a shard begins; item.header is its header */
    SHARD_ITEM_RECORD = 2,
};

struct shard_item {
    enum shard_item_kind kind;
    uint64_t offset;                   /* where the item starts in the file */
    const struct shard_header *header; /* the shard the item belongs to */
    uint64_t timestamp_ns;             /* records only */
    const unsigned char *payload;      /* records only; valid until next call */
    uint32_t len;
};

/* Starts reading fd from its current offset (normally 0). The reader does not
 * own fd. Returns 0 or -ENOMEM. */
int shard_reader_new(struct shard_reader **ret, int fd);

/* Frees the reader; NULL is fine. */
void shard_reader_free(struct shard_reader *r);

/* Returns 1 with the next item, 0 at a clean end of file, or a negative errno:
 * -EBADMSG when the bytes at the current offset are corrupt (bad magic, bad
 * CRC, impossible length), -ENODATA when the file ends inside an item (a torn
 * tail), or the error of read(2). After an error, shard_reader_error tells
 * where and why; later calls repeat the error. */
int shard_reader_next(struct shard_reader *r, struct shard_item *ret);

/* For following a file that is still being written (logctl cat --follow):
 * after the reader reached the end of the file (0) or found it ending inside
 * an item (-ENODATA), lets the next shard_reader_next() read on from the
 * same point, taking whatever was appended since. Returns 0, or the reader's
 * error when it stopped on anything else (corrupt bytes, a read error), which
 * no amount of waiting repairs. */
int shard_reader_continue(struct shard_reader *r);

/* Where the last error was found (the offset of the first byte that is not
 * part of a valid item, i.e. the length of the valid prefix) and why. */
void shard_reader_error(const struct shard_reader *r, uint64_t *ret_offset,
                        const char **ret_why);

/* The number of records returned so far and the offset just past the last
 * complete item (the valid prefix so far). */
uint64_t shard_reader_records(const struct shard_reader *r);
uint64_t shard_reader_valid_end(const struct shard_reader *r);
