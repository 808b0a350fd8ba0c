/* The daemon's one context object: the loop, the settings in force, the
 * spool, the I/O ring and the live sessions and shards. Modules receive it
 * explicitly; there are no mutable globals. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "list.h"

struct io;
struct listener;

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
    uint64_t syncs; /* fdatasync and fsync calls completed, at exit */
};

/* What the command line said; it wins over the file, at start and at every
 * reload. */
struct daemon_args {
    const char *config; /* NULL: the default file, if it exists */
    const char *spool;
    const char *socket;
    const char *fsync;
};

struct daemon {
    uv_loop_t *loop;
    struct daemon_args args;
    struct config config;
    struct io *io;
    struct listener *listener;

    /* Spool directories, open for the daemon's lifetime so that every file
     * is created and renamed relative to them. */
    int spool_fd;
    int active_fd;
    int done_fd;
    uint64_t last_shard_id;

    struct list_node sessions;     /* struct session.node */
    struct list_node paused_sessions; /* sessions not reading: over a budget */
    uint64_t memory_bytes;         /* receive and batch buffers, all sessions */
    uint64_t open_shards;
    unsigned char *rx_scratch;     /* where reads land; see session.c */
    bool rx_scratch_busy;
    struct list_node shards;       /* every shard not yet sealed */
    struct list_node dirty_shards; /* shards with records waiting to be written */
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
    bool draining;
    bool stopped;
    int exit_code;

    struct daemon_stats stats;
};

/* Starts draining: stop accepting, let every session finish, seal every
 * shard, then leave the loop. Safe to call more than once. */
void daemon_begin_drain(struct daemon *d, const char *why);

/* Called whenever a session or shard goes away, so the drain can see when
 * the last one is gone. */
void daemon_maybe_finish(struct daemon *d);
