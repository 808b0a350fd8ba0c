/* logctl cat and verify on shards with a stream (format version 3), run as
 * the real logctl program on real files built with the shard encoders (no
 * daemon: it still writes version 2):
 *  - cat --meta and --json show each record's stream and position, and
 *    '-' or null for a version 2 shard in the same merged file;
 *  - verify exits 1 on a position found in two shards of one stream and on
 *    a position missing between the lowest and highest it saw, and 0 on a
 *    stream whose first shards are gone (positions start at 500) and on
 *    the same shard given twice (a copy, not a duplicate);
 *  - cat presents each stream in position order across its files and
 *    shards (files given in the wrong order, a spool whose shard ids
 *    disagree with the positions, a merged file with a later shard of a
 *    lower id), shards without a stream in their places, and reads a file
 *    it cannot index (a cut merged file) front to back. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "harness.h"
#include "json.h"
#include "shard_format.h"


static const uint8_t stream_s[SHARD_STREAM_ID_SIZE] = {
    0x5e, 0x11, 0x02, 0x93, 0x44, 0xa5, 0x06, 0xf7, 0x08, 0x19, 0xaa, 0x3b, 0x0c, 0xdd, 0x0e, 0x9f,
};
#define STREAM_S_HEX "5e11029344a506f70819aa3b0cdd0e9f"

/* ---- files built with the encoders ---- */

/* A sealed shard of n records "<producer> NNNN" (NNNN from 0), version 3
 * with stream (and first) when stream is not NULL, else version 2. */
static void put_shard(struct bytebuf *b, const char *producer, uint64_t id, const uint8_t *stream,
                      uint64_t first, unsigned n)
{
    struct shard_header h;
    struct shard_trailer t = { .newest_ns = 1800000000000000000ull };
    size_t start = b->len;

    memset(&h, 0, sizeof(h));
    h.uid = 1000;
    h.gid = 1000;
    h.pid = 4242;
    h.shard_id = id;
    h.created_ns = 1800000000000000000ull;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    if (stream) {
        h.version = SHARD_FORMAT_VERSION_STREAM;
        memcpy(h.stream_id, stream, SHARD_STREAM_ID_SIZE);
        h.first_position = first;
    }
    shard_encode_header(bytebuf_grow(b, shard_header_size_v(shard_header_write_version(&h),
                                                    h.producer_len)),
                        &h);
    for (unsigned i = 0; i < n; i++) {
        char text[80];
        int len = snprintf(text, sizeof(text), "%s %04u", producer, i);

        shard_encode_record(bytebuf_grow(b, SHARD_RECORD_HEADER + (size_t)len), text, (uint32_t)len,
                            1800000000000000000ull + i * 1000ull);
    }
    t.shard_len = b->len - start;
    t.records = n;
    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

/* Writes b to dir/name and returns the path (to free); empties b. */
static char *write_file(struct harness *h, const char *name, struct bytebuf *b)
{
    char *path = harness_path(h->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, b->p, b->len), (ssize_t)b->len);
    assert_int_equal(close(fd), 0);
    b->len = 0;
    return path;
}

/* ---- running logctl ---- */

/* ---- cat ---- */

static void test_cat_shows_positions(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *file;
    struct harness_run r;

    put_shard(&b, "streamed", 1, stream_s, 500, 3);
    put_shard(&b, "plain", 2, NULL, 0, 2);
    file = write_file(h, "mixed.lsm", &b);

    r = harness_run_logctl(h, "cat", "--meta", file, NULL);
    harness_expect_code(&r, 0, "cat --meta");
    for (unsigned i = 0; i < 3; i++) {
        char want[160];

        snprintf(want, sizeof(want), " 0000000000000001 " STREAM_S_HEX " %u streamed %04u\n",
                 500 + i, i);
        harness_expect_in(r.out, want, "cat --meta, a version 3 shard");
    }
    harness_expect_in(r.out, " 0000000000000002 - - plain 0000\n", "cat --meta, a version 2 shard");
    harness_expect_in(r.out, " 0000000000000002 - - plain 0001\n", "cat --meta, a version 2 shard");
    harness_run_free(&r);

    r = harness_run_logctl(h, "cat", "--json", file, NULL);
    harness_expect_code(&r, 0, "cat --json");
    {
        char *line = r.out, *nl;
        unsigned n = 0;

        for (; (nl = strchr(line, '\n')) != NULL; line = nl + 1, n++) {
            struct json_value *v = NULL;
            const struct json_value *stream, *position;
            const char *why = NULL;
            size_t off;

            assert_int_equal(json_parse(line, (size_t)(nl - line), &v, &why, &off), 0);
            stream = json_get(v, "stream");
            position = json_get(v, "position");
            assert_non_null(stream);
            assert_non_null(position);
            if (n < 3) {
                assert_string_equal(json_get_str(v, "producer", ""), "streamed");
                assert_string_equal(json_get_str(v, "stream", ""), STREAM_S_HEX);
                assert_true(json_get_u64(v, "position", 0) == 500 + n);
            } else {
                assert_string_equal(json_get_str(v, "producer", ""), "plain");
                assert_int_equal(stream->type, JSON_NULL);
                assert_int_equal(position->type, JSON_NULL);
            }
            json_value_free(v);
        }
        assert_int_equal(n, 5);
    }
    harness_run_free(&r);
    free(file);
    free(b.p);
}

/* ---- cat: each stream in position order ---- */

/* A shard of stream_s with n records "S <position>", sealed unless
 * unsealed (a shard being written, as in active/). */
static void put_positions(struct bytebuf *b, uint64_t id, uint64_t first, unsigned n,
                          bool unsealed)
{
    struct shard_header h;
    struct shard_trailer t = { .newest_ns = 1800000000000000000ull };
    size_t start = b->len;

    memset(&h, 0, sizeof(h));
    h.shard_id = id;
    h.created_ns = 1800000000000000000ull;
    h.producer_len = strlen("app");
    memcpy(h.producer, "app", h.producer_len + 1);
    h.version = SHARD_FORMAT_VERSION_STREAM;
    memcpy(h.stream_id, stream_s, SHARD_STREAM_ID_SIZE);
    h.first_position = first;
    shard_encode_header(bytebuf_grow(b, shard_header_size_v(SHARD_FORMAT_VERSION_STREAM,
                                                             h.producer_len)),
                        &h);
    for (unsigned i = 0; i < n; i++) {
        char text[40];
        int len = snprintf(text, sizeof(text), "S %" PRIu64, first + i);

        shard_encode_record(bytebuf_grow(b, SHARD_RECORD_HEADER + (size_t)len), text,
                            (uint32_t)len, 1800000000000000000ull + first + i);
    }
    if (unsealed)
        return;
    t.shard_len = b->len - start;
    t.records = n;
    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

/* "S from" to "S to - 1", one a line, after prefix, then suffix. */
static char *positions_text(const char *prefix, uint64_t from, uint64_t to, const char *suffix)
{
    struct bytebuf b = { 0 };
    size_t n = strlen(prefix);

    if (n > 0) /* an empty buffer grown by nothing has no address yet */
        memcpy(bytebuf_grow(&b, n), prefix, n);
    for (uint64_t p = from; p < to; p++) {
        char line[40];
        int len = snprintf(line, sizeof(line), "S %" PRIu64 "\n", p);

        memcpy(bytebuf_grow(&b, (size_t)len), line, (size_t)len);
    }
    n = strlen(suffix) + 1;
    memcpy(bytebuf_grow(&b, n), suffix, n);
    return (char *)b.p;
}

/* Files given in the wrong order, and a merged file whose stream goes on
 * in a sealed shard with a lower id, given first, with a version 2 shard
 * inside the merged file: the stream comes out in position order, the
 * version 2 shard where it was. */
static void test_cat_files_by_position(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *late, *early, *merged, *want;
    struct harness_run r;

    put_positions(&b, 1, 3, 3, false);
    late = write_file(h, "app.0000000000000001.shard", &b);
    put_positions(&b, 2, 0, 3, false);
    early = write_file(h, "app.0000000000000002.shard", &b);

    r = harness_run_logctl(h, "cat", late, early, NULL);
    harness_expect_code(&r, 0, "cat of two files in the wrong order");
    want = positions_text("", 0, 6, "");
    assert_string_equal(r.out, want);
    free(want);
    harness_run_free(&r);

    /* merged: S 10-12 (id 5), plain (id 8), S 13-14 (id 6); then S 15-16
     * in a shard with id 3, given before it. */
    put_positions(&b, 5, 10, 3, false);
    put_shard(&b, "app", 8, NULL, 0, 2);
    put_positions(&b, 6, 13, 2, false);
    merged = write_file(h, "merged.lsm", &b);
    free(late);
    put_positions(&b, 3, 15, 2, false);
    late = write_file(h, "app.0000000000000003.shard", &b);

    r = harness_run_logctl(h, "cat", late, merged, NULL);
    harness_expect_code(&r, 0, "cat of a later shard and a merged file");
    /* Places: late, S 10, plain, S 13: the stream fills its three (the
     * first, second and fourth) by position, the plain shard keeps its
     * place, the third. */
    {
        char *head = positions_text("", 10, 15, "app 0000\napp 0001\n");
        char *tail = positions_text("", 15, 17, "");

        assert_true(asprintf(&want, "%s%s", head, tail) > 0);
        free(head);
        free(tail);
    }
    assert_string_equal(r.out, want);
    free(want);
    harness_run_free(&r);

    /* --meta and --json read the same shards in the same order. */
    r = harness_run_logctl(h, "cat", "--meta", late, merged, NULL);
    harness_expect_code(&r, 0, "cat --meta of a later shard and a merged file");
    harness_expect_in(r.out, " 0000000000000005 " STREAM_S_HEX " 10 S 10\n", "cat --meta");
    assert_true(strstr(r.out, " 16 S 16\n") > strstr(r.out, " 10 S 10\n"));
    harness_run_free(&r);
    free(late);
    free(early);
    free(merged);
    free(b.p);
}

/* A spool whose stream is split across done/ and active/, its shard ids
 * disagreeing with its positions (ids 1: S 6-8 still being written, 3: S
 * 3-5, 9: S 0-2), with a version 2 shard (id 5) among them: by position,
 * the version 2 shard in its own place. */
static void test_cat_spool_by_position(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *spool = harness_path(h->dir, "spool");
    char *done = harness_path(spool, "done");
    char *active = harness_path(spool, "active");
    char *want, *head, *tail;
    struct harness_run r;

    assert_int_equal(mkdir(spool, 0755), 0);
    assert_int_equal(mkdir(done, 0755), 0);
    assert_int_equal(mkdir(active, 0755), 0);
    put_positions(&b, 9, 0, 3, false);
    free(write_file(h, "spool/done/app.0000000000000009.shard", &b));
    put_positions(&b, 3, 3, 3, false);
    free(write_file(h, "spool/done/app.0000000000000003.shard", &b));
    put_shard(&b, "app", 5, NULL, 0, 2);
    free(write_file(h, "spool/done/app.0000000000000005.shard", &b));
    put_positions(&b, 1, 6, 3, true);
    free(write_file(h, "spool/active/app.0000000000000001.tmp", &b));

    r = harness_run_logctl(h, "cat", "--spool", spool, NULL);
    harness_expect_code(&r, 0, "cat --spool");
    /* Places by id: 1, 3, 5 (plain), 9. */
    head = positions_text("", 0, 6, "app 0000\napp 0001\n");
    tail = positions_text("", 6, 9, "");
    assert_true(asprintf(&want, "%s%s", head, tail) > 0);
    assert_string_equal(r.out, want);
    harness_run_free(&r);

    /* --producer keeps the order. */
    r = harness_run_logctl(h, "cat", "--spool", spool, "--producer", "app", NULL);
    harness_expect_code(&r, 0, "cat --spool --producer");
    assert_string_equal(r.out, want);
    harness_run_free(&r);
    free(want);
    free(head);
    free(tail);
    free(spool);
    free(done);
    free(active);
    free(b.p);
}

/* A damaged merged file cannot be indexed: it is read front to back at its
 * place, and its damage reported as before. */
static void test_cat_damaged_in_file_order(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *merged, *want;
    struct harness_run r;

    put_positions(&b, 2, 3, 3, false);
    put_positions(&b, 1, 0, 3, false);
    b.len -= 3; /* the trailer cut: no longer indexable */
    merged = write_file(h, "cut.lsm", &b);

    r = harness_run_logctl(h, "cat", merged, NULL);
    harness_expect_code(&r, 1, "cat of a cut merged file");
    want = positions_text("", 3, 6, "");
    assert_true(strncmp(r.out, want, strlen(want)) == 0);
    harness_expect_in(r.err, "cut.lsm", "cat of a cut merged file");
    free(want);
    harness_run_free(&r);
    free(merged);
    free(b.p);
}

/* ---- verify ---- */

static void test_verify_duplicate(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *one, *two;
    struct harness_run r;

    put_shard(&b, "dup", 1, stream_s, 0, 10);
    one = write_file(h, "dup.0000000000000001.shard", &b);
    put_shard(&b, "dup", 2, stream_s, 5, 10); /* 5 to 14: 5 to 9 again */
    two = write_file(h, "dup.0000000000000002.shard", &b);

    r = harness_run_logctl(h, "verify", one, NULL);
    harness_expect_code(&r, 0, "verify of one shard");
    harness_expect_in(r.out, "OK       stream " STREAM_S_HEX ": positions 0 to 9\n", "verify");
    harness_run_free(&r);

    /* The same shard twice is a copy, not a duplicate. */
    r = harness_run_logctl(h, "verify", one, one, NULL);
    harness_expect_code(&r, 0, "verify of one shard given twice");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", one, two, NULL);
    harness_expect_code(&r, 1, "verify of two shards sharing positions");
    harness_expect_in(r.out, "DUPLICATE stream " STREAM_S_HEX ": 5 positions seen in two shards, "
                     "the first, 5, again in ", "verify");
    harness_expect_in(r.out, "2 files checked, 0 bad; 1 stream with a gap or a duplicate position\n",
              "verify");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "--json", one, two, NULL);
    harness_expect_code(&r, 1, "verify --json of two shards sharing positions");
    harness_expect_in(r.out, "{\"stream\":\"" STREAM_S_HEX "\",\"ok\":false,\"first\":0,\"last\":14,"
                     "\"missing\":0,\"duplicates\":5,", "verify --json");
    harness_run_free(&r);
    free(one);
    free(two);
    free(b.p);
}

static void test_verify_gap(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *file;
    struct harness_run r;

    put_shard(&b, "gappy", 1, stream_s, 500, 10);
    put_shard(&b, "gappy", 3, stream_s, 520, 10); /* shard 2, 510 to 519, is gone */
    file = write_file(h, "gappy.lsm", &b);

    r = harness_run_logctl(h, "verify", file, NULL);
    harness_expect_code(&r, 1, "verify of a stream with a gap");
    harness_expect_in(r.out, "OK       ", "verify: the file itself is fine");
    harness_expect_in(r.out,
              "GAP      stream " STREAM_S_HEX ": positions 510 to 519 missing (it has 500 to 529)\n",
              "verify");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "--json", "--quiet", file, NULL);
    harness_expect_code(&r, 1, "verify --json --quiet of a stream with a gap");
    harness_expect_in(r.out, "\"missing\":10,\"duplicates\":0,\"gaps\":[{\"from\":510,\"to\":519}]",
              "verify --json");
    assert_null(strstr(r.out, "\"file\"")); /* the file is OK: quiet */
    harness_run_free(&r);
    free(file);
    free(b.p);
}

/* merge --delete removed the stream's first shards: its positions start at
 * 500, which is no gap. Version 2 shards alongside have no stream. */
static void test_verify_start_gone(void **state)
{
    struct harness *h = *state;
    struct bytebuf b = { 0 };
    char *file;
    struct harness_run r;

    put_shard(&b, "late", 7, stream_s, 500, 10);
    put_shard(&b, "late", 8, stream_s, 510, 5);
    put_shard(&b, "old", 9, NULL, 0, 5);
    file = write_file(h, "late.lsm", &b);

    r = harness_run_logctl(h, "verify", file, NULL);
    harness_expect_code(&r, 0, "verify of a stream starting at 500");
    harness_expect_in(r.out, "OK       stream " STREAM_S_HEX ": positions 500 to 514\n", "verify");
    harness_expect_in(r.out, "1 file checked, 0 bad\n", "verify");
    harness_run_free(&r);
    free(file);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cat_shows_positions, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_cat_files_by_position, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_cat_spool_by_position, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_cat_damaged_in_file_order, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_verify_duplicate, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_verify_gap, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_verify_start_gone, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
