/* Unit tests for the reader of common/shard_reader.c over real files in a
 * temporary directory: single shards, records larger than the reader's first
 * buffer, merged files, torn tails cut at every byte, corruption, active
 * shards with zeros written ahead, empty and garbage files. Sealed shards, seal trailers and finding a shard from its
 * trailer are in test-shard-trailer.c; the codec itself is tested in
 * test-shard-format.c. */
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

static void test_reader_single_shard(void **state)
{
    struct fixture *f = *state;
    struct shard_header h = make_header("single", 0);
    struct bytebuf b = { 0 };
    size_t off[3];
    struct open_reader o;

    assert_int_equal(add_header(&b, &h), 0);
    off[0] = add_record(&b, 0, 0, 1);
    off[1] = add_record(&b, 0, 1, 10);
    off[2] = add_record(&b, 0, 2, 1000);
    assert_int_equal(off[0], 52);
    assert_int_equal(off[1], 52 + 17);
    write_file(f->path, b.p, b.len);

    o = reader_open(f->path);
    assert_int_equal(shard_reader_records(o.r), 0);
    assert_int_equal(shard_reader_valid_end(o.r), 0);
    expect_header_item(o.r, 0, &h);
    assert_int_equal(shard_reader_records(o.r), 0);
    expect_record_item(o.r, off[0], 0, 0, 1, "single");
    assert_int_equal(shard_reader_records(o.r), 1);
    expect_record_item(o.r, off[1], 0, 1, 10, "single");
    expect_record_item(o.r, off[2], 0, 2, 1000, "single");
    assert_int_equal(shard_reader_records(o.r), 3);
    expect_end(o.r, b.len);
    assert_int_equal(shard_reader_records(o.r), 3);
    reader_close(&o);

    /* A shard with no records at all is complete too. */
    write_file(f->path, b.p, 52);
    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h);
    expect_end(o.r, 52);
    assert_int_equal(shard_reader_records(o.r), 0);
    reader_close(&o);
    free(b.p);
}

static void test_reader_large_records(void **state)
{
    static const uint32_t lens[] = {
        1, 100, 300000, 262144, 262144 - 16, 262144 - 15, 7, (1u << 20) + 3, 1, 3u << 20, 5,
    };
    enum { NL = sizeof(lens) / sizeof(lens[0]), SMALL = 3000 };
    struct fixture *f = *state;
    struct shard_header h = make_header("big", 1);
    struct bytebuf b = { 0 };
    size_t off[NL + SMALL];
    uint32_t len[NL + SMALL];
    struct open_reader o;

    add_header(&b, &h);
    /* Small records first, so that records straddle the first buffer's end
     * at many different places, then the large ones. */
    for (size_t i = 0; i < SMALL; i++) {
        len[i] = 1 + (uint32_t)((i * 53) % 211);
        off[i] = add_record(&b, 1, i, len[i]);
    }
    for (size_t i = 0; i < NL; i++) {
        len[SMALL + i] = lens[i];
        off[SMALL + i] = add_record(&b, 1, SMALL + i, lens[i]);
    }
    write_file(f->path, b.p, b.len);

    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h);
    for (size_t i = 0; i < SMALL + NL; i++)
        expect_record_item(o.r, off[i], 1, i, len[i], "big");
    assert_int_equal(shard_reader_records(o.r), SMALL + NL);
    expect_end(o.r, b.len);
    reader_close(&o);
    free(b.p);
}

static void test_reader_merged(void **state)
{
    struct fixture *f = *state;
    struct shard_header h[3] = { make_header("alpha", 10), make_header("b", 11),
                                 make_header("gamma.prod-3_x", 12) };
    static const unsigned nrec[3] = { 2, 0, 3 };
    struct bytebuf b = { 0 };
    size_t hoff[3], roff[3][3];
    struct open_reader o;

    for (unsigned s = 0; s < 3; s++) {
        hoff[s] = add_header(&b, &h[s]);
        for (unsigned i = 0; i < nrec[s]; i++)
            roff[s][i] = add_record(&b, s, i, 20 + s * 100 + i);
    }
    assert_int_equal(hoff[1], 51 + 2 * 16 + 20 + 21);
    write_file(f->path, b.p, b.len);

    o = reader_open(f->path);
    for (unsigned s = 0; s < 3; s++) {
        expect_header_item(o.r, hoff[s], &h[s]);
        for (unsigned i = 0; i < nrec[s]; i++)
            expect_record_item(o.r, roff[s][i], s, i, 20 + s * 100 + i, h[s].producer);
    }
    assert_int_equal(shard_reader_records(o.r), 5);
    expect_end(o.r, b.len);
    reader_close(&o);

    /* A corrupt header in the middle ends the valid prefix there. */
    b.p[hoff[2] + 20] ^= 1;
    write_file(f->path, b.p, b.len);
    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h[0]);
    expect_record_item(o.r, roff[0][0], 0, 0, 20, "alpha");
    expect_record_item(o.r, roff[0][1], 0, 1, 21, "alpha");
    expect_header_item(o.r, hoff[1], &h[1]);
    expect_error(o.r, -EBADMSG, hoff[2], "shard header CRC mismatch");
    assert_int_equal(shard_reader_records(o.r), 2);
    reader_close(&o);

    /* A merged file cut inside the third header is torn, not corrupt. */
    b.p[hoff[2] + 20] ^= 1;
    for (size_t cut = hoff[2] + 1; cut < roff[2][0]; cut++) {
        write_file(f->path, b.p, cut);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h[0]);
        expect_record_item(o.r, roff[0][0], 0, 0, 20, "alpha");
        expect_record_item(o.r, roff[0][1], 0, 1, 21, "alpha");
        expect_header_item(o.r, hoff[1], &h[1]);
        expect_error(o.r, -ENODATA, hoff[2], "file ends inside a shard header");
        reader_close(&o);
    }
    free(b.p);
}

/* Reads a file cut at cut bytes that holds the header and n complete records
 * before last_off; expects those, then a torn tail at last_off. */
static void check_torn(const char *path, const struct bytebuf *b, size_t cut, unsigned n,
                       const size_t *off, const uint32_t *len, size_t last_off,
                       const struct shard_header *h)
{
    struct open_reader o;
    struct shard_item it;
    uint64_t eoff;
    const char *why;

    write_file(path, b->p, cut);
    o = reader_open(path);
    expect_header_item(o.r, 0, h);
    for (unsigned i = 0; i < n; i++)
        expect_record_item(o.r, off[i], 2, i, len[i], h->producer);
    assert_int_equal(shard_reader_next(o.r, &it), -ENODATA);
    assert_int_equal(shard_reader_next(o.r, &it), -ENODATA);
    assert_int_equal(shard_reader_records(o.r), n);
    if (shard_reader_valid_end(o.r) != last_off)
        fail_msg("cut at %zu: valid end %llu, want %zu", cut,
                 (unsigned long long)shard_reader_valid_end(o.r), last_off);
    shard_reader_error(o.r, &eoff, &why);
    assert_int_equal(eoff, last_off);
    assert_non_null(why);
    reader_close(&o);
}

static void test_reader_torn_tail(void **state)
{
    struct fixture *f = *state;
    struct shard_header h = make_header("torn", 2);
    uint32_t len[4] = { 5, 77, 40, 300000 };
    size_t off[4];
    struct bytebuf b = { 0 };

    add_header(&b, &h);
    for (unsigned i = 0; i < 3; i++)
        off[i] = add_record(&b, 2, i, len[i]);

    /* Every cut strictly inside the last record is a torn tail at its start. */
    for (size_t cut = off[2] + 1; cut < b.len; cut++)
        check_torn(f->path, &b, cut, 2, off, len, off[2], &h);

    /* Cut exactly between records, the file is clean. */
    {
        struct open_reader o;

        write_file(f->path, b.p, off[2]);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h);
        expect_record_item(o.r, off[0], 2, 0, 5, "torn");
        expect_record_item(o.r, off[1], 2, 1, 77, "torn");
        expect_end(o.r, off[2]);
        assert_int_equal(shard_reader_records(o.r), 2);
        reader_close(&o);
    }

    /* A torn record larger than the reader's first buffer. */
    off[3] = add_record(&b, 2, 3, len[3]);
    {
        const size_t cuts[] = { off[3] + 1, off[3] + 15, off[3] + 16, off[3] + 17,
                                off[3] + 262144, off[3] + 262144 + 16, b.len - 1 };
        for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
            check_torn(f->path, &b, cuts[i], 3, off, len, off[3], &h);
    }

    /* Cut inside the first shard header: nothing valid at all. */
    assert_int_equal(off[0], 50);
    for (size_t cut = 1; cut < off[0]; cut++) {
        struct open_reader o;

        write_file(f->path, b.p, cut);
        o = reader_open(f->path);
        expect_error(o.r, -ENODATA, 0, "file ends inside a shard header");
        assert_int_equal(shard_reader_records(o.r), 0);
        reader_close(&o);
    }
    free(b.p);
}

static void test_reader_corrupt_record(void **state)
{
    struct fixture *f = *state;
    struct shard_header h = make_header("flip", 3);
    struct bytebuf b = { 0 };
    size_t off[3];
    struct open_reader o;

    add_header(&b, &h);
    for (unsigned i = 0; i < 3; i++)
        off[i] = add_record(&b, 3, i, 64);

    /* One byte in the middle of record 1's payload. */
    b.p[off[1] + 16 + 32] ^= 0x20;
    write_file(f->path, b.p, b.len);
    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h);
    expect_record_item(o.r, off[0], 3, 0, 64, "flip");
    expect_error(o.r, -EBADMSG, off[1], "record CRC mismatch");
    assert_int_equal(shard_reader_records(o.r), 1);
    reader_close(&o);
    b.p[off[1] + 16 + 32] ^= 0x20;

    /* Every byte of record 1's CRC, timestamp and payload. */
    for (size_t i = off[1] + 4; i < off[2]; i++) {
        b.p[i] ^= 0x01;
        write_file(f->path, b.p, b.len);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h);
        expect_record_item(o.r, off[0], 3, 0, 64, "flip");
        expect_error(o.r, -EBADMSG, off[1], "record CRC mismatch");
        reader_close(&o);
        b.p[i] ^= 0x01;
    }

    /* Impossible lengths: 0 and over SHARD_RECORD_MAX. */
    static const uint32_t bad_lens[] = { 0, SHARD_RECORD_MAX + 1, 0xFFFFFFFFu };
    for (size_t i = 0; i < sizeof(bad_lens) / sizeof(bad_lens[0]); i++) {
        wire_put_u32(b.p + off[2], bad_lens[i]);
        write_file(f->path, b.p, b.len);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h);
        expect_record_item(o.r, off[0], 3, 0, 64, "flip");
        expect_record_item(o.r, off[1], 3, 1, 64, "flip");
        expect_error(o.r, -EBADMSG, off[2], "impossible record length");
        assert_int_equal(shard_reader_records(o.r), 2);
        reader_close(&o);
    }
    /* A length one too small: the CRC catches it. */
    wire_put_u32(b.p + off[2], 63);
    write_file(f->path, b.p, b.len);
    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h);
    expect_record_item(o.r, off[0], 3, 0, 64, "flip");
    expect_record_item(o.r, off[1], 3, 1, 64, "flip");
    expect_error(o.r, -EBADMSG, off[2], "record CRC mismatch");
    reader_close(&o);
    free(b.p);
}

/* Overwrites len bytes at offset in place, as the daemon overwrites the
 * zeros it wrote ahead while a reader has the file open. */
static void overwrite_at(const char *path, size_t offset, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, data, len, (off_t)offset), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void test_reader_active_zeros(void **state)
{
    struct fixture *f = *state;
    struct shard_header h = make_header("ahead", 5);
    struct bytebuf b = { 0 };
    size_t off[4], zeros = 65536;
    unsigned char *file;
    struct open_reader o;
    uint64_t where;
    const char *why;

    add_header(&b, &h);
    for (unsigned i = 0; i < 4; i++)
        off[i] = add_record(&b, 5, i, 100);
    assert_int_not_equal(b.p[off[3] - 1], 0); /* record 2 ends in a non-zero byte */
    /* Records 0 and 1 written, zeros ahead of them. */
    file = calloc(1, off[2] + zeros);
    assert_non_null(file);
    memcpy(file, b.p, off[2]);
    write_file(f->path, file, off[2] + zeros);

    /* Read as a sealed file would be, the zeros are damage. */
    o = reader_open(f->path);
    expect_header_item(o.r, 0, &h);
    expect_record_item(o.r, off[0], 5, 0, 100, "ahead");
    expect_record_item(o.r, off[1], 5, 1, 100, "ahead");
    expect_error(o.r, -EBADMSG, off[2], "impossible record length");
    reader_close(&o);

    /* Read as an active shard, they are where the written part ends. */
    o = reader_open(f->path);
    shard_reader_set_active(o.r);
    expect_header_item(o.r, 0, &h);
    expect_record_item(o.r, off[0], 5, 0, 100, "ahead");
    expect_record_item(o.r, off[1], 5, 1, 100, "ahead");
    expect_error(o.r, -ENODATA, off[2], "unwritten space (zeros) after the last record");
    assert_int_equal(shard_reader_records(o.r), 2);
    assert_int_equal(shard_reader_valid_end(o.r), off[2]);

    /* Record 2 caught while it is copied in: all but its last byte. */
    overwrite_at(f->path, off[2], b.p + off[2], off[3] - off[2] - 1);
    assert_int_equal(shard_reader_continue(o.r), 0);
    expect_error(o.r, -ENODATA, off[2], "record being written (ends in zeros)");
    /* Whole now: the reader reads it anew rather than from its buffer. */
    overwrite_at(f->path, off[3] - 1, b.p + off[3] - 1, 1);
    assert_int_equal(shard_reader_continue(o.r), 0);
    expect_record_item(o.r, off[2], 5, 2, 100, "ahead");
    expect_error(o.r, -ENODATA, off[3], "unwritten space (zeros) after the last record");
    assert_int_equal(shard_reader_records(o.r), 3);

    /* A record that fails its CRC while its last byte is not zero is
     * damage even in an active shard. */
    {
        unsigned char bad[100 + 16];

        memcpy(bad, b.p + off[3], sizeof(bad));
        bad[20] ^= 0x40;
        overwrite_at(f->path, off[3], bad, sizeof(bad));
    }
    assert_int_equal(shard_reader_continue(o.r), 0);
    assert_int_equal(shard_reader_next(o.r, &(struct shard_item){ 0 }), -EBADMSG);
    shard_reader_error(o.r, &where, &why);
    assert_int_equal(where, off[3]);
    assert_string_equal(why, "record CRC mismatch");
    /* ... which no waiting repairs. */
    assert_int_equal(shard_reader_continue(o.r), -EBADMSG);
    reader_close(&o);
    free(file);
    free(b.p);
}

static void test_reader_empty_and_garbage(void **state)
{
    struct fixture *f = *state;
    struct open_reader o;
    char junk[4096];

    write_file(f->path, "", 0);
    o = reader_open(f->path);
    expect_error(o.r, -ENODATA, 0, "empty file (no shard header)");
    assert_int_equal(shard_reader_records(o.r), 0);
    reader_close(&o);

    write_file(f->path, "this is not a shard file\n", 25);
    o = reader_open(f->path);
    expect_error(o.r, -EBADMSG, 0, "no shard header (bad magic)");
    reader_close(&o);

    write_file(f->path, "ab", 2);
    o = reader_open(f->path);
    expect_error(o.r, -EBADMSG, 0, "no shard header (bad magic)");
    reader_close(&o);

    /* A valid record with no shard header before it. */
    {
        unsigned char rec[SHARD_RECORD_HEADER + 3];
        shard_encode_record(rec, "abc", 3, 1);
        write_file(f->path, rec, sizeof(rec));
        o = reader_open(f->path);
        expect_error(o.r, -EBADMSG, 0, "no shard header (bad magic)");
        reader_close(&o);
    }

    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 131 + 7);
    write_file(f->path, junk, sizeof(junk));
    o = reader_open(f->path);
    expect_error(o.r, -EBADMSG, 0, "no shard header (bad magic)");
    assert_int_equal(shard_reader_records(o.r), 0);
    reader_close(&o);

    /* A valid shard followed by garbage: the garbage is where it ends. */
    {
        struct shard_header h = make_header("tail", 4);
        struct bytebuf b = { 0 };
        size_t end;

        add_header(&b, &h);
        add_record(&b, 4, 0, 9);
        end = b.len;
        memcpy(bytebuf_grow(&b, 40), junk, 40);
        write_file(f->path, b.p, b.len);
        o = reader_open(f->path);
        expect_header_item(o.r, 0, &h);
        expect_record_item(o.r, 50, 4, 0, 9, "tail");
        /* The junk's first four bytes, read as a length, are not possible. */
        assert_true(wire_get_u32((const unsigned char *)junk) > SHARD_RECORD_MAX);
        expect_error(o.r, -EBADMSG, end, "impossible record length");
        assert_int_equal(shard_reader_records(o.r), 1);
        reader_close(&o);
        free(b.p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reader_single_shard, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_large_records, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_merged, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_torn_tail, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_corrupt_record, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_active_zeros, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_empty_and_garbage, setup_dir, teardown_dir),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
