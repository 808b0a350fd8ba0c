/* The on-disk shard format (docs/FORMAT.md): a header, then records, each
 * with its length, a CRC32C and a receive timestamp (and, in version 4, its
 * sender's credentials when it has them). A merged file is sealed shards
 * back to back, and the reader here reads both. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define SHARD_MAGIC "LOGSHRD\x01"
#define SHARD_MAGIC_SIZE 8u
/* The version written unless the caller asks for another (struct
 * shard_header's version and source). Readers read versions 1 to 4:
 * version 1 is version 2 without the seal trailer, version 3 is version 2
 * with the producer's stream identity and the position of the shard's
 * first record in its header, version 4 is version 3 with the input the
 * records came from (the source) in its header and, on any record, the
 * sender's kernel credentials. */
#define SHARD_FORMAT_VERSION 2u
#define SHARD_FORMAT_VERSION_MIN 1u
#define SHARD_FORMAT_VERSION_MAX 4u
#define SHARD_FORMAT_VERSION_STREAM 3u /* the first version with a stream */
#define SHARD_FORMAT_VERSION_SOURCE 4u /* the first with a source and credentials */

/* Header: magic[8], u16 version, u16 header_len, u32 uid, u32 gid, u32 pid,
 * u64 shard_id, u64 created_ns, u16 producer_len, then from version 3
 * stream_id[16] and u64 first_position, then in version 4 u16 source and
 * u16 flags (0), then producer, u32 crc32c of all bytes before it.
 * Everything a reader needs to know the header's size is in its first
 * SHARD_HEADER_FIXED bytes. */
#define SHARD_HEADER_FIXED 42u
#define SHARD_STREAM_ID_SIZE 16u
#define SHARD_HEADER_STREAM (SHARD_STREAM_ID_SIZE + 8u) /* what version 3 adds */
#define SHARD_HEADER_SOURCE 4u                          /* what version 4 adds */
#define SHARD_HEADER_MAX                                                                           \
    (SHARD_HEADER_FIXED + SHARD_HEADER_STREAM + SHARD_HEADER_SOURCE + WIRE_PRODUCER_NAME_MAX + 4u)

/* Where a shard's records came from (version 4's source field; versions 1
 * to 3 read as SHARD_SOURCE_CLIENT). It says how to read the payloads: a
 * client's are opaque bytes, the syslog inputs' are syslog messages
 * (syslog_msg.h) as received. The set is open: a later input (journald's
 * own protocol, say) takes the next number without a new format version,
 * and a reader that does not know a source reads its records as opaque
 * payloads, as a client's. A version 4 header never names the client:
 * client shards stay in version 3, so each header has one spelling. */
enum shard_source {
    SHARD_SOURCE_CLIENT = 0,          /* a liblogshard connection (logctl send too) */
    SHARD_SOURCE_SYSLOG_DATAGRAM = 1, /* the /dev/log-style datagram socket */
    SHARD_SOURCE_SYSLOG_STREAM = 2,   /* one connection of the syslog stream socket */
};

/* The name logctl shows for a source ("client", "syslog-datagram",
 * "syslog-stream"), or NULL for one this build does not know. */
const char *shard_source_name(unsigned source);

/* Whether the payloads of a shard of this source are syslog messages. */
static inline bool shard_source_is_syslog(unsigned source)
{
    return source == SHARD_SOURCE_SYSLOG_DATAGRAM || source == SHARD_SOURCE_SYSLOG_STREAM;
}

/* Positions are below 2^63, so that first_position plus the records of any
 * file (fewer than 2^63) never wraps; a header claiming more is invalid. */
#define SHARD_POSITION_LIMIT (UINT64_C(1) << 63)

/* Record: u32 length, u32 crc32c, u64 timestamp_ns, payload. The CRC covers
 * the length, the timestamp and the payload. */
#define SHARD_RECORD_HEADER 16u

/* The largest record the format allows. It is far below the value that the
 * first four magic bytes would give as a length, so a reader can always
 * tell a record from the next shard's header. */
#define SHARD_RECORD_MAX (256u * 1024u * 1024u)

/* Version 4: the length field's top bit says that the sender's credentials
 * (u32 pid, u32 uid, u32 gid, as the kernel gave them with SCM_CREDENTIALS)
 * follow the timestamp, before the payload; the CRC covers them too. A
 * length never needs bits 29 to 31 (SHARD_RECORD_MAX is bit 28), and
 * neither the magic nor the trailer marker has bit 31 set, so a record
 * with credentials is never taken for either. Bits 29 and 30 are reserved:
 * a length field with either set is impossible in every version, as one
 * with bit 31 set is before version 4. A record without credentials is
 * laid out as in every earlier version and costs nothing more. */
#define SHARD_RECORD_FLAG_CREDS 0x80000000u
#define SHARD_RECORD_LENGTH_MASK 0x1FFFFFFFu
#define SHARD_RECORD_CREDS 12u /* the credential block */

/* A record's sender, as the kernel vouches for it (not what the message
 * text claims). */
struct shard_creds {
    uint32_t pid;
    uint32_t uid;
    uint32_t gid;
};

/* Bytes a record of a len-byte payload takes in the file. */
static inline size_t shard_record_size(uint32_t len, bool has_creds)
{
    return SHARD_RECORD_HEADER + (has_creds ? SHARD_RECORD_CREDS : 0u) + (size_t)len;
}

/* Reads a record's length field (its first four bytes, as a u32) for a
 * shard of the given version. Returns 0 with the payload's length (1 to
 * SHARD_RECORD_MAX) in *ret_len and whether a credential block follows the
 * timestamp in *ret_has_creds, or -EBADMSG when no record of that version
 * can begin with it (length 0 or above the maximum, a reserved bit, or the
 * credentials flag before version 4); the out-parameters are then
 * untouched. */
int shard_record_length(uint32_t field, unsigned version, uint32_t *ret_len, bool *ret_has_creds);

/* Seal trailer (version 2): the last item of a sealed shard. It pads the
 * shard to a multiple of the filesystem block size, so that shards copied
 * back to back stay block-aligned and copy_file_range can share extents on
 * reflink filesystems, and it states the shard's size, record count and
 * newest record, so a sealed shard can be checked from its two ends:
 *   u32 marker "SEAL", u32 trailer_len, zeros,
 *   u64 shard_len, u64 records, u64 newest_ns, u32 trailer_len, u32 crc32c
 * The CRC covers the first 8 and the last 32 bytes but its own 4. The
 * marker, read as a record length, is above SHARD_RECORD_MAX. */
#define SHARD_TRAILER_MARKER 0x4C414553u /* the bytes "SEAL" */
#define SHARD_TRAILER_MIN 40u
#define SHARD_TRAILER_TAIL 32u /* the fixed fields at the end */
#define SHARD_ALIGN_MAX 65536u
#define SHARD_TRAILER_MAX (SHARD_TRAILER_MIN + SHARD_ALIGN_MAX)

struct shard_trailer {
    uint32_t trailer_len; /* the whole trailer, zeros included */
    uint64_t shard_len;   /* bytes of the shard before the trailer */
    uint64_t records;     /* records in the shard */
    uint64_t newest_ns;   /* no record was received later than this (the
                             header's created_ns when there is none) */
};

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
    /* The producer's stream (version 3): an identity its library chose at
     * random when it connected, all zero for none, and the position of the
     * shard's first record in that stream; record i of the shard (every
     * framed record counts) has position first_position + i. Versions 1
     * and 2, and version 3 without a stream, read as no stream and
     * first_position 0. */
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t first_position;
    /* The input the shard's records came from (enum shard_source; version
     * 4, whose header carries it, never says SHARD_SOURCE_CLIENT). Versions
     * 1 to 3 read as SHARD_SOURCE_CLIENT. Writing a header with any other
     * source writes version 4 (shard_header_write_version). */
    uint16_t source;
};

/* Bytes a version 1 or 2 header (what is written by default) with a
 * producer name of producer_len bytes takes. */
static inline size_t shard_header_size(size_t producer_len)
{
    return SHARD_HEADER_FIXED + producer_len + 4u;
}

/* Bytes a header of the given version takes. */
static inline size_t shard_header_size_v(unsigned version, size_t producer_len)
{
    return shard_header_size(producer_len) +
           (version >= SHARD_FORMAT_VERSION_STREAM ? SHARD_HEADER_STREAM : 0u) +
           (version >= SHARD_FORMAT_VERSION_SOURCE ? SHARD_HEADER_SOURCE : 0u);
}

/* The version shard_encode_header writes for h: version 4 when h->source
 * is not SHARD_SOURCE_CLIENT (whatever h->version says), else version 3
 * when h->version asks for it, else SHARD_FORMAT_VERSION (version 2),
 * whatever else h->version holds (0 in a zeroed struct, 1, 2 or 4 from a
 * decoded header or a caller). So a client's shard is written exactly as
 * before version 4 existed, and a decoded header encodes back to its own
 * bytes (but version 1's, which is written as version 2). */
static inline unsigned shard_header_write_version(const struct shard_header *h)
{
    if (h->source != SHARD_SOURCE_CLIENT)
        return SHARD_FORMAT_VERSION_SOURCE;
    return h->version == SHARD_FORMAT_VERSION_STREAM ? SHARD_FORMAT_VERSION_STREAM
                                                     : SHARD_FORMAT_VERSION;
}

/* Whether the shard's records have positions: a version 3 or 4 header
 * whose stream_id is not all zero. */
bool shard_header_has_stream(const struct shard_header *h);

/* Encodes h into out (at least shard_header_size_v(
 * shard_header_write_version(h), h->producer_len) bytes) and returns the
 * number of bytes written. The version written is
 * shard_header_write_version(h); header_len is filled in from it and the
 * producer name; the caller sets the rest (stream_id and first_position
 * are written in versions 3 and 4 only, and must then be below
 * SHARD_POSITION_LIMIT, and 0 without a stream, for the header to read
 * back; source is written in version 4 only, with flags 0). */
size_t shard_encode_header(unsigned char *out, const struct shard_header *h);

/* Decodes a header from the avail bytes at in. Returns 0 and fills *ret,
 * -EAGAIN when more bytes are needed, -EBADMSG when the bytes are not a
 * valid header (magic, version, length, CRC, name rule, in versions 3
 * and 4 a first position out of range or without a stream, in version 4
 * flags other than 0 or the client source); *ret_why then says which. */
int shard_decode_header(const unsigned char *in, size_t avail, struct shard_header *ret,
                        const char **ret_why);

/* The CRC32C a record's header must carry: over its length and timestamp
 * fields (hdr, the record's first SHARD_RECORD_HEADER bytes), its
 * credential block when the length field has SHARD_RECORD_FLAG_CREDS (the
 * SHARD_RECORD_CREDS bytes right after hdr, which must then be there), and
 * its payload: every byte of the record but the CRC, in file order. */
uint32_t shard_record_crc(const unsigned char *hdr, const void *payload, uint32_t len);

/* Writes one record (16-byte header and payload) to out, which must hold
 * SHARD_RECORD_HEADER + len bytes, and returns the bytes written. Valid in
 * every version. */
size_t shard_encode_record(unsigned char *out, const void *payload, uint32_t len,
                           uint64_t timestamp_ns);

/* Writes one record with its sender's credentials (16-byte header, the
 * credential block, payload) to out, which must hold
 * shard_record_size(len, true) bytes, and returns the bytes written. Only
 * a version 4 shard may hold it: before version 4 its length field is
 * impossible. len is 1 to SHARD_RECORD_MAX, as for shard_encode_record. */
size_t shard_encode_record_creds(unsigned char *out, const void *payload, uint32_t len,
                                 uint64_t timestamp_ns, const struct shard_creds *creds);

/* As shard_encode_record() and shard_encode_record_creds(), but the CRC
 * field is left 0, for shard_records_sum() to fill in later, with others:
 * the record must not be read or written out before. */
size_t shard_encode_record_unsummed(unsigned char *out, const void *payload, uint32_t len,
                                    uint64_t timestamp_ns);
size_t shard_encode_record_creds_unsummed(unsigned char *out, const void *payload, uint32_t len,
                                          uint64_t timestamp_ns, const struct shard_creds *creds);

/* Fills the CRC field of the n whole records encoded at rec[0..n) with
 * their shard_record_crc(), three at a time (crc32c_extend3()). A record's
 * length field must be one shard_encode_record*() wrote: it says how long
 * the record is. */
void shard_records_sum(unsigned char *const rec[], size_t n);

/* The size of the trailer for a shard of shard_len bytes so that the sealed
 * shard ends on a multiple of align (a power of two up to SHARD_ALIGN_MAX;
 * 0 or 1 for no alignment): SHARD_TRAILER_MIN to SHARD_TRAILER_MAX - 1. */
size_t shard_trailer_size(uint64_t shard_len, size_t align);

/* Encodes t into out, which must hold t->trailer_len bytes (>= SHARD_TRAILER_MIN). */
void shard_encode_trailer(unsigned char *out, const struct shard_trailer *t);

/* Decodes and checks the fields both ends of a trailer carry: head, its
 * first 8 bytes, and tail, its last SHARD_TRAILER_TAIL (marker, lengths,
 * CRC). Returns 0 and fills *ret, or -EBADMSG with *ret_why. */
int shard_decode_trailer(const unsigned char *head, const unsigned char *tail,
                         struct shard_trailer *ret, const char **ret_why);

/* Checks a trailer from the two places a reader that starts at the end of a
 * file finds it: head, its first 8 bytes, and tail, its last
 * SHARD_TRAILER_TAIL bytes (the zeros between are not looked at). For a
 * file of file_size bytes holding one sealed shard. Returns 0 and fills
 * *ret, or -EBADMSG with *ret_why. */
int shard_decode_trailer_ends(const unsigned char *head, const unsigned char *tail,
                              uint64_t file_size, struct shard_trailer *ret,
                              const char **ret_why);

/* Finds the sealed shard of fd that ends at offset end (the file's size,
 * or where the shard after it starts in a merged file) from its seal
 * trailer alone: the trailer's last bytes give its length and the shard's,
 * its first bytes and the header there must agree. Nothing between is read,
 * so a damaged record is not seen here; reading the shard finds it.
 * Returns 0 with where the shard starts in *ret_start, its header in
 * *ret_header and the trailer in *ret_trailer (may be NULL), -EBADMSG when
 * the bytes before end are not the end of a sealed shard (a version 1
 * shard, an active one, damage), or the error of pread(2). */
int shard_locate_before(int fd, uint64_t end, uint64_t *ret_start, struct shard_header *ret_header,
                        struct shard_trailer *ret_trailer);

/* A sequential reader over a shard or merged file (shard_reader.c). */
struct shard_reader;

enum shard_item_kind {
    SHARD_ITEM_HEADER = 1, /* a shard begins; item.header is its header */
    SHARD_ITEM_RECORD = 2,
    SHARD_ITEM_TRAILER = 3, /* the shard's seal trailer; item.len is its size */
};

struct shard_item {
    enum shard_item_kind kind;
    uint64_t offset;                   /* where the item starts in the file */
    const struct shard_header *header; /* the shard the item belongs to */
    uint64_t timestamp_ns;             /* records only */
    uint64_t position; /* records of a shard with a stream only (else 0):
                          header->first_position + the record's index */
    const unsigned char *payload;      /* records only; valid until next call */
    uint32_t len;  /* the payload's bytes (a record takes
                      shard_record_size(len, has_creds) in the file) */
    const struct shard_trailer *trailer; /* trailers only */
    /* Records of a version 4 shard that carry their sender's kernel
     * credentials; false (and creds all zero) for every other item. */
    bool has_creds;
    struct shard_creds creds;
};

/* Starts reading fd from its current offset (normally 0). The reader does not
 * own fd. Returns 0 or -ENOMEM. */
int shard_reader_new(struct shard_reader **ret, int fd);

/* Starts reading the len bytes of fd from offset as if they were the whole
 * file: one shard of a merged file, found by its seal trailer. fd must be
 * seekable; the reader seeks it to offset and never reads past offset +
 * len (skipping damage too stops there). Item and error offsets are the
 * file's, not the range's. The reader does not own fd. Returns 0, -EINVAL
 * when the range does not fit in an off_t, -ENOMEM, or the error of
 * lseek(2). */
int shard_reader_new_range(struct shard_reader **ret, int fd, uint64_t offset, uint64_t len);

/* Reads fd as an active shard, one its writer may still be writing: the
 * daemon writes zeros ahead of its records (so that their syncs need not
 * change the file's size) and overwrites them in place. Zeros where an item
 * may start then read as the end of what is written, and an item that
 * fails its checks while its last byte is zero as one caught while being
 * copied in: both are -ENODATA, like a torn tail, and
 * shard_reader_continue() reads them anew from the file. Never for sealed
 * shards or merged files, where such bytes are damage. */
void shard_reader_set_active(struct shard_reader *r);

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

/* What shard_reader_skip_damage() stepped over. */
struct shard_skip {
    uint64_t offset;  /* where the damage begins: the end of the last valid item */
    uint64_t bytes;   /* how many bytes from there were skipped (0 only for an
                         empty file) */
    uint64_t records; /* 1 when exactly one record with intact framing was
                         skipped, 0 when the reader resynchronised */
    uint64_t position; /* that record's position when records is 1 and its
                          shard has a stream, else 0 */
    const char *why;  /* what is wrong at offset (a static string) */
    bool resync;      /* the reader scanned for the next shard header */
    bool torn;        /* the file ends inside an item and nothing valid follows
                         it: a torn tail rather than damaged bytes */
    bool in_shard;    /* the damage begins inside the shard of header (after
                         its valid header, before its trailer) */
    struct shard_header header; /* that shard, when in_shard */
};

/* For shard_reader_skip_damage(): the file may still grow (an active shard
 * being followed), so an item that the end of the file cuts short is not
 * yet damage. */
#define SHARD_SKIP_GROWING 1u

/* Salvage: after shard_reader_next() returned -EBADMSG or -ENODATA, moves
 * the reader past the damage so that the next shard_reader_next() returns
 * the next valid item, and says in *ret what was skipped.
 *
 * A record whose length is in range but whose CRC does not match is skipped
 * alone when the bytes right after it are a valid item (a record with a
 * matching CRC, the shard's seal trailer, whose length and record count
 * must then add up with the skipped record counted, a shard header) or the
 * exact end of the file: its framing is intact. Any other damage (a bad
 * length, header or trailer, or a length that runs past the end of the
 * file) is resynchronised at the next valid shard header, searched from the
 * byte after the damaged item's start, since a bad length may point
 * anywhere; without one, the damage runs to the end of the file.
 *
 * Returns 1 when reading goes on at ret->offset + ret->bytes, 0 when the
 * damage runs to the end of the file (shard_reader_next() then returns 0),
 * -EAGAIN with SHARD_SKIP_GROWING when deciding needs bytes not yet written
 * (always so for -ENODATA: the reader stays at the damage; call again once
 * the file grew), -EINVAL when the reader is not stopped at damage, or the
 * error that stopped it (a read error) or of reading or seeking fd, which
 * must be seekable. On failure the reader keeps its error and *ret is
 * untouched. Recovery does not use this: it keeps the valid prefix. */
int shard_reader_skip_damage(struct shard_reader *r, unsigned flags, struct shard_skip *ret);

/* Where the last error was found (the offset of the first byte that is not
 * part of a valid item, i.e. the length of the valid prefix) and why. */
void shard_reader_error(const struct shard_reader *r, uint64_t *ret_offset,
                        const char **ret_why);

/* Whether the last error is zeros where the next item would be: space
 * written ahead, or an item not yet written whole, rather than bytes that
 * are wrong. */
bool shard_reader_error_unwritten(const struct shard_reader *r);

/* The number of records returned so far and the offset just past the last
 * complete item (the valid prefix so far; after a skip, where reading goes
 * on). */
uint64_t shard_reader_records(const struct shard_reader *r);
uint64_t shard_reader_valid_end(const struct shard_reader *r);
