/* Unit tests of merges of hundreds of sources, whose check and copy passes
 * run on two threads: every bad source found, the output still in order byte
 * for byte, the first failing source named whichever thread met it, and
 * progress reported on the calling thread only. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "merge.h"

#include "merge-fixture.h"

/* With hundreds of sources the check runs on two threads; every bad source
 * is found, whichever thread met it, and the rest merged in order. */
static void test_merge_many_sources_bad(void **state)
{
    enum { N = 300 };
    static const size_t bad_pairs[][2] = { { 150, 201 }, { 151, 200 }, { 7, 299 }, { 10, 11 },
                                           { 21, 22 } };
    enum { NPAIRS = sizeof(bad_pairs) / sizeof(bad_pairs[0]) };
    (void)state;

    for (size_t k = 0; k <= NPAIRS; k++) {
        struct fixture f;
        struct merge_opts opts = { 0 };
        struct merge_result res;
        uint64_t records = 0;
        size_t n_bad = 0, j = 0;
        char *out;

        fixture_init(&f);
        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { "many", i + 1, (unsigned)(i % 5) };
            bool bad = k < NPAIRS && (i == bad_pairs[k][0] || i == bad_pairs[k][1]);

            write_sealed(&f, &spec, bad ? cut_three : NULL);
            if (bad)
                n_bad++;
            else
                records += i % 5;
        }
        out = join(f.out, "merged.lsm");
        opts.spool = f.spool;
        opts.output = out;
        assert_int_equal(merge_run(&opts, &res), 0);
        assert_int_equal(res.shards, N - n_bad);
        assert_true(res.records == records);
        for (size_t i = 0; i < N; i++) {
            if (k < NPAIRS && (i == bad_pairs[k][0] || i == bad_pairs[k][1]))
                continue;
            assert_true(res.sources[j++].id == i + 1);
        }
        assert_int_equal(res.n_problems, n_bad);
        for (size_t p = 0; p < n_bad; p++) {
            size_t lo = bad_pairs[k][0] < bad_pairs[k][1] ? bad_pairs[k][0] : bad_pairs[k][1];
            size_t hi = bad_pairs[k][0] ^ bad_pairs[k][1] ^ lo;
            char *want = shard_name("many", (p == 0 ? lo : hi) + 1);

            /* Sorted by name, which is by id here. */
            assert_string_equal(res.problems[p].name, want);
            assert_string_equal(res.problems[p].why, "file ends inside the seal trailer");
            assert_non_null(res.problems[p].quarantined_as);
            free(want);
        }
        merge_result_free(&res);
        free(out);
        fixture_free(&f);
    }
}

/* With hundreds of sources the copy runs on two threads too, each writing
 * at its sources' offsets: the output is still every source byte for
 * byte, in order. */
static void test_merge_many_sources_copy(void **state)
{
    enum { N = 700 };
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    unsigned char *want = NULL, *got;
    size_t want_len = 0, got_len;
    char *out;
    (void)state;

    fixture_init(&f);
    for (size_t i = 0; i < N; i++) {
        /* Up to 120 records: shards of one to three blocks. */
        struct shard_spec spec = { i % 3 ? "many" : "more", i + 1, (unsigned)(i * 37 % 121) };

        write_sealed(&f, &spec, NULL);
    }
    /* The expected output: producers in byte order, then shard ids. */
    for (int pass = 0; pass < 2; pass++) {
        const char *producer = pass == 0 ? "many" : "more";

        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { i % 3 ? "many" : "more", i + 1,
                                       (unsigned)(i * 37 % 121) };
            size_t len;
            unsigned char *buf;

            if (strcmp(spec.producer, producer) != 0)
                continue;
            buf = build_sealed(&spec, &len);
            want = realloc(want, want_len + len);
            assert_non_null(want);
            memcpy(want + want_len, buf, len);
            want_len += len;
            free(buf);
        }
    }
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, N);
    assert_true(res.bytes == want_len);
    got = read_file(out, &got_len);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);
    merge_result_free(&res);
    free(out);
    fixture_free(&f);
}

/* The threads of this process now, from /proc/self/status. */
static unsigned thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned n = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %u", &n) == 1)
            break;
    fclose(f);
    assert_true(n >= 1);
    return n;
}

struct progress_log {
    pthread_t caller;
    enum merge_phase phase;
    size_t calls[3];
    unsigned max_threads[3];
    struct merge_progress last[3];
};

static void log_progress(const struct merge_progress *p, void *userdata)
{
    struct progress_log *log = userdata;
    const struct merge_progress *prev = &log->last[p->phase];
    unsigned threads = thread_count();

    /* Always on the thread that called merge_run. */
    assert_true(pthread_equal(pthread_self(), log->caller));
    assert_true(p->phase == MERGE_PHASE_CHECK || p->phase == MERGE_PHASE_COPY);
    assert_true(p->phase >= log->phase);
    if (log->calls[p->phase] > 0) {
        /* Within a pass the figures only grow. */
        assert_true(p->shards_done >= prev->shards_done);
        assert_true(p->bytes_done >= prev->bytes_done);
        assert_true(p->shards_total == prev->shards_total);
    }
    assert_true(p->shards_done <= p->shards_total);
    assert_true(p->bytes_done <= p->bytes_total);
    log->phase = p->phase;
    log->calls[p->phase]++;
    log->last[p->phase] = *p;
    if (threads > log->max_threads[p->phase])
        log->max_threads[p->phase] = threads;
}

/* A progress callback does not change how a merge runs: with hundreds of
 * sources both passes still run on two threads (on filesystems where the
 * copy does), the callback is called on the calling thread only, and each
 * pass ends with its final figures. */
static void test_merge_progress_two_threads(void **state)
{
    enum { N = 600 };
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct progress_log log = { .caller = pthread_self() };
    struct statfs sfs;
    char *out;
    (void)state;

    fixture_init(&f);
    for (size_t i = 0; i < N; i++) {
        struct shard_spec spec = { "many", i + 1, (unsigned)(i % 7) };

        write_sealed(&f, &spec, NULL);
    }
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.progress = log_progress;
    opts.userdata = &log;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, N);
    for (int phase = MERGE_PHASE_CHECK; phase <= MERGE_PHASE_COPY; phase++) {
        /* The start of the pass, some of the way, and its end. */
        assert_true(log.calls[phase] >= 3);
        assert_int_equal(log.last[phase].shards_done, N);
        assert_int_equal(log.last[phase].shards_total, N);
        assert_true(log.last[phase].bytes_done == res.bytes);
        assert_true(log.last[phase].bytes_total == res.bytes);
    }
    assert_true(log.max_threads[MERGE_PHASE_CHECK] >= 2);
    /* The copy stays on one thread where copy_file_range shares extents;
     * on these filesystems it copies bytes and runs on two. */
    assert_int_equal(statfs(f.out, &sfs), 0);
    if (sfs.f_type == EXT4_SUPER_MAGIC || sfs.f_type == TMPFS_MAGIC)
        assert_true(log.max_threads[MERGE_PHASE_COPY] >= 2);
    merge_result_free(&res);
    free(out);
    fixture_free(&f);
}

struct shrink_plan {
    const struct fixture *f;
    size_t victims[2];
};

/* After the check and before the copy: the victims lose their second half. */
static void shrink_at_intent(enum merge_step step, void *userdata)
{
    const struct shrink_plan *plan = userdata;

    if (step != MERGE_STEP_INTENT_WRITTEN)
        return;
    for (int k = 0; k < 2; k++) {
        char *name = shard_name("many", plan->victims[k] + 1);
        char *path = join(plan->f->done, name);
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(truncate(path, st.st_size / 2), 0);
        free(path);
        free(name);
    }
}

/* A source that shrinks between the check and the two-thread copy fails
 * the merge, and the error names the first such source in output order,
 * whichever thread met it; nothing is published. */
static void test_merge_many_sources_copy_first_bad(void **state)
{
    enum { N = 600 };
    /* Sources go out in runs of 64: a pair at the end of one run and the
     * start of the next usually fails on both threads, and which thread
     * meets the lower one varies from run to run. */
    static const size_t bad_pairs[][2] = { { 300, 301 }, { 451, 64 }, { 0, 599 },
                                           { 127, 128 }, { 191, 192 }, { 255, 256 },
                                           { 383, 384 }, { 447, 448 } };
    (void)state;

    for (size_t k = 0; k < sizeof(bad_pairs) / sizeof(bad_pairs[0]); k++) {
        struct fixture f;
        struct merge_opts opts = { 0 };
        struct merge_result res;
        struct shrink_plan plan;
        size_t first = bad_pairs[k][0] < bad_pairs[k][1] ? bad_pairs[k][0] : bad_pairs[k][1];
        char *out, *want_name, *want_path;

        fixture_init(&f);
        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { "many", i + 1, (unsigned)(i % 50) };

            write_sealed(&f, &spec, NULL);
        }
        plan = (struct shrink_plan){ .f = &f, .victims = { bad_pairs[k][0], bad_pairs[k][1] } };
        out = join(f.out, "merged.lsm");
        opts.spool = f.spool;
        opts.output = out;
        opts.at_step = shrink_at_intent;
        opts.userdata = &plan;
        assert_int_equal(merge_run(&opts, &res), -ENODATA);
        want_name = shard_name("many", first + 1);
        want_path = join(f.done, want_name);
        assert_non_null(strstr(res.error, want_path));
        assert_non_null(strstr(res.error, "ended before its"));
        assert_false(exists(out));
        check_no_leftovers(&f);
        merge_result_free(&res);
        free(want_path);
        free(want_name);
        free(out);
        fixture_free(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_many_sources_bad),
        cmocka_unit_test(test_merge_many_sources_copy),
        cmocka_unit_test(test_merge_many_sources_copy_first_bad),
        cmocka_unit_test(test_merge_progress_two_threads),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
