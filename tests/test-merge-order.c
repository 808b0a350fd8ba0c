/* The order of logctl merge's output for shards with a stream (format
 * version 3): each producer stream's shards in first_position order, in the
 * places the stream's shards have in name order, whatever their shard ids
 * say (a daemon whose clock went backwards gives a resumed stream's later
 * shard the lower id); a shard without a stream keeps its place. The
 * shards are built with the common encoders, sealed as the daemon seals
 * them, and the output is read back through the shard reader. Also: the
 * intent of such a merge, whose ids go down within a producer, parses
 * back, so a killed merge can be recovered. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bytebuf.h"
#include "merge-internal.h"
#include "merge.h"
#include "shard_format.h"

#include "merge-fixture.h"

static const uint8_t stream_s[SHARD_STREAM_ID_SIZE] = { 0x51, 1, 2, 3, 4, 5, 6, 7,
                                                        8, 9, 10, 11, 12, 13, 14, 15 };
static const uint8_t stream_t[SHARD_STREAM_ID_SIZE] = { 0x7e, 1, 2, 3, 4, 5, 6, 7,
                                                        8, 9, 10, 11, 12, 13, 14, 15 };

struct v3_spec {
    const char *producer;
    uint64_t id;
    const uint8_t *stream; /* NULL: version 2, no stream */
    uint64_t first;
    unsigned records;
};

/* Writes a sealed shard of spec into done/ under its name. */
static void write_v3(const struct fixture *f, const struct v3_spec *spec)
{
    struct bytebuf b = { 0 };
    struct shard_header h;
    struct shard_trailer t = { .newest_ns = BASE_TS };
    char *name, *path;

    memset(&h, 0, sizeof(h));
    h.shard_id = spec->id;
    h.created_ns = BASE_TS;
    h.producer_len = strlen(spec->producer);
    memcpy(h.producer, spec->producer, h.producer_len + 1);
    if (spec->stream) {
        h.version = SHARD_FORMAT_VERSION_STREAM;
        memcpy(h.stream_id, spec->stream, SHARD_STREAM_ID_SIZE);
        h.first_position = spec->first;
    }
    shard_encode_header(
        bytebuf_grow(&b, shard_header_size_v(shard_header_write_version(&h), h.producer_len)), &h);
    for (unsigned i = 0; i < spec->records; i++) {
        char text[64];
        int len = snprintf(text, sizeof(text), "%016llx %u", (unsigned long long)spec->id, i);

        shard_encode_record(bytebuf_grow(&b, SHARD_RECORD_HEADER + (size_t)len), text,
                            (uint32_t)len, BASE_TS + i);
    }
    t.shard_len = b.len;
    t.records = spec->records;
    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(&b, t.trailer_len), &t);
    name = shard_name(spec->producer, spec->id);
    path = join(f->done, name);
    write_file(path, b.p, b.len);
    free(path);
    free(name);
    free(b.p);
}

/* Reads the merged file at path and fills ids with the shard id of each
 * shard in file order (at most max); checks on the way that each stream's
 * positions go up one at a time from the first one read. Returns the shard count. */
static size_t read_order(const char *path, uint64_t *ids, size_t max)
{
    struct shard_reader *r = NULL;
    struct shard_item item;
    /* The streams of these tests differ in their first byte. */
    uint64_t next[256];
    bool seen[256] = { false };
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    while ((rc = shard_reader_next(r, &item)) > 0) {
        if (item.kind == SHARD_ITEM_HEADER) {
            assert_true(n < max);
            ids[n++] = item.header->shard_id;
        } else if (item.kind == SHARD_ITEM_RECORD && shard_header_has_stream(item.header)) {
            uint8_t k = item.header->stream_id[0];

            assert_true(!seen[k] || item.position == next[k]);
            seen[k] = true;
            next[k] = item.position + 1;
        }
    }
    assert_int_equal(rc, 0);
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);
    return n;
}

/* Streams S and T of producer "app" spread over shards whose ids disagree
 * with their positions, a version 2 shard of "app" between them, and a
 * producer "b" whose stream is in order: the stream's places in name order
 * (ids 1 to 9) are filled by position, the version 2 shard keeps its own. */
static void test_streams_by_position(void **state)
{
    static const struct v3_spec specs[] = {
        { "app", 1, stream_t, 10, 2 }, /* T's second: the clock went back */
        { "app", 2, stream_s, 3, 3 },  /* S's second */
        { "app", 3, NULL, 0, 2 },      /* no stream */
        { "app", 4, stream_t, 0, 10 }, /* T's first */
        { "app", 5, stream_s, 0, 3 },  /* S's first */
        { "app", 9, stream_s, 6, 1 },  /* S's third */
    };
    static const uint8_t stream_b[SHARD_STREAM_ID_SIZE] = { 0xb };
    /* Places 1, 2, 4, 5, 9 of app hold T, S, T, S, S. */
    static const uint64_t want[] = { 4, 5, 3, 1, 2, 9, 1, 2 };
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct fixture f;
    uint64_t ids[16];
    size_t n;

    (void)state;
    fixture_init(&f);
    for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
        write_v3(&f, &specs[i]);
    write_v3(&f, &(struct v3_spec){ "b", 1, stream_b, 0, 2 });
    write_v3(&f, &(struct v3_spec){ "b", 2, stream_b, 2, 2 });

    opts.spool = f.spool;
    opts.output = join(f.out, "merged.lsm");
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, 8);
    for (size_t i = 0; i < res.n_sources; i++)
        assert_true(res.sources[i].id == want[i]);
    n = read_order(opts.output, ids, 16);
    assert_int_equal(n, 8);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] == want[i]);

    /* The intent of this order, ids going down within "app", is one that
     * recovery accepts. */
    {
        struct merge_intent in;
        char *text = NULL;
        size_t len = 0;

        assert_int_equal(merge_intent_format(true, "/m", "o", "t", res.sources, res.n_sources,
                                             &text, &len),
                         0);
        assert_int_equal(merge_intent_parse(text, len, &in, NULL), 0);
        assert_int_equal(in.n_sources, 8);
        for (size_t i = 0; i < in.n_sources; i++)
            assert_true(in.sources[i].id == want[i]);
        merge_intent_free(&in);
        free(text);
    }
    merge_result_free(&res);
    free((char *)opts.output);
    fixture_free(&f);
}

/* --delete with a stream out of name order, then a second merge of a
 * later shard: each output lists the stream in position order, and the
 * sources are gone. */
static void test_delete_keeps_order(void **state)
{
    static const uint64_t want[] = { 7, 3 };
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct fixture f;
    uint64_t ids[4];

    (void)state;
    fixture_init(&f);
    write_v3(&f, &(struct v3_spec){ "app", 3, stream_s, 100, 4 });
    write_v3(&f, &(struct v3_spec){ "app", 7, stream_s, 96, 4 });
    opts.spool = f.spool;
    opts.delete_sources = true;
    opts.output = join(f.out, "one.lsm");
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.deleted, 2);
    merge_result_free(&res);
    assert_int_equal(count_entries(f.done), 0);
    assert_int_equal(read_order(opts.output, ids, 4), 2);
    for (size_t i = 0; i < 2; i++)
        assert_true(ids[i] == want[i]);
    check_no_leftovers(&f);
    free((char *)opts.output);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_streams_by_position),
        cmocka_unit_test(test_delete_keeps_order),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
