/* logctl prune among what it must not touch: the real logctl on real
 * spools built by prune-fixture.c.
 *  - symbolic links planted in merged/ and done/ (to files and a directory
 *    outside the spool), a symbolic link as the merged directory, the
 *    spool and done/: nothing is followed, every target survives; other
 *    names, a subdirectory and a merge's temp file stay;
 *  - merge.lock held: exit status 3, nothing removed; an interrupted
 *    merge's output and sources stay, and the next merge finishes it.
 * LOGSHARD_TEST_FILTER=<test> runs one. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "merge.h"
#include "prune-fixture.h"
#include "spool_names.h"
#include "stream_positions.h"

/* ---- symbolic links and other names ---- */

static char *make_link(const char *target, const char *dir, const char *name)
{
    char *p = harness_path(dir, name);

    assert_int_equal(symlink(target, p), 0);
    return p;
}

static void test_symlinks(void **state)
{
    struct world *w = *state;
    /* Outside the spool: a file with a merged file's name, a directory, and
     * a sealed shard that the progress says is shipped. */
    char *target = add_merged(w, w->outside, w->now - 400 * DAY, 1);
    char *target_dir = harness_path(w->outside, "olddir");
    char *target_in_dir = harness_path(target_dir, "precious");
    struct shard victim = add_shard(w, w->outside, "evil", NULL, 0, 1, w->now - 400 * DAY);
    char *link1, *link2, *link3, *subdir, *in_subdir, *other, *temp, *badname, *real;
    char *mlink = harness_path(w->h.dir, "merged-link");
    char *slink = harness_path(w->h.dir, "spool-link");
    struct positions_entry p = shipped_to(&victim, victim.records);
    unsigned char *before;
    size_t before_len, after_len;
    unsigned char *after;
    struct harness_run r;

    make_dir(target_dir);
    write_file(target_in_dir, "keep me", 7);
    before = (unsigned char *)harness_slurp(target, &before_len);
    link1 = make_link(target, w->merged, "merged-20000101T000000.000000000Z.lsm");
    link2 = make_link(target_dir, w->merged, "merged-20000102T000000.000000000Z.lsm");
    link3 = make_link(victim.path, w->done, victim.name);
    subdir = harness_path(w->merged, "merged-20000103T000000.000000000Z.lsm");
    make_dir(subdir);
    in_subdir = harness_path(subdir, "inside");
    write_file(in_subdir, "x", 1);
    other = add_merged(w, w->outside, w->now - 300 * DAY, 1);
    {
        /* Not merge's names: kept whatever their age. */
        char *o = harness_path(w->merged, "yesterday.lsm");

        assert_int_equal(rename(other, o), 0);
        free(other);
        other = o;
    }
    temp = harness_path(w->merged, ".merged-20000104T000000.000000000Z.lsm.4242.tmp");
    write_file(temp, "partial", 7);
    badname = harness_path(w->merged, "merged-2000.lsm");
    write_file(badname, "x", 1);
    real = add_merged(w, w->merged, w->now - 200 * DAY, 1);
    store_progress(w, &p, 1);

    r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune among symbolic links");
    expect_removed(&r, "removed", &real, 1);
    harness_expect_in(r.err, "merged-20000101T000000.000000000Z.lsm: a symbolic link, not a "
                             "merged file; left alone",
                      "the note on the link");
    harness_expect_in(r.err, "merged-20000103T000000.000000000Z.lsm: a directory",
                      "the note on the directory");
    harness_expect_in(r.err, "a symbolic link, not a sealed shard; left alone",
                      "the note on the link in done/");
    harness_run_free(&r);
    assert_false(exists(real));
    assert_true(exists(link1) && exists(link2) && exists(link3));
    assert_true(exists(target) && exists(target_dir) && exists(target_in_dir));
    assert_true(exists(victim.path));
    assert_true(exists(subdir) && exists(in_subdir));
    assert_true(exists(other) && exists(temp) && exists(badname));
    after = (unsigned char *)harness_slurp(target, &after_len);
    assert_int_equal(after_len, before_len);
    assert_memory_equal(after, before, before_len);
    free(after);

    /* A symbolic link as the merged directory is refused, its target left. */
    assert_int_equal(symlink(w->outside, mlink), 0);
    r = prune(w, "--merged-dir", mlink, "--merged-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 1, "logctl prune with a symbolic link as merged_dir");
    harness_expect_in(r.err, mlink, "the error names the directory");
    harness_expect_in(r.err, "a symbolic link; logctl prune follows none", "and says why");
    harness_run_free(&r);
    assert_true(exists(target));
    /* ... and so is one as the spool. */
    assert_int_equal(symlink(w->h.spool, slink), 0);
    r = harness_run_logctl(&w->h, "prune", "--config", w->h.config, "--spool", slink,
                           "--merged-max-age", "1d", NULL);
    harness_expect_code(&r, 1, "logctl prune with a symbolic link as the spool");
    harness_expect_in(r.err, "a symbolic link; logctl prune follows none", "the error");
    harness_run_free(&r);
    /* ... and one as done/: the merged part goes on, done/ is not read. */
    {
        char *done_real = harness_path(w->h.dir, "done-real");

        assert_int_equal(rename(w->done, done_real), 0);
        assert_int_equal(symlink(w->outside, w->done), 0);
        r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
        harness_expect_code(&r, 1, "logctl prune with a symbolic link as done/");
        harness_expect_in(r.err, "done: a symbolic link", "the error");
        harness_run_free(&r);
        assert_true(exists(victim.path));
        assert_int_equal(unlink(w->done), 0);
        assert_int_equal(rename(done_real, w->done), 0);
        free(done_real);
    }
    assert_true(exists(target) && exists(target_in_dir) && exists(link1));

    free(before);
    free(target);
    free(target_dir);
    free(target_in_dir);
    shard_free(&victim);
    free(link1);
    free(link2);
    free(link3);
    free(subdir);
    free(in_subdir);
    free(other);
    free(temp);
    free(badname);
    free(real);
    free(mlink);
    free(slink);
}

/* ---- merge.lock held, and an interrupted merge ---- */

static void crash_at_first_delete(enum merge_step step, void *userdata)
{
    (void)userdata;
    if (step == MERGE_STEP_SOURCE_DELETED)
        _exit(0); /* as kill -9 here would */
}

static void test_lock_and_pending_merge(void **state)
{
    struct world *w = *state;
    char *lock = harness_path(w->h.spool, "merge.lock");
    char *old = add_merged(w, w->merged, w->now - 100 * DAY, 1);
    struct timespec out_ts = { .tv_sec = (time_t)((w->now - 90 * DAY) / SEC) };
    char out_name[SPOOL_MERGED_NAME_SIZE], *out;
    struct shard src[4];
    struct positions_entry p[4];
    struct harness_run r;
    size_t left = 0;
    pid_t pid;
    int fd, status;

    /* Held by someone else: exit 3, nothing touched. */
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    r = prune(w, "--merged-max-age", "1d", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 3, "logctl prune while merge.lock is held");
    harness_expect_in(r.err, lock, "the message names the lock");
    harness_expect_in(r.err, "nothing was removed", "and says what happened");
    harness_run_free(&r);
    assert_true(exists(old));
    assert_int_equal(close(fd), 0);

    /* A merge --delete killed after its first deletion: its output (with a
     * default name, 90 days old) and its remaining sources (shipped, old)
     * stay for the next merge, which then finishes. */
    for (unsigned i = 0; i < 4; i++) {
        src[i] = add_shard(w, w->done, "batch", NULL, 0, 1, w->now - 80 * DAY);
        p[i] = shipped_to(&src[i], src[i].records);
    }
    store_progress(w, p, 4);
    assert_int_equal(spool_merged_name(&out_ts, 0, out_name, sizeof(out_name)), 0);
    out = harness_path(w->merged, out_name);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct merge_opts o = { .spool = w->h.spool, .output = out, .delete_sources = true,
                                .at_step = crash_at_first_delete };
        struct merge_result res;

        (void)merge_run(&o, &res);
        _exit(3);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (unsigned i = 0; i < 4; i++)
        left += exists(src[i].path);
    assert_int_equal(left, 3);
    assert_true(exists(out));

    r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune beside an interrupted merge");
    expect_removed(&r, "removed", &old, 1);
    harness_expect_in(r.err, "the output of an interrupted merge", "the note on the output");
    harness_expect_in(r.err, "a source of an interrupted merge", "the note on a source");
    harness_expect_in(r.out, "kept 4 files an interrupted merge needs", "the summary");
    harness_run_free(&r);
    assert_true(exists(out));
    left = 0;
    for (unsigned i = 0; i < 4; i++)
        left += exists(src[i].path);
    assert_int_equal(left, 3);

    r = harness_run_logctl(&w->h, "merge", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl merge after prune");
    harness_expect_in(r.out, "finished an interrupted merge: removed 3 merged sources",
                      "the recovery");
    harness_run_free(&r);
    /* Now the output is an old merged file like any other. */
    r = prune(w, "--merged-max-age", "1d", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune after the merge");
    expect_removed(&r, "removed", &out, 1);
    harness_run_free(&r);

    for (unsigned i = 0; i < 4; i++)
        shard_free(&src[i]);
    free(out);
    free(old);
    free(lock);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_and_pending_merge, setup, teardown),
    };

    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
