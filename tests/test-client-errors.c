/* Unit tests for client/logshard.c: a daemon that hangs up, sends an ERROR
 * frame or an ACK it should not, the handles those leave dead, and whose
 * error a handle reports, against the scripted daemon of scripted-peer.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scripted-peer.h"

/* ---- the daemon going away ---- */

#define CLOSE_RECORDS 5

static int script_close_unacked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, CLOSE_RECORDS) == 0);
    return peer_send_ack(p, 2);
}

static void test_peer_closes_with_unacked(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_close_unacked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    /* LOGSHARD_NO_RECONNECT: the behaviour before streams, kept on request. */
    ls = connect_flags(p, "closing", 0, LOGSHARD_NO_RECONNECT, 0);
    for (uint64_t i = 0; i < CLOSE_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_unacked(ls), CLOSE_RECORDS - 2);
    /* Broken for good. */
    assert_int_equal(logshard_append(ls, rec, 1), -EPIPE);
    assert_int_equal(logshard_flush(ls, 0), -EPIPE);
    assert_int_equal(logshard_unacked(ls), CLOSE_RECORDS - 2);
    assert_null(logshard_error_message(ls));
    logshard_close(ls);
    peer_join(p);
}

static int script_close_while_blocked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    return peer_wait_for_stall(p);
}

static void test_peer_closes_while_client_blocked(void **state)
{
    struct peer *p = *state;
    unsigned char rec[PRESSURE_MAX_LEN];
    uint64_t i;
    logshard *ls;
    int r = 0;

    peer_start_total(p, script_close_while_blocked, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     1000000);
    ls = connect_flags(p, "blocked", 0, LOGSHARD_NO_RECONNECT, 0);
    /* The peer hangs up while append waits for room: the append must fail
     * with -EPIPE (and no SIGPIPE, which would end this program). */
    for (i = 0; i < p->total; i++) {
        r = logshard_append(ls, rec, make_record(i, PRESSURE_MAX_LEN, rec));
        if (r < 0)
            break;
        atomic_store(&p->progress, i + 1);
    }
    assert_int_equal(r, -EPIPE);
    assert_true(i < p->total);
    /* Every record that append took is still counted, none acknowledged. */
    assert_int_equal(logshard_unacked(ls), i);
    assert_int_equal(logshard_flush(ls, 0), -EPIPE);
    logshard_close(ls);
    peer_join(p);
}

#define ERROR_RECORDS 3
static const char error_text[] = "no space left in /var/lib/logshard for producer \"err\"";

static int script_error_midstream(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, ERROR_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_send_error(p, ENOSPC, error_text);
}

static void test_error_midstream(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_error_midstream, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "err", 0);
    for (uint64_t i = 0; i < ERROR_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ENOSPC);
    assert_non_null(logshard_error_message(ls));
    assert_string_equal(logshard_error_message(ls), error_text);
    assert_int_equal(logshard_unacked(ls), ERROR_RECORDS - 1);
    /* Every later call returns the daemon's error. */
    assert_int_equal(logshard_append(ls, rec, 1), -ENOSPC);
    assert_int_equal(logshard_flush(ls, 0), -ENOSPC);
    assert_int_equal(logshard_flush(ls, -1), -ENOSPC);
    logshard_close(ls);
    peer_join(p);
}

static int script_error_code0_midstream(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 1) == 0);
    return peer_send_error(p, 0, "zero is not an error");
}

static int script_ack_too_far(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 5) == 0);
    return peer_expect_eof(p);
}

static void test_ack_beyond_sent(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_ack_too_far, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "liar", 0);
    assert_int_equal(logshard_append(ls, "a", 1), 0);
    assert_int_equal(logshard_append(ls, "b", 1), 0);
    /* Acknowledging records never sent is not the protocol. */
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPROTO);
    assert_int_equal(logshard_append(ls, "c", 1), -EPROTO);
    logshard_close(ls);
    peer_join(p);
}

/* ---- whose error ---- */

static int script_daemon_timeout(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, ERROR_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_send_error(p, ETIMEDOUT, "producer \"slow\": a frame stayed incomplete");
}

/* Appends records 0..n-1 of make_record(), each taken. */
static void append_records(logshard *ls, uint64_t n)
{
    unsigned char rec[BATCH_MAX_LEN];

    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
}

/* The daemon's ETIMEDOUT and flush's own: the same return value, told apart
 * by logshard_error() and logshard_error_origin(). */
static void test_error_origin(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    /* Ours: the handle is fine, and calling again finishes the wait. */
    peer_start(p, script_partial_ack, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "patient", 0);
    append_records(ls, PARTIAL_RECORDS);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_NONE);
    wait_for_peer(p);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_error(ls), 0);
    logshard_close(ls);
    peer_join(p);

    /* The daemon's: the handle is dead, and says who killed it. */
    peer_start(p, script_daemon_timeout, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "slow", 0);
    append_records(ls, ERROR_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ETIMEDOUT);
    assert_int_equal(logshard_error(ls), -ETIMEDOUT);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_DAEMON);
    assert_non_null(logshard_error_message(ls));
    assert_int_equal(logshard_unacked(ls), ERROR_RECORDS - 1);
    assert_int_equal(logshard_events(ls), 0);
    assert_int_equal(logshard_process(ls), -ETIMEDOUT);
    logshard_close(ls);
    peer_join(p);

    /* Found here: the daemon hung up without a word. */
    peer_start(p, script_close_unacked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_flags(p, "hung-up", 0, LOGSHARD_NO_RECONNECT, 0);
    append_records(ls, CLOSE_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_error(ls), -EPIPE);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    logshard_close(ls);
    peer_join(p);

    /* An ERROR whose code is no errno is our finding, not the daemon's. */
    peer_start(p, script_error_code0_midstream, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "odd", 0);
    assert_int_equal(logshard_append(ls, "x", 1), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPROTO);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    logshard_close(ls);
    peer_join(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_peer_closes_with_unacked),
        PEER_TEST(test_peer_closes_while_client_blocked),
        PEER_TEST(test_error_midstream),
        PEER_TEST(test_ack_beyond_sent),
        PEER_TEST(test_error_origin),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
