/* A shard: one producer connection's temp file in <spool>/active, appended
 * in batches through the I/O ring, then sealed into <spool>/done.
 *
 * Records are encoded into the shard's filling batch as they arrive; once per
 * loop tick every dirty shard with no write in flight swaps its filling batch
 * for the in-flight one and queues a single write of it. A shard has at most
 * one write in flight, so its file grows strictly in order and the records a
 * completion covers are exactly the batch's.
 *
 * The fsync policy is the connection's: the session fixes it at HELLO,
 * announces it in WELCOME and keeps it. A shard is told at its opening only
 * how to sync (enum shard_sync, from shard_sync_for_policy()), which
 * decides when its records count as acknowledged:
 *  - at seal (none), interval: once written. interval also syncs every
 *    shard whose written data has waited fsync_interval/2 (shard_sync_due,
 *    from a timer), so no write waits more than fsync_interval for its sync.
 *  - each write (batch, always): once an fdatasync that started after their
 *    write has completed. Under batch with sync_method syncfs (shared), a
 *    syncfs of the spool's file system instead, one for every shard that
 *    wrote in a loop tick, started after their writes completed. Under
 *    one-flush, the write on the disk (with O_DIRECT, shard-direct.c, or
 *    through the page cache and then written back with sync_file_range),
 *    then one fdatasync, started after that, for every shard that wrote:
 *    its cache flush makes them all durable, since below prepared_end an
 *    overwrite changes no metadata. The write and its fdatasync are queued as one
 *    linked pair; records arriving meanwhile wait in the filling batch and
 *    go with the next pair, so one sync covers all of them (group commit).
 *    For always, the session hands over one APPEND frame at a time, so each
 *    frame gets a sync of its own.
 * A failed fdatasync is never retried: the shard takes no more records and
 * is sealed only as far as earlier syncs proved it durable. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "group-sync.h"
#include "io.h"
#include "list.h"
#include "seal.h"
#include "shard_format.h"
#include "shard-events.h"
#include "wire.h"

struct daemon;
struct shard;

/* The block that writes with O_DIRECT are aligned to: their buffer, file
 * offset and length. At least the logical block size of every disk. */
#define SHARD_BLOCK 4096u

/* How a shard syncs its writes (see the top of this file). */
enum shard_sync {
    SHARD_SYNC_AT_SEAL,    /* fsync = none: only the seal syncs */
    SHARD_SYNC_INTERVAL,   /* fsync = interval: shard_sync_due() syncs written data */
    SHARD_SYNC_EACH_WRITE, /* fsync = batch or always: each write linked to an fdatasync */
    SHARD_SYNC_SHARED,     /* fsync = batch with sync_method syncfs: each write waits for
                            * the next syncfs of the spool's file system (group-sync.h) */
    SHARD_SYNC_FLUSH,      /* fsync = batch with sync_method one-flush: a write into space
                            * prepared ahead (shard-prepare.c) goes with O_DIRECT
                            * (shard-direct.c) or is written back with sync_file_range,
                            * then waits for the next shared fdatasync (group-sync.h); a
                            * write past it has an fdatasync of its own */
};

/* The way of syncing that a connection's fsync policy (enum fsync_policy)
 * asks of its shards, with the daemon's sync method. */
enum shard_sync shard_sync_for_policy(const struct daemon *d, unsigned fsync_policy);

struct shard_ident {
    const char *producer;
    size_t producer_len;
    uint32_t uid, gid, pid;
    enum shard_sync sync; /* fixed for the shard's life */
    /* The producer's stream (docs/FORMAT.md, version 3): its identity, not
     * all zero, and the position of the shard's first record in it. NULL
     * writes a shard without a stream. */
    const uint8_t *stream_id;
    uint64_t first_position;
    /* The shard of the same stream before this one while it may still
     * write (retired, not yet settled), else NULL. See shard_open(). */
    struct shard *after;
    /* The input the records come from (enum shard_source): 0, a client,
     * writes format version 3 as always; any other writes version 4 with
     * the source in its header, and its records go through
     * shard_append_creds(). */
    uint16_t source;
};

/* Where a shard is in its life; only forward, each step once. */
enum shard_state {
    SHARD_OPEN,    /* takes records */
    SHARD_RETIRED, /* shard_seal() was called: no more records; the seal
                    * starts once nothing is in flight */
    SHARD_SEALING, /* seal.c runs the seal steps; shard_sealed() ends it */
};

struct shard_batch {
    unsigned char *buf;
    /* Under one-flush the records start head bytes into buf: room for the
     * bytes of the file block they begin in that come before them, so that
     * the batch can be written as whole blocks with O_DIRECT
     * (shard-prepare.c). 0 otherwise. */
    size_t head;
    size_t len, cap; /* len: bytes of records, from buf + head */
    uint64_t records;
    /* The last records encoded, whose CRC fields are not filled yet (their
     * offsets from buf + head): they are summed three at a time, side by
     * side, and the batch is summed whole before it is written. */
    size_t unsummed[3];
    unsigned n_unsummed;
};

struct shard {
    struct daemon *d;
    struct list_node node;       /* d->shards */
    struct list_node dirty_node; /* d->dirty_shards while records wait */
    void *owner;
    const struct shard_events *events;

    uint64_t id;
    char producer[WIRE_PRODUCER_NAME_MAX + 1]; /* for the admin socket's ls and rotate */
    uint32_t uid, gid, pid;
    uint64_t created_ns;      /* CLOCK_REALTIME, as in the header */
    uint64_t first_record_ns; /* receive times of the first and last record */
    uint64_t last_record_ns;  /* appended (0 while there is none) */
    uint64_t newest_record_ns; /* the latest receive time of any record */
    uint32_t header_len; /* bytes of the header at the start of the file */
    char *tmp_name;  /* relative to d->active_fd */
    char *done_name; /* relative to d->done_fd */
    int fd;          /* -1 until the file is created, and for good if that failed */
    struct io_req create_req;
    struct list_node create_node; /* d->shards_to_create until its create is queued */
    bool creating;        /* the create is on the ring: nothing is written meanwhile */
    unsigned create_attempts; /* names already taken (EEXIST), of 16 tried */
    int create_error;     /* the file could not be created: negative errno, else 0 */
    uint64_t created_mono_ns; /* made, or its first record, if later: max_shard_age runs from here */
    enum shard_sync sync;

    uint64_t size_queued;  /* bytes the file will hold once all is written */
    uint64_t size_written; /* bytes known written: the next write's offset */
    uint64_t size_synced;  /* bytes an fdatasync has proven durable */
    uint64_t records_queued;
    uint64_t records_appended; /* every record taken, never lowered (for counting losses) */
    uint64_t records_written;
    uint64_t records_synced;

    struct shard_batch filling;
    struct shard_batch inflight;
    struct io_req write_req;
    size_t inflight_done; /* bytes of the in-flight batch written so far */
    bool write_busy;

    struct io_req sync_req;
    struct group_member group; /* SHARD_SYNC_SHARED: its place in the shared syncfs */
    bool sync_busy;
    bool sync_wanted;          /* a linked sync was cancelled; issue it after the write */
    uint64_t sync_size;        /* what the sync in flight will prove, once done */
    uint64_t sync_records;
    uint64_t sync_queued_ns;   /* monotonic: for the fsync latency histogram */
    uint64_t dirty_since_ns;   /* interval: when written data first went unsynced */
    int sync_error;            /* a failed fdatasync: nothing after size_synced is trusted */
    const char *sync_failed_what; /* the step that failed, for messages (static text) */

    /* SHARD_SYNC_FLUSH: the file's space written with zeros and synced
     * ahead of the records (shard-prepare.c). */
    uint64_t prepared_end; /* a sync proved the file's size and blocks up to here:
                              overwriting below it changes no metadata */
    uint64_t fill_end;     /* the end of the zeros asked for so far */
    uint64_t fill_from;    /* the fill in flight: [fill_from, fill_end) */
    unsigned fills;        /* fills done; each asks for twice the one before, up to a cap */
    bool fill_writing;     /* its zeros are being written: no record write may start */
    bool fill_syncing;     /* waiting for the shared fdatasync of this file */
    bool fill_off;         /* a fill failed: every write has an fdatasync of its own */
    struct io_req fill_write_req;
    struct group_member fill_sync; /* the shared fdatasync that is of this file */
    /* Writes into prepared space go straight to the disk: the file opened
     * again with O_DIRECT (-1 until the first fill is durable, and for good
     * where the file system refuses it), and a copy of the bytes of the
     * file's last block that are written, [tail_end rounded down to a
     * block, tail_end): a write rewrites them before its own bytes.
     * Valid while tail_end == size_written. */
    int direct_fd;
    bool direct_off;        /* the file system took no O_DIRECT write: buffered for good */
    bool write_direct;      /* the write in flight is of whole blocks, with O_DIRECT */
    unsigned char *tail;    /* SHARD_BLOCK bytes, under one-flush only */
    uint64_t tail_end;
    uint64_t direct_writes; /* writes that went with O_DIRECT */

    /* Stream order: a shard's records follow those of the shard before it
     * in the same stream, so it writes nothing while that shard may still
     * fail (held), and when it does fail, this one keeps nothing
     * (stream_cut): no record reaches the disk after a gap. The two links
     * are cut as soon as the earlier shard's fate is known. */
    struct shard *stream_prev, *stream_next;
    bool held;
    bool stream_cut;
    /* The stream as in the header, for the stream table (streams.h). */
    bool has_stream;
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t first_position;
    uint16_t source; /* enum shard_source, as in the header */
    /* Its producer's share of the disk budget (budget.h) and the bytes
     * counted there: every byte queued, header included. */
    struct budget_producer *budget;
    uint64_t budget_taken;

    enum shard_state state;
    int error; /* first write error; no records are taken after it */
    bool counted_open; /* in d->open_shards */

    struct seal seal; /* seal.c's */
};

/* Creates <producer>.<id>.tmp in active/ (O_CREAT|O_EXCL, on the I/O ring:
 * records taken meanwhile wait in memory; a failed create is reported like
 * a failed write, with create_error set) and queues its
 * header (format version 3, with the ident's stream and first position;
 * version 4 with the ident's source when that is not a client).
 * When ident->after is a shard of the same stream that is still writing,
 * the new shard writes nothing until that one has settled, and if that one
 * fails instead, the new shard fails too and keeps nothing: positions on
 * disk stay gap-free. owner hears the shard's reports through events (shard-events.h)
 * until shard_detach(). Returns 0, -EMFILE when max_open_shards shards are open already,
 * or another negative errno; *ret is written only on success. */
int shard_open(struct daemon *d, const struct shard_ident *ident, void *owner,
               const struct shard_events *events, struct shard **ret);

/* Makes room in the filling batch for about bytes more of records (as
 * many as fit in the shard's max_shard_bytes), so that a frame's records go
 * in without growing the batch piece by piece. A hint: returns 0, or
 * -ENOMEM, after which appending still works as far as memory allows. */
int shard_reserve(struct shard *s, size_t bytes);

/* Adds one record received at timestamp_ns to the filling batch.
 * Returns 0, -ENOMEM, or the shard's write error once it has one. */
int shard_append(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns);

/* Like shard_append(), for a shard of a source that is not a client
 * (version 4): the record carries its sender's kernel credentials. */
int shard_append_creds(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns,
                       const struct shard_creds *creds);

/* What syncs the shard's writes, for messages: "fdatasync", "syncfs" (a
 * shared sync of the spool's file system, which covered the shard) or
 * "shared fdatasync" (one-flush); after a sync failed, the step that
 * failed (a write-back, the fdatasync of the space prepared ahead...). */
const char *shard_sync_name(const struct shard *s);

/* Records of this shard that count as acknowledged under its way of
 * syncing. */
uint64_t shard_records_acked(const struct shard *s);

/* Whether every write waits for an fdatasync before its records count
 * (SHARD_SYNC_EACH_WRITE), rather than count once written. */
bool shard_syncs_each_write(const struct shard *s);

/* What sealing keeps of the shard, in records and in bytes: everything
 * written, or after a failed fdatasync only what earlier syncs proved. */
uint64_t shard_records_kept(const struct shard *s);
uint64_t shard_bytes_kept(const struct shard *s);

/* Bytes accepted but not yet written. */
uint64_t shard_unwritten_bytes(const struct shard *s);

/* Memory the shard's batch buffers hold (their capacity, which is what the
 * daemon's RSS pays for): at least shard_unwritten_bytes(), and 0 once the
 * shard has nothing left to write. */
uint64_t shard_buffer_bytes(const struct shard *s);

/* Whether every record handed to the shard has been written and, under
 * batch and always, synced: nothing is in flight for it. */
bool shard_settled(const struct shard *s);

/* The owner is going away: it hears no more reports. */
void shard_detach(struct shard *s);

/* Seals the shard once its pending writes are done: fdatasync, rename into
 * done/, fsync both directories; then frees it. A shard whose header was
 * never written whole (a full disk at its first write) holds no record and
 * is removed from active/ instead: nothing without a header reaches done/.
 * The shard takes no more records. The caller must not use s afterwards
 * unless it stays attached and waits for its callbacks, which stop once
 * sealing starts. */
void shard_seal(struct shard *s);

/* The before-submit hook: queues the next chain of file creates (when the
 * one before it has ended) and a write for every dirty shard. */
void shard_write_dirty(void *daemon);

/* For SHARD_SYNC_INTERVAL shards: queues an fdatasync for every one whose
 * written data has waited at least half of fsync_interval. */
void shard_sync_due(struct daemon *d);

/* Used by seal.c once the seal chain has finished (err 0 or negative).
 * Reports it (the sealed event), then frees the shard. */
void shard_sealed(struct shard *s, int err);

/* Where an ended seal left the shard's file (for whoever hears of it). */
enum seal_outcome shard_seal_outcome(const struct shard *s);

/* Name of the shard file for messages: active/<tmp_name>. */
const char *shard_display_name(const struct shard *s);
