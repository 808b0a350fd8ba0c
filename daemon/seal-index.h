/* The daemon's side of the seal index (common/seal_index.h): an entry
 * appended to <spool>/done.index for every shard it seals into done/, and
 * the file rewritten with only the entries of shards still in done/ under
 * the same inode (merge --delete, logctl prune and the shipper remove
 * shards behind the daemon's back):
 *  - first at start, which also gives an entry, read from the file's own
 *    header and trailer, to each shard of done/ that has none (sealed by
 *    recovery or before the index existed, or its file replaced), and
 *    replaces whatever else is under the index's name (a torn tail,
 *    damage, a planted link);
 *  - then whenever the entries appended since the last rewrite outnumber
 *    those it kept (and SEAL_INDEX_REWRITE_MIN), so the file stays within
 *    about twice what done/ holds.
 *
 * The index only spares readers work, so nothing about it stops or slows
 * the daemon's main job. The loop only collects entries; the thread pool
 * appends them and rewrites the file, one job at a time (what waits
 * during a rewrite goes to the new file), so a write the kernel throttles
 * never holds up the loop, and a rewrite that reads many shards gives up
 * when the daemon stops. Appends are never synced. A file that cannot be
 * written is logged (each distinct failure once) and left alone until the
 * next rewrite, which replaces it. */
#pragma once

#include <stdint.h>

struct daemon;

/* Entries appended since the last rewrite that start the next one, at
 * the least. */
#define SEAL_INDEX_REWRITE_MIN 4096u

/* Opens the index for appending and starts the first rewrite; called
 * once, after recovery. Failures are logged and leave the index off until
 * the next rewrite. Returns 0 or -ENOMEM. */
int seal_index_start(struct daemon *d);

/* Notes that shard file fd was sealed into done/ as done_name, created at
 * created_ns (its header's time), none of its records received after
 * newest_ns (its trailer's). */
void seal_index_note(struct daemon *d, const char *done_name, int fd, uint64_t created_ns,
                     uint64_t newest_ns);

/* Closes the index once the entries that wait are appended. */
void seal_index_stop(struct daemon *d);
