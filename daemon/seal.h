/* Sealing: the step that turns a finished temp shard into a completed one. */
#pragma once

struct shard;

/* Starts sealing a shard whose writes are all done: fdatasync the file,
 * rename it from active/ into done/, then fsync done/ and active/. Each step
 * starts only after the one before it succeeded, so an error can never leave
 * a name in done/ on data that was not synced. Calls shard_sealed() with the
 * outcome (0, or the first step's negative errno), always from an I/O
 * completion and never from within seal_start(), whose caller may still
 * use the shard. */
void seal_start(struct shard *s);
