/* logctl cat and verify on shards with a stream (format version 3), run as
 * the real logctl program on real files built with the shard encoders (no
 * daemon: it still writes version 2):
 *  - cat --meta and --json show each record's stream and position, and
 *    '-' or null for a version 2 shard in the same merged file;
 *  - verify exits 1 on a position found in two shards of one stream and on
 *    a position missing between the lowest and highest it saw, and 0 on a
 *    stream whose first shards are gone (positions start at 500) and on
 *    the same shard given twice (a copy, not a duplicate). */
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
        cmocka_unit_test_setup_teardown(test_verify_duplicate, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_verify_gap, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_verify_start_gone, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
