/* Unit tests for logctl's helpers that need no daemon: the time parser of
 * --since/--until/--before (logctl/timeparse.c), the size and time
 * formatting and the description of skipped damage (logctl/format.c), and the JSON writer and parser, UTF-8 check
 * and base64 of common/json.c that --json output and the admin protocol
 * use. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cat.h"
#include "json.h"
#include "logctl.h"

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
    assert_int_equal(rfc3339_format(T_1000 + 1234, 9, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.000001234Z");
    assert_int_equal(rfc3339_format(T_1000 + 123456789, 6, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00.123456Z");
    assert_int_equal(rfc3339_format(T_1000, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-12-01T10:00:00Z");
    assert_int_equal(rfc3339_format(T_1000, 9, buf, 10), -EOVERFLOW);
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

static void test_utf8(void **state)
{
    static const struct {
        const char *s;
        size_t n;
        bool valid;
    } cases[] = {
        { "", 0, true },
        { "plain ascii", 11, true },
        { "caf\xc3\xa9", 5, true },                   /* é */
        { "\xe2\x82\xac", 3, true },                  /* € */
        { "\xf0\x9f\x98\x80", 4, true },              /* U+1F600 */
        { "\xf4\x8f\xbf\xbf", 4, true },              /* U+10FFFF */
        { "a\0b", 3, true },                          /* NUL is a character */
        { "\xff", 1, false },
        { "\x80", 1, false },                         /* lone continuation */
        { "\xc0\x80", 2, false },                     /* overlong NUL */
        { "\xe0\x80\x80", 3, false },                 /* overlong */
        { "\xed\xa0\x80", 3, false },                 /* surrogate U+D800 */
        { "\xf4\x90\x80\x80", 4, false },             /* above U+10FFFF */
        { "\xc3", 1, false },                         /* truncated */
        { "\xe2\x82", 2, false },
        { "ok\xc3(", 4, false },                      /* bad continuation */
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (utf8_valid(cases[i].s, cases[i].n) != cases[i].valid)
            fail_msg("case %zu: expected %s", i, cases[i].valid ? "valid" : "invalid");
}

static void test_base64(void **state)
{
    static const char *const want[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=",
                                        "Zm9vYmFy" };
    char out[64];
    (void)state;

    for (size_t n = 0; n <= 6; n++) {
        assert_int_equal(base64_encoded_len(n), strlen(want[n]));
        base64_encode("foobar", n, out);
        assert_string_equal(out, want[n]);
    }
    base64_encode("\xff\xfe\x00\x01", 4, out);
    assert_string_equal(out, "//4AAQ==");
}

static char *write_doc(void (*fill)(struct json_out *))
{
    struct json_out o;
    char *text = NULL;
    size_t len;

    json_out_init(&o);
    fill(&o);
    assert_int_equal(json_out_finish(&o, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    return text;
}

static void fill_escapes(struct json_out *o)
{
    json_obj_begin(o);
    json_key(o, "s");
    json_str(o, "q\"b\\n\n\t\x01\x1f/", 10);
    json_key(o, "bad");
    json_str(o, "a\xff" "b", 3);
    json_key(o, "u");
    json_cstr(o, "\xe2\x82\xac");
    json_key(o, "null");
    json_cstr(o, NULL);
    json_key(o, "n");
    json_arr_begin(o);
    json_u64(o, UINT64_MAX);
    json_i64(o, -5);
    json_double(o, 0.5);
    json_double(o, INFINITY);
    json_bool(o, true);
    json_bool(o, false);
    json_null(o);
    json_arr_end(o);
    json_key(o, "empty");
    json_obj_begin(o);
    json_obj_end(o);
    json_obj_end(o);
}

static void test_json_writer(void **state)
{
    char *text = write_doc(fill_escapes);
    (void)state;

    assert_string_equal(text, "{\"s\":\"q\\\"b\\\\n\\n\\t\\u0001\\u001f/\","
                              "\"bad\":\"a\xef\xbf\xbd" "b\","
                              "\"u\":\"\xe2\x82\xac\",\"null\":null,"
                              "\"n\":[18446744073709551615,-5,0.5,null,true,false,null],"
                              "\"empty\":{}}");
    free(text);
}

static void fill_members(struct json_out *o)
{
    json_obj_begin(o);
    json_member_str(o, "s", "a\"b");
    json_member_str(o, "none", NULL);
    json_member_u64(o, "u", 42);
    json_member_i64(o, "i", -7);
    json_member_double(o, "d", 0.25);
    json_member_bool(o, "b", true);
    json_obj_end(o);
}

/* The member helpers write the key, then the value, with the commas. */
static void test_json_members(void **state)
{
    char *text = write_doc(fill_members);
    (void)state;

    assert_string_equal(text, "{\"s\":\"a\\\"b\",\"none\":null,\"u\":42,\"i\":-7,"
                              "\"d\":0.25,\"b\":true}");
    free(text);
}

static void fill_unclosed(struct json_out *o)
{
    json_arr_begin(o);
}

static void test_json_writer_unbalanced(void **state)
{
    struct json_out o;
    char *text = NULL;
    size_t len;
    (void)state;

    json_out_init(&o);
    fill_unclosed(&o);
    assert_int_equal(json_out_finish(&o, &text, &len), -EINVAL);
    assert_null(text);
}

static void test_json_parse(void **state)
{
    const char *doc = " {\"a\": [1, 2.5, -3, 1e3, true, false, null, \"x\\u00e9\\ud83d\\ude00\\n\"],"
                      " \"big\": 18446744073709551615, \"o\": {\"k\": \"v\"}, \"s\": \"\\\"\\\\\\/\"} ";
    struct json_value *v = NULL;
    const struct json_value *a;
    char *back;
    struct json_out o;
    size_t len;
    (void)state;

    assert_int_equal(json_parse(doc, strlen(doc), &v, NULL, NULL), 0);
    assert_int_equal(v->type, JSON_OBJECT);
    a = json_get(v, "a");
    assert_non_null(a);
    assert_int_equal(a->type, JSON_ARRAY);
    assert_int_equal(a->n, 8);
    assert_true(a->items[0].is_u64 && a->items[0].u64 == 1);
    assert_false(a->items[1].is_u64);
    assert_true(a->items[1].number == 2.5);
    assert_false(a->items[2].is_u64);
    assert_true(a->items[2].number == -3);
    assert_true(a->items[3].number == 1000);
    assert_int_equal(a->items[4].type, JSON_TRUE);
    assert_int_equal(a->items[5].type, JSON_FALSE);
    assert_int_equal(a->items[6].type, JSON_NULL);
    assert_string_equal(a->items[7].string, "x\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_true(json_get_u64(v, "big", 0) == UINT64_MAX);
    assert_string_equal(json_get_str(json_get(v, "o"), "k", NULL), "v");
    assert_string_equal(json_get_str(v, "s", NULL), "\"\\/");
    assert_null(json_get(v, "missing"));
    assert_true(json_get_u64(v, "missing", 7) == 7);
    assert_string_equal(json_get_str(v, "a", "fallback"), "fallback");

    /* Written back and parsed again, it is the same tree. */
    json_out_init(&o);
    json_write_value(&o, v);
    assert_int_equal(json_out_finish(&o, &back, &len), 0);
    json_value_free(v);
    v = NULL;
    assert_int_equal(json_parse(back, len, &v, NULL, NULL), 0);
    assert_string_equal(json_get(v, "a")->items[7].string, "x\xc3\xa9\xf0\x9f\x98\x80\n");
    assert_true(json_get_u64(v, "big", 0) == UINT64_MAX);
    json_value_free(v);
    free(back);

    /* A NUL inside a string survives, with its length. */
    assert_int_equal(json_parse("\"a\\u0000b\"", 10, &v, NULL, NULL), 0);
    assert_int_equal(v->string_len, 3);
    assert_memory_equal(v->string, "a\0b", 3);
    json_value_free(v);
}

static void test_json_parse_refused(void **state)
{
    static const char *const bad[] = {
        "", "   ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "[01]", "[1.]", "[.5]",
        "[1e]", "[-]", "[+1]", "\"abc", "\"a\\x\"", "\"\\u12\"", "\"\\u12g4\"", "tru", "nul",
        "[1] x", "{} {}", "\"tab\there\"", "\"\xff\"", "\"\xc0\x80\"", "[NaN]", "'a'",
    };
    char deep[80];
    struct json_value *v = NULL;
    const char *why = NULL;
    size_t off = 999;
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        if (json_parse(bad[i], strlen(bad[i]), &v, &why, &off) != -EBADMSG)
            fail_msg("'%s' was accepted", bad[i]);
        assert_null(v); /* written only on success */
        assert_non_null(why);
        assert_true(off <= strlen(bad[i]));
    }
    /* Nesting is bounded. */
    memset(deep, '[', 40);
    memset(deep + 40, ']', 40);
    assert_int_equal(json_parse(deep, 80, &v, &why, &off), -EBADMSG);
    assert_string_equal(why, "nested too deeply");
    memset(deep, '[', 20);
    memset(deep + 20, ']', 20);
    assert_int_equal(json_parse(deep, 40, &v, NULL, NULL), 0);
    json_value_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_time_absolute),
        cmocka_unit_test(test_time_keywords_and_relative),
        cmocka_unit_test(test_time_refused),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_describe_skip),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_json_writer),
        cmocka_unit_test(test_json_members),
        cmocka_unit_test(test_json_writer_unbalanced),
        cmocka_unit_test(test_json_parse),
        cmocka_unit_test(test_json_parse_refused),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
