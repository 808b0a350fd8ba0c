/* The daemon's stream table: where each producer stream stands, so that a
 * library that lost its connection can resume the stream without losing or
 * duplicating a record (docs/PROTOCOL.md, "Version 2").
 *
 * A stream's stored position is the position after its last record in a
 * sealed shard: what is on disk and synced, whatever the fsync policy. It
 * grows as the stream's shards are sealed (streams_shard_sealed, from
 * shard.c) and, at start-up, from what the spool holds (streams-scan.c).
 * A resumed connection is welcomed only once the stream is quiet: no other
 * connection of it still open and none of its shards still unsealed
 * (streams_quiet), so the position it is told cannot move afterwards.
 *
 * Memory is bounded: a stream with no connection and no unsealed shard is
 * idle; idle streams are forgotten once their resume window has passed
 * (streams_expire) or, beyond max_streams, the one idle longest first. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keyed_hash.h"
#include "list.h"
#include "shard_format.h"
#include "wire.h"

struct daemon;

struct stream {
    uint8_t id[SHARD_STREAM_ID_SIZE];
    uint64_t stored;     /* every position below it is in a sealed shard */
    uint64_t idle_since_ns; /* CLOCK_REALTIME: when it last became idle (or
                               its newest record, for a stream found on disk) */
    uint32_t uid;
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    void *owner;         /* the connection that carries it now, or NULL */
    unsigned sessions;   /* connections naming it that are not yet freed */
    unsigned unsealed;   /* its shards not yet sealed */
    struct stream *hash_next;
    struct list_node idle_node; /* on the idle list while idle */
};

struct streams {
    struct stream **buckets;
    size_t n_buckets; /* a power of two */
    size_t count;
    struct keyed_hash hash_key;
    struct list_node idle; /* idle streams, longest idle first */
    uint64_t forgotten;    /* streams dropped by the window or the cap */
};

/* Sets up an empty table. Returns 0 or -ENOMEM. */
int streams_init(struct daemon *d);
/* Frees every entry. */
void streams_free(struct daemon *d);

/* The stream with this id, or NULL. */
struct stream *streams_find(struct daemon *d, const uint8_t *id);

/* Adds a new stream (stored 0, no connection yet). Over max_streams, the
 * stream idle longest is forgotten first. Returns 0 and *ret, -EEXIST when
 * the id is known, or -ENOMEM. */
int streams_add(struct daemon *d, const uint8_t *id, const char *producer, uint32_t uid,
                struct stream **ret);

/* What the spool says of a stream (start-up): its records below next are
 * stored, the newest received at newest_ns. Adds the stream or raises its
 * position. Returns 0 or -ENOMEM. */
int streams_note_stored(struct daemon *d, const uint8_t *id, const char *producer,
                        uint32_t uid, uint64_t next, uint64_t newest_ns);

/* Orders the idle list by age once the start-up scan has added streams in
 * the order it found them, then forgets what is past its window. */
void streams_loaded(struct daemon *d);

/* A connection names the stream (it becomes its owner; an earlier owner
 * is the caller's to end) and lets go of it when it is freed. */
void streams_claim(struct daemon *d, struct stream *st, void *owner);
void streams_release(struct daemon *d, struct stream *st, void *owner);

/* Whether owner may be told the stream's position: it owns it, no other
 * connection of it is left and every shard of it is sealed. */
bool streams_quiet(const struct stream *st, const void *owner);

/* A shard of stream id was opened; it was sealed (or removed) keeping
 * records records from first_position on. Unknown ids are ignored (a
 * version 1 connection's stream, which nobody can resume). */
void streams_shard_opened(struct daemon *d, const uint8_t *id);
void streams_shard_sealed(struct daemon *d, const uint8_t *id, uint64_t first_position,
                          uint64_t records);

/* Forgets the idle streams whose resume window has passed. */
void streams_expire(struct daemon *d);

/* The stream id as 32 hex digits, for messages; buf holds 33 bytes. */
const char *streams_id_hex(const uint8_t *id, char *buf);
