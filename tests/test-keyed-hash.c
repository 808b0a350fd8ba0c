/* The keyed hash (common/keyed_hash.h): the same key gives the same hash,
 * another key another one, every byte and the length count, and names
 * that differ in one byte spread over the buckets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "keyed_hash.h"

static void test_deterministic_and_keyed(void **state)
{
    struct keyed_hash a = { { 1, 2 } }, b = { { 1, 3 } };
    const char *s = "sshd.u0";

    (void)state;
    assert_true(keyed_hash_bytes(&a, s, strlen(s)) == keyed_hash_bytes(&a, s, strlen(s)));
    assert_true(keyed_hash_bytes(&a, s, strlen(s)) != keyed_hash_bytes(&b, s, strlen(s)));
}

static void test_every_byte_and_the_length(void **state)
{
    struct keyed_hash k = { { 0x1234, 0x5678 } };
    char buf[40];
    uint64_t base;

    (void)state;
    memset(buf, 'x', sizeof(buf));
    base = keyed_hash_bytes(&k, buf, sizeof(buf));
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = 'y';
        assert_true(keyed_hash_bytes(&k, buf, sizeof(buf)) != base);
        buf[i] = 'x';
    }
    /* A trailing NUL is not the end of the key. */
    assert_true(keyed_hash_bytes(&k, "a", 1) != keyed_hash_bytes(&k, "a\0", 2));
    assert_true(keyed_hash_bytes(&k, "", 0) != keyed_hash_bytes(&k, "\0", 1));
    for (size_t len = 0; len < 17; len++)
        assert_true(keyed_hash_bytes(&k, buf, len) != keyed_hash_bytes(&k, buf, len + 1));
}

/* 64 Ki names of the form a producer takes (ident<N>.u0) into 4096
 * buckets: about 16 each; no bucket far above it. */
static void test_spread(void **state)
{
    static unsigned counts[4096];
    struct keyed_hash k;
    unsigned max = 0;

    (void)state;
    keyed_hash_init(&k);
    for (unsigned i = 0; i < 65536; i++) {
        char name[32];
        int n = snprintf(name, sizeof(name), "ident%u.u0", i);
        counts[keyed_hash_bytes(&k, name, (size_t)n) & 4095]++;
    }
    for (unsigned b = 0; b < 4096; b++)
        if (counts[b] > max)
            max = counts[b];
    if (max > 48)
        fail_msg("a bucket holds %u of 65536 names over 4096 buckets (16 expected)", max);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deterministic_and_keyed),
        cmocka_unit_test(test_every_byte_and_the_length),
        cmocka_unit_test(test_spread),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
