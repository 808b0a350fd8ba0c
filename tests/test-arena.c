/* The buddy arena (daemon/arena.c): sizes, merging, exhaustion, what stays
 * resident, and many random allocations that must never overlap. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../daemon/arena.h"

#define KIB ((size_t)1024)
#define MIB (1024 * KIB)

static void test_sizes(void **state)
{
    struct arena a;
    size_t size = 0;
    void *p, *q;

    (void)state;
    assert_int_equal(arena_init(&a, 8 * MIB, 8 * MIB), 0);
    p = arena_alloc(&a, 1, &size);
    assert_non_null(p);
    assert_int_equal(size, 64 * KIB);
    assert_int_equal(arena_block_size(&a, p), 64 * KIB);
    assert_true(arena_owns(&a, p));
    assert_true(arena_owns(&a, (char *)p + 64 * KIB - 1));
    assert_false(arena_owns(&a, &size));
    q = arena_alloc(&a, 65 * KIB, &size);
    assert_non_null(q);
    assert_int_equal(size, 128 * KIB);
    /* Allocations start where a power-of-two block would. */
    assert_int_equal(((uintptr_t)q - (uintptr_t)a.base) % (128 * KIB), 0);
    memset(p, 0xab, 64 * KIB);
    memset(q, 0xcd, 128 * KIB);
    assert_int_equal(((unsigned char *)p)[64 * KIB - 1], 0xab);
    assert_int_equal(a.used_bytes, 192 * KIB);
    arena_free(&a, p);
    arena_free(&a, q);
    assert_int_equal(a.used_bytes, 0);
    arena_destroy(&a);
    arena_destroy(&a); /* a second time does nothing */
}

/* An allocation takes whole granules, not a power of two: what is left of
 * the block it was cut from can be had by others, and freeing it merges
 * everything back. */
static void test_granules(void **state)
{
    struct arena a;
    size_t size;
    void *five, *three, *all;

    (void)state;
    assert_int_equal(arena_init(&a, 512 * KIB, 0), 0); /* 8 granules */
    five = arena_alloc(&a, 4 * 64 * KIB + 1, &size);
    assert_non_null(five);
    assert_int_equal(size, 5 * 64 * KIB);
    assert_int_equal(arena_block_size(&a, five), 5 * 64 * KIB);
    assert_int_equal(a.used_bytes, 5 * 64 * KIB);
    /* The three granules left: one of 64 KiB and one of 128 KiB. */
    assert_null(arena_alloc(&a, 3 * 64 * KIB, &size));
    three = arena_alloc(&a, 128 * KIB, &size);
    assert_non_null(three);
    assert_non_null(arena_alloc(&a, 64 * KIB, &size));
    assert_null(arena_alloc(&a, 1, &size));
    arena_free(&a, five);
    arena_free(&a, three);
    assert_null(arena_alloc(&a, 8 * 64 * KIB, &size)); /* one granule still taken */
    all = arena_alloc(&a, 7 * 64 * KIB, &size);
    assert_null(all); /* seven free, but not in one run that a block of 8 would make */
    assert_non_null(arena_alloc(&a, 4 * 64 * KIB, &size));
    arena_destroy(&a);
}

static void test_too_small(void **state)
{
    struct arena a;
    size_t size;

    (void)state;
    assert_int_equal(arena_init(&a, 4 * KIB, 0), -EINVAL);
    assert_null(arena_alloc(&a, 1, &size));
    assert_false(arena_owns(&a, &size));
    arena_destroy(&a);
}

/* A size that is not a power of two is rounded down; the whole of it can be
 * had in one block, and nothing more after that. */
static void test_exhaustion_and_merging(void **state)
{
    struct arena a;
    size_t size;
    void *all, *v[96];

    (void)state;
    assert_int_equal(arena_init(&a, 6 * MIB, 64 * MIB), 0);
    assert_int_equal(a.size, 4 * MIB);
    assert_null(arena_alloc(&a, 4 * MIB + 1, &size));
    all = arena_alloc(&a, 4 * MIB, &size);
    assert_non_null(all);
    assert_int_equal(size, 4 * MIB);
    assert_null(arena_alloc(&a, 1, &size));
    arena_free(&a, all);

    /* 64 granules one by one, then none more; freed in an order that
     * merges only at the end, and then the whole is one block again. */
    for (unsigned i = 0; i < 64; i++) {
        v[i] = arena_alloc(&a, 64 * KIB, &size);
        assert_non_null(v[i]);
    }
    assert_null(arena_alloc(&a, 1, &size));
    for (unsigned i = 0; i < 64; i += 2)
        arena_free(&a, v[i]);
    assert_null(arena_alloc(&a, 128 * KIB, &size)); /* no two free neighbours */
    for (unsigned i = 1; i < 64; i += 2)
        arena_free(&a, v[i]);
    all = arena_alloc(&a, 4 * MIB, &size);
    assert_non_null(all);
    arena_free(&a, all);
    arena_destroy(&a);
}

/* Freed bytes stay resident up to keep_bytes; past it a freed block of
 * whole huge pages goes back, a smaller one stays. */
static void test_resident(void **state)
{
    struct arena a;
    size_t size;
    void *big, *small;

    (void)state;
    assert_int_equal(arena_init(&a, 16 * MIB, 1 * MIB), 0);
    big = arena_alloc(&a, 4 * MIB, &size);
    small = arena_alloc(&a, 512 * KIB, &size);
    assert_non_null(big);
    assert_non_null(small);
    memset(big, 1, 4 * MIB);
    memset(small, 2, 512 * KIB);
    arena_free(&a, small); /* 512 KiB free: under what may stay */
    assert_int_equal(a.resident_free_bytes, 512 * KIB);
    arena_free(&a, big); /* merges; past 1 MiB, and 2 MiB or more: back */
    assert_true(a.resident_free_bytes <= 1 * MIB);
    /* Given back means zero pages when next written. */
    big = arena_alloc(&a, 4 * MIB, &size);
    assert_non_null(big);
    assert_int_equal(((unsigned char *)big)[0], 0);
    arena_free(&a, big);
    arena_destroy(&a);

    /* While more than keep_bytes is in use, nothing goes back: the load
     * that freed it takes it again. */
    assert_int_equal(arena_init(&a, 16 * MIB, 1 * MIB), 0);
    big = arena_alloc(&a, 4 * MIB, &size);
    small = arena_alloc(&a, 4 * MIB, &size);
    memset(big, 1, 4 * MIB);
    memset(small, 2, 4 * MIB);
    arena_free(&a, big);
    assert_int_equal(a.resident_free_bytes, 4 * MIB);
    arena_free(&a, small); /* nothing in use now: back */
    assert_true(a.resident_free_bytes <= 1 * MIB);
    arena_destroy(&a);

    assert_int_equal(arena_init(&a, 16 * MIB, 64 * MIB), 0);
    big = arena_alloc(&a, 4 * MIB, &size);
    memset(big, 1, 4 * MIB);
    arena_free(&a, big);
    assert_int_equal(a.resident_free_bytes, 4 * MIB); /* kept */
    big = arena_alloc(&a, 4 * MIB, &size); /* the same block: the lowest */
    assert_int_equal(a.resident_free_bytes, 0);
    arena_free(&a, big);
    arena_destroy(&a);
}

/* Of two free blocks that fit, the lower one is taken, whichever was freed
 * last: the blocks in use stay at the region's start, where the pages are
 * backed already, instead of spreading over all of it. */
static void test_lowest_block_first(void **state)
{
    unsigned char *p[6];
    struct arena a;
    size_t size;

    (void)state;
    assert_int_equal(arena_init(&a, 16 * MIB, 16 * MIB), 0);
    for (int i = 0; i < 6; i++) {
        p[i] = arena_alloc(&a, 512 * 1024, &size);
        assert_ptr_equal(p[i], a.base + (size_t)i * 512 * 1024);
    }
    arena_free(&a, p[1]);
    arena_free(&a, p[3]); /* freed last, but above p[1] */
    assert_ptr_equal(arena_alloc(&a, 512 * 1024, &size), p[1]);
    assert_ptr_equal(arena_alloc(&a, 256 * 1024, &size), p[3]);
    /* a larger block than any freed one: the lowest that is free */
    assert_ptr_equal(arena_alloc(&a, 1 * MIB, &size), a.base + 3 * MIB);
    arena_destroy(&a);
}

/* Pages of [p, p + n) in memory, from mincore. */
static size_t resident_pages(const void *p, size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), count = 0;
    unsigned char *vec = calloc(n / page, 1);

    assert_non_null(vec);
    assert_int_equal(mincore((void *)p, n, vec), 0);
    for (size_t i = 0; i < n / page; i++)
        count += vec[i] & 1;
    free(vec);
    return count;
}

/* Populating backs the region's start, in whole huge pages, and nothing
 * past it; the pages count as resident and free, and the first blocks
 * taken are among them. */
static void test_populate(void **state)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
    struct arena a;
    int r;

    (void)state;
    assert_int_equal(arena_init(&a, 16 * MIB, 32 * MIB), 0);
    assert_int_equal(resident_pages(a.base, 16 * MIB), 0);
    r = arena_populate(&a, 3 * MIB); /* rounded up to 4 MiB */
    if (r == -EINVAL) {
        arena_destroy(&a);
        skip(); /* a kernel before 5.14 */
    }
    assert_int_equal(r, 0);
    assert_int_equal(resident_pages(a.base, 4 * MIB), 4 * MIB / page);
    assert_int_equal(resident_pages(a.base + 4 * MIB, 12 * MIB), 0);
    assert_int_equal(a.resident_free_bytes, 4 * MIB);
    assert_ptr_equal(arena_alloc(&a, 1 * MIB, &size), a.base);
    assert_int_equal(a.resident_free_bytes, 3 * MIB);
    /* only before the first allocation */
    assert_int_equal(arena_populate(&a, 8 * MIB), -EINVAL);
    arena_destroy(&a);

    /* at most the whole region */
    assert_int_equal(arena_init(&a, 1 * MIB, 1 * MIB), 0);
    assert_int_equal(arena_populate(&a, 64 * MIB), 0);
    assert_int_equal(resident_pages(a.base, 1 * MIB), 1 * MIB / page);
    assert_int_equal(a.resident_free_bytes, 1 * MIB);
    arena_destroy(&a);
    /* no region */
    assert_int_equal(arena_populate(&a, 1 * MIB), -EINVAL);
}

struct live {
    unsigned char *p;
    size_t size;
    unsigned char mark;
};

/* Random sizes allocated and freed: live blocks never overlap, keep what
 * was written into them, and the count of used bytes is their sum. */
static void test_random(void **state)
{
    unsigned seed = (unsigned)time(NULL);
    struct live v[200];
    size_t n = 0, used = 0, size;
    struct arena a;

    (void)state;
    if (getenv("ARENA_SEED"))
        seed = (unsigned)strtoul(getenv("ARENA_SEED"), NULL, 10);
    printf("# seed %u (ARENA_SEED=%u repeats it)\n", seed, seed);
    srand(seed);
    assert_int_equal(arena_init(&a, 32 * MIB, 4 * MIB), 0);
    for (unsigned step = 0; step < 20000; step++) {
        if (n < 200 && (n == 0 || rand() % 3 != 0)) {
            size_t want = 1 + (size_t)rand() % (rand() % 4 == 0 ? 3 * MIB : 200 * KIB);
            unsigned char *p = arena_alloc(&a, want, &size);

            if (!p)
                continue; /* full for now */
            assert_true(size >= want);
            assert_true(size - want < 64 * KIB);
            for (size_t i = 0; i < n; i++)
                assert_true(p + size <= v[i].p || v[i].p + v[i].size <= p);
            v[n].p = p;
            v[n].size = size;
            v[n].mark = (unsigned char)(1 + step % 250);
            p[0] = v[n].mark;
            p[size - 1] = v[n].mark;
            used += size;
            n++;
        } else {
            size_t i = (size_t)rand() % n;

            assert_int_equal(v[i].p[0], v[i].mark);
            assert_int_equal(v[i].p[v[i].size - 1], v[i].mark);
            assert_int_equal(arena_block_size(&a, v[i].p), v[i].size);
            arena_free(&a, v[i].p);
            used -= v[i].size;
            v[i] = v[--n];
        }
        assert_int_equal(a.used_bytes, used);
    }
    while (n > 0)
        arena_free(&a, v[--n].p);
    assert_non_null(arena_alloc(&a, 32 * MIB, &size)); /* all merged again */
    arena_destroy(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_granules),
        cmocka_unit_test(test_too_small),
        cmocka_unit_test(test_exhaustion_and_merging),
        cmocka_unit_test(test_resident),
        cmocka_unit_test(test_lowest_block_first),
        cmocka_unit_test(test_populate),
        cmocka_unit_test(test_random),
    };

    printf("# transparent huge pages %s here\n",
           arena_huge_pages_available() ? "available" : "not available");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
