/* The daemon writes producer streams (shard format version 3): the real
 * logshardd, the real library, the real logctl.
 *  - each connection is one stream: all its shards name the same random
 *    stream id, and positions run 0..N-1 in order across roll-overs;
 *  - two connections get different stream ids;
 *  - logctl verify --spool finds every stream OK;
 *  - after kill -9 mid-stream and a restart (recovery), what is on disk is
 *    still a gap-free prefix of the stream, and verify says so. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"

#define RUN_MS 30000
#define MAX_STREAMS 8

/* ---- running logctl ---- */

/* Runs logctl with the arguments (NULL-terminated) and returns its
 * standard output (to free); *ret_code is its exit status. */
static char *logctl(struct harness *h, int *ret_code, ...)
{
    const char *argv[16];
    char *out_path = harness_path(h->dir, "logctl.out");
    char *text;
    size_t n = 0, len;
    va_list ap;
    int status;

    argv[n++] = harness_logctl();
    va_start(ap, ret_code);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 15;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    status = harness_run(argv, out_path, NULL, RUN_MS);
    assert_true(WIFEXITED(status));
    *ret_code = WEXITSTATUS(status);
    text = harness_slurp(out_path, &len);
    free(out_path);
    return text;
}

/* ---- reading the spool's streams back ---- */

/* One producer's records as cat --json shows them. */
struct stream_seen {
    char producer[64];
    char stream[64];     /* the first stream id seen */
    uint64_t records;    /* records seen */
    bool one_stream;     /* every record named that stream */
    bool in_order;       /* record k had position k and payload "<producer> k" */
};

static struct stream_seen *find_producer(struct stream_seen *seen, size_t *n, const char *producer)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp(seen[i].producer, producer) == 0)
            return &seen[i];
    assert_true(*n < MAX_STREAMS);
    memset(&seen[*n], 0, sizeof(seen[*n]));
    snprintf(seen[*n].producer, sizeof(seen[*n].producer), "%s", producer);
    seen[*n].one_stream = seen[*n].in_order = true;
    return &seen[(*n)++];
}

/* Reads every record of the spool with logctl cat --json --spool and sorts
 * them by producer. Returns the number of producers seen. */
static size_t read_streams(struct harness *h, struct stream_seen *seen)
{
    int code;
    char *text = logctl(h, &code, "cat", "--json", "--spool", h->spool, NULL);
    char *line = text, *nl;
    size_t n = 0;

    assert_int_equal(code, 0);
    for (; (nl = strchr(line, '\n')) != NULL; line = nl + 1) {
        struct json_value *v = NULL;
        const char *why = NULL, *stream, *payload;
        size_t off;
        struct stream_seen *s;
        char want[96];

        assert_int_equal(json_parse(line, (size_t)(nl - line), &v, &why, &off), 0);
        s = find_producer(seen, &n, json_get_str(v, "producer", "?"));
        stream = json_get_str(v, "stream", "");
        assert_int_equal(strlen(stream), 32); /* every record has a stream */
        if (s->records == 0)
            snprintf(s->stream, sizeof(s->stream), "%s", stream);
        else if (strcmp(s->stream, stream) != 0)
            s->one_stream = false;
        snprintf(want, sizeof(want), "%s %06" PRIu64, s->producer, s->records);
        payload = json_get_str(v, "payload", "");
        if (json_get_u64(v, "position", UINT64_MAX) != s->records || strcmp(payload, want) != 0)
            s->in_order = false;
        s->records++;
        json_value_free(v);
    }
    free(text);
    return n;
}

/* logctl verify --spool: exits 0, and says every one of n streams is OK. */
static void verify_spool(struct harness *h, size_t streams)
{
    int code;
    char *text = logctl(h, &code, "verify", "--json", "--spool", h->spool, NULL);
    size_t ok = 0;

    if (code != 0)
        fail_msg("logctl verify --spool exited %d:\n%s", code, text);
    for (char *p = text; (p = strstr(p, "{\"stream\":")) != NULL; p++)
        if (strncmp(p + 45, "\"ok\":true", 9) == 0)
            ok++;
    if (ok != streams)
        fail_msg("verify --spool: %zu streams OK, expected %zu:\n%s", ok, streams, text);
    free(text);
}

/* ---- producing ---- */

static void append_numbered(logshard *ls, const char *producer, uint64_t k, size_t size)
{
    char rec[512];
    int len = snprintf(rec, sizeof(rec), "%s %06" PRIu64, producer, k);

    assert_true((size_t)len < size && size <= sizeof(rec));
    assert_int_equal(logshard_append(ls, rec, (size_t)len), 0);
}

static logshard *connect_as(struct harness *h, const char *producer)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = producer };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    return ls;
}

/* ---- tests ---- */

/* Two producers, each across several roll-overs: one stream id per
 * producer in all its shards, the two differ, positions 0..N-1 in order,
 * verify finds both streams OK. */
static void test_streams_across_rollovers(void **state)
{
    struct harness *h = *state;
    const uint64_t n = 3000;
    struct stream_seen seen[MAX_STREAMS];
    logshard *a, *b;
    size_t producers;

    harness_write_config(h, "[shard]\nmax_shard_bytes = 16K\n");
    harness_start(h, NULL);
    a = connect_as(h, "alpha");
    b = connect_as(h, "beta");
    for (uint64_t k = 0; k < n; k++) {
        append_numbered(a, "alpha", k, 200);
        append_numbered(b, "beta", k, 200);
        if (k % 100 == 99) {
            assert_int_equal(logshard_flush(a, RUN_MS), 0);
            assert_int_equal(logshard_flush(b, RUN_MS), 0);
        }
    }
    assert_int_equal(logshard_flush(a, RUN_MS), 0);
    assert_int_equal(logshard_flush(b, RUN_MS), 0);
    logshard_close(a);
    logshard_close(b);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, RUN_MS));
    assert_int_equal(harness_count_files(h, "active", ""), 0);
    /* 2 x 3000 records of 16 + 12 bytes at 16 KiB a shard: rolled over. */
    assert_true(harness_count_files(h, "done", ".shard") >= 6);

    producers = read_streams(h, seen);
    assert_int_equal(producers, 2);
    for (size_t i = 0; i < producers; i++) {
        assert_true(seen[i].one_stream);
        assert_true(seen[i].in_order);
        assert_true(seen[i].records == n);
        assert_string_not_equal(seen[i].stream, "00000000000000000000000000000000");
    }
    assert_string_not_equal(seen[0].stream, seen[1].stream);
    verify_spool(h, 2);
}

/* Each connection is a stream of its own: the same producer name connecting
 * twice gets two streams, each from position 0. */
static void test_each_connection_is_a_stream(void **state)
{
    struct harness *h = *state;
    int code;
    char *text;
    logshard *ls;
    char first[64] = "", second[64] = "";
    char *line, *nl;

    harness_start(h, NULL);
    for (int round = 0; round < 2; round++) {
        ls = connect_as(h, "again");
        for (uint64_t k = 0; k < 10; k++)
            append_numbered(ls, "again", k, 64);
        assert_int_equal(logshard_flush(ls, RUN_MS), 0);
        logshard_close(ls);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, RUN_MS));

    text = logctl(h, &code, "cat", "--json", "--spool", h->spool, NULL);
    assert_int_equal(code, 0);
    line = text;
    for (unsigned i = 0; (nl = strchr(line, '\n')) != NULL; line = nl + 1, i++) {
        struct json_value *v = NULL;
        const char *why = NULL;
        size_t off;
        char *which = i < 10 ? first : second;

        assert_int_equal(json_parse(line, (size_t)(nl - line), &v, &why, &off), 0);
        assert_true(json_get_u64(v, "position", UINT64_MAX) == i % 10);
        if (i % 10 == 0)
            snprintf(which, 64, "%s", json_get_str(v, "stream", ""));
        assert_string_equal(json_get_str(v, "stream", ""), which);
        json_value_free(v);
        assert_true(i < 20);
    }
    assert_int_equal(strlen(first), 32);
    assert_int_equal(strlen(second), 32);
    assert_string_not_equal(first, second);
    free(text);
    verify_spool(h, 2);
}

struct done_wait {
    struct harness *h;
    size_t shards;
};

static bool done_has_shards(void *arg)
{
    struct done_wait *w = arg;
    return harness_count_files(w->h, "done", ".shard") >= w->shards;
}

/* A producer that appends numbered records, flushing every 64, until the
 * daemon goes away. */
static void killed_producer_main(const char *sock)
{
    logshard_opts opts = { .socket_path = sock, .producer = "killed" };
    logshard *ls = NULL;

    if (logshard_connect(&ls, &opts) < 0)
        _exit(1);
    for (uint64_t k = 0;; k++) {
        char rec[64];
        int len = snprintf(rec, sizeof(rec), "killed %06" PRIu64, k);

        if (logshard_append(ls, rec, (size_t)len) < 0)
            break;
        if (k % 64 == 63 && logshard_flush(ls, RUN_MS) < 0)
            break;
    }
    logshard_close(ls);
    _exit(0);
}

/* kill -9 while a stream is rolling over, then a restart: recovery seals
 * what the killed daemon left in active/, and the stream on disk is still
 * positions 0..k-1, each once, in order; verify finds it OK. */
static void test_kill_mid_stream(void **state)
{
    struct harness *h = *state;
    struct done_wait w = { .h = h, .shards = 3 };
    struct stream_seen seen[MAX_STREAMS];
    pid_t pid;
    int status;

    harness_write_config(h, "[shard]\nmax_shard_bytes = 8K\n");
    harness_start(h, NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        killed_producer_main(h->sock);
    assert_true(harness_wait_for(done_has_shards, &w, RUN_MS));
    assert_true(WIFSIGNALED(harness_stop(h, SIGKILL, RUN_MS)));
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));

    harness_start(h, NULL); /* recovery runs before it is ready */
    harness_assert_clean_exit(harness_stop(h, SIGTERM, RUN_MS));
    assert_int_equal(harness_count_files(h, "active", ""), 0);

    assert_int_equal(read_streams(h, seen), 1);
    assert_string_equal(seen[0].producer, "killed");
    assert_true(seen[0].one_stream);
    assert_true(seen[0].in_order);
    assert_true(seen[0].records >= 3 * (8192 / (16 + 13)) / 2);
    verify_spool(h, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_streams_across_rollovers, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_each_connection_is_a_stream, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_kill_mid_stream, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
