/* sd_notify from the loop. STATUS= is refreshed every few seconds with the
 * figures an operator looks at first, and soon after anything they would
 * want to see at once (a producer coming or going, an error).
 *
 * The watchdog is fed only while the daemon makes progress: a timer that
 * fired proves the loop turns, but a write path stuck in the kernel would
 * not stop it. So WATCHDOG=1 goes out only when the I/O layer has nothing in
 * flight or has completed something since the last ping; a write or sync
 * that hangs longer than the watchdog period lets systemd act. */
#include "notify.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "io.h"

#define STATUS_PERIOD_MS 5000u
#define STATUS_SOON_MS 100u

static const char *backend_name(const struct daemon *d)
{
    if (!d->io)
        return "no I/O";
    return io_backend_in_use(d->io) == IO_BACKEND_URING ? "io_uring"
                                                        : "thread-pool I/O (no io_uring)";
}

static uint64_t count_shards(const struct daemon *d)
{
    uint64_t n = 0;
    for (const struct list_node *p = d->shards.next; p != &d->shards; p = p->next)
        n++;
    return n;
}

/* One line: what a person wants from `systemctl status`. */
static void format_status(struct daemon *d, char *buf, size_t len)
{
    uint64_t now = now_monotonic_ns();
    uint64_t span = now - d->status_last_ns;
    double secs = span ? (double)span / 1e9 : 1.0;
    double rps = (double)(d->stats.records_received - d->status_last_records) / secs;
    double bps = (double)(d->stats.bytes_received - d->status_last_bytes) / secs;

    d->status_last_ns = now;
    d->status_last_records = d->stats.records_received;
    d->status_last_bytes = d->stats.bytes_received;
    snprintf(buf, len,
             "%" PRIu64 " producers, %" PRIu64 " active shards, %.0f records/s, %.1f KiB/s; "
             "fsync %s, %s%s%s",
             d->stats.sessions_open, count_shards(d), rps, bps / 1024.0,
             config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy),
             backend_name(d), d->last_error[0] ? "; last error: " : "", d->last_error);
}

static void send_status(struct daemon *d)
{
    char status[512];

    format_status(d, status, sizeof(status));
    (void)sd_notifyf(0, "STATUS=%s", status);
}

void notify_ready(struct daemon *d)
{
    char status[512];

    format_status(d, status, sizeof(status));
    (void)sd_notifyf(0, "READY=1\nSTATUS=%s", status);
}

void notify_reloading(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    (void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=Reloading the configuration",
                     (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void notify_stopping(const char *status)
{
    (void)sd_notifyf(0, "STOPPING=1\nSTATUS=%s", status);
}

void notify_extend_timeout(uint64_t usec)
{
    (void)sd_notifyf(0, "EXTEND_TIMEOUT_USEC=%" PRIu64, usec);
}

static void on_status_timer(uv_timer_t *h)
{
    struct daemon *d = h->data;

    send_status(d);
    /* Back to the slow pace after a "soon" update. */
    (void)uv_timer_start(&d->status_timer, on_status_timer, STATUS_PERIOD_MS, STATUS_PERIOD_MS);
}

static void on_watchdog_timer(uv_timer_t *h)
{
    struct daemon *d = h->data;
    uint64_t done = d->io ? io_completions(d->io) : 0;
    bool idle = !d->io || io_pending(d->io) == 0;

    if (idle || done != d->watchdog_last_completions)
        (void)sd_notify(0, "WATCHDOG=1");
    d->watchdog_last_completions = done;
}

int notify_start(struct daemon *d)
{
    uint64_t usec = 0;
    int r;

    d->status_last_ns = now_monotonic_ns();
    (void)uv_timer_init(d->loop, &d->status_timer);
    (void)uv_timer_init(d->loop, &d->watchdog_timer);
    d->status_timer.data = d->watchdog_timer.data = d;
    d->notify_running = true;
    if (!getenv("NOTIFY_SOCKET"))
        return 0;
    (void)uv_timer_start(&d->status_timer, on_status_timer, STATUS_PERIOD_MS, STATUS_PERIOD_MS);
    uv_unref((uv_handle_t *)&d->status_timer);
    r = sd_watchdog_enabled(0, &usec);
    if (r > 0 && usec >= 2000) {
        uint64_t ms = usec / 2000; /* half the period, in milliseconds */
        (void)uv_timer_start(&d->watchdog_timer, on_watchdog_timer, ms, ms);
        uv_unref((uv_handle_t *)&d->watchdog_timer);
    }
    return r < 0 ? r : 0;
}

void notify_changed(struct daemon *d)
{
    if (!d->notify_running || !uv_is_active((uv_handle_t *)&d->status_timer))
        return;
    if (uv_timer_get_due_in(&d->status_timer) > STATUS_SOON_MS)
        (void)uv_timer_start(&d->status_timer, on_status_timer, STATUS_SOON_MS, STATUS_PERIOD_MS);
}

void notify_set_error(struct daemon *d, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(d->last_error, sizeof(d->last_error), fmt, ap);
    va_end(ap);
    notify_changed(d);
}

static void close_if_open(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void notify_stop(struct daemon *d)
{
    if (!d->notify_running)
        return;
    d->notify_running = false;
    close_if_open((uv_handle_t *)&d->status_timer);
    close_if_open((uv_handle_t *)&d->watchdog_timer);
}
