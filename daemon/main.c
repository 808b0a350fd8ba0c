/* logshardd: command line, settings, start-up order and signals.
 *
 * Start-up order: settings (defaults, then the file, then the command line),
 * spool, recovery of the shards an earlier run left in active/, the I/O
 * backend, the listener, the syslog datagram socket when configured, the signals and the lifecycle's periodic work, the
 * admin socket and the metrics file, then READY=1. SIGHUP reads the
 * settings again and lifecycle.c puts them in force; SIGTERM or SIGINT
 * starts lifecycle.c's drain: stop accepting, let every session finish what
 * it accepted, seal every shard, exit 0. A second signal during the drain
 * exits at once; the temp files left behind are found by recovery at the
 * next start. */
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdbool.h>
#include <signal.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "admin.h"
#include "budget.h"
#include "config.h"
#include "daemon.h"
#include "fd-limit.h"
#include "fileutil.h"
#include "io.h"
#include "lifecycle.h"
#include "listener.h"
#include "log.h"
#include "memory.h"
#include "logshard-build.h"
#include "metrics.h"
#include "notify.h"
#include "read-turns.h"
#include "recovery.h"
#include "seal-index.h"
#include "session.h"
#include "shard.h"
#include "spool.h"
#include "stats.h"
#include "streams-scan.h"
#include "syslog-datagram.h"
#include "syslog-producers.h"
#include "syslog-stream.h"

#define IO_RING_ENTRIES 256u
#define EXIT_USAGE 2
/* Long options without a short one. */
#define OPT_SYSLOG_SOCKET 0x100
#define OPT_SYSLOG_STREAM_SOCKET 0x101

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
            "      --syslog-socket PATH\n"
            "                      receive syslog datagrams (/dev/log-style) on PATH\n"
            "                      ([syslog] datagram_socket; \"\" turns it off)\n"
            "      --syslog-stream-socket PATH\n"
            "                      receive syslog messages over Unix stream connections\n"
            "                      on PATH ([syslog] stream_socket; \"\" turns it off)\n"
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
        { "syslog-socket", required_argument, NULL, OPT_SYSLOG_SOCKET },
        { "syslog-stream-socket", required_argument, NULL, OPT_SYSLOG_STREAM_SOCKET },
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
        case OPT_SYSLOG_SOCKET: c->syslog_socket = optarg; break;
        case OPT_SYSLOG_STREAM_SOCKET: c->syslog_stream_socket = optarg; break;
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
        { a->syslog_socket, "syslog", "datagram_socket", "--syslog-socket" },
        { a->syslog_stream_socket, "syslog", "stream_socket", "--syslog-stream-socket" },
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

/* ---- signals ---- */

static void on_signal(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;

    if (!lifecycle_running(d)) {
        log_warning("%s during the drain: exiting now; unsealed shards stay in %s/active for "
                    "recovery",
                    strsignal(signum), d->config.spool);
        _exit(1);
    }
    lifecycle_begin_drain(d, strsignal(signum));
}

/* SIGHUP: read the settings again; lifecycle_reload() puts them in force.
 * A file with an error changes nothing. */
static void on_sighup(uv_signal_t *h, int signum)
{
    struct daemon *d = h->data;
    struct config fresh;
    char err[1024];

    (void)signum;
    if (!lifecycle_running(d))
        return;
    notify_reloading();
    if (load_settings(&fresh, &d->args, err, sizeof(err)) < 0) {
        log_error("reload refused, the running settings stay: %s", err);
        notify_set_error(d, "reload refused: %s", err);
        notify_ready(d);
        return;
    }
    lifecycle_reload(d, &fresh);
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

/* Each loop tick ends here, before the I/O is handed over: the connections
 * that waited for their turn are read, then every shard with records
 * waiting queues its write. */
static void before_submit(void *data)
{
    read_turns_take(data);
    shard_write_dirty(data);
    group_sync_submit(data);
}

static int run(struct daemon *d)
{
    const char *io_why = NULL, *batch_sync_why = "";
    char why[1024];
    int n_fds, r;

    r = spool_open(d, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        return 1;
    }
    d->batch_sync = spool_batch_sync(d, &batch_sync_why);
    group_sync_init(d);
    r = recovery_run(d->spool_fd, d->active_fd, d->done_fd, &recovery_ops, NULL);
    if (r < 0) {
        log_error("recovery of %s/active did not finish: %s; not starting", d->config.spool,
                  strerror(-r));
        return 1;
    }

    {
        struct streams_scan_stats ss;
        uint64_t t0 = now_monotonic_ns();

        r = streams_scan(d, &ss, why, sizeof(why));
        if (r < 0) {
            log_error("%s; not starting, as streams could resume at the wrong position", why);
            return 1;
        }
        if (ss.unreadable > 0)
            log_warning("%" PRIu64 " shards of done/ could not be read for their stream "
                        "positions (first: %s); a producer resuming one of their streams "
                        "may write records twice",
                        ss.unreadable, ss.first_unreadable);
        log_info("streams: %" PRIu64 " known from %" PRIu64 " sealed shards (%" PRIu64
                 " read through) and %" PRIu64 " positions files in %.3f s; resume window %"
                 PRIu64 " s",
                 ss.streams, ss.shards, ss.read_through, ss.positions_files,
                 (double)(now_monotonic_ns() - t0) / 1e9, d->config.resume_window_ms / 1000);
    }

    r = budget_start(d, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
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
    io_set_before_submit(d->io, before_submit, d);
    read_turns_init(d);
    session_init(d);

    /* Asked once, and the environment cleared: each input takes its own
     * from what systemd passed. */
    n_fds = sd_listen_fds(1);
    if (n_fds < 0) {
        log_error("cannot read the sockets systemd passed: %s", strerror(-n_fds));
        n_fds = 0;
    }
    r = passed_sockets_sort(n_fds, d->config.syslog_stream_socket,
                            d->config.syslog_datagram_socket, &d->passed, why, sizeof(why));
    if (r == 0)
        r = listener_start(d, &d->listener, why, sizeof(why));
    if (r < 0) {
        log_error("%s", why);
        d->listener = NULL;
        (void)io_close(d->io, NULL, NULL); /* nothing was queued yet */
        d->io = NULL;
        return 1;
    }

    /* The stream socket first: until the loop runs it has accepted
     * nothing, so stopping it when the datagram socket fails loses
     * nothing. */
    r = syslog_producers_new(d, &d->syslog_producers);
    if (r < 0)
        snprintf(why, sizeof(why), "out of memory");
    if (r == 0 && d->config.syslog_stream_socket)
        r = syslog_stream_start(d, &d->syslog_stream, why, sizeof(why));
    if (r == 0 && (d->config.syslog_datagram_socket || d->passed.syslog_datagram >= 0))
        r = syslog_dgram_start(d, &d->syslog_dgram, why, sizeof(why));
    if (r < 0) {
        /* Nothing was accepted yet: the sockets' files go, and the loop's
         * last run in main() closes their handles. */
        log_error("%s", why);
        listener_stop(d->listener, NULL, NULL);
        d->listener = NULL;
        if (d->syslog_stream) {
            syslog_stream_stop(d->syslog_stream, NULL, NULL);
            d->syslog_stream = NULL;
        }
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
    lifecycle_start(d);
    if (seal_index_start(d) < 0)
        log_error("%s/done.index: out of memory; it is not kept", d->config.spool);

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

    log_info("listening on %s%s, admin socket %s, spool %s, fsync %s (batch syncs with %s, %s), "
             "%s",
             listener_path(d->listener),
             listener_activated(d->listener) ? " (socket from systemd)" : "",
             d->admin ? admin_path(d->admin) : "none", d->config.spool,
             config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy),
             config_sync_method_name(d->batch_sync), batch_sync_why,
             io_backend_in_use(d->io) == IO_BACKEND_URING ? "io_uring" : "thread-pool I/O");
    r = notify_start(d);
    if (r < 0)
        log_warning("cannot read WATCHDOG_USEC: %s; no watchdog pings", strerror(-r));
    if (d->syslog_dgram)
        log_info("syslog datagrams on %s%s", syslog_dgram_path(d->syslog_dgram),
                 syslog_dgram_activated(d->syslog_dgram) ? " (socket from systemd)" : "");
    if (d->syslog_stream)
        log_info("syslog stream connections on %s%s", syslog_stream_path(d->syslog_stream),
                 syslog_stream_activated(d->syslog_stream) ? " (socket from systemd)" : "");
    /* Last before READY=1: what is there to fail has been tried, and a
     * producer that connects meanwhile waits in the listen queue. Failing
     * costs only the pages' faults later. */
    (void)memory_prepare(d);
    notify_ready(d);

    uv_run(d->loop, UV_RUN_DEFAULT);
    return d->exit_code;
}

/* Whatever start-up left open is closed so that the loop can be freed. */
static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
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
    list_init(&d.resuming_sessions);
    list_init(&d.paused_sessions);
    list_init(&d.shards);
    list_init(&d.shard_subscribers);
    list_init(&d.sessions_on_shards.node);
    list_init(&d.lifecycle_on_shards.node);
    list_init(&d.dirty_shards);
    list_init(&d.shards_to_create);
    if (load_settings(&d.config, &d.args, err, sizeof(err)) < 0) {
        log_error("%s", err);
        return EXIT_USAGE;
    }
    fd_limit_start(&d.config);
    r = uv_loop_init(&loop);
    if (r < 0) {
        log_error("cannot create the event loop: %s", uv_strerror(r));
        config_free(&d.config);
        return 1;
    }
    d.loop = &loop;
    d.rx_scratch = malloc(64u * 1024u);
    if (!d.rx_scratch || streams_init(&d) < 0) {
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
    streams_free(&d);
    syslog_producers_free(&d);
    budget_free(&d);
    config_free(&d.config);
    free(d.rx_scratch);
    return r;
}
