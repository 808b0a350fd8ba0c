/* The shipper's record in the spool of how far each stream is shipped
 * (docs/SHIP.md, "The spool's side"): <spool>/ship/progress.
 *
 * Kafka holds the truth about what is shipped: the progress topic, written
 * in the same transactions as the records. This file is the spool's copy
 * of it, written only after a transaction committed, so it never claims
 * more than Kafka has; logctl merge --delete and the shipper's own deletes
 * read it to remove only what is shipped. Its text is a stream positions
 * file (stream_positions.h): one line per stream with the position after
 * the last shipped record.
 *
 * A shard without a stream (format versions 1 and 2, or version 3 without
 * one) is a stream of its own here: ship_stream_key() gives it an id made
 * from its shard id, and its records' positions are their indexes.
 *
 * No state, no logging; functions return 0 or a negative errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"
#include "stream_positions.h"

/* The shipper's directory in the spool and its files. */
#define SHIP_DIR "ship"
#define SHIP_PROGRESS_FILE "progress"
#define SHIP_PROGRESS_TMP ".progress.tmp"
#define SHIP_LOCK_FILE "lock"       /* flock: one shipper per spool */
#define SHIP_ID_FILE "id"           /* the transactional.id made for the spool */
#define SHIP_STATUS_FILE "status.json" /* logctl ship --status reads it */

/* The first 8 bytes of the id ship_stream_key() gives a shard without a
 * stream; a random stream id starts so with probability 2^-64. */
#define SHIP_SHARD_KEY_PREFIX 0xffu

/* The stream id progress is kept under for the shards of header h: its
 * stream, or for a shard without one, 8 bytes of SHIP_SHARD_KEY_PREFIX
 * and its shard id (big-endian). */
void ship_stream_key(const struct shard_header *h, uint8_t ret_id[SHARD_STREAM_ID_SIZE]);

/* The position of a shard's first record in the stream of
 * ship_stream_key(): first_position, or 0 for a shard without a stream. */
uint64_t ship_first_position(const struct shard_header *h);

/* Reads <spool>/ship/progress (spool_fd: the spool directory). Returns 0
 * with the entries sorted by stream id in *ret_v (free() it) and their
 * count in *ret_n; -ENOENT when the spool has no such file (it was never
 * shipped: nothing is held back for a shipper); -EBADMSG when it is
 * damaged, with *ret_why (static) when not NULL; or another negative
 * errno when it cannot be read. */
int ship_progress_load(int spool_fd, struct positions_entry **ret_v, size_t *ret_n,
                       const char **ret_why);

/* Replaces <spool>/ship/progress with the n entries (any order; sorted
 * here), durably: ship/ is made (0750) when missing, a temp file written
 * and fdatasynced, renamed over the old file and ship/ fsynced. Returns 0,
 * -EINVAL for an entry positions_format refuses, or the errno of the step
 * that failed (the old file then stays as it was). */
int ship_progress_store(int spool_fd, struct positions_entry *v, size_t n);

/* The next unshipped position of the stream id among the n sorted entries
 * of v: 0 when it has none. */
uint64_t ship_progress_next(const struct positions_entry *v, size_t n,
                            const uint8_t id[SHARD_STREAM_ID_SIZE]);

/* Whether every record of a sealed shard (header h, records records) is
 * shipped according to the n sorted entries of v. */
bool ship_progress_covers(const struct positions_entry *v, size_t n, const struct shard_header *h,
                          uint64_t records);
