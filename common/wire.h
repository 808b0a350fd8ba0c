/* The producer protocol: length-prefixed frames on a Unix stream socket.
 * docs/PROTOCOL.md is the reference; this module only encodes and decodes,
 * it never touches a socket. All integers are little-endian. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Protocol versions (docs/PROTOCOL.md, "Versioning"). Version 2 makes a
 * connection a stream the library names, with a position for every record,
 * so that a connection that drops can be resumed without loss or
 * duplicates. A daemon speaks both; WIRE_PROTOCOL_VERSION is the newest. */
#define WIRE_PROTOCOL_V1 1u
#define WIRE_PROTOCOL_V2 2u
#define WIRE_PROTOCOL_VERSION WIRE_PROTOCOL_V2

/* Every frame starts with this header: u32 payload length, u8 type,
 * three reserved bytes that must be zero. */
#define WIRE_HEADER_SIZE 8u

/* Hard ceilings of the protocol; the configured limits sit below them. The
 * largest record is what a shard can hold (SHARD_RECORD_MAX); the largest
 * frame payload carries one such record in an APPEND frame, so a daemon
 * configured for 256 MiB records can take them. */
#define WIRE_MAX_RECORD_BYTES (256u * 1024u * 1024u)
#define WIRE_MAX_FRAME_BYTES (WIRE_MAX_RECORD_BYTES + WIRE_APPEND_OVERHEAD)
/* The largest frame payload on the wire: in version 2 an APPEND carries its
 * first record's position before what max_frame_bytes counts. */
#define WIRE_FRAME_CEILING (WIRE_MAX_FRAME_BYTES + WIRE_APPEND_POSITION)

/* Stream identities are 16 bytes (as in a shard header); positions stay
 * below 2^63 (as SHARD_POSITION_LIMIT). */
#define WIRE_STREAM_ID_SIZE 16u
#define WIRE_POSITION_LIMIT (UINT64_C(1) << 63)

#define WIRE_PRODUCER_NAME_MAX 64u

/* Messages longer than this in an ERROR frame are cut. */
#define WIRE_ERROR_MESSAGE_MAX 1024u

enum wire_type {
    WIRE_HELLO = 1,   /* client -> daemon: u16 version, u16 flags(0), [v2: 16 bytes
                         stream id, u64 first position held], name */
    WIRE_WELCOME = 2, /* daemon -> client: u16 version, u8 fsync policy, u8 0,
                         u32 max_record_bytes, u32 max_frame_bytes, [v2: u64
                         position the stream continues at] */
    WIRE_APPEND = 3,  /* client -> daemon: [v2: u64 position of the first
                         record], u32 count, count x (u32 len, bytes) */
    WIRE_ACK = 4,     /* daemon -> client: u64 records acknowledged so far
                         (v1: of the connection; v2: every position below it) */
    WIRE_ERROR = 5,   /* daemon -> client: u32 errno code, UTF-8 message */
};

/* Sizes of the fixed parts of payloads. */
#define WIRE_HELLO_FIXED 4u
#define WIRE_HELLO_FIXED_V2 (WIRE_HELLO_FIXED + WIRE_STREAM_ID_SIZE + 8u)
#define WIRE_WELCOME_SIZE 12u
#define WIRE_WELCOME_SIZE_V2 (WIRE_WELCOME_SIZE + 8u)
#define WIRE_APPEND_POSITION 8u /* version 2: the first record's position */
#define WIRE_APPEND_FIXED 4u
#define WIRE_RECORD_PREFIX 4u
#define WIRE_ACK_SIZE 8u
#define WIRE_ERROR_FIXED 4u

/* What an APPEND payload adds to one record: the record count and the
 * record's length prefix. A frame limit must exceed a record limit by at
 * least this for a record of the largest size to fit. */
#define WIRE_APPEND_OVERHEAD (WIRE_APPEND_FIXED + WIRE_RECORD_PREFIX)

struct wire_header {
    uint32_t length; /* payload bytes after the header */
    uint8_t type;
};

struct wire_hello {
    uint16_t version;
    uint16_t flags;
    const char *name; /* points into the decoded payload, not terminated */
    size_t name_len;
    /* Version 2 only (zero in version 1): the stream the library names,
     * never all zero, and the first position it still holds (every record
     * below it was acknowledged), below WIRE_POSITION_LIMIT. */
    uint8_t stream_id[WIRE_STREAM_ID_SIZE];
    uint64_t first_position;
};

struct wire_welcome {
    uint16_t version;
    uint8_t fsync_policy;
    uint32_t max_record_bytes;
    uint32_t max_frame_bytes;
    /* Version 2 only: the position the stream continues at; the first
     * APPEND starts there. */
    uint64_t next_position;
};

/* Little-endian helpers shared by every encoder in the project. */
static inline void wire_put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}
static inline void wire_put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline void wire_put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static inline uint16_t wire_get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t wire_get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}
static inline uint64_t wire_get_u64(const unsigned char *p)
{
    return (uint64_t)wire_get_u32(p) | ((uint64_t)wire_get_u32(p + 4) << 32);
}

/* Writes a frame header for a payload of length bytes into out[8]. */
void wire_encode_header(unsigned char *out, enum wire_type type, uint32_t length);

/* Decodes the 8 header bytes at in. Returns 0, -EPROTO when the reserved bytes
 * are not zero, -EBADMSG for an unknown type, or -EMSGSIZE when the declared
 * length is over max_frame_bytes or WIRE_FRAME_CEILING (checked before anyone
 * allocates for it).
 * ret_header is written only on success. */
int wire_decode_header(const unsigned char *in, uint32_t max_frame_bytes,
                       struct wire_header *ret_header);

/* Checks a name a producer introduces itself with (HELLO) against the
 * rule: 1 to 64 bytes of [A-Za-z0-9._-], not starting with '.' or '-' (a
 * name becomes part of a file name; one starting with '-' would read as an
 * option to the commands an operator runs on it). Returns 0 or -EINVAL. */
int wire_check_hello_name(const char *name, size_t len);

/* Checks a producer name found in a shard header or a shard's file name,
 * or given to look shards up: the HELLO rule without "not starting with
 * '-'", which earlier versions did not have: shards they wrote for such a
 * producer stay readable. Returns 0 or -EINVAL. */
int wire_check_producer_name(const char *name, size_t len);

/* The HELLO rule in words, for error messages. */
extern const char wire_producer_name_rule[];

/* Encodes a whole version 1 HELLO frame (header included) into out, which
 * must hold WIRE_HEADER_SIZE + WIRE_HELLO_FIXED + name_len bytes. Returns
 * the frame size, or -EINVAL when the name breaks the HELLO rule. */
int wire_encode_hello(unsigned char *out, const char *name, size_t name_len);

/* Encodes a whole version 2 HELLO frame into out, which must hold
 * WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + name_len bytes: the stream
 * (WIRE_STREAM_ID_SIZE bytes, not all zero) and the first position the
 * caller still holds. Returns the frame size, or -EINVAL when the name
 * breaks the HELLO rule, the stream id is all zero or the position is not
 * below WIRE_POSITION_LIMIT. */
int wire_encode_hello_v2(unsigned char *out, const char *name, size_t name_len,
                         const uint8_t *stream_id, uint64_t first_position);

/* Decodes a HELLO payload of version 1 or 2. Returns 0, or -EPROTO when it
 * is too short for its version, its flags are not zero, or (version 2) its
 * stream id is all zero or its position out of range; -EPROTONOSUPPORT for
 * another protocol version; -EINVAL when the name breaks the HELLO rule. ret
 * is written only on success. */
int wire_decode_hello(const unsigned char *payload, size_t len, struct wire_hello *ret);

/* Encodes a whole WELCOME frame of w->version (1: 12 payload bytes; 2: 20,
 * with next_position) into out, which must hold WIRE_HEADER_SIZE +
 * WIRE_WELCOME_SIZE_V2 bytes; returns its size. */
size_t wire_encode_welcome(unsigned char *out, const struct wire_welcome *w);

/* Decodes a WELCOME payload. Returns 0, or -EPROTO when its size does not
 * match its version (12 bytes for version 1, 20 for version 2; any other
 * version is refused) or its reserved byte is not zero. The caller judges
 * the version it asked for and the limits. */
int wire_decode_welcome(const unsigned char *payload, size_t len, struct wire_welcome *ret);

/* Encodes a whole ACK frame into out[WIRE_HEADER_SIZE + WIRE_ACK_SIZE]. */
size_t wire_encode_ack(unsigned char *out, uint64_t acked);

/* Decodes an ACK payload. Returns 0 or -EPROTO. */
int wire_decode_ack(const unsigned char *payload, size_t len, uint64_t *ret_acked);

/* Encodes an ERROR frame into out, which must hold WIRE_HEADER_SIZE +
 * WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX bytes. code is a positive errno
 * value. The message (NULL: none) is cut at WIRE_ERROR_MESSAGE_MAX bytes.
 * Returns the size. */
size_t wire_encode_error(unsigned char *out, uint32_t code, const char *message);

/* Decodes an ERROR payload; *ret_message points into payload and is not
 * terminated. Returns 0, or -EPROTO when it is too short, its message is
 * longer than WIRE_ERROR_MESSAGE_MAX or its code is 0. */
int wire_decode_error(const unsigned char *payload, size_t len, uint32_t *ret_code,
                      const char **ret_message, size_t *ret_message_len);

/* Walks the records of an APPEND payload. Initialise with
 * wire_append_iter_init, then call wire_append_iter_next until it returns 0. */
struct wire_append_iter {
    const unsigned char *payload;
    size_t len;
    size_t pos;
    uint32_t count;
    uint32_t index;
};

/* Checks the whole APPEND payload before anything is taken from it: the count,
 * every record length between 1 and max_record_bytes, and that the records
 * fill the payload exactly. Returns 0, or a negative errno with a message in
 * ret_why (static text; the caller adds the record index from ret_index):
 * -EPROTO for a malformed frame, -EMSGSIZE for a record over the limit. */
int wire_append_validate(const unsigned char *payload, size_t len,
                         uint32_t max_record_bytes, uint32_t *ret_count,
                         uint32_t *ret_index, const char **ret_why);

/* Starts walking a payload that wire_append_validate accepted. */
void wire_append_iter_init(struct wire_append_iter *it, const unsigned char *payload,
                           size_t len);

/* Returns 1 and the next record, or 0 at the end. */
int wire_append_iter_next(struct wire_append_iter *it, const unsigned char **ret_rec,
                          uint32_t *ret_len);

/* Name of a frame type for messages ("HELLO", ..., "unknown"). */
const char *wire_type_name(unsigned type);
