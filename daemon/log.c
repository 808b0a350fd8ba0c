/* Formats log lines for stderr: with a "<N>" priority prefix when stderr is
 * connected to the journal (JOURNAL_STREAM), with a readable level word when
 * a person runs the daemon in a terminal.
 *
 * The rate limit: a kind of message that spent its budget is put on a list
 * of counts to report, and one timer on the event loop writes each count
 * when its interval ends. The timer is unreferenced, so it never holds the
 * loop (or the drain) open; counts still due at exit are written by an
 * atexit handler. Everything here runs on the loop's thread: the I/O
 * threads never log. */
#include "log.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"

static bool journal_prefix;
static enum log_level max_level = LOG_LEVEL_INFO;

/* Kinds with a count to report, and the timer that reports them. */
static struct log_ratelimit *pending;
static uv_timer_t report_timer;
static uv_loop_t *report_loop; /* NULL until the first count needs the timer */

static void report_all_at_exit(void);

void log_setup(void)
{
    journal_prefix = getenv("JOURNAL_STREAM") != NULL;
    if (getenv("LOGSHARD_DEBUG"))
        max_level = LOG_LEVEL_DEBUG;
    (void)atexit(report_all_at_exit); /* fails only when the table is full */
}

void log_set_max_level(enum log_level level)
{
    max_level = level;
}

static void write_line(enum log_level level, const char *fmt, va_list ap)
{
    char line[2048];
    const char *word = "";
    int n;

    if (level > max_level)
        return;
    if (!journal_prefix) {
        switch (level) {
        case LOG_LEVEL_ERROR: word = "error: "; break;
        case LOG_LEVEL_WARNING: word = "warning: "; break;
        default: break;
        }
    }
    n = vsnprintf(line, sizeof(line), fmt, ap);
    if (n < 0)
        return;
    if (journal_prefix)
        fprintf(stderr, "<%d>%s\n", (int)level, line);
    else
        fprintf(stderr, "logshardd: %s%s\n", word, line);
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    write_line(level, fmt, ap);
    va_end(ap);
}

/* ---- rate limit ---- */

bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t now_ns, uint64_t *ret_suppressed)
{
    uint64_t expired = log_ratelimit_expire(rl, now_ns);

    if (rl->window_start_ns == 0) {
        /* 0 marks "no interval"; a clock that reads 0 starts at 1. */
        rl->window_start_ns = now_ns ? now_ns : 1;
        rl->printed = 0;
        rl->suppressed = 0;
    }
    if (rl->printed < rl->burst) {
        rl->printed++;
        *ret_suppressed = expired;
        return true;
    }
    rl->suppressed++;
    *ret_suppressed = expired; /* 0: a new interval never starts over budget */
    return false;
}

uint64_t log_ratelimit_expire(struct log_ratelimit *rl, uint64_t now_ns)
{
    uint64_t n;

    if (rl->window_start_ns == 0 || now_ns - rl->window_start_ns < rl->interval_ns)
        return 0;
    n = rl->suppressed;
    rl->window_start_ns = 0;
    rl->printed = 0;
    rl->suppressed = 0;
    return n;
}

static void report(const struct log_ratelimit *rl, enum log_level level, uint64_t n)
{
    log_msg(level, "%s: %" PRIu64 " more suppressed (at most %u lines every %" PRIu64 " ms)",
            rl->what, n, rl->burst, rl->interval_ns / 1000000u);
}

static void unlink_pending(struct log_ratelimit *rl)
{
    for (struct log_ratelimit **p = &pending; *p; p = &(*p)->next_pending) {
        if (*p == rl) {
            *p = rl->next_pending;
            break;
        }
    }
    rl->next_pending = NULL;
    rl->pending = false;
}

static void arm_report_timer(uint64_t now_ns);

/* Writes the counts whose interval has ended, then waits for the next. */
static void on_report_timer(uv_timer_t *t)
{
    uint64_t now = now_monotonic_ns();
    struct log_ratelimit *rl = pending, *next;

    (void)t;
    for (; rl; rl = next) {
        enum log_level level = rl->level;
        uint64_t n;

        next = rl->next_pending;
        n = log_ratelimit_expire(rl, now);
        if (rl->window_start_ns != 0)
            continue; /* its interval is still running */
        unlink_pending(rl);
        if (n)
            report(rl, level, n);
    }
    arm_report_timer(now);
}

static void arm_report_timer(uint64_t now_ns)
{
    uint64_t due = UINT64_MAX;

    if (!report_loop)
        return;
    for (const struct log_ratelimit *rl = pending; rl; rl = rl->next_pending) {
        uint64_t end = rl->window_start_ns + rl->interval_ns;
        if (end < due)
            due = end;
    }
    if (due == UINT64_MAX) {
        (void)uv_timer_stop(&report_timer);
        return;
    }
    /* Round up: waking a little early would only find nothing due yet. */
    (void)uv_timer_start(&report_timer, on_report_timer,
                         due > now_ns ? (due - now_ns + 999999u) / 1000000u : 0, 0);
}

static void report_all_at_exit(void)
{
    while (pending) {
        struct log_ratelimit *rl = pending;
        uint64_t n = rl->suppressed;

        unlink_pending(rl);
        if (n)
            report(rl, rl->level, n);
    }
}

void log_msg_ratelimited(struct log_ratelimit *rl, uv_loop_t *loop, enum log_level level,
                         const char *fmt, ...)
{
    uint64_t now = now_monotonic_ns();
    uint64_t held_back;
    va_list ap;

    if (level > max_level)
        return;
    if (!log_ratelimit_check(rl, now, &held_back)) {
        rl->level = level;
        if (!rl->pending) {
            rl->pending = true;
            rl->next_pending = pending;
            pending = rl;
            if (!report_loop && loop && uv_timer_init(loop, &report_timer) == 0) {
                uv_unref((uv_handle_t *)&report_timer);
                report_loop = loop;
            }
            arm_report_timer(now);
        }
        return;
    }
    if (held_back) {
        if (rl->pending)
            unlink_pending(rl); /* reported here rather than by the timer */
        report(rl, level, held_back);
    }
    va_start(ap, fmt);
    write_line(level, fmt, ap);
    va_end(ap);
}
