/* Talking to systemd (sd_notify): readiness, live status, the watchdog,
 * reloads and stops. Every call is a no-op when NOTIFY_SOCKET is unset. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct daemon;

/* READY=1 with a STATUS line describing the daemon. */
void notify_ready(struct daemon *d);

/* RELOADING=1 with MONOTONIC_USEC=, as systemd's reload protocol wants. */
void notify_reloading(void);

/* STOPPING=1 with a STATUS line. */
void notify_stopping(const char *status);

/* EXTEND_TIMEOUT_USEC= so a long start-up (recovery of a big spool) is not
 * taken for a hang. */
void notify_extend_timeout(uint64_t usec);

/* Starts the periodic STATUS= updates (every few seconds, and soon after
 * notify_changed) and, when WATCHDOG_USEC is set for this process, WATCHDOG=1
 * at half that period, sent only while the daemon makes progress. */
int notify_start(struct daemon *d);

/* Something operators watch changed (a producer came or went, an error):
 * send a fresh STATUS= soon. */
void notify_changed(struct daemon *d);

/* Remembers the last error for STATUS=. */
void notify_set_error(struct daemon *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Stops the timers (at the end of the drain). */
void notify_stop(struct daemon *d);
