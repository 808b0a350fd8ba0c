/* logctl prune's rules (docs/RETENTION.md): the real logctl on real
 * spools built by prune-fixture.c.
 *  - merged files by age and by total size, oldest first, the options over
 *    the config file, a merged directory elsewhere: exactly the files the
 *    rule names go, in that order, and the output says why;
 *  - shipped shards on a spool with ship/progress: only those shipped whole,
 *    by the age of their newest record and by size, their streams'
 *    positions in streams/; never an active shard, a shard not shipped
 *    whole, quarantine/; without ship/progress done/ is untouched;
 *  - --dry-run removes and writes nothing, and names what the real run
 *    then removes.
 * Hostile files and locks are test-prune-hostile.c's, the real daemon and
 * the kill rounds test-prune-daemon.c's. LOGSHARD_TEST_FILTER=<test> runs
 * one. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"
#include "json.h"
#include "prune-fixture.h"
#include "stream_positions.h"

static uint64_t size_of(const char *path)
{
    struct stat st;

    assert_int_equal(lstat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* ---- merged files: age, then size, oldest first ---- */

static void test_merged_age_and_size(void **state)
{
    struct world *w = *state;
    static const uint64_t age[] = { 40 * DAY, 35 * DAY, 20 * DAY, 10 * DAY, 2 * DAY, HOUR };
    static const unsigned blocks[] = { 1, 2, 3, 4, 5, 6 };
    char *path[6], *archive = harness_path(w->h.dir, "archive"), *arch[3];
    char *limit = fmt("%u", 12 * BLOCK);
    struct harness_run r;

    for (size_t i = 0; i < 6; i++)
        path[i] = add_merged(w, w->merged, w->now - age[i], blocks[i]);
    /* The file says less; the options win, as for logctl ship. */
    harness_write_config(&w->h, "[retention]\nmerged_max_age = 1d\nmerged_max_bytes = 1G\n");

    /* 30 days: the two oldest by age; then 18 blocks over 12: the next two,
     * oldest first, leaving 11. */
    r = prune(w, "--merged-max-age", "30d", "--merged-max-bytes", limit, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune");
    expect_removed(&r, "removed", path, 4);
    line_has(&r, path[0], "(4096 bytes): age 40d");
    line_has(&r, path[1], "over merged_max_age 30d");
    line_has(&r, path[2], "(12288 bytes): size: merged files over "
                                            "merged_max_bytes 48 KiB");
    line_has(&r, path[3], "size:");
    harness_expect_in(r.out, "pruned 4 files, 40960 bytes", "the summary");
    harness_expect_in(r.out, "kept 2 merged files (44 KiB)", "what is kept");
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(exists(path[i]), i >= 4);
    harness_run_free(&r);

    /* Again: nothing more to do, exit 0. */
    r = prune(w, "--merged-max-age", "30d", "--merged-max-bytes", limit, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune with nothing to do");
    harness_expect_in(r.out, "pruned 0 files", "the summary");
    harness_run_free(&r);

    /* The config file alone: 1 day takes the 2-day-old file. */
    r = prune(w, NULL, NULL, NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune by the config file");
    expect_removed(&r, "removed", &path[4], 1);
    assert_true(exists(path[5]));
    harness_run_free(&r);

    /* A merged directory elsewhere ([retention] merged_dir, --merged-dir):
     * there, and only there. */
    make_dir(archive);
    arch[0] = add_merged(w, archive, w->now - 90 * DAY, 1);
    arch[1] = add_merged(w, archive, w->now - 60 * DAY, 1);
    arch[2] = add_merged(w, archive, w->now - DAY, 1);
    r = prune(w, "--merged-dir", archive, "--merged-max-age", "30d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune --merged-dir");
    expect_removed(&r, "removed", arch, 2);
    assert_true(exists(arch[2]));
    assert_true(exists(path[5]));
    harness_run_free(&r);

    /* Bad values are usage errors naming the option. */
    r = prune(w, "--merged-max-age", "soon", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 2, "a bad duration");
    harness_expect_in(r.err, "--merged-max-age 'soon'", "the option named");
    harness_run_free(&r);
    r = prune(w, "--shipped-max-bytes", "-1", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 2, "a bad size");
    harness_run_free(&r);
    /* No limit at all: nothing to do, nothing opened. */
    harness_write_config(&w->h, "");
    r = prune(w, NULL, NULL, NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune without limits");
    harness_expect_in(r.out, "nothing to prune: no [retention] limit is set", "the note");
    assert_true(exists(path[5]));
    harness_run_free(&r);

    for (size_t i = 0; i < 6; i++)
        free(path[i]);
    for (size_t i = 0; i < 3; i++)
        free(arch[i]);
    free(archive);
    free(limit);
}

/* ---- shipped shards: shipped whole only, age then size ---- */

struct shipped_spool {
    struct shard a1, a2, a3, b1, b2, c1, l1, l2;
    uint8_t a[16], b[16], c[16];
    char *active, *quarantined;
};

/* Streams a (three shards, shipped), b (two, shipped), c (one, its last
 * record not shipped), l1 and l2 without a stream (l1 shipped, l2 not),
 * an active shard of a whose records the progress covers, and a file in
 * quarantine/. */
static void make_shipped_spool(struct world *w, struct shipped_spool *s)
{
    struct positions_entry p[5];
    struct shard act;

    make_stream_id(s->a, 1);
    make_stream_id(s->b, 2);
    make_stream_id(s->c, 3);
    s->a1 = add_shard(w, w->done, "app", s->a, 0, 1, w->now - 5 * DAY);
    s->a2 = add_shard(w, w->done, "app", s->a, shard_end(&s->a1), 1, w->now - 4 * DAY);
    s->a3 = add_shard(w, w->done, "app", s->a, shard_end(&s->a2), 1, w->now - HOUR);
    s->b1 = add_shard(w, w->done, "db.u0", s->b, 0, 2, w->now - 3 * DAY);
    s->b2 = add_shard(w, w->done, "db.u0", s->b, shard_end(&s->b1), 3, w->now - 2 * HOUR);
    s->c1 = add_shard(w, w->done, "cron", s->c, 0, 1, w->now - 7 * DAY);
    s->l1 = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 6 * DAY);
    s->l2 = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 6 * DAY);
    act = add_shard(w, w->outside, "app", s->a, shard_end(&s->a3), 1, w->now - 9 * DAY);
    s->active = fmt("%s/app.%016" PRIx64 ".tmp", w->active, act.h.shard_id);
    assert_int_equal(rename(act.path, s->active), 0);
    s->quarantined = harness_path(w->quarantine, "app.0000000000000001.shard");
    write_file(s->quarantined, "damaged", 7);
    p[0] = shipped_to(&s->a3, shard_end(&s->a3) + act.records); /* the active one too */
    p[1] = shipped_to(&s->b2, shard_end(&s->b2));
    p[2] = shipped_to(&s->c1, shard_end(&s->c1) - 1);
    p[3] = shipped_to(&s->l1, s->l1.records);
    p[4] = shipped_to(&s->l2, s->l2.records - 1);
    store_progress(w, p, 5);
    shard_free(&act);
}

static void free_shipped_spool(struct shipped_spool *s)
{
    struct shard *all[] = { &s->a1, &s->a2, &s->a3, &s->b1, &s->b2, &s->c1, &s->l1, &s->l2 };

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        shard_free(all[i]);
    free(s->active);
    free(s->quarantined);
}

static void test_shipped_age_and_size(void **state)
{
    struct world *w = *state;
    struct shipped_spool s;
    struct known_set k;
    struct harness_run r;
    char *limit = fmt("%u", 3 * BLOCK);

    make_shipped_spool(w, &s);
    /* Shipped whole: l1 (6 d), a1 (5 d), a2 (4 d), b1 (3 d), b2 (2 h, 3
     * blocks), a3 (1 h). Past 2 days: the first four; then 4 blocks over
     * 3: b2, the older of the rest. */
    {
        char *want[] = { s.l1.path, s.a1.path, s.a2.path, s.b1.path, s.b2.path };

        r = prune(w, "--shipped-max-age", "2d", "--shipped-max-bytes", limit, NULL, NULL);
        harness_expect_code(&r, 0, "logctl prune of shipped shards");
        expect_removed(&r, "removed", want, 5);
    }
    line_has(&r, s.l1.path, "age 6d");
    line_has(&r, s.b1.path, "over shipped_max_age 2d");
    line_has(&r, s.b2.path, "size: shipped shards over shipped_max_bytes");
    harness_expect_in(r.out, "kept 1 shipped shard (4.0 KiB) and 2 not yet shipped whole",
                      "what is kept");
    harness_run_free(&r);
    assert_false(exists(s.l1.path));
    assert_false(exists(s.a1.path));
    assert_false(exists(s.a2.path));
    assert_false(exists(s.b1.path));
    assert_false(exists(s.b2.path));
    assert_true(exists(s.a3.path));
    assert_true(exists(s.c1.path)); /* old, but its last record is not shipped */
    assert_true(exists(s.l2.path));
    assert_true(exists(s.active));  /* shipped, old, but active */
    assert_true(exists(s.quarantined));

    /* Where the removed streams stopped is in streams/: a at a2's end (a3
     * is still in done/), b at its end; c was not touched. */
    known_positions(w, false, &k);
    assert_int_equal(k.n, 2);
    assert_int_equal(known_next(&k, s.a), shard_end(&s.a2));
    assert_int_equal(known_next(&k, s.b), shard_end(&s.b2));
    assert_int_equal(harness_count_files(&w->h, "streams", ".pos"), 1);
    free_shipped_spool(&s);
    free(limit);
}

/* Without ship/progress the spool is not shipped: done/ is merge's alone. */
static void test_not_shipped_untouched(void **state)
{
    struct world *w = *state;
    struct shard old = add_shard(w, w->done, "app", NULL, 0, 2, w->now - 30 * DAY);
    uint8_t id[16];
    struct shard old3;
    struct harness_run r;
    char *ship = harness_path(w->h.spool, "ship");

    make_stream_id(id, 9);
    old3 = add_shard(w, w->done, "app", id, 0, 1, w->now - 30 * DAY);
    for (int pass = 0; pass < 2; pass++) {
        /* The second time ship/ exists (a shipper that never committed). */
        r = prune(w, "--shipped-max-age", "1s", "--shipped-max-bytes", "1", NULL, NULL);
        harness_expect_code(&r, 0, "logctl prune on a spool not shipped");
        harness_expect_in(r.out, "ship/progress does not exist: the spool is not shipped",
                          "the note");
        harness_expect_in(r.out, "pruned 0 files", "the summary");
        harness_run_free(&r);
        assert_true(exists(old.path));
        assert_true(exists(old3.path));
        assert_false(exists(w->streams));
        make_dir(ship);
    }
    shard_free(&old);
    shard_free(&old3);
    free(ship);
}

/* ---- --dry-run ---- */

static void test_dry_run(void **state)
{
    struct world *w = *state;
    struct shipped_spool s;
    char *m_old = add_merged(w, w->merged, w->now - 50 * DAY, 1);
    char *m_new = add_merged(w, w->merged, w->now - DAY, 1);
    char *want[5];
    char *lock = harness_path(w->h.spool, "merge.lock");
    struct json_value *v = NULL;
    const struct json_value *removed;
    const char *why = NULL;
    struct harness_run r;

    make_shipped_spool(w, &s);
    want[0] = m_old;
    want[1] = s.l1.path;
    want[2] = s.a1.path;
    want[3] = s.a2.path;
    want[4] = s.b1.path;
    r = prune(w, "--dry-run", "--merged-max-age", "30d", "--shipped-max-age", "2d", NULL);
    harness_expect_code(&r, 0, "logctl prune --dry-run");
    expect_removed(&r, "would remove", want, 5);
    harness_expect_in(r.out, "prune --dry-run: would remove 5 files", "the summary");
    harness_expect_in(r.out, "nothing was removed", "the summary");
    harness_run_free(&r);
    /* Nothing removed, nothing written: no positions, not even the lock. */
    assert_true(exists(m_old) && exists(m_new));
    for (size_t i = 1; i < 5; i++)
        assert_true(exists(want[i]));
    assert_false(exists(w->streams));
    assert_false(exists(lock));

    r = prune(w, "--dry-run", "--json", "--merged-max-age", "30d", "--shipped-max-age", "2d");
    harness_expect_code(&r, 0, "logctl prune --dry-run --json");
    assert_int_equal(json_parse(r.out, r.out_len, &v, &why, NULL), 0);
    assert_true(json_get_bool(v, "ok", false));
    assert_true(json_get_bool(v, "dry_run", false));
    assert_true(json_get_bool(v, "shipping", false));
    removed = json_get(v, "removed");
    assert_non_null(removed);
    assert_int_equal(removed->type, JSON_ARRAY);
    assert_int_equal(removed->n, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(json_get_str(&removed->items[i], "path", ""), want[i]);
        assert_string_equal(json_get_str(&removed->items[i], "reason", ""), "age");
        assert_string_equal(json_get_str(&removed->items[i], "kind", ""),
                            i == 0 ? "merged" : "shipped");
        assert_int_equal(json_get_u64(&removed->items[i], "bytes", 0), size_of(want[i]));
    }
    assert_int_equal(json_get_u64(json_get(v, "kept"), "not_shipped", 99), 2);
    json_value_free(v);
    harness_run_free(&r);
    assert_true(exists(m_old));
    assert_false(exists(w->streams));

    /* The real run removes what the dry run named. */
    r = prune(w, "--merged-max-age", "30d", "--shipped-max-age", "2d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune after the dry run");
    expect_removed(&r, "removed", want, 5);
    harness_run_free(&r);
    for (size_t i = 0; i < 5; i++)
        assert_false(exists(want[i]));
    assert_true(exists(m_new));
    assert_true(exists(lock));
    free_shipped_spool(&s);
    free(m_old);
    free(m_new);
    free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_merged_age_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shipped_age_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_shipped_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
    };

    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
