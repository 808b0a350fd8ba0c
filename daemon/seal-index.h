/* The daemon's side of the seal index (common/seal_index.h): an entry
 * appended to <spool>/done.index for every shard it seals into done/, and
 * the file rewritten with only the entries of shards still in done/ (merge
 * --delete, logctl prune and the shipper remove shards behind the daemon's
 * back): once at start, before the first seal, and then whenever the
 * entries appended since the last rewrite outnumber those it kept (and
 * SEAL_INDEX_REWRITE_MIN), in the thread pool, so the file stays within
 * about twice what done/ holds.
 *
 * The index only spares readers work, so nothing about it stops or slows
 * the daemon's main job: the loop only collects entries, and the thread
 * pool appends them, one job at a time (an append, or a rewrite, after
 * which what waits goes to the new file), so that a write the kernel
 * throttles never holds up the loop; appends are never synced; a file that cannot
 * be written is logged (each distinct failure once) and left alone until
 * the next rewrite, which replaces it. Shards that recovery seals at start
 * get no entry; readers open those as before. */
#pragma once

#include <stdint.h>

struct daemon;

/* Entries appended since the last rewrite that start the next one, at
 * the least. */
#define SEAL_INDEX_REWRITE_MIN 4096u

/* Rewrites the index with the entries of shards still in done/ and opens
 * it for appending; called once, after recovery. Failures are logged and
 * leave the index off until the next rewrite. Returns 0 or -ENOMEM. */
int seal_index_start(struct daemon *d);

/* Notes that shard file fd was sealed into done/ as done_name, created at
 * created_ns (its header's time), none of its records received after
 * newest_ns (its trailer's). */
void seal_index_note(struct daemon *d, const char *done_name, int fd, uint64_t created_ns,
                     uint64_t newest_ns);

/* Closes the index once the entries that wait are appended. */
void seal_index_stop(struct daemon *d);
