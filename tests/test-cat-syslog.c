/* logctl cat on the records of the syslog inputs: the fields of each
 * message in --meta and --json, and the --priority and --identifier
 * filters (journalctl's -p and -t), run as the real logctl on a merged
 * file of shards built with the encoders: a syslog datagram shard holding
 * what glibc's syslog(3), logger --rfc5424 and Python's SysLogHandler
 * send, a syslog stream shard, and a client's shard whose payloads look
 * like syslog messages but are not to be read as such. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "harness.h"
#include "json.h"
#include "shard-bytes.h"
#include "shard_format.h"

/* Receive times: 2026-12-02T10:00:00Z and on, one second apart. */
#define TS0 1796205600000000000ull
#define SECOND 1000000000ull

/* The datagram shard (cron.u0 is what the daemon names the producer). */
static const char *const dgram_msgs[] = {
    "<78>Dec  2 10:00:00 CRON[4100]: (root) CMD (run-parts /etc/cron.hourly)",
    "<11>Dec  2 10:00:01 sshd[812]: error: kex_exchange_identification: banner line",
    "<165>1 2026-12-02T09:59:59.250Z web1 app 77 ID47 [exampleSDID@32473 iut=\"3\"] boot",
    "<14>hello from python",
    "no priority at all",
    "<12>Dec  2 10:00:05 sshd[813]: warning: weak key",
};

static const char *const stream_msgs[] = {
    "<30>Dec  2 10:00:06 myapp[900]: started",
};

/* A client's payloads that merely look like syslog. */
static const char *const client_msgs[] = {
    "<11>Dec  2 10:00:00 sshd[1]: not a syslog record",
};

static struct shard_header header(const char *producer, uint64_t id, unsigned source)
{
    struct shard_header h;

    memset(&h, 0, sizeof(h));
    h.version = source ? SHARD_FORMAT_VERSION_SOURCE : 2;
    h.source = (uint16_t)source;
    h.uid = 0;
    h.gid = 0;
    h.pid = 4100;
    h.shard_id = id;
    h.created_ns = TS0 - SECOND;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    return h;
}

static void add_shard(struct bytebuf *b, const struct shard_header *h, const char *const *msgs,
                      size_t n, uint64_t first_ts, bool creds)
{
    size_t start = shard_bytes_add_header(b, h);

    for (size_t i = 0; i < n; i++) {
        struct shard_creds c = { .pid = 5000 + (uint32_t)i, .uid = 0, .gid = 0 };

        shard_bytes_add_record(b, msgs[i], (uint32_t)strlen(msgs[i]), first_ts + i * SECOND,
                               creds ? &c : NULL);
    }
    shard_bytes_add_trailer(b, start, n, first_ts + n * SECOND);
}

static char *make_file(struct harness *h)
{
    struct shard_header dg = header("cron.u0", 1, SHARD_SOURCE_SYSLOG_DATAGRAM);
    struct shard_header st = header("myapp.u0", 2, SHARD_SOURCE_SYSLOG_STREAM);
    struct shard_header cl = header("client", 3, 0);
    struct bytebuf b = { 0 };
    char *path = harness_path(h->dir, "syslog.lsm");
    int fd;

    add_shard(&b, &dg, dgram_msgs, sizeof(dgram_msgs) / sizeof(dgram_msgs[0]), TS0, true);
    add_shard(&b, &st, stream_msgs, 1, TS0 + 6 * SECOND, false);
    add_shard(&b, &cl, client_msgs, 1, TS0, false);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
    assert_int_equal(close(fd), 0);
    free(b.p);
    return path;
}

/* logctl cat with up to five arguments (the first NULL ends them),
 * expected to exit with code; its output (to free). */
static char *cat(struct harness *h, int code, const char *a1, const char *a2, const char *a3,
                 const char *a4, const char *a5)
{
    struct harness_run r = harness_run_logctl(h, "cat", a1, a2, a3, a4, a5, NULL);
    char *out;

    harness_expect_code(&r, code, "logctl cat");
    out = strdup(r.out ? r.out : "");
    assert_non_null(out);
    harness_run_free(&r);
    return out;
}

static void test_meta_fields(void **state)
{
    struct harness *h = *state;
    char *file = make_file(h);
    char *out = cat(h, 0, "--meta", file, NULL, NULL, NULL);
    static const char *const want[] = {
        /* glibc's syslog(3): cron (9), info (6); no hostname. */
        "source=syslog-datagram pid=5000 uid=0 gid=0 facility=cron severity=info "
        "identifier=CRON procid=4100 hostname=- time=2026-12-02T10:00:00.000000Z "
        "<78>Dec  2 10:00:00 CRON[4100]:",
        /* user (1), err (3). */
        "pid=5001 uid=0 gid=0 facility=user severity=err identifier=sshd procid=812",
        /* RFC 5424: local4 (20), notice (5), its own time and host. */
        "pid=5002 uid=0 gid=0 facility=local4 severity=notice identifier=app procid=77 "
        "hostname=web1 time=2026-12-02T09:59:59.250000Z <165>1 ",
        /* Python: user (1), info (6), nothing else. */
        "pid=5003 uid=0 gid=0 facility=user severity=info identifier=- procid=- hostname=- "
        "time=- <14>hello from python",
        /* No PRI: no field. */
        "pid=5004 uid=0 gid=0 facility=- severity=- identifier=- procid=- hostname=- time=- "
        "no priority at all",
        "pid=5005 uid=0 gid=0 facility=user severity=warning identifier=sshd procid=813",
        /* The stream shard: no credentials per record. */
        "source=syslog-stream pid=- uid=- gid=- facility=daemon severity=info "
        "identifier=myapp procid=900",
    };
    const char *at = out;

    /* Each in order, each on a line of its own. */
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *found = strstr(at, want[i]);
        const char *nl;

        if (!found)
            fail_msg("--meta line %zu lacks \"%s\" in:\n%s", i, want[i], out);
        nl = strchr(at, '\n');
        assert_non_null(nl);
        assert_true(found < nl); /* on line i, not a later one */
        at = nl + 1;
    }
    /* A client's record is printed as before: no fields, whatever it holds. */
    assert_non_null(strstr(at, " - - <11>Dec  2 10:00:00 sshd[1]: not a syslog record\n"));
    assert_null(strstr(at, "facility="));
    free(out);
    free(file);
}

static void test_json_fields(void **state)
{
    struct harness *h = *state;
    char *file = make_file(h);
    char *out = cat(h, 0, "--json", file, NULL, NULL, NULL);
    char *line = out, *nl;
    size_t n = 0;

    for (; (nl = strchr(line, '\n')) != NULL; line = nl + 1, n++) {
        struct json_value *v = NULL;
        const struct json_value *sl;
        const char *why = NULL;
        size_t off;

        assert_int_equal(json_parse(line, (size_t)(nl - line), &v, &why, &off), 0);
        sl = json_get(v, "syslog");
        if (n == 7) {
            /* The client's record has no syslog member. */
            assert_null(sl);
        } else {
            assert_non_null(sl);
        }
        if (n == 2) {
            assert_string_equal(json_get_str(sl, "format", ""), "rfc5424");
            assert_string_equal(json_get_str(sl, "facility", ""), "local4");
            assert_string_equal(json_get_str(sl, "severity", ""), "notice");
            assert_string_equal(json_get_str(sl, "identifier", ""), "app");
            assert_string_equal(json_get_str(sl, "procid", ""), "77");
            assert_string_equal(json_get_str(sl, "hostname", ""), "web1");
            assert_string_equal(json_get_str(sl, "msgid", ""), "ID47");
            assert_string_equal(json_get_str(sl, "time", ""), "2026-12-02T09:59:59.250000000Z");
            assert_string_equal(json_get_str(sl, "structured_data", ""),
                                "[exampleSDID@32473 iut=\"3\"]");
        }
        if (n == 0) {
            assert_string_equal(json_get_str(sl, "format", ""), "rfc3164");
            assert_string_equal(json_get_str(sl, "identifier", ""), "CRON");
            assert_string_equal(json_get_str(sl, "severity", ""), "info");
            assert_null(json_get_str(sl, "hostname", NULL));
            assert_null(json_get_str(sl, "structured_data", NULL));
        }
        if (n == 4) {
            assert_string_equal(json_get_str(sl, "format", ""), "none");
            assert_null(json_get_str(sl, "facility", NULL));
            assert_null(json_get_str(sl, "severity", NULL));
        }
        json_value_free(v);
    }
    assert_int_equal(n, 8);
    free(out);
    free(file);
}

static void test_priority_filter(void **state)
{
    struct harness *h = *state;
    char *file = make_file(h);
    char *out;

    /* err and more important: sshd's error only (the client's "<11>" is
     * not a syslog record). */
    out = cat(h, 0, "--priority", "err", file, NULL, NULL);
    assert_string_equal(out,
                        "<11>Dec  2 10:00:01 sshd[812]: error: kex_exchange_identification: "
                        "banner line\n");
    free(out);
    /* By number, the same. */
    out = cat(h, 0, "--priority", "3", file, NULL, NULL);
    assert_non_null(strstr(out, "sshd[812]"));
    assert_null(strstr(out, "sshd[813]"));
    free(out);
    /* A range, in either order: warning and notice. */
    out = cat(h, 0, "--priority", "warning..notice", file, NULL, NULL);
    assert_string_equal(out, "<165>1 2026-12-02T09:59:59.250Z web1 app 77 ID47 "
                             "[exampleSDID@32473 iut=\"3\"] boot\n"
                             "<12>Dec  2 10:00:05 sshd[813]: warning: weak key\n");
    free(out);
    out = cat(h, 0, "--priority", "notice..warning", file, NULL, NULL);
    assert_non_null(strstr(out, "weak key"));
    assert_non_null(strstr(out, "boot"));
    free(out);
    /* debug: every syslog record with a priority, not the one without. */
    out = cat(h, 0, "--priority", "debug", file, NULL, NULL);
    assert_null(strstr(out, "no priority at all"));
    assert_null(strstr(out, "not a syslog record"));
    assert_non_null(strstr(out, "started"));
    free(out);
    /* A level that is none. */
    out = cat(h, 2, "--priority", "loud", file, NULL, NULL);
    free(out);
    out = cat(h, 2, "--priority", "err..", file, NULL, NULL);
    free(out);
    free(file);
}

static void test_identifier_filter(void **state)
{
    struct harness *h = *state;
    char *file = make_file(h);
    char *out;

    out = cat(h, 0, "--identifier", "sshd", file, NULL, NULL);
    assert_string_equal(out,
                        "<11>Dec  2 10:00:01 sshd[812]: error: kex_exchange_identification: "
                        "banner line\n"
                        "<12>Dec  2 10:00:05 sshd[813]: warning: weak key\n");
    free(out);
    /* -t repeated: either. */
    out = cat(h, 0, "-t", "CRON", "-t", "myapp", file);
    assert_string_equal(out, "<78>Dec  2 10:00:00 CRON[4100]: (root) CMD (run-parts "
                             "/etc/cron.hourly)\n"
                             "<30>Dec  2 10:00:06 myapp[900]: started\n");
    free(out);
    /* Both filters: sshd at warning or worse, from the datagram producer. */
    out = cat(h, 0, "-t", "sshd", "--priority", "warning", file);
    assert_int_equal(strlen(out) > 0, 1);
    assert_non_null(strstr(out, "sshd[812]"));
    assert_non_null(strstr(out, "sshd[813]"));
    free(out);
    out = cat(h, 0, "-t", "sshd", "--priority", "err", file);
    assert_null(strstr(out, "sshd[813]"));
    free(out);
    /* An identifier nobody has: nothing, and no error. */
    out = cat(h, 0, "-t", "nobody", file, NULL, NULL);
    assert_string_equal(out, "");
    free(out);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_meta_fields, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_json_fields, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_priority_filter, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_identifier_filter, harness_setup, harness_teardown),
    };

    /* RFC 3164 stamps are local time: the expected times are in UTC. */
    setenv("TZ", "UTC", 1);

    return cmocka_run_group_tests(tests, NULL, NULL);
}
