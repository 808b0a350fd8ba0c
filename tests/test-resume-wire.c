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
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "wire.h"

#define WAIT_MS 10000

struct raw {
    int fd;
    unsigned char buf[65536];
    size_t have;
    struct wire_welcome welcome;
    uint64_t acked;
    uint32_t error;
    char message[WIRE_ERROR_MESSAGE_MAX + 1];
    bool eof;
};

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads what has come, handling every whole frame. Returns false at the
 * deadline. */
static bool raw_pump(struct raw *c, int timeout_ms)
{
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    ssize_t n;

    if (poll(&p, 1, timeout_ms) <= 0)
        return false;
    n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
    if (n <= 0) {
        c->eof = true;
        return true;
    }
    c->have += (size_t)n;
    while (c->have >= WIRE_HEADER_SIZE) {
        struct wire_header h;
        const unsigned char *pl = c->buf + WIRE_HEADER_SIZE;

        assert_int_equal(wire_decode_header(c->buf, 65536, &h), 0);
        if (c->have < WIRE_HEADER_SIZE + h.length)
            break;
        if (h.type == WIRE_WELCOME)
            assert_int_equal(wire_decode_welcome(pl, h.length, &c->welcome), 0);
        else if (h.type == WIRE_ACK)
            assert_int_equal(wire_decode_ack(pl, h.length, &c->acked), 0);
        else if (h.type == WIRE_ERROR) {
            const char *m;
            size_t ml;

            assert_int_equal(wire_decode_error(pl, h.length, &c->error, &m, &ml), 0);
            memcpy(c->message, m, ml);
            c->message[ml] = '\0';
        } else {
            fail_msg("unexpected frame type %u from the daemon", h.type);
        }
        memmove(c->buf, c->buf + WIRE_HEADER_SIZE + h.length,
                c->have - WIRE_HEADER_SIZE - h.length);
        c->have -= WIRE_HEADER_SIZE + h.length;
    }
    return true;
}

/* Connects and says a version 2 HELLO for stream id from position first. */
static void raw_open(struct raw *c, struct harness *h, const char *name, const uint8_t *id,
                     uint64_t first)
{
    unsigned char frame[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + WIRE_PRODUCER_NAME_MAX];
    int n;

    memset(c, 0, sizeof(*c));
    c->fd = harness_raw_connect(h->sock);
    n = wire_encode_hello_v2(frame, name, strlen(name), id, first);
    assert_true(n > 0);
    harness_raw_send(c->fd, frame, (size_t)n);
}

/* Waits for the WELCOME (or an ERROR, or the end). */
static void raw_wait_welcome(struct raw *c)
{
    uint64_t end = now_ms() + WAIT_MS;

    while (c->welcome.version == 0 && !c->error && !c->eof) {
        if (now_ms() >= end)
            fail_msg("no WELCOME within %d ms", WAIT_MS);
        raw_pump(c, 100);
    }
}

/* Waits for an ACK of at least pos. */
static void raw_wait_acked(struct raw *c, uint64_t pos)
{
    uint64_t end = now_ms() + WAIT_MS;

    while (c->acked < pos) {
        if (c->error || c->eof)
            fail_msg("connection ended (error %u: %s) at ACK %" PRIu64 ", waiting for %" PRIu64,
                     c->error, c->message, c->acked, pos);
        if (now_ms() >= end)
            fail_msg("ACK %" PRIu64 " after %d ms, waiting for %" PRIu64, c->acked, WAIT_MS,
                     pos);
        raw_pump(c, 100);
    }
}

/* Waits until the daemon closes the connection (after an ERROR, say). */
static void raw_wait_end(struct raw *c)
{
    uint64_t end = now_ms() + WAIT_MS;

    while (!c->eof) {
        if (now_ms() >= end)
            fail_msg("the connection stayed open for %d ms", WAIT_MS);
        raw_pump(c, 100);
    }
}

/* Sends records first .. first + n - 1 of the test's numbering in one
 * version 2 APPEND frame starting at that position. */
static void raw_append(struct raw *c, uint64_t first, uint64_t n)
{
    size_t cap = WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED + n * 32;
    unsigned char *f = malloc(cap);
    size_t pos = WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED;

    assert_non_null(f);
    wire_put_u64(f + WIRE_HEADER_SIZE, first);
    wire_put_u32(f + WIRE_HEADER_SIZE + WIRE_APPEND_POSITION, (uint32_t)n);
    for (uint64_t i = 0; i < n; i++) {
        char rec[32];
        int len = snprintf(rec, sizeof(rec), "rec-%06" PRIu64, first + i);

        wire_put_u32(f + pos, (uint32_t)len);
        memcpy(f + pos + 4, rec, (size_t)len);
        pos += 4 + (size_t)len;
    }
    wire_encode_header(f, WIRE_APPEND, (uint32_t)(pos - WIRE_HEADER_SIZE));
    harness_raw_send(c->fd, f, pos);
    free(f);
}

static void raw_close(struct raw *c)
{
    close(c->fd);
    c->fd = -1;
}

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
    struct raw c;

    make_id(id, 1);
    start(h, "batch");
    raw_open(&c, h, "resumer", id, 0);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    assert_int_equal(c.welcome.next_position, 0);
    raw_append(&c, 0, 10);
    raw_wait_acked(&c, 10);
    raw_close(&c);

    /* The library saw 10 acknowledged but still holds 5..9 (as if the ACK
     * had not reached it): the daemon says 10 and takes only 10.. */
    raw_open(&c, h, "resumer", id, 5);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    assert_int_equal(c.welcome.next_position, 10);
    raw_append(&c, 5, 10); /* 5..14: 5..9 are duplicates */
    raw_wait_acked(&c, 15);
    raw_append(&c, 15, 5);
    raw_wait_acked(&c, 20);
    raw_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 20);
    assert_true(harness_log_has(h, "resumes stream"));
}

/* Waits until logctl status --json shows text (a deadline, no guessing). */
static void wait_status_has(struct harness *h, const char *text)
{
    uint64_t end = now_ms() + WAIT_MS;

    for (;;) {
        struct harness_run r = harness_run_logctl(h, "status", "--json", "--admin-socket",
                                                  h->admin_sock, NULL);
        bool found = r.code == 0 && r.out && strstr(r.out, text);

        if (!found && now_ms() >= end)
            fail_msg("logctl status --json never showed %s; last: %s", text,
                     r.out ? r.out : "(nothing)");
        harness_run_free(&r);
        if (found)
            return;
        usleep(50 * 1000); /* the condition is re-checked until the deadline */
    }
}

/* A reload (SIGHUP) keeps what the daemon knows of its streams, and a
 * resume window it lowers applies to the streams already known. */
static void test_resume_across_reload(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw c;

    make_id(id, 8);
    start(h, "batch");
    raw_open(&c, h, "reloaded", id, 0);
    raw_wait_welcome(&c);
    raw_append(&c, 0, 20);
    raw_wait_acked(&c, 20);
    raw_close(&c);
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    assert_true(harness_wait_log(h, "reloaded the settings", WAIT_MS));
    raw_open(&c, h, "reloaded", id, 20);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 20);
    raw_append(&c, 20, 5);
    raw_wait_acked(&c, 25);
    raw_close(&c);

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
    struct raw old, c;

    make_id(id, 2);
    start(h, "none");
    raw_open(&old, h, "twice", id, 0);
    raw_wait_welcome(&old);
    raw_append(&old, 0, 100);
    raw_wait_acked(&old, 100);

    raw_open(&c, h, "twice", id, 40);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 100);
    raw_wait_end(&old);
    raw_close(&old);
    raw_append(&c, 100, 50);
    raw_wait_acked(&c, 150);
    raw_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 150);
}

/* kill -9 with the records written: the next daemon learns the position
 * from the spool alone. */
static void test_resume_after_kill(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw c;
    int status;

    make_id(id, 3);
    start(h, "none");
    raw_open(&c, h, "killed", id, 0);
    raw_wait_welcome(&c);
    raw_append(&c, 0, 300);
    raw_wait_acked(&c, 300);
    status = harness_stop(h, SIGKILL, WAIT_MS);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    raw_close(&c);

    start(h, "none");
    raw_open(&c, h, "killed", id, 200);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 300);
    raw_append(&c, 200, 200); /* 200..399: 100 duplicates */
    raw_wait_acked(&c, 400);
    raw_close(&c);
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
    struct raw c;
    int status;

    make_id(id, 4);
    setenv("LOGSHARD_FAULTS", "kill_before_ack", 1);
    start(h, "batch");
    unsetenv("LOGSHARD_FAULTS");
    raw_open(&c, h, "unlucky", id, 0);
    raw_wait_welcome(&c);
    raw_append(&c, 0, 64);
    raw_wait_end(&c);
    assert_int_equal(c.acked, 0);
    raw_close(&c);
    status = harness_wait_exit(h, WAIT_MS);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    start(h, "batch");
    raw_open(&c, h, "unlucky", id, 0);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 64);
    raw_append(&c, 0, 64); /* a naive producer: all of them again */
    raw_wait_acked(&c, 64);
    raw_append(&c, 64, 1);
    raw_wait_acked(&c, 65);
    raw_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 65);
}

/* Streams the daemon cannot vouch for are refused, and so is a gap. */
static void test_refusals(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw c;

    start(h, "batch");
    make_id(id, 5);
    raw_open(&c, h, "stranger", id, 7);
    raw_wait_welcome(&c);
    assert_int_equal(c.error, ESTALE);
    assert_non_null(strstr(c.message, "is not known here"));
    assert_int_equal(c.welcome.version, 0);
    raw_close(&c);

    raw_open(&c, h, "gappy", id, 0);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 0);
    raw_append(&c, 0, 3);
    raw_wait_acked(&c, 3);
    raw_append(&c, 5, 3);
    raw_wait_end(&c);
    assert_int_equal(c.error, EPROTO);
    assert_non_null(strstr(c.message, "starts at position 5 but the stream is at 3"));
    raw_close(&c);

    /* The same stream under another name is not that stream. */
    raw_open(&c, h, "impostor", id, 3);
    raw_wait_welcome(&c);
    assert_int_equal(c.error, EINVAL);
    assert_non_null(strstr(c.message, "belongs to producer gappy"));
    raw_close(&c);
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
    struct raw c;

    make_id(id, 6);
    start(h, "batch");
    raw_open(&c, h, "merged", id, 0);
    raw_wait_welcome(&c);
    raw_append(&c, 0, 50);
    raw_wait_acked(&c, 50);
    raw_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);

    r = harness_run_logctl(h, "merge", "--spool", h->spool, "--delete", "--output", merged,
                           NULL);
    harness_expect_code(&r, 0, "logctl merge --delete");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 0);

    start(h, "batch");
    raw_open(&c, h, "merged", id, 30);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.next_position, 50);
    raw_append(&c, 30, 30); /* 30..59: 20 duplicates */
    raw_wait_acked(&c, 60);
    raw_close(&c);
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
    struct raw c;

    harness_write_config(h, "[streams]\nresume_window = 1s\n");
    make_id(id, 7);
    start(h, "batch");
    raw_open(&c, h, "late", id, 0);
    raw_wait_welcome(&c);
    raw_append(&c, 0, 5);
    raw_wait_acked(&c, 5);
    raw_close(&c);
    wait_status_has(h, "\"forgotten\":1,");

    raw_open(&c, h, "late", id, 3);
    raw_wait_welcome(&c);
    assert_int_equal(c.error, ESTALE);
    raw_close(&c);
    assert_int_equal(harness_stop(h, SIGTERM, WAIT_MS), 0);
    expect_spool_records(h, 5);
}

/* 10,000 streams that came and went: the table keeps at most max_streams,
 * forgetting the oldest idle ones first. */
static void test_many_streams_bounded(void **state)
{
    struct harness *h = *state;
    uint8_t id[WIRE_STREAM_ID_SIZE];
    struct raw c;

    harness_write_config(h, "[streams]\nmax_streams = 1000\n");
    start(h, "none");
    for (unsigned i = 0; i < 10000; i++) {
        memset(id, 0, sizeof(id));
        memcpy(id, &i, sizeof(i));
        id[15] = 0xA5;
        raw_open(&c, h, "fleeting", id, 0);
        raw_wait_welcome(&c);
        assert_int_equal(c.welcome.next_position, 0);
        raw_close(&c);
    }
    /* The last connection's close may still be on its way. */
    wait_status_has(h, "\"known\":1000,");
    wait_status_has(h, "\"forgotten\":9000,");
    /* The newest stream is still known: resuming it at 0 is a resume. */
    raw_open(&c, h, "fleeting", id, 0);
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 2);
    raw_close(&c);
    wait_status_has(h, "\"resumed\":1,");
}

/* A connection accepted but not yet welcomed when the daemon starts to
 * stop is told to connect again (ESHUTDOWN), not dropped without a word. */
static void test_stopping_before_welcome(void **state)
{
    struct harness *h = *state;
    struct raw c;
    int status;

    start(h, "batch");
    memset(&c, 0, sizeof(c));
    c.fd = harness_raw_connect(h->sock);
    /* The admin socket answers once the daemon has accepted us: then the
     * connection is a session waiting for its HELLO. */
    wait_status_has(h, "\"connections_accepted\":1,");
    assert_int_equal(kill(h->daemon, SIGTERM), 0);
    raw_wait_end(&c);
    assert_int_equal(c.error, ESHUTDOWN);
    assert_non_null(strstr(c.message, "connect again"));
    raw_close(&c);
    status = harness_wait_exit(h, WAIT_MS);
    harness_assert_clean_exit(status);
}

/* A version 1 client gets a version 1 WELCOME and counted ACKs. */
static void test_version1_still_served(void **state)
{
    struct harness *h = *state;
    const char *recs[] = { "a", "b", "c" };
    unsigned char frame[256];
    struct raw c;

    start(h, "batch");
    memset(&c, 0, sizeof(c));
    c.fd = harness_raw_connect(h->sock);
    harness_raw_hello(c.fd, "old-client");
    raw_wait_welcome(&c);
    assert_int_equal(c.welcome.version, 1);
    harness_raw_send(c.fd, frame, harness_encode_append(frame, recs, 3));
    raw_wait_acked(&c, 3);
    raw_close(&c);
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
