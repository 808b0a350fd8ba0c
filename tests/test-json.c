/* Unit tests for common/json-write.c and common/json-parse.c, the admin
 * protocol's codec and what --json output is made of: valid documents (the
 * admin protocol's own, from docs/PROTOCOL.md), every kind of text the
 * parser refuses, the limits json.h documents, and round trips from the
 * writer through the parser. The text helpers they use have their own tests
 * (test-text.c); common/fuzz/fuzz-json.c checks the same contracts on
 * generated input. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "json.h"
#include "text.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

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

/* ---- parser: valid documents ---- */

static struct json_value *parse_ok(const char *text)
{
    struct json_value *v = NULL;
    const char *why = NULL;
    size_t off = 0;
    int r = json_parse(text, strlen(text), &v, &why, &off);

    if (r != 0)
        fail_msg("'%s' was refused (%d): %s at byte %zu", text, r, why, off);
    return v;
}

/* The refusal of text: its reason, and the offset inside the text. */
static const char *parse_refused(const char *text, size_t len, size_t *ret_offset)
{
    struct json_value *v = NULL;
    const char *why = NULL;
    size_t off = SIZE_MAX;

    if (json_parse(text, len, &v, &why, &off) != -EBADMSG)
        fail_msg("'%.*s' was accepted", (int)len, text);
    assert_null(v);
    assert_non_null(why);
    if (off > len)
        fail_msg("'%.*s': offset %zu past the end (%zu)", (int)len, text, off, len);
    if (ret_offset)
        *ret_offset = off;
    return why;
}

/* The requests and replies of docs/PROTOCOL.md, read as logctl and the
 * daemon read them. */
static void test_parse_admin_messages(void **state)
{
    struct json_value *v;
    const struct json_value *m;
    (void)state;

    v = parse_ok("{\"version\":1,\"command\":\"ls\",\"producer\":\"web-1\"}\n");
    assert_true(json_get_u64(v, "version", 0) == 1);
    assert_string_equal(json_get_str(v, "command", NULL), "ls");
    assert_string_equal(json_get_str(v, "producer", NULL), "web-1");
    json_value_free(v);

    v = parse_ok("{\"version\":1,\"command\":\"rotate\",\"producer\":null}");
    m = json_get(v, "producer");
    assert_non_null(m);
    assert_int_equal(m->type, JSON_NULL);
    assert_null(json_get_str(v, "producer", NULL));
    json_value_free(v);

    v = parse_ok("{\"version\":1,\"ok\":false,\"error\":{\"code\":22,\"name\":\"EINVAL\","
                 "\"message\":\"unknown command 'fly' (status, ls, rotate)\"}}");
    assert_false(json_get_bool(v, "ok", true));
    m = json_get(v, "error");
    assert_true(json_get_u64(m, "code", 0) == 22);
    assert_string_equal(json_get_str(m, "name", NULL), "EINVAL");
    json_value_free(v);

    v = parse_ok("{\"version\":1,\"ok\":true,\"command\":\"rotate\",\"producer\":\"web-1\","
                 "\"retired\":1,\"busy\":0,\"sealed\":[{\"producer\":\"web-1\","
                 "\"shard\":\"18ed0c66c50c305a\",\"file\":\"done/web-1.18ed0c66c50c305a.shard\","
                 "\"records\":57,\"bytes\":4096}],\"failed\":[]}");
    assert_true(json_get_bool(v, "ok", false));
    m = json_get(v, "sealed");
    assert_int_equal(m->type, JSON_ARRAY);
    assert_int_equal(m->n, 1);
    assert_true(json_get_u64(&m->items[0], "bytes", 0) == 4096);
    assert_int_equal(json_get(v, "failed")->n, 0);
    json_value_free(v);

    v = parse_ok("{\"status\":{\"uptime_s\":0.348237984,\"metrics_file\":null,"
                 "\"fsync\":{\"p50_s\":0.00075,\"p99_s\":null}}}");
    m = json_get(json_get(v, "status"), "fsync");
    assert_true(json_get_double(m, "p50_s", -1) == 0.00075);
    assert_true(json_get_double(m, "p99_s", -1) == -1); /* null: the fallback */
    assert_true(json_get_double(json_get(v, "status"), "uptime_s", 0) == 0.348237984);
    json_value_free(v);
}

/* A typed read of a member of another type, of a missing member, or of
 * something that is not an object gives the fallback. */
static void test_parse_typed_reads(void **state)
{
    struct json_value *v = parse_ok("{\"s\":\"1\",\"n\":1.5,\"neg\":-1,\"t\":true,\"f\":false,"
                                    "\"z\":null,\"a\":[1]}");
    (void)state;

    assert_true(json_get_u64(v, "s", 9) == 9);
    assert_true(json_get_u64(v, "n", 9) == 9);   /* not whole */
    assert_true(json_get_u64(v, "neg", 9) == 9); /* not unsigned */
    assert_true(json_get_double(v, "neg", 0) == -1);
    assert_true(json_get_double(v, "s", 7) == 7);
    assert_string_equal(json_get_str(v, "n", "fb"), "fb");
    assert_true(json_get_bool(v, "t", false));
    assert_false(json_get_bool(v, "f", true));
    assert_true(json_get_bool(v, "z", true));
    assert_true(json_get_bool(v, "s", true));
    assert_null(json_get(json_get(v, "a"), "x")); /* an array has no members */
    assert_null(json_get(NULL, "x"));
    json_value_free(v);
    json_value_free(NULL);
}

/* Duplicate member names are kept, in order; json_get finds the first. */
static void test_parse_duplicate_names(void **state)
{
    struct json_value *v = parse_ok("{\"command\":\"ls\",\"x\":1,\"command\":\"rotate\"}");
    (void)state;

    assert_int_equal(v->n, 3);
    assert_string_equal(v->keys[2], "command");
    assert_string_equal(v->items[2].string, "rotate");
    assert_string_equal(json_get_str(v, "command", NULL), "ls");
    json_value_free(v);
}

/* A member name is a C string, so one with U+0000 in it would be found
 * under the name before the NUL: it is refused instead. */
static void test_parse_nul_in_member_name(void **state)
{
    static const char text[] = "{\"command\\u0000x\":\"rotate\",\"command\":\"ls\"}";
    struct json_value *v;
    size_t off;
    (void)state;

    assert_string_equal(parse_refused(text, strlen(text), &off), "NUL in a member name");
    assert_int_equal(off, 17);
    /* In a value it is a character like any other. */
    v = parse_ok("{\"command\":\"ls\\u0000x\"}");
    assert_int_equal(json_get(v, "command")->string_len, 4);
    json_value_free(v);
}

static void test_parse_numbers(void **state)
{
    char text[80];
    struct json_value *v;
    size_t off;
    (void)state;

    v = parse_ok("[0,-0,18446744073709551615,18446744073709551616,1.0,1e3,-5,"
                 "1.7976931348623157e308,1e-400,4.9e-324,0.1]");
    assert_true(v->items[0].is_u64 && v->items[0].u64 == 0);
    assert_false(v->items[1].is_u64); /* a sign is not an unsigned number */
    assert_true(v->items[1].number == 0 && signbit(v->items[1].number));
    assert_true(v->items[2].is_u64 && v->items[2].u64 == UINT64_MAX);
    assert_false(v->items[3].is_u64); /* beyond u64: a double only */
    assert_true(v->items[3].number == 18446744073709551616.0);
    assert_false(v->items[4].is_u64); /* a fraction, even .0 */
    assert_true(v->items[4].number == 1);
    assert_false(v->items[5].is_u64); /* an exponent too */
    assert_true(v->items[5].number == 1000);
    assert_true(v->items[6].number == -5);
    assert_true(v->items[7].number == 1.7976931348623157e308);
    assert_true(v->items[8].number == 0); /* below the range: rounds to 0 */
    assert_true(v->items[9].number == 4.9e-324);
    assert_true(v->items[10].number == 0.1);
    json_value_free(v);

    /* Beyond a double's range there is no number JSON can give back. */
    assert_string_equal(parse_refused("1e309", 5, &off), "number out of range");
    assert_int_equal(off, 5);
    assert_string_equal(parse_refused("[-1.8e308]", 10, &off), "number out of range");
    assert_int_equal(off, 9);
    assert_string_equal(parse_refused("{\"n\":1e99999999999999999999}", 28, NULL),
                        "number out of range");

    /* 63 characters are read; 64 are refused. */
    memset(text, '0', sizeof(text));
    text[0] = '1';
    text[63] = '\0';
    v = parse_ok(text);
    assert_true(v->number == 1e62);
    json_value_free(v);
    text[63] = '0';
    assert_string_equal(parse_refused(text, 64, &off), "number too long");
    assert_int_equal(off, 64);
}

static void test_parse_strings(void **state)
{
    static const struct {
        const char *text, *want;
        size_t want_len;
    } cases[] = {
        { "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"", "\" \\ / \b \f \n \r \t", 15 },
        { "\"\\u00e9\\u20AC\\u20ac\"", "\xc3\xa9\xe2\x82\xac\xe2\x82\xac", 8 },
        { "\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80", 4 },
        { "\"\\uDBFF\\uDFFF\"", "\xf4\x8f\xbf\xbf", 4 },  /* U+10FFFF */
        { "\"\\ud800\"", "\xef\xbf\xbd", 3 },              /* a lone high surrogate */
        { "\"\\udc00x\"", "\xef\xbf\xbdx", 4 },            /* a lone low one */
        { "\"\\ud800\\u0041\"", "\xef\xbf\xbd" "A", 4 },   /* high, then no low */
        { "\"\\ud800\\ud800\\udc00\"", "\xef\xbf\xbd\xf0\x90\x80\x80", 7 },
        { "\"\\u0000\"", "\0", 1 },
        { "\"\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf\"",
          "\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 18 },
        { "\"\x7f\"", "\x7f", 1 }, /* DEL is no control character to JSON */
        { "\"\"", "", 0 },
    };
    (void)state;

    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        struct json_value *v = parse_ok(cases[i].text);

        assert_int_equal(v->type, JSON_STRING);
        if (v->string_len != cases[i].want_len ||
            memcmp(v->string, cases[i].want, cases[i].want_len) != 0)
            fail_msg("case %zu: %s decoded wrongly", i, cases[i].text);
        assert_int_equal(v->string[v->string_len], '\0');
        json_value_free(v);
    }
}

/* ---- parser: what it refuses ---- */

static void test_parse_refused_reasons(void **state)
{
    static const struct {
        const char *text, *why;
        size_t offset;
    } cases[] = {
        { "\"a\\x\"", "unknown escape in string", 4 },
        { "\"\\U0041\"", "unknown escape in string", 3 },
        { "\"\\u12g4\"", "bad hex digit in \\u escape", 6 },
        { "\"\\u12\"", "truncated \\u escape", 3 },
        { "\"\\u\"", "truncated \\u escape", 3 },
        { "\"\\ud800\\u12g4\"", "bad hex digit in \\u escape", 12 },
        { "\"a\x01\"", "control character in string", 2 },
        { "\"a\nb\"", "control character in string", 2 },
        { "\"abc", "unterminated string", 4 },
        { "\"abc\\\"", "unterminated string", 6 },
        { "\"abc\\", "unterminated string", 5 }, /* not past the end */
        { "[1,]", "bad number", 3 },
        { "{\"a\":1,}", "expected a member name", 7 },
        { "{\"a\" 1}", "expected ':' after a member name", 5 },
        { "{1:1}", "expected a member name", 1 },
        { "[1 2]", "expected ',' or ']'", 3 },
        { "{\"a\":1 \"b\":2}", "expected ',' or '}'", 7 },
        { "[1", "unterminated array", 2 },
        { "{\"a\":1", "unterminated object", 6 },
        { "{\"a\":", "unexpected end of text", 5 },
        { "[01]", "leading zero in number", 1 },
        { "-01", "leading zero in number", 1 },
        { "1.", "bad fraction in number", 2 },
        { "1e+", "bad exponent in number", 3 },
        { "[truex]", "expected ',' or ']'", 5 },
        { "nul", "unexpected character", 0 },
        { "[1] x", "text after the value", 4 },
        { "/* c */ 1", "bad number", 0 },
        { "\xef\xbb\xbf{}", "bad number", 0 }, /* no byte order mark */
    };
    (void)state;

    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        size_t off = 0;
        const char *why = parse_refused(cases[i].text, strlen(cases[i].text), &off);

        if (strcmp(why, cases[i].why) != 0 || off != cases[i].offset)
            fail_msg("'%s': \"%s\" at %zu, expected \"%s\" at %zu", cases[i].text, why, off,
                     cases[i].why, cases[i].offset);
    }
}

/* Invalid UTF-8 in a string, every kind: overlong forms, surrogates, above
 * U+10FFFF, lone continuation bytes, a sequence cut short. */
static void test_parse_refused_utf8(void **state)
{
    static const char *const bad[] = {
        "\"\xc0\x80\"",         "\"\xc1\xbf\"",         "\"\xe0\x80\xaf\"",
        "\"\xe0\x9f\xbf\"",     "\"\xf0\x80\x80\x80\"", "\"\xf0\x8f\xbf\xbf\"",
        "\"\xed\xa0\x80\"",     "\"\xed\xbf\xbf\"",     "\"\xf4\x90\x80\x80\"",
        "\"\xf5\x80\x80\x80\"", "\"\xf8\x88\x80\x80\x80\"", "\"\xff\"",
        "\"\x80\"",             "\"\xbf\"",             "\"\xe2\x82\"",
        "\"\xf0\x9f\x98\"",     "\"\xc3(\"",            "\"\xe2(\xac\"",
    };
    (void)state;

    for (size_t i = 0; i < N_ELEMENTS(bad); i++) {
        size_t off;
        const char *why = parse_refused(bad[i], strlen(bad[i]), &off);

        if (strcmp(why, "invalid UTF-8 in string") != 0)
            fail_msg("case %zu: \"%s\"", i, why);
        assert_int_equal(off, 1);
    }
    /* Outside a string only ASCII is JSON. */
    parse_refused("[\xc3\xa9]", 4, NULL);
    parse_refused("{\"a\xff\":1}", 7, NULL);
}

/* Every proper prefix of a valid document is refused, with the offset
 * inside the prefix: the daemon reads a request line cut anywhere. */
static void test_parse_truncated(void **state)
{
    static const char *const docs[] = {
        "{\"version\":1,\"ok\":true,\"command\":\"ls\",\"spool\":\"/var/lib/logshard\","
        "\"shards\":[{\"producer\":\"web-1\",\"size\":4096,\"first\":\"2026-12-01T10:00:00Z\","
        "\"last\":null,\"ok\":false,\"rate\":-1.5e-3}]}",
        "[\"\\u00e9\\ud83d\\ude00\\n\",\"caf\xc3\xa9\",[[{}]],true]",
        "\"a\\\\b\\\"c\"",
    };
    (void)state;

    for (size_t d = 0; d < N_ELEMENTS(docs); d++) {
        size_t len = strlen(docs[d]);

        json_value_free(parse_ok(docs[d]));
        for (size_t n = 0; n < len; n++) {
            /* A block of exactly the prefix, so ASan sees a read past it. */
            char *cut = malloc(n ? n : 1);

            assert_non_null(cut);
            memcpy(cut, docs[d], n);
            parse_refused(cut, n, NULL);
            free(cut);
        }
    }
}

/* Exactly JSON_MAX_DEPTH arrays or objects deep is read; one more is not,
 * nor is a document that opens thousands without closing them. */
static void test_parse_nesting(void **state)
{
    size_t n = 3 * JSON_MAX_DEPTH + 8, len;
    char *text = malloc(4 * n + 8000);
    struct json_value *v;
    const struct json_value *inner;
    (void)state;

    assert_non_null(text);
    for (unsigned depth = JSON_MAX_DEPTH; depth <= JSON_MAX_DEPTH + 1; depth++) {
        len = 0;
        for (unsigned i = 0; i + 1 < depth; i++)
            len += (size_t)sprintf(text + len, "{\"k\":");
        len += (size_t)sprintf(text + len, "[]");
        for (unsigned i = 0; i + 1 < depth; i++)
            text[len++] = '}';
        text[len] = '\0';
        if (depth == JSON_MAX_DEPTH) {
            v = parse_ok(text);
            inner = v;
            for (unsigned i = 0; i + 1 < depth; i++)
                inner = json_get(inner, "k");
            assert_int_equal(inner->type, JSON_ARRAY);
            json_value_free(v);
        } else {
            assert_string_equal(parse_refused(text, len, NULL), "nested too deeply");
        }
    }
    memset(text, '[', 8000);
    assert_string_equal(parse_refused(text, 8000, NULL), "nested too deeply");
    free(text);
}

/* ---- writer, and round trips through the parser ---- */

static void test_writer_edges(void **state)
{
    struct json_out o;
    char *text = NULL;
    size_t len = 99;
    (void)state;

    /* Nothing written: an empty text. */
    json_out_init(&o);
    assert_int_equal(json_out_finish(&o, &text, &len), 0);
    assert_string_equal(text, "");
    assert_int_equal(len, 0);
    free(text);

    /* A name without its value is unfinished. */
    text = NULL;
    json_out_init(&o);
    json_obj_begin(&o);
    json_key(&o, "k");
    assert_int_equal(json_out_finish(&o, &text, &len), -EINVAL);
    assert_null(text);

    /* Nesting deeper than the parser reads fails the text. */
    json_out_init(&o);
    for (unsigned i = 0; i <= JSON_MAX_DEPTH; i++)
        json_arr_begin(&o);
    for (unsigned i = 0; i <= JSON_MAX_DEPTH; i++)
        json_arr_end(&o);
    assert_true(json_out_finish(&o, &text, &len) < 0);
    assert_null(text);

    /* Doubles: the shortest text that reads back as the same number. */
    json_out_init(&o);
    json_arr_begin(&o);
    json_double(&o, 0.1);
    json_double(&o, 1.0 / 3.0);
    json_double(&o, -0.0);
    json_double(&o, 1e300);
    json_double(&o, NAN);
    json_double(&o, -INFINITY);
    json_i64(&o, INT64_MIN);
    json_arr_end(&o);
    json_raw(&o, "\n", 1);
    assert_int_equal(json_out_finish(&o, &text, &len), 0);
    assert_string_equal(text, "[0.1,0.3333333333333333,-0,1e+300,null,null,"
                              "-9223372036854775808]\n");
    free(text);
}

/* A document written with every kind of value, read back: the same values,
 * and written again from the tree, the same text. */
/* The writer copies runs of plain bytes eight at a time: every byte that
 * needs escaping (or is not UTF-8), at every place in a string long enough
 * for several words, comes out as one byte at a time would give it. */
static void expect_escaped_one(const unsigned char *in, size_t n)
{
    char want[512], *got = NULL;
    size_t w = 0, len;
    struct json_out o;

    want[w++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = in[i];

        if (c == '"' || c == '\\') {
            want[w++] = '\\';
            want[w++] = (char)c;
        } else if (c == '\n') {
            memcpy(want + w, "\\n", 2);
            w += 2;
        } else if (c < 0x20) {
            w += (size_t)snprintf(want + w, sizeof(want) - w, "\\u%04x", c);
        } else if (c >= 0x80) {
            memcpy(want + w, "\xef\xbf\xbd", 3); /* a lone byte: U+FFFD */
            w += 3;
        } else {
            want[w++] = (char)c;
        }
    }
    want[w++] = '"';
    json_out_init(&o);
    json_str(&o, in, n);
    assert_int_equal(json_out_finish(&o, &got, &len), 0);
    assert_int_equal(len, w);
    assert_memory_equal(got, want, w);
    free(got);
}

static void test_writer_escapes_in_runs(void **state)
{
    static const unsigned char specials[] = { '"', '\\', '\n', 0x01, 0x1f, 0x7f, 0x80, 0xff };
    unsigned char s[40];
    (void)state;

    for (size_t k = 0; k < sizeof(specials); k++)
        for (size_t at = 0; at < sizeof(s); at++) {
            for (size_t i = 0; i < sizeof(s); i++)
                s[i] = (unsigned char)('a' + i % 26);
            s[at] = specials[k];
            expect_escaped_one(s, sizeof(s));
            expect_escaped_one(s, at + 1); /* the special byte last */
        }
}

static void test_round_trip(void **state)
{
    static const double doubles[] = { 0.1, -2.5, 1e-300, 5e-324, 1.7976931348623157e308,
                                      123456789.125, -0.0 };
    unsigned char all_bytes[128 + 6];
    struct json_out o;
    struct json_value *v;
    const struct json_value *a;
    char *text, *again;
    size_t len, len2;
    (void)state;

    /* Every ASCII byte, NUL and the control characters included, then
     * multi-byte characters. */
    for (size_t i = 0; i < 128; i++)
        all_bytes[i] = (unsigned char)i;
    memcpy(all_bytes + 128, "\xc3\xa9\xf0\x9f\x98\x80", 6);

    json_out_init(&o);
    json_obj_begin(&o);
    json_key(&o, "bytes");
    json_str(&o, all_bytes, sizeof(all_bytes));
    json_key(&o, "key \"with\" \\ and \n");
    json_u64(&o, UINT64_MAX);
    json_member_i64(&o, "neg", -7);
    json_key(&o, "doubles");
    json_arr_begin(&o);
    for (size_t i = 0; i < N_ELEMENTS(doubles); i++)
        json_double(&o, doubles[i]);
    json_arr_end(&o);
    json_key(&o, "nested");
    json_arr_begin(&o);
    json_obj_begin(&o);
    json_obj_end(&o);
    json_arr_begin(&o);
    json_null(&o);
    json_bool(&o, false);
    json_arr_end(&o);
    json_arr_end(&o);
    json_obj_end(&o);
    assert_int_equal(json_out_finish(&o, &text, &len), 0);
    assert_true(utf8_valid(text, len));

    v = parse_ok(text);
    a = json_get(v, "bytes");
    assert_int_equal(a->string_len, sizeof(all_bytes));
    assert_memory_equal(a->string, all_bytes, sizeof(all_bytes));
    assert_true(json_get_u64(v, "key \"with\" \\ and \n", 0) == UINT64_MAX);
    assert_true(json_get_double(v, "neg", 0) == -7);
    a = json_get(v, "doubles");
    assert_int_equal(a->n, N_ELEMENTS(doubles));
    for (size_t i = 0; i < N_ELEMENTS(doubles); i++) {
        assert_true(a->items[i].number == doubles[i]);
        assert_true(signbit(a->items[i].number) == signbit(doubles[i]));
    }
    a = json_get(v, "nested");
    assert_int_equal(a->items[0].type, JSON_OBJECT);
    assert_int_equal(a->items[1].items[1].type, JSON_FALSE);

    json_out_init(&o);
    json_write_value(&o, v);
    assert_int_equal(json_out_finish(&o, &again, &len2), 0);
    assert_int_equal(len2, len);
    assert_memory_equal(again, text, len);
    json_value_free(v);
    free(again);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_writer),
        cmocka_unit_test(test_json_members),
        cmocka_unit_test(test_json_writer_unbalanced),
        cmocka_unit_test(test_writer_edges),
        cmocka_unit_test(test_writer_escapes_in_runs),
        cmocka_unit_test(test_json_parse),
        cmocka_unit_test(test_json_parse_refused),
        cmocka_unit_test(test_parse_admin_messages),
        cmocka_unit_test(test_parse_typed_reads),
        cmocka_unit_test(test_parse_duplicate_names),
        cmocka_unit_test(test_parse_nul_in_member_name),
        cmocka_unit_test(test_parse_numbers),
        cmocka_unit_test(test_parse_strings),
        cmocka_unit_test(test_parse_refused_reasons),
        cmocka_unit_test(test_parse_refused_utf8),
        cmocka_unit_test(test_parse_truncated),
        cmocka_unit_test(test_parse_nesting),
        cmocka_unit_test(test_round_trip),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
