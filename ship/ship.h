/* logctl ship as a library (docs/SHIP.md): every record of a spool
 * produced to Kafka exactly once, by a transactional librdkafka producer
 * whose transactions also carry the progress (which position of which
 * stream is shipped) to a progress topic. At start the progress is read
 * back with read_committed, and so is every record of ours written after
 * it, so that whatever a read_committed consumer already sees is never
 * produced again.
 *
 * The files: ship-run.c (the loop: what to ship, transactions, what
 * happens on each kind of error), ship-lock.c (the spool's lock, and the
 * mark that the spool is shipped), ship-fence.c (what a fence means: go
 * on, or stop), ship-commit.c (ending a transaction: deliveries,
 * progress, commit or abort, then the spool's copy of the progress),
 * ship-restore.c (the stream table filled from the read-back at the
 * start of each producer generation), ship-delete.c (on_shipped = delete), ship-figures.c (the figures as the shipper runs,
 * and when they are written), ship-id.c (the transactional.id kept in
 * <spool>/ship/id), ship-kafka.c (the producer and its transactions),
 * ship-readback.c (reading the progress and the records back),
 * ship-message.c (the progress messages' keys, and their parser),
 * ship-spool.c (the table of streams and how far each is shipped, and the
 * spool's shards in each stream's order, read from the first unshipped
 * position), ship-status.c (the status file and the Prometheus metrics).
 * The end of this header is what others may do with shipped shards by the
 * shipper's own rule (logctl prune): read a sealed shard as the shipper
 * does, judge it shipped whole, record its stream's position before it
 * goes.
 * ship-internal.h is what they share; ship-run.h the shipper's state,
 * which only the loop's files (ship-run.c and the four beside it) see.
 *
 * The module does not print: it reports through the hooks given to it.
 * Functions return 0 or a negative errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "shard_format.h"
#include "stream_positions.h"
#include "wire.h"

/* An active shard as the daemon reports it (logctl ls): its file in
 * active/ and how many of its records are acknowledged, which is what the
 * fsync policy promises durable. */
struct ship_active_shard {
    char file[300];         /* the name in active/ */
    uint64_t records_acked;
    uint64_t last_ns;       /* receive time of its newest record; 0: none */
};

enum ship_log_level {
    SHIP_LOG_ERROR = 3,
    SHIP_LOG_WARNING = 4,
    SHIP_LOG_NOTICE = 5,
    SHIP_LOG_INFO = 6,
};

struct ship_hooks {
    /* Every line the shipper has for its operator. */
    void (*log)(void *arg, enum ship_log_level level, const char *message);
    /* --follow only: the active shards of the running daemon. Returns 0
     * with a new array (free() it), or a negative errno when the daemon
     * cannot be asked (only sealed shards are shipped then). */
    int (*list_active)(void *arg, struct ship_active_shard **ret_v, size_t *ret_n);
    /* Whether to stop: checked between records and while waiting; the
     * open transaction is then committed and ship_run returns 0. */
    bool (*should_stop)(void *arg);
    /* For sd_notify: state is "READY=1", "STATUS=...", "WATCHDOG=1" or
     * "STOPPING=1". May be NULL. */
    void (*notify)(void *arg, const char *state);
    void *arg;
};

struct ship_opts {
    const struct config *config; /* the [ship] section and [daemon] spool */
    const char *spool;
    bool follow;        /* go on shipping what arrives, until should_stop */
    /* Tests only: called at each step ship-commit.c numbers (1: progress
     * produced, not committed; 2: committed, not yet stored), e.g. to be
     * killed there. May be NULL. */
    void (*at_step)(int step, void *arg);
};

/* Ships. Without follow: every record of every sealed shard not yet
 * shipped, committed, then returns 0. With follow: the acknowledged
 * records of active shards too, until should_stop. Returns 0, or a
 * negative errno after logging why: -EBUSY when another shipper holds the
 * spool's lock, -EINVAL for settings librdkafka refuses (named with their
 * config line), -EPERM when this shipper was fenced by another with the
 * same transactional.id, or the error that stopped it. */
int ship_run(const struct ship_opts *opts, const struct ship_hooks *hooks);

/* Whether the [ship] settings can work: brokers given, and librdkafka
 * takes every property (a refused one is named with its config line).
 * Returns 0, or -EINVAL with the reason in err. */
int ship_check_settings(const struct config *config, char *err, size_t err_len);

/* The transactional.id for the spool: [ship] transactional_id when set,
 * else the one kept in <spool>/ship/id, made there on first use from the
 * host name and a random part when create is true. Returns 0 with a new
 * string (free() it), -ENOENT when there is none and create is false, or
 * a negative errno. */
int ship_transactional_id(const struct config *config, const char *spool, bool create,
                          char **ret);

/* ---- shipped shards leaving done/: on_shipped = delete, logctl prune ---- */

/* A sealed shard of done/ as the shipper sees it. */
struct ship_sealed {
    struct shard_header h;
    uint64_t records;   /* every record of the shard */
    uint64_t newest_ns; /* receive time of its newest record (the header's
                           created_ns when it has none, as in the trailer) */
    uint64_t bytes;     /* the file's size */
};

/* Reads the sealed shard open at fd (its offset does not matter; it is
 * left anywhere): the header and, from the seal trailer, the record count
 * and the newest record's time; a shard without a trailer (version 1, or
 * sealed on a full disk) is read through, every record. Returns 0 with
 * *ret filled, -EBADMSG when the file is not exactly one sealed shard (no
 * valid header, damage where it is read, a second shard after the first,
 * as in a merged file), or the error of reading it. (ship-spool.c) */
int ship_sealed_read(int fd, struct ship_sealed *ret);

/* Whether every record of s is committed to Kafka by the n entries of the
 * spool's progress, sorted by stream id as ship_progress_load gives them:
 * the one rule by which shipped shards may leave done/. (ship-delete.c) */
bool ship_sealed_shipped(const struct ship_sealed *s, const struct positions_entry *progress,
                         size_t n);

/* Before the n sealed shards of v leave done/: one stream positions file
 * in <spool>/streams/ (positions_write; kind names the writer, "ship" or
 * "prune") with, for each stream among them, the position after its last
 * record there and its newest record's time, so that the daemon, which
 * learns where a stream continues from done/, can still resume it once
 * they are gone (merge --delete does the same). A shard without a stream
 * needs none, and no file is written when no shard has one. spool_fd is
 * the spool directory. Returns 0 with the new file's name in *ret_name
 * (NULL when none was written; ret_name may be NULL), or the negative
 * errno of positions_write (-EINVAL: a position out of range), in which
 * case no shard may be removed. (ship-delete.c) */
int ship_record_positions(int spool_fd, const char *kind, const struct ship_sealed *v, size_t n,
                          char **ret_name);
