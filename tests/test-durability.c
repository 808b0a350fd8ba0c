/* Durability tests against the real daemon: what each fsync policy
 * acknowledges, kill -9 under load followed by recovery, injected I/O
 * faults, a full disk (a small tmpfs) and a file size limit. The rule
 * checked everywhere: every record the library reported as acknowledged is
 * present exactly once after recovery, in order, and nothing is corrupt. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdbool.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ackboard.h"
#include "harness.h"
#include "logshard.h"

static int teardown(void **state)
{
    struct harness *h = *state;
    char *mnt = harness_path(h->dir, "small");
    char *own = harness_path(h->dir, "ownfs");

    /* test_enospc and test_auto_syncfs_on_own_fs mount a tmpfs; a failure
     * half-way must not leave it. */
    (void)umount2(mnt, MNT_DETACH);
    (void)umount2(own, MNT_DETACH);
    free(mnt);
    free(own);
    unsetenv("LOGSHARD_FAULTS");
    return harness_teardown(state);
}

static const char *const policy_names[] = { "none", "interval", "batch", "always" };

/* Each policy: the WELCOME says which one is in force, flushes succeed,
 * everything comes out once. */
static void test_policies(void **state)
{
    struct harness *h = *state;

    harness_write_config(h, "[sync]\nfsync_interval = 20ms\n");
    for (int p = 0; p < 4; p++) {
        const char *extra[] = { "--fsync", policy_names[p], NULL };
        logshard_opts opts = { .socket_path = h->sock, .producer = policy_names[p] };
        logshard *ls = NULL;
        char rec[64];

        harness_start(h, extra);
        assert_int_equal(logshard_connect(&ls, &opts), 0);
        assert_int_equal(logshard_fsync_policy(ls), p);
        for (int i = 0; i < 500; i++) {
            size_t len = harness_make_record(rec, sizeof(rec), policy_names[p], (uint64_t)i, 40);
            assert_int_equal(logshard_append(ls, rec, len), 0);
            if (i % 64 == 63)
                assert_int_equal(logshard_flush(ls, 10000), 0);
        }
        assert_int_equal(logshard_flush(ls, 10000), 0);
        assert_int_equal(logshard_unacked(ls), 0);
        logshard_close(ls);
        harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    }
    {
        char names[4][32];
        uint64_t acked[4] = { 500, 500, 500, 500 };
        uint64_t found[4];
        size_t len;
        char *text = harness_merge_and_cat(h, "policies.lsm", &len);

        for (int p = 0; p < 4; p++)
            snprintf(names[p], sizeof(names[p]), "%s", policy_names[p]);
        check_exactly_once(text, names, acked, 4, found);
        for (int p = 0; p < 4; p++)
            assert_int_equal(found[p], 500);
        free(text);
    }
}

/* kill -9 of the daemon at a random moment under load from several
 * producers, then restart (recovery) and, at the end, merge: every
 * acknowledged record is there exactly once and in order. */
static void kill_rounds(struct harness *h, const char *policy, int rounds)
{
    enum { PRODUCERS = 3 };
    char names[MAX_PRODUCERS][32];
    uint64_t acked[MAX_PRODUCERS] = { 0 };
    struct ack_board board;
    size_t n = 0, len;
    const char *extra[] = { "--fsync", policy, NULL };
    char *text;

    assert_true(rounds * PRODUCERS <= MAX_PRODUCERS);
    board_open(&board, h);
    for (int round = 0; round < rounds; round++) {
        pid_t pids[PRODUCERS];
        struct timespec delay;
        uint64_t ms = 5 + harness_rng_next() % 120;

        harness_start(h, extra);
        for (int p = 0; p < PRODUCERS; p++) {
            snprintf(names[n + (size_t)p], sizeof(names[0]), "%s-r%d-p%d", policy, round, p);
            pids[p] = spawn(h->sock, names[n + (size_t)p], (unsigned)(n + (size_t)p), board.fd,
                            0, 60 + (size_t)p * 50, 1 + (uint64_t)p * 16);
        }
        delay.tv_sec = 0;
        delay.tv_nsec = (long)ms * 1000000L;
        /* The point of the test: a kill at an arbitrary moment. */
        nanosleep(&delay, NULL);
        assert_true(WIFSIGNALED(harness_stop(h, SIGKILL, 10000)));
        for (int p = 0; p < PRODUCERS; p++) {
            /* Cut off: the library reports the lost connection; a kill that
             * came before the producer connected leaves it with nothing
             * acknowledged, which is fine too. */
            (void)reap(pids[p]);
            acked[n + (size_t)p] = board_get(&board, (unsigned)(n + (size_t)p));
        }
        n += PRODUCERS;
    }
    /* A last start recovers the final round's shards; then a clean stop. */
    harness_start(h, extra);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    assert_int_equal(harness_count_files(h, "quarantine", ""), 0);

    text = harness_merge_and_cat(h, "killed.lsm", &len);
    check_exactly_once(text, names, acked, n, NULL);
    free(text);
    board_close(&board);
    {
        uint64_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += acked[i];
        fprintf(stderr, "%s: %d kill -9 rounds, %" PRIu64 " acknowledged records all present\n",
                policy, rounds, total);
        assert_true(total > 0);
    }
}

/* Whether the temp directory's file system takes one-flush (ext4 or XFS;
 * data=journal is not expected in a test machine's temp directory). */
static bool one_flush_fs(const struct harness *h)
{
    struct statfs fs;

    assert_int_equal(statfs(h->dir, &fs), 0);
    return fs.f_type == EXT4_SUPER_MAGIC || fs.f_type == XFS_SUPER_MAGIC;
}

/* The default: sync_method auto, which is one-flush on ext4 and XFS. */
static void test_kill9_batch(void **state)
{
    struct harness *h = *state;

    harness_seed_rng();
    kill_rounds(h, "batch", 12);
    /* The spool is a directory of the temp directory's file system. */
    assert_true(harness_log_has(h, one_flush_fs(h) ? "batch syncs with one-flush, auto"
                                                   : "batch syncs with fdatasync, auto"));
}

/* fsync = batch with an fdatasync of each shard that wrote. */
static void test_kill9_batch_fdatasync(void **state)
{
    struct harness *h = *state;

    harness_seed_rng();
    harness_write_config(h, "[sync]\nsync_method = fdatasync\n");
    kill_rounds(h, "batch", 6);
    assert_true(harness_log_has(h, "batch syncs with fdatasync, as configured"));
}

/* fsync = batch with one syncfs per tick for every shard that wrote. */
static void test_kill9_batch_syncfs(void **state)
{
    struct harness *h = *state;

    harness_seed_rng();
    harness_write_config(h, "[sync]\nsync_method = syncfs\n");
    kill_rounds(h, "batch", 6);
    assert_true(harness_log_has(h, "batch syncs with syncfs"));
}

static void test_kill9_always(void **state)
{
    harness_seed_rng();
    kill_rounds(*state, "always", 10);
}

/* Without syncs a kill -9 loses nothing either (the page cache survives the
 * process); what is checked is that nothing is corrupt or repeated. */
static void test_kill9_none(void **state)
{
    harness_seed_rng();
    kill_rounds(*state, "none", 3);
}

static void test_kill9_interval(void **state)
{
    struct harness *h = *state;

    harness_seed_rng();
    harness_write_config(h, "[sync]\nfsync_interval = 10ms\n");
    kill_rounds(h, "interval", 3);
}

#ifdef LOGSHARD_FAULT_INJECTION
/* The third sync of shard data fails (fault, e.g. "fdatasync_eio=3"; the
 * configuration picks the sync): the producer gets the error, naming what
 * failed (what), from its flush; what was acknowledged before stays; the
 * daemon serves the next producer. */
static void sync_failure(struct harness *h, const char *config, const char *fault,
                         const char *what, int want_acked)
{
    const char *extra[] = { "--fsync", "batch", NULL };
    logshard_opts opts = { .socket_path = h->sock, .producer = "syncfail" };
    logshard *ls = NULL;
    char rec[64];
    uint64_t acked = 0;
    int r = 0;

    if (config)
        harness_write_config(h, config);
    setenv("LOGSHARD_FAULTS", fault, 1);
    harness_start(h, extra);
    unsetenv("LOGSHARD_FAULTS");
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    for (uint64_t i = 0; i < 100 && r == 0; i++) {
        size_t len = harness_make_record(rec, sizeof(rec), "syncfail", i, 30);
        r = logshard_append(ls, rec, len);
        if (r == 0 && i % 10 == 9) {
            r = logshard_flush(ls, 10000);
            if (r == 0)
                acked = i + 1;
        }
    }
    assert_int_equal(r, -EIO);
    if (want_acked >= 0)
        assert_int_equal(acked, want_acked);
    assert_non_null(strstr(logshard_error_message(ls), what));
    logshard_close(ls);

    /* Business as usual for everyone else. */
    opts.producer = "after";
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "after 0 ok", 10), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    {
        char names[2][32] = { "syncfail", "after" };
        uint64_t want[2] = { acked, 1 }, found[2];
        size_t len;
        char *text = harness_merge_and_cat(h, "syncfail.lsm", &len);
        check_exactly_once(text, names, want, 2, found);
        /* Nothing past the last good sync was published. */
        assert_int_equal(found[0], acked);
        free(text);
    }
}

static void test_fdatasync_failure(void **state)
{
    /* Two syncs succeeded, the third failed. */
    sync_failure(*state, "[sync]\nsync_method = fdatasync\n", "fdatasync_eio=3", "fdatasync", 20);
}

/* With sync_method = syncfs a failed shared syncfs fails every shard it
 * covered: each is trusted only as far as the syncs before. */
static void test_syncfs_failure(void **state)
{
    sync_failure(*state, "[sync]\nsync_method = syncfs\n", "syncfs_eio=3", "syncfs", 20);
}

/* Under one-flush a failed write-back of a shard's records
 * (sync_file_range), a failed O_DIRECT write, or a failed fdatasync (its
 * own, a fill's, or the shared one, whichever comes third), fails the
 * shard; which flush it hits depends on when the fills complete, so the
 * test asks only that what was acknowledged, and nothing else, is in the
 * spool. Writes into prepared space go with O_DIRECT; where the file
 * system refuses that (as the fault pretends), through the page cache and
 * its write-back, which fails here. */
/* sync_failure() under sync_method = one-flush, where the file system
 * takes it; the test is skipped elsewhere. */
static void one_flush_failure(struct harness *h, const char *fault, const char *what)
{
    if (!one_flush_fs(h)) {
        fprintf(stderr, "the temp directory is on neither ext4 nor XFS: no one-flush\n");
        skip();
    }
    sync_failure(h, "[sync]\nsync_method = one-flush\n", fault, what, -1);
}

static void test_one_flush_write_back_failure(void **state)
{
    struct harness *h = *state;

    one_flush_failure(h, "direct_einval,sync_range_eio=1", "write-back (sync_file_range)");
    assert_true(harness_log_has(h, "batch syncs with one-flush, as configured"));
    assert_true(harness_log_has(h, "write-back (sync_file_range) of active/syncfail."));
    assert_true(harness_log_has(h, "its writes go through the page cache"));
}

static void test_one_flush_direct_write_failure(void **state)
{
    struct harness *h = *state;

    one_flush_failure(h, "direct_write_eio=2", "write to shard");
    assert_true(harness_log_has(h, "write to active/syncfail."));
}

static void test_one_flush_fdatasync_failure(void **state)
{
    one_flush_failure(*state, "fdatasync_eio=3", "fdatasync");
}

/* Under one-flush a shard's seal cuts the zeros written ahead of its last
 * record, on a pool thread (the kernel may read a block back first). When
 * that cut fails, the seal stops there with an error naming the step, the
 * file stays in active/, everyone else carries on, and the next start's
 * recovery seals it: every acknowledged record once. */
static void test_one_flush_cut_failure(void **state)
{
    struct harness *h = *state;
    const char *extra[] = { "--fsync", "batch", NULL };
    logshard_opts opts = { .socket_path = h->sock, .producer = "cutfail" };
    logshard *ls = NULL;
    char rec[64];

    if (!one_flush_fs(h)) {
        fprintf(stderr, "the temp directory is on neither ext4 nor XFS: no one-flush\n");
        skip();
    }
    harness_write_config(h, "[sync]\nsync_method = one-flush\n");
    setenv("LOGSHARD_FAULTS", "truncate_eio=1", 1);
    harness_start(h, extra);
    unsetenv("LOGSHARD_FAULTS");
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    for (uint64_t i = 0; i < 10; i++) {
        size_t len = harness_make_record(rec, sizeof(rec), "cutfail", i, 30);
        assert_int_equal(logshard_append(ls, rec, len), 0);
    }
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
    assert_true(harness_wait_log(h, "failed at cutting the zeros written ahead", 10000));
    assert_true(harness_log_has(h, "sealing active/cutfail."));

    /* Business as usual for everyone else. */
    opts.producer = "after";
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "after 0 ok", 10), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
    (void)harness_stop(h, SIGTERM, 30000);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 1);

    /* The next start seals what the failed seal left. */
    harness_start(h, extra);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    {
        char names[2][32] = { "cutfail", "after" };
        uint64_t want[2] = { 10, 1 }, found[2];
        size_t len;
        char *text = harness_merge_and_cat(h, "cutfail.lsm", &len);
        check_exactly_once(text, names, want, 2, found);
        free(text);
    }
}

/* Under interval, records are acknowledged before any sync proves them; a
 * failed sync sends the whole shard to quarantine/ instead of done/. */
static void test_fdatasync_failure_interval_quarantines(void **state)
{
    struct harness *h = *state;
    const char *extra[] = { "--fsync", "interval", NULL };
    logshard_opts opts = { .socket_path = h->sock, .producer = "intfail" };
    logshard *ls = NULL;

    harness_write_config(h, "[sync]\nfsync_interval = 10ms\n");
    setenv("LOGSHARD_FAULTS", "fdatasync_eio=1", 1);
    harness_start(h, extra);
    unsetenv("LOGSHARD_FAULTS");
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "intfail 0", 9), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0); /* acknowledged once written */
    /* The interval sync fails; the producer hears of it. */
    {
        int r = 0;
        for (int i = 0; i < 500 && r == 0; i++) {
            struct timespec t = { 0, 10 * 1000000L };
            r = logshard_append(ls, "intfail x", 9);
            if (r == 0)
                r = logshard_flush(ls, 10000);
            nanosleep(&t, NULL);
        }
        assert_int_equal(r, -EIO);
    }
    logshard_close(ls);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "quarantine", ".tmp"), 1);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 0);
}

/* Every write split into short writes: nothing is lost or garbled. */
static void test_short_writes(void **state)
{
    struct harness *h = *state;
    char names[1][32] = { "short" };
    uint64_t acked[1];
    struct ack_board board;
    size_t len;
    char *text;

    setenv("LOGSHARD_FAULTS", "short_writes", 1);
    harness_start(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    board_open(&board, h);
    assert_int_equal(reap(spawn(h->sock, "short", 0, board.fd, 3000, 300, 100)), 0);
    acked[0] = board_get(&board, 0);
    assert_int_equal(acked[0], 3000);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "short.lsm", &len);
    check_exactly_once(text, names, acked, 1, NULL);
    free(text);
    board_close(&board);
}

/* io_uring set-up failing: with io_backend = auto the daemon says so and
 * carries on with threads; with io_backend = uring it refuses to start. */
static void test_uring_unavailable(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "fallback" };
    logshard *ls = NULL;
    const char *argv[] = { harness_logshardd(), "--config", h->config, "--spool", h->spool,
                           "--socket", h->sock, NULL };
    char *err_path = harness_path(h->dir, "uring.err");
    size_t len;
    char *log;
    int status;

    setenv("LOGSHARD_FAULTS", "uring_setup", 1);
    unsetenv("LOGSHARD_IO_BACKEND");
    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "fallback 0", 10), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    log = harness_slurp(h->log, &len);
    assert_non_null(strstr(log, "io_uring unavailable"));
    assert_non_null(strstr(log, "thread-pool I/O"));
    free(log);

    harness_write_config(h, "[daemon]\nio_backend = uring\n");
    status = harness_run(argv, NULL, err_path, 10000);
    unsetenv("LOGSHARD_FAULTS");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    log = harness_slurp(err_path, &len);
    assert_non_null(strstr(log, "io_backend = uring"));
    free(log);
    free(err_path);
}
#endif

/* A full disk: a producer writing into a small tmpfs gets ENOSPC from its
 * flush, what was acknowledged before stays, the daemon keeps serving, and
 * writes succeed again once space is freed. Needs root to mount. */
/* sync_method = auto: a spool that is a file system of its own (a tmpfs
 * mounted on it) gets the shared syncfs, and acknowledgements still come. */
static void test_auto_syncfs_on_own_fs(void **state)
{
    struct harness *h = *state;
    const char *extra[] = { "--fsync", "batch", NULL };
    logshard_opts opts = { .socket_path = h->sock, .producer = "ownfs" };
    logshard *ls = NULL;
    char *mnt = harness_path(h->dir, "ownfs");

    if (geteuid() != 0) {
        fprintf(stderr, "not root: cannot mount a tmpfs\n");
        free(mnt);
        skip();
    }
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=4m") < 0) {
        fprintf(stderr, "cannot mount a tmpfs here: %s\n", strerror(errno));
        free(mnt);
        skip();
    }
    free(h->spool);
    h->spool = strdup(mnt);
    assert_non_null(h->spool);
    harness_start(h, extra);
    assert_true(harness_wait_log(h, "batch syncs with syncfs", 10000));
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    for (int i = 0; i < 50; i++) {
        assert_int_equal(logshard_append(ls, "ownfs record", 12), 0);
        if (i % 10 == 9)
            assert_int_equal(logshard_flush(ls, 10000), 0);
    }
    logshard_close(ls);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    free(mnt);
}

static void test_enospc(void **state)
{
    struct harness *h = *state;
    char *mnt = harness_path(h->dir, "small");
    char *filler = harness_path(mnt, "filler");
    char names[2][32] = { "full", "later" };
    uint64_t acked[2];
    struct ack_board board;
    const char *extra[] = { "--fsync", "batch", NULL };
    size_t len;
    char *text;
    int st;

    if (geteuid() != 0) {
        fprintf(stderr, "not root: cannot mount a tmpfs\n");
        skip();
    }
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=2m") < 0) {
        fprintf(stderr, "cannot mount a tmpfs here: %s\n", strerror(errno));
        free(filler);
        free(mnt);
        skip();
    }
    free(h->spool);
    h->spool = harness_path(mnt, "spool");
    {
        /* 512 KiB that can be given back later. */
        int fd = open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        static char block[64 * 1024];
        assert_true(fd >= 0);
        for (int i = 0; i < 8; i++)
            assert_int_equal(write(fd, block, sizeof(block)), (ssize_t)sizeof(block));
        close(fd);
    }
    harness_start(h, extra);
    board_open(&board, h);
    st = reap(spawn(h->sock, "full", 0, board.fd, 0, 1000, 20));
    assert_int_equal(st, 10 + ENOSPC);
    acked[0] = board_get(&board, 0);
    assert_true(acked[0] > 0);

    /* Free space; a producer that comes now is served. */
    assert_int_equal(unlink(filler), 0);
    st = reap(spawn(h->sock, "later", 1, board.fd, 200, 100, 50));
    assert_int_equal(st, 0);
    acked[1] = board_get(&board, 1);
    assert_int_equal(acked[1], 200);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    text = harness_merge_and_cat(h, "enospc.lsm", &len);
    check_exactly_once(text, names, acked, 2, NULL);
    free(text);
    board_close(&board);
    assert_int_equal(umount2(mnt, MNT_DETACH), 0);
    free(filler);
    free(mnt);
}

/* RLIMIT_FSIZE: the write past the limit fails with EFBIG, reported to that
 * producer; the daemon stays up and serves a new producer in a new shard. */
static void test_efbig(void **state)
{
    struct harness *h = *state;
    char names[2][32] = { "big", "small" };
    uint64_t acked[2];
    struct ack_board board;
    size_t len;
    char *text;

    h->fsize_limit = 256 * 1024;
    harness_start(h, NULL);
    board_open(&board, h);
    assert_int_equal(reap(spawn(h->sock, "big", 0, board.fd, 0, 1000, 10)), 10 + EFBIG);
    acked[0] = board_get(&board, 0);
    assert_true(acked[0] > 0);
    assert_int_equal(reap(spawn(h->sock, "small", 1, board.fd, 100, 100, 10)), 0);
    acked[1] = board_get(&board, 1);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    h->fsize_limit = 0;
    text = harness_merge_and_cat(h, "efbig.lsm", &len);
    check_exactly_once(text, names, acked, 2, NULL);
    free(text);
    board_close(&board);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_policies, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_batch, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_batch_fdatasync, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_batch_syncfs, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_always, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_none, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill9_interval, harness_setup, teardown),
#ifdef LOGSHARD_FAULT_INJECTION
        cmocka_unit_test_setup_teardown(test_fdatasync_failure, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_syncfs_failure, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_flush_write_back_failure, harness_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_one_flush_direct_write_failure, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_one_flush_fdatasync_failure, harness_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_one_flush_cut_failure, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_fdatasync_failure_interval_quarantines, harness_setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_short_writes, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_uring_unavailable, harness_setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_auto_syncfs_on_own_fs, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_enospc, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_efbig, harness_setup, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
