/* The daemon's memory budget: what producers can make it hold (receive
 * buffers and shard batch buffers), checked against memory_limit_bytes for
 * the whole daemon and session_buffer_bytes for each session.
 *
 * memory.c is the one place that changes the count (d->memory_bytes) and
 * the pool of released batch buffers (d->batch_pool), and the one place
 * that reads the two limits; everyone else asks through these calls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"

struct daemon;

/* Released batch and receive buffers kept for reuse: mapped memory whose
 * pages are already there, so a new burst does not fault them in again.
 * Slots for as many buffers as a tick's reading fills (session-recv.c):
 * a tick reads 4 MiB, and producers that flush every 64 records of 128
 * bytes send frames of 9 KiB, so a tick fills a buffer each for about 450
 * shards. With 128 slots, 1,000 such producers had the daemon unmap and
 * map a buffer for most frames: 16% of its time in munmap, most of it the
 * TLB shootdowns, and an eighth to a fifth fewer records/s
 * (docs/BENCHMARKS.md). The pool's bytes do not count towards
 * memory_limit_bytes: nobody holds them. Buffers of ARENA_MIN_BYTES and
 * more come from the arena instead, which keeps as many freed bytes
 * resident. */
#define BATCH_POOL_SLOTS 1024u
#define BATCH_POOL_MAX_BYTES (64u * 1024u * 1024u)
/* Smaller buffers are many (one per shard and unfinished frame, with a
 * thousand producers) and mostly empty: in the arena each would hold a
 * block of 64 KiB, backed by huge pages. */
#define ARENA_MIN_BYTES (128u * 1024u)
/* The arena holds the buffers of a burst, not of a daemon held at its
 * limit: with 1,000 producers writing without a pause, an arena of twice
 * memory_limit_bytes was all resident (530 MiB) and its huge pages were
 * given back and zeroed again over and over. Past 64 MiB, buffers are
 * mappings as before. */
#define ARENA_MAX_BYTES ((size_t)64 << 20)
/* Freed arena bytes that stay resident. Huge pages are resident whole, so
 * the arena keeps less than the pool: with 1,000 producers 64 MiB took the
 * daemon's peak RSS from 42 to about 60 MiB, 32 MiB to about 48, and with
 * 64 producers 32 MiB was as fast as 64 (docs/BENCHMARKS.md). */
#define ARENA_KEEP_BYTES (32u * 1024u * 1024u)
struct batch_pool {
    struct {
        unsigned char *buf;
        size_t cap;
    } slot[BATCH_POOL_SLOTS];
    unsigned n;
    size_t bytes;
    bool arena_tried;
    struct arena arena;
};

/* Grows the buffer *buf of *cap bytes (NULL and 0: none yet) so that it
 * holds at least need bytes: an arena block for want bytes (want >= need;
 * the caller's growth policy), whose capacity is want rounded up to whole
 * arena granules, else a buffer from the pool when there is none yet and
 * the pool has one that fits, else a mapping of want bytes. The contents up
 * to the old capacity are kept. Returns 0 or -ENOMEM; *buf and *cap change
 * only on success. */
int memory_map_grow(struct daemon *d, unsigned char **buf, size_t *cap, size_t need,
                    size_t want);

/* Gives a buffer from memory_map_grow() back (to the arena, to the pool,
 * or to the kernel when the pool is full) and sets *buf and *cap to NULL
 * and 0. */
void memory_map_release(struct daemon *d, unsigned char **buf, size_t *cap);

/* Makes the arena at start, before the first producer, and backs the part
 * of it that a burst's buffers land on (arena_populate): as much as stays
 * resident once freed (ARENA_KEEP_BYTES), at most memory_limit_bytes. A
 * daemon that has had a burst keeps those pages anyway; backed at start
 * they are not faulted in, huge page by huge page, while the first
 * producers wait (80 ms of a 64-producer run on the development
 * machine, docs/BENCHMARKS.md). Returns 0, or a negative errno (-ENOMEM:
 * no arena, the kernel has no transparent huge pages or no room for the
 * region; -EINVAL: a kernel before 5.14); either way buffers work as
 * before, their pages faulted in when first written. */
int memory_prepare(struct daemon *d);

/* Unmaps every pooled buffer and the arena (at exit). */
void memory_pool_drain(struct daemon *d);

/* Heap memory held for a producer (its receive buffer) grew by add bytes
 * and shrank by sub bytes. */
void memory_adjust(struct daemon *d, size_t add, size_t sub);

/* Of the memory counted, bytes that only their senders can release: the
 * unfinished messages of syslog stream connections paused for memory grew
 * by add and shrank by sub. They count towards memory_limit_bytes, but do
 * not keep anyone from reading again (memory_daemon_may_resume): those
 * connections are among the paused, and reading them on is what ends
 * their messages. */
void memory_adjust_stalled(struct daemon *d, size_t add, size_t sub);

/* What the daemon holds for producers now, in bytes. */
uint64_t memory_used(const struct daemon *d);

/* Whether a session that holds held bytes must stop reading: held is over
 * session_buffer_bytes, or the daemon is over memory_limit_bytes. */
bool memory_over_budget(const struct daemon *d, uint64_t held);

/* The session's part of that alone: held is over session_buffer_bytes. */
bool memory_session_over_budget(const struct daemon *d, uint64_t held);

/* Whether the daemon has fallen far enough under memory_limit_bytes (to
 * three quarters of it), stalled bytes not counted, for sessions paused
 * for memory to read again. The gap below the limit keeps a session from
 * pausing again at once. */
bool memory_daemon_may_resume(const struct daemon *d);

/* Whether a session paused for memory that holds held bytes is far enough
 * under session_buffer_bytes (at most half of it) to read again, once the
 * daemon may resume too (memory_daemon_may_resume()). */
bool memory_session_may_resume(const struct daemon *d, uint64_t held);
