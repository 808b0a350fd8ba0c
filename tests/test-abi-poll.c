/* The event-loop calls of liblogshard against the real daemon: a producer
 * opened with LOGSHARD_NONBLOCK and driven only by poll(2) on
 * logshard_fd(), with logshard_events() and logshard_process(), gets every
 * record acknowledged and into the spool once, in order. While the daemon
 * is stopped (SIGSTOP) no library call waits for it. The poll(2) example of
 * logshard(3), compiled from the page itself, is run the same way. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"

#define RECORDS 50000
#define RECORD_SIZE 100
/* A library call that waits would hang the test; this ends it instead. */
#define ALARM_S 120
/* How long a call that must not block may take on a loaded machine. */
#define CALL_MAX_MS 1000

static const char *example_path;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Checks that text is exactly records 0..n-1 of harness_make_record(name). */
static void check_lines(char *text, const char *name, uint64_t n, size_t size)
{
    char want[RECORD_SIZE + 64];
    char *save = NULL;
    uint64_t i = 0;

    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t len = harness_make_record(want, sizeof(want) - 1, name, i, size);

        want[len] = '\0';
        if (strcmp(line, want) != 0)
            fail_msg("record %" PRIu64 " is \"%.40s\", not \"%.40s\"", i, line, want);
        i++;
    }
    if (i != n)
        fail_msg("%" PRIu64 " records came out, %" PRIu64 " were appended", i, n);
}

/* One turn of the loop: wait for what logshard_events() asks (at most
 * timeout_ms), then logshard_process(). Returns poll()'s count. */
static int loop_turn(logshard *ls, int timeout_ms)
{
    struct pollfd pfd = { .fd = logshard_fd(ls), .events = (short)logshard_events(ls) };
    uint64_t t0;
    int n;

    assert_true(pfd.fd >= 0);
    assert_true(pfd.events & POLLIN);
    n = poll(&pfd, 1, timeout_ms);
    assert_true(n >= 0 || errno == EINTR);
    t0 = now_ms();
    assert_int_equal(logshard_process(ls), 0);
    assert_true(now_ms() - t0 < CALL_MAX_MS);
    return n;
}

/* Appends until pushed back or done; returns the new count taken. */
static uint64_t append_some(logshard *ls, uint64_t taken, bool *ret_pushed_back)
{
    char rec[RECORD_SIZE + 64];

    *ret_pushed_back = false;
    while (taken < RECORDS) {
        size_t len = harness_make_record(rec, sizeof(rec), "poller", taken, RECORD_SIZE);
        uint64_t t0 = now_ms();
        int r = logshard_append(ls, rec, len);

        assert_true(now_ms() - t0 < CALL_MAX_MS);
        if (r == -EAGAIN) {
            *ret_pushed_back = true;
            break;
        }
        assert_int_equal(r, 0);
        taken++;
    }
    return taken;
}

static void test_poll_loop(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "poller",
                           .buffer_bytes = 4096, .flags = LOGSHARD_NONBLOCK };
    logshard *ls = NULL;
    uint64_t taken = 0, deadline;
    bool pushed_back, stopped_once = false;
    size_t len;
    char *text;

    harness_start(h, NULL);
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    alarm(ALARM_S);

    /* The daemon frozen: appends fill the socket and are pushed back, the
     * descriptor does not become ready, and nothing waits. */
    assert_int_equal(kill(h->daemon, SIGSTOP), 0);
    deadline = now_ms() + 30000;
    do {
        assert_true(now_ms() < deadline);
        taken = append_some(ls, taken, &pushed_back);
        assert_true(taken < RECORDS); /* the socket cannot hold them all */
        if (!pushed_back)
            (void)loop_turn(ls, 0);
    } while (!pushed_back);
    assert_true(logshard_events(ls) & POLLOUT);
    assert_int_equal(loop_turn(ls, 200), 0);
    assert_int_equal(logshard_unacked(ls), taken);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(kill(h->daemon, SIGCONT), 0);
    stopped_once = true;

    /* Running again: the same loop gets everything sent and acknowledged. */
    deadline = now_ms() + 60000;
    while (taken < RECORDS || logshard_unacked(ls) > 0) {
        assert_true(now_ms() < deadline);
        taken = append_some(ls, taken, &pushed_back);
        (void)loop_turn(ls, 1000);
    }
    alarm(0);
    assert_true(stopped_once);
    assert_int_equal(logshard_events(ls), POLLIN);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_NONE);
    logshard_close(ls);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    check_lines(text, "poller", RECORDS, RECORD_SIZE);
    free(text);
}

/* The page's example: it exits 0 only once every record is acknowledged. */
static void test_man_page_example(void **state)
{
    struct harness *h = *state;
    const char *argv[] = { example_path, NULL };
    char *text, *line, *save = NULL, *err_path;
    long n = 0;
    size_t len;
    int status;

    harness_start(h, NULL);
    err_path = harness_path(h->dir, "example.err");
    assert_int_equal(setenv("LOGSHARD_SOCKET", h->sock, 1), 0);
    status = harness_run(argv, NULL, err_path, 120000);
    assert_int_equal(unsetenv("LOGSHARD_SOCKET"), 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char *err = harness_slurp(err_path, &len);

        fail_msg("the example of logshard(3) failed (status %d): %s", status, err);
    }
    free(err_path);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char want[32];

        snprintf(want, sizeof(want), "record %ld", n);
        assert_string_equal(line, want);
        n++;
    }
    assert_int_equal(n, 100000);
    free(text);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_poll_loop, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_man_page_example, harness_setup, harness_teardown),
    };

    if (argc != 2) {
        fprintf(stderr, "usage: %s LOGSHARD_POLL_EXAMPLE\n", argv[0]);
        return 2;
    }
    example_path = argv[1];
    return cmocka_run_group_tests(tests, NULL, NULL);
}
