/* The daemon's side of protocol version 2, driven with raw frames, so that
 * every case the library would never produce can be tried: the real
 * logshardd, the wire codec, logctl to read the spool back.
 *  - a stream resumed after its connection ended continues at the stored
 *    position, and records below it that arrive anyway are acknowledged
 *    and not written again;
 *  - a resume while the earlier connection is still open closes that one
 *    and waits for its records;
 *  - after kill -9 the position comes from the spool (recovery and the
 *    scan of done/), also when the daemon died after the sync and before
 *    the ACK left (fault injection): the resent records are not written
 *    twice;
 *  - an unknown stream with records already acknowledged is refused with
 *    ESTALE, a frame that would leave a gap with EPROTO;
 *  - version 1 clients are served as before. */
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
#include "raw-stream.h"
#include "wire.h"

#define WAIT_MS 10000

static void make_id(uint8_t *id, unsigned seed)
{
    for (unsigned i = 0; i < WIRE_STREAM_ID_SIZE; i++)
        id[i] = (uint8_t)(seed * 31 + i * 7 + 1);
}

/* The payloads of the spool, one per line, through logctl cat; checks
 * that they are rec-000000 .. rec-(n-1), each once, in order, and that
 * logctl verify finds no gap or duplicate position. */
static void expect_spool_records(struct harness *h, uint64_t n)
{
    struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
    struct harness_run v;
    const char *p;
    uint64_t i = 0;

    harness_expect_code(&r, 0, "logctl cat --spool");
    p = r.out;
    while (p && *p) {
        char want[32];
        const char *nl = strchr(p, '\n');

        snprintf(want, sizeof(want), "rec-%06" PRIu64, i);
        if (!nl || (size_t)(nl - p) != strlen(want) || memcmp(p, want, strlen(want)) != 0)
            fail_msg("record %" PRIu64 " of the spool is '%.*s', not %s", i,
                     nl ? (int)(nl - p) : 20, p, want);
        i++;
        p = nl + 1;
    }
    if (i != n)
        fail_msg("the spool holds %" PRIu64 " records, not %" PRIu64, i, n);
    harness_run_free(&r);
    v = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
    harness_expect_code(&v, 0, "logctl verify --spool");
    harness_run_free(&v);
}

static void start(struct harness *h, const char *fsync)
{
    const char *args[] = { "--fsync", fsync, NULL };

    harness_start(h, args);
}

/* A new stream, its connection closed, resumed: the daemon continues where
 * the spool stands and does not write the records it has again. */
static void test_resume_after_close(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;

    make_id(id, 1);
    start(h, "batch");
    raw_stream_open(&c, h->sock, "resumer", id, 0);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    assert_int_equal(c.welcome.next_position, 0);
    raw_stream_append(&c, "rec-", 0, 10);
    raw_stream_wait_acked(&c, 10);
    raw_stream_close(&c);

    /* The library saw 10 acknowledged but still holds 5..9 (as if the ACK
     * had not reached it): the daemon says 10 and takes only 10.. */
    raw_stream_open(&c, h->sock, "resumer", id, 5);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    assert_int_equal(c.welcome.next_position, 10);
    raw_stream_append(&c, "rec-", 5, 10); /* 5..14: 5..9 are duplicates */
    raw_stream_wait_acked(&c, 15);
    raw_stream_append(&c, "rec-", 15, 5);
    raw_stream_wait_acked(&c, 20);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 20);
    assert_true(harness_log_has(h, "resumes stream"));
}

struct status_wait {
    struct harness *h;
    const char *text;
    char *last; /* the last output, for the failure message */
};

static bool status_has(void *arg)
{
    struct status_wait *w = arg;
    struct harness_run r = harness_run_logctl(w->h, "status", "--json", "--admin-socket",
                                              w->h->admin_sock, NULL);
    bool found = r.code == 0 && r.out && strstr(r.out, w->text);

    free(w->last);
    w->last = r.out ? strdup(r.out) : NULL;
    harness_run_free(&r);
    return found;
}

/* Waits until logctl status --json shows text (a deadline, no guessing). */
static void wait_status_has(struct harness *h, const char *text)
{
    struct status_wait w = { .h = h, .text = text };

    if (!harness_wait_for(status_has, &w, WAIT_MS))
        fail_msg("logctl status --json never showed %s; last: %s", text,
                 w.last ? w.last : "(nothing)");
    free(w.last);
}

/* A reload (SIGHUP) keeps what the daemon knows of its streams, and a
 * resume window it lowers applies to the streams already known. */
static void test_resume_across_reload(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;

    make_id(id, 8);
    start(h, "batch");
    raw_stream_open(&c, h->sock, "reloaded", id, 0);
    raw_stream_wait_welcome(&c);
    raw_stream_append(&c, "rec-", 0, 20);
    raw_stream_wait_acked(&c, 20);
    raw_stream_close(&c);
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    assert_true(harness_wait_log(h, "reloaded the settings", WAIT_MS));
    raw_stream_open(&c, h->sock, "reloaded", id, 20);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 20);
    raw_stream_append(&c, "rec-", 20, 5);
    raw_stream_wait_acked(&c, 25);
    raw_stream_close(&c);

    harness_write_config(h, "[streams]\nresume_window = 1s\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    wait_status_has(h, "\"forgotten\":1,");
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 25);
}

/* A resume while the earlier connection is still open: that one is closed
 * and its records settle before the new one is told where to go on. */
static void test_resume_while_open(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream old, c;

    make_id(id, 2);
    start(h, "none");
    raw_stream_open(&old, h->sock, "twice", id, 0);
    raw_stream_wait_welcome(&old);
    raw_stream_append(&old, "rec-", 0, 100);
    raw_stream_wait_acked(&old, 100);

    raw_stream_open(&c, h->sock, "twice", id, 40);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 100);
    raw_stream_wait_end(&old);
    raw_stream_close(&old);
    raw_stream_append(&c, "rec-", 100, 50);
    raw_stream_wait_acked(&c, 150);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 150);
}

/* kill -9 with the records written: the next daemon learns the position
 * from the spool alone. */
static void test_resume_after_kill(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;
    int status;

    make_id(id, 3);
    start(h, "none");
    raw_stream_open(&c, h->sock, "killed", id, 0);
    raw_stream_wait_welcome(&c);
    raw_stream_append(&c, "rec-", 0, 300);
    raw_stream_wait_acked(&c, 300);
    status = harness_stop(h, SIGKILL, WAIT_MS);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    raw_stream_close(&c);

    start(h, "none");
    raw_stream_open(&c, h->sock, "killed", id, 200);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 300);
    raw_stream_append(&c, "rec-", 200, 200); /* 200..399: 100 duplicates */
    raw_stream_wait_acked(&c, 400);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 400);
}

/* The duplicate the dedup exists for: the daemon wrote and synced the
 * records and died before their ACK left (LOGSHARD_FAULTS=kill_before_ack).
 * The producer saw nothing acknowledged and sends them all again. */
static void test_crash_before_ack(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;
    int status;

    make_id(id, 4);
    setenv("LOGSHARD_FAULTS", "kill_before_ack", 1);
    start(h, "batch");
    unsetenv("LOGSHARD_FAULTS");
    raw_stream_open(&c, h->sock, "unlucky", id, 0);
    raw_stream_wait_welcome(&c);
    raw_stream_append(&c, "rec-", 0, 64);
    raw_stream_wait_end(&c);
    assert_int_equal(c.acked, 0);
    raw_stream_close(&c);
    status = harness_wait_exit(h, WAIT_MS);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    start(h, "batch");
    raw_stream_open(&c, h->sock, "unlucky", id, 0);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 64);
    raw_stream_append(&c, "rec-", 0, 64); /* a naive producer: all of them again */
    raw_stream_wait_acked(&c, 64);
    raw_stream_append(&c, "rec-", 64, 1);
    raw_stream_wait_acked(&c, 65);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 65);
}

/* Streams the daemon cannot vouch for are refused, and so is a gap. */
static void test_refusals(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;

    start(h, "batch");
    make_id(id, 5);
    raw_stream_open(&c, h->sock, "stranger", id, 7);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.error, ESTALE);
    assert_non_null(strstr(c.message, "is not known here"));
    assert_int_equal(c.welcome.version, 0);
    raw_stream_close(&c);

    raw_stream_open(&c, h->sock, "gappy", id, 0);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 0);
    raw_stream_append(&c, "rec-", 0, 3);
    raw_stream_wait_acked(&c, 3);
    raw_stream_append(&c, "rec-", 5, 3);
    raw_stream_wait_end(&c);
    assert_int_equal(c.error, EPROTO);
    assert_non_null(strstr(c.message, "starts at position 5 but the stream is at 3"));
    raw_stream_close(&c);

    /* The same stream under another name is not that stream. */
    raw_stream_open(&c, h->sock, "impostor", id, 3);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.error, EINVAL);
    assert_non_null(strstr(c.message, "belongs to producer gappy"));
    raw_stream_close(&c);
    harness_assert_running(h);
}

/* How many lines of text start with prefix. */
static size_t count_prefixed_lines(const char *text, const char *prefix)
{
    size_t n = 0;

    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');

        if (strncmp(p, prefix, strlen(prefix)) == 0)
            n++;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

/* merge --delete removed every shard of the stream while the daemon was
 * down: the position survives in streams/, and the resumed stream writes
 * nothing twice. */
static void test_resume_after_merge_delete(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    char *merged = harness_path(h->dir, "merged.lsm");
    struct harness_run r;
    struct raw_stream c;

    make_id(id, 6);
    start(h, "batch");
    raw_stream_open(&c, h->sock, "merged", id, 0);
    raw_stream_wait_welcome(&c);
    raw_stream_append(&c, "rec-", 0, 50);
    raw_stream_wait_acked(&c, 50);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);

    r = harness_run_logctl(h, "merge", "--spool", h->spool, "--delete", "--output", merged,
                           NULL);
    harness_expect_code(&r, 0, "logctl merge --delete");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 0);

    start(h, "batch");
    raw_stream_open(&c, h->sock, "merged", id, 30);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 50);
    raw_stream_append(&c, "rec-", 30, 30); /* 30..59: 20 duplicates */
    raw_stream_wait_acked(&c, 60);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);

    r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
    harness_expect_code(&r, 0, "logctl cat --spool");
    assert_int_equal(count_prefixed_lines(r.out, "rec-"), 10);
    assert_true(strncmp(r.out, "rec-000050\n", 11) == 0);
    harness_run_free(&r);
    r = harness_run_logctl(h, "cat", merged, NULL);
    harness_expect_code(&r, 0, "logctl cat of the merged file");
    assert_int_equal(count_prefixed_lines(r.out, "rec-"), 50);
    harness_run_free(&r);
    r = harness_run_logctl(h, "verify", merged, NULL);
    harness_expect_code(&r, 0, "logctl verify of the merged file");
    harness_run_free(&r);
    r = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
    harness_expect_code(&r, 0, "logctl verify --spool");
    harness_run_free(&r);
    free(merged);
}

/* Past its resume window a stream is forgotten, and coming back with
 * acknowledged records is refused, not written twice. */
static void test_window_expired(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;

    harness_write_config(h, "[streams]\nresume_window = 1s\n");
    make_id(id, 7);
    start(h, "batch");
    raw_stream_open(&c, h->sock, "late", id, 0);
    raw_stream_wait_welcome(&c);
    raw_stream_append(&c, "rec-", 0, 5);
    raw_stream_wait_acked(&c, 5);
    raw_stream_close(&c);
    wait_status_has(h, "\"forgotten\":1,");

    raw_stream_open(&c, h->sock, "late", id, 3);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.error, ESTALE);
    raw_stream_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 5);
}

/* 10,000 streams that came and went: the table keeps at most max_streams,
 * forgetting the oldest idle ones first. */
static void test_many_streams_bounded(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw_stream c;

    harness_write_config(h, "[streams]\nmax_streams = 1000\n");
    start(h, "none");
    for (unsigned i = 0; i < 10000; i++) {
        memset(id, 0, sizeof(id));
        memcpy(id, &i, sizeof(i));
        id[15] = 0xA5;
        raw_stream_open(&c, h->sock, "fleeting", id, 0);
        raw_stream_wait_welcome(&c);
        assert_int_equal(c.welcome.next_position, 0);
        raw_stream_close(&c);
    }
    /* The last connection's close may still be on its way. */
    wait_status_has(h, "\"known\":1000,");
    wait_status_has(h, "\"forgotten\":9000,");
    /* The newest stream is still known: resuming it at 0 is a resume. */
    raw_stream_open(&c, h->sock, "fleeting", id, 0);
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    raw_stream_close(&c);
    wait_status_has(h, "\"resumed\":1,");
}

/* A connection accepted but not yet welcomed when the daemon starts to
 * stop is told to connect again (ESHUTDOWN), not dropped without a word. */
static void test_stopping_before_welcome(void **state)
{
    struct harness *h = *state;
    struct raw_stream c;
    int status;

    start(h, "batch");
    memset(&c, 0, sizeof(c));
    c.fd = harness_raw_connect(h->sock);
    /* The admin socket answers once the daemon has accepted us: then the
     * connection is a session waiting for its HELLO. */
    wait_status_has(h, "\"connections_accepted\":1,");
    assert_int_equal(kill(h->daemon, SIGTERM), 0);
    raw_stream_wait_end(&c);
    assert_int_equal(c.error, ESHUTDOWN);
    assert_non_null(strstr(c.message, "connect again"));
    raw_stream_close(&c);
    status = harness_wait_exit(h, WAIT_MS);
    harness_assert_clean_exit(status);
}

/* A version 1 client gets a version 1 WELCOME and counted ACKs. */
static void test_version1_still_served(void **state)
{
    struct harness *h = *state;
    const char *recs[] = { "a", "b", "c" };
    unsigned char frame[256];
    struct raw_stream c;

    start(h, "batch");
    memset(&c, 0, sizeof(c));
    c.fd = harness_raw_connect(h->sock);
    harness_raw_hello(c.fd, "old-client");
    raw_stream_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 1);
    harness_raw_send(c.fd, frame, harness_encode_append(frame, recs, 3));
    raw_stream_wait_acked(&c, 3);
    raw_stream_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_resume_after_close, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_resume_while_open, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_resume_across_reload, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_resume_after_kill, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_crash_before_ack, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_refusals, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_resume_after_merge_delete, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_window_expired, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_many_streams_bounded, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_stopping_before_welcome, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_version1_still_served, harness_setup,
                                        harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
