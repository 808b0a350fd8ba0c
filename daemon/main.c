/* logshardd: command line, start-up and shutdown.
 *
 * Start-up order: settings (defaults, then the file, then the command line),
 * spool, recovery of the shards an earlier run left in active/, the I/O
 * backend, the listener, the admin socket and the metrics file, then
 * READY=1. Shutdown on SIGTERM or SIGINT:
 * stop accepting, let every session finish what it accepted, seal every
 * shard, exit 0. A second signal during the drain exits at once; the temp
 * files left behind are found by recovery at the next start. */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdbool.h>
#include <signal.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "admin.h"
#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "io.h"
#include "listener.h"
#include "log.h"
#include "memory.h"
#include "logshard-build.h"
#include "metrics.h"
#include "notify.h"
#include "recovery.h"
#include "session.h"
#include "shard.h"
#include "spool.h"
#include "stats.h"

#define IO_RING_ENTRIES 256u
#define EXIT_USAGE 2

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: logshardd [OPTIONS]\n"
            "\n"
            "Accepts log records from producers on a Unix socket and writes each\n"
            "connection's records to its own shard file in the spool.\n"
            "\n"
            "  -c, --config FILE   read settings from FILE (default %s,\n"
            "                      used only if it exists)\n"
            "  -s, --spool DIR     spool directory (default %s)\n"
            "  -S, --socket PATH   producer socket (default %s)\n"
            "  -A, --admin-socket PATH\n"
            "                      admin socket for logctl status, ls and rotate\n"
            "                      (default %s; mode 0600, root and the daemon's user)\n"
            "  -f, --fsync POLICY  none, interval, batch or always: when a record is\n"
            "                      acknowledged (default batch; see logshard.conf(5))\n"
            "  -h, --help          show this help\n"
            "  -V, --version       show the version\n"
            "\n"
            "Command-line options win over the file, the file over built-in defaults.\n",
            LOGSHARD_DEFAULT_CONFIG, CONFIG_DEFAULT_SPOOL, CONFIG_DEFAULT_SOCKET,
            CONFIG_DEFAULT_ADMIN_SOCKET);
}

static int parse_cmdline(int argc, char **argv, struct daemon_args *c)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "spool", required_argument, NULL, 's' },
        { "socket", required_argument, NULL, 'S' },
        { "admin-socket", required_argument, NULL, 'A' },
        { "fsync", required_argument, NULL, 'f' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int opt;

    while ((opt = getopt_long(argc, argv, "c:s:S:A:f:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'c': c->config = optarg; break;
        case 's': c->spool = optarg; break;
        case 'S': c->socket = optarg; break;
        case 'A': c->admin_socket = optarg; break;
        case 'f': c->fsync = optarg; break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("logshardd %s\n", LOGSHARD_VERSION); return 0;
        default: usage(stderr); return -EINVAL;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "logshardd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return -EINVAL;
    }
    return 1;
}

/* Builds the settings from scratch: defaults, the file, the command line.
 * On failure err says what is wrong, naming the file and line or the
 * option; cfg is then freed. */
static int load_settings(struct config *cfg, const struct daemon_args *a, char *err,
                         size_t err_len)
{
    const char *path = a->config ? a->config : LOGSHARD_DEFAULT_CONFIG;
    bool use_file = a->config || access(path, F_OK) == 0;
    const struct {
        const char *value, *section, *key, *option;
    } overrides[] = {
        { a->spool, "daemon", "spool", "--spool" },
        { a->socket, "daemon", "socket", "--socket" },
        { a->admin_socket, "daemon", "admin_socket", "--admin-socket" },
        { a->fsync, "sync", "fsync", "--fsync" },
    };
    char why[768];
    int r;

    r = config_init(cfg);
    if (r < 0) {
        snprintf(err, err_len, "out of memory");
        return r;
    }
    if (use_file) {
        r = config_load(cfg, path, err, err_len);
        if (r < 0)
            goto fail;
    }
    for (size_t i = 0; i < sizeof(overrides) / sizeof(overrides[0]); i++) {
        if (!overrides[i].value)
            continue;
        r = config_set(cfg, overrides[i].section, overrides[i].key, overrides[i].value, why,
                       sizeof(why));
        if (r < 0) {
            snprintf(err, err_len, "%s: %s", overrides[i].option, why);
            goto fail;
        }
    }
    /* The message names the file and lines of the keys involved itself. */
    r = config_check(cfg, err, err_len);
    if (r < 0)
        goto fail;
    return 0;

fail:
    config_free(cfg);
    return r;
}

/* ---- shutdown ---- */

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    close_handle(h);
}

void daemon_maybe_finish(struct daemon *d)
{
    if (!d->draining || d->stopped || d->listener || d->admin || !list_empty(&d->sessions) ||
        !list_empty(&d->shards))
        return;
    d->stats.syncs = io_syncs_done(d->io);
    if (io_close(d->io, NULL, NULL) < 0)
        return; /* a completion is still due; it calls back here */
    d->stopped = true;
    d->io = NULL;
    close_handle((uv_handle_t *)&d->sigterm);
    close_handle((uv_handle_t *)&d->sigint);
    close_handle((uv_handle_t *)&d->sighup);
    close_handle((uv_handle_t *)&d->age_timer);
    close_handle((uv_handle_t *)&d->sync_timer);
    notify_stop(d);
    stats_stop(d);
    metrics_stop(d);
    log_info("all shards sealed (%" PRIu64 " records in %" PRIu64 " shards, %" PRIu64
             " syncs this run); exiting",
             d->stats.records_received, d->stats.shards_sealed, d->stats.syncs);
}

static void on_listener_stopped(void *data)
{
    struct daemon *d = data;

    d->listener = NULL;
    daemon_maybe_finish(d);
}

static void on_admin_stopped(void *data)
{
    struct daemon *d = data;

    d->admin = NULL;
    daemon_maybe_finish(d);
}

void daemon_begin_drain(struct daemon *d, const char *why)
{
    if (d->draining)
        return;
    d->draining = true;
    notify_stopping("Draining: finishing every session and sealing every shard");
    log_info("%s: no new connections; finishing %s sessions and sealing their shards", why,
             list_empty(&d->sessions) ? "no" : "all");
    if (d->listener)
        listener_stop(d->listener, on_listener_stopped, d);
    if (d->admin)
        admin_stop(d->admin, on_admin_stopped, d);
    session_drain_all(d);
    daemon_maybe_finish(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;

    if (d->draining) {
        log_warning("%s during the drain: exiting now; unsealed shards stay in %s/active for "
                    "recovery",
                    strsignal(signum), d->config.spool);
        _exit(1);
    }
    daemon_begin_drain(d, strsignal(signum));
}

static void on_age_timer(uv_timer_t *h)
{
    session_sweep(h->data);
}

/* Checks often enough that a shard is sealed, and a stalled client dropped,
 * within a second (or a quarter of the limit) of its limit. */
static uint64_t age_check_interval_ms(const struct config *c)
{
    uint64_t ms = 1000;
    uint64_t limits[] = { c->max_shard_age_ms, c->hello_timeout_ms, c->idle_timeout_ms };

    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++)
        if (limits[i] / 4 < ms)
            ms = limits[i] / 4 ? limits[i] / 4 : 1;
    return ms;
}

/* LOGSHARD_IO_BACKEND in the environment overrides the config file, so a
 * whole test suite can run on the fallback path without editing configs. */
static enum io_backend io_backend_wanted(const struct config *c)
{
    const char *env = getenv("LOGSHARD_IO_BACKEND");

    if (env && strcmp(env, "threads") == 0)
        return IO_BACKEND_THREADS;
    if (env && strcmp(env, "uring") == 0)
        return IO_BACKEND_URING;
    return (enum io_backend)c->io_backend;
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

/* SIGHUP: read the settings again. What can change while running changes
 * for new connections and new shards (fsync policy and interval, limits,
 * shard size and age); what cannot (paths, socket mode, I/O backend) keeps
 * its running value and the log says so. A file with an error changes
 * nothing. */
static void reload(struct daemon *d)
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
        { "[daemon] socket_group", offsetof(struct config, socket_group), true },
    };
    struct config fresh;
    char err[1024];

    notify_reloading();
    if (load_settings(&fresh, &d->args, err, sizeof(err)) < 0) {
        log_error("reload refused, the running settings stay: %s", err);
        notify_set_error(d, "reload refused: %s", err);
        notify_ready(d);
        return;
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
        void *old_p = (char *)&d->config + fixed[i].offset;
        void *new_p = (char *)&fresh + fixed[i].offset;
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
                config_free(&fresh);
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
    d->config = fresh;
    arm_sync_timer(d);
    metrics_reconfigure(d);
    (void)uv_timer_start(&d->age_timer, on_age_timer, age_check_interval_ms(&d->config),
                         age_check_interval_ms(&d->config));
    d->last_error[0] = '\0';
    log_info("reloaded the settings: fsync %s for new connections, max_shard_bytes %" PRIu64
             ", max_shard_age %" PRIu64 " ms",
             config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy),
             d->config.max_shard_bytes, d->config.max_shard_age_ms);
    notify_ready(d);
}

static void on_sighup(uv_signal_t *h, int signum)
{
    (void)signum;
    if (!((struct daemon *)h->data)->draining)
        reload(h->data);
}

static void on_recovery_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    /* Each file's scan takes well under this; a big spool keeps asking. */
    if (total > 0 && done % 16 == 0)
        notify_extend_timeout(30u * 1000000u);
}

/* Recovery never logs itself; its lines come here. */
__attribute__((format(printf, 3, 4))) static void recovery_report(void *ctx, int level,
                                                                  const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    (void)ctx;
    va_start(ap, fmt);
    (void)vsnprintf(line, sizeof(line), fmt, ap); /* a longer line is cut, not lost */
    va_end(ap);
    log_msg((enum log_level)level, "%s", line);
}

static const struct recovery_ops recovery_ops = {
    .report = recovery_report,
    .progress = on_recovery_progress,
};

static int run(struct daemon *d)
{
    const char *io_why = NULL;
    char why[1024];
    int r;

    r = spool_open(d, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        return 1;
    }
    r = recovery_run(d->spool_fd, d->active_fd, d->done_fd, &recovery_ops, NULL);
    if (r < 0) {
        log_error("recovery of %s/active did not finish: %s; not starting", d->config.spool,
                  strerror(-r));
        return 1;
    }

    r = io_new(d->loop, io_backend_wanted(&d->config), IO_RING_ENTRIES, &d->io, &io_why);
    if (r < 0) {
        log_error("cannot set up file I/O (io_backend = %s): %s: %s",
                  config_io_backend_name((enum io_backend)d->config.io_backend),
                  io_why ? io_why : "error", strerror(-r));
        return 1;
    }
    if (io_backend_in_use(d->io) == IO_BACKEND_THREADS && io_why)
        log_warning("io_uring unavailable (%s); writing through the thread pool instead",
                    io_why);
    io_set_before_submit(d->io, shard_write_dirty, d);

    r = listener_start(d, &d->listener, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        d->listener = NULL;
        (void)io_close(d->io, NULL, NULL); /* nothing was queued yet */
        d->io = NULL;
        return 1;
    }

    (void)uv_signal_init(d->loop, &d->sigterm);
    (void)uv_signal_init(d->loop, &d->sigint);
    (void)uv_signal_init(d->loop, &d->sighup);
    d->sigterm.data = d->sigint.data = d->sighup.data = d;
    (void)uv_signal_start(&d->sigterm, on_signal, SIGTERM);
    (void)uv_signal_start(&d->sigint, on_signal, SIGINT);
    (void)uv_signal_start(&d->sighup, on_sighup, SIGHUP);
    uv_unref((uv_handle_t *)&d->sighup);
    (void)uv_timer_init(d->loop, &d->age_timer);
    d->age_timer.data = d;
    (void)uv_timer_start(&d->age_timer, on_age_timer, age_check_interval_ms(&d->config),
                         age_check_interval_ms(&d->config));
    uv_unref((uv_handle_t *)&d->age_timer);
    (void)uv_timer_init(d->loop, &d->sync_timer);
    d->sync_timer.data = d;
    arm_sync_timer(d);

    stats_start(d);
    /* Without the admin socket the daemon still does its main job; an
     * operator loses logctl status, ls and rotate, and is told so. */
    r = admin_start(d, &d->admin, why, sizeof(why));
    if (r < 0) {
        d->admin = NULL;
        log_error("%s; logctl status, ls and rotate will not reach this daemon", why);
        notify_set_error(d, "%s", why);
    }
    if (metrics_start(d) < 0)
        log_error("metrics file %s: out of memory; no metrics are written",
                  d->config.metrics_file ? d->config.metrics_file : "(none)");

    log_info("listening on %s%s, admin socket %s, spool %s, fsync %s, %s",
             listener_path(d->listener),
             listener_activated(d->listener) ? " (socket from systemd)" : "",
             d->admin ? admin_path(d->admin) : "none", d->config.spool,
             config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy),
             io_backend_in_use(d->io) == IO_BACKEND_URING ? "io_uring" : "thread-pool I/O");
    r = notify_start(d);
    if (r < 0)
        log_warning("cannot read WATCHDOG_USEC: %s; no watchdog pings", strerror(-r));
    notify_ready(d);

    uv_run(d->loop, UV_RUN_DEFAULT);
    return d->exit_code;
}

int main(int argc, char **argv)
{
    struct daemon d;
    char err[1024];
    uv_loop_t loop;
    int r;

    /* A peer that goes away while the daemon writes to it (a producer killed
     * before its ACK, an admin client that closes without reading the reply)
     * must cost only that connection. libuv writes to a stream with
     * write(2)/writev(2), which raise SIGPIPE on a socket whose peer has
     * gone, and so does a log line written to a stderr pipe whose reader
     * left; SIGPIPE's default action ends the process. Ignored process-wide,
     * before any socket or thread exists, every such write fails with EPIPE
     * instead, which the connection's own code handles. Nothing can be left
     * to the starter: a shell, runit, s6 or a container's init passes on the
     * default action, and only systemd ignores SIGPIPE for us. */
    (void)signal(SIGPIPE, SIG_IGN);
    log_setup();
    /* Past RLIMIT_FSIZE a write must fail with EFBIG, which the shard
     * reports to its producer, not kill the daemon. */
    (void)signal(SIGXFSZ, SIG_IGN);
    memset(&d, 0, sizeof(d));
    r = parse_cmdline(argc, argv, &d.args);
    if (r <= 0)
        return r == 0 ? 0 : EXIT_USAGE;

    d.spool_fd = d.active_fd = d.done_fd = -1;
    d.start_mono_ns = now_monotonic_ns();
    d.start_real_ns = now_realtime_ns();
    list_init(&d.sessions);
    list_init(&d.paused_sessions);
    list_init(&d.shards);
    list_init(&d.dirty_shards);
    if (load_settings(&d.config, &d.args, err, sizeof(err)) < 0) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    r = uv_loop_init(&loop);
    if (r < 0) {
        log_error("cannot create the event loop: %s", uv_strerror(r));
        config_free(&d.config);
        return 1;
    }
    d.loop = &loop;
    d.rx_scratch = malloc(64u * 1024u);
    if (!d.rx_scratch) {
        log_error("out of memory");
        config_free(&d.config);
        return 1;
    }

    r = run(&d);

    /* Close whatever start-up left open so the loop can be freed. */
    uv_walk(&loop, walk_close, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    (void)uv_loop_close(&loop);
    spool_close(&d);
    memory_pool_drain(&d);
    config_free(&d.config);
    free(d.rx_scratch);
    return r;
}
