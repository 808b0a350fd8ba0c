/* Fuzz target for common/wire.c, the producer protocol decoder.
 *
 * Input: two bytes that pick the limits (max_frame_bytes, max_record_bytes)
 * from the tables below, then a byte stream cut into frames the way the
 * daemon's process_rx and the client's reader cut it: a header, checked
 * against max_frame_bytes, then a payload of the declared length, decoded
 * by type. The payload is copied into a heap block of exactly its length,
 * so any read past it is an ASan report, and that block is allocated only
 * after wire_decode_header accepted the length: a declared length is never
 * trusted before the limit check, as in the daemon.
 *
 * Beyond "no crash", each decoder's documented contract is checked: what it
 * returns lies inside the payload, an accepted APPEND is walked by the
 * iterator without leaving the payload, and encode(decode(x)) gives x back
 * for the fixed-layout frames. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "wire.h"

/* Limits the daemon and the client can run with, including the edges: a
 * limit below the header-only frame, the format's ceiling, and the client's
 * "anything up to the ceiling". */
static const uint32_t frame_limits[] = {
    0, 8, 64, 4096, 4u * 1024 * 1024, WIRE_MAX_FRAME_BYTES, UINT32_MAX,
};
static const uint32_t record_limits[] = {
    0, 1, 16, 255, 1024 * 1024, 256u * 1024 * 1024, UINT32_MAX,
};

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

static bool inside(const void *p, size_t n, const unsigned char *base, size_t len)
{
    const unsigned char *q = p;
    return q >= base && q <= base + len && n <= (size_t)(base + len - q);
}

static void check_hello(const unsigned char *payload, size_t len)
{
    struct wire_hello h;
    int r = wire_decode_hello(payload, len, &h);

    FUZZ_CHECK(r == 0 || r == -EPROTO || r == -EPROTONOSUPPORT || r == -EINVAL);
    if (r < 0)
        return;
    FUZZ_CHECK((h.version == WIRE_PROTOCOL_V1 || h.version == WIRE_PROTOCOL_V2) && h.flags == 0);
    FUZZ_CHECK(h.name_len >= 1 && h.name_len <= WIRE_PRODUCER_NAME_MAX);
    FUZZ_CHECK(inside(h.name, h.name_len, payload, len));
    FUZZ_CHECK(wire_check_producer_name(h.name, h.name_len) == 0);

    /* The daemon copies the name into a WIRE_PRODUCER_NAME_MAX + 1 array;
     * the client encodes it back the same way. */
    {
        unsigned char frame[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + WIRE_PRODUCER_NAME_MAX];
        int n = h.version == WIRE_PROTOCOL_V1
                    ? wire_encode_hello(frame, h.name, h.name_len)
                    : wire_encode_hello_v2(frame, h.name, h.name_len, h.stream_id,
                                           h.first_position);

        FUZZ_CHECK(n == (int)(WIRE_HEADER_SIZE + len));
        FUZZ_CHECK(memcmp(frame + WIRE_HEADER_SIZE, payload, len) == 0);
    }
}

/* The daemon's record_length_at() walks the length prefixes up to the index
 * wire_append_validate reported, trusting that they are inside the payload.
 * Check that trust: every prefix up to and including that index is. */
static void check_validated_prefix(const unsigned char *payload, size_t len, uint32_t index)
{
    size_t pos = WIRE_APPEND_FIXED;

    for (uint32_t i = 0; i <= index; i++) {
        FUZZ_CHECK(len >= WIRE_RECORD_PREFIX && pos <= len - WIRE_RECORD_PREFIX);
        if (i == index)
            break;
        pos += WIRE_RECORD_PREFIX + (size_t)wire_get_u32(payload + pos);
    }
}

static void check_append(const unsigned char *payload, size_t len, uint32_t max_record)
{
    uint32_t count = 0xdeadbeef, index = 0, rlen, seen = 0;
    const char *why = NULL;
    const unsigned char *rec, *prev_end = payload + WIRE_APPEND_FIXED;
    struct wire_append_iter it;
    int r = wire_append_validate(payload, len, max_record, &count, &index, &why);

    if (r < 0) {
        FUZZ_CHECK(r == -EPROTO || r == -EMSGSIZE);
        FUZZ_CHECK(why && *why);
        FUZZ_CHECK(count == 0xdeadbeef); /* out-parameter untouched on failure */
        if (len >= WIRE_APPEND_FIXED)
            FUZZ_CHECK(index <= wire_get_u32(payload));
        if (r == -EMSGSIZE) {
            /* The daemon names the oversized record's length in its ERROR. */
            check_validated_prefix(payload, len, index);
        }
        return;
    }
    FUZZ_CHECK(count >= 1 && count == wire_get_u32(payload));

    wire_append_iter_init(&it, payload, len);
    while (wire_append_iter_next(&it, &rec, &rlen)) {
        /* Records come in order, back to back, each after its prefix. */
        FUZZ_CHECK(rec == prev_end + WIRE_RECORD_PREFIX);
        FUZZ_CHECK(rlen >= 1 && rlen <= max_record);
        FUZZ_CHECK(inside(rec, rlen, payload, len));
        FUZZ_CHECK(wire_get_u32(rec - WIRE_RECORD_PREFIX) == rlen);
        prev_end = rec + rlen;
        seen++;
        FUZZ_CHECK(seen <= count);
    }
    FUZZ_CHECK(seen == count);
    FUZZ_CHECK(prev_end == payload + len); /* the records fill the payload */
    FUZZ_CHECK(wire_append_iter_next(&it, &rec, &rlen) == 0);
}

static void check_welcome(const unsigned char *payload, size_t len)
{
    struct wire_welcome w;
    unsigned char frame[WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE_V2];
    int r = wire_decode_welcome(payload, len, &w);

    FUZZ_CHECK(r == 0 || r == -EPROTO);
    if (r < 0)
        return;
    FUZZ_CHECK((w.version == WIRE_PROTOCOL_V1 && len == WIRE_WELCOME_SIZE) ||
               (w.version == WIRE_PROTOCOL_V2 && len == WIRE_WELCOME_SIZE_V2));
    FUZZ_CHECK(wire_encode_welcome(frame, &w) == WIRE_HEADER_SIZE + len);
    FUZZ_CHECK(memcmp(frame + WIRE_HEADER_SIZE, payload, len) == 0);
}

static void check_ack(const unsigned char *payload, size_t len)
{
    uint64_t acked;
    unsigned char frame[WIRE_HEADER_SIZE + WIRE_ACK_SIZE];
    int r = wire_decode_ack(payload, len, &acked);

    FUZZ_CHECK(r == 0 || r == -EPROTO);
    if (r < 0)
        return;
    FUZZ_CHECK(wire_encode_ack(frame, acked) == sizeof(frame));
    FUZZ_CHECK(memcmp(frame + WIRE_HEADER_SIZE, payload, len) == 0);
}

static void check_error(const unsigned char *payload, size_t len)
{
    uint32_t code = 0;
    const char *msg = NULL;
    size_t msg_len = 0;
    int r = wire_decode_error(payload, len, &code, &msg, &msg_len);

    FUZZ_CHECK(r == 0 || r == -EPROTO);
    if (r < 0)
        return;
    FUZZ_CHECK(code != 0);
    FUZZ_CHECK(msg_len <= WIRE_ERROR_MESSAGE_MAX);
    FUZZ_CHECK(inside(msg, msg_len, payload, len));

    /* The encoder takes a C string, so only a message without NUL bytes
     * can come back unchanged. */
    if (!memchr(msg, '\0', msg_len)) {
        static unsigned char frame[WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX];
        char text[WIRE_ERROR_MESSAGE_MAX + 1];

        memcpy(text, msg, msg_len);
        text[msg_len] = '\0';
        FUZZ_CHECK(wire_encode_error(frame, code, text) == WIRE_HEADER_SIZE + len);
        FUZZ_CHECK(memcmp(frame + WIRE_HEADER_SIZE, payload, len) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t max_frame, max_record;
    size_t pos = 2;

    if (size < 2)
        return 0;
    max_frame = frame_limits[data[0] % N_ELEMENTS(frame_limits)];
    max_record = record_limits[data[1] % N_ELEMENTS(record_limits)];

    while (size - pos >= WIRE_HEADER_SIZE) {
        struct wire_header h = { 0xdeadbeef, 0xff };
        const unsigned char *hdr = data + pos;
        unsigned char *payload;
        uint32_t declared = wire_get_u32(hdr);
        int r = wire_decode_header(hdr, max_frame, &h);

        if (r < 0) {
            /* Each refusal has the cause the daemon's message names. */
            FUZZ_CHECK(h.length == 0xdeadbeef && h.type == 0xff);
            if (r == -EPROTO)
                FUZZ_CHECK(hdr[5] || hdr[6] || hdr[7]);
            else if (r == -EBADMSG)
                FUZZ_CHECK(hdr[4] < WIRE_HELLO || hdr[4] > WIRE_ERROR);
            else
                FUZZ_CHECK(r == -EMSGSIZE &&
                           (declared > max_frame || declared > WIRE_FRAME_CEILING));
            return 0; /* the peer is cut off: nothing after this is read */
        }
        FUZZ_CHECK(h.length == declared && h.type == hdr[4]);
        FUZZ_CHECK(h.length <= max_frame && h.length <= WIRE_FRAME_CEILING);
        FUZZ_CHECK(strcmp(wire_type_name(h.type), "unknown") != 0);
        pos += WIRE_HEADER_SIZE;
        if (size - pos < h.length)
            return 0; /* a partial frame: the daemon waits for the rest */

        /* Only now, with the length inside the limit and the bytes at hand,
         * is the payload given a block of its own: exactly its length, so
         * even an empty payload is a block ASan lets no one read. */
        payload = malloc(h.length);
        FUZZ_CHECK(payload); /* glibc and ASan return a block for 0 too */
        memcpy(payload, data + pos, h.length);
        switch (h.type) {
        case WIRE_HELLO: check_hello(payload, h.length); break;
        case WIRE_APPEND: check_append(payload, h.length, max_record); break;
        case WIRE_WELCOME: check_welcome(payload, h.length); break;
        case WIRE_ACK: check_ack(payload, h.length); break;
        case WIRE_ERROR: check_error(payload, h.length); break;
        }
        free(payload);
        pos += h.length;
    }
    return 0;
}
