/* The order in which readers present the shards of a producer stream
 * (logctl cat, logctl merge): within each stream by the position of the
 * shard's first record, everything else where it already was.
 *
 * Shard ids come from the clock, so the order of names is usually the
 * order of positions too, but not always: a daemon whose clock went
 * backwards after a restart, a merged file read with sealed shards, files
 * given in another order. The rule here needs nothing but the shards'
 * headers: the shards of one stream trade places among themselves, so that
 * the places the stream had in the given order are filled in position
 * order, and a shard without a stream, or of another stream, keeps its
 * place. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"

struct shard_order_key {
    const char *producer; /* streams of different producers are different */
    bool has_stream;      /* shard_header_has_stream() */
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t first_position;
};

/* keys[i] describes the shard at place i of the given order. Fills
 * ret_order (n entries) with the new order: ret_order[k] is the index of
 * the shard that goes to place k. Within a stream, shards go by
 * first_position, and equal positions (a copy of a shard) by their given
 * places; every place of a shard without a stream maps to itself. Returns 0
 * or -ENOMEM. */
int shard_order_streams(const struct shard_order_key *keys, size_t n, size_t *ret_order);
