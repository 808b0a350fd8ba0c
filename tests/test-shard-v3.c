/* Unit tests for version 3 of the shard format (common/shard_format.c): the
 * header with the producer's stream and the position of the shard's first
 * record, byte by byte; that versions 1 and 2 still read, as shards without
 * a stream; that the header's CRC covers the new fields and every truncated
 * header is still "more bytes needed"; and the positions the reader gives
 * records, also after a salvage skip of one record and after a resync in a
 * merged file that mixes version 2 and version 3 shards. The files are
 * memfds, read through the same reader as logctl. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "shard_format.h"
#include "bytebuf.h"
#include "shard-bytes.h"

/* ---- helpers ---- */

static const uint8_t stream_s[SHARD_STREAM_ID_SIZE] = {
    0x5e, 0x11, 0x02, 0x93, 0x44, 0xa5, 0x06, 0xf7, 0x08, 0x19, 0xaa, 0x3b, 0x0c, 0xdd, 0x0e, 0x9f,
};
static const uint8_t stream_t[SHARD_STREAM_ID_SIZE] = {
    0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa, 0x99, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x01,
};

/* A header of version (2 or 3); stream NULL for none. */
static struct shard_header make_header(const char *producer, uint64_t id, unsigned version,
                                       const uint8_t *stream, uint64_t first_position)
{
    struct shard_header h;

    memset(&h, 0, sizeof(h));
    h.version = (uint16_t)version;
    h.uid = 1000;
    h.gid = 100;
    h.pid = 4242;
    h.shard_id = id;
    h.created_ns = 1700000000123456789ull + id;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    if (stream)
        memcpy(h.stream_id, stream, SHARD_STREAM_ID_SIZE);
    h.first_position = first_position;
    return h;
}

/* Appends record i ("rec <i>"); returns its offset. */
static size_t add_record(struct bytebuf *b, uint64_t i)
{
    char text[32];
    size_t off = b->len;
    int n = snprintf(text, sizeof(text), "rec %" PRIu64, i);

    shard_encode_record(bytebuf_grow(b, SHARD_RECORD_HEADER + (size_t)n), text, (uint32_t)n,
                        1800000000000000000ull + i);
    return off;
}

static void add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records)
{
    struct shard_trailer t = {
        .shard_len = b->len - shard_start,
        .records = records,
        .newest_ns = 1800000000000000000ull,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

/* A sealed shard of n records; the offset of record i goes to rec_off[i]. */
static size_t add_shard(struct bytebuf *b, const struct shard_header *h, unsigned n, size_t *rec_off)
{
    size_t start = shard_bytes_add_header(b, h);

    for (unsigned i = 0; i < n; i++) {
        size_t off = add_record(b, i);
        if (rec_off)
            rec_off[i] = off;
    }
    add_trailer(b, start, n);
    return start;
}

/* ---- the header ---- */

static void test_v3_header_round_trip(void **state)
{
    struct shard_header h = make_header("web-1", 7, 3, stream_s, 123456789);
    struct shard_header got;
    unsigned char b[SHARD_HEADER_MAX];
    const char *why = NULL;
    size_t size = shard_encode_header(b, &h);
    (void)state;

    /* 46 + 24 + the name, the new fields between the fixed part and the
     * name, the CRC last over everything before it. */
    assert_int_equal(size, 75);
    assert_int_equal(shard_header_size_v(3, 5), 75);
    assert_int_equal(wire_get_u16(b + 8), 3);
    assert_int_equal(wire_get_u16(b + 10), 75);
    assert_int_equal(wire_get_u16(b + 40), 5);
    assert_memory_equal(b + 42, stream_s, 16);
    assert_true(wire_get_u64(b + 58) == 123456789);
    assert_memory_equal(b + 66, "web-1", 5);
    assert_int_equal(wire_get_u32(b + 71), crc32c(b, 71));

    memset(&got, 0x5A, sizeof(got));
    assert_int_equal(shard_decode_header(b, size, &got, &why), 0);
    assert_int_equal(got.version, 3);
    assert_int_equal(got.header_len, 75);
    assert_int_equal(got.uid, 1000);
    assert_int_equal(got.gid, 100);
    assert_int_equal(got.pid, 4242);
    assert_true(got.shard_id == 7);
    assert_true(got.created_ns == h.created_ns);
    assert_string_equal(got.producer, "web-1");
    assert_memory_equal(got.stream_id, stream_s, 16);
    assert_true(got.first_position == 123456789);
    assert_true(shard_header_has_stream(&got));

    /* Encoding the decoded header gives the same bytes. */
    {
        unsigned char again[SHARD_HEADER_MAX];

        assert_int_equal(shard_encode_header(again, &got), size);
        assert_memory_equal(again, b, size);
    }

    /* The largest version 3 header: a 64-byte name (version 4's is larger,
     * test-shard-v4.c). */
    {
        char name[65];

        memset(name, 'p', 64);
        name[64] = '\0';
        h = make_header(name, UINT64_MAX, 3, stream_t, SHARD_POSITION_LIMIT - 1);
        assert_int_equal(shard_header_size_v(3, 64), 134);
        assert_int_equal(shard_encode_header(b, &h), 134);
        assert_int_equal(shard_decode_header(b, 134, &got, &why), 0);
        assert_true(got.first_position == SHARD_POSITION_LIMIT - 1);
        assert_string_equal(got.producer, name);
    }

    /* Version 3 without a stream: all-zero id, position 0, no stream. */
    h = make_header("web-1", 7, 3, NULL, 0);
    assert_int_equal(shard_encode_header(b, &h), 75);
    assert_int_equal(shard_decode_header(b, 75, &got, &why), 0);
    assert_int_equal(got.version, 3);
    assert_false(shard_header_has_stream(&got));
    assert_true(got.first_position == 0);
}

/* What is written unless version 3 is asked for is version 2, byte for
 * byte as before: the stream fields are not written. */
static void test_default_writes_v2(void **state)
{
    static const unsigned versions[] = { 0, 1, 2, 4, 0xFFFF };
    struct shard_header plain = make_header("app", 9, 0, NULL, 0);
    unsigned char want[SHARD_HEADER_MAX], b[SHARD_HEADER_MAX];
    size_t size = shard_encode_header(want, &plain);
    (void)state;

    assert_int_equal(size, shard_header_size(3));
    assert_int_equal(wire_get_u16(want + 8), 2);
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        struct shard_header h = make_header("app", 9, versions[i], stream_s, 77);
        struct shard_header got;
        const char *why = NULL;

        assert_int_equal(shard_header_write_version(&h), 2);
        assert_int_equal(shard_encode_header(b, &h), size);
        assert_memory_equal(b, want, size);
        assert_int_equal(shard_decode_header(b, size, &got, &why), 0);
        assert_int_equal(got.version, 2);
        assert_false(shard_header_has_stream(&got));
        assert_true(got.first_position == 0);
    }
}

/* Version 1 and 2 headers decode as before, with no stream. */
static void test_v1_v2_read_without_stream(void **state)
{
    struct shard_header h = make_header("old.prod", 3, 2, NULL, 0);
    unsigned char b[SHARD_HEADER_MAX];
    static const uint8_t zero[SHARD_STREAM_ID_SIZE];
    (void)state;

    for (unsigned v = 1; v <= 2; v++) {
        struct shard_header got;
        const char *why = NULL;
        size_t size = shard_encode_header(b, &h);

        wire_put_u16(b + 8, (uint16_t)v);
        shard_bytes_fix_crc(b, size);
        memset(&got, 0x5A, sizeof(got));
        assert_int_equal(shard_decode_header(b, size, &got, &why), 0);
        assert_int_equal(got.version, v);
        assert_int_equal(got.header_len, 46 + 8);
        assert_string_equal(got.producer, "old.prod");
        assert_memory_equal(got.stream_id, zero, sizeof(zero));
        assert_true(got.first_position == 0);
        assert_false(shard_header_has_stream(&got));
    }
}

static void test_v3_header_refused(void **state)
{
    struct shard_header h = make_header("web-1", 7, 3, stream_s, 10);
    unsigned char good[SHARD_HEADER_MAX], b[SHARD_HEADER_MAX];
    size_t size = shard_encode_header(good, &h);
    (void)state;

    /* A first position from 2^63 up. */
    shard_bytes_refuse_u64(good, size, 58, SHARD_POSITION_LIMIT,
                           "first position out of range in shard header");
    shard_bytes_refuse_u64(good, size, 58, UINT64_MAX,
                           "first position out of range in shard header");

    /* A position without a stream. */
    memcpy(b, good, size);
    memset(b + 42, 0, 16);
    shard_bytes_fix_crc(b, size);
    shard_bytes_expect_bad_header(b, size, "first position without a stream in shard header");

    /* The version and the length must agree: a version 3 header called
     * version 2, and a version 3 header with a version 2 length. */
    shard_bytes_refuse_u16(good, size, 8, 2,
                           "shard header length does not match its producer name");
    shard_bytes_refuse_u16(good, size, 10, (uint16_t)(size - SHARD_HEADER_STREAM),
                           "shard header length does not match its producer name");

    /* Version 5 is nobody's yet. */
    shard_bytes_refuse_u16(good, size, 8, 5,
                           "unsupported shard format version");
}

/* The CRC covers the stream and the position: any change to them (without
 * fixing the CRC) is refused, every bit of them. */
static void test_v3_header_crc_covers_stream(void **state)
{
    struct shard_header h = make_header("web-1", 7, 3, stream_s, 42);
    unsigned char good[SHARD_HEADER_MAX], b[SHARD_HEADER_MAX];
    size_t size = shard_encode_header(good, &h);
    (void)state;

    for (size_t i = SHARD_HEADER_FIXED; i < SHARD_HEADER_FIXED + SHARD_HEADER_STREAM; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            memcpy(b, good, size);
            b[i] ^= (unsigned char)(1u << bit);
            shard_bytes_expect_bad_header(b, size, "shard header CRC mismatch");
        }
    }
    /* And every other byte still matters. */
    for (size_t i = 0; i < size; i++) {
        struct shard_header got;
        const char *why = NULL;

        memcpy(b, good, size);
        b[i] ^= 0x01;
        assert_int_equal(shard_decode_header(b, size, &got, &why), -EBADMSG);
    }
}

/* Every truncation of a version 3 header needs more bytes (-EAGAIN from the
 * decoder; -ENODATA, a torn tail, from the reader), as with version 2. */
static void test_v3_header_truncated(void **state)
{
    struct shard_header h = make_header("truncated", 1, 3, stream_s, 5);
    unsigned char b[SHARD_HEADER_MAX];
    size_t size = shard_encode_header(b, &h);
    (void)state;

    for (size_t n = 0; n < size; n++) {
        struct shard_header got;
        struct shard_reader *r = NULL;
        struct shard_item it;
        const char *why = NULL;
        uint64_t off;
        int fd;

        assert_int_equal(shard_decode_header(b, n, &got, &why), -EAGAIN);
        fd = shard_bytes_memfd(b, n);
        assert_int_equal(shard_reader_new(&r, fd), 0);
        assert_int_equal(shard_reader_next(r, &it), -ENODATA);
        shard_reader_error(r, &off, &why);
        assert_true(off == 0);
        assert_string_equal(why, n == 0 ? "empty file (no shard header)"
                                        : "file ends inside a shard header");
        shard_reader_free(r);
        close(fd);
    }
}

/* ---- positions ---- */

static void expect_record(struct shard_reader *r, uint64_t offset, uint64_t position)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_RECORD);
    assert_true(it.offset == offset);
    assert_true(it.position == position);
}

static void expect_kind(struct shard_reader *r, enum shard_item_kind kind, uint64_t offset)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, kind);
    assert_true(it.offset == offset);
    assert_true(it.position == 0);
}

/* Record i of a shard with a stream has position first_position + i; the
 * trailer gives the last one (first_position + records - 1). A shard
 * without a stream gives 0. */
static void test_positions_of_records(void **state)
{
    struct shard_header a = make_header("web", 1, 3, stream_s, 1000);
    struct shard_header none = make_header("web", 2, 3, NULL, 0);
    struct shard_header v2 = make_header("web", 3, 2, NULL, 0);
    size_t ra[5], rn[2], rv[2];
    struct bytebuf b = { 0 };
    struct shard_reader *r = NULL;
    struct shard_item it;
    size_t sa = add_shard(&b, &a, 5, ra);
    size_t sn = add_shard(&b, &none, 2, rn);
    size_t sv = add_shard(&b, &v2, 2, rv);
    int fd = shard_bytes_memfd(b.p, b.len);
    (void)state;

    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_HEADER);
    assert_true(it.offset == sa && it.header->first_position == 1000);
    for (unsigned i = 0; i < 5; i++)
        expect_record(r, ra[i], 1000 + i);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_true(it.header->first_position + it.trailer->records - 1 == 1004);

    expect_kind(r, SHARD_ITEM_HEADER, sn);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, rn[i], 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    expect_kind(r, SHARD_ITEM_HEADER, sv);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, rv[i], 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(shard_reader_next(r, &it), 0);
    shard_reader_free(r);
    close(fd);
    free(b.p);
}

/* A merged file of version 2 and version 3 shards with damage in two
 * places: a record whose CRC fails with its framing intact (skipped alone:
 * it keeps its position, and the records after it keep theirs) and a bogus
 * length (resync: the next shard's header gives the positions again). */
static void test_positions_after_salvage(void **state)
{
    struct shard_header old = make_header("web", 1, 2, NULL, 0);
    struct shard_header b1 = make_header("web", 2, 3, stream_s, 100);
    struct shard_header b2 = make_header("web", 3, 3, stream_s, 105);
    struct shard_header other = make_header("db", 4, 3, stream_t, 7);
    struct shard_header tail = make_header("web", 5, 2, NULL, 0);
    size_t r_old[3], r1[5], r2[4], r_other[2], r_tail[1];
    struct bytebuf b = { 0 };
    struct shard_reader *r = NULL;
    struct shard_item it;
    struct shard_skip skip;
    size_t s_old = add_shard(&b, &old, 3, r_old);
    size_t s1 = add_shard(&b, &b1, 5, r1);
    size_t s2 = add_shard(&b, &b2, 4, r2);
    size_t s_other = add_shard(&b, &other, 2, r_other);
    size_t s_tail = add_shard(&b, &tail, 1, r_tail);
    int fd;
    (void)state;

    b.p[r1[1] + SHARD_RECORD_HEADER] ^= 0x40;  /* a payload byte: CRC fails */
    wire_put_u32(b.p + r2[1], SHARD_RECORD_MAX + 1); /* framing lost */
    fd = shard_bytes_memfd(b.p, b.len);
    assert_int_equal(shard_reader_new(&r, fd), 0);

    expect_kind(r, SHARD_ITEM_HEADER, s_old);
    for (unsigned i = 0; i < 3; i++)
        expect_record(r, r_old[i], 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);

    expect_kind(r, SHARD_ITEM_HEADER, s1);
    expect_record(r, r1[0], 100);
    assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
    assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
    assert_true(skip.offset == r1[1] && skip.records == 1 && !skip.resync);
    assert_true(skip.position == 101);
    for (unsigned i = 2; i < 5; i++)
        expect_record(r, r1[i], 100 + i);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER); /* it counts the skipped one */

    expect_kind(r, SHARD_ITEM_HEADER, s2);
    expect_record(r, r2[0], 105);
    assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
    assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
    assert_true(skip.offset == r2[1] && skip.records == 0 && skip.resync);
    assert_true(skip.position == 0);
    assert_true(skip.offset + skip.bytes == s_other);

    expect_kind(r, SHARD_ITEM_HEADER, s_other);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, r_other[i], 7 + i);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);

    expect_kind(r, SHARD_ITEM_HEADER, s_tail);
    expect_record(r, r_tail[0], 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(shard_reader_next(r, &it), 0);
    shard_reader_free(r);
    close(fd);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v3_header_round_trip),
        cmocka_unit_test(test_default_writes_v2),
        cmocka_unit_test(test_v1_v2_read_without_stream),
        cmocka_unit_test(test_v3_header_refused),
        cmocka_unit_test(test_v3_header_crc_covers_stream),
        cmocka_unit_test(test_v3_header_truncated),
        cmocka_unit_test(test_positions_of_records),
        cmocka_unit_test(test_positions_after_salvage),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
