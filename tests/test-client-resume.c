/* Unit tests for client/connection.c and client/retain.c: a handle is a
 * stream that survives its connection (protocol version 2). The scripted
 * daemon of scripted-peer.c drops the connection, restarts (accepts a
 * second connection, or goes away and comes back), answers the resumed
 * HELLO with a position of its choosing or with an ERROR, or speaks only
 * version 1; the tests watch the library carry on, or fail as it should.
 * The peer checks every APPEND's position, so a record sent below the
 * stream's position, or a gap, fails the script. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "scripted-peer.h"

#define FIRST_RECORDS 10
#define MORE_RECORDS 5
#define ACKED_BEFORE_DROP 4

/* Appends records first..first+n-1 of make_record(), each taken. */
static void append_range(logshard *ls, uint64_t first, uint64_t n)
{
    unsigned char rec[BATCH_MAX_LEN];

    for (uint64_t i = first; i < first + n; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
}

/* The first connection: records 0..9, an ACK for four, then the connection
 * drops. Leaves the stream id the client named in *id. */
static int first_connection_drops(struct peer *p, uint8_t *id)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(p->hello_version == WIRE_PROTOCOL_V2);
    PCHECK(p->hello_first_position == 0);
    memcpy(id, p->hello_stream_id, WIRE_STREAM_ID_SIZE);
    PCHECK(peer_read_records(p, FIRST_RECORDS) == 0);
    PCHECK(peer_send_ack(p, ACKED_BEFORE_DROP) == 0);
    /* The ACK must be in before the drop for the test to mean anything. */
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    return 0;
}

/* The resumed connection: the same stream, from its oldest unacknowledged
 * record; WELCOME at next. */
static int resumed_connection(struct peer *p, const uint8_t *id, uint64_t next)
{
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_version == WIRE_PROTOCOL_V2);
    PCHECK(memcmp(p->hello_stream_id, id, WIRE_STREAM_ID_SIZE) == 0);
    PCHECK(p->hello_first_position == ACKED_BEFORE_DROP);
    p->welcome.next_position = next;
    return peer_send_welcome(p);
}

static int script_resume(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];
    int line = first_connection_drops(p, id);

    if (line)
        return line;
    line = resumed_connection(p, id, ACKED_BEFORE_DROP);
    if (line)
        return line;
    /* Everything from position 4 on again, nothing below it (the peer
     * checks each frame's position). */
    PCHECK(peer_read_records(p, FIRST_RECORDS) == 0);
    PCHECK(peer_send_ack(p, FIRST_RECORDS) == 0);
    PCHECK(peer_read_records(p, FIRST_RECORDS + MORE_RECORDS) == 0);
    PCHECK(peer_send_ack(p, FIRST_RECORDS + MORE_RECORDS) == 0);
    PCHECK(p->nhellos == 2);
    return peer_expect_eof(p);
}

static void test_resume_after_drop(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_resume, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "resume", 0);
    append_range(ls, 0, FIRST_RECORDS);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    wait_for_peer(p);
    assert_int_equal(logshard_flush(ls, 0), -ETIMEDOUT); /* takes the ACK in */
    assert_int_equal(logshard_unacked(ls), FIRST_RECORDS - ACKED_BEFORE_DROP);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    /* The connection drops under the flush, which waits on across it. */
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    assert_int_equal(logshard_reconnects(ls), 1);
    append_range(ls, FIRST_RECORDS, MORE_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, FIRST_RECORDS + MORE_RECORDS, BATCH_MAX_LEN, 0);
}

/* The daemon stored more than it acknowledged (a crash between the write
 * and the ACK): records below its position are not sent again. */
#define STORED 7

static int script_resume_ahead(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];
    int line = first_connection_drops(p, id);

    if (line)
        return line;
    line = resumed_connection(p, id, STORED);
    if (line)
        return line;
    /* The first frame must start at 7 (the peer checks), so 4..6 never
     * come again. */
    PCHECK(peer_read_records(p, FIRST_RECORDS) == 0);
    PCHECK(p->nframes == 2);
    PCHECK(peer_send_ack(p, FIRST_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_resume_daemon_ahead(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_resume_ahead, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "ahead", 0);
    append_range(ls, 0, FIRST_RECORDS);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    wait_for_peer(p);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_reconnects(ls), 1);
    logshard_close(ls);
    peer_join(p);
    /* 0..6 from the first connection (stored), 7..9 from the second. */
    check_records(p, FIRST_RECORDS, BATCH_MAX_LEN, 0);
}

/* A WELCOME that claims records never appended, or one below what was
 * acknowledged, is not the protocol. */
static int script_resume_beyond(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];
    int line = first_connection_drops(p, id);

    if (line)
        return line;
    return resumed_connection(p, id, FIRST_RECORDS + 1);
}

static int script_resume_below(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];
    int line = first_connection_drops(p, id);

    if (line)
        return line;
    return resumed_connection(p, id, ACKED_BEFORE_DROP - 1);
}

static void test_resume_bad_position(void **state)
{
    peer_script scripts[] = { script_resume_beyond, script_resume_below };
    struct peer *p = *state;

    for (size_t i = 0; i < 2; i++) {
        logshard *ls;

        peer_start(p, scripts[i], DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
        ls = connect_ok(p, "liar", 0);
        append_range(ls, 0, FIRST_RECORDS);
        assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
        wait_for_peer(p);
        assert_int_equal(signal_pipe(p->go[1]), 0);
        assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPROTO);
        assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
        assert_int_equal(logshard_reconnects(ls), 0);
        logshard_close(ls);
        peer_join(p);
    }
}

/* ---- giving up ---- */

#define AWAY_TIMEOUT_MS 300

static int script_stay_away(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 3) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_go_away(p) == 0);
    /* Gone until the main thread has seen the handle give up. */
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    return 0;
}

static void test_daemon_stays_away(void **state)
{
    struct peer *p = *state;
    uint64_t t0, took;
    logshard *ls;

    peer_start(p, script_stay_away, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_flags(p, "away", 0, 0, AWAY_TIMEOUT_MS);
    append_range(ls, 0, 3);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    wait_for_peer(p);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    t0 = now_ms();
    /* While it tries, a short flush only times out: nothing failed yet. */
    assert_int_equal(logshard_flush(ls, 50), -ETIMEDOUT);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ENOTCONN);
    took = now_ms() - t0;
    assert_true(took >= AWAY_TIMEOUT_MS - 60); /* measured from the drop, seen a bit later */
    assert_true(took < AWAY_TIMEOUT_MS + 2000);
    assert_int_equal(logshard_error(ls), -ENOTCONN);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    assert_int_equal(logshard_append(ls, "x", 1), -ENOTCONN);
    assert_int_equal(logshard_flush(ls, 0), -ENOTCONN);
    assert_int_equal(logshard_unacked(ls), 2);
    assert_int_equal(logshard_events(ls), 0);
    assert_string_not_equal(logshard_strerror(-ENOTCONN), logshard_strerror(-EPIPE));
    assert_int_equal(signal_pipe(p->go[1]), 0);
    logshard_close(ls);
    peer_join(p);
}

static const char stale_text[] = "stream forgotten: its resume window passed";

static int script_resume_stale(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];
    int line = first_connection_drops(p, id);

    if (line)
        return line;
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(memcmp(p->hello_stream_id, id, WIRE_STREAM_ID_SIZE) == 0);
    PCHECK(p->hello_first_position == ACKED_BEFORE_DROP);
    return peer_send_error(p, ESTALE, stale_text);
}

static void test_resume_refused_stale(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_resume_stale, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "stale", 0);
    append_range(ls, 0, FIRST_RECORDS);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    wait_for_peer(p);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ESTALE);
    assert_int_equal(logshard_error(ls), -ESTALE);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_DAEMON);
    assert_non_null(logshard_error_message(ls));
    assert_string_equal(logshard_error_message(ls), stale_text);
    assert_int_equal(logshard_append(ls, "x", 1), -ESTALE);
    assert_int_equal(logshard_unacked(ls), FIRST_RECORDS - ACKED_BEFORE_DROP);
    assert_int_equal(logshard_reconnects(ls), 0);
    logshard_close(ls);
    peer_join(p);
}

/* ---- without resuming ---- */

/* A version 1 daemon: EPROTONOSUPPORT for version 2, then version 1 with
 * its frames (no positions) and ACK counts, and no resume. */
static int script_v1_daemon(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_version == WIRE_PROTOCOL_V2);
    PCHECK(peer_send_error(p, EPROTONOSUPPORT, "protocol version 2 is not supported") == 0);
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_version == WIRE_PROTOCOL_V1);
    PCHECK(strcmp(p->hello_name, "old-daemon") == 0);
    p->welcome.version = WIRE_PROTOCOL_V1;
    PCHECK(peer_send_welcome(p) == 0);
    /* peer_read_append() reads version 1 frames now: a position in front
     * of the records would fail their validation. */
    PCHECK(peer_read_records(p, 3) == 0);
    PCHECK(peer_send_ack(p, 3) == 0);
    PCHECK(peer_read_records(p, 4) == 0);
    return 0; /* hangs up with record 3 unacknowledged */
}

static void test_v1_daemon_fallback(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_v1_daemon, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "old-daemon", 0);
    assert_int_equal(logshard_error(ls), 0);
    assert_null(logshard_error_message(ls)); /* the refusal of version 2 is forgotten */
    append_range(ls, 0, 3);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    append_range(ls, 3, 1);
    /* No resume in version 1: the hang-up is final. */
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    assert_int_equal(logshard_unacked(ls), 1);
    assert_int_equal(logshard_reconnects(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 4, BATCH_MAX_LEN, 0);
    assert_int_equal(p->nhellos, 2);
}

/* The daemon that comes after a restart during the first handshake: it
 * welcomes the producer and takes two records. */
static int next_daemon_takes_two(struct peer *p)
{
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

/* logshard_connect() across the restart the script plays returns 0 as if
 * nothing had happened, and the handle works; the script saw two HELLOs. */
static void connect_across_restart(struct peer *p, peer_script script)
{
    logshard *ls;

    peer_start(p, script, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "restarted", 0);
    assert_int_equal(logshard_error(ls), 0);
    append_range(ls, 0, 2);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    assert_int_equal(p->nhellos, 2);
}

/* A daemon that stops just after accepting (a restart) answers ESHUTDOWN
 * before WELCOME; the next daemon on the socket welcomes the producer, and
 * logshard_connect() returns 0 as if nothing had happened. */
static int script_stopping_at_connect(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(peer_send_error(p, ESHUTDOWN, "logshardd is stopping (a restart?): connect again") ==
           0);
    return next_daemon_takes_two(p);
}

static void test_stopping_at_connect(void **state)
{
    connect_across_restart(*state, script_stopping_at_connect);
}

/* A daemon that dies while it takes the first HELLO (a crash, a SIGKILL)
 * hangs up without a word and is gone for a moment: connect() finds no
 * socket until the next one listens. logshard_connect() waits for it. */
static int script_dies_at_connect(struct peer *p)
{
    struct timespec away = { .tv_sec = 0, .tv_nsec = 100 * 1000000L };

    PCHECK(peer_read_hello(p) == 0);
    PCHECK(peer_go_away(p) == 0);
    while (nanosleep(&away, &away) < 0 && errno == EINTR)
        ; /* the client must meet the missing socket, not only the hang-up */
    PCHECK(peer_come_back(p) == 0);
    return next_daemon_takes_two(p);
}

static void test_dies_at_connect(void **state)
{
    connect_across_restart(*state, script_dies_at_connect);
}

/* With LOGSHARD_NO_RECONNECT the same hang-up is returned at once. */
static int script_hang_up_once(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    return peer_go_away(p);
}

static void test_dies_at_connect_no_reconnect(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "crashed", .flags = LOGSHARD_NO_RECONNECT };
    logshard *ls = NULL;

    peer_start(p, script_hang_up_once, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect(&ls, &opts), -ECONNRESET);
    assert_null(ls);
    peer_join(p);
    assert_int_equal(p->nhellos, 1);
}

/* The resumed HELLO meets a daemon that is stopping (ESHUTDOWN): one
 * more lost connection, and the next daemon takes the stream. */
static int script_stopping_at_resume(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    PCHECK(peer_read_records(p, 5) == 0);
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0); /* hangs up with 2..4 unacknowledged */
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_first_position == 2);
    PCHECK(peer_send_error(p, ESHUTDOWN, "logshardd is stopping (a restart?): connect again") ==
           0);
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_first_position == 2);
    p->welcome.next_position = 2;
    PCHECK(peer_send_welcome(p) == 0);
    PCHECK(peer_read_records(p, 5) == 0);
    PCHECK(peer_send_ack(p, 5) == 0);
    return peer_expect_eof(p);
}

static void test_stopping_at_resume(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_stopping_at_resume, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "restarted", 0);
    append_range(ls, 0, 2);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    append_range(ls, 2, 3);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_reconnects(ls), 1);
    logshard_close(ls);
    peer_join(p);
    assert_int_equal(p->nhellos, 3);
}

/* A daemon that takes the version 2 HELLO but answers in version 1: the
 * WELCOME says what is spoken, so the handle speaks version 1. */
static int script_v1_welcome(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_version == WIRE_PROTOCOL_V2);
    p->welcome.version = WIRE_PROTOCOL_V1;
    PCHECK(peer_send_welcome(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return 0; /* a hang-up, final in version 1 */
}

static void test_v1_welcome(void **state)
{
    struct peer *p = *state;
    logshard *ls;
    int r;

    peer_start(p, script_v1_welcome, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "v1-welcome", 0);
    assert_int_equal(logshard_error(ls), 0);
    append_range(ls, 0, 2);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    /* The hang-up may already be in (it can come with the ACK). */
    r = logshard_append(ls, "x", 1);
    assert_true(r == 0 || r == -EPIPE);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_reconnects(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 2, BATCH_MAX_LEN, 0);
    assert_int_equal(p->nhellos, 1);
}

static int script_drop_once(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 3) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    close(p->fd);
    p->fd = -1;
    /* Nobody may come back: the client was told not to. */
    PCHECK(wait_fd(p->listen_fd, POLLIN, 300) == -ETIMEDOUT);
    return 0;
}

static void test_no_reconnect_flag(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_drop_once, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_flags(p, "no-retry", 0, LOGSHARD_NO_RECONNECT, 0);
    append_range(ls, 0, 3);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    assert_int_equal(logshard_unacked(ls), 2);
    logshard_close(ls);
    peer_join(p);
}

/* ---- while the daemon is away ---- */

#define AWAY_RECORDS 5000u

/* The daemon is gone before any record arrives; the client takes records
 * until its retained memory is full, then blocks until the daemon is back
 * and acknowledges. */
static int script_away_until_stall(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_go_away(p) == 0);
    PCHECK(peer_wait_for_stall(p) == 0);
    PCHECK(peer_come_back(p) == 0);
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(p->hello_first_position == 0);
    PCHECK(peer_send_welcome(p) == 0);
    while (p->nrecords < p->total) {
        int line = peer_read_append(p);

        if (line)
            return line;
        PCHECK(peer_send_ack(p, p->nrecords) == 0);
    }
    return peer_expect_eof(p);
}

static void test_append_blocks_while_away(void **state)
{
    struct peer *p = *state;
    unsigned char rec[PRESSURE_MAX_LEN];
    size_t held = 0;
    logshard *ls;

    peer_start_total(p, script_away_until_stall, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     AWAY_RECORDS);
    ls = connect_flags(p, "away-full", 0, 0, PEER_TIMEOUT_MS);
    for (uint64_t i = 0; i < AWAY_RECORDS; i++) {
        assert_int_equal(logshard_append(ls, rec, make_record(i, PRESSURE_MAX_LEN, rec)), 0);
        atomic_store(&p->progress, i + 1);
    }
    assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_reconnects(ls), 1);
    logshard_close(ls);
    peer_join(p);
    check_records(p, AWAY_RECORDS, PRESSURE_MAX_LEN, 0);
    /* It stopped at the documented bound: four default buffers (1 MiB) of
     * records, give or take the one frame that did not fit. */
    assert_true(p->stalled_at < AWAY_RECORDS);
    for (uint64_t i = 0; i < p->stalled_at; i++)
        held += WIRE_RECORD_PREFIX + make_record(i, PRESSURE_MAX_LEN, rec);
    assert_true(held <= 4 * 256 * 1024);
    assert_true(held > 3 * 256 * 1024);
}

/* The backoff doubles from 10 ms but never waits more than a second: a
 * daemon back after 2.5 s is found within a second (doubling without a cap
 * would next try at 5.1 s). */
#define AWAY_MS 2500
#define BACKOFF_CAP_MS 1000

static int script_back_later(struct peer *p)
{
    uint64_t back;

    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_go_away(p) == 0);
    /* The go pipe stays quiet: it is this side's clock. */
    PCHECK(peer_wait_pipe(p->go[0], AWAY_MS) == -ETIMEDOUT);
    PCHECK(peer_come_back(p) == 0);
    back = now_ms();
    PCHECK(peer_accept(p, BACKOFF_CAP_MS + 500) == 0);
    PCHECK(now_ms() - back <= BACKOFF_CAP_MS + 500);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(peer_send_welcome(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

static void test_backoff_bounded(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_back_later, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "backoff", 0);
    append_range(ls, 0, 2);
    assert_int_equal(logshard_flush(ls, AWAY_MS + PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_reconnects(ls), 1);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 2, BATCH_MAX_LEN, 0);
}

/* ---- an event loop of the caller's own ---- */

static int script_drop_and_resume(struct peer *p)
{
    uint8_t id[WIRE_STREAM_ID_SIZE];

    PCHECK(peer_handshake(p) == 0);
    memcpy(id, p->hello_stream_id, sizeof(id));
    PCHECK(peer_read_records(p, 5) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    PCHECK(peer_go_away(p) == 0);
    /* Long enough for a few backoff rounds on the timer. */
    PCHECK(peer_wait_pipe(p->go[0], 200) == -ETIMEDOUT);
    PCHECK(peer_come_back(p) == 0);
    PCHECK(peer_accept(p, PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_read_hello(p) == 0);
    PCHECK(memcmp(p->hello_stream_id, id, sizeof(id)) == 0);
    PCHECK(p->hello_first_position == 2);
    p->welcome.next_position = 2;
    PCHECK(peer_send_welcome(p) == 0);
    PCHECK(peer_read_records(p, 5) == 0);
    PCHECK(peer_send_ack(p, 5) == 0);
    return peer_expect_eof(p);
}

/* Nothing but poll() on logshard_fd() and logshard_process(): the number
 * stays the same across the reconnect, the backoff wakes the loop without
 * spinning, and no call waits. */
static void test_event_loop_reconnects(void **state)
{
    struct peer *p = *state;
    uint64_t deadline = now_ms() + PEER_TIMEOUT_MS;
    unsigned wakeups = 0;
    logshard *ls;
    int fd;

    peer_start(p, script_drop_and_resume, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_flags(p, "looper", 0, LOGSHARD_NONBLOCK, 0);
    fd = logshard_fd(ls);
    append_range(ls, 0, 5);
    while (logshard_unacked(ls) > 0) {
        struct pollfd pfd = { .fd = logshard_fd(ls), .events = (short)logshard_events(ls) };
        uint64_t t0;

        assert_true(now_ms() < deadline);
        assert_int_equal(logshard_fd(ls), fd);
        assert_true(pfd.events & POLLIN);
        assert_true(poll(&pfd, 1, remaining_ms(deadline)) >= 0 || errno == EINTR);
        t0 = now_ms();
        assert_int_equal(logshard_process(ls), 0);
        assert_true(now_ms() - t0 < 1000);
        wakeups++;
    }
    assert_int_equal(logshard_reconnects(ls), 1);
    assert_int_equal(logshard_fd(ls), fd);
    /* A spinning loop would wake thousands of times in the 200 ms away. */
    assert_true(wakeups < 200);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 5, BATCH_MAX_LEN, 0);
}

static void test_reconnect_option(void **state)
{
    logshard_opts opts = { .socket_path = "/nonexistent-logshard-test/sock",
                           .producer = "opt", .reconnect_timeout_ms = -2 };
    logshard *ls = NULL;

    (void)state;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), -EINVAL);
    /* Not read when the size does not cover it. */
    assert_int_equal(logshard_connect_sized(&ls, &opts, LOGSHARD_OPTS_SIZE_1), -ENOENT);
    opts.reconnect_timeout_ms = -1;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), -ENOENT);
    /* The first connect is never retried. */
    opts.flags = LOGSHARD_NO_RECONNECT;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), -ENOENT);
    assert_null(ls);
    assert_int_equal(logshard_reconnects(NULL), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_resume_after_drop),
        PEER_TEST(test_resume_daemon_ahead),
        PEER_TEST(test_resume_bad_position),
        PEER_TEST(test_daemon_stays_away),
        PEER_TEST(test_resume_refused_stale),
        PEER_TEST(test_stopping_at_connect),
        PEER_TEST(test_stopping_at_resume),
        PEER_TEST(test_dies_at_connect),
        PEER_TEST(test_dies_at_connect_no_reconnect),
        PEER_TEST(test_v1_daemon_fallback),
        PEER_TEST(test_v1_welcome),
        PEER_TEST(test_no_reconnect_flag),
        PEER_TEST(test_append_blocks_while_away),
        PEER_TEST(test_backoff_bounded),
        PEER_TEST(test_event_loop_reconnects),
        cmocka_unit_test(test_reconnect_option),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
