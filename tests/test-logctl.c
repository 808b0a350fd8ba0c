/* Unit tests for logctl's helpers that need no daemon: the time parser of
 * --since/--until/--before (logctl/timeparse.c), the size and time
 * formatting and the description of skipped damage (logctl/format.c), and
 * cat's syslog levels, names and filter (logctl/cat-syslog.c), prune's
 * rule of which files go and why (logctl/prune-select.c). The
 * JSON code and the text helpers have tests of their own (test-json.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cat-syslog.h"
#include "cat.h"
#include "logctl.h"
#include "prune.h"
#include "text.h"

#define S 1000000000ull
/* 2026-12-01T10:00:00Z and that day's midnight, UTC. */
#define T_1000 (1796119200ull * S)
#define T_MIDNIGHT (1796083200ull * S)

static void set_tz(const char *tz)
{
    assert_int_equal(setenv("TZ", tz, 1), 0);
    tzset();
}

static uint64_t parse_ok(const char *text, uint64_t now)
{
    uint64_t t = 0;
    int r = logctl_parse_time(text, now, &t);

    if (r != 0)
        fail_msg("'%s' was refused (%d)", text, r);
    return t;
}

static void parse_bad(const char *text, int want)
{
    uint64_t t = 12345;
    int r = logctl_parse_time(text, T_1000, &t);

    if (r != want)
        fail_msg("'%s': %d, expected %d", text, r, want);
    assert_true(t == 12345); /* untouched on failure */
}

static void test_time_absolute(void **state)
{
    uint64_t now = T_1000 + 123 * S;
    (void)state;

    set_tz("UTC");
    assert_true(parse_ok("2026-12-01 10:00", now) == T_1000);
    assert_true(parse_ok("2026-12-01 10:00:30", now) == T_1000 + 30 * S);
    assert_true(parse_ok("2026-12-01T10:00:30", now) == T_1000 + 30 * S);
    assert_true(parse_ok("2026-12-01 10:00:30.25", now) == T_1000 + 30 * S + 250000000ull);
    assert_true(parse_ok("2026-12-01T10:00:30.123456789Z", now) ==
                T_1000 + 30 * S + 123456789ull);
    assert_true(parse_ok("2026-12-01", now) == T_MIDNIGHT);
    assert_true(parse_ok("  2026-12-01 10:00  ", now) == T_1000);
    assert_true(parse_ok("2024-02-29 23:59:59", now) == 1709251199ull * S);
    assert_true(parse_ok("10:00", now) == T_1000);          /* today */
    assert_true(parse_ok("10:00:05", now) == T_1000 + 5 * S);
    assert_true(parse_ok("@1796119200", now) == T_1000);
    assert_true(parse_ok("@1796119200.5", now) == T_1000 + S / 2);
    assert_true(parse_ok("now", now) == now);

    /* Local time: a zone one hour east of UTC (no DST, no tzdata needed). */
    set_tz("CET-1");
    assert_true(parse_ok("2026-12-01 11:00", now) == T_1000);
    assert_true(parse_ok("2026-12-01 10:00Z", now) == T_1000);
    assert_true(parse_ok("2026-12-01 10:00 UTC", now) == T_1000);
    assert_true(parse_ok("today", now) == T_MIDNIGHT - 3600 * S);
    set_tz("UTC");
}

static void test_time_keywords_and_relative(void **state)
{
    uint64_t now = T_1000 + 123 * S;
    (void)state;

    set_tz("UTC");
    assert_true(parse_ok("today", now) == T_MIDNIGHT);
    assert_true(parse_ok("yesterday", now) == T_MIDNIGHT - 86400 * S);
    assert_true(parse_ok("tomorrow", now) == T_MIDNIGHT + 86400 * S);
    assert_true(parse_ok("-1h", now) == now - 3600 * S);
    assert_true(parse_ok("-30m", now) == now - 1800 * S);
    assert_true(parse_ok("-30min", now) == now - 1800 * S);
    assert_true(parse_ok("-2d", now) == now - 2 * 86400 * S);
    assert_true(parse_ok("-90s", now) == now - 90 * S);
    assert_true(parse_ok("-1h30m", now) == now - 5400 * S);
    assert_true(parse_ok("-1h 30m", now) == now - 5400 * S);
    assert_true(parse_ok("-1w", now) == now - 7 * 86400 * S);
    assert_true(parse_ok("-500ms", now) == now - S / 2);
    assert_true(parse_ok("+5s", now) == now + 5 * S);
    assert_true(parse_ok("1h ago", now) == now - 3600 * S);
    assert_true(parse_ok("10 minutes ago", now) == now - 600 * S);
    assert_true(parse_ok("2 days ago", now) == now - 2 * 86400 * S);
}

static void test_time_refused(void **state)
{
    static const char *const bad[] = {
        "", " ", "abc", "2026-12-01 10", "2026-12-01 10:", "2026-12-01 10:0",
        "2026-13-01", "2026-00-10", "2026-12-32", "2026-02-30", "2026-12-01 24:00",
        "2026-12-01 10:60", "2026-12-01 10:00:60", "2026-12-01 10:00:00.", "2026-12-01 10:00:00.1234567890",
        "-1", "-1x", "-h", "-", "--1h", "1h", "ago", "@", "@12x", "@-5", "10", "2026/12/01",
        "2026-12-01X10:00", "2026-12-01 10:00ZZ", "yesterday2",
    };
    (void)state;

    set_tz("UTC");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        parse_bad(bad[i], -EINVAL);
    parse_bad("1969-12-31 23:59", -ERANGE);
    parse_bad("-100000d", -ERANGE);
    assert_int_equal(logctl_parse_time(NULL, T_1000, &(uint64_t){ 0 }), -EINVAL);
}

static void test_format(void **state)
{
    char buf[64];
    (void)state;

    logctl_format_size(0, false, buf, sizeof(buf));
    assert_string_equal(buf, "0 B");
    logctl_format_size(1023, false, buf, sizeof(buf));
    assert_string_equal(buf, "1023 B");
    logctl_format_size(1536, false, buf, sizeof(buf));
    assert_string_equal(buf, "1.5 KiB");
    logctl_format_size(64ull << 20, false, buf, sizeof(buf));
    assert_string_equal(buf, "64 MiB");
    logctl_format_size(1536, true, buf, sizeof(buf));
    assert_string_equal(buf, "1536");
    set_tz("UTC");
    logctl_format_local_time(T_1000 + 5 * S, buf, sizeof(buf));
    assert_string_equal(buf, "2026-12-01 10:00:05");
    logctl_format_local_time(0, buf, sizeof(buf));
    assert_string_equal(buf, "-");
    logctl_format_duration(4.25, buf, sizeof(buf));
    assert_string_equal(buf, "4.2s");
    logctl_format_duration(7392, buf, sizeof(buf));
    assert_string_equal(buf, "2h 03m 12s");
    /* What the formatter writes, the parser reads back exactly. */
    assert_int_equal(rfc3339_format(T_1000 + 987654321, 9, buf, sizeof(buf)), 0);
    assert_true(parse_ok(buf, 0) == T_1000 + 987654321);
}

static void test_describe_skip(void **state)
{
    struct shard_skip s;
    char buf[LOGCTL_SKIP_TEXT_MAX];
    (void)state;

    memset(&s, 0, sizeof(s));
    s.offset = 112;
    s.bytes = 22;
    s.records = 1;
    s.why = "record CRC mismatch";
    s.in_shard = true;
    s.header.shard_id = 0x2a;
    strcpy(s.header.producer, "app");
    logctl_describe_skip(&s, false, buf, sizeof(buf));
    assert_string_equal(buf, "record CRC mismatch at offset 112: skipped that record (22 bytes) "
                             "of shard app.000000000000002a");

    s.records = 0;
    s.bytes = 4000;
    s.why = "impossible record length";
    logctl_describe_skip(&s, false, buf, sizeof(buf));
    assert_string_equal(buf, "impossible record length at offset 112: skipped 4000 bytes of "
                             "shard app.000000000000002a, up to the next shard header at "
                             "offset 4112");
    logctl_describe_skip(&s, true, buf, sizeof(buf));
    assert_string_equal(buf, "impossible record length at offset 112: skipped 4000 bytes of "
                             "shard app.000000000000002a to the end of the file");

    s.in_shard = false;
    s.torn = true;
    s.offset = 0;
    s.bytes = 30;
    s.why = "file ends inside a shard header";
    logctl_describe_skip(&s, true, buf, sizeof(buf));
    assert_string_equal(buf, "file ends inside a shard header at offset 0: skipped 30 bytes to "
                             "the end of the file (a torn tail)");

    s.bytes = 0;
    s.why = "empty file (no shard header)";
    logctl_describe_skip(&s, true, buf, sizeof(buf));
    assert_string_equal(buf, "empty file (no shard header) at offset 0");

    /* Cut short, never overrun. */
    s.bytes = 5;
    logctl_describe_skip(&s, true, buf, 12);
    assert_string_equal(buf, "empty file ");
}

/* --priority as journalctl's -p takes it. */
static void test_syslog_priority(void **state)
{
    static const struct {
        const char *arg;
        int r;
        uint8_t mask;
    } cases[] = {
        { "err", 0, 0x0f },         { "3", 0, 0x0f },          { "emerg", 0, 0x01 },
        { "0", 0, 0x01 },           { "debug", 0, 0xff },      { "7", 0, 0xff },
        { "WARNING", 0, 0x1f },     { "warn", 0, 0x1f },       { "error", 0, 0x0f },
        { "panic", 0, 0x01 },       { "err..info", 0, 0x78 },  { "info..err", 0, 0x78 },
        { "4..4", 0, 0x10 },        { "notice..0", 0, 0x3f },  { "", -EINVAL, 0 },
        { "8", -EINVAL, 0 },        { "-1", -EINVAL, 0 },      { "errr", -EINVAL, 0 },
        { "err..", -EINVAL, 0 },    { "..err", -EINVAL, 0 },   { "err...info", -EINVAL, 0 },
        { "03", -EINVAL, 0 },       { "err,info", -EINVAL, 0 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t mask = 0xaa;
        int r = cat_syslog_parse_priority(cases[i].arg, &mask);

        if (r != cases[i].r || (r == 0 && mask != cases[i].mask))
            fail_msg("--priority '%s': %d, mask 0x%02x; want %d, 0x%02x", cases[i].arg, r, mask,
                     cases[i].r, cases[i].mask);
    }
}

static void test_syslog_names(void **state)
{
    char buf[4];

    (void)state;
    assert_string_equal(cat_syslog_severity_name(0), "emerg");
    assert_string_equal(cat_syslog_severity_name(4), "warning");
    assert_string_equal(cat_syslog_severity_name(7), "debug");
    assert_null(cat_syslog_severity_name(8));
    assert_null(cat_syslog_severity_name(-1));
    assert_string_equal(cat_syslog_facility_name(0, buf), "kern");
    assert_string_equal(cat_syslog_facility_name(9, buf), "cron");
    assert_string_equal(cat_syslog_facility_name(10, buf), "authpriv");
    assert_string_equal(cat_syslog_facility_name(11, buf), "ftp");
    assert_string_equal(cat_syslog_facility_name(12, buf), "12");
    assert_string_equal(cat_syslog_facility_name(15, buf), "15");
    assert_string_equal(cat_syslog_facility_name(16, buf), "local0");
    assert_string_equal(cat_syslog_facility_name(23, buf), "local7");
}

/* The filter on parsed messages: severity, identifier, both, and records
 * that are no syslog message. */
static void test_syslog_filter(void **state)
{
    static const char sshd_err[] = "<35>Dec  2 10:00:00 sshd[1]: x";
    static const char cron_info[] = "<78>Dec  2 10:00:00 CRON[2]: y";
    static const char no_pri[] = "plain";
    const char *ids[] = { "CRON", "nobody" };
    struct cat_syslog_filter none = { 0 };
    struct cat_syslog_filter err = { .by_severity = true, .severities = 0x0f };
    struct cat_syslog_filter all = { .by_severity = true, .severities = 0xff };
    struct cat_syslog_filter cron = { .identifiers = ids, .n_identifiers = 2 };
    struct cat_syslog_filter cron_err = { true, 0x0f, ids, 2 };
    struct syslog_msg a, b, c;

    (void)state;
    syslog_msg_parse(sshd_err, strlen(sshd_err), 1796205600000000000ull, &a);
    syslog_msg_parse(cron_info, strlen(cron_info), 1796205600000000000ull, &b);
    syslog_msg_parse(no_pri, strlen(no_pri), 1796205600000000000ull, &c);
    assert_true(cat_syslog_wanted(&a, &none) && cat_syslog_wanted(&c, &none));
    assert_true(cat_syslog_wanted(NULL, &none));
    assert_true(cat_syslog_wanted(&a, &err));
    assert_false(cat_syslog_wanted(&b, &err));
    /* Every level asked for still asks for a level. */
    assert_true(cat_syslog_wanted(&b, &all));
    assert_false(cat_syslog_wanted(&c, &all));
    assert_false(cat_syslog_wanted(NULL, &all));
    assert_true(cat_syslog_wanted(&b, &cron));
    assert_false(cat_syslog_wanted(&a, &cron));
    assert_false(cat_syslog_wanted(&c, &cron));
    assert_false(cat_syslog_wanted(NULL, &cron));
    assert_false(cat_syslog_wanted(&b, &cron_err));
    assert_false(cat_syslog_wanted(&a, &cron_err));
}

/* prune's rule: past the age first, then the oldest until the total fits;
 * ties by name; a file from the future is 0 old; 0 means no limit. */
static void test_prune_select(void **state)
{
    /* Given out of order; names sort "a" < "b" < ... at equal times. */
    struct prune_file v[] = {
        { .name = "e", .time_ns = 90 * S, .bytes = 10, .tag = 4 },
        { .name = "b", .time_ns = 10 * S, .bytes = 10, .tag = 1 },
        { .name = "d", .time_ns = 50 * S, .bytes = 30, .tag = 3 },
        { .name = "a", .time_ns = 10 * S, .bytes = 10, .tag = 0 },
        { .name = "c", .time_ns = 40 * S, .bytes = 20, .tag = 2 },
        { .name = "f", .time_ns = 500 * S, .bytes = 5, .tag = 5 }, /* in the future */
    };
    const size_t n = sizeof(v) / sizeof(v[0]);
    const uint64_t now = 100 * S;
    struct {
        uint64_t max_age, max_bytes, kept;
        const char *reasons; /* in order a..f: k keep, a age, s size */
    } const cases[] = {
        { 0, 0, 85, "kkkkkk" },
        { 60 * S, 0, 65, "aakkkk" },       /* 90 s old: over 60 s */
        { 90 * S, 0, 85, "kkkkkk" },       /* exactly the limit: not over it */
        { 89 * S, 0, 65, "aakkkk" },
        { 0, 85, 85, "kkkkkk" },           /* exactly the limit */
        { 0, 84, 75, "skkkkk" },           /* oldest first, "a" before "b" */
        { 0, 50, 45, "ssskkk" },
        { 0, 15, 15, "sssskk" },
        { 0, 5, 5, "sssssk" },
        { 0, 1, 0, "ssssss" },             /* the newest alone is over: it goes too */
        { 55 * S, 40, 15, "aaaskk" },      /* age first, then size of the rest */
        { 1, 0, 5, "aaaaak" },             /* the future is 0 old */
    };

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint64_t kept = prune_select(v, n, now, cases[c].max_age, cases[c].max_bytes);

        /* Sorted oldest first, ties by name. */
        for (size_t i = 0; i < n; i++)
            assert_int_equal(v[i].tag, i);
        for (size_t i = 0; i < n; i++) {
            char want = cases[c].reasons[i];
            enum prune_reason r = want == 'a' ? PRUNE_AGE : want == 's' ? PRUNE_SIZE : PRUNE_KEEP;

            if (v[i].reason != r)
                fail_msg("case %zu: file %s is %d, not %c", c, v[i].name, (int)v[i].reason, want);
        }
        assert_int_equal(kept, cases[c].kept);
    }
    assert_int_equal(prune_select(NULL, 0, now, 1, 1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_absolute),
        cmocka_unit_test(test_time_keywords_and_relative),
        cmocka_unit_test(test_time_refused),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_describe_skip),
        cmocka_unit_test(test_syslog_priority),
        cmocka_unit_test(test_syslog_names),
        cmocka_unit_test(test_syslog_filter),
        cmocka_unit_test(test_prune_select),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
