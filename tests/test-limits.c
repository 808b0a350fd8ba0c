/* Hostile and greedy producers against the real daemon: connection floods
 * against max_producers, per-uid and access lists, stalled clients
 * (hello_timeout_ms, idle_timeout_ms), a flooding producer beside
 * well-behaved ones under memory_limit_bytes, hostile names and a planted
 * symlink, the open-shard cap, running out of descriptors, a record of
 * exactly max_record_bytes, and the client library under valgrind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "admin-fixture.h"
#include "harness.h"
#include "logshard.h"
#include "wire.h"

/* Reads one frame (at most 10 s); returns its type, 0 at end of stream. */
static int read_frame(int fd, unsigned char *payload, size_t cap, uint32_t *ret_len)
{
    unsigned char hdr[WIRE_HEADER_SIZE];
    size_t got = 0;
    uint32_t len;

    while (got < sizeof(hdr)) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;
        assert_int_equal(poll(&p, 1, 10000), 1);
        n = recv(fd, hdr + got, sizeof(hdr) - got, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    len = wire_get_u32(hdr);
    assert_true(len <= cap);
    for (got = 0; got < len;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;
        assert_int_equal(poll(&p, 1, 10000), 1);
        n = recv(fd, payload + got, len - got, 0);
        if (n <= 0)
            return 0;
        got += (size_t)n;
    }
    *ret_len = len;
    return hdr[4];
}

static void raise_nofile(void)
{
    struct rlimit rl;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = rl.rlim_max;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 2200)
        skip(); /* cannot open a thousand connections here */
}

/* The daemon refuses a connection over a limit as soon as it accepts it,
 * before the producer says anything, so the HELLO may meet a socket the
 * daemon has closed already; its ERROR is still there to be read. */
static void hello_unless_refused(int fd, const char *name)
{
    unsigned char buf[128];
    int n = wire_encode_hello(buf, name, strlen(name));
    ssize_t r;

    assert_true(n > 0);
    r = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
    if (r < 0)
        assert_true(errno == EPIPE || errno == ECONNRESET);
    else
        assert_int_equal(r, n);
}

/* 1,000 connections at once against max_producers = 256: exactly 256 are
 * welcomed and all of them work; the others get an ERROR naming the limit. */
static void test_max_producers(void **state)
{
    enum { N = 1000, MAX = 256 };
    struct harness *h = *state;
    static int fds[N];
    static unsigned char payload[2048];
    unsigned welcomed = 0, refused = 0;

    raise_nofile();
    harness_write_config(h, "[limits]\nmax_producers = 256\n");
    harness_start(h, NULL);
    for (int i = 0; i < N; i++) {
        char name[32];
        fds[i] = harness_raw_connect(h->sock);
        snprintf(name, sizeof(name), "flood%d", i);
        hello_unless_refused(fds[i], name);
    }
    for (int i = 0; i < N; i++) {
        uint32_t len = 0;
        int type = read_frame(fds[i], payload, sizeof(payload), &len);

        if (type == WIRE_WELCOME) {
            const char *recs[] = { "works" };
            unsigned char frame[64];
            welcomed++;
            harness_raw_send(fds[i], frame, harness_encode_append(frame, recs, 1));
            assert_int_equal(read_frame(fds[i], payload, sizeof(payload), &len), WIRE_ACK);
            assert_int_equal(wire_get_u64(payload), 1);
        } else {
            assert_int_equal(type, WIRE_ERROR);
            assert_int_equal(wire_get_u32(payload), EUSERS);
            payload[len] = '\0';
            assert_non_null(strstr((char *)payload + 4, "max_producers (256) reached"));
            refused++;
        }
    }
    assert_int_equal(welcomed, MAX);
    assert_int_equal(refused, N - MAX);
    for (int i = 0; i < N; i++)
        close(fds[i]);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), MAX);
}

/* max_producers_per_uid counts connections of one uid. */
static void test_max_producers_per_uid(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "peruid" };
    logshard *a = NULL, *b = NULL, *c = NULL;

    harness_write_config(h, "[limits]\nmax_producers_per_uid = 2\n");
    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&a, &opts), 0);
    assert_int_equal(logshard_connect(&b, &opts), 0);
    assert_int_equal(logshard_connect(&c, &opts), -EUSERS);
    logshard_close(b);
    /* One gone: room again (the daemon may take a moment to see it go). */
    for (int i = 0; i < 1000; i++) {
        int r = logshard_connect(&c, &opts);
        if (r == 0)
            break;
        assert_int_equal(r, -EUSERS);
        poll(NULL, 0, 10);
    }
    assert_non_null(c);
    logshard_close(a);
    logshard_close(c);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
}

/* A client that connects and says nothing is dropped after
 * hello_timeout_ms; one that leaves a frame half sent is dropped after
 * idle_timeout_ms, and its complete records are sealed. */
static void test_stalled_clients(void **state)
{
    struct harness *h = *state;
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    unsigned char frame[256];
    const char *recs[] = { "slow 0", "slow 1" };
    uint64_t acked = 0;
    size_t len;
    char *text;
    int quiet, slow;

    harness_write_config(h, "[limits]\nhello_timeout_ms = 300\nidle_timeout_ms = 300\n");
    harness_start(h, NULL);
    quiet = harness_raw_connect(h->sock);
    slow = harness_raw_connect(h->sock);
    harness_raw_hello(slow, "slowloris");
    harness_raw_send(slow, frame, harness_encode_append(frame, recs, 2));
    /* Half of a further frame, then nothing. */
    len = harness_encode_append(frame, recs, 1);
    harness_raw_send(slow, frame, len / 2);

    assert_int_equal(harness_raw_read_until_error(quiet, msg, sizeof(msg), NULL), ETIMEDOUT);
    assert_non_null(strstr(msg, "no HELLO within hello_timeout_ms (300)"));
    assert_int_equal(harness_raw_read_until_error(slow, msg, sizeof(msg), &acked), ETIMEDOUT);
    assert_non_null(strstr(msg, "idle_timeout_ms (300)"));
    assert_int_equal(acked, 2);
    close(quiet);
    close(slow);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "slow.lsm", &len);
    assert_string_equal(text, "slow 0\nslow 1\n");
    free(text);
}

static uint64_t daemon_peak_rss(const struct harness *h)
{
    char path[64], line[256];
    uint64_t kib = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)h->daemon);
    f = fopen(path, "re");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "VmHWM: %" SCNu64 " kB", &kib) == 1)
            break;
    fclose(f);
    return kib * 1024;
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

/* Hostile names are refused with the rule; a symlink planted in active/
 * leads nowhere; nothing is written outside the spool. */
static void test_hostile_names_and_symlink(void **state)
{
    static const struct {
        const char *name;
        size_t len;
    } bad[] = {
        { "../x", 4 }, { "a/b", 3 }, { ".hidden", 7 },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 65 },
        { "", 0 }, { "caf\xc3\xa9", 5 }, { "\xff\xfe", 2 }, { "a\0b", 3 },
    };
    struct harness *h = *state;
    char *outside = harness_path(h->dir, "outside");
    char *active, *link_path;
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    struct stat st;

    /* A directory and a file next to the spool that nothing may touch; a
     * shard-like name in active/ pointing at the file. */
    assert_int_equal(mkdir(outside, 0755), 0);
    harness_start(h, NULL);
    active = harness_path(h->spool, "active");
    link_path = harness_path(active, "evil.0000000000000001.tmp");
    {
        char *target = harness_path(outside, "target");
        int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(symlink(target, link_path), 0);
        free(target);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned char frame[128];
        int fd = harness_raw_connect(h->sock);

        wire_encode_header(frame, WIRE_HELLO, (uint32_t)(4 + bad[i].len));
        wire_put_u16(frame + 8, WIRE_PROTOCOL_V1);
        wire_put_u16(frame + 10, 0);
        memcpy(frame + 12, bad[i].name, bad[i].len);
        harness_raw_send(fd, frame, 12 + bad[i].len);
        assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), NULL), EINVAL);
        assert_non_null(strstr(msg, "[A-Za-z0-9._-]"));
        close(fd);
    }
    /* The library refuses them too, before sending anything. */
    {
        logshard_opts o = { .socket_path = h->sock, .producer = "../x" };
        logshard *ls = NULL;
        assert_int_equal(logshard_connect(&ls, &o), -EINVAL);
    }
    /* A good producer works beside all that. */
    {
        logshard_opts o = { .socket_path = h->sock, .producer = "evil" };
        logshard *ls = NULL;
        assert_int_equal(logshard_connect(&ls, &o), 0);
        assert_int_equal(logshard_append(ls, "evil 0", 6), 0);
        assert_int_equal(logshard_flush(ls, 10000), 0);
        logshard_close(ls);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    /* Restart: recovery meets the planted link and leaves it alone. */
    harness_start(h, NULL);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    {
        char *target = harness_path(outside, "target");
        assert_int_equal(stat(target, &st), 0);
        assert_int_equal(st.st_size, 0);
        free(target);
    }
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    free(link_path);
    free(active);
    free(outside);
}

/* A uid not in allowed_uids is refused (a child that becomes nobody). */
static void test_allowed_uids(void **state)
{
    struct harness *h = *state;
    pid_t pid;
    int st;

    if (geteuid() != 0) {
        fprintf(stderr, "not root: cannot become another user\n");
        skip();
    }
    harness_write_config(h, "[daemon]\nsocket_mode = 0666\n[access]\nallowed_uids = 0\n");
    assert_int_equal(chmod(h->dir, 0755), 0);
    harness_start(h, NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        logshard_opts o = { .socket_path = h->sock, .producer = "nobody" };
        logshard *ls = NULL;
        int r;

        if (setgid(65534) < 0 || setuid(65534) < 0)
            _exit(90);
        r = logshard_connect(&ls, &o);
        _exit(r == -EACCES ? 0 : 91);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    /* root is on the list. */
    {
        logshard_opts o = { .socket_path = h->sock, .producer = "root" };
        logshard *ls = NULL;
        assert_int_equal(logshard_connect(&ls, &o), 0);
        logshard_close(ls);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    {
        size_t len;
        char *log = harness_slurp(h->log, &len);
        assert_non_null(strstr(log, "uid 65534, gid 65534 may not produce here"));
        free(log);
    }
}

/* max_open_shards: the producer that would open one shard too many gets an
 * ERROR naming the limit; the others carry on. */
static void test_max_open_shards(void **state)
{
    struct harness *h = *state;
    logshard_opts o = { .socket_path = h->sock, .producer = "cap" };
    logshard *a = NULL, *b = NULL, *c = NULL;

    harness_write_config(h, "[limits]\nmax_open_shards = 2\n");
    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&a, &o), 0);
    assert_int_equal(logshard_connect(&b, &o), 0);
    assert_int_equal(logshard_connect(&c, &o), 0);
    assert_int_equal(logshard_append(a, "a", 1), 0);
    assert_int_equal(logshard_flush(a, 10000), 0);
    assert_int_equal(logshard_append(b, "b", 1), 0);
    assert_int_equal(logshard_flush(b, 10000), 0);
    assert_int_equal(logshard_append(c, "c", 1), 0);
    assert_int_equal(logshard_flush(c, 10000), -EMFILE);
    assert_non_null(strstr(logshard_error_message(c), "max_open_shards (2) reached"));
    assert_int_equal(logshard_append(a, "a", 1), 0);
    assert_int_equal(logshard_flush(a, 10000), 0);
    logshard_close(a);
    logshard_close(b);
    logshard_close(c);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
}

/* Out of descriptors: the daemon pauses accepting, keeps serving, and the
 * connections that waited are served once descriptors are free again. */
static void test_out_of_descriptors(void **state)
{
    enum { N = 60 };
    struct harness *h = *state;
    int fds[N];
    static unsigned char payload[2048];
    size_t len;
    char *log;

    h->nofile_limit = 40;
    harness_start(h, NULL);
    for (int i = 0; i < N; i++) {
        fds[i] = harness_raw_connect(h->sock);
        harness_raw_hello(fds[i], "fdhog");
    }
    /* Give back the first half; everyone still connected gets its WELCOME
     * sooner or later. */
    for (int i = 0; i < N / 2; i++)
        close(fds[i]);
    for (int i = N / 2; i < N; i++) {
        uint32_t l = 0;
        assert_int_equal(read_frame(fds[i], payload, sizeof(payload), &l), WIRE_WELCOME);
        close(fds[i]);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    log = harness_slurp(h->log, &len);
    assert_non_null(strstr(log, "pausing accepting"));
    free(log);
}

/* Sends one record of exactly rec bytes through the library, after one of
 * rec + 1 bytes was refused without reaching the daemon. */
static void send_largest_record(const struct harness *h, size_t rec)
{
    logshard_opts o = { .socket_path = h->sock, .producer = "big" };
    logshard *ls = NULL;
    char *buf = malloc(rec + 1);

    assert_non_null(buf);
    memset(buf, 'r', rec + 1);
    assert_int_equal(logshard_connect(&ls, &o), 0);
    assert_int_equal(logshard_append(ls, buf, rec + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, buf, rec), 0);
    assert_int_equal(logshard_flush(ls, 120000), 0);
    logshard_close(ls);
    free(buf);
}

/* At the boundary: max_frame_bytes exactly max_record_bytes + 8, and the
 * session buffer exactly one frame. A record of max_record_bytes is taken
 * whole; a frame one byte over the limit is refused from its header. */
static void test_largest_record(void **state)
{
    struct harness *h = *state;
    static unsigned char payload[2048];
    unsigned char frame[WIRE_HEADER_SIZE];
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    uint32_t len = 0;
    char *text;
    size_t text_len;
    int fd;

    harness_write_config(h, "[limits]\nmax_record_bytes = 64K\nmax_frame_bytes = 65544\n"
                            "session_buffer_bytes = 65544\n");
    harness_start(h, NULL);
    send_largest_record(h, 65536);

    fd = harness_raw_connect(h->sock);
    harness_raw_hello(fd, "raw");
    assert_int_equal(read_frame(fd, payload, sizeof(payload), &len), WIRE_WELCOME);
    assert_int_equal(wire_get_u32(payload + 4), 65536);
    assert_int_equal(wire_get_u32(payload + 8), 65544);
    wire_encode_header(frame, WIRE_APPEND, 65545);
    harness_raw_send(fd, frame, sizeof(frame));
    assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), NULL), EMSGSIZE);
    close(fd);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    text = harness_merge_and_cat(h, "largest", &text_len);
    assert_int_equal(text_len, 65536 + 1);
    assert_int_equal(strspn(text, "r"), 65536);
    free(text);
}

/* The same with the largest record the documentation allows, 256 MiB:
 * heavy (about 1 GiB of memory between the test and the daemon), so it runs
 * only when LOGSHARD_TEST_HEAVY is set. */
static void test_record_of_256_mib(void **state)
{
    struct harness *h = *state;
    char *done, *path = NULL;
    struct stat st;

    if (!getenv("LOGSHARD_TEST_HEAVY")) {
        fprintf(stderr, "LOGSHARD_TEST_HEAVY is not set: not sending 256 MiB\n");
        skip();
    }
    harness_write_config(h, "[limits]\nmax_record_bytes = 256M\nmax_frame_bytes = 268435464\n"
                            "session_buffer_bytes = 268435464\nmemory_limit_bytes = 1G\n");
    harness_start(h, NULL);
    send_largest_record(h, 256u << 20);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 60000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    done = harness_path(h->spool, "done");
    {
        const char *verify[] = { harness_logctl(), "verify", "--spool", h->spool, NULL };
        int status = harness_run(verify, NULL, NULL, 120000);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    {
        DIR *d = opendir(done);
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.')
                path = harness_path(done, de->d_name);
        closedir(d);
    }
    assert_non_null(path);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > (off_t)(256u << 20));
    free(path);
    free(done);
}

/* The client library under valgrind: no invalid access, no leak. */
static void test_client_under_valgrind(void **state)
{
    struct harness *h = *state;
    char *in, *err;
    const char *argv[] = { "/usr/bin/valgrind", "--quiet", "--error-exitcode=99",
                           "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                           harness_logctl(), "send", "--socket", h->sock, "--producer",
                           "valgrind", NULL };
    FILE *f;
    pid_t pid;
    int st;

    if (access(argv[0], X_OK) != 0) {
        fprintf(stderr, "valgrind is not installed\n");
        skip();
    }
#ifdef __SANITIZE_ADDRESS__
    /* valgrind cannot run AddressSanitizer's binaries; the development
     * build runs this test. */
    fprintf(stderr, "sanitizer build: valgrind does not run ASan binaries\n");
    skip();
#endif
    in = harness_path(h->dir, "lines.txt");
    err = harness_path(h->dir, "valgrind.txt");
    f = fopen(in, "we");
    assert_non_null(f);
    for (int i = 0; i < 2000; i++)
        fprintf(f, "valgrind %d line of text\n", i);
    assert_int_equal(fclose(f), 0);
    harness_start(h, NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(in, O_RDONLY | O_CLOEXEC);
        int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || efd < 0 || dup2(fd, 0) < 0 || dup2(efd, 2) < 0 ||
            process_reset_signals() < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        size_t n;
        char *text = harness_slurp(err, &n);
        fail_msg("logctl send under valgrind: status %d\n%s", st, text);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    {
        size_t n;
        char *text = harness_merge_and_cat(h, "vg.lsm", &n);
        size_t lines = 0;
        for (char *p = text; *p; p++)
            lines += *p == '\n';
        assert_int_equal(lines, 2000);
        free(text);
    }
    free(in);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_max_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_max_producers_per_uid, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_stalled_clients, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_flood_beside_good_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_frames_over_memory_limit, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_hostile_names_and_symlink, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_allowed_uids, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_max_open_shards, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_out_of_descriptors, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_largest_record, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_record_of_256_mib, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_client_under_valgrind, harness_setup, harness_teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
