/* The daemon's one context object: the loop, the settings in force, the
 * spool, the I/O ring and the live sessions and shards. Modules receive it
 * explicitly; there are no mutable globals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "group-sync.h"
#include "list.h"
#include "memory.h"
#include "passed-sockets.h"
#include "shard-events.h"
#include "streams.h"

struct io;
struct listener;
struct admin;
struct metrics;
struct syslog_dgram;
struct syslog_producers;
struct syslog_stream;
struct shard;

/* Buckets of the fsync latency histogram (stats.h has their bounds): 17
 * finite upper bounds from 50 us to 10 s, then +Inf. */
#define STATS_FSYNC_BUCKETS 18u
/* Samples for the 10-second rates: one a second, plus the one 10 s ago. */
#define STATS_RATE_SAMPLES 11u

/* Counters only: the per-record path adds to them and nothing more. The
 * figures derived from them (rates, quantiles, spool usage) are computed
 * when someone asks (stats.c). */
struct daemon_stats {
    uint64_t connections_accepted;
    uint64_t sessions_open;
    uint64_t records_received;
    uint64_t bytes_received;
    uint64_t records_acked;
    uint64_t shards_opened;
    uint64_t shards_sealed;
    uint64_t protocol_errors;
    uint64_t refused_access;  /* peers not in allowed_uids/allowed_gids */
    uint64_t refused_limit;   /* peers over max_producers(_per_uid) */
    uint64_t io_errors;
    uint64_t timeouts;        /* sessions dropped by hello_timeout_ms or idle_timeout_ms */
    uint64_t refused_admin;   /* admin peers that were neither root nor the daemon's uid */
    uint64_t streams_resumed; /* connections that resumed a known stream */
    uint64_t streams_refused; /* resumes refused: unknown stream, wrong uid or name */
    uint64_t read_turns; /* times a producer connection waited for its turn to be read */
    uint64_t read_holds; /* loop ticks that read nothing: too many shards waiting for the disk */
    uint64_t records_duplicate; /* records below their stream's position: acknowledged, not written */
    uint64_t syncs; /* fdatasync and fsync calls completed, at exit */

    /* The syslog datagram socket (syslog-datagram.c): datagrams read, the
     * records they became, and every datagram that became none, by why. */
    uint64_t syslog_datagrams;
    uint64_t syslog_records;
    uint64_t syslog_dropped_empty;     /* nothing left once the trailer is stripped */
    uint64_t syslog_dropped_oversized; /* over max_record_bytes (or cut by the kernel) */
    uint64_t syslog_dropped_refused;   /* no shard for it: max_open_shards, memory, I/O */
    uint64_t syslog_dropped_failed;    /* taken, then lost in a failed write or sync */
    uint64_t syslog_pauses;            /* times reading stopped for memory_limit_bytes */

    /* The syslog stream socket (syslog-stream.c): connections accepted,
     * messages stored, and what was cut, dropped or lost, by why. */
    uint64_t syslog_stream_connections;
    uint64_t syslog_stream_records;
    uint64_t syslog_stream_cut;            /* lines over max_record_bytes, stored cut */
    uint64_t syslog_stream_discarded_bytes; /* the rest of those lines */
    uint64_t syslog_stream_framing_errors; /* bad octet counts: connection closed */
    uint64_t syslog_stream_unfinished_bytes; /* of frames a closed connection never finished */
    uint64_t syslog_stream_refused;        /* messages no shard could take */
    uint64_t syslog_stream_failed;         /* taken, then lost in a failed write or sync */
    uint64_t syslog_stream_pauses;         /* times a connection stopped being read */

    /* fdatasync of shard data (queue_sync to on_sync in shard.c); under
     * batch and always the write linked before it is part of the time. */
    uint64_t fsync_buckets[STATS_FSYNC_BUCKETS]; /* not cumulative */
    uint64_t fsync_count;
    uint64_t fsync_sum_ns;
};

struct stats_rate_sample {
    uint64_t mono_ns;
    uint64_t records;
    uint64_t bytes;
};

/* The daemon's lifecycle, only ever forward (lifecycle.c asserts it):
 * running; draining once SIGTERM or SIGINT came (nothing new is accepted,
 * every session and shard is finished); stopped once the last shard is
 * sealed and the loop's last handles are closing. */
enum lifecycle_state {
    LIFECYCLE_RUNNING,
    LIFECYCLE_DRAINING,
    LIFECYCLE_STOPPED,
};

/* What the command line said; it wins over the file, at start and at every
 * reload. */
struct daemon_args {
    const char *config; /* NULL: the default file, if it exists */
    const char *spool;
    const char *socket;
    const char *fsync;
    const char *admin_socket;
    const char *syslog_socket; /* --syslog-socket: [syslog] datagram_socket */
    const char *syslog_stream_socket; /* --syslog-stream-socket: [syslog] stream_socket */
};

struct daemon {
    uv_loop_t *loop;
    struct daemon_args args;
    struct config config;
    struct io *io;
    struct listener *listener;
    struct admin *admin;     /* NULL when the admin socket could not be set up */
    struct syslog_dgram *syslog_dgram; /* NULL: the datagram socket is off (or stopped) */
    struct syslog_producers *syslog_producers; /* the syslog producers and their shards */
    struct syslog_stream *syslog_stream; /* NULL: the stream socket is off (or stopped) */
    /* Sockets systemd passed (sd_listen_fds, asked once by main.c), sorted
     * by input; -1 where an input binds its own path. */
    struct passed_sockets passed;
    struct metrics *metrics;
    struct seal_index_writer *seal_index; /* seal-index.c's; NULL when off */
    uint64_t start_mono_ns;
    uint64_t start_real_ns;

    /* Spool directories, open for the daemon's lifetime so that every file
     * is created and renamed relative to them. */
    int spool_fd;
    int active_fd;
    int done_fd;
    size_t seal_align; /* sealed shards end on a multiple of this (0: none) */
    struct batch_pool batch_pool; /* memory.c's */
    /* What fsync = batch syncs with ([sync] sync_method, settled at start:
     * SYNC_METHOD_FDATASYNC, _SYNCFS or _ONE_FLUSH), and the shared syncs'
     * state (group-sync.c's). */
    enum sync_method batch_sync;
    struct group_sync group_sync;
    uint64_t last_shard_id;

    struct list_node sessions;     /* struct session.node */
    struct list_node resuming_sessions; /* struct session.resume_node: waiting for
                                           their stream to be quiet (session.c) */
    struct streams streams;        /* streams.c's */
    struct budget *budget;         /* budget.c's; NULL until budget_start */
    struct list_node paused_sessions; /* sessions not reading: over a budget */
    uint64_t memory_bytes;         /* receive and batch buffers, all sessions (memory.c's) */
    uint64_t memory_stalled_bytes; /* of those, what only senders can release (memory.c's) */
    uint64_t open_shards;
    unsigned shard_writes_busy;    /* shards with a write of records in flight (shard.c's) */
    unsigned shards_creating;      /* shards holding records until their file exists (shard-create.c's) */
    unsigned char *rx_scratch;     /* where reads land; see session-recv.c */
    bool rx_scratch_busy;
    /* Bytes the connections may still read in this loop tick, and those
     * waiting for their turn (read-turns.c). */
    int64_t rx_budget;
    struct list_node rx_turns;
    uv_idle_t rx_turn_idle; /* keeps the loop from blocking while some wait */
    struct list_node shards;       /* every shard not yet sealed */
    struct list_node shard_subscribers; /* struct shard_subscriber.node (shard-events.h) */
    struct shard_subscriber sessions_on_shards;  /* session.c's */
    struct shard_subscriber lifecycle_on_shards; /* lifecycle.c's */
    struct list_node dirty_shards; /* shards with records waiting to be written */
    struct list_node shards_to_create; /* shards whose file is not yet asked for */
    unsigned shard_creates_inflight;   /* creates of the chain on the ring */
    uint64_t next_session_id;

    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t age_timer;
    uv_timer_t sync_timer; /* fsync = interval */

    /* systemd notifications (notify.c) */
    uv_timer_t status_timer;
    uv_timer_t watchdog_timer;
    bool notify_running;
    uint64_t status_last_ns;
    uint64_t status_last_records;
    uint64_t status_last_bytes;
    uint64_t watchdog_last_completions;
    char last_error[256];

    /* The 10-second rates (stats.c): a sample a second, oldest overwritten. */
    uv_timer_t rate_timer;
    bool rate_running;
    struct stats_rate_sample rate_samples[STATS_RATE_SAMPLES];
    unsigned rate_next;
    unsigned rate_count;

    /* The lifecycle (lifecycle.c): running, then draining, then stopped;
     * never back. */
    enum lifecycle_state lifecycle;
    int exit_code;

    struct daemon_stats stats;
};
