/* Unit tests of the strict value parsers of common/config.c: sizes,
 * durations and unsigned integers, with their units, limits and the
 * whitespace they refuse. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

#include "config-fixture.h"

static void test_parse_size(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; uint64_t want; } good[] = {
        { "0", 0 }, { "1", 1 }, { "0001", 1 }, { "1B", 1 }, { "1K", KIB }, { "1k", KIB },
        { "1KB", KIB }, { "1KiB", KIB }, { "10M", 10 * MIB }, { "10MB", 10 * MIB },
        { "10MiB", 10 * MIB }, { "3G", 3 * GIB }, { "3GB", 3 * GIB }, { "3GiB", 3 * GIB },
        { "2T", 2048 * GIB }, { "2TB", 2048 * GIB }, { "2TiB", 2048 * GIB },
        { "18446744073709551615", UINT64_MAX },
        { "17179869183G", 17179869183ull * GIB },
        { "16777215T", 16777215ull * 1024 * GIB },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_size(good[i].text, &v) != 0 || v != good[i].want)
            fail_msg("parse_size(\"%s\") = %llu", good[i].text, (unsigned long long)v);
    }

    static const struct { const char *text; int rc; } bad[] = {
        { "", -EINVAL }, { "-1", -EINVAL }, { " 1", -EINVAL }, { "1x", -EINVAL },
        { "10 M", -EINVAL }, { "1 ", -EINVAL }, { "M", -EINVAL }, { "+1", -EINVAL },
        { "1.0", -EINVAL }, { "0x10", -EINVAL }, { "\t1", -EINVAL }, { "1\n", -EINVAL },
        { "1iB", -EINVAL }, { "1KiBB", -EINVAL },
        { "18446744073709551616", -ERANGE }, { "99999999999999999999999", -ERANGE },
        { "17179869184G", -ERANGE }, { "16777216T", -ERANGE }, { "18014398509481984K", -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_size(bad[i].text, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_size(\"%s\"): %d, want %d", bad[i].text, rc, bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_size(NULL, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

static void test_parse_duration(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; uint64_t want; } good[] = {
        { "0", 0 }, { "1", 1000 }, { "0ms", 0 }, { "1ms", 1 }, { "1s", 1000 }, { "1m", 60000 },
        { "1min", 60000 }, { "1h", 3600000 }, { "1d", 86400000 }, { "90s", 90000 },
        { "18446744073709551615ms", UINT64_MAX },
        { "18446744073709551s", 18446744073709551000ull },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_duration_ms(good[i].text, &v) != 0 || v != good[i].want)
            fail_msg("parse_duration_ms(\"%s\") = %llu", good[i].text, (unsigned long long)v);
    }

    static const struct { const char *text; int rc; } bad[] = {
        { "", -EINVAL }, { "-1", -EINVAL }, { " 1", -EINVAL }, { "1x", -EINVAL },
        { "10 s", -EINVAL }, { "1 ", -EINVAL }, { "s", -EINVAL }, { "1sec", -EINVAL },
        { "1.5s", -EINVAL }, { "1M", -EINVAL }, { "1ms1", -EINVAL }, { "+1s", -EINVAL },
        { "18446744073709552s", -ERANGE }, { "18446744073709551616ms", -ERANGE },
        { "213503982334602d", -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_duration_ms(bad[i].text, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_duration_ms(\"%s\"): %d, want %d", bad[i].text, rc, bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_duration_ms(NULL, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

static void test_parse_uint(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; int base; uint64_t want; } good[] = {
        { "0", 10, 0 }, { "42", 10, 42 }, { "007", 10, 7 },
        { "18446744073709551615", 10, UINT64_MAX }, { "0777", 8, 0777 }, { "17", 8, 017 },
        { "ff", 16, 0xff }, { "FFFFFFFFFFFFFFFF", 16, UINT64_MAX },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_uint(good[i].text, good[i].base, &v) != 0 || v != good[i].want)
            fail_msg("parse_uint(\"%s\", %d) = %llu", good[i].text, good[i].base,
                     (unsigned long long)v);
    }

    static const struct { const char *text; int base; int rc; } bad[] = {
        { "", 10, -EINVAL }, { "-1", 10, -EINVAL }, { " 1", 10, -EINVAL }, { "1x", 10, -EINVAL },
        { "1 ", 10, -EINVAL }, { "+1", 10, -EINVAL }, { "10 M", 10, -EINVAL },
        { "8", 8, -EINVAL }, { "1.0", 10, -EINVAL }, { "x", 16, -EINVAL },
        { "18446744073709551616", 10, -ERANGE }, { "10000000000000000", 16, -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_uint(bad[i].text, bad[i].base, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_uint(\"%s\", %d): %d, want %d", bad[i].text, bad[i].base, rc,
                     bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_uint(NULL, 10, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

/* Leading white space other than ' ' must be refused like ' ' is: strtoull
 * skips it, and then also accepts the sign it was meant to refuse. */
static void test_parse_uint_other_whitespace(void **state)
{
    static const struct { const char *text, *shown; } bad[] = {
        { "\t1", "\\t1" }, { "\n1", "\\n1" }, { "\t-1", "\\t-1" }, { "\n-1", "\\n-1" },
        { "\v+1", "\\v+1" }, { "\f1", "\\f1" }, { "\r1", "\\r1" },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        int rc = parse_uint(bad[i].text, 10, &v);

        if (rc != -EINVAL || v != 12345)
            fail_msg("parse_uint(\"%s\", 10): %d, value %llu; want -EINVAL", bad[i].shown, rc,
                     (unsigned long long)v);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_uint),
        cmocka_unit_test(test_parse_uint_other_whitespace),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
