/* The memory budget (memory.h): the count of what producers make the daemon
 * hold, the limits it is checked against, and the batch buffers' memory.
 *
 * Buffers of ARENA_MIN_BYTES and more come from the arena (arena.h): blocks
 * of a huge-page backed region, whose pages cost a fraction of small pages'
 * faults when first written and stay resident when freed (up to
 * ARENA_KEEP_BYTES). A buffer's capacity is its whole block (whole 64 KiB
 * granules); growing past it moves it to a larger one. Smaller buffers,
 * and all of them where the kernel has no transparent huge pages or the
 * arena is full, are mappings of their own, grown with mremap: growing one
 * moves page-table entries instead of copying, and leaves no hole behind.
 * Buffers carved from malloc's heap did (each growth freed the smaller
 * copy, which the heap kept), and under a sustained flood those holes added
 * about a fifth to the daemon's RSS beyond the buffers it counts. A
 * released mapping goes to a small pool, so the next burst reuses its pages
 * instead of faulting fresh ones in; beyond the pool it is unmapped, which
 * gives its memory back at once. The sessions' receive buffers (an
 * unfinished frame between reads) are such buffers too. */
#include "memory.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "config.h"
#include "daemon.h"

/* Takes a pooled buffer of at least need bytes: the first, from the most
 * recently pooled, that is no larger than want (what would be mapped
 * instead), else the smallest that fits. With a thousand slots, most of
 * them holding buffers of one size, looking through all of them for the
 * smallest was up to 6% of the daemon's time in the middle of a run. */
static bool pool_take(struct batch_pool *p, size_t need, size_t want, unsigned char **ret_buf,
                      size_t *ret_cap)
{
    unsigned best = p->n;

    for (unsigned i = p->n; i-- > 0;) {
        if (p->slot[i].cap < need)
            continue;
        if (p->slot[i].cap <= want) {
            best = i;
            break;
        }
        if (best == p->n || p->slot[i].cap < p->slot[best].cap)
            best = i;
    }
    if (best == p->n)
        return false;
    *ret_buf = p->slot[best].buf;
    *ret_cap = p->slot[best].cap;
    p->bytes -= *ret_cap;
    p->slot[best] = p->slot[--p->n];
    return true;
}

/* The arena, made at the first buffer large enough for it: twice the
 * memory limit (the limit is checked before reading, so it can be passed by
 * what one read brings), at most ARENA_MAX_BYTES. Address space only, until
 * written; when it is full, buffers are mappings of their own. */
static struct arena *arena_of(struct daemon *d)
{
    struct batch_pool *p = &d->batch_pool;

    if (!p->arena_tried) {
        size_t want = (size_t)d->config.memory_limit_bytes * 2;

        p->arena_tried = true;
        if (want > ARENA_MAX_BYTES)
            want = ARENA_MAX_BYTES;
        if (arena_huge_pages_available())
            (void)arena_init(&p->arena, want, ARENA_KEEP_BYTES);
    }
    return p->arena.base ? &p->arena : NULL;
}

int memory_prepare(struct daemon *d)
{
    struct arena *a = arena_of(d);
    size_t bytes = ARENA_KEEP_BYTES;

    if (!a)
        return -ENOMEM;
    if (bytes > d->config.memory_limit_bytes)
        bytes = (size_t)d->config.memory_limit_bytes;
    return arena_populate(a, bytes);
}

/* Gives a buffer's memory back: to the arena, the pool, or the kernel. */
static void unmap_buffer(struct daemon *d, unsigned char *buf, size_t cap)
{
    struct batch_pool *p = &d->batch_pool;

    if (arena_owns(&p->arena, buf)) {
        arena_free(&p->arena, buf);
    } else if (p->n < BATCH_POOL_SLOTS && p->bytes + cap <= BATCH_POOL_MAX_BYTES) {
        p->slot[p->n].buf = buf;
        p->slot[p->n].cap = cap;
        p->n++;
        p->bytes += cap;
    } else {
        (void)munmap(buf, cap); /* ours; cannot fail */
    }
}

int memory_map_grow(struct daemon *d, unsigned char **buf, size_t *cap, size_t need,
                    size_t want)
{
    struct arena *a;
    void *nb;

    if (need <= *cap)
        return 0;
    a = want >= ARENA_MIN_BYTES ? arena_of(d) : NULL;
    if (a) {
        size_t block;

        /* The whole block is the buffer's, and counts: what huge pages
         * back is resident whether written or not. */
        nb = arena_alloc(a, want, &block);
        if (nb) {
            if (*buf) {
                memcpy(nb, *buf, *cap);
                unmap_buffer(d, *buf, *cap);
            }
            d->memory_bytes += block - *cap;
            *buf = nb;
            *cap = block;
            return 0;
        }
    }
    if (!*buf && pool_take(&d->batch_pool, need, want, buf, cap)) {
        d->memory_bytes += *cap;
        return 0;
    }
    if (*buf && arena_owns(&d->batch_pool.arena, *buf)) {
        /* The arena is full: the buffer leaves it for a mapping. */
        nb = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (nb == MAP_FAILED)
            return -ENOMEM;
        memcpy(nb, *buf, *cap);
        arena_free(&d->batch_pool.arena, *buf);
    } else if (*buf) {
        nb = mremap(*buf, *cap, want, MREMAP_MAYMOVE);
    } else {
        nb = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    if (nb == MAP_FAILED)
        return -ENOMEM;
    d->memory_bytes += want - *cap;
    *buf = nb;
    *cap = want;
    return 0;
}

void memory_map_release(struct daemon *d, unsigned char **buf, size_t *cap)
{
    if (*buf) {
        d->memory_bytes -= *cap;
        unmap_buffer(d, *buf, *cap);
    }
    *buf = NULL;
    *cap = 0;
}

void memory_pool_drain(struct daemon *d)
{
    struct batch_pool *p = &d->batch_pool;

    while (p->n > 0) {
        p->n--;
        (void)munmap(p->slot[p->n].buf, p->slot[p->n].cap); /* ours; cannot fail */
    }
    p->bytes = 0;
    arena_destroy(&p->arena);
}

void memory_adjust(struct daemon *d, size_t add, size_t sub)
{
    d->memory_bytes += add;
    d->memory_bytes -= sub;
}

void memory_adjust_stalled(struct daemon *d, size_t add, size_t sub)
{
    d->memory_stalled_bytes += add;
    d->memory_stalled_bytes -= sub;
}

uint64_t memory_used(const struct daemon *d)
{
    return d->memory_bytes;
}

bool memory_over_budget(const struct daemon *d, uint64_t held)
{
    return memory_session_over_budget(d, held) ||
           d->memory_bytes > d->config.memory_limit_bytes;
}

bool memory_session_over_budget(const struct daemon *d, uint64_t held)
{
    return held > d->config.session_buffer_bytes;
}

bool memory_daemon_may_resume(const struct daemon *d)
{
    /* Saturating: the drain reads a paused connection on, and may give its
     * buffer back before the connection leaves the paused state. */
    uint64_t held = d->memory_bytes > d->memory_stalled_bytes
                        ? d->memory_bytes - d->memory_stalled_bytes
                        : 0;

    return held <= d->config.memory_limit_bytes / 4 * 3;
}

bool memory_session_may_resume(const struct daemon *d, uint64_t held)
{
    return held <= d->config.session_buffer_bytes / 2;
}
