/* Unit tests for common/wire.c, the producer protocol codec: frame headers,
 * the producer name rule, HELLO/WELCOME/ACK/ERROR round trips and refusals,
 * and APPEND validation and iteration. Byte layouts are checked literally,
 * so a change of the wire format fails here before it reaches a peer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire.h"

static void test_header_round_trip(void **state)
{
    static const uint32_t lengths[] = { 0, 1, 12, 0x01020304u, WIRE_MAX_FRAME_BYTES };
    unsigned char b[WIRE_HEADER_SIZE];
    (void)state;

    wire_encode_header(b, WIRE_APPEND, 0x01020304u);
    assert_memory_equal(b, "\x04\x03\x02\x01\x03\x00\x00\x00", 8);

    for (unsigned t = WIRE_HELLO; t <= WIRE_ERROR; t++) {
        for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
            struct wire_header h = { 0, 0 };

            memset(b, 0xAA, sizeof(b));
            wire_encode_header(b, (enum wire_type)t, lengths[i]);
            assert_int_equal(b[4], t);
            assert_int_equal(b[5] | b[6] | b[7], 0);
            assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
            assert_int_equal(h.type, t);
            assert_int_equal(h.length, lengths[i]);
        }
    }
}

static void test_header_reserved(void **state)
{
    unsigned char b[WIRE_HEADER_SIZE];
    (void)state;

    for (int i = 5; i < 8; i++) {
        for (int v = 1; v < 256; v <<= 1) {
            struct wire_header h = { 77, 77 };

            wire_encode_header(b, WIRE_HELLO, 10);
            b[i] = (unsigned char)v;
            assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), -EPROTO);
            /* Out-parameter untouched on failure. */
            assert_int_equal(h.length, 77);
            assert_int_equal(h.type, 77);
        }
    }
    /* Reserved bytes are checked first: bad type and bad length as well still
     * give -EPROTO. */
    memcpy(b, "\xff\xff\xff\xff\x09\x00\x01\x00", 8);
    {
        struct wire_header h;
        assert_int_equal(wire_decode_header(b, 100, &h), -EPROTO);
    }
}

static void test_header_unknown_type(void **state)
{
    static const unsigned bad[] = { 0, 6, 7, 0x7f, 0x80, 0xff };
    unsigned char b[WIRE_HEADER_SIZE];
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct wire_header h = { 77, 77 };

        wire_encode_header(b, WIRE_ACK, 8);
        b[4] = (unsigned char)bad[i];
        assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), -EBADMSG);
        assert_int_equal(h.length, 77);
        assert_int_equal(h.type, 77);
    }
    /* The type is checked before the length. */
    memcpy(b, "\xff\xff\xff\xff\x00\x00\x00\x00", 8);
    {
        struct wire_header h;
        assert_int_equal(wire_decode_header(b, 100, &h), -EBADMSG);
    }
}

static void test_header_length_limit(void **state)
{
    unsigned char b[WIRE_HEADER_SIZE];
    struct wire_header h = { 77, 77 };
    (void)state;

    wire_encode_header(b, WIRE_APPEND, 1000);
    assert_int_equal(wire_decode_header(b, 1000, &h), 0);
    assert_int_equal(h.length, 1000);

    h.length = 77;
    wire_encode_header(b, WIRE_APPEND, 1001);
    assert_int_equal(wire_decode_header(b, 1000, &h), -EMSGSIZE);
    assert_int_equal(h.length, 77);

    /* The format's own ceiling holds whatever the configured limit says. */
    wire_encode_header(b, WIRE_APPEND, WIRE_FRAME_CEILING);
    assert_int_equal(wire_decode_header(b, UINT32_MAX, &h), 0);
    assert_int_equal(h.length, WIRE_FRAME_CEILING);
    h.length = 77;
    wire_encode_header(b, WIRE_APPEND, WIRE_FRAME_CEILING + 1);
    assert_int_equal(wire_decode_header(b, UINT32_MAX, &h), -EMSGSIZE);
    wire_encode_header(b, WIRE_APPEND, 0xFFFFFFFFu);
    assert_memory_equal(b, "\xff\xff\xff\xff\x03\x00\x00\x00", 8);
    assert_int_equal(wire_decode_header(b, UINT32_MAX, &h), -EMSGSIZE);
    assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), -EMSGSIZE);
    assert_int_equal(wire_decode_header(b, 4096, &h), -EMSGSIZE);
    assert_int_equal(h.length, 77);

    /* A zero limit lets only empty payloads through. */
    wire_encode_header(b, WIRE_ACK, 0);
    assert_int_equal(wire_decode_header(b, 0, &h), 0);
    wire_encode_header(b, WIRE_ACK, 1);
    assert_int_equal(wire_decode_header(b, 0, &h), -EMSGSIZE);
}

/* Both rules on every case: the HELLO rule (wire_check_hello_name) and the
 * rule for names already on disk (wire_check_producer_name), which differ
 * only in a leading '-'. */
static void check_both_rules(const char *name, size_t len, bool hello_ok, bool stored_ok)
{
    if ((wire_check_hello_name(name, len) == 0) != hello_ok)
        fail_msg("'%.*s' (%zu bytes): HELLO rule says %s", (int)len, name, len,
                 hello_ok ? "no" : "yes");
    if ((wire_check_producer_name(name, len) == 0) != stored_ok)
        fail_msg("'%.*s' (%zu bytes): on-disk rule says %s", (int)len, name, len,
                 stored_ok ? "no" : "yes");
}

static void test_name_rule(void **state)
{
    static const char *const good[] = { "a", "web-1.prod_x", "A", "0", "_", "a-", "a.",
                                        "a..b", "ABCxyz-_.09", "a-rf" };
    static const char *const bad[] = { "", ".x", ".", "..", "a/b", "a b", "\xc3\xa4",
                                       "a\xc3\xa4", "a\\b", "a:b", "a\n", "*", "a@b" };
    /* Names a HELLO may no longer carry, which older daemons took: their
     * shards must stay readable. */
    static const char *const leading_dash[] = { "-", "-rf", "--help", "-.x", "-a-b" };
    char name[80];
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        check_both_rules(good[i], strlen(good[i]), true, true);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        check_both_rules(bad[i], strlen(bad[i]), false, false);
    for (size_t i = 0; i < sizeof(leading_dash) / sizeof(leading_dash[0]); i++)
        check_both_rules(leading_dash[i], strlen(leading_dash[i]), false, true);

    memset(name, 'x', sizeof(name));
    check_both_rules(name, 64, true, true);
    check_both_rules(name, 65, false, false);
    check_both_rules(name, 80, false, false);
    name[0] = '-';
    check_both_rules(name, 64, false, true);
    check_both_rules(name, 65, false, false);

    /* The length is what counts, not a terminator: a NUL inside is refused. */
    check_both_rules("a\0b", 3, false, false);
    check_both_rules("a\0", 2, false, false);
    check_both_rules("ab", 1, true, true);
    check_both_rules("-b", 1, false, true);
    check_both_rules("b-", 1, true, true);

    /* Every byte value: only [A-Za-z0-9._-] may follow the first byte, and
     * the first may be neither '.' nor, in a HELLO, '-'. */
    for (unsigned c = 0; c < 256; c++) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        char two[2] = { 'a', (char)c };
        char one[1] = { (char)c };

        check_both_rules(two, 2, ok, ok);
        check_both_rules(one, 1, ok && c != '.' && c != '-', ok && c != '.');
    }
    assert_string_equal(wire_producer_name_rule,
                        "1 to 64 bytes of [A-Za-z0-9._-], not starting with '.' or '-'");
}

static void test_hello_round_trip(void **state)
{
    unsigned char b[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED + 64];
    struct wire_header h;
    struct wire_hello hello;
    char name64[64];
    (void)state;

    assert_int_equal(wire_encode_hello(b, "web-1", 5), 8 + 4 + 5);
    assert_memory_equal(b, "\x09\x00\x00\x00\x01\x00\x00\x00" "\x01\x00\x00\x00" "web-1", 17);
    assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
    assert_int_equal(h.type, WIRE_HELLO);
    assert_int_equal(h.length, 9);
    assert_int_equal(wire_decode_hello(b + WIRE_HEADER_SIZE, h.length, &hello), 0);
    assert_int_equal(hello.version, WIRE_PROTOCOL_V1);
    assert_int_equal(hello.flags, 0);
    assert_int_equal(hello.name_len, 5);
    assert_ptr_equal(hello.name, (const char *)b + WIRE_HEADER_SIZE + WIRE_HELLO_FIXED);
    assert_memory_equal(hello.name, "web-1", 5);

    memset(name64, 'n', sizeof(name64));
    assert_int_equal(wire_encode_hello(b, name64, 64), 8 + 4 + 64);
    assert_int_equal(wire_decode_hello(b + WIRE_HEADER_SIZE, 68, &hello), 0);
    assert_int_equal(hello.name_len, 64);
    assert_memory_equal(hello.name, name64, 64);

    /* The encoder refuses a name the daemon would refuse, and writes nothing. */
    memset(b, 0xAA, sizeof(b));
    assert_int_equal(wire_encode_hello(b, ".x", 2), -EINVAL);
    assert_int_equal(wire_encode_hello(b, "", 0), -EINVAL);
    assert_int_equal(wire_encode_hello(b, "a b", 3), -EINVAL);
    assert_int_equal(wire_encode_hello(b, name64, 65), -EINVAL);
    assert_int_equal(wire_encode_hello(b, "-rf", 3), -EINVAL);
    memset(b, 0xAA, sizeof(b));
    assert_int_equal(wire_encode_hello(b, "a/b", 3), -EINVAL);
    for (size_t i = 0; i < sizeof(b); i++)
        assert_int_equal(b[i], 0xAA);
}

static void test_hello_refused(void **state)
{
    unsigned char p[4 + 8];
    struct wire_hello hello, sentinel;
    (void)state;

    memset(&sentinel, 0x5A, sizeof(sentinel));

    /* Versions other than 1 and 2. */
    static const uint16_t versions[] = { 0, 3, 0x0100, 0xFFFF };
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        wire_put_u16(p, versions[i]);
        wire_put_u16(p + 2, 0);
        memcpy(p + 4, "producer", 8);
        hello = sentinel;
        assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EPROTONOSUPPORT);
        assert_memory_equal(&hello, &sentinel, sizeof(hello));
    }

    /* Flags must be zero. */
    static const uint16_t flags[] = { 1, 2, 0x8000, 0xFFFF };
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        wire_put_u16(p, 1);
        wire_put_u16(p + 2, flags[i]);
        hello = sentinel;
        assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EPROTO);
        assert_memory_equal(&hello, &sentinel, sizeof(hello));
    }

    /* A name that breaks the rule, and no name at all. */
    wire_put_u16(p, 1);
    wire_put_u16(p + 2, 0);
    memcpy(p + 4, "prod/cer", 8);
    hello = sentinel;
    assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EINVAL);
    assert_memory_equal(&hello, &sentinel, sizeof(hello));
    memcpy(p + 4, "-rf-prod", 8); /* would become done/-rf-prod.*.shard */
    assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EINVAL);
    assert_memory_equal(&hello, &sentinel, sizeof(hello));
    memcpy(p + 4, ".produce", 8);
    assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EINVAL);
    memcpy(p + 4, "prod\0cer", 8);
    assert_int_equal(wire_decode_hello(p, sizeof(p), &hello), -EINVAL);
    assert_int_equal(wire_decode_hello(p, 4, &hello), -EINVAL);
    assert_memory_equal(&hello, &sentinel, sizeof(hello));

    /* Payloads shorter than the fixed part. */
    for (size_t len = 0; len < WIRE_HELLO_FIXED; len++) {
        hello = sentinel;
        assert_int_equal(wire_decode_hello(p, len, &hello), -EPROTO);
        assert_memory_equal(&hello, &sentinel, sizeof(hello));
    }
}

static void test_welcome_round_trip(void **state)
{
    unsigned char b[WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE + 1];
    struct wire_welcome w = { .version = 1, .fsync_policy = 0,
                              .max_record_bytes = 1048576, .max_frame_bytes = 4194304 };
    struct wire_welcome got, sentinel;
    struct wire_header h;
    (void)state;

    memset(b, 0xAA, sizeof(b));
    assert_int_equal(wire_encode_welcome(b, &w), WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE);
    assert_memory_equal(b,
                        "\x0c\x00\x00\x00\x02\x00\x00\x00"
                        "\x01\x00\x00\x00\x00\x00\x10\x00\x00\x00\x40\x00",
                        20);
    assert_int_equal(b[20], 0xAA);
    assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
    assert_int_equal(h.type, WIRE_WELCOME);
    assert_int_equal(h.length, WIRE_WELCOME_SIZE);
    memset(&got, 0, sizeof(got));
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE, &got), 0);
    assert_int_equal(got.version, 1);
    assert_int_equal(got.fsync_policy, 0);
    assert_int_equal(got.max_record_bytes, 1048576);
    assert_int_equal(got.max_frame_bytes, 4194304);

    /* Every field in its place. */
    w = (struct wire_welcome){ .version = 1, .fsync_policy = 3,
                               .max_record_bytes = 0x11223344u,
                               .max_frame_bytes = 0xA1B2C3D4u };
    wire_encode_welcome(b, &w);
    assert_memory_equal(b + 8, "\x01\x00\x03\x00\x44\x33\x22\x11\xd4\xc3\xb2\xa1", 12);
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE, &got), 0);
    assert_int_equal(got.version, 1);
    assert_int_equal(got.fsync_policy, 3);
    assert_int_equal(got.max_record_bytes, 0x11223344u);
    assert_int_equal(got.max_frame_bytes, 0xA1B2C3D4u);

    /* Any other payload size is malformed. */
    memset(&sentinel, 0x5A, sizeof(sentinel));
    for (size_t len = 0; len <= WIRE_WELCOME_SIZE + 1; len++) {
        if (len == WIRE_WELCOME_SIZE)
            continue;
        got = sentinel;
        assert_int_equal(wire_decode_welcome(b + 8, len, &got), -EPROTO);
        assert_memory_equal(&got, &sentinel, sizeof(got));
    }
    /* A version this codec does not know is refused whatever its size. */
    wire_put_u16(b + 8, 3);
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE, &got), -EPROTO);
}

/* Version 2: the stream in HELLO, the position it continues at in WELCOME. */
static void test_v2_hello_welcome(void **state)
{
    unsigned char b[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + 64];
    uint8_t id[WIRE_STREAM_ID_SIZE], zero[WIRE_STREAM_ID_SIZE] = { 0 };
    struct wire_hello hello;
    struct wire_welcome w = { .version = 2, .fsync_policy = 2, .max_record_bytes = 1048576,
                              .max_frame_bytes = 4194304,
                              .next_position = UINT64_C(0x0102030405060708) };
    struct wire_welcome got;
    struct wire_header h;
    (void)state;

    for (size_t i = 0; i < sizeof(id); i++)
        id[i] = (uint8_t)(0xA0 + i);
    assert_int_equal(wire_encode_hello_v2(b, "web-1", 5, id, 77), 8 + 28 + 5);
    assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
    assert_int_equal(h.length, 28 + 5);
    assert_memory_equal(b + 8, "\x02\x00\x00\x00", 4);
    assert_memory_equal(b + 12, id, 16);
    assert_memory_equal(b + 28, "\x4d\x00\x00\x00\x00\x00\x00\x00", 8);
    assert_int_equal(wire_decode_hello(b + 8, h.length, &hello), 0);
    assert_int_equal(hello.version, 2);
    assert_memory_equal(hello.stream_id, id, 16);
    assert_int_equal(hello.first_position, 77);
    assert_int_equal(hello.name_len, 5);
    assert_memory_equal(hello.name, "web-1", 5);

    /* No stream, a position out of range, a payload cut in the stream. */
    assert_int_equal(wire_encode_hello_v2(b, "web-1", 5, zero, 0), -EINVAL);
    assert_int_equal(wire_encode_hello_v2(b, "web-1", 5, id, WIRE_POSITION_LIMIT), -EINVAL);
    assert_int_equal(wire_encode_hello_v2(b, "-x", 2, id, 0), -EINVAL);
    wire_encode_hello_v2(b, "web-1", 5, id, 0);
    for (size_t len = 0; len < WIRE_HELLO_FIXED_V2; len++)
        assert_int_equal(wire_decode_hello(b + 8, len, &hello), -EPROTO);
    assert_int_equal(wire_decode_hello(b + 8, WIRE_HELLO_FIXED_V2, &hello), -EINVAL);
    memset(b + 12, 0, 16);
    assert_int_equal(wire_decode_hello(b + 8, 28 + 5, &hello), -EPROTO);
    memcpy(b + 12, id, 16);
    wire_put_u64(b + 28, WIRE_POSITION_LIMIT);
    assert_int_equal(wire_decode_hello(b + 8, 28 + 5, &hello), -EPROTO);

    assert_int_equal(wire_encode_welcome(b, &w), WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE_V2);
    assert_int_equal(wire_get_u32(b), 20);
    assert_memory_equal(b + 8 + 12, "\x08\x07\x06\x05\x04\x03\x02\x01", 8);
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE_V2, &got), 0);
    assert_int_equal(got.version, 2);
    assert_int_equal(got.fsync_policy, 2);
    assert_true(got.next_position == UINT64_C(0x0102030405060708));
    /* A version 2 WELCOME of the version 1 size, and the other way round. */
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE, &got), -EPROTO);
    wire_put_u16(b + 8, 1);
    assert_int_equal(wire_decode_welcome(b + 8, WIRE_WELCOME_SIZE_V2, &got), -EPROTO);
}

static void test_ack_round_trip(void **state)
{
    static const uint64_t values[] = { 0, 1, 0x0102030405060708ull, UINT64_MAX };
    unsigned char b[WIRE_HEADER_SIZE + WIRE_ACK_SIZE + 1];
    (void)state;

    memset(b, 0xAA, sizeof(b));
    assert_int_equal(wire_encode_ack(b, 0x0102030405060708ull), 16);
    assert_memory_equal(b, "\x08\x00\x00\x00\x04\x00\x00\x00\x08\x07\x06\x05\x04\x03\x02\x01",
                        16);
    assert_int_equal(b[16], 0xAA);

    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        uint64_t got = 42;
        struct wire_header h;

        wire_encode_ack(b, values[i]);
        assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
        assert_int_equal(h.type, WIRE_ACK);
        assert_int_equal(h.length, 8);
        assert_int_equal(wire_decode_ack(b + 8, 8, &got), 0);
        assert_true(got == values[i]);
    }
    for (size_t len = 0; len <= 9; len++) {
        uint64_t got = 42;

        if (len == 8)
            continue;
        assert_int_equal(wire_decode_ack(b + 8, len, &got), -EPROTO);
        assert_int_equal(got, 42);
    }
}

static void test_error_round_trip(void **state)
{
    enum { CAP = WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX };
    unsigned char *b = malloc(CAP + 16);
    char *longmsg = malloc(5001);
    struct wire_header h;
    uint32_t code = 0;
    const char *msg = NULL;
    size_t mlen = 0;
    (void)state;

    assert_non_null(b);
    assert_non_null(longmsg);
    memset(b, 0xAA, CAP + 16);
    assert_int_equal(wire_encode_error(b, EPROTO, "bad frame"), 8 + 4 + 9);
    assert_memory_equal(b, "\x0d\x00\x00\x00\x05\x00\x00\x00\x47\x00\x00\x00" "bad frame", 21);
    assert_int_equal(b[21], 0xAA);
    assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
    assert_int_equal(h.type, WIRE_ERROR);
    assert_int_equal(wire_decode_error(b + 8, h.length, &code, &msg, &mlen), 0);
    assert_int_equal(code, EPROTO);
    assert_int_equal(mlen, 9);
    assert_ptr_equal(msg, (const char *)b + 12);
    assert_memory_equal(msg, "bad frame", 9);

    /* An empty message. */
    assert_int_equal(wire_encode_error(b, ENOSPC, ""), 12);
    assert_int_equal(wire_decode_error(b + 8, 4, &code, &msg, &mlen), 0);
    assert_int_equal(code, ENOSPC);
    assert_int_equal(mlen, 0);

    /* Exactly the maximum is kept whole; anything longer is cut there. */
    for (int i = 0; i < 5000; i++)
        longmsg[i] = (char)('a' + i % 26);
    longmsg[5000] = '\0';
    static const size_t lens[] = { WIRE_ERROR_MESSAGE_MAX - 1, WIRE_ERROR_MESSAGE_MAX,
                                   WIRE_ERROR_MESSAGE_MAX + 1, 5000 };
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        size_t want = lens[i] < WIRE_ERROR_MESSAGE_MAX ? lens[i] : WIRE_ERROR_MESSAGE_MAX;
        char saved = longmsg[lens[i]];

        longmsg[lens[i]] = '\0';
        memset(b, 0xAA, CAP + 16);
        assert_int_equal(wire_encode_error(b, EMSGSIZE, longmsg), 12 + want);
        assert_int_equal(b[12 + want], 0xAA);
        assert_int_equal(wire_decode_header(b, WIRE_MAX_FRAME_BYTES, &h), 0);
        assert_int_equal(h.length, 4 + want);
        assert_int_equal(wire_decode_error(b + 8, h.length, &code, &msg, &mlen), 0);
        assert_int_equal(code, EMSGSIZE);
        assert_int_equal(mlen, want);
        assert_memory_equal(msg, longmsg, want);
        longmsg[lens[i]] = saved;
    }

    /* Shorter than the code. */
    for (size_t len = 0; len < WIRE_ERROR_FIXED; len++) {
        code = 99;
        msg = NULL;
        mlen = 99;
        assert_int_equal(wire_decode_error(b + 8, len, &code, &msg, &mlen), -EPROTO);
        assert_int_equal(code, 99);
        assert_null(msg);
        assert_int_equal(mlen, 99);
    }
    free(longmsg);
    free(b);
}

/* Builds an APPEND payload from a list of record lengths; record i is filled
 * with the byte (i * 7 + j) so that the iterator test can tell them apart.
 * extra bytes of junk are added at the end. */
static unsigned char *build_append(uint32_t count, const uint32_t *lens, size_t nlens,
                                   size_t extra, size_t *ret_len)
{
    size_t total = WIRE_APPEND_FIXED + extra;
    unsigned char *p, *q;

    for (size_t i = 0; i < nlens; i++)
        total += WIRE_RECORD_PREFIX + lens[i];
    p = malloc(total ? total : 1);
    assert_non_null(p);
    wire_put_u32(p, count);
    q = p + WIRE_APPEND_FIXED;
    for (size_t i = 0; i < nlens; i++) {
        wire_put_u32(q, lens[i]);
        q += WIRE_RECORD_PREFIX;
        for (uint32_t j = 0; j < lens[i]; j++)
            q[j] = (unsigned char)(i * 7 + j);
        q += lens[i];
    }
    memset(q, 0xEE, extra);
    *ret_len = total;
    return p;
}

static void expect_append(const unsigned char *p, size_t len, uint32_t max, int want_rc,
                          uint32_t want_count, uint32_t want_index, const char *want_why)
{
    uint32_t count = 0xDEAD, index = 0xBEEF;
    const char *why = NULL;
    int rc = wire_append_validate(p, len, max, &count, &index, &why);

    assert_int_equal(rc, want_rc);
    if (rc == 0) {
        assert_int_equal(count, want_count);
    } else {
        assert_int_equal(count, 0xDEAD); /* untouched on failure */
        assert_int_equal(index, want_index);
        assert_non_null(why);
        assert_string_equal(why, want_why);
    }
}

static void test_append_validate(void **state)
{
    unsigned char *p;
    size_t len;
    (void)state;

    {
        const uint32_t lens[] = { 1, 5, 300 };
        p = build_append(3, lens, 3, 0, &len);
        assert_int_equal(len, 4 + 3 * 4 + 306);
        expect_append(p, len, 300, 0, 3, 0, NULL);
        /* The limit is inclusive. */
        expect_append(p, len, 299, -EMSGSIZE, 0, 2, "record longer than max_record_bytes");
        /* Short by one byte: the last record runs past the end. */
        expect_append(p, len - 1, 300, -EPROTO, 0, 2, "record runs past the end of the frame");
        free(p);
    }
    /* Count 0, with and without bytes after it. */
    p = build_append(0, NULL, 0, 0, &len);
    expect_append(p, len, 100, -EPROTO, 0, 0, "APPEND frame with no records");
    free(p);
    p = build_append(0, NULL, 0, 5, &len);
    expect_append(p, len, 100, -EPROTO, 0, 0, "APPEND frame with no records");
    free(p);
    /* Shorter than the count. */
    for (size_t l = 0; l < WIRE_APPEND_FIXED; l++) {
        unsigned char four[4] = { 1, 0, 0, 0 };
        expect_append(four, l, 100, -EPROTO, 0, 0,
                      "APPEND payload shorter than its record count");
    }
    {
        /* A zero-length record (index 1). */
        const uint32_t lens[] = { 3, 0, 3 };
        p = build_append(3, lens, 3, 0, &len);
        expect_append(p, len, 100, -EPROTO, 0, 1, "empty record (records are 1 byte or more)");
        free(p);
    }
    {
        /* A record over the limit at index 2, even when its bytes are missing. */
        const uint32_t lens[] = { 10, 100, 101 };
        p = build_append(3, lens, 3, 0, &len);
        expect_append(p, len, 100, -EMSGSIZE, 0, 2, "record longer than max_record_bytes");
        expect_append(p, len, 101, 0, 3, 0, NULL);
        expect_append(p, len - 50, 100, -EMSGSIZE, 0, 2, "record longer than max_record_bytes");
        wire_put_u32(p + 4 + 14 + 104, 0xFFFFFFFFu);
        expect_append(p, len, 100, -EMSGSIZE, 0, 2, "record longer than max_record_bytes");
        expect_append(p, len, UINT32_MAX, -EPROTO, 0, 2,
                      "record runs past the end of the frame");
        free(p);
    }
    {
        /* Truncated prefix: count says 2, the second prefix has 0..3 bytes. */
        const uint32_t lens[] = { 8, 8 };
        p = build_append(2, lens, 2, 0, &len);
        for (size_t cut = 0; cut < WIRE_RECORD_PREFIX; cut++)
            expect_append(p, 4 + 12 + cut, 100, -EPROTO, 0, 1,
                          "record length prefix runs past the end of the frame");
        /* Truncated record: every length inside the second record. */
        for (size_t l = 4 + 12 + 4; l < len; l++)
            expect_append(p, l, 100, -EPROTO, 0, 1, "record runs past the end of the frame");
        expect_append(p, len, 100, 0, 2, 0, NULL);
        /* A count larger than what follows. */
        wire_put_u32(p, 3);
        expect_append(p, len, 100, -EPROTO, 0, 2,
                      "record length prefix runs past the end of the frame");
        wire_put_u32(p, 0xFFFFFFFFu);
        expect_append(p, len, 100, -EPROTO, 0, 2,
                      "record length prefix runs past the end of the frame");
        free(p);
    }
    {
        /* Trailing bytes after the last record: the index is the count. */
        const uint32_t lens[] = { 2, 2 };
        for (size_t extra = 1; extra <= 5; extra++) {
            p = build_append(2, lens, 2, extra, &len);
            expect_append(p, len, 100, -EPROTO, 0, 2, "bytes left over after the last record");
            free(p);
        }
        /* A count smaller than what follows is the same thing. */
        p = build_append(1, lens, 2, 0, &len);
        expect_append(p, len, 100, -EPROTO, 0, 1, "bytes left over after the last record");
        free(p);
    }
}

/* The largest record the protocol allows fits the largest frame exactly:
 * a daemon configured for 256 MiB records can announce a frame limit that
 * carries one. The buffer is allocated whole but only its first bytes are
 * touched. */
static void test_largest_record_fits(void **state)
{
    unsigned char hdr[WIRE_HEADER_SIZE];
    struct wire_header h;
    unsigned char *p = malloc(WIRE_MAX_FRAME_BYTES);
    uint32_t count = 0, index = 0;
    const char *why = NULL;
    (void)state;

    assert_non_null(p);
    wire_encode_header(hdr, WIRE_APPEND, WIRE_MAX_FRAME_BYTES);
    assert_int_equal(wire_decode_header(hdr, WIRE_MAX_FRAME_BYTES, &h), 0);
    assert_int_equal(h.length, WIRE_MAX_RECORD_BYTES + WIRE_APPEND_OVERHEAD);
    wire_put_u32(p, 1);
    wire_put_u32(p + WIRE_APPEND_FIXED, WIRE_MAX_RECORD_BYTES);
    assert_int_equal(wire_append_validate(p, WIRE_MAX_FRAME_BYTES, WIRE_MAX_RECORD_BYTES, &count,
                                          &index, &why),
                     0);
    assert_int_equal(count, 1);
    assert_int_equal(wire_append_validate(p, WIRE_MAX_FRAME_BYTES - 1, WIRE_MAX_RECORD_BYTES,
                                          &count, &index, &why),
                     -EPROTO);
    free(p);
}

static void test_append_iterator(void **state)
{
    enum { N = 200 };
    uint32_t lens[N];
    unsigned char *p;
    size_t len;
    uint32_t count = 0, index = 0;
    const char *why = NULL;
    struct wire_append_iter it;
    const unsigned char *rec;
    uint32_t rlen;
    (void)state;

    for (uint32_t i = 0; i < N; i++)
        lens[i] = 1 + (i * 37u) % 1000u;
    lens[N - 1] = 65536;
    p = build_append(N, lens, N, 0, &len);
    assert_int_equal(wire_append_validate(p, len, 65536, &count, &index, &why), 0);
    assert_int_equal(count, N);

    wire_append_iter_init(&it, p, len);
    size_t pos = WIRE_APPEND_FIXED;
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(wire_append_iter_next(&it, &rec, &rlen), 1);
        assert_int_equal(rlen, lens[i]);
        assert_ptr_equal(rec, p + pos + WIRE_RECORD_PREFIX);
        for (uint32_t j = 0; j < rlen; j++)
            if (rec[j] != (unsigned char)(i * 7 + j))
                fail_msg("record %u byte %u: 0x%02x", i, j, rec[j]);
        pos += WIRE_RECORD_PREFIX + rlen;
    }
    assert_int_equal(pos, len);
    rec = NULL;
    rlen = 12345;
    assert_int_equal(wire_append_iter_next(&it, &rec, &rlen), 0);
    assert_int_equal(wire_append_iter_next(&it, &rec, &rlen), 0);
    assert_null(rec);
    assert_int_equal(rlen, 12345);
    free(p);

    /* A single one-byte record. */
    {
        const uint32_t one[] = { 1 };
        p = build_append(1, one, 1, 0, &len);
        assert_int_equal(len, 9);
        assert_int_equal(wire_append_validate(p, len, 1, &count, &index, &why), 0);
        assert_int_equal(count, 1);
        wire_append_iter_init(&it, p, len);
        assert_int_equal(wire_append_iter_next(&it, &rec, &rlen), 1);
        assert_int_equal(rlen, 1);
        assert_int_equal(rec[0], 0);
        assert_ptr_equal(rec, p + 8);
        assert_int_equal(wire_append_iter_next(&it, &rec, &rlen), 0);
        free(p);
    }
}

static void test_type_names(void **state)
{
    (void)state;
    assert_string_equal(wire_type_name(WIRE_HELLO), "HELLO");
    assert_string_equal(wire_type_name(WIRE_WELCOME), "WELCOME");
    assert_string_equal(wire_type_name(WIRE_APPEND), "APPEND");
    assert_string_equal(wire_type_name(WIRE_ACK), "ACK");
    assert_string_equal(wire_type_name(WIRE_ERROR), "ERROR");
    assert_string_equal(wire_type_name(0), "unknown");
    assert_string_equal(wire_type_name(6), "unknown");
    assert_string_equal(wire_type_name(0x103), "unknown");
    /* The numbers are the protocol; they never change. */
    assert_int_equal(WIRE_HELLO, 1);
    assert_int_equal(WIRE_WELCOME, 2);
    assert_int_equal(WIRE_APPEND, 3);
    assert_int_equal(WIRE_ACK, 4);
    assert_int_equal(WIRE_ERROR, 5);
    assert_int_equal(WIRE_HEADER_SIZE, 8);
    assert_int_equal(WIRE_PROTOCOL_V1, 1);
    assert_int_equal(WIRE_PROTOCOL_V2, 2);
    assert_int_equal(WIRE_PROTOCOL_VERSION, 2);
    assert_int_equal(WIRE_FRAME_CEILING, 268435456 + 16);
    assert_int_equal(WIRE_MAX_RECORD_BYTES, 268435456);
    assert_int_equal(WIRE_APPEND_OVERHEAD, 8);
    assert_int_equal(WIRE_MAX_FRAME_BYTES, 268435456 + 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_reserved),
        cmocka_unit_test(test_header_unknown_type),
        cmocka_unit_test(test_header_length_limit),
        cmocka_unit_test(test_name_rule),
        cmocka_unit_test(test_hello_round_trip),
        cmocka_unit_test(test_hello_refused),
        cmocka_unit_test(test_welcome_round_trip),
        cmocka_unit_test(test_v2_hello_welcome),
        cmocka_unit_test(test_ack_round_trip),
        cmocka_unit_test(test_error_round_trip),
        cmocka_unit_test(test_append_validate),
        cmocka_unit_test(test_append_iterator),
        cmocka_unit_test(test_largest_record_fits),
        cmocka_unit_test(test_type_names),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
