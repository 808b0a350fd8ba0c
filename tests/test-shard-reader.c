/* Unit tests for the reader of common/shard_format.c over real files in a
 * temporary directory: single shards, records larger than the reader's first
 * buffer, merged files, torn tails cut at every byte, corruption, empty and
 * garbage files, sealed shards and bad seal trailers. The codec itself is
 * tested in test-shard-format.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "shard_format.h"
#include "bytebuf.h"
#include "shard-fixture.h"

/* ---- helpers ---- */

/* Payload byte j of record i of shard s: recognisable anywhere. */
static unsigned char payload_byte(unsigned s, uint64_t i, size_t j)
{
    return (unsigned char)(s * 31u + i * 7u + j * 13u + (j >> 8));
}

static uint64_t record_ts(unsigned s, uint64_t i)
{
    return 1800000000000000000ull + s * 1000000ull + i;
}

/* Appends a shard header; returns its offset. */
static size_t add_header(struct bytebuf *b, const struct shard_header *h)
{
    size_t off = b->len;
    unsigned char *p = bytebuf_grow(b, shard_header_size(h->producer_len));

    assert_int_equal(shard_encode_header(p, h), shard_header_size(h->producer_len));
    return off;
}

/* Appends record i of shard s with len bytes; returns its offset. */
static size_t add_record(struct bytebuf *b, unsigned s, uint64_t i, uint32_t len)
{
    size_t off = b->len;
    unsigned char *payload = malloc(len);
    unsigned char *p;

    assert_non_null(payload);
    for (size_t j = 0; j < len; j++)
        payload[j] = payload_byte(s, i, j);
    p = bytebuf_grow(b, SHARD_RECORD_HEADER + len);
    assert_int_equal(shard_encode_record(p, payload, len, record_ts(s, i)),
                     SHARD_RECORD_HEADER + len);
    free(payload);
    return off;
}

struct fixture {
    char dir[64];
    char path[128];
};

static int setup_dir(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-shard-reader.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/file.shard", f->dir);
    *state = f;
    return 0;
}

static int teardown_dir(void **state)
{
    struct fixture *f = *state;

    (void)unlink(f->path); /* may not exist; nothing else to do */
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const unsigned char *p = data;

    assert_true(fd >= 0);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        assert_true(n > 0);
        p += n;
        len -= (size_t)n;
    }
    assert_int_equal(close(fd), 0);
}

struct open_reader {
    int fd;
    struct shard_reader *r;
};

static struct open_reader reader_open(const char *path)
{
    struct open_reader o;

    o.fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(o.fd >= 0);
    assert_int_equal(shard_reader_new(&o.r, o.fd), 0);
    assert_non_null(o.r);
    return o;
}

static void reader_close(struct open_reader *o)
{
    shard_reader_free(o->r);
    assert_int_equal(close(o->fd), 0);
}

static void expect_header_item(struct shard_reader *r, uint64_t offset,
                               const struct shard_header *want)
{
    struct shard_item it;

    memset(&it, 0, sizeof(it));
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_HEADER);
    assert_int_equal(it.offset, offset);
    assert_non_null(it.header);
    assert_int_equal(it.header->version, SHARD_FORMAT_VERSION);
    assert_int_equal(it.header->header_len, shard_header_size(want->producer_len));
    assert_int_equal(it.header->uid, want->uid);
    assert_int_equal(it.header->gid, want->gid);
    assert_int_equal(it.header->pid, want->pid);
    assert_true(it.header->shard_id == want->shard_id);
    assert_true(it.header->created_ns == want->created_ns);
    assert_int_equal(it.header->producer_len, want->producer_len);
    assert_string_equal(it.header->producer, want->producer);
    assert_null(it.payload);
    assert_int_equal(it.len, 0);
    assert_int_equal(shard_reader_valid_end(r), offset + it.header->header_len);
}

static void expect_record_item(struct shard_reader *r, uint64_t offset, unsigned s,
                               uint64_t i, uint32_t len, const char *producer)
{
    struct shard_item it;

    memset(&it, 0, sizeof(it));
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_RECORD);
    assert_int_equal(it.offset, offset);
    assert_int_equal(it.len, len);
    assert_true(it.timestamp_ns == record_ts(s, i));
    assert_non_null(it.header);
    assert_string_equal(it.header->producer, producer);
    assert_non_null(it.payload);
    for (size_t j = 0; j < len; j++)
        if (it.payload[j] != payload_byte(s, i, j))
            fail_msg("shard %u record %llu byte %zu: 0x%02x, want 0x%02x", s,
                     (unsigned long long)i, j, it.payload[j], payload_byte(s, i, j));
    assert_int_equal(shard_reader_valid_end(r), offset + SHARD_RECORD_HEADER + len);
}

static void expect_end(struct shard_reader *r, uint64_t size)
{
    struct shard_item it;
    uint64_t off = 1;
    const char *why = "x";

    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_int_equal(shard_reader_valid_end(r), size);
    shard_reader_error(r, &off, &why);
    assert_int_equal(off, size);
    assert_null(why);
}

static void expect_error(struct shard_reader *r, int err, uint64_t offset, const char *want_why)
{
    struct shard_item it;
    uint64_t off = 0;
    const char *why = NULL;

    assert_int_equal(shard_reader_next(r, &it), err);
    /* Later calls repeat the error. */
    assert_int_equal(shard_reader_next(r, &it), err);
    assert_int_equal(shard_reader_valid_end(r), offset);
    shard_reader_error(r, &off, &why);
    assert_int_equal(off, offset);
    assert_non_null(why);
    assert_string_equal(why, want_why);
}

/* ---- reader ---- */

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

/* ---- seal trailer ---- */

/* Appends a seal trailer for the shard that starts at shard_start. */
static size_t add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records, size_t align)
{
    size_t off = b->len;
    struct shard_trailer t = {
        .shard_len = off - shard_start,
        .records = records,
        .newest_ns = 1900000000000000000ull + records,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, align);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
    return off;
}

static void expect_trailer_item(struct shard_reader *r, uint64_t offset, uint32_t len,
                                uint64_t shard_len, uint64_t records)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(it.offset, offset);
    assert_int_equal(it.len, len);
    assert_non_null(it.trailer);
    assert_int_equal(it.trailer->trailer_len, len);
    assert_int_equal(it.trailer->shard_len, shard_len);
    assert_int_equal(it.trailer->records, records);
    assert_true(it.trailer->newest_ns == 1900000000000000000ull + records);
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_reader_single_shard, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_large_records, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_merged, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_torn_tail, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_corrupt_record, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_empty_and_garbage, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_sealed_shards, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_bad_trailer, setup_dir, teardown_dir),
        cmocka_unit_test_setup_teardown(test_reader_locate_and_range, setup_dir, teardown_dir),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
