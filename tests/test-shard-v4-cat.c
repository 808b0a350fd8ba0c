/* The real logctl cat --meta and --json on a merged file of version 4
 * shards built by hand (shard-v4-file.c) next to a client's version 3 and
 * version 2 shards: the source and the credentials shown for the syslog
 * shards and for a source logctl does not know, a client's records printed
 * exactly as before version 4, and without --meta the payload alone. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "harness.h"
#include "json.h"
#include "shard-v4-file.h"
#include "shard_format.h"

/* Writes b to dir/name and returns the path (to free). */
static char *write_file(struct harness *h, const char *name, const struct bytebuf *b)
{
    char *path = harness_path(h->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, b->p, b->len), (ssize_t)b->len);
    assert_int_equal(close(fd), 0);
    return path;
}

/* The file of the cat tests: a client's version 3 shard and a version 2
 * one, a syslog datagram shard with and without credentials, a syslog
 * stream shard with a stream, and a shard of a source logctl does not
 * know. */
static char *cat_file(struct harness *h)
{
    struct shard_header client = v4_make_header("app", 1, 3, 0, stream_s, 500);
    struct shard_header plain = v4_make_header("plain", 2, 2, 0, NULL, 0);
    struct shard_header dgram = v4_make_header("cron.u1001", 3, 0, 1, NULL, 0);
    struct shard_header strm = v4_make_header("logger", 4, 0, 2, stream_s, 9);
    struct shard_header other = v4_make_header("later.u0", 5, 0, 7, NULL, 0);
    struct bytebuf b = { 0 };
    char *path;

    v4_add_shard(&b, &client, "app", 2, 0, true, NULL);
    v4_add_shard(&b, &plain, "plain", 1, 0, true, NULL);
    v4_add_shard(&b, &dgram, "dgram", 2, 0x1, true, NULL);
    v4_add_shard(&b, &strm, "strm", 1, 0, true, NULL);
    v4_add_shard(&b, &other, "other", 1, 0x1, true, NULL);
    path = write_file(h, "v4.lsm", &b);
    free(b.p);
    return path;
}

/* What --meta adds for a syslog record whose payload is not a syslog
 * message (no PRI): every field of the message absent. */
#define NO_SYSLOG_FIELDS "facility=- severity=- identifier=- procid=- hostname=- time=- "

static void test_cat_meta(void **state)
{
    struct harness *h = *state;
    char *file = cat_file(h);
    struct harness_run r = harness_run_logctl(h, "cat", "--meta", file, NULL);
    /* Client shards: exactly the lines of before version 4. */
    static const char want[] =
        "app 2027-01-15T08:00:00.000000Z 0000000000000001 " STREAM_S_HEX " 500 app 0\n"
        "app 2027-01-15T08:00:00.000000Z 0000000000000001 " STREAM_S_HEX " 501 app 1\n"
        "plain 2027-01-15T08:00:00.000000Z 0000000000000002 - - plain 0\n"
        "cron.u1001 2027-01-15T08:00:00.000000Z 0000000000000003 - - "
        "source=syslog-datagram pid=7000 uid=1000 gid=2000 " NO_SYSLOG_FIELDS "dgram 0\n"
        "cron.u1001 2027-01-15T08:00:00.000000Z 0000000000000003 - - "
        "source=syslog-datagram pid=- uid=- gid=- " NO_SYSLOG_FIELDS "dgram 1\n"
        "logger 2027-01-15T08:00:00.000000Z 0000000000000004 " STREAM_S_HEX " 9 "
        "source=syslog-stream pid=- uid=- gid=- " NO_SYSLOG_FIELDS "strm 0\n"
        "later.u0 2027-01-15T08:00:00.000000Z 0000000000000005 - - "
        "source=7 pid=7000 uid=1000 gid=2000 other 0\n";

    harness_expect_code(&r, 0, "cat --meta");
    assert_string_equal(r.out, want);
    harness_run_free(&r);

    /* Without --meta the payload alone, credentials never in it. */
    r = harness_run_logctl(h, "cat", file, NULL);
    harness_expect_code(&r, 0, "cat");
    assert_string_equal(r.out, "app 0\napp 1\nplain 0\ndgram 0\ndgram 1\nstrm 0\nother 0\n");
    harness_run_free(&r);
    free(file);
}

static void test_cat_json(void **state)
{
    struct harness *h = *state;
    char *file = cat_file(h);
    struct harness_run r = harness_run_logctl(h, "cat", "--json", file, NULL);
    static const char client_line[] =
        "{\"producer\":\"app\",\"uid\":1000,\"gid\":100,\"pid\":4242,"
        "\"time\":\"2027-01-15T08:00:00.000000000Z\",\"shard\":\"0000000000000001\","
        "\"stream\":\"" STREAM_S_HEX "\",\"position\":500,\"payload\":\"app 0\"}\n"
        "{\"producer\":\"app\",\"uid\":1000,\"gid\":100,\"pid\":4242,"
        "\"time\":\"2027-01-15T08:00:00.000000001Z\",\"shard\":\"0000000000000001\","
        "\"stream\":\"" STREAM_S_HEX "\",\"position\":501,\"payload\":\"app 1\"}\n"
        /* The next shard's own header fields, without a stream. */
        "{\"producer\":\"plain\",\"uid\":1000,\"gid\":100,\"pid\":4242,"
        "\"time\":\"2027-01-15T08:00:00.000000000Z\",\"shard\":\"0000000000000002\","
        "\"stream\":null,\"position\":null,\"payload\":\"plain 0\"}\n";
    static const struct {
        const char *source; /* NULL: no member */
        long pid;           /* -1: credentials null */
        const char *payload;
    } want[] = {
        { NULL, 0, "app 0" },
        { NULL, 0, "app 1" },
        { NULL, 0, "plain 0" },
        { "syslog-datagram", 7000, "dgram 0" },
        { "syslog-datagram", -1, "dgram 1" },
        { "syslog-stream", -1, "strm 0" },
        { "7", 7000, "other 0" },
    };
    char *line, *nl;
    size_t n = 0;

    harness_expect_code(&r, 0, "cat --json");
    /* A client's objects are byte for byte what they were, from one shard
     * and the next. */
    if (strncmp(r.out, client_line, strlen(client_line)) != 0)
        fail_msg("cat --json printed:\n%s", r.out);
    for (line = r.out; (nl = strchr(line, '\n')) != NULL; line = nl + 1, n++) {
        struct json_value *v = NULL;
        const struct json_value *source, *creds;
        const char *why = NULL;
        size_t off;

        assert_true(n < sizeof(want) / sizeof(want[0]));
        assert_int_equal(json_parse(line, (size_t)(nl - line), &v, &why, &off), 0);
        assert_string_equal(json_get_str(v, "payload", ""), want[n].payload);
        source = json_get(v, "source");
        creds = json_get(v, "credentials");
        if (!want[n].source) {
            assert_null(source);
            assert_null(creds);
        } else {
            assert_non_null(source);
            assert_string_equal(json_get_str(v, "source", ""), want[n].source);
            assert_non_null(creds);
            if (want[n].pid < 0) {
                assert_int_equal(creds->type, JSON_NULL);
            } else {
                assert_int_equal(creds->type, JSON_OBJECT);
                assert_true(json_get_u64(creds, "pid", 0) == (uint64_t)want[n].pid);
                assert_true(json_get_u64(creds, "uid", 0) == 1000);
                assert_true(json_get_u64(creds, "gid", 0) == 2000);
            }
            /* The members come before the payload, after the position. */
            assert_true(strstr(line, "\"position\":") < strstr(line, "\"source\":"));
            assert_true(strstr(line, "\"credentials\":") < strstr(line, "\"payload\":"));
        }
        json_value_free(v);
    }
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    harness_run_free(&r);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_cat_meta, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_cat_json, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
