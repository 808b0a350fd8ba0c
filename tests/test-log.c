/* Unit tests for daemon/log.c's rate limit: the decision with a clock the
 * test sets (burst, interval, the count of what was held back, a clock
 * reading 0), then the whole path on a real event loop with stderr sent to
 * a file: the burst is written, the rest is counted, and the count comes
 * out as one line when the interval ends. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

#define MS 1000000ull

static void test_burst_then_count(void **state)
{
    struct log_ratelimit rl = LOG_RATELIMIT_INIT_BUDGET("kind", 3, 1000);
    uint64_t t0 = 5000 * MS, held = 99;
    (void)state;

    for (int i = 0; i < 3; i++) {
        assert_true(log_ratelimit_check(&rl, t0 + (uint64_t)i * MS, &held));
        assert_int_equal(held, 0);
    }
    for (int i = 0; i < 7; i++)
        assert_false(log_ratelimit_check(&rl, t0 + 10 * MS, &held));
    /* The interval runs from the first line, not the last. */
    assert_false(log_ratelimit_check(&rl, t0 + 999 * MS, &held));
    assert_true(log_ratelimit_check(&rl, t0 + 1000 * MS, &held));
    assert_int_equal(held, 8);
    /* A new interval with its own burst. */
    held = 99;
    assert_true(log_ratelimit_check(&rl, t0 + 1001 * MS, &held));
    assert_int_equal(held, 0);
    assert_true(log_ratelimit_check(&rl, t0 + 1002 * MS, &held));
    assert_false(log_ratelimit_check(&rl, t0 + 1003 * MS, &held));
}

static void test_expire(void **state)
{
    struct log_ratelimit rl = LOG_RATELIMIT_INIT_BUDGET("kind", 1, 100);
    uint64_t t0 = 7 * MS, held;
    (void)state;

    assert_int_equal(log_ratelimit_expire(&rl, t0), 0); /* nothing running */
    assert_true(log_ratelimit_check(&rl, t0, &held));
    assert_false(log_ratelimit_check(&rl, t0 + 1, &held));
    assert_false(log_ratelimit_check(&rl, t0 + 2, &held));
    assert_int_equal(log_ratelimit_expire(&rl, t0 + 99 * MS), 0);
    assert_int_equal(log_ratelimit_expire(&rl, t0 + 100 * MS), 2);
    /* Reported once: the next line starts afresh with nothing to report. */
    assert_int_equal(log_ratelimit_expire(&rl, t0 + 100 * MS), 0);
    assert_true(log_ratelimit_check(&rl, t0 + 101 * MS, &held));
    assert_int_equal(held, 0);

    /* An interval that ended without anything held back reports nothing. */
    assert_int_equal(log_ratelimit_expire(&rl, t0 + 500 * MS), 0);
}

/* A clock that reads 0 must not look like "no interval running". */
static void test_clock_at_zero(void **state)
{
    struct log_ratelimit rl = LOG_RATELIMIT_INIT_BUDGET("kind", 1, 100);
    uint64_t held;
    (void)state;

    assert_true(log_ratelimit_check(&rl, 0, &held));
    assert_false(log_ratelimit_check(&rl, 1, &held));
    assert_false(log_ratelimit_check(&rl, 50 * MS, &held));
    assert_true(log_ratelimit_check(&rl, 101 * MS, &held));
    assert_int_equal(held, 2);
}

static void on_deadline(uv_timer_t *t)
{
    (void)t; /* only keeps the loop running until then */
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static size_t count_lines(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* The whole path: 25 warnings of one kind with a burst of 10 give 10 lines
 * and, once the interval is over, one line counting the 15 others, written
 * by the timer without another warning coming. Another kind has a budget
 * of its own. */
static void test_lines_on_a_loop(void **state)
{
    static struct log_ratelimit flood = LOG_RATELIMIT_INIT_BUDGET("flood", 10, 100);
    static struct log_ratelimit other = LOG_RATELIMIT_INIT_BUDGET("other", 10, 100);
    char path[] = "/tmp/test-log.XXXXXX";
    int fd = mkstemp(path), saved = dup(STDERR_FILENO);
    uv_loop_t loop;
    uv_timer_t deadline;
    char text[8192];
    ssize_t n;
    (void)state;

    assert_true(fd >= 0 && saved >= 0);
    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(uv_timer_init(&loop, &deadline), 0);
    fflush(stderr);
    assert_true(dup2(fd, STDERR_FILENO) >= 0);
    setvbuf(stderr, NULL, _IONBF, 0);

    for (int i = 0; i < 25; i++)
        log_msg_ratelimited(&flood, &loop, LOG_LEVEL_WARNING, "refused producer %d", i);
    log_msg_ratelimited(&other, &loop, LOG_LEVEL_WARNING, "another kind");
    /* Debug lines are below the default level: neither written nor counted. */
    for (int i = 0; i < 20; i++)
        log_msg_ratelimited(&other, &loop, LOG_LEVEL_DEBUG, "quiet %d", i);
    /* The report timer does not hold the loop; this one does, for long
     * enough that the 100 ms interval has ended. */
    assert_int_equal(uv_timer_start(&deadline, on_deadline, 400, 0), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);

    fflush(stderr);
    assert_true(dup2(saved, STDERR_FILENO) >= 0);
    n = pread(fd, text, sizeof(text) - 1, 0);
    assert_true(n > 0);
    text[n] = '\0';
    if (count_lines(text, "refused producer ") != 10 ||
        !strstr(text, "refused producer 0\n") || !strstr(text, "refused producer 9\n") ||
        count_lines(text, "flood: 15 more suppressed") != 1 ||
        count_lines(text, "another kind") != 1 || count_lines(text, "suppressed") != 1 ||
        strstr(text, "quiet"))
        fail_msg("unexpected log:\n%s", text);

    /* log.c's report timer is on this loop too. */
    uv_walk(&loop, close_any, NULL);
    (void)uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(fd);
    close(saved);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_then_count),
        cmocka_unit_test(test_expire),
        cmocka_unit_test(test_clock_at_zero),
        cmocka_unit_test(test_lines_on_a_loop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
