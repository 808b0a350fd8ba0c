/* Unit tests for sealed shards over real files: the reader's trailer items
 * (common/shard_reader.c), damaged trailers, and a shard found from its
 * trailer alone and read as a range of a merged file (shard_locate_before,
 * shard_reader_new_range, common/shard_format.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "shard-fixture.h"
#include "shard-reader-fixture.h"

static void test_reader_sealed_shards(void **state)
{
    struct fixture *f = *state;
    struct shard_header h[2] = { make_header("sealed", 20), make_header("next", 21) };
    struct bytebuf b = { 0 };
    size_t rec[3], tr[2], second;
    struct open_reader o;

    add_header(&b, &h[0]);
    rec[0] = add_record(&b, 20, 0, 100);
    rec[1] = add_record(&b, 20, 1, 5000);
    tr[0] = add_trailer(&b, 0, 2, 4096);
    assert_int_equal(b.len, 8192);
    second = add_header(&b, &h[1]);
    rec[2] = add_record(&b, 21, 0, 3);
    tr[1] = add_trailer(&b, second, 1, 4096);
    assert_int_equal(b.len, 12288);
    write_file(f->path, b.p, b.len);

    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h[0]);
    expect_record_item(o.r, rec[0], 20, 0, 100, "sealed");
    expect_record_item(o.r, rec[1], 20, 1, 5000, "sealed");
    expect_trailer_item(o.r, tr[0], 8192 - tr[0], tr[0], 2);
    expect_header_item(o.r, second, &h[1]);
    expect_record_item(o.r, rec[2], 21, 0, 3, "next");
    expect_trailer_item(o.r, tr[1], 12288 - tr[1], tr[1] - second, 1);
    expect_end(o.r, b.len);
    assert_int_equal(shard_reader_records(o.r), 3);
    reader_close(&o);

    /* Checked from its two ends, as merge does. */
    {
        struct shard_trailer t;
        const char *why = NULL;

        assert_int_equal(shard_decode_trailer_ends(b.p + tr[0], b.p + 8192 - SHARD_TRAILER_TAIL,
                                                   8192, &t, &why), 0);
        assert_int_equal(t.shard_len, tr[0]);
        assert_int_equal(t.records, 2);
        assert_int_equal(shard_decode_trailer_ends(b.p + tr[0], b.p + 8192 - SHARD_TRAILER_TAIL,
                                                   8193, &t, &why), -EBADMSG);
        assert_string_equal(why, "the seal trailer's lengths do not add up to the file size");
        assert_int_equal(shard_decode_trailer_ends(b.p + rec[0], b.p + 8192 - SHARD_TRAILER_TAIL,
                                                   8192, &t, &why), -EBADMSG);
        assert_string_equal(why, "no seal trailer");
        b.p[8192 - 20] ^= 1; /* records */
        assert_int_equal(shard_decode_trailer_ends(b.p + tr[0], b.p + 8192 - SHARD_TRAILER_TAIL,
                                                   8192, &t, &why), -EBADMSG);
        assert_string_equal(why, "seal trailer CRC mismatch");
        b.p[8192 - 20] ^= 1;
    }

    /* Anything but a new shard after a trailer is corrupt. */
    {
        struct bytebuf c = { 0 };
        size_t first, after;

        add_header(&c, &h[0]);
        first = add_record(&c, 20, 0, 10);
        add_trailer(&c, 0, 1, 0);
        after = add_record(&c, 20, 1, 10);
        write_file(f->path, c.p, c.len);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h[0]);
        expect_record_item(o.r, first, 20, 0, 10, "sealed");
        expect_trailer_item(o.r, after - SHARD_TRAILER_MIN, SHARD_TRAILER_MIN,
                            after - SHARD_TRAILER_MIN, 1);
        expect_error(o.r, -EBADMSG, after, "data after the shard's seal trailer");
        reader_close(&o);
        free(c.p);
    }

    /* Torn anywhere inside the first trailer. */
    for (size_t cut = tr[0] + 1; cut < 8192; cut += (cut < tr[0] + 64 || cut > 8100) ? 1 : 61) {
        write_file(f->path, b.p, cut);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h[0]);
        expect_record_item(o.r, rec[0], 20, 0, 100, "sealed");
        expect_record_item(o.r, rec[1], 20, 1, 5000, "sealed");
        expect_error(o.r, -ENODATA, tr[0],
                     cut - tr[0] < 4 ? "file ends inside a record header"
                                     : "file ends inside the seal trailer");
        reader_close(&o);
    }
    free(b.p);
}

/* A merged file's shards found from their trailers, last first
 * (shard_locate_before), and each read alone (shard_reader_new_range) with
 * the file's offsets, never past its end; a cut, unsealed or version 1
 * shard is not located. */
static void test_reader_locate_and_range(void **state)
{
    struct fixture *f = *state;
    struct shard_header h[2] = { make_header("sealed", 30), make_header("next", 31) };
    struct bytebuf b = { 0 };
    struct shard_header got;
    struct shard_trailer t;
    size_t rec[3], second;
    uint64_t start = 1;
    int fd;

    add_header(&b, &h[0]);
    rec[0] = add_record(&b, 30, 0, 100);
    rec[1] = add_record(&b, 30, 1, 200);
    add_trailer(&b, 0, 2, 4096);
    second = add_header(&b, &h[1]);
    rec[2] = add_record(&b, 31, 0, 3);
    add_trailer(&b, second, 1, 4096);
    write_file(f->path, b.p, b.len);
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);

    assert_int_equal(shard_locate_before(fd, b.len, &start, &got, &t), 0);
    assert_int_equal(start, second);
    assert_int_equal(got.shard_id, h[1].shard_id);
    assert_string_equal(got.producer, "next");
    assert_int_equal(t.records, 1);
    assert_int_equal(shard_locate_before(fd, second, &start, &got, NULL), 0);
    assert_int_equal(start, 0);
    assert_string_equal(got.producer, "sealed");
    /* Not the end of a shard: inside one, or past a record. */
    assert_int_equal(shard_locate_before(fd, second - 1, &start, &got, NULL), -EBADMSG);
    assert_int_equal(shard_locate_before(fd, rec[1], &start, &got, NULL), -EBADMSG);
    assert_int_equal(shard_locate_before(fd, 10, &start, &got, NULL), -EBADMSG);

    /* The second shard alone, with the file's offsets. */
    {
        struct shard_reader *r = NULL;

        assert_int_equal(shard_reader_new_range(&r, fd, second, b.len - second), 0);
        expect_header_item(r, second, &h[1]);
        expect_record_item(r, rec[2], 31, 0, 3, "next");
        {
            struct shard_item it;

            assert_int_equal(shard_reader_next(r, &it), 1);
            assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
        }
        expect_end(r, b.len);
        shard_reader_free(r);
    }
    /* The first alone ends at its trailer, although the file goes on; cut
     * inside its second record, it ends there, torn. */
    {
        struct shard_reader *r = NULL;
        struct shard_item it;

        assert_int_equal(shard_reader_new_range(&r, fd, 0, second), 0);
        expect_header_item(r, 0, &h[0]);
        expect_record_item(r, rec[0], 30, 0, 100, "sealed");
        expect_record_item(r, rec[1], 30, 1, 200, "sealed");
        assert_int_equal(shard_reader_next(r, &it), 1);
        assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
        expect_end(r, second);
        shard_reader_free(r);

        assert_int_equal(shard_reader_new_range(&r, fd, 0, rec[1] + 20), 0);
        expect_header_item(r, 0, &h[0]);
        expect_record_item(r, rec[0], 30, 0, 100, "sealed");
        expect_error(r, -ENODATA, rec[1], "file ends inside a record");
        shard_reader_free(r);
    }
    assert_int_equal(close(fd), 0);

    /* A shard without its trailer (being written) is not located. */
    write_file(f->path, b.p, second - 1);
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(shard_locate_before(fd, second - 1, &start, &got, NULL), -EBADMSG);
    assert_int_equal(close(fd), 0);
    free(b.p);
}

static void test_reader_bad_trailer(void **state)
{
    struct fixture *f = *state;
    struct shard_header h = make_header("badseal", 22);
    struct bytebuf b = { 0 };
    size_t tr, end;
    add_header(&b, &h);
    add_record(&b, 22, 0, 30);
    add_record(&b, 22, 1, 31);
    tr = add_trailer(&b, 0, 2, 512);
    end = b.len;
    assert_int_equal(end % 512, 0);

#define CHECK_BAD(why_text)                                                    \
    do {                                                                       \
        struct open_reader o_;                                                 \
        write_file(f->path, b.p, b.len);                                       \
        o_ = reader_open(f->path);                                             \
        expect_header_item(o_.r, 0, &h);                                       \
        assert_int_equal(shard_reader_next(o_.r, &(struct shard_item){ 0 }), 1); \
        assert_int_equal(shard_reader_next(o_.r, &(struct shard_item){ 0 }), 1); \
        expect_error(o_.r, -EBADMSG, tr, why_text);                            \
        reader_close(&o_);                                                     \
    } while (0)

    /* Padding that is not zero. */
    b.p[tr + 100] = 1;
    CHECK_BAD("the seal trailer's padding is not all zero");
    b.p[tr + 100] = 0;
    /* Any flipped bit in the fields the CRC covers. */
    for (size_t i = 0; i < SHARD_TRAILER_TAIL; i++) {
        size_t at = end - SHARD_TRAILER_TAIL + i;
        b.p[at] ^= 0x10;
        CHECK_BAD(i >= 24 && i < 28 ? "the seal trailer's two length fields disagree"
                                    : "seal trailer CRC mismatch");
        b.p[at] ^= 0x10;
    }
    /* Impossible lengths in the head. */
    wire_put_u32(b.p + tr + 4, SHARD_TRAILER_MIN - 1);
    CHECK_BAD("impossible seal trailer length");
    wire_put_u32(b.p + tr + 4, SHARD_TRAILER_MAX);
    CHECK_BAD("impossible seal trailer length");
    wire_put_u32(b.p + tr + 4, (uint32_t)(end - tr));

    /* Fields that are self-consistent but wrong for the shard. */
    {
        struct shard_trailer t = { .trailer_len = (uint32_t)(end - tr), .shard_len = tr,
                                   .records = 3, .newest_ns = 1 };
        shard_encode_trailer(b.p + tr, &t);
        CHECK_BAD("the seal trailer gives the wrong record count");
        t.records = 2;
        t.shard_len = tr - 1;
        shard_encode_trailer(b.p + tr, &t);
        CHECK_BAD("the seal trailer gives the wrong shard length");
    }
#undef CHECK_BAD

    /* In a version 1 shard the marker is only an impossible record length. */
    {
        struct open_reader o;

        wire_put_u16(b.p + 8, 1);
        wire_put_u32(b.p + 49, crc32c(b.p, 49)); /* the header is 53 bytes */
        write_file(f->path, b.p, b.len);
        o = reader_open(f->path);
        assert_int_equal(shard_reader_next(o.r, &(struct shard_item){ 0 }), 1);
        assert_int_equal(shard_reader_next(o.r, &(struct shard_item){ 0 }), 1);
        assert_int_equal(shard_reader_next(o.r, &(struct shard_item){ 0 }), 1);
        expect_error(o.r, -EBADMSG, tr, "impossible record length");
        reader_close(&o);
    }
    free(b.p);
}

/* shard_locate_before reads the last 4 KiB of what it is given at once and
 * takes the trailer's first bytes and the header from that read when they
 * are in it: shards of every size around that boundary, alone and with a
 * shard in front of them, are located as when every part was read on its
 * own (a trailer longer than 4,064 bytes, a header before the read, a
 * shard wholly in it). */
static void test_locate_every_size(void **state)
{
    struct fixture *f = *state;
    struct shard_header first = make_header("front", 40), h = make_header("swept", 41);
    int checked_long_trailer = 0, checked_header_in_read = 0, checked_header_before = 0;

    for (uint32_t len = 0; len <= 9000; len += (len < 8300 ? 3 : 97)) {
        for (int merged = 0; merged < 4; merged++) {
            /* Trailers padded to 4 KiB blocks, and unpadded ones, which
             * make shards of every size. */
            size_t align = merged & 2 ? 1 : 4096;
            struct bytebuf b = { 0 };
            struct shard_header got;
            struct shard_trailer t;
            uint64_t start = 1, at = 0;
            int fd;

            if (merged & 1) {
                add_header(&b, &first);
                add_record(&b, 40, 0, 10);
                add_trailer(&b, 0, 1, align);
                at = b.len;
            }
            add_header(&b, &h);
            add_record(&b, 41, 0, len);
            add_trailer(&b, at, 1, align);
            write_file(f->path, b.p, b.len);
            fd = open(f->path, O_RDONLY | O_CLOEXEC);
            assert_true(fd >= 0);
            if (shard_locate_before(fd, b.len, &start, &got, &t) != 0)
                fail_msg("a shard with a record of %u bytes%s, trailer aligned to %zu, was not "
                         "located", len, merged & 1 ? " after another" : "", align);
            assert_int_equal(start, at);
            assert_int_equal(got.shard_id, h.shard_id);
            assert_int_equal(got.created_ns, h.created_ns);
            assert_string_equal(got.producer, "swept");
            assert_int_equal(t.records, 1);
            assert_int_equal(t.shard_len + t.trailer_len, b.len - at);
            if (merged & 1) {
                assert_int_equal(shard_locate_before(fd, at, &start, &got, &t), 0);
                assert_int_equal(start, 0);
                assert_string_equal(got.producer, "front");
            }
            checked_long_trailer += t.trailer_len > 4096 - SHARD_TRAILER_TAIL;
            checked_header_in_read += b.len - at <= 4096;
            checked_header_before += b.len - at > 4096;
            close(fd);
            free(b.p);
        }
    }
    /* Every way through was taken. */
    assert_true(checked_long_trailer > 0);
    assert_true(checked_header_in_read > 0);
    assert_true(checked_header_before > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reader_sealed_shards, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_bad_trailer, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_locate_and_range, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_locate_every_size, setup_dir, teardown_dir),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
