/* logctl verify's view of streams (shard format version 3): which positions
 * of each producer stream it saw across every file it checked, so that it
 * can report a position seen twice (a duplicate) or missing between the
 * lowest and the highest it saw (a gap). Memory per stream is a list of
 * ranges of positions and the ids of its shards, never one entry per
 * position. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"

struct verify_streams;
struct verify_stream;

/* Returns 0 or -ENOMEM. */
int verify_streams_new(struct verify_streams **ret);
void verify_streams_free(struct verify_streams *vs);

/* A shard begins: returns the stream its records are counted in in
 * *ret (NULL for a shard without a stream), and whether this shard was
 * seen before under the same shard id (a copy: a merged file of shards
 * still in done/), whose positions are then not duplicates. Returns 0 or
 * -ENOMEM. */
int verify_streams_shard(struct verify_streams *vs, const struct shard_header *h,
                         struct verify_stream **ret, bool *ret_copy);

/* A record of that shard at position, found in path at offset (for the
 * report of the first duplicate). Returns 0 or -ENOMEM. */
int verify_streams_record(struct verify_stream *s, bool copy, uint64_t position,
                          const char *path, uint64_t offset);

/* Prints one line per stream (quiet: only the ones with a problem), as
 * text or as one JSON object per line, and returns how many streams have
 * a gap or a duplicate. */
size_t verify_streams_report(const struct verify_streams *vs, bool json, bool quiet);
