/* logctl status: the running daemon's figures, from the admin socket. The
 * human form is a few aligned lines meant to be read at a glance; --json is
 * the daemon's status object unchanged, for scripts and jq. */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "logctl.h"

#define STATUS_TIMEOUT_MS 10000

static void status_help(void)
{
    printf("Usage: logctl status [--json] [--admin-socket PATH] [--config FILE]\n"
           "\n"
           "Show what the running logshardd is doing: version, uptime, fsync policy,\n"
           "I/O backend (io_uring or the thread-pool fallback), producers connected,\n"
           "active shards, records and bytes received per second (over the last 10 s\n"
           "and since start), fsync count and latency (p50, p99), records waiting for\n"
           "their acknowledgement, bytes waiting to be written, errors by kind, the\n"
           "producer streams it remembers (resumed, refused, forgotten, duplicates), and\n"
           "the spool's disk usage and free space.\n"
           "\n"
           "Options:\n"
           "  -j, --json               print the daemon's status object as JSON\n"
           "  -a, --admin-socket PATH  the daemon's admin socket (default:\n"
           "                           $LOGSHARD_ADMIN_SOCKET, else [daemon] admin_socket\n"
           "                           of the config file, else /run/logshard/admin.sock)\n"
           "  -c, --config FILE        the daemon's config file, to find the admin socket\n"
           "  -h, --help               show this help\n"
           "\n"
           "The admin socket serves root and the daemon's user only.\n"
           "Exit status: 0 shown, 1 the daemon is not running or did not answer,\n"
           "2 usage error or access refused.\n");
}

static void rate_pair(const struct json_value *v, bool bytes, char *out, size_t size)
{
    double r10 = json_get_double(v, "per_s_10s", 0), rall = json_get_double(v, "per_s_since_start", 0);

    if (bytes) {
        char a[32], b[32];
        logctl_format_size((uint64_t)r10, false, a, sizeof(a));
        logctl_format_size((uint64_t)rall, false, b, sizeof(b));
        snprintf(out, size, "%s/s (last 10 s), %s/s (since start)", a, b);
    } else {
        snprintf(out, size, "%.1f/s (last 10 s), %.1f/s (since start)", r10, rall);
    }
}

static void latency(const struct json_value *fs, const char *key, char *out, size_t size)
{
    const struct json_value *v = json_get(fs, key);

    if (!v || v->type != JSON_NUMBER || !isfinite(v->number))
        snprintf(out, size, "-");
    else if (v->number < 0.001)
        snprintf(out, size, "%.0f us", v->number * 1e6);
    else if (v->number < 1.0)
        snprintf(out, size, "%.2f ms", v->number * 1e3);
    else
        snprintf(out, size, "%.2f s", v->number);
}

/* The syslog inputs, one line each, only those that are on: what came in
 * and every way a message became no record. */
/* The disk budget: the spool against spool_budget_bytes and the free space
 * it keeps, and the producers at their quota. */
static void print_budget(const struct json_value *b)
{
    const struct json_value *ps = json_get(b, "producers");
    char a[32], c[32], e[32];
    uint64_t quotas = 0;

    if (!b)
        return;
    logctl_format_size(json_get_u64(b, "spool_bytes", 0), false, a, sizeof(a));
    if (json_get_u64(b, "spool_budget_bytes", 0)) {
        logctl_format_size(json_get_u64(b, "spool_budget_bytes", 0), false, c, sizeof(c));
        printf("  budget:         spool %s of spool_budget_bytes %s", a, c);
    } else {
        printf("  budget:         spool %s (no spool_budget_bytes)", a);
    }
    if (json_get_u64(b, "spool_min_free_bytes", 0)) {
        logctl_format_size(json_get_u64(b, "free_bytes", 0), false, c, sizeof(c));
        logctl_format_size(json_get_u64(b, "spool_min_free_bytes", 0), false, e, sizeof(e));
        printf("; %s free, keeping %s", c, e);
    }
    logctl_format_size(json_get_u64(b, "freed_bytes", 0), false, c, sizeof(c));
    printf("; %" PRIu64 " refused by it; %s freed since start\n",
           json_get_u64(b, "refused_budget", 0), c);
    for (size_t i = 0; ps && ps->type == JSON_ARRAY && i < ps->n; i++)
        if (json_get_u64(&ps->items[i], "quota_bytes", 0))
            quotas++;
    if (!quotas && !json_get_u64(b, "quota_pauses", 0))
        return;
    printf("  quotas:         %" PRIu64 " producers with a quota, %" PRIu64
           " waiting for it now; %" PRIu64 " waits since start\n",
           quotas, json_get_u64(b, "producers_waiting", 0), json_get_u64(b, "quota_pauses", 0));
    for (size_t i = 0; ps && ps->type == JSON_ARRAY && i < ps->n; i++) {
        const struct json_value *p = &ps->items[i];

        if (!json_get_bool(p, "waiting", false))
            continue;
        logctl_format_size(json_get_u64(p, "bytes", 0), false, a, sizeof(a));
        logctl_format_size(json_get_u64(p, "quota_bytes", 0), false, c, sizeof(c));
        printf("    waiting:      %s holds %s of its quota %s, waited %.1f s in all\n",
               json_get_str(p, "name", "?"), a, c,
               (double)json_get_u64(p, "waited_ms", 0) / 1000.0);
    }
}

static void print_syslog(const struct json_value *sl)
{
    const struct json_value *dd = json_get(sl, "dropped");
    const struct json_value *st = json_get(sl, "stream");
    const struct json_value *sd = json_get(st, "dropped");

    if (json_get(sl, "datagram_socket") && json_get(sl, "datagram_socket")->type == JSON_TRUE)
        printf("  syslog dgram:   %" PRIu64 " producers open; %" PRIu64 " datagrams, %" PRIu64
               " records; dropped: empty %" PRIu64 ", oversized %" PRIu64 ", refused %" PRIu64
               ", failed %" PRIu64 "; %" PRIu64 " pauses\n",
               json_get_u64(sl, "producers", 0), json_get_u64(sl, "datagrams", 0),
               json_get_u64(sl, "records", 0), json_get_u64(dd, "empty", 0),
               json_get_u64(dd, "oversized", 0), json_get_u64(dd, "refused", 0),
               json_get_u64(dd, "failed", 0), json_get_u64(sl, "pauses", 0));
    if (json_get(st, "stream_socket") && json_get(st, "stream_socket")->type == JSON_TRUE)
        printf("  syslog stream:  %" PRIu64 " connected (%" PRIu64 " since start); %" PRIu64
               " records, %" PRIu64 " cut; dropped: refused %" PRIu64 ", failed %" PRIu64
               ", %" PRIu64 " B discarded, %" PRIu64 " B unfinished; %" PRIu64
               " framing errors, %" PRIu64 " pauses\n",
               json_get_u64(st, "connections", 0), json_get_u64(st, "connections_accepted", 0),
               json_get_u64(st, "records", 0), json_get_u64(st, "cut", 0),
               json_get_u64(sd, "refused", 0), json_get_u64(sd, "failed", 0),
               json_get_u64(sd, "discarded_bytes", 0), json_get_u64(sd, "unfinished_bytes", 0),
               json_get_u64(st, "framing_errors", 0), json_get_u64(st, "pauses", 0));
}

static void print_status(const struct json_value *st)
{
    const struct json_value *rec = json_get(st, "records"), *by = json_get(st, "bytes");
    const struct json_value *fs = json_get(st, "fsync"), *er = json_get(st, "errors");
    const struct json_value *disk = json_get(st, "disk");
    char a[64], b[64], c[64], d[64], line[256];

    logctl_format_duration(json_get_double(st, "uptime_s", 0), a, sizeof(a));
    printf("logshardd %s, pid %" PRIu64 ", up %s (since %s)\n",
           json_get_str(st, "version", "?"), json_get_u64(st, "pid", 0), a,
           json_get_str(st, "started", "?"));
    printf("  fsync policy:   %s\n", json_get_str(st, "fsync_policy", "?"));
    printf("  I/O backend:    %s\n",
           strcmp(json_get_str(st, "io_backend", ""), "io_uring") == 0
               ? "io_uring"
               : "thread pool (io_uring unavailable or not chosen)");
    printf("  spool:          %s\n", json_get_str(st, "spool", "?"));
    printf("  producers:      %" PRIu64 " connected, %" PRIu64 " connections since start\n",
           json_get_u64(st, "producers_connected", 0), json_get_u64(st, "connections_accepted", 0));
    printf("  active shards:  %" PRIu64 " (%" PRIu64 " opened, %" PRIu64 " sealed since start)\n",
           json_get_u64(st, "active_shards", 0), json_get_u64(st, "shards_opened", 0),
           json_get_u64(st, "shards_sealed", 0));
    rate_pair(rec, false, line, sizeof(line));
    printf("  records in:     %s; %" PRIu64 " in all\n", line, json_get_u64(rec, "received", 0));
    rate_pair(by, true, line, sizeof(line));
    logctl_format_size(json_get_u64(by, "received", 0), false, a, sizeof(a));
    printf("  bytes in:       %s; %s in all\n", line, a);
    latency(fs, "p50_s", a, sizeof(a));
    latency(fs, "p99_s", b, sizeof(b));
    printf("  fsync:          %" PRIu64 " syncs; shard data syncs %" PRIu64
           ", latency p50 %s, p99 %s\n",
           json_get_u64(fs, "syncs", 0), json_get_u64(fs, "count", 0), a, b);
    logctl_format_size(json_get_u64(st, "bytes_waiting", 0), false, a, sizeof(a));
    logctl_format_size(json_get_u64(st, "memory_bytes", 0), false, b, sizeof(b));
    printf("  acks pending:   %" PRIu64 " records; %s waiting to be written (%s buffered)\n",
           json_get_u64(st, "acks_pending", 0), a, b);
    printf("  errors:         protocol %" PRIu64 ", io %" PRIu64 ", refused_access %" PRIu64
           ", refused_limit %" PRIu64 ", timeout %" PRIu64 ", refused_admin %" PRIu64 "\n",
           json_get_u64(er, "protocol", 0), json_get_u64(er, "io", 0),
           json_get_u64(er, "refused_access", 0), json_get_u64(er, "refused_limit", 0),
           json_get_u64(er, "timeout", 0), json_get_u64(er, "refused_admin", 0));
    {
        const struct json_value *sm = json_get(st, "streams");

        printf("  streams:        %" PRIu64 " known, %" PRIu64 " resumed, %" PRIu64
               " refused, %" PRIu64 " forgotten; %" PRIu64 " duplicate records not written\n",
               json_get_u64(sm, "known", 0), json_get_u64(sm, "resumed", 0),
               json_get_u64(sm, "refused", 0), json_get_u64(sm, "forgotten", 0),
               json_get_u64(sm, "records_duplicate", 0));
    }
    print_syslog(json_get(st, "syslog"));
    print_budget(json_get(st, "budget"));
    if (json_get(disk, "error")) {
        printf("  disk:           unknown (%s)\n", json_get_str(disk, "error", "?"));
        return;
    }
    logctl_format_size(json_get_u64(disk, "active_bytes", 0), false, a, sizeof(a));
    logctl_format_size(json_get_u64(disk, "done_bytes", 0), false, b, sizeof(b));
    logctl_format_size(json_get_u64(disk, "fs_avail_bytes", 0), false, c, sizeof(c));
    logctl_format_size(json_get_u64(disk, "fs_size_bytes", 0), false, d, sizeof(d));
    printf("  disk:           active/ %s in %" PRIu64 " files, done/ %s in %" PRIu64
           " files; %s free of %s\n",
           a, json_get_u64(disk, "active_files", 0), b, json_get_u64(disk, "done_files", 0), c,
           d);
    if (json_get_u64(disk, "quarantine_files", 0) > 0) {
        logctl_format_size(json_get_u64(disk, "quarantine_bytes", 0), false, a, sizeof(a));
        printf("  quarantine:     %" PRIu64 " files, %s (see logshardd(8))\n",
               json_get_u64(disk, "quarantine_files", 0), a);
    }
}

int logctl_status(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "json", no_argument, NULL, 'j' },
        { "admin-socket", required_argument, NULL, 'a' },
        { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *socket_opt = NULL, *config = NULL;
    struct json_value *reply = NULL;
    char *socket_path = NULL;
    bool json = false;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":ja:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'j': json = true; break;
        case 'a': socket_opt = optarg; break;
        case 'c': config = optarg; break;
        case 'h': status_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("status", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("status", "unexpected argument '%s'", argv[optind]);
    r = logctl_admin_socket("status", socket_opt, config, &socket_path);
    if (r != 0)
        return r;
    r = logctl_admin_request("status", socket_path, "status", NULL, STATUS_TIMEOUT_MS, &reply);
    free(socket_path);
    if (r != 0)
        return r;
    if (!json_get(reply, "status") || json_get(reply, "status")->type != JSON_OBJECT) {
        fprintf(stderr, "logctl: status: the daemon's reply has no status object\n");
        json_value_free(reply);
        return LOGCTL_EXIT_FAILURE;
    }
    if (json) {
        struct json_out o;

        json_out_init(&o);
        json_write_value(&o, json_get(reply, "status"));
        r = logctl_print_json_line("status", &o);
        if (r != 0) {
            json_value_free(reply);
            return r;
        }
    } else {
        print_status(json_get(reply, "status"));
    }
    json_value_free(reply);
    if (fflush(stdout) != 0) {
        perror("logctl: status: write error on standard output");
        return LOGCTL_EXIT_FAILURE;
    }
    return LOGCTL_EXIT_OK;
}
