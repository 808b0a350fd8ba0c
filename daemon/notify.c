/* sd_notify from the loop. STATUS= is refreshed every few seconds with the
 * figures an operator looks at first, and soon after anything they would
 * want to see at once (a producer coming or going, an error).
 *
 * The watchdog is fed only while the daemon makes progress: a timer that
 * fired proves the loop turns, but a write path stuck in the kernel would
 * not stop it. So WATCHDOG=1 goes out only when the I/O layer has nothing in
 * flight or has completed something since the last ping; a write or sync
 * that hangs longer than the watchdog period lets systemd act.
 *
 * The messages go out on a socket of their own that never blocks the loop:
 * a supervisor that stops reading its notify socket (its queue holds a few
 * datagrams) would otherwise stop the daemon in sendmsg(), deaf even to
 * SIGTERM. A STATUS, WATCHDOG or EXTEND_TIMEOUT that finds the queue full
 * is dropped (the next one says as much); READY, RELOADING and STOPPING,
 * which a supervisor acts on, wait for room at most NOTIFY_WAIT_MS. */
#include "notify.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
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
#define NOTIFY_WAIT_MS 2000u

/* One datagram to $NOTIFY_SOCKET (a path, or an abstract name written with
 * a leading '@'); nothing without it. must_arrive: wait for room in the
 * supervisor's queue, within NOTIFY_WAIT_MS, instead of dropping it. */
__attribute__((format(printf, 2, 3))) static void notify_send(bool must_arrive,
                                                               const char *fmt, ...)
{
    const char *path = getenv("NOTIFY_SOCKET");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct timeval tv = { .tv_sec = NOTIFY_WAIT_MS / 1000 };
    char msg[1024];
    size_t len;
    va_list ap;
    int fd;

    if (!path || (path[0] != '/' && path[0] != '@') || (len = strlen(path)) >= sizeof(sa.sun_path))
        return;
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | (must_arrive ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0)
        return; /* nothing to tell the supervisor with; the daemon goes on */
    if (must_arrive)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    /* A full queue (EAGAIN), or no supervisor any more: the message is
     * lost, which costs the supervisor a figure, never the daemon a turn. */
    (void)sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (const struct sockaddr *)&sa,
                 (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len));
    (void)close(fd);
}

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
    notify_send(false, "STATUS=%s", status);
}

void notify_ready(struct daemon *d)
{
    char status[512];

    format_status(d, status, sizeof(status));
    notify_send(true, "READY=1\nSTATUS=%s", status);
}

void notify_reloading(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    notify_send(true, "RELOADING=1\nMONOTONIC_USEC=%" PRIu64 "\nSTATUS=Reloading the configuration",
                (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u);
}

void notify_stopping(const char *status)
{
    notify_send(true, "STOPPING=1\nSTATUS=%s", status);
}

void notify_extend_timeout(uint64_t usec)
{
    notify_send(false, "EXTEND_TIMEOUT_USEC=%" PRIu64, usec);
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
        notify_send(false, "WATCHDOG=1");
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
