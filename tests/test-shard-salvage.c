/* Unit tests for salvage reading in common/shard_format.c
 * (shard_reader_skip_damage): a merged file of three sealed shards with the
 * first one damaged in every way one byte or one bad length can damage it,
 * read back through the reader as logctl cat and verify read it. Whatever
 * the damage, every record of the other two shards must come back, each
 * under its own shard's header; a record whose framing held is the only
 * one lost; and every skip is reported where it begins. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard_format.h"

#define N_SHARDS 3
#define N_RECORDS 12
#define ALIGN 512

static const char *const producers[N_SHARDS] = { "alpha", "beta", "gamma" };

/* ---- building the merged file ---- */

struct layout {
    unsigned char *p;
    size_t len, cap;
    size_t shard_start[N_SHARDS + 1]; /* shard_start[N_SHARDS]: the file size */
    size_t record_off[N_SHARDS][N_RECORDS];
    size_t trailer_off[N_SHARDS];
};

static unsigned char *grow(struct layout *l, size_t n)
{
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap : 4096;
        while (cap < l->len + n)
            cap *= 2;
        l->p = realloc(l->p, cap);
        assert_non_null(l->p);
        l->cap = cap;
    }
    l->len += n;
    return l->p + l->len - n;
}

static uint32_t record_len(unsigned s, unsigned i)
{
    return 1 + (i * 37u + s * 11u) % 90u;
}

static unsigned char payload_byte(unsigned s, unsigned i, size_t j)
{
    return (unsigned char)(s * 31u + i * 7u + j * 13u);
}

static uint64_t record_ts(unsigned s, unsigned i)
{
    return 1800000000000000000ull + s * 1000000ull + i;
}

/* Three shards back to back, each sealed with a trailer that pads it to
 * ALIGN (as merge copies them), or without trailers (sealed == false, as
 * the trailer-less shards of format version 1 are read). */
static void build(struct layout *l, bool sealed)
{
    memset(l, 0, sizeof(*l));
    for (unsigned s = 0; s < N_SHARDS; s++) {
        struct shard_header h;
        size_t start = l->len;

        memset(&h, 0, sizeof(h));
        h.uid = 1000 + s;
        h.gid = 100 + s;
        h.pid = 4000 + s;
        h.shard_id = 0x1000 + s;
        h.created_ns = 1700000000000000000ull + s;
        h.producer_len = strlen(producers[s]);
        memcpy(h.producer, producers[s], h.producer_len + 1);
        l->shard_start[s] = start;
        shard_encode_header(grow(l, shard_header_size(h.producer_len)), &h);
        for (unsigned i = 0; i < N_RECORDS; i++) {
            uint32_t len = record_len(s, i);
            unsigned char payload[128];

            for (size_t j = 0; j < len; j++)
                payload[j] = payload_byte(s, i, j);
            l->record_off[s][i] = l->len;
            shard_encode_record(grow(l, SHARD_RECORD_HEADER + len), payload, len,
                                record_ts(s, i));
        }
        l->trailer_off[s] = l->len;
        if (sealed) {
            struct shard_trailer t = {
                .shard_len = l->len - start,
                .records = N_RECORDS,
                .newest_ns = record_ts(s, N_RECORDS - 1),
            };

            t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, ALIGN);
            shard_encode_trailer(grow(l, t.trailer_len), &t);
        }
    }
    l->shard_start[N_SHARDS] = l->len;
}

/* ---- reading it back ---- */

#define MAX_SKIPS 16

struct readback {
    bool got[N_SHARDS][N_RECORDS];
    size_t n_records;
    struct shard_skip skips[MAX_SKIPS];
    size_t n_skips;
    int last; /* 0: the reader reached the end */
};

struct fixture {
    char dir[64];
    char path[128];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-shard-salvage.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/merged.lsm", f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    (void)unlink(f->path); /* may not exist */
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

static void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* Checks a record item: it must be exactly one of the records written,
 * under its own shard's header, and read only once. */
static void take_record(struct readback *rb, const struct shard_item *it, const char *where)
{
    uint64_t rel = it->timestamp_ns - record_ts(0, 0);
    unsigned s = (unsigned)(rel / 1000000u), i = (unsigned)(rel % 1000000u);

    if (it->timestamp_ns < record_ts(0, 0) || s >= N_SHARDS || i >= N_RECORDS)
        fail_msg("%s: a record that was never written (ts %llu)", where,
                 (unsigned long long)it->timestamp_ns);
    if (strcmp(it->header->producer, producers[s]) != 0)
        fail_msg("%s: record %u of %s returned under shard %s", where, i, producers[s],
                 it->header->producer);
    assert_int_equal(it->len, record_len(s, i));
    for (size_t j = 0; j < it->len; j++)
        assert_int_equal(it->payload[j], payload_byte(s, i, j));
    if (rb->got[s][i])
        fail_msg("%s: record %u of %s returned twice", where, i, producers[s]);
    rb->got[s][i] = true;
    rb->n_records++;
}

/* Reads the whole file, skipping every damage, and checks that items and
 * skips tile the file. */
static void read_salvaging(const char *path, size_t size, struct readback *rb, const char *where)
{
    struct shard_reader *r = NULL;
    struct shard_item it;
    uint64_t expect = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int rc;

    memset(rb, 0, sizeof(*rb));
    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    for (;;) {
        rc = shard_reader_next(r, &it);
        if (rc > 0) {
            assert_int_equal(it.offset, expect);
            if (it.kind == SHARD_ITEM_RECORD) {
                take_record(rb, &it, where);
                expect += SHARD_RECORD_HEADER + it.len;
            } else if (it.kind == SHARD_ITEM_HEADER) {
                expect += it.header->header_len;
            } else {
                expect += it.len;
            }
            continue;
        }
        if (rc == 0)
            break;
        if (rc != -EBADMSG && rc != -ENODATA)
            fail_msg("%s: reader error %d", where, rc);
        if (rb->n_skips == MAX_SKIPS)
            fail_msg("%s: more than %d skips", where, MAX_SKIPS);
        rc = shard_reader_skip_damage(r, 0, &rb->skips[rb->n_skips]);
        if (rc < 0)
            fail_msg("%s: skip_damage: %d", where, rc);
        assert_int_equal(rb->skips[rb->n_skips].offset, expect);
        assert_true(rb->skips[rb->n_skips].bytes > 0);
        expect += rb->skips[rb->n_skips].bytes;
        rb->n_skips++;
        if (rc == 0) {
            assert_int_equal(shard_reader_next(r, &it), 0);
            break;
        }
    }
    assert_int_equal(expect, size);
    rb->last = rc;
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);
}

static void expect_shard_whole(const struct readback *rb, unsigned s, const char *where)
{
    for (unsigned i = 0; i < N_RECORDS; i++)
        if (!rb->got[s][i])
            fail_msg("%s: record %u of %s (an undamaged shard) was lost", where, i,
                     producers[s]);
}

/* Which record of shard 0 holds offset off, and where in it; -1: none. */
static int record_at(const struct layout *l, size_t off, size_t *ret_in)
{
    for (unsigned i = 0; i < N_RECORDS; i++) {
        size_t start = l->record_off[0][i];

        if (off >= start && off < start + SHARD_RECORD_HEADER + record_len(0, i)) {
            *ret_in = off - start;
            return (int)i;
        }
    }
    return -1;
}

/* ---- tests ---- */

static void test_intact_file_has_no_skips(void **state)
{
    struct fixture *f = *state;
    struct layout l;
    struct readback rb;

    build(&l, true);
    write_file(f->path, l.p, l.len);
    read_salvaging(f->path, l.len, &rb, "intact");
    assert_int_equal(rb.n_skips, 0);
    assert_int_equal(rb.n_records, N_SHARDS * N_RECORDS);
    free(l.p);
}

/* Every byte of the first shard, flipped in three ways. */
static void flip_every_byte(struct fixture *f, bool sealed)
{
    static const unsigned char masks[] = { 0x01, 0x80, 0xff };
    struct layout l;
    struct readback rb;

    build(&l, sealed);
    for (size_t off = 0; off < l.shard_start[1]; off++) {
        for (size_t m = 0; m < sizeof(masks); m++) {
            char where[96];
            size_t in = 0;
            int rec = record_at(&l, off, &in);

            snprintf(where, sizeof(where), "%s, byte %zu ^ 0x%02x",
                     sealed ? "sealed" : "trailer-less", off, masks[m]);
            l.p[off] ^= masks[m];
            write_file(f->path, l.p, l.len);
            read_salvaging(f->path, l.len, &rb, where);
            l.p[off] ^= masks[m];

            expect_shard_whole(&rb, 1, where);
            expect_shard_whole(&rb, 2, where);
            if (rb.n_skips == 0)
                fail_msg("%s: damage went unreported", where);
            if (rec >= 0 && in >= 4) {
                /* The CRC, timestamp or payload: the framing holds, so
                 * exactly that record is lost and the skip says so. */
                for (unsigned i = 0; i < N_RECORDS; i++)
                    if (rb.got[0][i] != ((int)i != rec))
                        fail_msg("%s: record %u of alpha %s", where, i,
                                 rb.got[0][i] ? "read back though damaged" : "lost");
                assert_int_equal(rb.n_skips, 1);
                assert_int_equal(rb.skips[0].offset, l.record_off[0][rec]);
                assert_int_equal(rb.skips[0].bytes, SHARD_RECORD_HEADER + record_len(0, rec));
                assert_int_equal(rb.skips[0].records, 1);
                assert_false(rb.skips[0].resync);
                assert_true(rb.skips[0].in_shard);
                assert_string_equal(rb.skips[0].header.producer, "alpha");
                assert_string_equal(rb.skips[0].why, "record CRC mismatch");
            } else if (rec >= 0) {
                /* The length: every record before it is still read. */
                for (int i = 0; i < rec; i++)
                    if (!rb.got[0][i])
                        fail_msg("%s: record %d of alpha, before the damage, lost", where, i);
                assert_int_equal(rb.skips[0].offset, l.record_off[0][rec]);
            } else if (off >= l.trailer_off[0]) {
                /* The trailer: every record is before it. */
                expect_shard_whole(&rb, 0, where);
                assert_int_equal(rb.n_skips, 1);
                assert_int_equal(rb.skips[0].offset, l.trailer_off[0]);
                assert_true(rb.skips[0].resync);
                assert_int_equal(rb.skips[0].offset + rb.skips[0].bytes, l.shard_start[1]);
            } else {
                /* The header: the shard cannot be told, and is skipped up
                 * to the next one. */
                assert_int_equal(rb.n_skips, 1);
                assert_int_equal(rb.skips[0].offset, 0);
                assert_int_equal(rb.skips[0].bytes, l.shard_start[1]);
                assert_false(rb.skips[0].in_shard);
            }
        }
    }
    free(l.p);
}

static void test_flip_every_byte_sealed(void **state)
{
    flip_every_byte(*state, true);
}

static void test_flip_every_byte_trailerless(void **state)
{
    flip_every_byte(*state, false);
}

/* Writes a bogus length into record rec of the first shard (its CRC then
 * fails, or the file ends inside it) and reads the file back: the reader
 * must resynchronise, never trust the length. */
static void bogus_length(struct fixture *f, struct layout *l, unsigned rec, uint32_t len,
                         const char *what, struct readback *rb)
{
    unsigned char saved[4];
    unsigned char *p = l->p + l->record_off[0][rec];
    char where[96];

    snprintf(where, sizeof(where), "record %u length %u (%s)", rec, len, what);
    memcpy(saved, p, 4);
    wire_put_u32(p, len);
    write_file(f->path, l->p, l->len);
    read_salvaging(f->path, l->len, rb, where);
    memcpy(p, saved, 4);

    expect_shard_whole(rb, 1, where);
    expect_shard_whole(rb, 2, where);
    assert_true(rb->n_skips >= 1);
    assert_int_equal(rb->skips[0].offset, l->record_off[0][rec]);
    assert_true(rb->skips[0].resync);
    for (unsigned i = 0; i < rec; i++)
        if (!rb->got[0][i])
            fail_msg("%s: record %u of alpha, before the damage, lost", where, i);
}

static void test_bogus_lengths(void **state)
{
    struct fixture *f = *state;
    struct layout l;
    struct readback rb;

    build(&l, true);
    for (unsigned rec = 0; rec < N_RECORDS; rec++) {
        uint64_t at = l.record_off[0][rec] + SHARD_RECORD_HEADER;
        uint32_t real = record_len(0, rec);

        /* In range but wrong, a little and a lot. */
        bogus_length(f, &l, rec, real + 5, "in range, 5 too long", &rb);
        bogus_length(f, &l, rec, real > 1 ? real - 1 : 2, "in range, wrong", &rb);
        bogus_length(f, &l, rec, 4000, "in range, into the padding or beyond", &rb);
        /* Out of range. */
        bogus_length(f, &l, rec, 0, "zero", &rb);
        bogus_length(f, &l, rec, SHARD_RECORD_MAX + 1, "one over the maximum", &rb);
        bogus_length(f, &l, rec, UINT32_MAX, "all ones", &rb);
        /* Past the end of the file: a torn record, yet shards follow. */
        bogus_length(f, &l, rec, (uint32_t)(l.len - at + 1), "one past the end", &rb);
        bogus_length(f, &l, rec, 1u << 20, "far past the end", &rb);
        assert_string_equal(rb.skips[0].why, "an item runs past the end of the file, yet a "
                                             "valid shard follows (a bad length)");
        /* Onto record boundaries of the third shard: a valid record
         * follows there, but the length passes two shard headers. */
        for (unsigned i = 0; i < N_RECORDS; i++)
            bogus_length(f, &l, rec, (uint32_t)(l.record_off[2][i] - at),
                         "onto a record of the third shard", &rb);
        bogus_length(f, &l, rec, (uint32_t)(l.record_off[2][3] + 7 - at),
                     "into a record of the third shard", &rb);
        bogus_length(f, &l, rec, (uint32_t)(l.shard_start[2] - at),
                     "onto the third shard's header", &rb);
        bogus_length(f, &l, rec, (uint32_t)(l.len - at), "exactly to the end of the file", &rb);
    }
    free(l.p);
}

/* A record damaged in its payload whose successor is only half written:
 * while the file may grow, the reader cannot tell yet and says so; once
 * the successor is whole, the damaged record alone is skipped. */
static void test_growing_file(void **state)
{
    struct fixture *f = *state;
    struct layout l;
    struct shard_reader *r = NULL;
    struct shard_item it;
    struct shard_skip skip;
    size_t cut = 0, rec2_end = 0;
    int fd, wfd;

    build(&l, false);
    rec2_end = l.record_off[0][3];
    cut = rec2_end + 10; /* inside record 3's header */
    l.p[l.record_off[0][2] + SHARD_RECORD_HEADER] ^= 0x40;
    write_file(f->path, l.p, cut);
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &it), 1); /* header */
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
    assert_int_equal(shard_reader_skip_damage(r, SHARD_SKIP_GROWING, &skip), -EAGAIN);
    assert_int_equal(shard_reader_next(r, &it), -EBADMSG); /* still stopped there */

    /* The writer goes on: record 3 is whole now, record 4 torn. */
    wfd = open(f->path, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(wfd >= 0);
    assert_int_equal(write(wfd, l.p + cut, l.record_off[0][4] + 3 - cut),
                     (ssize_t)(l.record_off[0][4] + 3 - cut));
    assert_int_equal(shard_reader_skip_damage(r, SHARD_SKIP_GROWING, &skip), 1);
    assert_int_equal(skip.offset, l.record_off[0][2]);
    assert_int_equal(skip.records, 1);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.offset, l.record_off[0][3]);
    /* A torn tail of a growing file is no damage: nothing to skip yet. */
    assert_int_equal(shard_reader_next(r, &it), -ENODATA);
    assert_int_equal(shard_reader_skip_damage(r, SHARD_SKIP_GROWING, &skip), -EAGAIN);
    assert_int_equal(shard_reader_continue(r), 0);
    assert_int_equal(write(wfd, l.p + l.record_off[0][4] + 3,
                           l.record_off[0][5] - l.record_off[0][4] - 3),
                     (ssize_t)(l.record_off[0][5] - l.record_off[0][4] - 3));
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.offset, l.record_off[0][4]);
    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_int_equal(close(wfd), 0);
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);
    free(l.p);
}

static void test_edges(void **state)
{
    struct fixture *f = *state;
    struct layout l;
    struct readback rb;
    struct shard_reader *r = NULL;
    struct shard_item it;
    struct shard_skip skip = { .bytes = 77 };
    unsigned char *junk;
    int fd;

    /* An empty file: nothing to skip, and nothing follows. */
    write_file(f->path, "", 0);
    fd = open(f->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_skip_damage(r, 0, &skip), -EINVAL); /* no damage yet */
    assert_int_equal(skip.bytes, 77);                                  /* untouched */
    assert_int_equal(shard_reader_next(r, &it), -ENODATA);
    assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 0);
    assert_int_equal(skip.bytes, 0);
    assert_true(skip.torn);
    assert_int_equal(shard_reader_next(r, &it), 0);
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);

    /* Junk before the first shard, with a stray magic in it. */
    build(&l, true);
    junk = malloc(l.len + 100);
    assert_non_null(junk);
    memset(junk, 'x', 100);
    memcpy(junk + 40, SHARD_MAGIC, SHARD_MAGIC_SIZE);
    memcpy(junk + 100, l.p, l.len);
    write_file(f->path, junk, l.len + 100);
    read_salvaging(f->path, l.len + 100, &rb, "junk first");
    assert_int_equal(rb.n_records, N_SHARDS * N_RECORDS);
    assert_int_equal(rb.n_skips, 1);
    assert_int_equal(rb.skips[0].bytes, 100);
    assert_string_equal(rb.skips[0].why, "no shard header (bad magic)");

    /* A torn tail after damage: the last shard cut inside a record. */
    l.p[l.record_off[0][1] + 20] ^= 1;
    write_file(f->path, l.p, l.record_off[2][5] + 9);
    read_salvaging(f->path, l.record_off[2][5] + 9, &rb, "torn tail");
    expect_shard_whole(&rb, 1, "torn tail");
    assert_int_equal(rb.n_skips, 2);
    assert_int_equal(rb.skips[0].records, 1);
    assert_true(rb.skips[1].torn);
    assert_int_equal(rb.skips[1].offset, l.record_off[2][5]);
    assert_int_equal(rb.last, 0);
    free(junk);
    free(l.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_intact_file_has_no_skips, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_every_byte_sealed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flip_every_byte_trailerless, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bogus_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_growing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_edges, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
