/* The running shipper: its state, and what the files of its loop share.
 * ship-run.c owns the loop; ship-lock.c, ship-fence.c, ship-commit.c,
 * ship-restore.c, ship-delete.c and ship-figures.c act on the same state
 * for it. The rest of the module (ship-kafka.c, ship-readback.c,
 * ship-spool.c, ship-status.c) never sees struct shipper: those files talk
 * to the loop through ship-internal.h. */
#pragma once

#include "ship-internal.h"

#define SHIP_BACKOFF_MIN_MS 100
#define SHIP_BACKOFF_MAX_MS 5000
#define SHIP_KAFKA_CALL_MS 10000 /* one transaction call, before it is tried again */
#define SHIP_RESTART 1           /* from a generation: make a new producer */
/* A fence this long after the last one is taken for the cluster's own doing
 * (a transaction it ended after transaction.timeout.ms, say while the
 * shipper could not reach it) and answered with a new producer; a second
 * fence within it means another shipper uses the transactional.id. */
#define SHIP_FENCE_WINDOW_NS (600ull * 1000000000ull)
/* How long a read-back that finds less than the spool's copy of the
 * progress is tried again (a broker whose metadata lags catches up within
 * it) before the cluster's answer is taken (it lost those records, or the
 * spool ships elsewhere now) and what it lacks is shipped again. */
#define SHIP_BEHIND_SPOOL_NS (60ull * 1000000000ull)

struct topic_count {
    char topic[SHIP_TOPIC_MAX + 1];
    int partitions;
};

struct shipper {
    const struct ship_opts *opts;
    const struct ship_hooks *hooks;
    const struct config *c;
    const char *spool;
    int spool_fd;
    char *txid;
    size_t txid_len;
    char host[256];
    struct ship_kafka *k;
    struct ship_streams *streams;
    struct ship_sources *sources;
    struct topic_count *topics;
    size_t n_topics;
    /* the open transaction */
    bool in_txn;
    uint64_t txn_records;
    uint64_t txn_bytes;
    uint64_t txn_started_ns; /* for the interval; moved on by a wait for the brokers */
    uint64_t txn_begun_ns;   /* when it began; 0 after a commit and in a new generation */
    uint64_t txn_timeout_ns; /* the producer's transaction.timeout.ms */
    bool delivery_failed;
    char delivery_error[256];
    /* figures */
    struct ship_figures fig;
    uint64_t rate_ring[11];
    uint64_t rate_at_ns;
    unsigned rate_i;
    uint64_t status_at_ns;
    bool waiting;
    bool ready_sent;
    uint64_t fenced_ns; /* monotonic time of the last fence, 0: none yet */
};

/* ---- the loop (ship-run.c) ---- */

/* A line for the operator; a warning or an error is also the status's
 * last error. */
void ship_say(struct shipper *s, enum ship_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An sd_notify state through the hooks, when they take one. */
void ship_notify(struct shipper *s, const char *state);
/* Whether the shipper waits for the brokers: said once when it starts
 * and once when it ends, and in the status. */
void ship_set_waiting(struct shipper *s, bool waiting, const char *why);
/* After a call that may be tried again failed with err: says that the
 * shipper waits for the brokers, sleeps the backoff (which starts at
 * SHIP_BACKOFF_MIN_MS) and doubles it. Returns 0 to try again, or
 * -ECANCELED when the shipper is to stop; with patient only once the
 * backoff has reached its maximum, so that a commit under way at SIGTERM
 * gets a few more tries. */
int ship_wait_to_retry(struct shipper *s, int *backoff, const char *err, bool patient);

/* ---- ending a transaction (ship-commit.c) ---- */

/* Ends the open transaction: deliveries, progress, commit. Returns 0,
 * SHIP_RESTART, or a negative errno (-EPERM: fenced; -ECANCELED: stopping
 * with the brokers away, the transaction left to the next shipper to
 * abort). */
int ship_commit(struct shipper *s);
/* Rewinds every stream to its committed position (after an abort). */
void ship_rewind_streams(struct shipper *s);
/* Writes the committed positions to <spool>/ship/progress. Returns 0 or a
 * negative errno, after saying why. */
int ship_store_progress(struct shipper *s);

/* ---- reading back into the tables (ship-restore.c) ---- */

/* Fills the stream table and the partitions from what the cluster holds
 * of ours (read_committed), waiting while it cannot be read, then stores
 * the progress. Returns 0, -ECANCELED when the shipper is to stop, or a
 * negative errno after saying why. */
int ship_restore(struct shipper *s);

/* ---- the spool's lock and mark (ship-lock.c) ---- */

/* Takes <spool>/ship/lock (made with <spool>/ship/ when missing) without
 * waiting, and writes our pid into it. *ret_fd is the locked file, held
 * until the shipper ends. Returns 0, -EBUSY when another shipper holds it,
 * or another negative errno; either after saying why. */
int ship_lock_spool(struct shipper *s, int *ret_fd);

/* Writes an empty <spool>/ship/progress unless there is one: from now on
 * the spool counts as shipped. Returns 0 or a negative errno after saying
 * why. */
int ship_mark_spool_shipped(struct shipper *s);

/* ---- after a fence (ship-fence.c) ---- */

/* Whether to go on with a new producer after the producer was fenced:
 * says which, and why. */
bool ship_go_on_after_fence(struct shipper *s);

/* ---- deleting what is shipped (ship-delete.c) ---- */

/* on_shipped = delete, after a commit whose progress is stored: removes
 * the sealed shards every record of which is committed, their streams'
 * positions recorded in streams/ first. Nothing to return: a shard left
 * behind (merge.lock held, an error, said) is tried again after the next
 * commit. */
void ship_delete_shipped(struct shipper *s);

/* ---- the figures (ship-figures.c) ---- */

/* At most once a second unless force: the figures derived again, the
 * status file and the metrics file written, the sd_notify STATUS= line. A
 * file that cannot be written is said, and written again next time. */
void ship_write_status(struct shipper *s, bool force);
