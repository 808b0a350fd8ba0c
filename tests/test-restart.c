/* Producers with no retry code at all survive the daemon: the real
 * logshardd killed with SIGKILL at random moments (or stopped with SIGTERM)
 * and started again, round after round, while producer processes written
 * only against <logshard.h> connect once, append numbered records with a
 * flush every 64, and close. At the end every record is in the spool
 * exactly once and in order, and no producer saw an error.
 *
 * The kill delays come from a PRNG whose seed is printed;
 * LOGSHARD_TEST_SEED=N makes the same choices again (the machine's timing
 * still differs). The size of a run: LOGSHARD_RESTART_ROUNDS (default 12)
 * and LOGSHARD_RESTART_RECORDS (records per producer, default 20000);
 * LOGSHARD_TEST_HEAVY=1 runs what the issue asks: 100 rounds and 1,000,000
 * records; LOGSHARD_TEST_FILTER=<test name> runs one test alone. Each
 * producer also notes how long its calls blocked across a
 * reconnect (the pause a restart costs it); the test prints their p50 and
 * p99. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"

#define FLUSH_EVERY 64u
#define MAX_PRODUCERS 8u
#define MAX_PAUSES 4096u

static uint64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);

    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* ---- the producer: what an application that knows nothing of restarts
 * does. Its only extra is the bookkeeping the test reads back. ---- */

struct producer_report {
    uint64_t appended;
    int first_error;         /* 0, or the first error any call returned */
    uint64_t reconnects;
    uint64_t n_pauses;
    uint64_t pauses_us[MAX_PAUSES]; /* calls that spanned a reconnect */
};

static void producer_main(const char *sock, const char *name, uint64_t count,
                          const char *report_path)
{
    logshard_opts opts = { .socket_path = sock, .producer = name };
    struct producer_report rep = { 0 };
    logshard *ls = NULL;
    char rec[64];
    int fd, r;

    r = logshard_connect(&ls, &opts);
    if (r < 0) {
        rep.first_error = r;
    } else {
        for (uint64_t i = 0; i < count; i++) {
            int len = snprintf(rec, sizeof(rec), "%s %012" PRIu64, name, i);
            uint64_t before = logshard_reconnects(ls), t0 = now_us();

            r = logshard_append(ls, rec, (size_t)len);
            if (r == 0 && (i + 1) % FLUSH_EVERY == 0)
                r = logshard_flush(ls, -1);
            if (logshard_reconnects(ls) != before && rep.n_pauses < MAX_PAUSES)
                rep.pauses_us[rep.n_pauses++] = now_us() - t0;
            if (r < 0) {
                rep.first_error = r;
                break;
            }
            rep.appended++;
        }
        if (rep.first_error == 0) {
            r = logshard_flush(ls, -1);
            if (r < 0)
                rep.first_error = r;
        }
        rep.reconnects = logshard_reconnects(ls);
        logshard_close(ls);
    }
    fd = open(report_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        _exit(3);
    close(fd);
    _exit(rep.first_error == 0 ? 0 : 1);
}

static pid_t spawn_producer(struct harness *h, const char *name, uint64_t count,
                            const char *report_path)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        /* As an application started from a shell would run. */
        if (process_reset_signals() < 0)
            _exit(4);
        producer_main(h->sock, name, count, report_path);
    }
    return pid;
}

/* ---- reading the spool back ---- */

/* Reads logctl cat --spool's output (one "name number" per line) and
 * checks that each producer's numbers are 0 .. count - 1, once each, in
 * order. */
static void expect_exactly_once(struct harness *h, char names[][32], unsigned n_producers,
                                uint64_t count)
{
    char *out = harness_path(h->dir, "cat.out");
    const char *argv[] = { harness_logctl(), "cat", "--spool", h->spool, NULL };
    uint64_t next[MAX_PRODUCERS] = { 0 }, dup = 0, out_of_order = 0;
    char line[256];
    FILE *f;
    int status = harness_run(argv, out, NULL, 600000);

    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("logctl cat --spool %s: %s %d", h->spool,
                 WIFEXITED(status) ? "exit status" : "killed by signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    f = fopen(out, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        char *sp = strchr(line, ' ');
        uint64_t num;
        unsigned p;

        assert_non_null(sp);
        *sp = '\0';
        num = strtoull(sp + 1, NULL, 10);
        for (p = 0; p < n_producers && strcmp(names[p], line) != 0; p++)
            ;
        if (p == n_producers)
            fail_msg("a record of an unknown producer '%s'", line);
        if (num < next[p])
            dup++;
        else if (num > next[p])
            out_of_order++;
        if (num >= next[p])
            next[p] = num + 1;
    }
    fclose(f);
    free(out);
    for (unsigned p = 0; p < n_producers; p++)
        if (next[p] != count)
            fail_msg("%s: the spool ends at record %" PRIu64 " of %" PRIu64, names[p],
                     next[p], count);
    if (dup || out_of_order)
        fail_msg("%" PRIu64 " records duplicated, %" PRIu64 " gaps or out of order", dup,
                 out_of_order);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

struct shards_of_producers {
    struct harness *h;
    unsigned n;
};

/* Whether every producer has a shard, open or already sealed. */
static bool all_producers_have_shards(void *arg)
{
    struct shards_of_producers *w = arg;

    size_t open = harness_count_files(w->h, "active", ".tmp");

    return open + harness_count_files(w->h, "done", ".shard") >= w->n;
}

/* Rounds of restarts (SIGKILL or SIGTERM) under n_producers producers,
 * then the check. */
static void restart_rounds(struct harness *h, const char *policy, int sig,
                           unsigned n_producers)
{
    uint64_t rounds = env_u64("LOGSHARD_RESTART_ROUNDS", getenv("LOGSHARD_TEST_HEAVY") ? 100 : 12);
    uint64_t count =
        env_u64("LOGSHARD_RESTART_RECORDS", getenv("LOGSHARD_TEST_HEAVY") ? 1000000 : 20000);
    const char *extra[] = { "--fsync", policy, NULL };
    char names[MAX_PRODUCERS][32];
    char *reports[MAX_PRODUCERS];
    pid_t pids[MAX_PRODUCERS];
    uint64_t *pauses = NULL, n_pauses = 0, reconnects = 0, kills = 0;
    uint64_t t_start = now_us();
    bool all_done = false;

    harness_start(h, extra);
    for (unsigned p = 0; p < n_producers; p++) {
        char file[64];

        snprintf(names[p], sizeof(names[p]), "%s-p%u", policy, p);
        snprintf(file, sizeof(file), "report-%u", p);
        reports[p] = harness_path(h->dir, file);
        pids[p] = spawn_producer(h, names[p], count, reports[p]);
    }
    /* The restarts are for producers that are connected: one that connects
     * for the first time while the daemon is away finds no socket (without
     * systemd's socket unit nothing holds the path), which is an error to
     * report, not one to wait out. Each producer has a shard once its
     * HELLO is answered. */
    {
        struct shards_of_producers want = { h, n_producers };

        if (!harness_wait_for(all_producers_have_shards, &want, 30000))
            fail_msg("the %u producers did not all connect within 30 s", n_producers);
    }
    for (uint64_t round = 0; round < rounds && !all_done; round++) {
        struct timespec delay;
        /* From just after READY (recovery and the stream scan just done,
         * producers reconnecting) to well into the stream. */
        uint64_t ms = 2 + harness_rng_next() % 100;
        int status;

        delay.tv_sec = (time_t)(ms / 1000);
        delay.tv_nsec = (long)(ms % 1000) * 1000000L;
        /* The point of the test: the restart comes at an arbitrary moment. */
        nanosleep(&delay, NULL);
        status = harness_stop(h, sig, 30000);
        if (sig == SIGKILL)
            assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        else
            harness_assert_clean_exit(status);
        kills++;
        harness_start(h, extra);
        /* Producers that finished leave their report; once all did, more
         * restarts test nothing. */
        all_done = true;
        for (unsigned p = 0; p < n_producers; p++)
            all_done = all_done && access(reports[p], F_OK) == 0;
    }
    for (unsigned p = 0; p < n_producers; p++) {
        struct producer_report *rep;
        size_t len;
        int status;

        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        rep = (struct producer_report *)harness_slurp(reports[p], &len);
        assert_int_equal(len, sizeof(*rep));
        if (rep->first_error != 0)
            fail_msg("%s saw an error: %s (after %" PRIu64 " records)", names[p],
                     logshard_strerror(rep->first_error), rep->appended);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_true(rep->appended == count);
        reconnects += rep->reconnects;
        pauses = realloc(pauses, (n_pauses + rep->n_pauses + 1) * sizeof(*pauses));
        assert_non_null(pauses);
        memcpy(pauses + n_pauses, rep->pauses_us, rep->n_pauses * sizeof(*pauses));
        n_pauses += rep->n_pauses;
        free(rep);
        free(reports[p]);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    expect_exactly_once(h, names, n_producers, count);
    {
        struct harness_run v = harness_run_logctl(h, "verify", "--quiet", "--spool", h->spool,
                                                  NULL);
        harness_expect_code(&v, 0, "logctl verify --spool");
        harness_run_free(&v);
    }
    qsort(pauses, n_pauses, sizeof(*pauses), cmp_u64);
    fprintf(stderr,
            "restart: fsync=%s, %s x %" PRIu64 ", %u producers x %" PRIu64
            " records: %" PRIu64 " found, 0 lost, 0 duplicated, 0 producer errors; %" PRIu64
            " reconnects; pause per reconnect p50 %.1f ms, p99 %.1f ms (%" PRIu64
            " calls); %.1f s\n",
            policy, sig == SIGKILL ? "SIGKILL" : "SIGTERM", kills, n_producers, count,
            count * n_producers, reconnects,
            n_pauses ? (double)pauses[n_pauses / 2] / 1000.0 : 0.0,
            n_pauses ? (double)pauses[(n_pauses * 99) / 100] / 1000.0 : 0.0, n_pauses,
            (double)(now_us() - t_start) / 1e6);
    free(pauses);
}

static void test_kill_batch(void **state)
{
    restart_rounds(*state, "batch", SIGKILL, 1);
}

static void test_kill_always(void **state)
{
    restart_rounds(*state, "always", SIGKILL, 1);
}

static void test_kill_none(void **state)
{
    restart_rounds(*state, "none", SIGKILL, 1);
}

static void test_kill_batch_8(void **state)
{
    restart_rounds(*state, "batch", SIGKILL, 8);
}

static void test_term_batch_8(void **state)
{
    restart_rounds(*state, "batch", SIGTERM, 8);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_batch, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_kill_always, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_kill_none, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_kill_batch_8, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_term_batch_8, harness_setup, harness_teardown),
    };
    harness_seed_rng();
    /* LOGSHARD_TEST_FILTER=test_kill_none runs that one alone. */
    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
