/* Unit tests for client/logshard.c: the calls of an event loop of the
 * caller's own, logshard_fd(), logshard_events() and logshard_process(),
 * against the scripted daemon of scripted-peer.c. */
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

/* ---- an event loop of the caller's own ---- */

/* With LOGSHARD_NONBLOCK and nothing but poll() on logshard_fd(): the peer
 * reads nothing at first, so the loop must see -EAGAIN and a descriptor
 * that is not ready; once the peer reads, the same loop sends every record
 * and collects every ACK, and no library call ever waits. */
static void test_event_loop(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "looper", .buffer_bytes = 1, .flags = LOGSHARD_NONBLOCK };
    unsigned char rec[PRESSURE_MAX_LEN];
    uint64_t taken = 0, deadline;
    bool pushed_back = false, released = false;
    logshard *ls = NULL;
    int r;

    peer_start_total(p, script_stall_until_go, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_true(logshard_fd(ls) >= 0);
    assert_int_equal(logshard_events(ls), POLLIN); /* nothing to send yet */
    assert_int_equal(logshard_process(ls), 0);

    deadline = now_ms() + 2 * PEER_TIMEOUT_MS;
    while (taken < PRESSURE_RECORDS || logshard_unacked(ls) > 0) {
        struct pollfd pfd = { .fd = logshard_fd(ls) };
        uint64_t t0;

        assert_true(now_ms() < deadline);
        while (taken < PRESSURE_RECORDS) {
            t0 = now_ms();
            r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
            assert_true(now_ms() - t0 < 1000);
            if (r == -EAGAIN)
                break;
            assert_int_equal(r, 0);
            taken++;
        }
        pfd.events = (short)logshard_events(ls);
        assert_true(pfd.events & POLLIN);
        if (taken < PRESSURE_RECORDS) {
            /* Pushed back: a frame is waiting for the socket. */
            assert_true(pfd.events & POLLOUT);
            if (!pushed_back) {
                /* The peer reads nothing yet, so the socket stays full
                 * and the refused record is not counted. */
                pushed_back = true;
                assert_int_equal(poll(&pfd, 1, 100), 0);
                assert_int_equal(logshard_unacked(ls), taken);
                assert_int_equal(signal_pipe(p->go[1]), 0);
                released = true;
            }
        }
        r = poll(&pfd, 1, remaining_ms(deadline));
        assert_true(r >= 0 || errno == EINTR);
        t0 = now_ms();
        assert_int_equal(logshard_process(ls), 0);
        assert_true(now_ms() - t0 < 1000);
    }
    assert_true(pushed_back && released);
    assert_int_equal(logshard_events(ls), POLLIN);
    assert_int_equal(logshard_error(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
}

/* Records appended and then left alone are sent by logshard_process(), not
 * only by a later append or flush: an event loop has no linger timer. */
static int script_one_record_acked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

static void test_process_sends_lingering(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "lone", .flags = LOGSHARD_NONBLOCK };
    logshard *ls = NULL;
    uint64_t deadline = now_ms() + PEER_TIMEOUT_MS;

    peer_start(p, script_one_record_acked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_int_equal(logshard_append(ls, "one", 3), 0);
    assert_int_equal(logshard_append(ls, "two", 3), 0);
    assert_int_equal(logshard_events(ls), POLLIN | POLLOUT);
    while (logshard_unacked(ls) > 0) {
        struct pollfd pfd = { .fd = logshard_fd(ls), .events = (short)logshard_events(ls) };

        assert_true(now_ms() < deadline);
        assert_true(poll(&pfd, 1, remaining_ms(deadline)) >= 0 || errno == EINTR);
        assert_int_equal(logshard_process(ls), 0);
    }
    logshard_close(ls);
    peer_join(p);
    assert_int_equal(p->nframes, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_event_loop),
        PEER_TEST(test_process_sends_lingering),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
