/* Encoding and decoding of producer frames. Decoders check every length
 * against what was received and against the limits before returning
 * anything, so callers can trust what comes out. */
#include "wire.h"

#include <errno.h>
#include <string.h>

const char wire_producer_name_rule[] =
    "1 to 64 bytes of [A-Za-z0-9._-], not starting with '.' or '-'";

void wire_encode_header(unsigned char *out, enum wire_type type, uint32_t length)
{
    wire_put_u32(out, length);
    out[4] = (unsigned char)type;
    out[5] = out[6] = out[7] = 0;
}

int wire_decode_header(const unsigned char *in, uint32_t max_frame_bytes,
                       struct wire_header *ret_header)
{
    uint32_t length = wire_get_u32(in);
    uint8_t type = in[4];

    if (in[5] || in[6] || in[7])
        return -EPROTO;
    if (type < WIRE_HELLO || type > WIRE_ERROR)
        return -EBADMSG;
    if (length > max_frame_bytes || length > WIRE_FRAME_CEILING)
        return -EMSGSIZE;
    ret_header->length = length;
    ret_header->type = type;
    return 0;
}

static bool name_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int wire_check_producer_name(const char *name, size_t len)
{
    if (len < 1 || len > WIRE_PRODUCER_NAME_MAX || name[0] == '.')
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!name_char_ok((unsigned char)name[i]))
            return -EINVAL;
    return 0;
}

int wire_check_hello_name(const char *name, size_t len)
{
    if (len >= 1 && name[0] == '-')
        return -EINVAL;
    return wire_check_producer_name(name, len);
}

int wire_encode_hello(unsigned char *out, const char *name, size_t name_len)
{
    if (wire_check_hello_name(name, name_len) < 0)
        return -EINVAL;
    wire_encode_header(out, WIRE_HELLO, (uint32_t)(WIRE_HELLO_FIXED + name_len));
    wire_put_u16(out + WIRE_HEADER_SIZE, WIRE_PROTOCOL_V1);
    wire_put_u16(out + WIRE_HEADER_SIZE + 2, 0);
    memcpy(out + WIRE_HEADER_SIZE + WIRE_HELLO_FIXED, name, name_len);
    return (int)(WIRE_HEADER_SIZE + WIRE_HELLO_FIXED + name_len);
}

static bool stream_id_is_zero(const uint8_t *id)
{
    for (size_t i = 0; i < WIRE_STREAM_ID_SIZE; i++)
        if (id[i])
            return false;
    return true;
}

int wire_encode_hello_v2(unsigned char *out, const char *name, size_t name_len,
                         const uint8_t *stream_id, uint64_t first_position)
{
    unsigned char *p = out + WIRE_HEADER_SIZE;

    if (wire_check_hello_name(name, name_len) < 0 || stream_id_is_zero(stream_id) ||
        first_position >= WIRE_POSITION_LIMIT)
        return -EINVAL;
    wire_encode_header(out, WIRE_HELLO, (uint32_t)(WIRE_HELLO_FIXED_V2 + name_len));
    wire_put_u16(p, WIRE_PROTOCOL_V2);
    wire_put_u16(p + 2, 0);
    memcpy(p + WIRE_HELLO_FIXED, stream_id, WIRE_STREAM_ID_SIZE);
    wire_put_u64(p + WIRE_HELLO_FIXED + WIRE_STREAM_ID_SIZE, first_position);
    memcpy(p + WIRE_HELLO_FIXED_V2, name, name_len);
    return (int)(WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + name_len);
}

int wire_decode_hello(const unsigned char *payload, size_t len, struct wire_hello *ret)
{
    struct wire_hello h = { .version = 0 };
    size_t fixed;

    if (len < WIRE_HELLO_FIXED)
        return -EPROTO;
    h.version = wire_get_u16(payload);
    h.flags = wire_get_u16(payload + 2);
    if (h.version == WIRE_PROTOCOL_V1)
        fixed = WIRE_HELLO_FIXED;
    else if (h.version == WIRE_PROTOCOL_V2)
        fixed = WIRE_HELLO_FIXED_V2;
    else
        return -EPROTONOSUPPORT;
    if (h.flags != 0 || len < fixed)
        return -EPROTO;
    if (h.version == WIRE_PROTOCOL_V2) {
        memcpy(h.stream_id, payload + WIRE_HELLO_FIXED, WIRE_STREAM_ID_SIZE);
        h.first_position = wire_get_u64(payload + WIRE_HELLO_FIXED + WIRE_STREAM_ID_SIZE);
        if (stream_id_is_zero(h.stream_id) || h.first_position >= WIRE_POSITION_LIMIT)
            return -EPROTO;
    }
    h.name = (const char *)payload + fixed;
    h.name_len = len - fixed;
    if (wire_check_hello_name(h.name, h.name_len) < 0)
        return -EINVAL;
    *ret = h;
    return 0;
}

size_t wire_encode_welcome(unsigned char *out, const struct wire_welcome *w)
{
    unsigned char *p = out + WIRE_HEADER_SIZE;
    size_t size = w->version == WIRE_PROTOCOL_V1 ? WIRE_WELCOME_SIZE : WIRE_WELCOME_SIZE_V2;

    wire_encode_header(out, WIRE_WELCOME, (uint32_t)size);
    wire_put_u16(p, w->version);
    p[2] = w->fsync_policy;
    p[3] = 0;
    wire_put_u32(p + 4, w->max_record_bytes);
    wire_put_u32(p + 8, w->max_frame_bytes);
    if (size == WIRE_WELCOME_SIZE_V2)
        wire_put_u64(p + WIRE_WELCOME_SIZE, w->next_position);
    return WIRE_HEADER_SIZE + size;
}

int wire_decode_welcome(const unsigned char *payload, size_t len, struct wire_welcome *ret)
{
    uint16_t version;

    if (len < WIRE_WELCOME_SIZE || payload[3] != 0)
        return -EPROTO;
    version = wire_get_u16(payload);
    if (!(version == WIRE_PROTOCOL_V1 && len == WIRE_WELCOME_SIZE) &&
        !(version == WIRE_PROTOCOL_V2 && len == WIRE_WELCOME_SIZE_V2))
        return -EPROTO;
    ret->version = version;
    ret->fsync_policy = payload[2];
    ret->max_record_bytes = wire_get_u32(payload + 4);
    ret->max_frame_bytes = wire_get_u32(payload + 8);
    ret->next_position = version == WIRE_PROTOCOL_V2 ? wire_get_u64(payload + WIRE_WELCOME_SIZE) : 0;
    return 0;
}

size_t wire_encode_ack(unsigned char *out, uint64_t acked)
{
    wire_encode_header(out, WIRE_ACK, WIRE_ACK_SIZE);
    wire_put_u64(out + WIRE_HEADER_SIZE, acked);
    return WIRE_HEADER_SIZE + WIRE_ACK_SIZE;
}

int wire_decode_ack(const unsigned char *payload, size_t len, uint64_t *ret_acked)
{
    if (len != WIRE_ACK_SIZE)
        return -EPROTO;
    *ret_acked = wire_get_u64(payload);
    return 0;
}

size_t wire_encode_error(unsigned char *out, uint32_t code, const char *message)
{
    size_t mlen = message ? strnlen(message, WIRE_ERROR_MESSAGE_MAX) : 0;

    wire_encode_header(out, WIRE_ERROR, (uint32_t)(WIRE_ERROR_FIXED + mlen));
    wire_put_u32(out + WIRE_HEADER_SIZE, code);
    memcpy(out + WIRE_HEADER_SIZE + WIRE_ERROR_FIXED, message, mlen);
    return WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + mlen;
}

int wire_decode_error(const unsigned char *payload, size_t len, uint32_t *ret_code,
                      const char **ret_message, size_t *ret_message_len)
{
    uint32_t code;

    if (len < WIRE_ERROR_FIXED || len > WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX)
        return -EPROTO;
    code = wire_get_u32(payload);
    if (code == 0) /* would read as success to a caller that negates it */
        return -EPROTO;
    *ret_code = code;
    *ret_message = (const char *)payload + WIRE_ERROR_FIXED;
    *ret_message_len = len - WIRE_ERROR_FIXED;
    return 0;
}

int wire_append_validate(const unsigned char *payload, size_t len,
                         uint32_t max_record_bytes, uint32_t *ret_count,
                         uint32_t *ret_index, const char **ret_why)
{
    uint32_t count;
    size_t pos = WIRE_APPEND_FIXED;

    *ret_index = 0;
    if (len < WIRE_APPEND_FIXED) {
        *ret_why = "APPEND payload shorter than its record count";
        return -EPROTO;
    }
    count = wire_get_u32(payload);
    if (count == 0) {
        *ret_why = "APPEND frame with no records";
        return -EPROTO;
    }
    for (uint32_t i = 0; i < count; i++) {
        uint32_t rlen;

        *ret_index = i;
        if (len - pos < WIRE_RECORD_PREFIX) {
            *ret_why = "record length prefix runs past the end of the frame";
            return -EPROTO;
        }
        rlen = wire_get_u32(payload + pos);
        pos += WIRE_RECORD_PREFIX;
        if (rlen == 0) {
            *ret_why = "empty record (records are 1 byte or more)";
            return -EPROTO;
        }
        if (rlen > max_record_bytes) {
            *ret_why = "record longer than max_record_bytes";
            return -EMSGSIZE;
        }
        if (len - pos < rlen) {
            *ret_why = "record runs past the end of the frame";
            return -EPROTO;
        }
        pos += rlen;
    }
    if (pos != len) {
        *ret_index = count;
        *ret_why = "bytes left over after the last record";
        return -EPROTO;
    }
    *ret_count = count;
    return 0;
}

void wire_append_iter_init(struct wire_append_iter *it, const unsigned char *payload,
                           size_t len)
{
    it->payload = payload;
    it->len = len;
    it->pos = WIRE_APPEND_FIXED;
    it->count = wire_get_u32(payload);
    it->index = 0;
}

int wire_append_iter_next(struct wire_append_iter *it, const unsigned char **ret_rec,
                          uint32_t *ret_len)
{
    uint32_t rlen;

    if (it->index >= it->count)
        return 0;
    rlen = wire_get_u32(it->payload + it->pos);
    *ret_rec = it->payload + it->pos + WIRE_RECORD_PREFIX;
    *ret_len = rlen;
    it->pos += WIRE_RECORD_PREFIX + rlen;
    it->index++;
    return 1;
}

const char *wire_type_name(unsigned type)
{
    switch (type) {
    case WIRE_HELLO: return "HELLO";
    case WIRE_WELCOME: return "WELCOME";
    case WIRE_APPEND: return "APPEND";
    case WIRE_ACK: return "ACK";
    case WIRE_ERROR: return "ERROR";
    default: return "unknown";
    }
}
