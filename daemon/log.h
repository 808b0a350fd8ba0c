/* Daemon logging to stderr. Only the daemon's top level logs; every message
 * names its object (producer, shard file, config line). Under systemd the
 * lines carry <N> priority prefixes that journald understands.
 *
 * Messages a client can cause at will (a refused connection, a malformed
 * frame) go through a rate limit, one per kind of message: at most a burst
 * of lines per interval, the rest counted, and one line saying how many were
 * suppressed when the interval ends. Messages about the daemon's own state
 * (a failed write or sync) are never limited. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

enum log_level { LOG_LEVEL_ERROR = 3, LOG_LEVEL_WARNING = 4, LOG_LEVEL_INFO = 6, LOG_LEVEL_DEBUG = 7 };

void log_setup(void);
void log_set_max_level(enum log_level level);

__attribute__((format(printf, 2, 3))) void log_msg(enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)

/* The default budget of a kind of message, as the kernel's printk_ratelimit:
 * ten lines every five seconds. */
#define LOG_RATELIMIT_BURST 10u
#define LOG_RATELIMIT_INTERVAL_MS 5000u

/* The budget and the count of one kind of message. Initialise with
 * LOG_RATELIMIT_INIT; the other members belong to log.c. */
struct log_ratelimit {
    const char *what;     /* names the kind in the "suppressed" line */
    unsigned burst;       /* lines let through per interval */
    uint64_t interval_ns;
    uint64_t window_start_ns; /* 0: no interval running */
    unsigned printed;         /* lines let through in this interval */
    uint64_t suppressed;      /* lines held back in this interval */
    enum log_level level;     /* of the lines held back */
    struct log_ratelimit *next_pending; /* in log.c's list of counts to report */
    bool pending;
};

#define LOG_RATELIMIT_INIT_BUDGET(what_, burst_, interval_ms_)                                 \
    { .what = (what_), .burst = (burst_), .interval_ns = (uint64_t)(interval_ms_) * 1000000u }
#define LOG_RATELIMIT_INIT(what_)                                                              \
    LOG_RATELIMIT_INIT_BUDGET(what_, LOG_RATELIMIT_BURST, LOG_RATELIMIT_INTERVAL_MS)

/* The decision alone, with the clock given, so it can be tested: returns
 * true when a line may be written at now_ns, false when it is to be
 * suppressed (and is counted). When it returns true after an interval in
 * which lines were suppressed, *ret_suppressed is their count, to be
 * reported before the line (0 otherwise); the interval then starts again. */
bool log_ratelimit_check(struct log_ratelimit *rl, uint64_t now_ns, uint64_t *ret_suppressed);

/* If the interval of rl has ended by now_ns, returns the count of lines it
 * suppressed and closes the interval; returns 0 otherwise. */
uint64_t log_ratelimit_expire(struct log_ratelimit *rl, uint64_t now_ns);

/* Writes a line at level unless rl's budget is spent; the count of what was
 * held back is written when the interval ends (by a timer on loop, which
 * does not keep the loop alive), or before the next line of the kind that
 * is let through, or at exit. Call from the loop's thread only. */
__attribute__((format(printf, 4, 5))) void log_msg_ratelimited(struct log_ratelimit *rl,
                                                               uv_loop_t *loop,
                                                               enum log_level level,
                                                               const char *fmt, ...);

/* A warning with a budget of its own: one per call site. */
#define log_warning_ratelimited(loop, what, ...)                                               \
    do {                                                                                       \
        static struct log_ratelimit rl_ = LOG_RATELIMIT_INIT(what);                            \
        log_msg_ratelimited(&rl_, (loop), LOG_LEVEL_WARNING, __VA_ARGS__);                     \
    } while (0)
