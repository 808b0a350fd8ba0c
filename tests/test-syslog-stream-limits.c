/* The syslog stream socket (--syslog-stream-socket) against the daemon's
 * limits, with connections this test writes itself to the real logshardd,
 * read back with the real logctl:
 *  - over memory_limit_bytes a connection is not read: the sender blocks;
 *  - connections paused over memory_limit_bytes keep only their unfinished
 *    message, and are read again once the daemon is back under it;
 *  - unfinished messages that alone hold the daemon over the limit keep
 *    neither their own connections nor a producer of the library waiting;
 *  - a connection at its producer's quota (over_quota = wait) is not read
 *    until logctl merge --delete makes room, and loses nothing;
 *  - busy connections take turns under a small read budget, every message
 *    stored once and in order.
 * Framing, senders that are not ours, refusals, the drain and socket
 * activation are test-syslog-stream.c's. */
#include <errno.h>
#include <dirent.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "syslog-fixture.h"

/* Over memory_limit_bytes (writes stalled by fault injection, so the
 * shard's batch only grows) the connection is not read: its socket
 * buffers fill and a non-blocking writer gets EAGAIN, having handed over
 * about session_buffer_bytes. A daemon that kept reading would take it all. */
static void test_backpressure(void **state)
{
    struct harness *h = *state;
    size_t chunk = 64 * 1024, sent = 0, want = 64 * 1024 * 1024;
    char *buf = malloc(chunk);
    int fd;

    assert_non_null(buf);
    for (size_t i = 0; i < chunk; i++)
        buf[i] = (i % 100 == 99) ? '\n' : 'x';
    memcpy(buf, "<13>flood: ", 11);
    setenv("LOGSHARD_FAULTS", "stall_writes", 1);
    syslog_stream_start(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 128K\n"
                         "max_frame_bytes = 128K\nmax_record_bytes = 64K\n");
    unsetenv("LOGSHARD_FAULTS");
    fd = syslog_stream_connect(h);
    while (sent < want) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        ssize_t n;

        /* A reading daemon makes room within a second. */
        if (poll(&p, 1, 1000) == 0)
            break;
        n = send(fd, buf, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        assert_true(n > 0);
        sent += (size_t)n;
    }
    if (sent >= want)
        fail_msg("%zu bytes were taken against memory_limit_bytes 1M: the daemon never "
                 "stopped reading", sent);
    if (!harness_wait_log(h, "the sender waits", 10000))
        fail_msg("the pause was not logged");
    assert_true(syslog_status(h, "stream", "pauses") >= 1);
    harness_assert_running(h);
    close(fd);
    free(buf);
    /* The writes never complete: the teardown kills the daemon. */
}

/* Busy connections with the tick's read budget forced down to 16 KiB
 * (LOGSHARD_FAULTS=small_read_turns): they take turns, and every message
 * of every connection is stored once, in the order it was sent. */
static void test_turns(void **state)
{
    enum { CONNS = 6, LINES = 20000 };
    struct harness *h = *state;
    int fds[CONNS];
    struct syslog_recs r;
    size_t next[CONNS] = { 0 };

    setenv("LOGSHARD_FAULTS", "small_read_turns", 1);
    syslog_stream_start(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    for (int c = 0; c < CONNS; c++)
        fds[c] = syslog_stream_connect(h);
    /* Interleaved writes of 64 lines, so that every connection has more to
     * send while the others are read. */
    for (size_t i = 0; i < LINES; i += 64) {
        for (int c = 0; c < CONNS; c++) {
            char buf[64 * 48];
            size_t len = 0;

            for (size_t k = i; k < i + 64 && k < LINES; k++)
                len += (size_t)snprintf(buf + len, sizeof(buf) - len,
                                        "<13>turn%d: message %07zu\n", c, k);
            syslog_send_all(fds[c], buf, len);
        }
    }
    /* Megabytes went through socket buffers of a few hundred KiB, so the
     * daemon read while they were written, 16 KiB a tick. */
    assert_true(syslog_status(h, "", "read_turns") > 0);
    for (int c = 0; c < CONNS; c++)
        close(fds[c]);
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, CONNS * LINES);
    for (size_t i = 0; i < r.n; i++) {
        int c;
        size_t k;

        if (sscanf(r.v[i].payload, "<13>turn%d: message %zu", &c, &k) != 2 || c < 0 ||
            c >= CONNS)
            fail_msg("a record nobody sent: %.*s", (int)r.v[i].len, r.v[i].payload);
        if (k != next[c])
            fail_msg("connection %d: message %zu where %zu was due (lost, twice or out of "
                     "order)", c, k, next[c]);
        next[c]++;
    }
    syslog_recs_free(&r);
}

/* The count of lines holding needle in what logctl cat prints of every
 * merged file and of done/. */
static size_t count_everywhere(struct harness *h, const char *needle)
{
    char *merged_dir = harness_path(h->spool, "merged");
    struct dirent **names = NULL;
    int n = scandir(merged_dir, &names, NULL, alphasort);
    size_t count = 0;

    if (n < 0)
        n = 0; /* nothing merged yet: done/ alone */

    for (int i = 0; i <= n; i++) {
        struct harness_run r;
        char *path = NULL;

        if (i < n && names[i]->d_name[0] == '.') {
            free(names[i]);
            continue;
        }
        if (i < n)
            path = harness_path(merged_dir, names[i]->d_name);
        r = i < n ? harness_run_logctl(h, "cat", path, NULL)
                  : harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
        harness_expect_code(&r, 0, "logctl cat");
        for (const char *p = r.out; p && (p = strstr(p, needle)); p++)
            count++;
        harness_run_free(&r);
        free(path);
        if (i < n)
            free(names[i]);
    }
    free(names);
    free(merged_dir);
    return count;
}

/* Sends from *sent up to total bytes of buf without blocking, for as long
 * as the daemon takes them within ms of each other. */
static void send_taken_within(int fd, const char *buf, size_t total, size_t *sent, int ms)
{
    while (*sent < total) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        ssize_t n;

        if (poll(&p, 1, ms) == 0)
            return;
        n = send(fd, buf + *sent, total - *sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        assert_true(n > 0);
        *sent += (size_t)n;
    }
}

/* The same, within a second of each other. */
static void send_while_taken(int fd, const char *buf, size_t total, size_t *sent)
{
    send_taken_within(fd, buf, total, sent, 1000);
}

struct stored_wait {
    struct harness *h;
    const char *needle;
    size_t want;
};

/* Whether want messages holding needle are sealed (rotate seals the active
 * shards first). */
static bool stored(void *arg)
{
    struct stored_wait *w = arg;
    struct harness_run r = harness_run_logctl(w->h, "rotate", "--admin-socket",
                                              w->h->admin_sock, NULL);

    harness_expect_code(&r, 0, "logctl rotate");
    harness_run_free(&r);
    return count_everywhere(w->h, w->needle) >= w->want;
}

/* Many connections each leave a message unfinished while the daemon is
 * over memory_limit_bytes. A paused connection keeps only the unfinished
 * message, not the receive buffer it was read into: 32 buffers of 64 KiB
 * would stay above the point where paused connections read again (three
 * quarters of the limit) for good, and the ends of the messages, sent
 * later, would never be read. */
static void test_unfinished_messages_over_memory_limit(void **state)
{
    enum { CONNS = 32 };
    struct harness *h = *state;
    struct stored_wait w = { h, ": second", CONNS };
    int fds[CONNS];

    syslog_stream_start(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 128K\n"
                         "max_frame_bytes = 128K\nmax_record_bytes = 64K\n");
    for (int c = 0; c < CONNS; c++) {
        char text[96];

        fds[c] = syslog_stream_connect(h);
        snprintf(text, sizeof(text), "<13>unf%02d: first\n<13>unf%02d: sec", c, c);
        syslog_send_text(fds[c], text);
    }
    if (!harness_wait_log(h, "the sender waits", 10000))
        fail_msg("no connection paused: %d receive buffers of 64 KiB did not go over "
                 "memory_limit_bytes 1M", CONNS);
    for (int c = 0; c < CONNS; c++) {
        syslog_send_text(fds[c], "ond\n");
        /* Open: the drain at the end reads every connection, paused or not,
         * and would hide a connection that is never read again. */
    }
    if (!harness_wait_for(stored, &w, 20000))
        fail_msg("%zu of %d second messages stored within 20 s: paused connections were "
                 "never read again", count_everywhere(h, w.needle), CONNS);
    assert_int_equal(count_everywhere(h, ": first"), CONNS);
    harness_assert_running(h);
    for (int c = 0; c < CONNS; c++)
        close(fds[c]);
    syslog_stop_clean(h);
    assert_int_equal(count_everywhere(h, ": second"), CONNS);
}

/* The unfinished messages of paused connections alone hold the daemon over
 * three quarters of memory_limit_bytes: 4 of 300,000 bytes against a
 * limit of 1 MiB. Only reading those connections on can release them, so
 * they must not be what keeps paused connections from reading: when their
 * senders finish the messages, the messages are stored. */
static void test_large_unfinished_messages_over_memory_limit(void **state)
{
    enum { CONNS = 4, BODY = 300000 };
    struct harness *h = *state;
    struct stored_wait w = { h, ": after", CONNS };
    int fds[CONNS];
    char *first[CONNS], rest[CONNS][64];
    size_t first_len[CONNS], first_sent[CONNS] = { 0 }, rest_sent[CONNS] = { 0 };
    bool all_sent = false;

    syslog_stream_start(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 512K\n"
                         "max_frame_bytes = 512K\nmax_record_bytes = 384K\n");
    for (int c = 0; c < CONNS; c++) {
        int head;

        fds[c] = syslog_stream_connect(h);
        first[c] = malloc(BODY + 32);
        assert_non_null(first[c]);
        head = sprintf(first[c], "<13>big%d: ", c);
        memset(first[c] + head, 'x', BODY);
        first_len[c] = (size_t)head + BODY;
        snprintf(rest[c], sizeof(rest[c]), "y\n<13>big%d: after\n", c);
    }
    /* A slice of each in turn, so that every connection holds a part of
     * its message when the daemon goes over its limit, and pauses at its
     * next read. */
    for (size_t upto = 16384; upto < first_len[0] + 16384; upto += 16384)
        for (int c = 0; c < CONNS; c++)
            send_taken_within(fds[c], first[c], upto < first_len[c] ? upto : first_len[c],
                              &first_sent[c], 50);
    if (!harness_wait_log(h, "the sender waits", 10000))
        fail_msg("no connection paused with %d unfinished messages of %d bytes over "
                 "memory_limit_bytes 1M", CONNS, BODY);
    /* Meanwhile a producer of the library is not held up by them: its
     * 400 KB take many reads, each over the limit. */
    {
        logshard_opts o = { .socket_path = h->sock, .producer = "lib" };
        logshard *ls = NULL;
        char rec[256];
        int r;

        assert_int_equal(logshard_connect(&ls, &o), 0);
        for (uint64_t i = 0; i < 2000; i++) {
            size_t n = harness_make_record(rec, sizeof(rec), "lib", i, 200);

            assert_int_equal(logshard_append(ls, rec, n), 0);
        }
        r = logshard_flush(ls, 20000);
        if (r != 0)
            fail_msg("a producer of the library was not acknowledged within 20 s while "
                     "syslog connections held unfinished messages: %s", strerror(-r));
        logshard_close(ls);
    }
    /* The senders finish their messages; the connections stay open, since
     * the drain at the end reads every connection, paused or not. */
    for (int round = 0; round < 8 && !all_sent; round++) {
        all_sent = true;
        for (int c = 0; c < CONNS; c++) {
            send_taken_within(fds[c], first[c], first_len[c], &first_sent[c], 500);
            if (first_sent[c] == first_len[c])
                send_taken_within(fds[c], rest[c], strlen(rest[c]), &rest_sent[c], 500);
            all_sent = all_sent && rest_sent[c] == strlen(rest[c]);
        }
    }
    if (!all_sent || !harness_wait_for(stored, &w, 20000))
        fail_msg("%zu of %d messages stored within 20 s after their senders finished them: "
                 "the paused connections' unfinished messages kept them from being read",
                 count_everywhere(h, w.needle), CONNS);
    harness_assert_running(h);
    for (int c = 0; c < CONNS; c++) {
        close(fds[c]);
        free(first[c]);
    }
    syslog_stop_clean(h);
    assert_int_equal(count_everywhere(h, ": after"), CONNS);
    assert_int_equal(count_everywhere(h, "xxxy"), CONNS);
}

/* A stream connection over its producer's quota (over_quota = wait) is
 * not read: the sender is held by its socket buffer, not dropped. Each
 * merge --delete frees room and it goes on; every message is stored once. */
static void test_quota_waits(void **state)
{
    struct harness *h = *state;
    const size_t messages = 100000;
    size_t len = 0, sent = 0;
    char *buf = malloc(messages * 40);
    int fd;

    assert_non_null(buf);
    for (size_t i = 0; i < messages; i++)
        len += (size_t)sprintf(buf + len, "<13>quotad: message %07zu\n", i);
    syslog_stream_start(h, "[shard]\nmax_shard_bytes = 64K\n"
                         "[producer_quotas]\nquotad.u* = 512K\n");
    fd = syslog_stream_connect(h);
    send_while_taken(fd, buf, len, &sent);
    if (sent >= len)
        fail_msg("all %zu bytes were taken against a quota of 512K", sent);
    if (!harness_wait_log(h, "is at its quota", 10000))
        fail_msg("the quota wait was not logged");
    {
        struct harness_run r = harness_run_logctl(h, "status", "--json", "--admin-socket",
                                                  h->admin_sock, NULL);
        harness_expect_code(&r, 0, "logctl status --json");
        harness_expect_in(r.out, "\"producers_waiting\":1", "status shows the wait");
        harness_run_free(&r);
    }
    for (int round = 0; round < 200 && sent < len; round++) {
        struct harness_run r = harness_run_logctl(h, "merge", "--spool", h->spool, "--delete",
                                                  NULL);
        harness_expect_code(&r, 0, "logctl merge --delete");
        harness_run_free(&r);
        send_while_taken(fd, buf, len, &sent);
    }
    assert_int_equal(sent, len);
    close(fd);
    syslog_stop_clean(h);
    assert_int_equal(count_everywhere(h, "quotad: message "), messages);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_backpressure, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_messages_over_memory_limit, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_large_unfinished_messages_over_memory_limit,
                                        harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_quota_waits, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_turns, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
