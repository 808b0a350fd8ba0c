/* A shard: one producer connection's temp file in <spool>/active, appended
 * in batches through the I/O ring, then sealed into <spool>/done.
 *
 * Records are encoded into the shard's filling batch as they arrive; once per
 * loop tick every dirty shard with no write in flight swaps its filling batch
 * for the in-flight one and queues a single write of it. A shard has at most
 * one write in flight, so its file grows strictly in order and the records a
 * completion covers are exactly the batch's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "io.h"
#include "list.h"

struct daemon;
struct shard;

struct shard_ident {
    const char *producer;
    size_t producer_len;
    uint32_t uid, gid, pid;
};

/* What a shard tells its owner (the session). Neither runs after
 * shard_detach(). */
struct shard_events {
    /* records_written grew. */
    void (*written)(void *owner, struct shard *s);
    /* A write failed with err; the shard takes no more records. */
    void (*failed)(void *owner, struct shard *s, int err);
};

struct shard_batch {
    unsigned char *buf;
    size_t len, cap;
    uint64_t records;
};

struct shard {
    struct daemon *d;
    struct list_node node;       /* d->shards */
    struct list_node dirty_node; /* d->dirty_shards while records wait */
    void *owner;
    const struct shard_events *events;

    uint64_t id;
    char *tmp_name;  /* relative to d->active_fd */
    char *done_name; /* relative to d->done_fd */
    int fd;
    uint64_t created_mono_ns;

    uint64_t size_queued;  /* bytes the file will hold once all is written */
    uint64_t size_written; /* bytes known written: the next write's offset */
    uint64_t records_queued;
    uint64_t records_written;

    struct shard_batch filling;
    struct shard_batch inflight;
    struct io_req write_req;
    size_t inflight_done; /* bytes of the in-flight batch written so far */
    bool write_busy;

    bool seal_requested;
    bool sealing;
    int error; /* first write error; no records are taken after it */

    /* The seal steps: fdatasync, rename, fsync(done/), fsync(active/). */
    struct io_req seal_req[4];
    unsigned seal_completed;
    int seal_error;
    const char *seal_failed_step;
};

/* Creates <producer>.<id>.tmp in active/ (O_CREAT|O_EXCL) and queues its
 * header. Returns 0 or a negative errno; *ret is written only on success. */
int shard_open(struct daemon *d, const struct shard_ident *ident, void *owner,
               const struct shard_events *events, struct shard **ret);

/* Adds one record received at timestamp_ns to the filling batch.
 * Returns 0, -ENOMEM, or the shard's write error once it has one. */
int shard_append(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns);

/* Bytes accepted but not yet written (what the owner holds in memory). */
uint64_t shard_unwritten_bytes(const struct shard *s);

/* Whether every record handed to the shard has been written. */
bool shard_settled(const struct shard *s);

/* The owner is going away: no more callbacks. */
void shard_detach(struct shard *s);

/* Seals the shard once its pending writes are done: fdatasync, rename into
 * done/, fsync both directories; then frees it. The shard takes no more
 * records. The caller must not use s afterwards unless it stays attached and
 * waits for its callbacks, which stop once sealing starts. */
void shard_seal(struct shard *s);

/* The before-submit hook: queues a write for every dirty shard. */
void shard_write_dirty(void *daemon);

/* Used by seal.c once the seal chain has finished (err 0 or negative). */
void shard_sealed(struct shard *s, int err);

/* Name of the shard file for messages: active/<tmp_name>. */
const char *shard_display_name(const struct shard *s);
