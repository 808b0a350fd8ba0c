/* How a shard reports upward: the one channel from shard.c and seal.c to
 * the rest of the daemon.
 *
 * A shard has one owner, the session writing to it (until shard_detach()),
 * given to shard_open(); and the daemon has any number of subscribers
 * (shard_subscribe()) that hear about every shard: the sessions as a whole
 * (memory given back), the admin socket (rotate waits for seals), the
 * lifecycle (the drain ends when the last shard is sealed). Both get their
 * reports through the same table; a member left NULL is a report that
 * listener does not want. Subscribers hear a report before the owner. */
#pragma once

#include "list.h"

struct daemon;
struct shard;

struct shard_events {
    /* shard_records_acked() grew, or the shard became settled. */
    void (*written)(void *data, struct shard *s);
    /* A write or fdatasync failed with err; the shard takes no more
     * records. */
    void (*failed)(void *data, struct shard *s, int err);
    /* The shard gave its batch buffers back: memory counted against
     * memory_limit_bytes is free again. */
    void (*released)(void *data, struct shard *s);
    /* The seal ended: err 0 when the file is in done/ or quarantine/
     * (shard_seal_outcome() says which), else a negative errno (the file
     * was left in active/ for recovery, or removed because it held no
     * record). The shard is off d->shards already and is freed once every
     * listener has returned. */
    void (*sealed)(void *data, const struct shard *s, int err);
};

/* A listener for every shard of the daemon; the subscriber owns it and
 * keeps it alive while subscribed. */
struct shard_subscriber {
    struct list_node node; /* d->shard_subscribers */
    const struct shard_events *events;
    void *data;
};

/* Adds sub (with the given table and data) to the daemon's listeners. */
void shard_subscribe(struct daemon *d, struct shard_subscriber *sub,
                     const struct shard_events *events, void *data);

/* Removes sub; it hears nothing more. Safe to call when not subscribed,
 * and from within a report. */
void shard_unsubscribe(struct shard_subscriber *sub);
