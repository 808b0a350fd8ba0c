/* The buddy arena (arena.h). Its bookkeeping lives in arrays beside the
 * region, one entry per granule, never in the blocks themselves: a free
 * block that was never written stays unbacked, and writing a list link into
 * it would back a whole huge page. */
#include "arena.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define GRANULE ((size_t)1 << ARENA_GRANULE_SHIFT)
#define HUGE_PAGE ((size_t)2 << 20)

/* head[] values: 0 for no block head, ALLOCATED at the first granule of
 * an allocation (its granule count in next[]), else a free block's order
 * plus 1. */
#define ALLOCATED 0xffu

static uint8_t free_head(unsigned order)
{
    return (uint8_t)(order + 1u);
}

static bool is_free_head(uint8_t v, unsigned order)
{
    return v == free_head(order);
}

static void list_push(struct arena *a, size_t g, unsigned order)
{
    int32_t first = a->free_list[order];

    a->head[g] = free_head(order);
    a->prev[g] = -1;
    a->next[g] = first;
    if (first >= 0)
        a->prev[first] = (int32_t)g;
    a->free_list[order] = (int32_t)g;
}

static void list_remove(struct arena *a, size_t g, unsigned order)
{
    if (a->prev[g] >= 0)
        a->next[a->prev[g]] = a->next[g];
    else
        a->free_list[order] = a->next[g];
    if (a->next[g] >= 0)
        a->prev[a->next[g]] = a->prev[g];
    a->head[g] = 0;
}

/* Bytes of the granules from g, count of them, that may be resident. */
static size_t resident_bytes(const struct arena *a, size_t g, size_t count)
{
    size_t n = 0;

    for (size_t i = 0; i < count; i++)
        n += a->resident[g + i];
    return n * GRANULE;
}

int arena_init(struct arena *a, size_t size, size_t keep_bytes)
{
    size_t granules;
    unsigned orders = 1;

    memset(a, 0, sizeof(*a));
    for (unsigned i = 0; i < ARENA_MAX_ORDERS; i++)
        a->free_list[i] = -1;
    if (size < GRANULE)
        return -EINVAL;
    while (orders < ARENA_MAX_ORDERS && (GRANULE << orders) <= size)
        orders++;
    size = GRANULE << (orders - 1);
    granules = size / GRANULE;

    /* One huge page more than asked for, so that base can sit on a huge
     * page's boundary: blocks of 2 MiB and more are then whole huge pages. */
    a->mapping_size = size + HUGE_PAGE;
    a->mapping = mmap(NULL, a->mapping_size, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (a->mapping == MAP_FAILED) {
        a->mapping = NULL;
        return -ENOMEM;
    }
    a->head = calloc(granules, sizeof(*a->head));
    a->resident = calloc(granules, sizeof(*a->resident));
    a->next = malloc(granules * sizeof(*a->next));
    a->prev = malloc(granules * sizeof(*a->prev));
    if (!a->head || !a->resident || !a->next || !a->prev) {
        arena_destroy(a);
        return -ENOMEM;
    }
    a->base = (unsigned char *)(((uintptr_t)a->mapping + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1));
    /* A kernel without transparent huge pages refuses: the arena works
     * the same, on small pages. */
    (void)madvise(a->base, size, MADV_HUGEPAGE);
    a->size = size;
    a->orders = orders;
    a->granules = granules;
    a->keep_bytes = keep_bytes;
    list_push(a, 0, orders - 1);
    return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

int arena_populate(struct arena *a, size_t bytes)
{
    if (!a->base || a->used_bytes != 0)
        return -EINVAL;
    bytes = (bytes + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    if (bytes > a->size)
        bytes = a->size;
    if (bytes == 0)
        return 0;
    /* The kernel writes the pages; nothing here touches the (poisoned)
     * free blocks. */
    if (madvise(a->base, bytes, MADV_POPULATE_WRITE) != 0)
        return -errno;
    for (size_t g = 0; g < bytes / GRANULE; g++) {
        if (!a->resident[g]) {
            a->resident[g] = 1;
            a->resident_free_bytes += GRANULE;
        }
    }
    return 0;
}

void arena_destroy(struct arena *a)
{
    if (a->mapping)
        (void)munmap(a->mapping, a->mapping_size); /* ours; cannot fail */
    free(a->head);
    free(a->resident);
    free(a->next);
    free(a->prev);
    memset(a, 0, sizeof(*a));
    for (unsigned i = 0; i < ARENA_MAX_ORDERS; i++)
        a->free_list[i] = -1;
}

bool arena_huge_pages_available(void)
{
    char line[256] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "re");

    if (!f)
        return false;
    if (!fgets(line, sizeof(line), f))
        line[0] = '\0';
    fclose(f);
    return strstr(line, "[always]") || strstr(line, "[madvise]");
}

bool arena_owns(const struct arena *a, const void *p)
{
    const unsigned char *c = p;

    return a->base && c >= a->base && c < a->base + a->size;
}

/* The largest order of a block that can start at granule g and end at or
 * before end. */
static unsigned fitting_order(const struct arena *a, size_t g, size_t end)
{
    unsigned order = 0;

    while (order + 1 < a->orders && (g & (((size_t)2 << order) - 1)) == 0 &&
           g + ((size_t)2 << order) <= end)
        order++;
    return order;
}

/* Frees the block of 2^order granules at g: merged with its buddy while
 * that is free too; a merged block of whole huge pages is given back when
 * more than keep_bytes is free and resident. */
static void free_block(struct arena *a, size_t g, unsigned order)
{
    size_t block;

    while (order + 1 < a->orders) {
        size_t buddy = g ^ ((size_t)1 << order);

        if (!is_free_head(a->head[buddy], order))
            break;
        list_remove(a, buddy, order);
        if (buddy < g)
            g = buddy;
        order++;
    }
    list_push(a, g, order);
    block = GRANULE << order;
    /* A smaller block would split the huge page it sits in, and stays.
     * Nothing goes back while more than keep_bytes is in use: under a
     * sustained load blocks are freed and taken again all the time, and
     * each huge page given back was zeroed again when next taken (a
     * quarter of the daemon's CPU with 1,000 producers). */
    if (a->resident_free_bytes > a->keep_bytes && a->used_bytes <= a->keep_bytes &&
        block >= HUGE_PAGE) {
        size_t count = (size_t)1 << order;

        a->resident_free_bytes -= resident_bytes(a, g, count);
        memset(a->resident + g, 0, count);
        (void)madvise(a->base + g * GRANULE, block, MADV_DONTNEED); /* ours; cannot fail */
    }
}

/* Frees the granules [g, end) as the blocks they decompose into. */
static void free_run(struct arena *a, size_t g, size_t end)
{
    while (g < end) {
        unsigned order = fitting_order(a, g, end);

        free_block(a, g, order);
        g += (size_t)1 << order;
    }
}

void *arena_alloc(struct arena *a, size_t n, size_t *ret_size)
{
    size_t need, g, bytes;
    unsigned order = 0, j;
    void *p;

    if (!a->base || n == 0 || n > a->size)
        return NULL;
    need = (n + GRANULE - 1) / GRANULE;
    while (((size_t)1 << order) < need)
        order++;
    /* The lowest free block large enough, of any order: the blocks in use
     * stay packed at the region's start, over pages already backed, and
     * the rest of it is never touched. */
    j = a->orders;
    g = 0;
    for (unsigned o = order; o < a->orders; o++)
        for (int32_t b = a->free_list[o]; b >= 0; b = a->next[b])
            if (j == a->orders || (size_t)b < g) {
                g = (size_t)b;
                j = o;
            }
    if (j >= a->orders)
        return NULL;
    list_remove(a, g, j);
    while (j > order) { /* split: the upper half stays free */
        j--;
        list_push(a, g + ((size_t)1 << j), j);
    }
    /* Granules past need go back at once, as the blocks they make: a
     * buffer of 320 KiB holds 320 KiB, not 512. None of them is a free
     * buddy of another (they grow in size towards the block's end). */
    for (size_t t = g + need; t < g + ((size_t)1 << order);) {
        unsigned o = fitting_order(a, t, g + ((size_t)1 << order));

        list_push(a, t, o);
        t += (size_t)1 << o;
    }
    a->head[g] = ALLOCATED;
    a->next[g] = (int32_t)need;
    bytes = need * GRANULE;
    a->resident_free_bytes -= resident_bytes(a, g, need);
    memset(a->resident + g, 1, need);
    a->used_bytes += bytes;
    p = a->base + g * GRANULE;
    UNPOISON(p, bytes);
    *ret_size = bytes;
    return p;
}

size_t arena_block_size(const struct arena *a, const void *p)
{
    size_t g = (size_t)((const unsigned char *)p - a->base) / GRANULE;

    return (size_t)a->next[g] * GRANULE;
}

void arena_free(struct arena *a, void *p)
{
    size_t g = (size_t)((unsigned char *)p - a->base) / GRANULE;
    size_t need = (size_t)a->next[g], bytes = need * GRANULE;

    POISON(p, bytes);
    a->head[g] = 0;
    a->used_bytes -= bytes;
    a->resident_free_bytes += bytes;
    free_run(a, g, g + need);
}
