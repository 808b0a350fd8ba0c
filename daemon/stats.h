/* The daemon's figures for operators: what `logctl status` shows and the
 * metrics file holds. The counters live in struct daemon_stats and are only
 * ever incremented where things happen; everything derived (rates,
 * quantiles, spool usage) is computed here when someone asks. */
#pragma once

#include "budget.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon.h"

/* Upper bound of fsync histogram bucket i in nanoseconds; the last bucket
 * (STATS_FSYNC_BUCKETS - 1) is +Inf and returns UINT64_MAX. The bounds
 * follow Prometheus' habit of 1-2.5-5 steps, in seconds: 50us .. 10s. */
static inline uint64_t stats_fsync_bound_ns(unsigned i)
{
    static const uint64_t bounds[STATS_FSYNC_BUCKETS - 1] = {
        50000ull,     100000ull,     250000ull,    500000ull,     1000000ull,   2500000ull,
        5000000ull,   10000000ull,   25000000ull,  50000000ull,   100000000ull, 250000000ull,
        500000000ull, 1000000000ull, 2500000000ull, 5000000000ull, 10000000000ull,
    };
    return i < STATS_FSYNC_BUCKETS - 1 ? bounds[i] : UINT64_MAX;
}

/* One fdatasync took ns: three counters and a short search. */
static inline void stats_observe_fsync(struct daemon_stats *st, uint64_t ns)
{
    unsigned i = 0;

    while (ns > stats_fsync_bound_ns(i))
        i++;
    st->fsync_buckets[i]++;
    st->fsync_count++;
    st->fsync_sum_ns += ns;
}

/* A snapshot of every figure. stats_collect fills what the loop knows (in
 * memory, no system calls beyond the clock); stats_measure_spool adds what
 * must be read from the file system, and may run on a pool thread because
 * it touches only the snapshot. */
struct stats_figures {
    char *version;
    char *spool;        /* owned copies: a reload may free the settings */
    char *admin_socket;
    char *metrics_file;
    const char *fsync_policy; /* static text */
    const char *io_backend;   /* "io_uring" or "threads" */
    int pid;
    uint64_t start_real_ns;
    uint64_t uptime_ns;

    uint64_t producers_connected;
    uint64_t connections_accepted;
    uint64_t active_shards;
    uint64_t shards_opened;
    uint64_t shards_sealed;
    uint64_t records_received;
    uint64_t bytes_received;
    uint64_t records_acked;
    double records_per_s_10s, bytes_per_s_10s;   /* over the last 10 s (less after start) */
    double records_per_s_total, bytes_per_s_total; /* since start */
    double rate_window_s;

    uint64_t syncs;         /* every fdatasync and fsync completed */
    const char *sync_method; /* what fsync = batch syncs with: "fdatasync", "syncfs" */
    uint64_t syncfs, syncfs_shards; /* shared syncs, and the shards they covered */
    uint64_t fsync_buckets[STATS_FSYNC_BUCKETS];
    uint64_t fsync_count;
    uint64_t fsync_sum_ns;
    double fsync_p50_s, fsync_p99_s; /* NaN before the first sync */

    uint64_t acks_pending;  /* records received, not yet acknowledged */
    uint64_t bytes_waiting; /* accepted, not yet written */
    uint64_t memory_bytes;
    uint64_t io_pending;
    uint64_t read_turns;
    uint64_t read_holds;

    uint64_t errors_protocol;
    uint64_t errors_io;
    uint64_t refused_access;
    uint64_t refused_limit;
    uint64_t timeouts;
    uint64_t refused_admin;

    /* Streams (protocol version 2). */
    uint64_t streams_known, streams_forgotten, streams_resumed, streams_refused;
    uint64_t records_duplicate;

    /* The syslog datagram socket: whether it is on, what it read, and
     * every datagram that became no record, by why. */
    bool syslog_on;
    uint64_t syslog_producers;
    uint64_t syslog_datagrams, syslog_records;
    uint64_t syslog_dropped_empty, syslog_dropped_oversized, syslog_dropped_refused,
        syslog_dropped_failed;
    uint64_t syslog_pauses;

    /* The syslog stream socket: whether it is on, its connections, what
     * they sent, and what was cut, dropped or lost, by why. */
    bool syslog_stream_on;
    uint64_t syslog_stream_open, syslog_stream_connections, syslog_stream_records;
    uint64_t syslog_stream_cut, syslog_stream_discarded_bytes, syslog_stream_framing_errors,
        syslog_stream_unfinished_bytes, syslog_stream_refused, syslog_stream_failed;
    uint64_t syslog_stream_pauses;

    /* The disk budget (budget.h): the spool's figures, and each producer
     * with bytes in the spool or a connection (names owned). */
    struct budget_figures budget;
    struct stats_producer_budget {
        char *name;
        uint64_t bytes, active_bytes, sealed_bytes, sealed_files, quota;
        bool waiting;
        uint64_t wait_ns, pauses, refused;
    } *producers;
    size_t n_producers;

    /* From stats_measure_spool. */
    int active_fd, done_fd, spool_fd; /* the daemon's, borrowed, read only */
    int spool_error;                  /* 0, or why the figures below are missing */
    uint64_t active_files, active_bytes;
    uint64_t done_files, done_bytes;
    uint64_t quarantine_files, quarantine_bytes;
    uint64_t fs_avail_bytes, fs_free_bytes, fs_size_bytes;
};

/* Starts (and stops) the one-second sampling behind the 10-second rates. */
void stats_start(struct daemon *d);
void stats_stop(struct daemon *d);

/* Fills f from the daemon's memory. Returns 0 or -ENOMEM (f then needs no
 * freeing). */
int stats_collect(struct daemon *d, struct stats_figures *f);

/* Adds the spool's usage (sizes of the files in active/, done/ and
 * quarantine/) and the file system's free space. Safe on a pool thread.
 * Returns 0 or a negative errno (also kept in f->spool_error). */
int stats_measure_spool(struct stats_figures *f);

void stats_figures_free(struct stats_figures *f);

/* The quantile q (0..1) of the fsync histogram in seconds, interpolated
 * within its bucket as Prometheus' histogram_quantile() does; NaN when it
 * is empty. */
double stats_fsync_quantile(const uint64_t *buckets, uint64_t count, double q);

/* The status object of the admin protocol (docs/PROTOCOL.md), as the next
 * value of o. */
struct json_out;
void stats_write_json(struct json_out *o, const struct stats_figures *f);

/* The same figures in the Prometheus text exposition format (0.0.4).
 * Returns 0 and a new NUL-terminated text, or -ENOMEM. */
int stats_format_prometheus(const struct stats_figures *f, char **ret, size_t *ret_len);
