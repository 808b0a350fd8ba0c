/* Sealing: the step that turns a finished temp shard into a completed one. */
#pragma once

struct shard;

/* Queues the seal chain for a shard whose writes are all done: fdatasync the
 * file, rename it from active/ into done/, fsync done/, fsync active/. Each
 * step runs only if the one before succeeded (linked requests), so a crash
 * or an error can never leave a name in done/ on data that was not synced.
 * Calls shard_sealed() with the outcome. */
void seal_start(struct shard *s);
