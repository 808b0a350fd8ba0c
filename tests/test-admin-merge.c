/* Integration tests of logctl merge against the spool of the real logshardd
 * in a temporary directory: its progress line on a pseudo-terminal and the
 * choice of shards it merges.
 *
 * Records are sent from this process through the real liblogshard, so their
 * shards carry this process's uid and pid. Every wait has a deadline and
 * waits for an event (a reply, a line on a pipe, a process exit). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"
#include "shard_format.h"

#include "admin-fixture.h"

/* ---- merge progress ---- */

static void make_shards(struct harness *h, int producers, int records)
{
    for (int p = 0; p < producers; p++) {
        char name[32];
        logshard *ls;

        snprintf(name, sizeof(name), "merged-%d", p);
        ls = producer_open(h, name);
        for (int i = 0; i < records; i++)
            producer_sendf(ls, "%s record %d", name, i);
        producer_flush(ls);
        logshard_close(ls);
    }
    rotate(h, NULL);
}

/* Runs logctl merge on a pseudo-terminal; returns what the terminal got. */
static char *merge_on_pty(struct harness *h, const char *output, bool knob)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    char *buf = calloc(1, 65536);
    size_t len = 0;
    int64_t deadline = now_ms() + 30000;
    int status;

    assert_true(pid >= 0);
    assert_non_null(buf);
    if (pid == 0) {
        const char *argv[] = { harness_logctl(), "merge", "--spool", h->spool, "--output",
                               output, NULL };
        if (process_reset_signals() < 0)
            _exit(127);
        if (knob)
            setenv("LOGCTL_PROGRESS_AFTER_MS", "0", 1);
        else
            unsetenv("LOGCTL_PROGRESS_AFTER_MS");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        struct pollfd p = { .fd = master, .events = POLLIN };
        ssize_t n;

        assert_true(now_ms() < deadline);
        if (poll(&p, 1, 1000) <= 0)
            continue;
        n = read(master, buf + len, 65535 - len);
        if (n <= 0)
            break; /* EIO: the child and its terminal are gone */
        len += (size_t)n;
    }
    close(master);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    return buf;
}

static void test_merge_progress(void **state)
{
    struct harness *h = *state;
    char *out1 = harness_path(h->dir, "m1.lsm");
    char *out2 = harness_path(h->dir, "m2.lsm");
    char *out3 = harness_path(h->dir, "m3.lsm");
    char *tty;
    struct harness_run r;

    harness_start(h, NULL);
    make_shards(h, 3, 20);

    /* LOGCTL_PROGRESS_AFTER_MS=0 (a test knob) shows the line at once,
     * instead of after a second. */
    tty = merge_on_pty(h, out1, true);
    if (!strstr(tty, "\r\033[Kmerge: ") || !strstr(tty, "3/3 shards") || !strstr(tty, "ETA") ||
        !strstr(tty, "merged 3 shards"))
        fail_msg("terminal output: %s", tty);
    free(tty);

    /* A merge shorter than a second shows nothing but its summary. */
    tty = merge_on_pty(h, out2, false);
    if (strstr(tty, "ETA") || strstr(tty, "\033[K") || !strstr(tty, "merged 3 shards"))
        fail_msg("terminal output: %s", tty);
    free(tty);

    /* Not a terminal: the summary only, even with the knob. */
    assert_int_equal(setenv("LOGCTL_PROGRESS_AFTER_MS", "0", 1), 0);
    r = harness_run_logctl(h, "merge", "--spool", h->spool, "--output", out3, NULL);
    unsetenv("LOGCTL_PROGRESS_AFTER_MS");
    harness_expect_code(&r, 0, "merge on a pipe");
    assert_null(strchr(r.out, '\r'));
    assert_null(strstr(r.out, "ETA"));
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "merged 3 shards, 60 records"));
    harness_run_free(&r);

    free(out1);
    free(out2);
    free(out3);
    stop_daemon(h);
}

static void test_merge_selection(void **state)
{
    struct harness *h = *state;
    char *out = harness_path(h->dir, "sel.lsm");
    char before[64];
    struct harness_run r;
    logshard *ls;

    harness_start(h, NULL);
    make_shards(h, 2, 5);
    /* Everything so far was received before this instant; the next shard
     * of merged-0 is not. */
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(before, sizeof(before), "@%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
    }
    ls = producer_open(h, "merged-0");
    producer_sendf(ls, "late");
    producer_flush(ls);
    logshard_close(ls);
    rotate(h, NULL);

    r = harness_run_logctl(h, "merge", "--spool", h->spool, "--output", out, "--producer", "merged-0",
                   "--before", before, "--delete", "--json", NULL);
    harness_expect_code(&r, 0, "merge --producer --before --json");
    {
        struct json_value *v = parse_json(r.out, r.out_len);
        assert_true(json_get_bool(v, "ok", false));
        assert_string_equal(json_get_str(v, "output", ""), out);
        assert_true(json_get_u64(v, "shards", 0) == 1);
        assert_true(json_get_u64(v, "records", 0) == 5);
        assert_true(json_get_u64(v, "deleted", 0) == 1);
        assert_int_equal(json_get(v, "sources")->n, 1);
        assert_int_equal(json_get(v, "error")->type, JSON_NULL);
        json_value_free(v);
    }
    harness_run_free(&r);
    /* What was left: merged-1's shard and the late one. */
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    assert_int_equal(count_prefix(h, "done", "merged-1."), 1);
    r = harness_run_logctl(h, "cat", out, NULL);
    harness_expect_code(&r, 0, "cat the selection");
    assert_null(strstr(r.out, "late"));
    assert_null(strstr(r.out, "merged-1"));
    harness_run_free(&r);
    free(out);
    stop_daemon(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_merge_progress, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_selection, harness_setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
