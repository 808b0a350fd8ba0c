/* Unit tests for client/logshard.c: appending, batching into frames, the
 * linger time, the daemon's limits, flush and its ACKs, backpressure and
 * LOGSHARD_NONBLOCK, against the scripted daemon of scripted-peer.c. */
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

#include "scripted-peer.h"

/* ---- append and flush ---- */

#define BATCH_RECORDS 100

static int script_batch(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, BATCH_RECORDS) == 0);
    PCHECK(peer_send_ack(p, BATCH_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_append_batches(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    uint64_t t0, t1;
    logshard *ls;

    peer_start(p, script_batch, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "batch", 0);
    t0 = now_ms();
    for (uint64_t i = 0; i < BATCH_RECORDS; i++) {
        size_t len = make_record(i, BATCH_MAX_LEN, rec);

        assert_int_equal(logshard_append(ls, rec, len), 0);
    }
    t1 = now_ms();
    assert_int_equal(logshard_unacked(ls), BATCH_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, BATCH_RECORDS, BATCH_MAX_LEN, 0);
    /* One frame, unless this machine was so slow that the linger time
     * passed during the appends and rightly sent part of them early. The
     * library reads a clock that moves in timer ticks (up to 10 ms). */
    if (t1 - t0 + 10 < LOGSHARD_LINGER_MS)
        assert_int_equal(p->nframes, 1);
    else
        assert_true(p->nframes < BATCH_RECORDS / 2);
}

static int script_linger(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    /* One record appended: it must wait in the buffer past the linger time. */
    PCHECK(wait_fd(p->fd, POLLIN, 3 * LOGSHARD_LINGER_MS) == -ETIMEDOUT);
    PCHECK(signal_pipe(p->done[1]) == 0);
    /* The second append sends both, without a flush. */
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(p->nframes == 1);
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

static void test_append_linger(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_linger, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "linger", 0);
    assert_int_equal(logshard_append(ls, rec, make_record(0, BATCH_MAX_LEN, rec)), 0);
    wait_for_peer(p);
    assert_int_equal(logshard_append(ls, rec, make_record(1, BATCH_MAX_LEN, rec)), 0);
    wait_for_peer(p);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 2, BATCH_MAX_LEN, 0);
}

#define SMALL_MAX_RECORD 1000u
#define SMALL_MAX_FRAME 4096u
#define SMALL_RECORDS 20

static int script_small_limits(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    /* Every frame is checked against max_frame_bytes and every record
     * against max_record_bytes as it is read. */
    PCHECK(peer_read_records(p, SMALL_RECORDS) == 0);
    PCHECK(peer_send_ack(p, SMALL_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_append_limits(void **state)
{
    struct peer *p = *state;
    unsigned char rec[SMALL_MAX_RECORD + 1];
    logshard *ls;

    peer_start(p, script_small_limits, SMALL_MAX_RECORD, SMALL_MAX_FRAME);
    ls = connect_ok(p, "limits", 0);
    memset(rec, 0xEE, sizeof(rec));
    assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, rec, 0), -EINVAL);
    assert_int_equal(logshard_append(ls, NULL, 5), -EINVAL);
    assert_int_equal(logshard_unacked(ls), 0);
    for (uint64_t i = 0; i < SMALL_RECORDS; i++) {
        fill_record(i, SMALL_MAX_RECORD, rec);
        assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD), 0);
    }
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    /* The refused records never left: exactly the good ones arrived, four
     * to a 4 KiB frame. */
    check_records(p, SMALL_RECORDS, SMALL_MAX_RECORD, SMALL_MAX_RECORD);
    assert_int_equal(p->nframes, SMALL_RECORDS / 4);

    /* A buffer asked to be tiny is raised to hold one largest record. */
    peer_start(p, script_small_limits, SMALL_MAX_RECORD, SMALL_MAX_FRAME);
    ls = connect_ok(p, "tiny-buffer", 1);
    for (uint64_t i = 0; i < SMALL_RECORDS; i++) {
        fill_record(i, SMALL_MAX_RECORD, rec);
        assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD), 0);
    }
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, SMALL_RECORDS, SMALL_MAX_RECORD, SMALL_MAX_RECORD);
    assert_int_equal(p->nframes, SMALL_RECORDS);
}

/* A daemon whose frames are smaller than its records: what fits one frame
 * is the limit. */
#define NARROW_MAX_RECORD 8192u
#define NARROW_MAX_FRAME 2048u
#define NARROW_FITS (NARROW_MAX_FRAME - WIRE_APPEND_FIXED - WIRE_RECORD_PREFIX)

static int script_narrow(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 1) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_expect_eof(p);
}

static void test_append_frame_limit(void **state)
{
    struct peer *p = *state;
    unsigned char rec[NARROW_FITS + 1];
    logshard *ls;

    peer_start(p, script_narrow, NARROW_MAX_RECORD, NARROW_MAX_FRAME);
    ls = connect_ok(p, "narrow", 0);
    fill_record(0, sizeof(rec), rec);
    assert_int_equal(logshard_append(ls, rec, NARROW_FITS + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, rec, NARROW_FITS), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 1, NARROW_FITS, NARROW_FITS);
}

static void test_flush_waits_for_all_acks(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_partial_ack, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "partial", 0);
    for (uint64_t i = 0; i < PARTIAL_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    /* Sends the records; the peer acknowledges only four of them. */
    assert_int_equal(logshard_flush(ls, 200), -ETIMEDOUT);
    wait_for_peer(p);
    /* The partial ACK is in by now; still not enough. */
    assert_int_equal(logshard_flush(ls, 0), -ETIMEDOUT);
    assert_int_equal(logshard_unacked(ls), PARTIAL_RECORDS - 4);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PARTIAL_RECORDS, BATCH_MAX_LEN, 0);
}

/* ---- backpressure ---- */


/* Stops reading until the client is stuck on a full socket, then reads every
 * frame and answers each with an ACK, waiting for its ACK to be taken before
 * reading on. A client that does not read ACKs while it is sending fills
 * this side's socket with them, and the two block on each other until this
 * side's deadline ends the test. */
static int script_backpressure(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_wait_for_stall(p) == 0);
    while (p->nrecords < p->total) {
        int line = peer_read_append(p);

        if (line)
            return line;
        PCHECK(peer_send_ack(p, p->nrecords) == 0);
    }
    PCHECK(p->nrecords == p->total);
    return peer_expect_eof(p);
}

static void test_append_backpressure(void **state)
{
    struct peer *p = *state;
    unsigned char rec[PRESSURE_MAX_LEN];
    logshard *ls;

    peer_start_total(p, script_backpressure, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    /* One record per frame, so there is an ACK for nearly every record. */
    ls = connect_ok(p, "pressure", 1);
    for (uint64_t i = 0; i < PRESSURE_RECORDS; i++) {
        size_t len = make_record(i, PRESSURE_MAX_LEN, rec);

        assert_int_equal(logshard_append(ls, rec, len), 0);
        atomic_store(&p->progress, i + 1);
    }
    assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    assert_true(p->stalled_at < PRESSURE_RECORDS);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
    /* Small records may share a frame; most frames still hold one or two. */
    assert_true(p->nframes > PRESSURE_RECORDS / 4);
}

/* With LOGSHARD_NONBLOCK, an append that would wait returns -EAGAIN and does
 * not take the record; appending it again once the daemon reads succeeds,
 * and every record arrives once, in order. */
static void test_append_nonblock(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "nonblock", .buffer_bytes = 1, .flags = LOGSHARD_NONBLOCK };
    unsigned char rec[PRESSURE_MAX_LEN];
    logshard *ls = NULL;
    uint64_t taken = 0;
    int r = 0;

    peer_start_total(p, script_stall_until_go, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    /* The peer reads nothing: sooner or later the socket is full. */
    while (taken < PRESSURE_RECORDS) {
        r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
        if (r == -EAGAIN)
            break;
        assert_int_equal(r, 0);
        taken++;
    }
    assert_int_equal(r, -EAGAIN);
    assert_true(taken < PRESSURE_RECORDS);
    assert_int_equal(logshard_unacked(ls), taken); /* the refused one is not counted */
    assert_int_equal(signal_pipe(p->go[1]), 0);
    for (uint64_t deadline = now_ms() + PEER_TIMEOUT_MS; taken < PRESSURE_RECORDS;) {
        r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
        if (r == -EAGAIN) {
            assert_true(now_ms() < deadline);
            /* Let ACKs in; -ETIMEDOUT just means not all are in yet. */
            r = logshard_flush(ls, 10);
            assert_true(r == 0 || r == -ETIMEDOUT);
            continue;
        }
        assert_int_equal(r, 0);
        taken++;
    }
    assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
}

/* How much a handle appends before it waits for an ACK follows the
 * policy the WELCOME announced: with the default buffer, 2 frames of 256
 * KiB where the daemon acknowledges at the write (none, interval), 4 where
 * an ACK waits for a flush (batch, always). The peer reads nothing until
 * told, so -EAGAIN comes when the buffers are all in use; then every record
 * arrives once, in order. */
static void test_window_follows_policy(void **state)
{
    static const uint8_t policies[] = { LOGSHARD_FSYNC_NONE, LOGSHARD_FSYNC_INTERVAL,
                                        LOGSHARD_FSYNC_BATCH, LOGSHARD_FSYNC_ALWAYS };
    struct peer *p = *state;

    for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
        bool unsynced = policies[i] <= LOGSHARD_FSYNC_INTERVAL;
        size_t window = (size_t)(unsynced ? 2 : 4) * 256 * 1024;
        unsigned char rec[PRESSURE_MAX_LEN];
        uint64_t taken = 0;
        size_t bytes = 0;
        logshard *ls;
        int r;

        peer_start_policy(p, script_stall_until_go, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                          UINT64_MAX, policies[i]);
        ls = connect_flags(p, "window", 0, LOGSHARD_NONBLOCK, 0);
        assert_int_equal(logshard_fsync_policy(ls), policies[i]);
        for (;;) {
            size_t len = make_record(taken, PRESSURE_MAX_LEN, rec);

            r = logshard_append(ls, rec, len);
            if (r == -EAGAIN)
                break;
            assert_int_equal(r, 0);
            taken++;
            bytes += WIRE_RECORD_PREFIX + len;
            assert_true(bytes <= window); /* never more than the window */
        }
        /* full up to the last record that did not fit a frame */
        assert_true(bytes > window - window / 64);
        p->total = taken;
        assert_int_equal(signal_pipe(p->go[1]), 0);
        assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
        logshard_close(ls);
        peer_join(p);
        check_records(p, taken, PRESSURE_MAX_LEN, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_append_batches),
        PEER_TEST(test_window_follows_policy),
        PEER_TEST(test_append_linger),
        PEER_TEST(test_append_limits),
        PEER_TEST(test_append_frame_limit),
        PEER_TEST(test_flush_waits_for_all_acks),
        PEER_TEST(test_append_backpressure),
        PEER_TEST(test_append_nonblock),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
