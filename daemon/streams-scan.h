/* Start-up: the stream table rebuilt from the shards in <spool>/done
 * (streams-scan.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct daemon;

struct streams_scan_stats {
    uint64_t shards;       /* version 3 shards with a stream read */
    uint64_t read_through; /* of them, without a valid seal trailer */
    uint64_t unreadable;   /* shards that could not be read (the first named below) */
    uint64_t positions_files;   /* stream positions files of streams/ read */
    uint64_t positions_expired; /* their entries past the resume window */
    uint64_t streams;      /* streams in the table afterwards */
    char first_unreadable[512];
};

/* Adds every stream of a sealed shard in done/ to the table with the
 * position after its last record there, and every stream of the positions
 * files in streams/ (compacting them into one, a damaged one moved to
 * quarantine/), then forgets what is past the resume window. Blocking: for start-up, after recovery and before
 * listening. Returns 0 and fills *ret_stats (may be NULL), or a negative
 * errno with a message in why when done/ or streams/ cannot be read or memory runs out;
 * an unreadable shard is counted, not an error. */
int streams_scan(struct daemon *d, struct streams_scan_stats *ret_stats, char *why,
                 size_t why_len);
