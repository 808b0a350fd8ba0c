/* Unit tests of logctl merge --delete in the merge engine: the intent is
 * durable before the copy, sources go only once the complete output is
 * under its name, and the lock keeps a second merge off the spool. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "merge.h"
#include "shard_format.h"
#include "spool_names.h"

#include "merge-fixture.h"

static uint64_t sorted_specs_bytes(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i < N_SORTED; i++) {
        size_t len;
        unsigned char *b = build_shard(&sorted_specs[i], &len);

        n += len;
        free(b);
    }
    return n;
}

struct delete_watch {
    const struct fixture *f;
    const char *out;
    uint64_t full_size;
    size_t copies, published, deleted, finished;
};

static int watch_copy(const struct merge_source *src, void *userdata)
{
    struct delete_watch *w = userdata;
    char *intent = join(w->f->spool, SPOOL_MERGE_INTENT);

    (void)src;
    /* The intent is durable before the copy starts; nothing is gone yet. */
    assert_true(exists(intent));
    assert_false(exists(w->out));
    assert_int_equal(sources_left(w->f), N_SORTED);
    w->copies++;
    free(intent);
    return 0;
}

static void watch_step(enum merge_step step, void *userdata)
{
    struct delete_watch *w = userdata;

    switch (step) {
    case MERGE_STEP_INTENT_WRITTEN:
    case MERGE_STEP_COPIED:
        assert_false(exists(w->out));
        assert_int_equal(sources_left(w->f), N_SORTED);
        break;
    case MERGE_STEP_PUBLISHED:
        assert_true(file_size(w->out) == w->full_size);
        assert_int_equal(sources_left(w->f), N_SORTED);
        w->published++;
        break;
    case MERGE_STEP_SOURCE_DELETED:
        /* Only ever after the complete output is under its name. */
        assert_int_equal(w->published, 1);
        assert_true(file_size(w->out) == w->full_size);
        w->deleted++;
        assert_int_equal(sources_left(w->f), N_SORTED - w->deleted);
        break;
    case MERGE_STEP_SOURCES_DELETED:
        assert_int_equal(sources_left(w->f), 0);
        w->finished++;
        break;
    case MERGE_STEP_POSITIONS_WRITTEN:
        /* The fixture's shards are version 2, without a stream: there are
         * no positions to record (tests/test-merge-positions.c has them). */
        fail_msg("stream positions written for shards without a stream");
        break;
    }
}

static void test_merge_delete(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct delete_watch w = { 0 };
    char *out;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    w.f = &f;
    w.out = out;
    w.full_size = sorted_specs_bytes();
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    opts.before_copy = watch_copy;
    opts.at_step = watch_step;
    opts.userdata = &w;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_int_equal(res.recovery, MERGE_RECOVERY_NONE);
    assert_int_equal(res.shards, N_SORTED);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    assert_int_equal(w.copies, N_SORTED);
    assert_int_equal(w.published, 1);
    assert_int_equal(w.deleted, N_SORTED);
    assert_int_equal(w.finished, 1);
    check_output(out, &f);
    check_no_leftovers(&f);
    /* Only the merged shards went: the junk that was never taken stays. */
    assert_int_equal(count_entries(f.done), 16);

    /* A second run has nothing to merge and leaves the output alone. */
    opts.before_copy = NULL;
    opts.at_step = NULL;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.n_sources, 0);
    assert_null(res.output_path);
    merge_result_free(&res);
    check_output(out, &f);
    assert_int_equal(count_entries(f.out), 1);
    free(out);
    fixture_free(&f);
}

/* The lock: held through another open file description in this process,
 * then by a real merge in another process (whose pid the message names). */
struct lock_holder {
    int ready_fd;
    int go_fd;
};

static void hold_at_copy(enum merge_step step, void *userdata)
{
    struct lock_holder *h = userdata;
    char c = 0;

    if (step != MERGE_STEP_COPIED)
        return;
    if (write(h->ready_fd, "r", 1) != 1 || read(h->go_fd, &c, 1) != 1)
        _exit(4);
}

static void test_merge_lock(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *lock, *expect;
    int fd, ready[2], go[2], status;
    struct lock_holder h;
    pid_t pid;
    char c;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    lock = join(f.spool, SPOOL_MERGE_LOCK);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;

    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(merge_run(&opts, &res), -EBUSY);
    assert_non_null(res.error);
    assert_true(asprintf(&expect, "another logctl merge is running on %s", f.spool) > 0);
    assert_true(strncmp(res.error, expect, strlen(expect)) == 0);
    free(expect);
    merge_result_free(&res);
    assert_int_equal(sources_left(&f), N_SORTED);
    assert_false(exists(out));
    assert_int_equal(close(fd), 0);

    /* A real merge holds it while it waits at the end of its copy. */
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        h.ready_fd = ready[1];
        h.go_fd = go[0];
        opts.at_step = hold_at_copy;
        opts.userdata = &h;
        _exit(merge_run(&opts, &res) == 0 ? 0 : 5);
    }
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(merge_run(&opts, &res), -EBUSY);
    assert_true(asprintf(&expect, "another logctl merge is running on %s (pid %ld ", f.spool,
                         (long)pid) > 0);
    assert_true(strncmp(res.error, expect, strlen(expect)) == 0);
    free(expect);
    merge_result_free(&res);
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(sources_left(&f), 0);

    /* Released with the process: the next merge runs. */
    assert_int_equal(merge_run(&opts, &res), 0);
    merge_result_free(&res);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(close(ready[i]), 0);
        assert_int_equal(close(go[i]), 0);
    }
    free(lock);
    free(out);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_delete),
        cmocka_unit_test(test_merge_lock),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
