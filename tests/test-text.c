/* Unit tests for common/text.c, the text helpers of the JSON code and of
 * --json output: UTF-8 checks and encoding, base64 and RFC 3339 times. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "text.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

/* 2026-12-01T10:00:00Z in ns since the epoch. */
#define T_1000 (1796119200ull * 1000000000ull)

static void test_decimal(void **state)
{
    uint64_t v = 7;

    (void)state;
    assert_int_equal(decimal_parse_u64("0", 1, true, &v), 0);
    assert_true(v == 0);
    assert_int_equal(decimal_parse_u64("18446744073709551615", 20, true, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(decimal_parse_u64("18446744073709551616", 20, false, &v), -EBADMSG);
    assert_int_equal(decimal_parse_u64("007", 3, false, &v), 0);
    assert_true(v == 7);
    assert_int_equal(decimal_parse_u64("007", 3, true, &v), -EBADMSG);
    assert_int_equal(decimal_parse_u64("", 0, false, &v), -EBADMSG);
    assert_int_equal(decimal_parse_u64("+1", 2, false, &v), -EBADMSG);
    assert_int_equal(decimal_parse_u64("1 ", 2, false, &v), -EBADMSG);
    assert_int_equal(decimal_parse_u64("000000000000000000001", 21, false, &v), -EBADMSG);
    assert_true(v == 7); /* untouched on failure */
}

static void test_decimal_format(void **state)
{
    static const uint64_t values[] = { 0, 9, 10, 4096, UINT64_MAX };
    static const char *const spelled[] = { "0", "9", "10", "4096", "18446744073709551615" };
    char out[21];
    uint64_t back;

    (void)state;
    for (size_t i = 0; i < N_ELEMENTS(values); i++) {
        memset(out, 'x', sizeof(out));
        size_t n = decimal_format_u64(out, values[i]);
        assert_int_equal(n, strlen(spelled[i]));
        assert_string_equal(out, spelled[i]);
        /* The parser's canonical spelling: what one writes the other reads. */
        assert_int_equal(decimal_parse_u64(out, n, true, &back), 0);
        assert_true(back == values[i]);
    }
}

static void test_utf8(void **state)
{
    static const struct {
        const char *s;
        size_t n;
        bool valid;
    } cases[] = {
        { "", 0, true },
        { "plain ascii", 11, true },
        { "caf\xc3\xa9", 5, true },                   /* é */
        { "\xe2\x82\xac", 3, true },                  /* € */
        { "\xf0\x9f\x98\x80", 4, true },              /* U+1F600 */
        { "\xf4\x8f\xbf\xbf", 4, true },              /* U+10FFFF */
        { "a\0b", 3, true },                          /* NUL is a character */
        { "\xff", 1, false },
        { "\x80", 1, false },                         /* lone continuation */
        { "\xc0\x80", 2, false },                     /* overlong NUL */
        { "\xe0\x80\x80", 3, false },                 /* overlong */
        { "\xed\xa0\x80", 3, false },                 /* surrogate U+D800 */
        { "\xf4\x90\x80\x80", 4, false },             /* above U+10FFFF */
        { "\xc3", 1, false },                         /* truncated */
        { "\xe2\x82", 2, false },
        { "ok\xc3(", 4, false },                      /* bad continuation */
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (utf8_valid(cases[i].s, cases[i].n) != cases[i].valid)
            fail_msg("case %zu: expected %s", i, cases[i].valid ? "valid" : "invalid");
}

static void test_base64(void **state)
{
    static const char *const want[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy" };
    char out[64];
    (void)state;

    for (size_t n = 0; n <= 6; n++) {
        assert_int_equal(base64_encoded_len(n), strlen(want[n]));
        base64_encode("foobar", n, out);
        assert_string_equal(out, want[n]);
    }
    base64_encode("\xff\xfe\x00\x01", 4, out);
    assert_string_equal(out, "//4AAQ==");
}

/* Every code point at the edges of each UTF-8 length is encoded in that
 * many bytes, and the sequence is read back as one of that length. */
static void test_utf8_encode(void **state)
{
    static const struct {
        uint32_t cp;
        size_t len;
    } cases[] = {
        { 0, 1 },       { 0x7f, 1 },     { 0x80, 2 },      { 0x7ff, 2 },      { 0x800, 3 },
        { 0xd7ff, 3 },  { 0xe000, 3 },   { 0xfffd, 3 },    { 0xffff, 3 },     { 0x10000, 4 },
        { 0x10ffff, 4 },
    };
    char out[4];
    (void)state;

    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        size_t n = utf8_encode(out, cases[i].cp);

        if (n != cases[i].len)
            fail_msg("U+%04X: %zu bytes, expected %zu", (unsigned)cases[i].cp, n, cases[i].len);
        assert_int_equal(utf8_sequence_len((const unsigned char *)out, n), n);
        /* One byte short is no sequence. */
        if (n > 1)
            assert_int_equal(utf8_sequence_len((const unsigned char *)out, n - 1), 0);
    }
    assert_int_equal(utf8_encode(out, 0x20ac), 3);
    assert_memory_equal(out, "\xe2\x82\xac", 3);
}

/* Every scalar value survives encoding and validation; no surrogate is
 * valid when encoded the same way. */
static void test_utf8_every_code_point(void **state)
{
    char out[4];
    (void)state;

    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        size_t n = utf8_encode(out, cp);
        bool surrogate = cp >= 0xd800 && cp <= 0xdfff;

        if (utf8_valid(out, n) == surrogate)
            fail_msg("U+%04X: %s", (unsigned)cp, surrogate ? "accepted" : "refused");
    }
}

static void test_rfc3339(void **state)
{
    char buf[40];
    (void)state;

    assert_int_equal(rfc3339_format(T_1000 + 1234, 9, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.000001234Z");
    assert_int_equal(rfc3339_format(T_1000 + 123456789, 6, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.123456Z");
    assert_int_equal(rfc3339_format(T_1000, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00Z");
    assert_int_equal(rfc3339_format(T_1000, 9, buf, 10), -EOVERFLOW);
    assert_int_equal(rfc3339_format(0, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00Z");
    assert_int_equal(rfc3339_format(0, 3, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00.000Z");
    /* The fraction is cut, not rounded: a time never moves to the next
     * second. */
    assert_int_equal(rfc3339_format(T_1000 + 999999999, 3, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.999Z");
    assert_int_equal(rfc3339_format(T_1000 + 1, 1, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.0Z");
    /* The largest time there is. */
    assert_int_equal(rfc3339_format(UINT64_MAX, 9, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2554-07-21T23:34:33.709551615Z");
    /* Exactly the room needed, and one byte less. */
    assert_int_equal(rfc3339_format(T_1000, 0, buf, 21), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00Z");
    assert_int_equal(rfc3339_format(T_1000, 0, buf, 20), -EOVERFLOW);
    assert_int_equal(rfc3339_format(T_1000, 9, buf, 31), 0);
    assert_int_equal(rfc3339_format(T_1000, 9, buf, 30), -EOVERFLOW);
    assert_int_equal(rfc3339_format(T_1000, 10, buf, sizeof(buf)), -EOVERFLOW);
}

/* A decoder for the test only: base64_encode's output read back. */
static size_t base64_decode_for_test(const char *in, unsigned char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(in), o = 0;

    assert_int_equal(n % 4, 0);
    for (size_t i = 0; i < n; i += 4) {
        uint32_t x = 0;
        int pad = 0;

        for (size_t k = 0; k < 4; k++) {
            const char *c = in[i + k] == '=' ? NULL : strchr(abc, in[i + k]);

            if (!c) {
                assert_int_equal(in[i + k], '=');
                assert_true(i + 4 == n); /* padding only at the end */
                pad++;
            }
            x = x << 6 | (c ? (uint32_t)(c - abc) : 0);
        }
        out[o++] = (unsigned char)(x >> 16);
        if (pad < 2)
            out[o++] = (unsigned char)(x >> 8);
        if (pad < 1)
            out[o++] = (unsigned char)x;
    }
    return o;
}

static void test_base64_round_trip(void **state)
{
    unsigned char in[256], back[256];
    char out[400];
    (void)state;

    for (size_t i = 0; i < sizeof(in); i++)
        in[i] = (unsigned char)(255 - i);
    for (size_t n = 0; n <= sizeof(in); n++) {
        base64_encode(in, n, out);
        assert_int_equal(strlen(out), base64_encoded_len(n));
        assert_int_equal(base64_decode_for_test(out, back), n);
        assert_memory_equal(back, in, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decimal),
        cmocka_unit_test(test_decimal_format),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_utf8_encode),
        cmocka_unit_test(test_utf8_every_code_point),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_base64_round_trip),
        cmocka_unit_test(test_rfc3339),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
