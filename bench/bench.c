/* logshard-bench: how fast logshardd acknowledges records, and what it costs.
 *
 * A run: a fresh temp directory (under /var/tmp by default, since /tmp is
 * often tmpfs, where fdatasync costs nothing), logshardd started in it with
 * an empty config and the fsync policy under test, READY=1 awaited on our
 * own NOTIFY_SOCKET; P producer processes drive it through the real
 * liblogshard; then the daemon's CPU and peak RSS are read from /proc, it
 * gets SIGTERM, and its exit line gives the number of syncs it did. Last,
 * with the daemon gone so it does not compete, the machine's own fdatasync
 * cost is measured in the same spool directory, as the yardstick for the
 * ack latencies. In merge mode the sealed shards of the run are merged
 * three ways instead (bench-merge.c).
 *
 * With several policies or --repeat, runs are interleaved (every policy
 * once, then again), so a drift of the machine during the bench spreads
 * over all policies instead of favouring the first.
 *
 * Every wait has a deadline; the bench kills what it started and removes
 * its temp directory on every path out, ^C included (bench-proc.c).
 * Exit status: 0 success, 1 a run failed (a producer's error is printed),
 * 2 usage. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "fileutil.h"
#include "logshard-build.h"

#define READY_WAIT_NS (30 * 1000000000ull)
#define STOP_WAIT_NS (120 * 1000000000ull)
#define FDATASYNC_ITERATIONS 200u
#define MIB (1024.0 * 1024.0)

static const char *const all_policies[] = { "none", "interval", "batch", "always" };
#define N_POLICIES (sizeof(all_policies) / sizeof(all_policies[0]))

/* The command line. */
struct cmdline {
    const char *daemon;
    const char *socket;
    const char *logctl;
    const char *spool_base;
    unsigned producers;
    uint64_t records;
    size_t size;
    uint64_t flush_every;
    size_t buffer_bytes;
    const char *policies[N_POLICIES];
    size_t n_policies;
    bool fsync_given;
    unsigned repeat;
    unsigned timeout_s;
    bool json;
    bool keep;
    bool merge;
    uint64_t shards;      /* merge mode: lay out this many shards, no daemon */
    uint64_t shard_bytes;
    uint64_t span_s;      /* with shards: the records' times cover this many seconds */
    bool layout_only;     /* --mode layout: lay the shards out, keep them, time nothing */
    const char *daemon_config; /* --daemon-config: the daemon's --config */
    bool shared_session;  /* --shared-session: the daemon in the bench's session */
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: logshard-bench [OPTIONS]\n"
            "\n"
            "Drives logshardd with producer processes using liblogshard and reports\n"
            "throughput, acknowledgement latency, the daemon's CPU, memory and syncs,\n"
            "and this machine's own fdatasync cost for comparison.\n"
            "\n"
            "  --daemon PATH       logshardd to start for each run (default: $LOGSHARDD,\n"
            "                      else the one built or installed next to this program,\n"
            "                      else logshardd in $PATH)\n"
            "  --daemon-config F   the configuration file the daemon starts with (default:\n"
            "                      none, every key at its default), e.g. one that sets\n"
            "                      [sync] sync_method\n"
            "  --shared-session    start the daemon in the bench's own session, with its\n"
            "                      producers, instead of in a session of its own as\n"
            "                      systemd starts a service (where the kernel shares the\n"
            "                      CPU between sessions, the daemon's share then falls\n"
            "                      as producers grow)\n"
            "  --socket PATH       drive an already running daemon instead; its CPU,\n"
            "                      memory and syncs are then unknown\n"
            "  --producers P       producer processes (default 4)\n"
            "  --records N         records per producer (default 10000)\n"
            "  --size S            bytes per record; K, M suffixes (default 100)\n"
            "  --buffer-bytes B    the client library's batch buffer (logshard_opts\n"
            "                      buffer_bytes; K, M suffixes; default: the library's):\n"
            "                      a smaller one sends more, smaller APPEND frames\n"
            "  --flush-every K     logshard_flush() after every K records; 0: only at\n"
            "                      the end (default 64)\n"
            "  --fsync POLICY      none, interval, batch, always, a comma-separated list,\n"
            "                      or all (default batch); with --socket, the policy the\n"
            "                      daemon must be running\n"
            "  --repeat R          runs per policy; each is reported, and the median\n"
            "                      (default 1)\n"
            "  --spool DIR         where the temp directory of a run is made (default\n"
            "                      /var/tmp); its file system is reported\n"
            "  --keep              keep the temp directories (spool, daemon log)\n"
            "  --mode MODE         produce (default) or merge: time logctl merge against\n"
            "                      cat and a copy loop on the run's shards; or layout:\n"
            "                      lay out --shards, print the spool's path, keep it\n"
            "  --shards N          merge mode: lay out N sealed shards directly (the\n"
            "                      daemon's format and padding, records of --size bytes)\n"
            "                      instead of producing them through a daemon\n"
            "  --shard-size S      with --shards: bytes per shard; K, M, G suffixes\n"
            "                      (default 1M)\n"
            "  --span SECONDS      with --shards: the records' receive times cover the\n"
            "                      last SECONDS evenly, shard after shard, in name order\n"
            "                      (default: all of them now), for reading a time window\n"
            "  --logctl PATH       logctl for merge mode (default: $LOGCTL, else next to\n"
            "                      this program, else in $PATH)\n"
            "  --timeout SECONDS   limit for the producers' work and for each merge\n"
            "                      (default 600)\n"
            "  --json              print one JSON object instead of tables\n"
            "  -h, --help          show this help\n"
            "  -V, --version       show the version\n"
            "\n"
            "Figures are explained in docs/BENCHMARKS.md.\n"
            "Exit status: 0 success, 1 a run failed, 2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "logshard-bench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry 'logshard-bench --help'.\n");
    return -EINVAL;
}

/* A whole decimal number in [min, max], with K/M/G (powers of 1024) when
 * suffixes are allowed. */
static int parse_number(const char *s, bool suffixes, uint64_t min, uint64_t max,
                        uint64_t *ret)
{
    unsigned long long v;
    uint64_t mult = 1;
    char *end;

    if (*s < '0' || *s > '9')
        return -EINVAL; /* strtoull would take "-1" and " 1" */
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno)
        return -errno;
    if (suffixes && *end) {
        switch (*end) {
        case 'K': case 'k': mult = 1024; break;
        case 'M': mult = 1024 * 1024; break;
        case 'G': mult = 1024 * 1024 * 1024; break;
        default: return -EINVAL;
        }
        end++;
        if (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0)
            end += strlen(end);
    }
    if (*end)
        return -EINVAL;
    if (__builtin_mul_overflow((uint64_t)v, mult, &v) || v < min || v > max)
        return -ERANGE;
    *ret = v;
    return 0;
}

static int parse_policies(const char *arg, struct cmdline *c)
{
    _cleanup_free_ char *copy = strdup(arg);
    char *save = NULL;

    if (!copy)
        return -ENOMEM;
    c->n_policies = 0;
    if (strcmp(arg, "all") == 0) {
        for (size_t i = 0; i < N_POLICIES; i++)
            c->policies[c->n_policies++] = all_policies[i];
        return 0;
    }
    for (char *p = strtok_r(copy, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < N_POLICIES; i++)
            if (strcmp(p, all_policies[i]) == 0)
                break;
        if (i == N_POLICIES)
            return usage_error("--fsync: unknown policy '%s' (none, interval, batch, always, all)",
                               p);
        for (size_t k = 0; k < c->n_policies; k++)
            if (c->policies[k] == all_policies[i])
                return usage_error("--fsync: policy '%s' given twice", p);
        c->policies[c->n_policies++] = all_policies[i];
    }
    if (c->n_policies == 0)
        return usage_error("--fsync: no policy in '%s'", arg);
    return 0;
}

static int parse_cmdline(int argc, char **argv, struct cmdline *c)
{
    enum {
        OPT_DAEMON = 256, OPT_SOCKET, OPT_LOGCTL, OPT_PRODUCERS, OPT_RECORDS, OPT_SIZE,
        OPT_FLUSH_EVERY, OPT_BUFFER, OPT_FSYNC, OPT_REPEAT, OPT_SPOOL, OPT_KEEP, OPT_MODE, OPT_TIMEOUT,
        OPT_JSON, OPT_SHARDS, OPT_SHARD_SIZE, OPT_SPAN, OPT_DAEMON_CONFIG, OPT_SHARED_SESSION,
    };
    static const struct option opts[] = {
        { "daemon", required_argument, NULL, OPT_DAEMON },
        { "socket", required_argument, NULL, OPT_SOCKET },
        { "logctl", required_argument, NULL, OPT_LOGCTL },
        { "producers", required_argument, NULL, OPT_PRODUCERS },
        { "records", required_argument, NULL, OPT_RECORDS },
        { "size", required_argument, NULL, OPT_SIZE },
        { "flush-every", required_argument, NULL, OPT_FLUSH_EVERY },
        { "buffer-bytes", required_argument, NULL, OPT_BUFFER },
        { "fsync", required_argument, NULL, OPT_FSYNC },
        { "repeat", required_argument, NULL, OPT_REPEAT },
        { "spool", required_argument, NULL, OPT_SPOOL },
        { "keep", no_argument, NULL, OPT_KEEP },
        { "mode", required_argument, NULL, OPT_MODE },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "json", no_argument, NULL, OPT_JSON },
        { "shards", required_argument, NULL, OPT_SHARDS },
        { "shard-size", required_argument, NULL, OPT_SHARD_SIZE },
        { "span", required_argument, NULL, OPT_SPAN },
        { "daemon-config", required_argument, NULL, OPT_DAEMON_CONFIG },
        { "shared-session", no_argument, NULL, OPT_SHARED_SESSION },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    uint64_t v;
    int opt, r;

    while ((opt = getopt_long(argc, argv, "hV", opts, NULL)) != -1) {
        r = 0;
        switch (opt) {
        case OPT_DAEMON: c->daemon = optarg; break;
        case OPT_SOCKET: c->socket = optarg; break;
        case OPT_LOGCTL: c->logctl = optarg; break;
        case OPT_SPOOL: c->spool_base = optarg; break;
        case OPT_KEEP: c->keep = true; break;
        case OPT_SHARED_SESSION: c->shared_session = true; break;
        case OPT_JSON: c->json = true; break;
        case OPT_PRODUCERS:
            r = parse_number(optarg, false, 1, 4096, &v);
            c->producers = (unsigned)v;
            break;
        case OPT_RECORDS:
            r = parse_number(optarg, false, 1, UINT64_MAX / 2, &v);
            c->records = v;
            break;
        case OPT_SIZE:
            /* The daemon's own limit may be lower; it answers EMSGSIZE. */
            r = parse_number(optarg, true, 1, 256u << 20, &v);
            c->size = (size_t)v;
            break;
        case OPT_FLUSH_EVERY:
            r = parse_number(optarg, false, 0, UINT64_MAX / 2, &v);
            c->flush_every = v;
            break;
        case OPT_SHARDS:
            r = parse_number(optarg, false, 1, 100000000, &v);
            c->shards = v;
            break;
        case OPT_SHARD_SIZE:
            r = parse_number(optarg, true, 64, 1ull << 40, &v);
            c->shard_bytes = v;
            break;
        case OPT_DAEMON_CONFIG:
            c->daemon_config = optarg;
            break;
        case OPT_SPAN:
            r = parse_number(optarg, false, 1, 100ull * 365 * 86400, &v);
            c->span_s = v;
            break;
        case OPT_BUFFER:
            r = parse_number(optarg, true, 0, 256u << 20, &v);
            c->buffer_bytes = (size_t)v;
            break;
        case OPT_REPEAT:
            r = parse_number(optarg, false, 1, 1000, &v);
            c->repeat = (unsigned)v;
            break;
        case OPT_TIMEOUT:
            r = parse_number(optarg, false, 1, 7 * 86400, &v);
            c->timeout_s = (unsigned)v;
            break;
        case OPT_FSYNC:
            if (parse_policies(optarg, c) < 0)
                return -EINVAL;
            c->fsync_given = true;
            break;
        case OPT_MODE:
            if (strcmp(optarg, "merge") == 0)
                c->merge = true;
            else if (strcmp(optarg, "produce") == 0)
                c->merge = false;
            else if (strcmp(optarg, "layout") == 0)
                c->merge = c->layout_only = c->keep = true;
            else
                return usage_error("--mode: '%s' is none of produce, merge and layout", optarg);
            break;
        case 'h': usage(stdout); return 0;
        case 'V': printf("logshard-bench %s\n", LOGSHARD_VERSION); return 0;
        default: fprintf(stderr, "Try 'logshard-bench --help'.\n"); return -EINVAL;
        }
        if (r < 0)
            return usage_error(r == -ERANGE ? "'%s' is out of range for its option (see --help)"
                                            : "'%s' is not a valid number",
                               optarg);
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (c->daemon && c->socket)
        return usage_error("%s", "--daemon and --socket exclude each other");
    if (c->socket && c->merge)
        return usage_error("%s", "--mode merge needs a daemon the bench starts, not --socket");
    if (c->shards && !c->merge)
        return usage_error("%s", "--shards lays out shards for --mode merge only");
    if (c->layout_only && !c->shards)
        return usage_error("%s", "--mode layout needs --shards");
    if (c->span_s && !c->shards)
        return usage_error("%s", "--span spreads the times of the shards --shards lays out");
    if (c->socket && c->n_policies > 1)
        return usage_error("%s", "with --socket, --fsync names the one policy the daemon runs");
    if (c->socket && c->daemon_config)
        return usage_error("%s", "--daemon-config configures a daemon the bench starts, not --socket");
    if (c->socket && c->shared_session)
        return usage_error("%s", "--shared-session places a daemon the bench starts, not --socket");
    if (c->socket && c->keep)
        return usage_error("%s", "--keep keeps a spool the bench made; with --socket there is none");
    return 1;
}

/* The daemon's I/O path is the last part of its READY status
 * ("Listening on ..., fsync batch, io_uring"). */
static void io_from_status(const char *status, char *buf, size_t len)
{
    const char *p = status ? strrchr(status, ',') : NULL;
    snprintf(buf, len, "%s", p ? p + 2 : "unknown");
}

static void set_latency_figures(struct bench_run *run, const uint64_t *lat, size_t n)
{
    run->fig[FIG_FLUSHES] = (double)n;
    if (!n)
        return;
    run->fig[FIG_ACK_P50_US] = (double)bench_percentile(lat, n, 500) / 1e3;
    run->fig[FIG_ACK_P99_US] = (double)bench_percentile(lat, n, 990) / 1e3;
    run->fig[FIG_ACK_P999_US] = (double)bench_percentile(lat, n, 999) / 1e3;
    run->fig[FIG_ACK_MAX_US] = (double)lat[n - 1] / 1e3;
}

static void set_daemon_figures(struct bench_run *run, const struct cmdline *c,
                               const struct bench_daemon_exit *e)
{
    double records = run->fig[FIG_RECORDS];

    run->fig[FIG_CPU_TOTAL_S] = e->cpu_s;
    /* From the total: wait4() counts in microseconds, /proc in clock ticks
     * (10 ms), too coarse for a short run. */
    if (records > 0)
        run->fig[FIG_CPU_US_PER_RECORD] = e->cpu_s * 1e6 / records;
    if (!e->sealed_line) {
        fprintf(stderr, "logshard-bench: warning: no \"all shards sealed\" line in the daemon's "
                        "log; syncs unknown\n");
        return;
    }
    run->fig[FIG_SYNCS] = (double)e->syncs;
    run->fig[FIG_DAEMON_RECORDS] = (double)e->records;
    run->fig[FIG_DAEMON_SHARDS] = (double)e->shards;
    if (run->fig[FIG_ELAPSED_S] > 0)
        run->fig[FIG_SYNCS_PER_S] = (double)e->syncs / run->fig[FIG_ELAPSED_S];
    if (e->syncs)
        run->fig[FIG_RECORDS_PER_SYNC] = records / (double)e->syncs;
    if (e->records != (uint64_t)c->producers * c->records)
        fprintf(stderr, "logshard-bench: warning: the daemon counted %" PRIu64
                        " records; the producers had %" PRIu64 " acknowledged\n",
                e->records, (uint64_t)c->producers * c->records);
}

static int probe_fdatasync(struct bench_run *run, const struct cmdline *c, const char *dir,
                           char *why, size_t why_len)
{
    uint64_t *lat = NULL;
    size_t n = 0;
    int r = bench_fdatasync_probe(dir, FDATASYNC_ITERATIONS, &lat, &n);

    if (r < 0) {
        snprintf(why, why_len, "fdatasync probe in %s: %s", dir, strerror(-r));
        return r;
    }
    run->fig[FIG_FDS_P50_US] = (double)bench_percentile(lat, n, 500) / 1e3;
    run->fig[FIG_FDS_P99_US] = (double)bench_percentile(lat, n, 990) / 1e3;
    if (run->fig[FIG_FDS_P99_US] > 0)
        run->fig[FIG_ACK_OVER_FDS] = run->fig[FIG_ACK_P99_US] / run->fig[FIG_FDS_P99_US];
    free(lat);
    lat = NULL;

    /* As many writers as producers, each appending what one flush sends. */
    {
        size_t per_flush = c->flush_every ? (size_t)c->flush_every * (c->size + 16) : 4096;
        unsigned iters = 1600 / c->producers > 20 ? 1600 / c->producers : 20;

        if (per_flush > 1024 * 1024)
            per_flush = 1024 * 1024;
        r = bench_fdatasync_probe_concurrent(dir, c->producers, per_flush, iters, &lat, &n);
        if (r < 0) {
            snprintf(why, why_len, "concurrent fdatasync probe in %s: %s", dir, strerror(-r));
            return r;
        }
        run->fig[FIG_FDS_CONC_P99_US] = (double)bench_percentile(lat, n, 990) / 1e3;
        if (run->fig[FIG_FDS_CONC_P99_US] > 0)
            run->fig[FIG_ACK_OVER_FDS_CONC] =
                run->fig[FIG_ACK_P99_US] / run->fig[FIG_FDS_CONC_P99_US];
        free(lat);
    }
    return 0;
}

static void set_merge_figures(struct bench_run *run, const struct bench_merge_result *m)
{
    double mib = (double)m->bytes / MIB;

    run->fig[FIG_MERGE_SHARDS] = (double)m->shards;
    run->fig[FIG_MERGE_MIB] = mib;
    run->fig[FIG_LOGCTL_S] = m->logctl_s;
    run->fig[FIG_CAT_S] = m->cat_s;
    run->fig[FIG_CAT_SYNC_S] = m->cat_sync_s;
    if (m->logctl_s > 0)
        run->fig[FIG_LOGCTL_SHARDS_PER_S] = (double)m->shards / m->logctl_s;
    if (m->logctl_s > 0 && m->cat_sync_s > 0)
        run->fig[FIG_LOGCTL_OVER_CAT_SYNC] = m->cat_sync_s / m->logctl_s;
    run->fig[FIG_COPY_S] = m->copy_s;
    if (m->logctl_s > 0)
        run->fig[FIG_LOGCTL_MIB_PER_S] = mib / m->logctl_s;
    if (m->cat_s > 0)
        run->fig[FIG_CAT_MIB_PER_S] = mib / m->cat_s;
    if (m->copy_s > 0)
        run->fig[FIG_COPY_MIB_PER_S] = mib / m->copy_s;
    if (m->logctl_s > 0) {
        run->fig[FIG_LOGCTL_OVER_CAT] = m->cat_s / m->logctl_s;
        run->fig[FIG_LOGCTL_OVER_COPY] = m->copy_s / m->logctl_s;
    }
}

/* One run of one policy. policy is NULL with --socket and no --fsync.
 * A failure is printed here, the daemon's log after it when it may tell
 * more; label names the run in that message. */
static int run_once(const struct cmdline *c, const char *daemon_path, const char *logctl_path,
                    const char *policy, const char *label, struct bench_run *run)
{
    char why[2048];
    size_t why_len = sizeof(why);
    bool dump_log = false;
    struct bench_daemon d;
    struct bench_load_result load = { 0 };
    struct bench_daemon_exit ex;
    const char *socket = c->socket, *sync_dir;
    uint64_t deadline;
    int fds[2];
    int r;

    bench_daemon_init(&d);
    d.config = c->daemon_config;
    d.shared_session = c->shared_session;
    r = bench_make_tempdir(c->spool_base, &run->dir);
    if (r < 0) {
        snprintf(why, why_len, "cannot make a temp directory in %s: %s (see --spool)",
                 c->spool_base, strerror(-r));
        goto out;
    }
    if (c->merge && c->shards) {
        _cleanup_free_ char *spool = path_join(run->dir, "spool");
        struct bench_merge_result m;

        if (!spool) {
            r = -ENOMEM;
            snprintf(why, why_len, "out of memory");
            goto out;
        }
        r = bench_merge_layout(spool, c->shards, c->shard_bytes, c->size,
                               c->span_s * 1000000000ull, why, why_len);
        if (r < 0)
            goto out;
        if (c->layout_only) {
            printf("%s\n", spool);
            goto out;
        }
        r = bench_fs_type(spool, run->fs_type, sizeof(run->fs_type), &run->fs_volatile);
        if (r < 0) {
            snprintf(why, why_len, "statfs %s: %s", spool, strerror(-r));
            goto out;
        }
        r = bench_merge_time(logctl_path, spool, run->dir,
                             now_monotonic_ns() + (uint64_t)c->timeout_s * 1000000000ull, &m,
                             why, why_len);
        if (r < 0)
            goto out;
        set_merge_figures(run, &m);
        goto out;
    }
    if (!c->socket) {
        r = bench_daemon_start(&d, daemon_path, run->dir, policy,
                               now_monotonic_ns() + READY_WAIT_NS, why, why_len);
        if (r < 0) {
            dump_log = true;
            goto out;
        }
        io_from_status(d.status, run->io, sizeof(run->io));
        socket = d.socket;
    }
    sync_dir = c->socket ? run->dir : d.spool;
    r = bench_fs_type(sync_dir, run->fs_type, sizeof(run->fs_type), &run->fs_volatile);
    if (r < 0) {
        snprintf(why, why_len, "statfs %s: %s", sync_dir, strerror(-r));
        goto out;
    }

    deadline = now_monotonic_ns() + (uint64_t)c->timeout_s * 1000000000ull;
    fds[0] = d.notify_fd;
    fds[1] = d.pidfd;
    r = bench_load_run(&(struct bench_load_params){
                               .socket = socket,
                               .producers = c->producers,
                               .records = c->records,
                               .size = c->size,
                               .flush_every = c->flush_every,
                               .buffer_bytes = c->buffer_bytes,
                               .deadline_ns = deadline,
                               .close_fds = fds,
                               .n_close_fds = c->socket ? 0 : 2,
                       },
                       &load, why, why_len);
    if (r < 0) {
        dump_log = !c->socket;
        goto out;
    }
    run->policy = load.policy;
    run->fig[FIG_ELAPSED_S] = load.elapsed_s;
    run->fig[FIG_TEARDOWN_S] = load.teardown_s;
    run->fig[FIG_RECORDS] = (double)load.records;
    if (load.elapsed_s > 0) {
        run->fig[FIG_RECORDS_PER_S] = (double)load.records / load.elapsed_s;
        run->fig[FIG_MIB_PER_S] = (double)load.records * (double)c->size / MIB / load.elapsed_s;
    }
    set_latency_figures(run, load.lat_ns, load.n_lat);
    if (policy && (!bench_policy_name(load.policy) ||
                   strcmp(bench_policy_name(load.policy), policy) != 0)) {
        const char *in_force = bench_policy_name(load.policy);
        if (c->socket) {
            snprintf(why, why_len, "the daemon at %s runs fsync %s, not %s", c->socket,
                     in_force ? in_force : "unknown", policy);
            r = -EINVAL;
            goto out;
        }
        fprintf(stderr, "logshard-bench: warning: started with --fsync %s, the daemon announced "
                        "%s\n", policy, in_force ? in_force : "an unknown policy");
    }

    if (!c->socket) {
        double cpu, hwm;

        r = bench_daemon_sample(&d, &cpu, &hwm);
        if (r == 0) {
            run->fig[FIG_CPU_TERM_S] = cpu;
            run->fig[FIG_PEAK_RSS_MIB] = hwm / 1024.0;
        } else {
            fprintf(stderr, "logshard-bench: warning: cannot read /proc/%d: %s\n", (int)d.pid,
                    strerror(-r));
        }
        r = bench_daemon_stop(&d, now_monotonic_ns() + STOP_WAIT_NS, &ex, why, why_len);
        if (r < 0) {
            dump_log = true;
            goto out;
        }
        if (!WIFEXITED(ex.status) || WEXITSTATUS(ex.status) != 0) {
            char st[96];
            bench_describe_status(ex.status, st, sizeof(st));
            fprintf(stderr, "logshard-bench: warning: logshardd ended with %s after SIGTERM\n",
                    st);
            bench_daemon_dump_log(&d, stderr);
        }
        set_daemon_figures(run, c, &ex);
    }

    if (c->merge) {
        struct bench_merge_result m;
        r = bench_merge_time(logctl_path, d.spool, run->dir,
                             now_monotonic_ns() + (uint64_t)c->timeout_s * 1000000000ull, &m,
                             why, why_len);
        if (r < 0)
            goto out;
        set_merge_figures(run, &m);
    } else {
        r = probe_fdatasync(run, c, sync_dir, why, why_len);
        if (r < 0)
            goto out;
    }
    r = 0;
out:
    if (r < 0) {
        if (bench_interrupted())
            snprintf(why, why_len, "interrupted by %s", strsignal(bench_interrupted()));
        fprintf(stderr, "logshard-bench: %s: %s\n", label, why);
        if (dump_log && !bench_interrupted())
            bench_daemon_dump_log(&d, stderr);
        if (c->keep && run->dir)
            fprintf(stderr, "logshard-bench: kept %s\n", run->dir);
    }
    free(load.lat_ns);
    bench_daemon_destroy(&d); /* kills it when it still runs */
    if (!c->keep && run->dir) {
        int k = bench_remove_tree(run->dir);
        if (k < 0)
            fprintf(stderr, "logshard-bench: warning: cannot remove %s completely: %s\n",
                    run->dir, strerror(-k));
        free(run->dir);
        run->dir = NULL;
    }
    return r;
}

static void free_series(struct bench_series *s, size_t n)
{
    for (size_t k = 0; s && k < n; k++) {
        for (size_t i = 0; i < s[k].n_runs; i++)
            free(s[k].runs[i].dir);
        free(s[k].runs);
    }
    free(s);
}

int main(int argc, char **argv)
{
    static const char *const daemon_rel[] = { "../daemon/logshardd", "../sbin/logshardd",
                                              "logshardd", NULL };
    static const char *const logctl_rel[] = { "logctl", "../logctl/logctl", NULL };
    struct cmdline c = {
        .spool_base = "/var/tmp",
        .producers = 4,
        .records = 10000,
        .size = 100,
        .flush_every = 64,
        .policies = { "batch" },
        .n_policies = 1,
        .repeat = 1,
        .timeout_s = 600,
        .shard_bytes = 1024 * 1024,
    };
    _cleanup_free_ char *daemon_path = NULL, *logctl_path = NULL;
    struct bench_series *series = NULL;
    struct bench_report rep;
    char label[64];
    int r, status = BENCH_EXIT_OK;

    r = parse_cmdline(argc, argv, &c);
    if (r <= 0)
        return r == 0 ? BENCH_EXIT_OK : BENCH_EXIT_USAGE;
    if (c.socket && !c.fsync_given)
        c.policies[0] = NULL; /* whatever the daemon runs */
    if (!c.socket) {
        daemon_path = bench_find_program(c.daemon, "LOGSHARDD", daemon_rel, "logshardd");
        if (!daemon_path) {
            fprintf(stderr, "logshard-bench: cannot find logshardd; use --daemon PATH or set "
                            "LOGSHARDD\n");
            return BENCH_EXIT_USAGE;
        }
        if (access(daemon_path, X_OK) < 0) {
            fprintf(stderr, "logshard-bench: cannot run %s: %s\n", daemon_path, strerror(errno));
            return BENCH_EXIT_USAGE;
        }
    }
    if (c.merge) {
        logctl_path = bench_find_program(c.logctl, "LOGCTL", logctl_rel, "logctl");
        if (!logctl_path) {
            fprintf(stderr, "logshard-bench: cannot find logctl; use --logctl PATH or set "
                            "LOGCTL\n");
            return BENCH_EXIT_USAGE;
        }
        if (access(logctl_path, X_OK) < 0) {
            fprintf(stderr, "logshard-bench: cannot run %s: %s\n", logctl_path, strerror(errno));
            return BENCH_EXIT_USAGE;
        }
    }
    r = bench_signals_setup();
    if (r < 0) {
        fprintf(stderr, "logshard-bench: cannot set up signal handling: %s\n", strerror(-r));
        return BENCH_EXIT_FAILURE;
    }
    r = bench_fd_limit_setup();
    if (r < 0)
        fprintf(stderr, "logshard-bench: cannot raise the descriptor limit: %s\n", strerror(-r));

    series = calloc(c.n_policies, sizeof(*series));
    if (!series) {
        fprintf(stderr, "logshard-bench: out of memory\n");
        return BENCH_EXIT_FAILURE;
    }
    for (size_t k = 0; k < c.n_policies; k++) {
        series[k].policy = c.policies[k]; /* NULL: as the daemon runs */
        series[k].runs = calloc(c.repeat, sizeof(*series[k].runs));
        if (!series[k].runs) {
            fprintf(stderr, "logshard-bench: out of memory\n");
            free_series(series, c.n_policies);
            return BENCH_EXIT_FAILURE;
        }
    }

    for (unsigned i = 0; i < c.repeat && status == BENCH_EXIT_OK; i++) {
        for (size_t k = 0; k < c.n_policies; k++) {
            struct bench_run *run = &series[k].runs[i];
            const char *name = series[k].policy ? series[k].policy : "as running";

            if (isatty(STDERR_FILENO))
                fprintf(stderr, "logshard-bench: run %u of %u, fsync %s\n", i + 1, c.repeat,
                        name);
            bench_run_init(run);
            series[k].n_runs++;
            snprintf(label, sizeof(label), "run %u, fsync %s", i + 1, name);
            r = run_once(&c, daemon_path, logctl_path, c.policies[k], label, run);
            if (r < 0) {
                status = BENCH_EXIT_FAILURE;
                break;
            }
        }
    }

    if (status == BENCH_EXIT_OK && !c.layout_only) {
        rep = (struct bench_report){
            .merge_mode = c.merge,
            .external = c.socket != NULL,
            .daemon_path = daemon_path,
            .daemon_config = c.daemon_config,
            .shared_session = c.shared_session,
            .socket = c.socket,
            .logctl_path = logctl_path,
            .producers = c.producers,
            .records = c.records,
            .size = c.size,
            .flush_every = c.flush_every,
            .repeat = c.repeat,
            .keep = c.keep,
            .layout_shards = c.shards,
            .layout_shard_bytes = c.shard_bytes,
            .series = series,
            .n_series = c.n_policies,
        };
        if (c.json)
            bench_print_json(stdout, &rep);
        else
            bench_print_table(stdout, &rep);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "logshard-bench: write error on standard output: %s\n",
                    strerror(errno));
            status = BENCH_EXIT_FAILURE;
        }
    }
    free_series(series, c.n_policies);
    return status;
}
