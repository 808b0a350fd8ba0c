/* A buddy allocator over one reserved, huge-page backed region: where the
 * daemon's large buffers (batch and receive buffers of 64 KiB and more,
 * memory.c) come from.
 *
 * Why: every page a buffer touches for the first time is a page fault,
 * and on virtual machines a 4 KiB fault can cost 10 to 15 us (measured on
 * the development machine, docs/BENCHMARKS.md); a burst that fills a few
 * dozen megabytes of fresh buffers then spends a fifth of the daemon's CPU
 * faulting. In a region advised MADV_HUGEPAGE the kernel backs 2 MiB at a
 * time, 0.3 us per 4 KiB there. Free blocks are powers of two from 64 KiB
 * (one granule) up, so that freed neighbours merge and the region does not
 * fragment; an allocation takes whole granules, what it leaves of the
 * block it is cut from staying free. The lowest free block that fits is
 * taken, so the blocks in use stay packed at the region's start, over
 * pages already backed, and the rest is never touched: taken last in,
 * first out instead, a thousand producers' buffers spread over the whole
 * region, and the daemon zeroed twice the huge pages.
 *
 * What is freed stays resident up to keep_bytes; past that, once no more
 * than keep_bytes is in use, a freed block of 2 MiB or more (whole huge
 * pages) is given back (MADV_DONTNEED).
 *
 * Nothing here locks: one thread (the loop) owns an arena. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARENA_GRANULE_SHIFT 16u /* 64 KiB: the smallest block */
#define ARENA_MAX_ORDERS 32u

struct arena {
    unsigned char *base; /* NULL: no arena (never made, or it failed) */
    unsigned char *mapping;
    size_t mapping_size;
    size_t size;                 /* a power of two, from base */
    unsigned orders;             /* block orders 0 .. orders - 1 */
    size_t granules;
    /* Per granule: at a free block's first granule its order plus 1, at
     * an allocation's first granule 0xff (0: neither); a free block's list
     * links (an allocation's granule count in next); whether its pages may
     * be resident. */
    uint8_t *head;
    int32_t *next, *prev;
    uint8_t *resident;
    int32_t free_list[ARENA_MAX_ORDERS]; /* -1: empty */
    size_t used_bytes;           /* in allocated blocks */
    size_t resident_free_bytes;  /* in free blocks, maybe resident */
    size_t keep_bytes;
};

/* Reserves size bytes of address space (rounded down to a power of two,
 * at least one granule) and asks for huge pages on it. Reserving costs no
 * memory: pages are backed when a block is first written. Returns 0, or
 * -ENOMEM (the arena stays empty: arena_alloc() then always fails). */
int arena_init(struct arena *a, size_t size, size_t keep_bytes);

/* Backs the region's first bytes (rounded up to whole huge pages, at most
 * the whole region) with memory now, as first writes would later. The
 * lowest free blocks are taken first, so these are the pages a burst's
 * buffers land on: a daemon that does this at start does not stop in its
 * first burst to fault them in (a fresh huge page cost 5 ms on the
 * development machine). They count as resident free memory, which stays
 * while no more than keep_bytes of it is free. Only before the first
 * arena_alloc(). Returns 0, -EINVAL when there is no region or blocks
 * were allocated already, or madvise(MADV_POPULATE_WRITE)'s error
 * (-EINVAL before Linux 5.14, -ENOMEM when memory ran out): pages not
 * backed then come at their first write, as without the call. */
int arena_populate(struct arena *a, size_t bytes);

/* Unmaps the region and frees the bookkeeping; a second call does nothing. */
void arena_destroy(struct arena *a);

/* Whether the transparent huge pages of this kernel would back an arena
 * (/sys/kernel/mm/transparent_hugepage/enabled is "always" or "madvise").
 * Without them an arena only rounds sizes up. */
bool arena_huge_pages_available(void);

/* Whether p points into the arena's region. */
bool arena_owns(const struct arena *a, const void *p);

/* A block of at least n bytes (n > 0), its size (n rounded up to whole
 * granules) in *ret_size, or NULL when no free block is that large. */
void *arena_alloc(struct arena *a, size_t n, size_t *ret_size);

/* The size of the allocated block that starts at p, as arena_alloc() gave
 * it. */
size_t arena_block_size(const struct arena *a, const void *p);

/* Gives back the allocated block that starts at p. */
void arena_free(struct arena *a, void *p);
