/* The daemon's memory against greedy producers: a producer that floods
 * without pause beside well-behaved ones under memory_limit_bytes, and
 * producers that stop halfway through their frames until those alone are
 * over the limit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../daemon/arena.h"
#include "admin-fixture.h"
#include "harness.h"
#include "logshard.h"
#include "wire.h"

/* A figure of the daemon's /proc/PID/status, in bytes ("VmHWM: %" SCNu64
 * " kB" for the peak RSS). */
static uint64_t daemon_status_bytes(const struct harness *h, const char *format)
{
    char path[64], line[256];
    uint64_t kib = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)h->daemon);
    f = fopen(path, "re");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, format, &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
}

static uint64_t daemon_peak_rss(const struct harness *h)
{
    return daemon_status_bytes(h, "VmHWM: %" SCNu64 " kB");
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Whether this kernel backs an arena at start: transparent huge pages,
 * as the daemon judges them, and MADV_POPULATE_WRITE. */
static bool kernel_populates_arenas(void)
{
    long page = sysconf(_SC_PAGESIZE);
    void *p;
    int r;

    if (!arena_huge_pages_available())
        return false;
    p = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(p != MAP_FAILED);
    r = madvise(p, (size_t)page, MADV_POPULATE_WRITE);
    munmap(p, (size_t)page);
    return r == 0;
}

/* At start, before any producer, the daemon backs the buffers a burst
 * lands on (memory.h, memory_prepare): as many as stay resident once
 * freed, 32 MiB, but never more than memory_limit_bytes, the most its
 * buffers hold. */
static void test_buffers_backed_at_start(void **state)
{
    static const uint64_t limits[] = { 8u << 20, 256u << 20 };
    struct harness *h = *state;

    if (!kernel_populates_arenas())
        skip();
    for (size_t i = 0; i < sizeof(limits) / sizeof(limits[0]); i++) {
        uint64_t backed = limits[i] < (32u << 20) ? limits[i] : (32u << 20);
        uint64_t anon;
        char conf[128];

        snprintf(conf, sizeof(conf), "[limits]\nmemory_limit_bytes = %" PRIu64 "\n", limits[i]);
        harness_write_config(h, conf);
        harness_start(h, NULL);
        anon = daemon_status_bytes(h, "RssAnon: %" SCNu64 " kB");
        fprintf(stderr, "memory_limit_bytes %" PRIu64 " MiB: RssAnon at start %.1f MiB\n",
                limits[i] >> 20, (double)anon / 1048576.0);
        assert_true(anon >= backed);
        /* The rest of the daemon is a few MiB; AddressSanitizer's shadow
         * memory is not. */
#ifndef __SANITIZE_ADDRESS__
        assert_true(anon < backed + (16u << 20));
#endif
        harness_assert_clean_exit(harness_stop(h, SIGTERM, 60000));
    }
}

/* A producer that floods without pause beside eight well-behaved ones: the
 * daemon stops reading from whoever is over budget instead of buffering,
 * its memory stays under memory_limit_bytes, the well-behaved producers
 * finish their work while the flood is still going (they are not starved),
 * and every acknowledged record of everyone is there. */
static void test_flood_beside_good_producers(void **state)
{
    enum { GOOD = 8, GOOD_RECORDS = 2000 };
    struct harness *h = *state;
    pid_t flooder, good[GOOD];
    int stop_pipe[2];
    size_t len;
    char *text;
    uint64_t rss;

    harness_write_config(h, "[limits]\nmemory_limit_bytes = 16M\nsession_buffer_bytes = 4M\n"
                            "max_frame_bytes = 2M\n[sync]\nfsync = none\n");
    harness_start(h, NULL);
    assert_int_equal(pipe2(stop_pipe, O_CLOEXEC), 0);
    flooder = fork();
    assert_true(flooder >= 0);
    if (flooder == 0) {
        logshard_opts o = { .socket_path = h->sock, .producer = "flood" };
        logshard *ls = NULL;
        static char rec[4000];
        uint64_t i = 0;

        close(stop_pipe[1]);
        if (logshard_connect(&ls, &o) < 0)
            _exit(2);
        memset(rec, 'f', sizeof(rec));
        for (;;) {
            struct pollfd p = { .fd = stop_pipe[0], .events = POLLIN };
            int n = snprintf(rec, sizeof(rec), "flood %" PRIu64 " ", i);
            rec[n] = 'f';
            if (logshard_append(ls, rec, sizeof(rec)) < 0)
                _exit(3);
            i++;
            if (i % 256 == 0 && poll(&p, 1, 0) > 0)
                break;
        }
        _exit(logshard_flush(ls, 60000) == 0 ? 0 : 4);
    }
    close(stop_pipe[0]);
    for (int g = 0; g < GOOD; g++) {
        good[g] = fork();
        assert_true(good[g] >= 0);
        if (good[g] == 0) {
            char name[16], rec[128];
            logshard_opts o = { .socket_path = h->sock, .producer = name };
            logshard *ls = NULL;

            snprintf(name, sizeof(name), "good%d", g);
            if (logshard_connect(&ls, &o) < 0)
                _exit(2);
            for (uint64_t i = 0; i < GOOD_RECORDS; i++) {
                size_t n = harness_make_record(rec, sizeof(rec), name, i, 100);
                if (logshard_append(ls, rec, n) < 0)
                    _exit(3);
                if (i % 64 == 63 && logshard_flush(ls, 60000) < 0)
                    _exit(4);
            }
            _exit(logshard_flush(ls, 60000) == 0 ? 0 : 5);
        }
    }
    for (int g = 0; g < GOOD; g++) {
        int st;
        assert_int_equal(waitpid(good[g], &st, 0), good[g]);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    /* The flooder was flooding all along; only now is it told to stop. */
    {
        int st;
        assert_int_equal(waitpid(flooder, &st, WNOHANG), 0);
        assert_int_equal(write(stop_pipe[1], "x", 1), 1);
        assert_int_equal(waitpid(flooder, &st, 0), flooder);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    rss = daemon_peak_rss(h);
    fprintf(stderr, "daemon peak RSS under the flood: %.1f MiB (memory_limit_bytes 16 MiB)\n",
            (double)rss / 1048576.0);
    /* The buffers are capped at 16 MiB; code, libraries and the kernel's
     * accounting of them come on top. AddressSanitizer's shadow memory and
     * quarantine make RSS meaningless in a sanitizer build. */
#ifndef __SANITIZE_ADDRESS__
    assert_true(rss < 16u * 1048576u + 24u * 1048576u);
#endif
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 60000));
    close(stop_pipe[1]);

    text = harness_merge_and_cat(h, "flood.lsm", &len);
    {
        uint64_t next[GOOD] = { 0 }, flood = 0;
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            unsigned g;
            unsigned long long seq;
            if (sscanf(l, "good%u %llu", &g, &seq) == 2) {
                assert_true(g < GOOD);
                assert_int_equal(seq, next[g]);
                next[g]++;
            } else {
                unsigned long long fs;
                assert_int_equal(sscanf(l, "flood %llu", &fs), 1);
                assert_int_equal(fs, flood);
                flood++;
            }
        }
        for (int g = 0; g < GOOD; g++)
            assert_int_equal(next[g], GOOD_RECORDS);
        fprintf(stderr, "flooder got %" PRIu64 " records in\n", flood);
        assert_true(flood > 0);
    }
    free(text);
}

/* Reads ACKs from a raw connection until one says at least want records,
 * within timeout_ms; returns the last ACK seen. */
static uint64_t raw_read_acks(int fd, uint64_t want, int timeout_ms)
{
    unsigned char buf[4096];
    size_t have = 0;
    uint64_t acked = 0;
    struct timespec start, now;

    clock_gettime(CLOCK_MONOTONIC, &start);
    while (acked < want) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        long spent;
        ssize_t n;

        clock_gettime(CLOCK_MONOTONIC, &now);
        spent = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (spent >= timeout_ms || poll(&p, 1, (int)(timeout_ms - spent)) != 1)
            break;
        n = recv(fd, buf + have, sizeof(buf) - have, 0);
        if (n <= 0)
            break;
        have += (size_t)n;
        while (have >= WIRE_HEADER_SIZE && have >= WIRE_HEADER_SIZE + wire_get_u32(buf)) {
            uint32_t len = wire_get_u32(buf);

            assert_int_not_equal(buf[4], WIRE_ERROR);
            if (buf[4] == WIRE_ACK)
                acked = wire_get_u64(buf + WIRE_HEADER_SIZE);
            memmove(buf, buf + WIRE_HEADER_SIZE + len, have - WIRE_HEADER_SIZE - len);
            have -= WIRE_HEADER_SIZE + len;
        }
    }
    return acked;
}

enum { UNFINISHED_RECS = 180, UNFINISHED_REC_BYTES = 1000 };

/* The APPEND frame of connection c in test_unfinished_frames_over_memory_limit:
 * UNFINISHED_RECS records "unfinished<c> <i> ..." of UNFINISHED_REC_BYTES
 * each, into frame; returns its size. */
static size_t encode_unfinished_frame(unsigned c, unsigned char *frame)
{
    static char text[UNFINISHED_RECS][UNFINISHED_REC_BYTES + 1];
    const char *recs[UNFINISHED_RECS];
    char name[32];

    snprintf(name, sizeof(name), "unfinished%u", c);
    for (unsigned i = 0; i < UNFINISHED_RECS; i++) {
        harness_make_record(text[i], sizeof(text[i]), name, i, UNFINISHED_REC_BYTES);
        recs[i] = text[i];
    }
    return harness_encode_append(frame, recs, UNFINISHED_RECS);
}

/* Producers that each stop halfway through a frame, their unfinished
 * frames together more than memory_limit_bytes: each is still read to the
 * end of its frame once the rest comes (its receive buffer holds room for
 * all of it already). Paused for the daemon's limit instead, none could
 * finish, nothing would give memory back, and the daemon would never read
 * from any of them again. */
static void test_unfinished_frames_over_memory_limit(void **state)
{
    enum { CONNS = 32, RECS = UNFINISHED_RECS, REC_BYTES = UNFINISHED_REC_BYTES };
    struct harness *h = *state;
    unsigned char *frame = malloc(WIRE_HEADER_SIZE + WIRE_APPEND_FIXED + RECS * (4 + REC_BYTES));
    int fd[CONNS];
    size_t len = 0;
    char *text;

    assert_non_null(frame);
    harness_write_config(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 1M\n"
                            "max_frame_bytes = 512K\nmax_record_bytes = 64K\n[sync]\nfsync = none\n");
    harness_start(h, NULL);
    for (unsigned c = 0; c < CONNS; c++) {
        char name[32];

        snprintf(name, sizeof(name), "unfinished%u", c);
        len = encode_unfinished_frame(c, frame);
        fd[c] = harness_raw_connect(h->sock);
        harness_raw_hello(fd[c], name);
        harness_raw_send(fd[c], frame, len / 2);
    }
    /* 32 frames of 180 KB, all unfinished. The daemon reserves a whole
     * frame for each start it reads and stops reading new frames once it
     * holds more than its limit; a connection paused before it read any
     * holds nothing. How far past the limit it gets depends on how many
     * starts one loop tick finds, so the wait is for the limit crossed
     * with unfinished frames alone: none can give memory back until its
     * rest comes, and only then does the rest come. */
    {
        int64_t deadline = now_ms() + 20000;
        uint64_t held = 0;

        while (now_ms() < deadline) {
            struct json_value *st = status_json(h);

            held = json_get_u64(st, "memory_bytes", 0);
            json_value_free(st);
            if (held > 1024 * 1024)
                break;
        }
        assert_true(held > 1024 * 1024);
    }
    for (unsigned c = 0; c < CONNS; c++) {
        len = encode_unfinished_frame(c, frame);
        harness_raw_send(fd[c], frame + len / 2, len - len / 2);
    }
    for (unsigned c = 0; c < CONNS; c++) {
        assert_int_equal(raw_read_acks(fd[c], RECS, 20000), RECS);
        close(fd[c]);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "unfinished.lsm", &len);
    for (unsigned c = 0; c < CONNS; c++) {
        char first[48], last[48];

        snprintf(first, sizeof(first), "unfinished%u 0 ", c);
        snprintf(last, sizeof(last), "unfinished%u %u ", c, RECS - 1);
        assert_non_null(strstr(text, first));
        assert_non_null(strstr(text, last));
    }
    assert_int_equal(len, (size_t)CONNS * RECS * (REC_BYTES + 1));
    free(text);
    free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_buffers_backed_at_start, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_flood_beside_good_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_frames_over_memory_limit, harness_setup,
                                        harness_teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
