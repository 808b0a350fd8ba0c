/* Unit tests for the codec of common/shard_format.c: the shard header,
 * record and seal trailer encodings byte by byte, and every reason a header
 * is refused. The reader over real files is tested in test-shard-reader.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "shard_format.h"
#include "shard-fixture.h"

/* ---- header and record encoding ---- */

static void test_header_round_trip(void **state)
{
    struct shard_header h = make_header("web-1", 0), got;
    unsigned char b[SHARD_HEADER_MAX + 8];
    const char *why = NULL;
    (void)state;

    memset(b, 0xAA, sizeof(b));
    assert_int_equal(shard_encode_header(b, &h), 51);
    assert_int_equal(b[51], 0xAA);
    assert_memory_equal(b,
                        "LOGSHRD\x01"               /* magic */
                        "\x02\x00"                  /* version */
                        "\x33\x00"                  /* header_len 51 */
                        "\xe8\x03\x00\x00"          /* uid 1000 */
                        "\x64\x00\x00\x00"          /* gid 100 */
                        "\x92\x10\x00\x00"          /* pid 4242 */
                        "\xef\xcd\xab\x89\x67\x45\x23\x01" /* shard id */
                        "\x15\xcd\x85\x3d\xfe\x9c\x97\x17" /* created_ns */
                        "\x05\x00"                  /* producer_len */
                        "web-1",
                        47);
    assert_int_equal(wire_get_u32(b + 47), crc32c(b, 47));

    memset(&got, 0x5A, sizeof(got));
    assert_int_equal(shard_decode_header(b, 51, &got, &why), 0);
    assert_int_equal(got.version, 2);
    assert_int_equal(got.header_len, 51);
    assert_int_equal(got.uid, 1000);
    assert_int_equal(got.gid, 100);
    assert_int_equal(got.pid, 4242);
    assert_true(got.shard_id == 0x0123456789ABCDEFull);
    assert_true(got.created_ns == 1700000000123456789ull);
    assert_int_equal(got.producer_len, 5);
    assert_string_equal(got.producer, "web-1");
    /* More bytes than the header is fine (records follow). */
    assert_int_equal(shard_decode_header(b, sizeof(b), &got, &why), 0);
    assert_int_equal(got.header_len, 51);

    /* The longest name gives the largest version 2 header (version 3,
     * with its stream, is larger: test-shard-v3.c). */
    {
        char name[65];
        memset(name, 'p', 64);
        name[64] = '\0';
        h = make_header(name, 9);
        h.uid = h.gid = h.pid = UINT32_MAX;
        h.shard_id = h.created_ns = UINT64_MAX;
        assert_int_equal(shard_encode_header(b, &h), shard_header_size(64));
        assert_int_equal(shard_header_size(64), 110);
        assert_int_equal(shard_decode_header(b, shard_header_size(64), &got, &why), 0);
        assert_int_equal(got.header_len, 110);
        assert_int_equal(got.uid, UINT32_MAX);
        assert_true(got.shard_id == UINT64_MAX);
        assert_true(got.created_ns == UINT64_MAX);
        assert_string_equal(got.producer, name);
    }
}

/* Re-encodes the CRC after a field was changed on purpose. */
static void fix_crc(unsigned char *b, size_t size)
{
    wire_put_u32(b + size - 4, crc32c(b, size - 4));
}

static void expect_bad_header(const unsigned char *b, size_t avail, const char *want_why)
{
    struct shard_header got, sentinel;
    const char *why = NULL;

    memset(&sentinel, 0x5A, sizeof(sentinel));
    got = sentinel;
    assert_int_equal(shard_decode_header(b, avail, &got, &why), -EBADMSG);
    assert_non_null(why);
    assert_string_equal(why, want_why);
    assert_memory_equal(&got, &sentinel, sizeof(got));
}

static void test_header_refused(void **state)
{
    struct shard_header h = make_header("web-1", 0);
    unsigned char good[64], b[64];
    size_t size = shard_encode_header(good, &h);
    (void)state;

    /* Bad magic, in each of its bytes. */
    for (size_t i = 0; i < SHARD_MAGIC_SIZE; i++) {
        memcpy(b, good, size);
        b[i] ^= 0x20;
        expect_bad_header(b, size, "no shard header (bad magic)");
    }
    /* A version no reader knows, with a correct CRC. */
    static const uint16_t versions[] = { 0, 5, 0x0101, 0x0201, 0xFFFF };
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        memcpy(b, good, size);
        wire_put_u16(b + 8, versions[i]);
        fix_crc(b, size);
        expect_bad_header(b, size, "unsupported shard format version");
    }
    /* Producer name length 0 and 65. */
    memcpy(b, good, size);
    wire_put_u16(b + 40, 0);
    wire_put_u16(b + 10, 46);
    expect_bad_header(b, size, "producer name length out of range in shard header");
    wire_put_u16(b + 40, 65);
    wire_put_u16(b + 10, 111);
    expect_bad_header(b, size, "producer name length out of range in shard header");
    wire_put_u16(b + 40, 0xFFFF);
    expect_bad_header(b, size, "producer name length out of range in shard header");
    /* header_len that does not match the name. */
    static const uint16_t lens[] = { 0, 50, 52, 110, 0xFFFF };
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memcpy(b, good, size);
        wire_put_u16(b + 10, lens[i]);
        fix_crc(b, size);
        expect_bad_header(b, size, "shard header length does not match its producer name");
    }
    /* A name that breaks the rule, even with a correct CRC. */
    {
        struct shard_header bad = make_header(".x", 0);
        size_t n = shard_encode_header(b, &bad);
        expect_bad_header(b, n, "producer name in shard header breaks the naming rule");
        bad = make_header("a/b", 0);
        n = shard_encode_header(b, &bad);
        expect_bad_header(b, n, "producer name in shard header breaks the naming rule");
        memcpy(bad.producer, "a\0b", 4);
        n = shard_encode_header(b, &bad);
        expect_bad_header(b, n, "producer name in shard header breaks the naming rule");
    }
}

/* Any single flipped bit anywhere in the header is caught; outside the
 * fields checked before it, by the CRC. */
static void test_header_every_byte_flipped(void **state)
{
    struct shard_header h = make_header("web-1", 0);
    unsigned char good[64], b[64];
    size_t size = shard_encode_header(good, &h);
    (void)state;

    for (size_t i = 0; i < size; i++) {
        for (int bit = 0; bit < 8; bit++) {
            struct shard_header got;
            const char *why = NULL;
            int rc;

            memcpy(b, good, size);
            b[i] ^= (unsigned char)(1u << bit);
            rc = shard_decode_header(b, size, &got, &why);
            if (rc != -EBADMSG)
                fail_msg("byte %zu bit %d flipped: %d", i, bit, rc);
            assert_non_null(why);
            if (i >= 12 && i != 40 && i != 41)
                assert_string_equal(why, "shard header CRC mismatch");
        }
    }
}

static void test_header_short_input(void **state)
{
    struct shard_header h = make_header("web-1", 0), got, sentinel;
    unsigned char b[64];
    size_t size = shard_encode_header(b, &h);
    (void)state;

    memset(&sentinel, 0x5A, sizeof(sentinel));
    for (size_t avail = 0; avail < size; avail++) {
        const char *why = NULL;

        got = sentinel;
        if (shard_decode_header(b, avail, &got, &why) != -EAGAIN)
            fail_msg("avail %zu: not -EAGAIN", avail);
        assert_memory_equal(&got, &sentinel, sizeof(got));
    }
}

/* A short input that is not a shard header must be refused without reading
 * past avail bytes. The bytes sit at the very end of a page followed by an
 * inaccessible one, so reading beyond them faults in every build. */
static void test_header_short_garbage_stays_in_bounds(void **state)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *map = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    (void)state;

    assert_true(map != MAP_FAILED);
    assert_int_equal(mprotect(map + page, (size_t)page, PROT_NONE), 0);
    for (size_t avail = 1; avail < SHARD_MAGIC_SIZE; avail++) {
        unsigned char *p = map + page - avail;
        struct shard_header got;
        const char *why = NULL;

        memset(p, 'X', avail);
        assert_int_equal(shard_decode_header(p, avail, &got, &why), -EBADMSG);
        assert_string_equal(why, "no shard header (bad magic)");
    }
    assert_int_equal(munmap(map, (size_t)page * 2), 0);
}

static void test_record_encode(void **state)
{
    unsigned char b[SHARD_RECORD_HEADER + 5 + 4];
    unsigned char covered[4 + 8 + 5];
    (void)state;

    memset(b, 0xAA, sizeof(b));
    assert_int_equal(shard_encode_record(b, "hello", 5, 0x1122334455667788ull), 21);
    assert_int_equal(b[21], 0xAA);
    assert_memory_equal(b, "\x05\x00\x00\x00", 4);
    assert_memory_equal(b + 8, "\x88\x77\x66\x55\x44\x33\x22\x11" "hello", 13);
    /* The CRC covers the length, the timestamp and the payload, in that order. */
    memcpy(covered, "\x05\x00\x00\x00\x88\x77\x66\x55\x44\x33\x22\x11" "hello", 17);
    assert_int_equal(wire_get_u32(b + 4), crc32c(covered, sizeof(covered)));
    assert_int_equal(wire_get_u32(b + 4), 0x10786024u);

    /* The magic read as a record length is far over the record limit. */
    assert_true(wire_get_u32((const unsigned char *)SHARD_MAGIC) > SHARD_RECORD_MAX);
    assert_int_equal(SHARD_RECORD_MAX, 268435456);
    assert_int_equal(SHARD_RECORD_HEADER, 16);
}

/* Records encoded without their CRC and summed later, any number at once
 * (three side by side, the rest one by one), with and without credentials,
 * carry exactly the bytes shard_encode_record*() writes. */
static void test_records_summed_later(void **state)
{
    enum { MAXREC = 9, PAYLOAD = 300 };
    static unsigned char want[MAXREC][SHARD_RECORD_HEADER + SHARD_RECORD_CREDS + PAYLOAD];
    static unsigned char got[MAXREC][SHARD_RECORD_HEADER + SHARD_RECORD_CREDS + PAYLOAD + 2];
    unsigned char payload[PAYLOAD];
    (void)state;

    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (unsigned char)(i * 131 + 7);
    for (size_t n = 0; n <= MAXREC; n++) {
        unsigned char *rec[MAXREC] = { NULL };
        size_t size[MAXREC] = { 0 };

        for (size_t k = 0; k < n; k++) {
            uint32_t len = (uint32_t)(1 + (k * 37 + n * 11) % PAYLOAD);
            const struct shard_creds creds = { .pid = (uint32_t)(100 + k), .uid = 1000,
                                               .gid = (uint32_t)n };
            bool with_creds = (k + n) % 3 == 1;
            uint64_t ts = 0x1122334455667788ull + k;

            /* At an odd address in half the records. */
            rec[k] = got[k] + (k & 1);
            memset(rec[k], 0xEE, sizeof(got[k]) - 1); /* the record and a byte past it */
            if (with_creds) {
                size[k] = shard_encode_record_creds(want[k], payload, len, ts, &creds);
                assert_int_equal(shard_encode_record_creds_unsummed(rec[k], payload, len, ts,
                                                                    &creds),
                                 size[k]);
            } else {
                size[k] = shard_encode_record(want[k], payload, len, ts);
                assert_int_equal(shard_encode_record_unsummed(rec[k], payload, len, ts),
                                 size[k]);
            }
            assert_int_equal(wire_get_u32(rec[k] + 4), 0);
        }
        shard_records_sum(rec, n);
        for (size_t k = 0; k < n; k++) {
            if (memcmp(rec[k], want[k], size[k]) != 0)
                fail_msg("%zu records: record %zu differs (CRC %08x, want %08x)", n, k,
                         wire_get_u32(rec[k] + 4), wire_get_u32(want[k] + 4));
            assert_int_equal(rec[k][size[k]], 0xEE);
        }
    }
}

/* ---- seal trailer ---- */

static void test_trailer_size(void **state)
{
    (void)state;
    assert_int_equal(shard_trailer_size(100, 0), SHARD_TRAILER_MIN);
    assert_int_equal(shard_trailer_size(100, 1), SHARD_TRAILER_MIN);
    assert_int_equal(shard_trailer_size(100, 4096), 4096 - 100);
    /* Too little room before the boundary: the next block. */
    assert_int_equal(shard_trailer_size(4096 - 39, 4096), 39 + 4096);
    assert_int_equal(shard_trailer_size(4096 - 40, 4096), 40);
    assert_int_equal(shard_trailer_size(4096, 4096), 4096);
    for (uint64_t len = 47; len < 3 * 65536; len += 997) {
        static const size_t aligns[] = { 512, 4096, 65536 };
        for (size_t i = 0; i < 3; i++) {
            size_t t = shard_trailer_size(len, aligns[i]);
            assert_true(t >= SHARD_TRAILER_MIN && t < SHARD_TRAILER_MAX);
            assert_int_equal((len + t) % aligns[i], 0);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_round_trip),
        cmocka_unit_test(test_header_refused),
        cmocka_unit_test(test_header_every_byte_flipped),
        cmocka_unit_test(test_header_short_input),
        cmocka_unit_test(test_record_encode),
        cmocka_unit_test(test_records_summed_later),
        /* Last: when it finds the bug it looks for, it may end the program. */
        cmocka_unit_test(test_header_short_garbage_stays_in_bounds),
        cmocka_unit_test(test_trailer_size),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
