/* Unit tests for common/crc32c.c: the published CRC32C check values, the
 * table and the SSE4.2 paths against each other and against a bit-by-bit
 * reference, at many lengths and misalignments, and crc32c_extend in pieces
 * against one shot. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crc32c.h"

/* The slowest possible CRC32C, independent of the table and the instruction,
 * so that the test can fail even on a CPU without SSE4.2. */
static uint32_t crc32c_bitwise(const unsigned char *p, size_t len)
{
    uint32_t crc = 0xFFFFFFFFu;

    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* A fixed-seed generator, so that a failure can be reproduced. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng_next(void)
{
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng_state = x;
    return x;
}

static void fill_random(unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (unsigned char)(rng_next() >> 32);
}

static int teardown_software(void **state)
{
    (void)state;
    crc32c_force_software(0);
    return 0;
}

static void check_vectors(void)
{
    unsigned char buf[32];

    assert_int_equal(crc32c("123456789", 9), 0xE3069283u);

    memset(buf, 0, sizeof(buf));
    assert_int_equal(crc32c(buf, sizeof(buf)), 0x8A9136AAu);

    memset(buf, 0xFF, sizeof(buf));
    assert_int_equal(crc32c(buf, sizeof(buf)), 0x62A8AB43u);

    for (unsigned i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)i;
    assert_int_equal(crc32c(buf, sizeof(buf)), 0x46DD794Eu);

    /* The CRC of nothing is 0, and extending by nothing changes nothing. */
    assert_int_equal(crc32c(buf, 0), 0u);
    assert_int_equal(crc32c_extend(0xE3069283u, buf, 0), 0xE3069283u);
}

static void test_vectors_default(void **state)
{
    (void)state;
    crc32c_force_software(0);
    check_vectors();
}

static void test_vectors_software(void **state)
{
    (void)state;
    crc32c_force_software(1);
    check_vectors();
}

/* Both paths against the reference, at every length up to 300, odd large
 * lengths, and every start offset modulo 16. */
static void test_paths_agree(void **state)
{
    enum { MAXLEN = 70000, PAD = 16 };
    static unsigned char buf[MAXLEN + PAD];
    static const size_t big[] = { 511, 512, 513, 1023, 4095, 4096, 4097, 65535, 65536, 69999 };
    (void)state;

    fill_random(buf, sizeof(buf));
    for (size_t align = 0; align < PAD; align++) {
        for (size_t len = 0; len <= 300 + sizeof(big) / sizeof(big[0]); len++) {
            size_t n = len <= 300 ? len : big[len - 301];
            const unsigned char *p = buf + align;
            uint32_t want = crc32c_bitwise(p, n);
            uint32_t sw, hw;

            crc32c_force_software(1);
            sw = crc32c(p, n);
            crc32c_force_software(0);
            hw = crc32c(p, n);
            if (sw != want || hw != want)
                fail_msg("len %zu align %zu: reference %08x software %08x default %08x", n,
                         align, want, sw, hw);
        }
    }
}

/* Splitting a buffer anywhere gives the same CRC as one call, on both paths
 * and when the pieces switch paths. */
static void test_extend_pieces(void **state)
{
    enum { LEN = 257 };
    unsigned char buf[LEN + 8];
    (void)state;

    fill_random(buf, sizeof(buf));
    for (int mode = 0; mode < 3; mode++) {
        const unsigned char *p = buf + (mode == 2 ? 3 : 0);
        uint32_t whole = crc32c_bitwise(p, LEN);

        for (size_t cut = 0; cut <= LEN; cut++) {
            uint32_t c;

            crc32c_force_software(mode == 1);
            c = crc32c_extend(0, p, cut);
            if (mode == 2)
                crc32c_force_software(1);
            c = crc32c_extend(c, p + cut, LEN - cut);
            if (c != whole)
                fail_msg("mode %d cut %zu: %08x, want %08x", mode, cut, c, whole);
        }
        /* Three pieces at every pair of cuts in the first 40 bytes. */
        for (size_t a = 0; a < 40; a++) {
            for (size_t b = a; b < 40; b++) {
                uint32_t c;

                crc32c_force_software(mode == 1);
                c = crc32c_extend(0, p, a);
                c = crc32c_extend(c, p + a, b - a);
                c = crc32c_extend(c, p + b, LEN - b);
                if (c != whole)
                    fail_msg("mode %d cuts %zu,%zu: %08x, want %08x", mode, a, b, c, whole);
            }
        }
        /* One byte at a time. */
        {
            uint32_t c = 0;

            crc32c_force_software(mode == 1);
            for (size_t i = 0; i < LEN; i++)
                c = crc32c_extend(c, p + i, 1);
            assert_int_equal(c, whole);
        }
    }
    crc32c_force_software(0);
    assert_int_equal(crc32c_extend(crc32c_extend(0, "1234", 4), "56789", 5), 0xE3069283u);
}

/* Three CRCs at once against three single ones, on both paths: lengths
 * equal and unequal (which one is shortest changes where the side-by-side
 * part ends), at odd offsets, from non-zero starting values. */
static void test_extend_three(void **state)
{
    enum { MAXLEN = 200 };
    static unsigned char buf[3][MAXLEN + 8];
    static const size_t lens[] = { 0, 1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 64, 128, 129, 200 };
    const size_t nl = sizeof(lens) / sizeof(lens[0]);
    (void)state;

    for (int k = 0; k < 3; k++)
        fill_random(buf[k], sizeof(buf[k]));
    for (int soft = 0; soft < 2; soft++) {
        crc32c_force_software(soft);
        for (size_t a = 0; a < nl; a++) {
            for (size_t b = 0; b < nl; b++) {
                for (size_t c = 0; c < nl; c++) {
                    const size_t len[3] = { lens[a], lens[b], lens[c] };
                    const void *data[3] = { buf[0] + 1, buf[1] + 2 + a % 5, buf[2] + 7 };
                    uint32_t crc[3] = { 0, 0x12345678u, (uint32_t)(a * 977 + c) };
                    uint32_t want[3];

                    for (int k = 0; k < 3; k++)
                        want[k] = crc32c_extend(crc[k], data[k], len[k]);
                    crc32c_extend3(crc, data, len);
                    for (int k = 0; k < 3; k++)
                        if (crc[k] != want[k])
                            fail_msg("software %d lengths %zu,%zu,%zu: lane %d %08x, want %08x",
                                     soft, len[0], len[1], len[2], k, crc[k], want[k]);
                }
            }
        }
    }
    /* Against the reference, so that both being wrong alike is caught. */
    crc32c_force_software(0);
    {
        const size_t len[3] = { 128, 100, 129 };
        const void *data[3] = { buf[0], buf[1] + 3, buf[2] + 5 };
        uint32_t crc[3] = { 0, 0, 0 };

        crc32c_extend3(crc, data, len);
        assert_int_equal(crc[0], crc32c_bitwise(buf[0], 128));
        assert_int_equal(crc[1], crc32c_bitwise(buf[1] + 3, 100));
        assert_int_equal(crc[2], crc32c_bitwise(buf[2] + 5, 129));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_vectors_default, teardown_software),
        cmocka_unit_test_teardown(test_vectors_software, teardown_software),
        cmocka_unit_test_teardown(test_paths_agree, teardown_software),
        cmocka_unit_test_teardown(test_extend_pieces, teardown_software),
        cmocka_unit_test_teardown(test_extend_three, teardown_software),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
