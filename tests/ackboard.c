/* See ackboard.h. */
#include "ackboard.h"

#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "logshard.h"

void board_open(struct ack_board *b, const struct harness *h)
{
    b->path = harness_path(h->dir, "acked.bin");
    b->fd = open(b->path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(b->fd >= 0);
    assert_int_equal(ftruncate(b->fd, MAX_PRODUCERS * 8), 0);
}

uint64_t board_get(const struct ack_board *b, unsigned slot)
{
    uint64_t v = 0;
    assert_int_equal(pread(b->fd, &v, 8, (off_t)slot * 8), 8);
    return v;
}

void board_close(struct ack_board *b)
{
    close(b->fd);
    free(b->path);
}

/* Appends up to count records (0: until an error), flushing every
 * flush_every, and publishes the acknowledged count. Exits 0 when all were
 * acknowledged, 1 when the daemon went away or refused. */
static void producer_main(const char *sock, const char *name, unsigned slot, int board_fd,
                          uint64_t count, size_t size, uint64_t flush_every,
                          int *ret_last_error)
{
    /* These producers stand for version 1 behaviour: the daemon's death ends
     * them, and what they saw acknowledged must be on disk. The resuming
     * producers have tests of their own (test-restart.c). */
    logshard_opts opts = { .socket_path = sock, .producer = name, .flags = LOGSHARD_NO_RECONNECT };
    logshard *ls = NULL;
    char buf[4096];
    uint64_t i;
    uint64_t appended = 0;
    int r = logshard_connect(&ls, &opts);

    (void)ret_last_error;
    if (r < 0)
        _exit(2);
    for (i = 0; count == 0 || i < count; i++) {
        size_t len = harness_make_record(buf, sizeof(buf), name, i, size);

        r = logshard_append(ls, buf, len);
        if (r == 0)
            appended++;
        if (r == 0 && (i + 1) % flush_every == 0)
            r = logshard_flush(ls, 30000);
        if (r < 0)
            break;
        if ((i + 1) % flush_every == 0) {
            uint64_t acked = i + 1 - logshard_unacked(ls);
            if (pwrite(board_fd, &acked, 8, (off_t)slot * 8) != 8)
                _exit(3);
        }
    }
    if (r == 0)
        r = logshard_flush(ls, 30000);
    {
        /* What the library took minus what it still waits for; a failed
         * append or flush leaves the rest unacknowledged. */
        uint64_t acked = appended - logshard_unacked(ls);
        if (pwrite(board_fd, &acked, 8, (off_t)slot * 8) != 8)
            _exit(3);
    }
    /* Report the error through the exit status: 0, or 10 + errno. */
    logshard_close(ls);
    _exit(r == 0 ? 0 : 10 + (-r > 200 ? 200 : -r));
}

pid_t spawn(const char *sock, const char *name, unsigned slot, int board_fd,
                   uint64_t count, size_t size, uint64_t flush_every)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0)
        producer_main(sock, name, slot, board_fd, count, size, flush_every, NULL);
    return pid;
}

/* Waits for a producer; returns its exit status (0, or 10 + errno). */
int reap(pid_t pid)
{
    int status;

    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* ---- reading everything back ---- */

/* Per producer name: the records found must be 0, 1, 2, ... in order with
 * no gap and no repeat, and at least acked[i] of them. Lines of producers
 * not listed fail the check. */
void check_exactly_once(char *text, char names[][32], const uint64_t *acked, size_t n,
                               uint64_t *ret_found)
{
    uint64_t *next = calloc(n, sizeof(uint64_t));
    char *save = NULL;

    assert_non_null(next);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *sp = strchr(line, ' ');
        size_t i;
        unsigned long long seq;

        assert_non_null(sp);
        for (i = 0; i < n; i++)
            if ((size_t)(sp - line) == strlen(names[i]) &&
                strncmp(line, names[i], (size_t)(sp - line)) == 0)
                break;
        if (i == n)
            fail_msg("record of an unknown producer: %.60s", line);
        seq = strtoull(sp + 1, NULL, 10);
        if (seq != next[i])
            fail_msg("producer %s: record %llu where %" PRIu64 " was expected (duplicate, gap "
                     "or reorder)",
                     names[i], seq, next[i]);
        next[i]++;
    }
    for (size_t i = 0; i < n; i++) {
        if (next[i] < acked[i])
            fail_msg("producer %s: %" PRIu64 " records acknowledged, only %" PRIu64
                     " present",
                     names[i], acked[i], next[i]);
        if (ret_found)
            ret_found[i] = next[i];
    }
    free(next);
}

