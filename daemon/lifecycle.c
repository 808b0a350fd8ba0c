/* The daemon's lifecycle: running, draining, stopped, never back.
 *
 * While running, two unreferenced timers pace the periodic work: the sweep
 * of sessions and shards (hello and idle timeouts, max_shard_age), and
 * under fsync = interval the interval syncs. A reload (SIGHUP, read by
 * main.c) re-arms both, since their periods come from the settings.
 *
 * The drain (SIGTERM or SIGINT): stop accepting on the producer, admin and
 * syslog stream sockets, read what waits on the syslog datagram socket and
 * on each syslog stream connection and close them, let every session
 * finish what it accepted, seal every shard (the syslog producers' and
 * connections' too), then close the loop's last handles so that uv_run
 * returns. The drain is over when the listener, the admin socket and the
 * syslog sockets have stopped, the last session has closed and the last
 * shard has been sealed; each of those calls lifecycle_maybe_finish(), the
 * shards through their sealed event. */
#include "lifecycle.h"

#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "budget.h"
#include "config.h"
#include "daemon.h"
#include "fd-limit.h"
#include "io.h"
#include "listener.h"
#include "log.h"
#include "metrics.h"
#include "notify.h"
#include "seal-index.h"
#include "session.h"
#include "streams.h"
#include "shard.h"
#include "syslog-datagram.h"
#include "syslog-producers.h"
#include "syslog-stream.h"
#include "stats.h"

/* Only forward, one step at a time: running, draining, stopped. */
static void set_lifecycle(struct daemon *d, enum lifecycle_state next)
{
    switch (d->lifecycle) {
    case LIFECYCLE_RUNNING:
        assert(next == LIFECYCLE_DRAINING);
        break;
    case LIFECYCLE_DRAINING:
        assert(next == LIFECYCLE_STOPPED);
        break;
    case LIFECYCLE_STOPPED:
        assert(!"a stopped daemon changes its lifecycle state");
        break;
    }
    d->lifecycle = next;
}

bool lifecycle_running(const struct daemon *d)
{
    return d->lifecycle == LIFECYCLE_RUNNING;
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* ---- periodic work ---- */

static void on_age_timer(uv_timer_t *h)
{
    session_sweep(h->data);
    syslog_producers_sweep(h->data);
    syslog_stream_sweep(((struct daemon *)h->data)->syslog_stream);
    streams_expire(h->data);
}

/* Checks often enough that a shard is sealed, and a stalled client dropped,
 * within a second (or a quarter of the limit) of its limit. */
static uint64_t age_check_interval_ms(const struct config *c)
{
    uint64_t ms = 1000;
    uint64_t limits[] = { c->max_shard_age_ms, c->hello_timeout_ms, c->idle_timeout_ms,
                          c->syslog_idle_ms };

    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
        if (limits[i] / 4 < ms)
            ms = limits[i] / 4 ? limits[i] / 4 : 1;
    return ms;
}

static void arm_age_timer(struct daemon *d)
{
    uint64_t ms = age_check_interval_ms(&d->config);

    (void)uv_timer_start(&d->age_timer, on_age_timer, ms, ms);
}

static void on_sync_timer(uv_timer_t *h)
{
    shard_sync_due(h->data);
}

/* The interval syncs run only under fsync = interval. Checking every half
 * interval for data that waited half an interval keeps every wait under the
 * full interval. */
static void arm_sync_timer(struct daemon *d)
{
    if (d->config.fsync_policy == FSYNC_INTERVAL) {
        uint64_t period = d->config.fsync_interval_ms / 2 ? d->config.fsync_interval_ms / 2 : 1;
        (void)uv_timer_start(&d->sync_timer, on_sync_timer, period, period);
        uv_unref((uv_handle_t *)&d->sync_timer);
    } else {
        (void)uv_timer_stop(&d->sync_timer);
    }
}

static void on_shard_sealed(void *data, const struct shard *s, int err)
{
    (void)s;
    (void)err;
    lifecycle_maybe_finish(data);
}

static const struct shard_events lifecycle_shard_events = {
    .sealed = on_shard_sealed,
};

void lifecycle_start(struct daemon *d)
{
    assert(d->lifecycle == LIFECYCLE_RUNNING);
    shard_subscribe(d, &d->lifecycle_on_shards, &lifecycle_shard_events, d);
    (void)uv_timer_init(d->loop, &d->age_timer);
    d->age_timer.data = d;
    arm_age_timer(d);
    uv_unref((uv_handle_t *)&d->age_timer);
    (void)uv_timer_init(d->loop, &d->sync_timer);
    d->sync_timer.data = d;
    arm_sync_timer(d);
}

/* ---- reload ---- */

void lifecycle_reload(struct daemon *d, struct config *fresh)
{
    static const struct {
        const char *name;
        size_t offset;
        bool is_path;
    } fixed[] = {
        { "[daemon] spool", offsetof(struct config, spool), true },
        { "[daemon] socket", offsetof(struct config, socket_path), true },
        { "[daemon] admin_socket", offsetof(struct config, admin_socket), true },
        { "[daemon] socket_mode", offsetof(struct config, socket_mode), false },
        { "[daemon] io_backend", offsetof(struct config, io_backend), false },
        { "[sync] sync_method", offsetof(struct config, sync_method), false },
        { "[daemon] socket_group", offsetof(struct config, socket_group), true },
        /* The socket stays as it is: senders hold its path, and a queue
         * of datagrams waits in it. */
        { "[syslog] datagram_socket", offsetof(struct config, syslog_datagram_socket), true },
        { "[syslog] stream_socket", offsetof(struct config, syslog_stream_socket), true },
    };

    assert(d->lifecycle == LIFECYCLE_RUNNING);
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        void *old_p = (char *)&d->config + fixed[i].offset;
        void *new_p = (char *)fresh + fixed[i].offset;
        const char *old_s = fixed[i].is_path ? *(char **)old_p : NULL;
        const char *new_s = fixed[i].is_path ? *(char **)new_p : NULL;
        bool differs = fixed[i].is_path
                           ? (!old_s != !new_s) || (old_s && strcmp(old_s, new_s) != 0)
                           : *(uint64_t *)old_p != *(uint64_t *)new_p;

        if (!differs)
            continue;
        log_warning("reload: %s cannot change while running; it keeps its value until the "
                    "next start",
                    fixed[i].name);
        if (fixed[i].is_path) {
            char *keep = old_s ? strdup(old_s) : NULL;
            if (old_s && !keep) {
                log_error("reload refused, the running settings stay: out of memory");
                config_free(fresh);
                notify_ready(d);
                return;
            }
            free(*(char **)new_p);
            *(char **)new_p = keep;
        } else {
            *(uint64_t *)new_p = *(uint64_t *)old_p;
        }
    }
    config_free(&d->config);
    d->config = *fresh;
    arm_sync_timer(d);
    metrics_reconfigure(d);
    budget_reload(d);
    arm_age_timer(d);
    fd_limit_check(&d->config);
    d->last_error[0] = '\0';
    log_info("reloaded the settings: fsync %s for new connections, max_shard_bytes %" PRIu64
             ", max_shard_age %" PRIu64 " ms",
             config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy),
             d->config.max_shard_bytes, d->config.max_shard_age_ms);
    notify_ready(d);
}

/* ---- drain and finish ---- */

void lifecycle_maybe_finish(struct daemon *d)
{
    if (d->lifecycle != LIFECYCLE_DRAINING || d->listener || d->admin || d->syslog_dgram ||
        d->syslog_stream ||
        !list_empty(&d->sessions) || !list_empty(&d->shards))
        return;
    d->stats.syncs = io_syncs_done(d->io);
    if (io_close(d->io, NULL, NULL) < 0)
        return; /* a completion is still due; it calls back here */
    set_lifecycle(d, LIFECYCLE_STOPPED);
    d->io = NULL;
    shard_unsubscribe(&d->lifecycle_on_shards);
    close_handle((uv_handle_t *)&d->sigterm);
    close_handle((uv_handle_t *)&d->sigint);
    close_handle((uv_handle_t *)&d->sighup);
    close_handle((uv_handle_t *)&d->age_timer);
    close_handle((uv_handle_t *)&d->sync_timer);
    notify_stop(d);
    stats_stop(d);
    metrics_stop(d);
    seal_index_stop(d);
    budget_stop(d);
    log_info("all shards sealed (%" PRIu64 " records in %" PRIu64 " shards, %" PRIu64
             " syncs this run); exiting",
             d->stats.records_received, d->stats.shards_sealed, d->stats.syncs);
}

static void on_listener_stopped(void *data)
{
    struct daemon *d = data;

    d->listener = NULL;
    lifecycle_maybe_finish(d);
}

static void on_syslog_dgram_stopped(void *data)
{
    struct daemon *d = data;

    d->syslog_dgram = NULL;
    lifecycle_maybe_finish(d);
}

static void on_syslog_stream_stopped(void *data)
{
    struct daemon *d = data;

    d->syslog_stream = NULL;
    lifecycle_maybe_finish(d);
}

static void on_admin_stopped(void *data)
{
    struct daemon *d = data;

    d->admin = NULL;
    lifecycle_maybe_finish(d);
}

void lifecycle_begin_drain(struct daemon *d, const char *why)
{
    switch (d->lifecycle) {
    case LIFECYCLE_RUNNING:
        break;
    case LIFECYCLE_DRAINING:
    case LIFECYCLE_STOPPED:
        return; /* asked again: the drain is under way or over */
    }
    set_lifecycle(d, LIFECYCLE_DRAINING);
    notify_stopping("Draining: finishing every session and sealing every shard");
    log_info("%s: no new connections; finishing %s sessions and sealing their shards", why,
             list_empty(&d->sessions) ? "no" : "all");
    if (d->listener)
        listener_stop(d->listener, on_listener_stopped, d);
    if (d->admin)
        admin_stop(d->admin, on_admin_stopped, d);
    /* The datagrams already queued are read before the socket closes, so
     * the syslog shards are sealed after them. */
    if (d->syslog_dgram)
        syslog_dgram_stop(d->syslog_dgram, on_syslog_dgram_stopped, d);
    /* Each stream connection's shard is sealed after what its peer wrote
     * before the drain. */
    if (d->syslog_stream)
        syslog_stream_stop(d->syslog_stream, on_syslog_stream_stopped, d);
    session_drain_all(d);
    syslog_producers_seal_all(d);
    lifecycle_maybe_finish(d);
}
