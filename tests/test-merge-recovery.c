/* Unit tests of recovery from an interrupted merge: a merge that died at
 * each of its steps is rolled back or finished by the next run, a recovery
 * that dies is finished in turn, and an intent or output that does not
 * check out is refused. A crash is a forked child that runs the merge and
 * calls _exit() from a step hook, which leaves exactly the files a kill -9
 * at that instant leaves; tests/test-merge-crash.c kills the real logctl
 * at random instants. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "merge.h"
#include "spool_names.h"

#include "merge-fixture.h"

/* A crash: a child runs the merge and leaves with _exit(0) at the chosen
 * point, so nothing after it runs, as with kill -9. */
struct crash_plan {
    enum merge_step step; /* 0: none */
    unsigned nth;         /* at the nth time step is reached (1-based) */
    int before_copy;      /* >= 0: before copying source number before_copy */
    unsigned seen;
};

static void crash_step(enum merge_step step, void *userdata)
{
    struct crash_plan *p = userdata;

    if (step == p->step && ++p->seen == p->nth)
        _exit(0);
}

static int crash_copy(const struct merge_source *src, void *userdata)
{
    struct crash_plan *p = userdata;

    (void)src;
    if (p->before_copy == 0)
        _exit(0);
    p->before_copy--;
    return 0;
}

static void run_crashing(const struct merge_opts *base, struct crash_plan plan)
{
    pid_t pid;
    int status;

    fflush(NULL); /* or the child's exit would print our buffers twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct merge_opts o = *base;
        struct merge_result res;

        o.at_step = crash_step;
        o.before_copy = plan.before_copy >= 0 ? crash_copy : NULL;
        o.userdata = &plan;
        (void)merge_run(&o, &res);
        _exit(3); /* the crash point was never reached */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

struct crash_case {
    const char *what;
    struct crash_plan plan;
    bool delete_sources;
    enum merge_recovery expect;
    bool expect_temp;        /* rollback finds the temp file */
    size_t left_after_crash; /* sources still in done/ after the crash */
};

static void run_crash_case(const struct crash_case *c)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *intent, *tmp;

    print_message("crash case: %s\n", c->what);
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = c->delete_sources;
    run_crashing(&opts, c->plan);

    /* The state the crash left. */
    assert_true(exists(intent));
    assert_int_equal(sources_left(&f), c->left_after_crash);
    assert_int_equal(exists(out), c->expect == MERGE_RECOVERY_FINISHED);

    /* Without --delete, a finished merge leaves the sources, so the rerun
     * merges them again, into the same name: refused, as it would be
     * without any crash. */
    if (!c->delete_sources && c->expect == MERGE_RECOVERY_FINISHED) {
        assert_int_equal(merge_run(&opts, &res), -EEXIST);
        assert_non_null(strstr(res.error, "already exists"));
    } else {
        assert_int_equal(merge_run(&opts, &res), 0);
        assert_null(res.error);
    }
    assert_int_equal(res.recovery, c->expect);
    assert_non_null(res.recovery_output);
    assert_string_equal(res.recovery_output, out);
    if (c->expect == MERGE_RECOVERY_FINISHED) {
        /* The rest of the sources went; nothing was left to merge again. */
        assert_int_equal(res.recovery_deleted, c->delete_sources ? c->left_after_crash : 0);
        assert_int_equal(res.n_sources, c->delete_sources ? 0 : N_SORTED);
        assert_null(res.recovery_temp);
    } else {
        assert_int_equal(res.recovery_deleted, 0);
        assert_int_equal(res.n_sources, N_SORTED);
        assert_string_equal(res.output_path, out);
        if (c->expect_temp) {
            assert_true(asprintf(&tmp, "%s/.merged.lsm.", f.out) > 0);
            assert_non_null(res.recovery_temp);
            assert_true(strncmp(res.recovery_temp, tmp, strlen(tmp)) == 0);
            free(tmp);
        } else {
            assert_null(res.recovery_temp);
        }
    }
    merge_result_free(&res);

    /* Every record exactly once: one output, holding every shard once. */
    assert_int_equal(count_entries(f.out), 1);
    check_output(out, &f);
    assert_int_equal(sources_left(&f), c->delete_sources ? 0 : N_SORTED);
    check_no_leftovers(&f);
    free(intent);
    free(out);
    fixture_free(&f);
}

static void test_merge_crash_recovery(void **state)
{
    static const struct crash_case cases[] = {
        { "after the intent, before the temp file",
          { MERGE_STEP_INTENT_WRITTEN, 1, -1, 0 }, true, MERGE_RECOVERY_ROLLED_BACK, false,
          N_SORTED },
        { "in the middle of the copy", { 0, 0, 4, 0 }, true, MERGE_RECOVERY_ROLLED_BACK, true,
          N_SORTED },
        { "copied and synced, not renamed", { MERGE_STEP_COPIED, 1, -1, 0 }, true,
          MERGE_RECOVERY_ROLLED_BACK, true, N_SORTED },
        { "renamed, directory not synced", { MERGE_STEP_PUBLISHED, 1, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED },
        { "after the first source was removed", { MERGE_STEP_SOURCE_DELETED, 1, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED - 1 },
        { "after six sources were removed", { MERGE_STEP_SOURCE_DELETED, 6, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED - 6 },
        { "all sources removed, intent still there", { MERGE_STEP_SOURCES_DELETED, 1, -1, 0 },
          true, MERGE_RECOVERY_FINISHED, false, 0 },
        { "without --delete, in the middle of the copy", { 0, 0, 2, 0 }, false,
          MERGE_RECOVERY_ROLLED_BACK, true, N_SORTED },
        { "without --delete, renamed", { MERGE_STEP_PUBLISHED, 1, -1, 0 }, false,
          MERGE_RECOVERY_FINISHED, false, N_SORTED },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_crash_case(&cases[i]);
}

/* A recovery that is itself killed half-way is finished by the next run. */
static void test_merge_crash_during_recovery(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 2, -1, 0 });
    assert_int_equal(sources_left(&f), N_SORTED - 2);
    /* The recovery deletes the rest; this one dies after three of them. */
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 3, -1, 0 });
    assert_int_equal(sources_left(&f), N_SORTED - 5);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
    assert_int_equal(res.recovery_deleted, N_SORTED - 5);
    assert_int_equal(res.n_sources, 0);
    merge_result_free(&res);
    assert_int_equal(count_entries(f.out), 1);
    check_output(out, &f);
    check_no_leftovers(&f);
    free(out);
    fixture_free(&f);
}

/* A merge.intent.tmp is an intent that was never published: removed, and
 * the merge goes on as if there had been nothing. */
static void test_merge_stray_intent_tmp(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *p;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    p = join(f.spool, SPOOL_MERGE_INTENT_TMP);
    write_file(p, "logshard-merge-intent 1\ndelete 1\ndir /", 38);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_NONE);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    free(p);
    free(out);
    fixture_free(&f);
}

/* Leaves the state of a --delete merge killed after its temp file was
 * complete: merge.intent, the temp, every source; returns the temp's path. */
static char *crash_before_publish(const struct fixture *f, const struct merge_opts *opts)
{
    char *tmp = NULL;
    DIR *d;
    struct dirent *de;

    run_crashing(opts, (struct crash_plan){ MERGE_STEP_COPIED, 1, -1, 0 });
    d = opendir(f->out);
    assert_non_null(d);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, ".merged.lsm.", 12) == 0) {
            assert_null(tmp);
            tmp = join(f->out, de->d_name);
        }
    }
    closedir(d);
    assert_non_null(tmp);
    return tmp;
}

/* What a pending merge names, read without changing anything
 * (merge_pending_read, for logctl prune): its output and every source; none
 * without an intent; a damaged intent an error naming it. */
static void test_merge_pending(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_pending p = { 0 };
    char *out, *intent, *tmp, *err = NULL, *real_out;
    unsigned char *text;
    size_t len;
    int spool_fd;

    (void)state;
    fixture_init(&f);
    spool_fd = open(f.spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(spool_fd >= 0);
    assert_int_equal(merge_pending_read(spool_fd, f.spool, &p, &err), -ENOENT);
    assert_null(err);

    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    tmp = crash_before_publish(&f, &opts);
    assert_int_equal(merge_pending_read(spool_fd, f.spool, &p, &err), 0);
    real_out = realpath(f.out, NULL);
    assert_non_null(real_out);
    assert_string_equal(p.dir, real_out);
    assert_string_equal(p.output, "merged.lsm");
    assert_true(strncmp(p.temp, ".merged.lsm.", 12) == 0);
    assert_int_equal(p.n_sources, N_SORTED);
    for (size_t i = 0; i < N_SORTED; i++) {
        char *src = join(f.done, p.sources[i]);

        assert_true(exists(src));
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(p.sources[i], p.sources[j]);
        free(src);
    }
    merge_pending_free(&p);
    merge_pending_free(&p); /* a freed one is empty */
    /* Nothing changed: the intent, the temp and the sources are there. */
    assert_true(exists(intent));
    assert_true(exists(tmp));
    assert_int_equal(sources_left(&f), N_SORTED);

    text = read_file(intent, &len);
    text[30] ^= 1;
    write_file(intent, text, len);
    assert_int_equal(merge_pending_read(spool_fd, f.spool, &p, &err), -EBADMSG);
    assert_non_null(err);
    assert_non_null(strstr(err, intent));
    assert_non_null(strstr(err, "checksum mismatch"));
    assert_null(p.sources);
    free(err);
    free(text);
    close(spool_fd);
    free(real_out);
    free(tmp);
    free(intent);
    free(out);
    fixture_free(&f);
}

/* An intent that does not check out, and an output name taken by a file
 * that is not the merge's output: the merge changes nothing and says why,
 * because neither finishing nor rolling back is provably right. */
static void test_merge_refuses_unclear_recovery(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *intent, *tmp, *moved;
    unsigned char *text, *foreign;
    size_t len;
    uint64_t size;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    moved = join(f.tmp, "moved.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    tmp = crash_before_publish(&f, &opts);
    text = read_file(intent, &len);

    /* A flipped byte: the checksum line catches it. */
    text[30] ^= 1;
    write_file(intent, text, len);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, intent));
    assert_non_null(strstr(res.error, "checksum mismatch"));
    merge_result_free(&res);
    text[30] ^= 1;
    /* Torn: the end line is missing. */
    write_file(intent, text, len - 5);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "damaged"));
    merge_result_free(&res);
    assert_true(exists(tmp));
    assert_int_equal(sources_left(&f), N_SORTED);

    /* Someone else's file under the output name, of the right size but
     * other bytes: the sources must stay. */
    write_file(intent, text, len);
    size = file_size(tmp);
    foreign = pattern((size_t)size, 99);
    write_file(out, foreign, (size_t)size);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "differs from the copy"));
    merge_result_free(&res);
    /* Of another size. */
    write_file(out, foreign, (size_t)size - 1);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "not that merge's output"));
    merge_result_free(&res);
    assert_true(exists(intent));
    assert_true(exists(tmp));
    assert_int_equal(sources_left(&f), N_SORTED);

    /* Moved away, the merge is rolled back and done again. */
    assert_int_equal(rename(out, moved), 0);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_ROLLED_BACK);
    assert_string_equal(res.recovery_temp, tmp);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(unlink(moved), 0);
    assert_int_equal(unlink(out), 0);

    /* Published, partly deleted, and then the output moved away: the
     * remaining sources are not merged again nor deleted. */
    write_sorted_specs_shuffled(f.done);
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 2, -1, 0 });
    assert_int_equal(rename(out, moved), 0);
    assert_int_equal(merge_run(&opts, &res), -EUCLEAN);
    assert_non_null(strstr(res.error, "now missing"));
    merge_result_free(&res);
    assert_int_equal(sources_left(&f), N_SORTED - 2);
    assert_true(exists(intent));
    /* Put back, it is finished. */
    assert_int_equal(rename(moved, out), 0);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
    assert_int_equal(res.recovery_deleted, N_SORTED - 2);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(sources_left(&f), 0);

    free(foreign);
    free(text);
    free(tmp);
    free(moved);
    free(intent);
    free(out);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_crash_recovery),
        cmocka_unit_test(test_merge_crash_during_recovery),
        cmocka_unit_test(test_merge_stray_intent_tmp),
        cmocka_unit_test(test_merge_refuses_unclear_recovery),
        cmocka_unit_test(test_merge_pending),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
