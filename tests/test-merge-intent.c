/* Unit tests of the merge intent parser (merge/merge-intent.c): the text
 * that decides, after a merge was killed, which sources --delete removes.
 * It must accept what merge_intent_format writes, byte for byte back, and
 * refuse everything a merge could not have written: every truncation,
 * every changed byte, a hand edit that carries a correct checksum but
 * breaks the format, names that recovery would open or unlink outside the
 * places it writes, a source listed twice, and counts that would make it
 * allocate more than the text holds. Texts are built here, with the
 * checksum computed by the common CRC32C code, so a test that means to
 * reach a check past the checksum does. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "merge-internal.h"

#define NAME_A1 "alpha.0000000000000001.shard"
#define NAME_A2 "alpha.00000000000000ff.shard"
#define NAME_B7 "beta.0000000000000007.shard"

/* The text of an intent with body before its "end" line: body, then
 * "end <crc32c of body>\n". A new string. */
static char *with_crc(const char *body)
{
    char *text;

    assert_true(asprintf(&text, "%send %08" PRIx32 "\n", body, crc32c(body, strlen(body))) > 0);
    return text;
}

/* The body of a good intent with three sources of 10, 20 and 30 bytes. */
static const char good_body[] = "logshard-merge-intent 1\n"
                                "delete 1\n"
                                "dir /var/lib/logshard/merged\n"
                                "output merged-1.lsm\n"
                                "temp .merged-1.lsm.42.tmp\n"
                                "bytes 60\n"
                                "sources 3\n"
                                "source 10 " NAME_A1 "\n"
                                "source 20 " NAME_A2 "\n"
                                "source 30 " NAME_B7 "\n";

/* Parses text (its strlen) and expects -EBADMSG with a reason, and *ret
 * untouched. Returns the reason. */
static const char *expect_refused_len(const char *text, size_t len)
{
    struct merge_intent in, before;
    const char *why = NULL;

    memset(&in, 0xa5, sizeof(in));
    before = in;
    assert_int_equal(merge_intent_parse(text, len, &in, &why), -EBADMSG);
    assert_non_null(why);
    assert_true(why[0] != '\0');
    assert_memory_equal(&in, &before, sizeof(in));
    return why;
}

static const char *expect_refused(const char *text)
{
    return expect_refused_len(text, strlen(text));
}

/* The body with its checksum, refused, for the reason wanted (a prefix). */
static void expect_body_refused(const char *body, const char *why_prefix)
{
    char *text = with_crc(body);
    const char *why = expect_refused(text);

    if (strncmp(why, why_prefix, strlen(why_prefix)) != 0)
        fail_msg("body refused for \"%s\", not \"%s\":\n%s", why, why_prefix, body);
    free(text);
}

/* good_body with the first occurrence of from replaced by to, a new string. */
static char *good_with(const char *from, const char *to)
{
    const char *at = strstr(good_body, from);
    char *out;

    assert_non_null(at);
    assert_true(asprintf(&out, "%.*s%s%s", (int)(at - good_body), good_body, to,
                         at + strlen(from)) > 0);
    return out;
}

/* A hand edit with a correct checksum, refused as not in the format. */
static void expect_edit_refused(const char *from, const char *to)
{
    char *body = good_with(from, to);

    expect_body_refused(body, "not ");
    free(body);
}

static void test_parse_good(void **state)
{
    char *text = with_crc(good_body);
    struct merge_intent in;
    const char *why = "untouched";
    (void)state;

    assert_int_equal(merge_intent_parse(text, strlen(text), &in, &why), 0);
    assert_string_equal(why, "untouched");
    assert_true(in.delete_sources);
    assert_string_equal(in.dir, "/var/lib/logshard/merged");
    assert_string_equal(in.output, "merged-1.lsm");
    assert_string_equal(in.temp, ".merged-1.lsm.42.tmp");
    assert_true(in.bytes == 60);
    assert_int_equal(in.n_sources, 3);
    assert_string_equal(in.sources[0].name, NAME_A1);
    assert_string_equal(in.sources[0].producer, "alpha");
    assert_true(in.sources[0].id == 1 && in.sources[0].bytes == 10);
    assert_string_equal(in.sources[1].name, NAME_A2);
    assert_true(in.sources[1].id == 0xff && in.sources[1].bytes == 20);
    assert_string_equal(in.sources[2].producer, "beta");
    assert_true(in.sources[2].id == 7 && in.sources[2].bytes == 30);
    for (size_t i = 0; i < in.n_sources; i++)
        assert_int_equal(in.sources[i].fd, -1);
    merge_intent_free(&in);

    /* The text need not end with a NUL: exactly len bytes are read. */
    {
        size_t len = strlen(text);
        char *copy = malloc(len);

        assert_non_null(copy);
        memcpy(copy, text, len);
        assert_int_equal(merge_intent_parse(copy, len, &in, NULL), 0);
        merge_intent_free(&in);
        free(copy);
    }
    free(text);

    /* delete 0, and no source at all. */
    text = with_crc("logshard-merge-intent 1\ndelete 0\ndir /\noutput o\ntemp t\nbytes 0\n"
                    "sources 0\n");
    assert_int_equal(merge_intent_parse(text, strlen(text), &in, NULL), 0);
    assert_false(in.delete_sources);
    assert_string_equal(in.dir, "/");
    assert_int_equal(in.n_sources, 0);
    assert_null(in.sources);
    merge_intent_free(&in);
    free(text);
}

/* What merge_intent_format writes is read back as it was, escapes
 * included, and formatting that again gives the same text. */
static void test_format_round_trip(void **state)
{
    struct merge_source v[3] = {
        { .name = (char *)NAME_A1, .bytes = 10 },
        { .name = (char *)NAME_A2, .bytes = UINT64_MAX - 40 },
        { .name = (char *)NAME_B7, .bytes = 30 },
    };
    static const char dir[] = "/tmp/a dir\nwith \\ a newline\\n";
    static const char output[] = "out\\put\n.lsm";
    char *text, *again;
    size_t len, len2;
    struct merge_intent in;
    (void)state;

    assert_int_equal(merge_intent_format(true, dir, output, ".t.1.tmp", v, 3, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    assert_non_null(strstr(text, "\ndir /tmp/a dir\\nwith \\\\ a newline\\\\n\n"));
    assert_int_equal(merge_intent_parse(text, len, &in, NULL), 0);
    assert_true(in.delete_sources);
    assert_string_equal(in.dir, dir);
    assert_string_equal(in.output, output);
    assert_string_equal(in.temp, ".t.1.tmp");
    assert_true(in.bytes == UINT64_MAX);
    assert_int_equal(in.n_sources, 3);
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(in.sources[i].name, v[i].name);
        assert_true(in.sources[i].bytes == v[i].bytes);
    }
    assert_int_equal(merge_intent_format(in.delete_sources, in.dir, in.output, in.temp,
                                         in.sources, in.n_sources, &again, &len2),
                     0);
    assert_int_equal(len2, len);
    assert_memory_equal(again, text, len);
    merge_intent_free(&in);
    free(again);
    free(text);
}

/* Every cut of a good intent is refused: cut anywhere, the last line is
 * not a complete "end" line or its checksum does not match; cut after any
 * line and given a correct checksum again, fields or sources are missing. */
static void test_every_truncation(void **state)
{
    char *text = with_crc(good_body);
    size_t len = strlen(text);
    (void)state;

    for (size_t cut = 0; cut < len; cut++)
        expect_refused_len(text, cut);
    for (size_t cut = 0; cut < sizeof(good_body) - 1; cut++) {
        char *body;

        if (cut > 0 && good_body[cut - 1] != '\n')
            continue;
        body = strndup(good_body, cut);
        assert_non_null(body);
        expect_body_refused(body, cut == 0 ? "not an intent of this version" : "not ");
        free(body);
    }
    free(text);
}

/* Every byte changed, to a neighbour bit, to another letter, to a NUL, a
 * newline or a space, is refused: CRC32C catches any change within 32 bits,
 * and one in the end line breaks the line or the value. */
static void test_every_byte_changed(void **state)
{
    static const unsigned char flips[] = { 0x01, 0x02, 0x20, 0x80 };
    static const char to[] = { '\0', '\n', ' ', '0', 'a' };
    char *text = with_crc(good_body);
    size_t len = strlen(text);
    char *copy = malloc(len);
    (void)state;

    assert_non_null(copy);
    for (size_t i = 0; i < len; i++) {
        for (size_t k = 0; k < sizeof(flips) + sizeof(to); k++) {
            memcpy(copy, text, len);
            if (k < sizeof(flips))
                copy[i] = (char)(copy[i] ^ flips[k]);
            else
                copy[i] = to[k - sizeof(flips)];
            if (copy[i] == text[i])
                continue;
            expect_refused_len(copy, len);
        }
    }
    /* A byte more or a byte less anywhere. */
    for (size_t i = 0; i <= len; i++) {
        char *longer = malloc(len + 1);

        assert_non_null(longer);
        memcpy(longer, text, i);
        longer[i] = 'x';
        memcpy(longer + i + 1, text + i, len - i);
        expect_refused_len(longer, len + 1);
        free(longer);
    }
    for (size_t i = 0; i < len; i++) {
        memcpy(copy, text, i);
        memcpy(copy + i, text + i + 1, len - i - 1);
        expect_refused_len(copy, len - 1);
    }
    free(copy);
    free(text);
}

/* Damage around the checksum line, and the reasons given. */
static void test_checksum_line(void **state)
{
    char *text = with_crc(good_body);
    char *bad;
    size_t len = strlen(text);
    (void)state;

    assert_string_equal(expect_refused(""), "damaged (not a complete intent)");
    assert_string_equal(expect_refused("\n"), "damaged (not a complete intent)");
    assert_string_equal(expect_refused(good_body), "damaged (not a complete intent)");
    /* No newline at the end. */
    assert_string_equal(expect_refused_len(text, len - 1), "damaged (not a complete intent)");
    /* Upper-case hex, which the writer never uses: an output name is
     * picked so that the checksum has a letter in it. */
    for (unsigned k = 0;; k++) {
        char name[32], *body, *upper;
        char *hex;

        assert_true(k < 100);
        snprintf(name, sizeof(name), "output merged-%u.lsm\n", k);
        body = good_with("output merged-1.lsm\n", name);
        upper = with_crc(body);
        hex = upper + strlen(upper) - 9;
        for (char *h = hex; *h != '\n'; h++)
            if (*h >= 'a' && *h <= 'f')
                *h = (char)(*h - 'a' + 'A');
        if (!strpbrk(hex, "ABCDEF")) {
            free(upper);
            free(body);
            continue;
        }
        assert_string_equal(expect_refused(upper), "damaged (not a complete intent)");
        free(upper);
        free(body);
        break;
    }
    /* A wrong checksum. */
    assert_true(asprintf(&bad, "%send 00000000\n", good_body) > 0);
    assert_string_equal(expect_refused(bad), "damaged (checksum mismatch)");
    free(bad);
    /* Seven and nine digits. */
    assert_true(asprintf(&bad, "%send %07" PRIx32 "\n", good_body,
                         crc32c(good_body, strlen(good_body)) & 0xfffffff) > 0);
    expect_refused(bad);
    free(bad);
    assert_true(asprintf(&bad, "%send 0%08" PRIx32 "\n", good_body,
                         crc32c(good_body, strlen(good_body))) > 0);
    expect_refused(bad);
    free(bad);
    /* Something after the end line. */
    assert_true(asprintf(&bad, "%ssources 3\n", text) > 0);
    expect_refused(bad);
    free(bad);
    free(text);
}

/* Hand edits that carry a correct checksum but are not what a merge
 * writes: each field is checked for itself. */
static void test_format_edits(void **state)
{
    (void)state;

    expect_edit_refused("logshard-merge-intent 1\n", "logshard-merge-intent 2\n");
    expect_edit_refused("logshard-merge-intent 1\n", "");
    expect_edit_refused("delete 1\n", "delete 2\n");
    expect_edit_refused("delete 1\n", "delete yes\n");
    expect_edit_refused("delete 1\n", "delete 1 \n");
    expect_edit_refused("delete 1\n", "delete 1\ndelete 1\n");
    expect_edit_refused("delete 1\n", "");
    expect_edit_refused("delete 1\n", "delete  1\n");
    expect_edit_refused("delete 1\n", "DELETE 1\n");
    expect_edit_refused("dir /var/lib/logshard/merged\n", "");
    expect_edit_refused("dir /var/lib/logshard/merged\n", "dir /a\ndir /b\n");
    expect_edit_refused("output merged-1.lsm\ntemp .merged-1.lsm.42.tmp\n",
                        "temp .merged-1.lsm.42.tmp\noutput merged-1.lsm\n");
    expect_edit_refused("bytes 60\n", "bytes 61\n");
    expect_edit_refused("bytes 60\n", "bytes +60\n");
    expect_edit_refused("bytes 60\n", "bytes -60\n");
    expect_edit_refused("bytes 60\n", "bytes 6e1\n");
    expect_edit_refused("bytes 60\n", "bytes  60\n");
    expect_edit_refused("bytes 60\n", "bytes\n");
    expect_edit_refused("bytes 60\n", "bytes 0x3c\n");
    expect_edit_refused("sources 3\n", "sources 2\n");
    expect_edit_refused("sources 3\n", "sources 4\n");
    expect_edit_refused("sources 3\n", "sources\n");
    expect_edit_refused("sources 3\n", "");
    expect_edit_refused("source 10 ", "source  10 ");
    expect_edit_refused("source 10 ", "source 10  ");
    expect_edit_refused("source 10 ", "source -10 ");
    expect_edit_refused("source 10 ", "source 10\t");
    expect_edit_refused("source 10 ", "sourc 10 ");
    expect_edit_refused("source 10 " NAME_A1 "\n", "source 10\n");
    expect_edit_refused("source 10 " NAME_A1 "\n", "source " NAME_A1 "\n");
    /* Line ends other than "\n". */
    expect_edit_refused("delete 1\n", "delete 1\r\n");
    /* Only "\\" and "\n" are escapes, and one cannot end a line. */
    expect_edit_refused("output merged-1.lsm\n", "output merged\\t1.lsm\n");
    expect_edit_refused("output merged-1.lsm\n", "output merged-1.lsm\\\n");
    expect_edit_refused("dir /var/lib/logshard/merged\n", "dir /var/lib\\0/merged\n");
    /* A line after the last source. */
    {
        char *body;

        assert_true(asprintf(&body, "%s%s", good_body, "source 1 " NAME_B7 "\n") > 0);
        expect_body_refused(body, "not ");
        free(body);
        assert_true(asprintf(&body, "%s\n", good_body) > 0);
        expect_body_refused(body, "not ");
        free(body);
    }
}

/* Recovery opens the directory, and opens and unlinks the output, the
 * temp file and each source in done/: every name must be one a merge
 * writes there, never a path that leads elsewhere. */
static void test_names(void **state)
{
    static const char *const bad_dirs[] = { "dir merged\n", "dir ./merged\n", "dir \n",
                                            "dir ~/merged\n" };
    static const char *const bad_outputs[] = { "output a/b\n", "output ..\n", "output .\n",
                                               "output \n", "output /etc/passwd\n",
                                               "output .merged-1.lsm.42.tmp\n" };
    static const char *const bad_temps[] = { "temp ../x\n", "temp ..\n", "temp .\n", "temp \n",
                                             "temp merged-1.lsm\n", "temp /tmp/t\n" };
    static const char *const bad_sources[] = {
        "../alpha.0000000000000001.shard",
        "x/alpha.0000000000000001.shard",
        "/alpha.0000000000000001.shard",
        ".alpha.0000000000000001.shard",
        "alpha.000000000000000G.shard",
        "alpha.000000000000000F.shard",
        "alpha.0000000000000001.tmp",
        "alpha.000000000000001.shard",
        "alpha.00000000000000001.shard",
        "alp ha.0000000000000001.shard",
        "alpha\\n.0000000000000001.shard",
        "alpha.0000000000000001.shard/",
        ".0000000000000001.shard",
        "0000000000000001.shard",
        "",
        /* 65 bytes of producer name, one over the rule's limit. */
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
        "0000000000000001.shard",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad_dirs) / sizeof(bad_dirs[0]); i++)
        expect_edit_refused("dir /var/lib/logshard/merged\n", bad_dirs[i]);
    for (size_t i = 0; i < sizeof(bad_outputs) / sizeof(bad_outputs[0]); i++)
        expect_edit_refused("output merged-1.lsm\n", bad_outputs[i]);
    for (size_t i = 0; i < sizeof(bad_temps) / sizeof(bad_temps[0]); i++)
        expect_edit_refused("temp .merged-1.lsm.42.tmp\n", bad_temps[i]);
    for (size_t i = 0; i < sizeof(bad_sources) / sizeof(bad_sources[0]); i++) {
        char *line;

        assert_true(asprintf(&line, "source 10 %s\n", bad_sources[i]) > 0);
        expect_edit_refused("source 10 " NAME_A1 "\n", line);
        free(line);
    }
    /* 64 bytes of producer name is within the rule, and names with dots,
     * dashes and underscores are fine. */
    {
        char *body = good_with(NAME_A1,
                               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                               ".0000000000000001.shard");
        char *text = with_crc(body);
        struct merge_intent in;

        assert_int_equal(merge_intent_parse(text, strlen(text), &in, NULL), 0);
        merge_intent_free(&in);
        free(text);
        free(body);
        body = good_with(NAME_A1, "a.b-c_d.0000000000000001.shard");
        text = with_crc(body);
        assert_int_equal(merge_intent_parse(text, strlen(text), &in, NULL), 0);
        assert_string_equal(in.sources[0].producer, "a.b-c_d");
        merge_intent_free(&in);
        free(text);
        free(body);
    }
}

/* A merge lists each source once, in output order (producer names in byte
 * order; within a producer its streams go by position, so ids may go down):
 * a name twice, also apart, or producers out of order, is refused. */
static void test_duplicates_and_order(void **state)
{
    static const char head[] = "logshard-merge-intent 1\ndelete 1\ndir /m\noutput o\ntemp t\n";
    static const struct {
        const char *sources;
        bool good;
    } cases[] = {
        { "bytes 2\nsources 2\nsource 1 " NAME_A1 "\nsource 1 " NAME_A1 "\n", false },
        { "bytes 3\nsources 3\nsource 1 " NAME_A1 "\nsource 1 " NAME_A2 "\nsource 1 " NAME_A1
          "\n",
          false },
        /* A stream whose later shard has the lower id (a clock that went
         * back): its shards go by position. */
        { "bytes 2\nsources 2\nsource 1 " NAME_A2 "\nsource 1 " NAME_A1 "\n", true },
        { "bytes 2\nsources 2\nsource 1 " NAME_B7 "\nsource 1 " NAME_A1 "\n", false },
        /* The same id, a different producer, in byte order: "B" < "a". */
        { "bytes 2\nsources 2\nsource 1 B.0000000000000001.shard\n"
          "source 1 a.0000000000000001.shard\n",
          true },
        { "bytes 2\nsources 2\nsource 1 a.0000000000000001.shard\n"
          "source 1 B.0000000000000001.shard\n",
          false },
        /* "a" < "a.b" as strcmp has it, although ids compare otherwise. */
        { "bytes 2\nsources 2\nsource 1 a.0000000000000009.shard\n"
          "source 1 a.b.0000000000000001.shard\n",
          true },
        { "bytes 2\nsources 2\nsource 1 " NAME_A1 "\nsource 1 " NAME_A2 "\n", true },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body, *text;
        struct merge_intent in;

        assert_true(asprintf(&body, "%s%s", head, cases[i].sources) > 0);
        text = with_crc(body);
        if (cases[i].good) {
            assert_int_equal(merge_intent_parse(text, strlen(text), &in, NULL), 0);
            assert_int_equal(in.n_sources, 2);
            merge_intent_free(&in);
        } else {
            const char *why = expect_refused(text);

            assert_non_null(strstr(why, "listed twice or out of order"));
        }
        free(text);
        free(body);
    }
}

/* Counts and sizes that would make the parser allocate more than the text
 * holds, or overflow: refused before anything is allocated for them. */
static void test_huge_counts(void **state)
{
    static const char *const edits[][2] = {
        { "sources 3\n", "sources 18446744073709551615\n" },
        { "sources 3\n", "sources 18446744073709551616\n" },
        { "sources 3\n", "sources 99999999999999999999999\n" },
        { "sources 3\n", "sources 1000000\n" },
        { "sources 3\n", "sources 4611686018427387904\n" },
        /* Had these been allocated for, the allocation would fail and the
         * parse return -ENOMEM rather than -EBADMSG. */
        { "sources 3\n", "sources 1099511627776\n" },
        { "bytes 60\n", "bytes 18446744073709551616\n" },
        { "bytes 60\n", "bytes 00000000000000000000060\n" },
        { "source 10 ", "source 18446744073709551616 " },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++)
        expect_edit_refused(edits[i][0], edits[i][1]);

    /* Sizes that add up past 2^64 wrap to the recorded total: refused. */
    expect_body_refused("logshard-merge-intent 1\ndelete 1\ndir /m\noutput o\ntemp t\n"
                        "bytes 9\nsources 2\n"
                        "source 18446744073709551615 " NAME_A1 "\n"
                        "source 10 " NAME_A2 "\n",
                        "not ");
    /* The largest total that fits is fine, and leading zeros are read. */
    {
        char *text = with_crc("logshard-merge-intent 1\ndelete 0\ndir /m\noutput o\ntemp t\n"
                              "bytes 18446744073709551615\nsources 002\n"
                              "source 18446744073709551605 " NAME_A1 "\n"
                              "source 010 " NAME_A2 "\n");
        struct merge_intent in;

        assert_int_equal(merge_intent_parse(text, strlen(text), &in, NULL), 0);
        assert_true(in.bytes == UINT64_MAX);
        assert_int_equal(in.n_sources, 2);
        assert_true(in.sources[1].bytes == 10);
        merge_intent_free(&in);
        free(text);
    }
    /* A count just within what the text could hold, one more than there
     * are lines: refused when the lines run out. */
    {
        enum { N = 2000 };
        size_t cap = 64 + N * 64, used;
        char *body = malloc(cap), *text;

        assert_non_null(body);
        used = (size_t)snprintf(body, cap,
                                "logshard-merge-intent 1\ndelete 1\ndir /m\noutput o\ntemp t\n"
                                "bytes %u\nsources %u\n",
                                N, N + 1);
        for (unsigned i = 0; i < N; i++)
            used += (size_t)snprintf(body + used, cap - used, "source 1 a.%016x.shard\n", i);
        text = with_crc(body);
        expect_refused(text);
        free(text);
        free(body);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_every_byte_changed),
        cmocka_unit_test(test_checksum_line),
        cmocka_unit_test(test_format_edits),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_duplicates_and_order),
        cmocka_unit_test(test_huge_counts),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
