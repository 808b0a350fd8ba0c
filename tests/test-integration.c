/* Integration tests: the real logshardd in a temporary directory, driven by
 * producer processes that use the real liblogshard, and by raw sockets for
 * the malformed input a library would never send. What comes out is read
 * back through the real logctl merge and logctl cat. */
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "wire.h"

/* ---- producers ---- */

/* Runs in a child process: connects, appends count records, flushing every
 * flush_every (0: only at the end). Exit status 0 means every record was
 * acknowledged. */
static void producer_main(const char *sock, const char *name, uint64_t count, size_t size,
                          uint64_t flush_every)
{
    logshard_opts opts = { .socket_path = sock, .producer = name };
    logshard *ls = NULL;
    char buf[4096];
    int r = logshard_connect(&ls, &opts);

    if (r < 0) {
        fprintf(stderr, "producer %s: connect: %s\n", name, logshard_strerror(r));
        _exit(10);
    }
    for (uint64_t i = 0; i < count; i++) {
        size_t len = harness_make_record(buf, sizeof(buf), name, i, size);
        r = logshard_append(ls, buf, len);
        if (r < 0) {
            fprintf(stderr, "producer %s: append %" PRIu64 ": %s\n", name, i,
                    logshard_strerror(r));
            _exit(11);
        }
        if (flush_every && (i + 1) % flush_every == 0) {
            r = logshard_flush(ls, 60000);
            if (r < 0) {
                fprintf(stderr, "producer %s: flush: %s\n", name, logshard_strerror(r));
                _exit(12);
            }
        }
    }
    r = logshard_flush(ls, 60000);
    if (r < 0) {
        fprintf(stderr, "producer %s: final flush: %s\n", name, logshard_strerror(r));
        _exit(13);
    }
    logshard_close(ls);
    _exit(0);
}

static pid_t spawn_producer(const char *sock, const char *name, uint64_t count, size_t size,
                            uint64_t flush_every)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0)
        producer_main(sock, name, count, size, flush_every);
    return pid;
}

static void wait_producers(const pid_t *pids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int status;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
}

/* ---- reading the result back ---- */

/* Checks that text holds, for each of the n producers named prefix0..,
 * exactly counts[i] records numbered 0.. in order, and nothing else. */
static void check_records(char *text, const char *prefix, size_t n, const uint64_t *counts)
{
    uint64_t *next = calloc(n, sizeof(uint64_t));
    char *save = NULL;
    size_t plen = strlen(prefix);

    assert_non_null(next);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *end;
        unsigned long idx;
        unsigned long long seq;

        if (strncmp(line, prefix, plen) != 0)
            fail_msg("unexpected record: %.60s", line);
        idx = strtoul(line + plen, &end, 10);
        assert_true(*end == ' ');
        assert_true(idx < n);
        seq = strtoull(end + 1, &end, 10);
        if (seq != next[idx])
            fail_msg("producer %s%lu: record %llu where %" PRIu64 " was expected", prefix, idx,
                     seq, next[idx]);
        next[idx]++;
    }
    for (size_t i = 0; i < n; i++)
        if (next[i] != counts[i])
            fail_msg("producer %s%zu: %" PRIu64 " records came out, %" PRIu64 " were sent",
                     prefix, i, next[i], counts[i]);
    free(next);
}

/* ---- tests ---- */

/* Several producer processes at once: everything comes out exactly once, in
 * order per producer, and SIGTERM leaves nothing in active/. */
static void test_producers_exactly_once(void **state)
{
    struct harness *h = *state;
    enum { N = 6 };
    uint64_t counts[N];
    pid_t pids[N];
    char name[32];
    size_t len;
    char *text;

    harness_start(h, NULL);
    for (int i = 0; i < N; i++) {
        counts[i] = 20000 + (uint64_t)i * 1000;
        snprintf(name, sizeof(name), "prod%d", i);
        pids[i] = spawn_producer(h->sock, name, counts[i], 100, i % 2 ? 500 : 0);
    }
    wait_producers(pids, N);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "active", ""), 0);
    assert_int_equal(harness_count_files(h, "done", ".shard"), N);

    text = harness_merge_and_cat(h, "merged.lsm", &len);
    check_records(text, "prod", N, counts);
    free(text);
}

/* A number of the status, "name" in logctl status --json. */
static uint64_t status_figure(struct harness *h, const char *name)
{
    struct harness_run r = harness_run_logctl(h, "status", "--json", "--admin-socket",
                                              h->admin_sock, NULL);
    char key[64];
    const char *at;
    uint64_t n;

    harness_expect_code(&r, 0, "logctl status --json");
    snprintf(key, sizeof(key), "\"%s\":", name);
    at = strstr(r.out, key);
    if (!at)
        fail_msg("no %s in the status: %.300s", name, r.out);
    n = strtoull(at + strlen(key), NULL, 10);
    harness_run_free(&r);
    return n;
}

/* Producers under one of the daemon's fault injections: producer i sends
 * records + i * records_step records of size + i * size_step bytes,
 * flushing every flush_every records when i % flush_mod is not 0 (else
 * only at the end). */
struct fault_load {
    const char *fault;  /* LOGSHARD_FAULTS for the daemon */
    const char *prefix; /* producer names: prefix0, prefix1, ... */
    const char *figure; /* a status count the fault must have made grow */
    int producers;
    uint64_t records, records_step;
    size_t size, size_step;
    int flush_mod;
    uint64_t flush_every;
};

/* Runs the load; every record must arrive exactly once and in order, and
 * the status figure must be above 0. */
static void run_fault_load(struct harness *h, const struct fault_load *l)
{
    uint64_t counts[16];
    pid_t pids[16];
    char name[32];
    size_t len;
    char *text;

    assert_true(l->producers <= 16);
    setenv("LOGSHARD_FAULTS", l->fault, 1);
    harness_start(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    for (int i = 0; i < l->producers; i++) {
        counts[i] = l->records + (uint64_t)i * l->records_step;
        snprintf(name, sizeof(name), "%s%d", l->prefix, i);
        pids[i] = spawn_producer(h->sock, name, counts[i], l->size + (size_t)i * l->size_step,
                                 i % l->flush_mod ? l->flush_every : 0);
    }
    wait_producers(pids, l->producers);
    assert_true(status_figure(h, l->figure) > 0);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "active", ""), 0);

    text = harness_merge_and_cat(h, "merged.lsm", &len);
    check_records(text, l->prefix, l->producers, counts);
    free(text);
}

/* Connections take turns at reading once a loop tick's read budget is
 * spent (here made 16 KiB, so that they do all the time): every record
 * still arrives exactly once and in order, frames cut across turns and
 * producers flushing or not alike, and the status counts the turns. */
static void test_producers_take_turns(void **state)
{
    const struct fault_load load = {
        .fault = "small_read_turns", .prefix = "turn", .figure = "read_turns",
        .producers = 12, .records = 10000, .records_step = 997,
        .size = 60, .size_step = 40, .flush_mod = 3, .flush_every = 700,
    };

    run_fault_load(*state, &load);
}

/* Reading waits while as many shards wait for the disk (a write, or the
 * create of their file) as the daemon lets wait (here one, so that it
 * does all the time): every record still arrives exactly once and in
 * order, and the status counts the holds. */
static void test_reading_holds_for_writes(void **state)
{
    const struct fault_load load = {
        .fault = "one_waiting_shard", .prefix = "hold", .figure = "read_holds",
        .producers = 8, .records = 20000, .records_step = 1009,
        .size = 100, .size_step = 30, .flush_mod = 2, .flush_every = 500,
    };

    run_fault_load(*state, &load);
}

/* A long-lived producer rolls over to new shards at max_shard_bytes; the
 * merged result still has its records in order. */
static void test_rolls_over_on_size(void **state)
{
    struct harness *h = *state;
    uint64_t count = 3000;
    pid_t pid;
    size_t len;
    char *text;

    harness_write_config(h, "[shard]\nmax_shard_bytes = 16K\n");
    harness_start(h, NULL);
    pid = spawn_producer(h->sock, "roll0", count, 200, 7);
    wait_producers(&pid, 1);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    /* 3000 records of 216 bytes on disk, at most ~16 KiB per shard. */
    assert_true(harness_count_files(h, "done", ".shard") >= 3000 * 216 / (16 * 1024 + 216));
    assert_int_equal(harness_count_files(h, "active", ""), 0);
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    check_records(text, "roll", 1, &count);
    free(text);
}

static bool done_has_a_shard(void *arg)
{
    return harness_count_files(arg, "done", ".shard") > 0;
}

/* A shard older than max_shard_age, counted from its first record, is
 * sealed while its producer stays connected, and the producer carries on
 * in a new shard. */
static void test_rolls_over_on_age(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "aged" };
    logshard *ls = NULL;
    size_t len;
    char *text;
    struct timespec idle = { 1, 300 * 1000000L };
    int64_t first_ms;

    harness_write_config(h, "[shard]\nmax_shard_age = 1s\n");
    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    /* The shard made at the welcome is older than max_shard_age when the
     * first record comes: its age counts from that record all the same. */
    nanosleep(&idle, NULL);
    first_ms = harness_now_ms();
    assert_int_equal(logshard_append(ls, "aged0 0 first", 13), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    assert_true(harness_wait_for(done_has_a_shard, h, 10000));
    if (harness_now_ms() - first_ms < 950)
        fail_msg("sealed %" PRId64 " ms after its first record, before max_shard_age (1 s)",
                 harness_now_ms() - first_ms);
    assert_int_equal(logshard_append(ls, "aged0 1 second", 14), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    assert_string_equal(text, "aged0 0 first\naged0 1 second\n");
    free(text);
}

struct bad_case {
    const char *what;
    uint32_t code;
    const char *message_part;
};

/* Sends one kind of bad input on a raw connection while a well-behaved
 * producer is connected; checks the ERROR and that the good producer is
 * unaffected. */
static void run_bad_input(struct harness *h, int which, const struct bad_case *c)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = "good0" };
    logshard *good = NULL;
    unsigned char frame[256];
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    uint64_t acked = 0;
    uint32_t code;
    int fd;

    assert_int_equal(logshard_connect(&good, &opts), 0);
    assert_int_equal(logshard_append(good, "before", 6), 0);
    assert_int_equal(logshard_flush(good, 10000), 0);

    fd = harness_raw_connect(h->sock);
    switch (which) {
    case 0: /* producer name outside the rule */
        wire_encode_header(frame, WIRE_HELLO, 4 + 6);
        wire_put_u16(frame + 8, WIRE_PROTOCOL_V1);
        wire_put_u16(frame + 10, 0);
        memcpy(frame + 12, "../etc", 6);
        harness_raw_send(fd, frame, 8 + 4 + 6);
        break;
    case 1: /* a frame longer than the limit: 4 GiB declared */
        harness_raw_hello(fd, "huge");
        wire_put_u32(frame, 0xFFFFFFFFu);
        frame[4] = WIRE_APPEND;
        frame[5] = frame[6] = frame[7] = 0;
        harness_raw_send(fd, frame, 8);
        break;
    case 2: { /* a truncated frame, then end of stream */
        const char *recs[] = { "complete one" };
        size_t n;
        harness_raw_hello(fd, "trunc");
        n = harness_encode_append(frame, recs, 1);
        harness_raw_send(fd, frame, n);
        n = harness_encode_append(frame, recs, 1);
        harness_raw_send(fd, frame, n - 5);
        assert_int_equal(shutdown(fd, SHUT_WR), 0);
        break;
    }
    case 3: /* an unknown frame type */
        harness_raw_hello(fd, "unknown");
        wire_put_u32(frame, 0);
        frame[4] = 99;
        frame[5] = frame[6] = frame[7] = 0;
        harness_raw_send(fd, frame, 8);
        break;
    case 4: { /* APPEND before HELLO */
        const char *recs[] = { "too early" };
        harness_raw_send(fd, frame, harness_encode_append(frame, recs, 1));
        break;
    }
    }
    code = harness_raw_read_until_error(fd, msg, sizeof(msg), &acked);
    close(fd);
    if (code != c->code || !strstr(msg, c->message_part))
        fail_msg("%s: got ERROR %u '%s', expected %u with '%s'", c->what, code, msg, c->code,
                 c->message_part);
    if (which == 2)
        assert_int_equal(acked, 1); /* the complete record before the cut */

    /* The good producer never noticed. */
    assert_int_equal(logshard_append(good, "after", 5), 0);
    assert_int_equal(logshard_flush(good, 10000), 0);
    logshard_close(good);
}

static void test_bad_input(void **state)
{
    static const struct bad_case cases[] = {
        { "bad producer name", EINVAL, "producer name '../etc' (6 bytes) is refused" },
        { "frame over the limit", EMSGSIZE, "over max_frame_bytes" },
        { "truncated frame", EPROTO, "connection closed inside a frame" },
        { "unknown frame type", EBADMSG, "unknown frame type 99" },
        { "APPEND before HELLO", EPROTO, "APPEND before HELLO" },
    };
    struct harness *h = *state;
    size_t len;
    char *text;

    harness_start(h, NULL);
    for (int i = 0; i < 5; i++)
        run_bad_input(h, i, &cases[i]);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "active", ""), 0);

    /* Everything the good producer sent, and the truncated connection's
     * complete record, were sealed; nothing of the bad frames was. */
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    {
        size_t before = 0, after = 0, complete = 0, lines = 0;
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            lines++;
            before += strcmp(l, "before") == 0;
            after += strcmp(l, "after") == 0;
            complete += strcmp(l, "complete one") == 0;
        }
        assert_int_equal(before, 5);
        assert_int_equal(after, 5);
        assert_int_equal(complete, 1);
        assert_int_equal(lines, 11);
    }
    free(text);
}

/* An oversized record inside an otherwise valid frame is refused whole, with
 * an error naming the limit; records acknowledged before it stay. */
static void test_oversized_record(void **state)
{
    struct harness *h = *state;
    static unsigned char frame[8192];
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    char big[2000];
    const char *recs[2] = { "small", big };
    uint64_t acked = 0;
    size_t len;
    char *text;
    int fd;

    harness_write_config(h, "[limits]\nmax_record_bytes = 1000\n");
    harness_start(h, NULL);
    memset(big, 'b', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';

    fd = harness_raw_connect(h->sock);
    harness_raw_hello(fd, "oversize");
    harness_raw_send(fd, frame, harness_encode_append(frame, recs, 1));
    harness_raw_send(fd, frame, harness_encode_append(frame, recs, 2));
    assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), &acked), EMSGSIZE);
    assert_non_null(strstr(msg, "record 1 of the APPEND frame is 1999 bytes"));
    assert_non_null(strstr(msg, "max_record_bytes (1000)"));
    assert_int_equal(acked, 1);
    close(fd);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    assert_string_equal(text, "small\n");
    free(text);
}

/* SIGTERM with producers still connected: what they sent is sealed, they
 * see the connection close, and the daemon exits 0. */
static void test_sigterm_with_connected_producers(void **state)
{
    struct harness *h = *state;
    /* The daemon does not come back: a short reconnect window lets the
     * handle say so in a second rather than the default minute. */
    logshard_opts opts = { .socket_path = h->sock, .producer = "idle0",
                           .reconnect_timeout_ms = 1000 };
    logshard *ls = NULL;
    size_t len;
    char *text;

    harness_start(h, NULL);
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_int_equal(logshard_append(ls, "idle0 0", 7), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(logshard_append(ls, "idle0 1", 7), 0);
    assert_int_equal(logshard_flush(ls, 10000), -ENOTCONN);
    assert_int_equal(logshard_unacked(ls), 1);
    logshard_close(ls);
    assert_int_equal(harness_count_files(h, "active", ""), 0);
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    assert_string_equal(text, "idle0 0\n");
    free(text);
}

/* For harness_wait_for: spool/<sub> holds want files. */
struct file_count {
    const struct harness *h;
    const char *sub;
    size_t want;
};

static bool has_file_count(void *arg)
{
    const struct file_count *c = arg;

    return harness_count_files(c->h, c->sub, "") == c->want;
}

/* For harness_wait_for: a file in spool/active has bytes (a header). */
static bool active_file_written(void *arg)
{
    const struct harness *h = arg;
    char *path = harness_path(h->spool, "active");
    DIR *d = opendir(path);
    struct dirent *de;
    struct stat st;
    bool found = false;

    free(path);
    if (!d)
        return false;
    while (!found && (de = readdir(d)) != NULL)
        found = de->d_name[0] != '.' && fstatat(dirfd(d), de->d_name, &st, 0) == 0 &&
                st.st_size > 0;
    closedir(d);
    return found;
}

/* A connection's shard file is made when it is welcomed, before its first
 * record; one that sends nothing leaves nothing in done/, a rotate passes
 * it by, and one that sends a record afterwards has it in its shard. */
static void test_first_shard_before_records(void **state)
{
    struct harness *h = *state;
    logshard_opts quiet_opts = { .socket_path = h->sock, .producer = "quiet" };
    logshard_opts late_opts = { .socket_path = h->sock, .producer = "late" };
    logshard *quiet = NULL, *late = NULL;
    struct file_count two = { h, "active", 2 }, none = { h, "active", 0 };
    struct harness_run r;
    size_t len;
    char *text;

    harness_start(h, NULL);
    assert_int_equal(logshard_connect_sized(&quiet, &quiet_opts, sizeof(quiet_opts)), 0);
    assert_int_equal(logshard_connect_sized(&late, &late_opts, sizeof(late_opts)), 0);
    if (!harness_wait_for(has_file_count, &two, 10000))
        fail_msg("no shard file in active/ for each of two welcomed connections within 10 s "
                 "(%zu files)", harness_count_files(h, "active", ""));
    r = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "rotate with no record anywhere");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 0);
    assert_int_equal(logshard_append(late, "late 0", 6), 0);
    assert_int_equal(logshard_flush(late, 10000), 0);
    logshard_close(quiet);
    logshard_close(late);
    if (!harness_wait_for(has_file_count, &none, 10000))
        fail_msg("active/ still holds %zu files 10 s after both connections closed",
                 harness_count_files(h, "active", ""));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    /* Killed while a connection has sent nothing: the next start removes
     * its file rather than seal an empty shard. */
    assert_int_equal(logshard_connect_sized(&quiet, &quiet_opts, sizeof(quiet_opts)), 0);
    none.want = 1;
    if (!harness_wait_for(has_file_count, &none, 10000) ||
        !harness_wait_for(active_file_written, h, 10000))
        fail_msg("no shard file with its header in active/ for a welcomed connection within "
                 "10 s");
    (void)harness_stop(h, SIGKILL, 30000);
    logshard_close(quiet);
    harness_start(h, NULL);
    assert_int_equal(harness_count_files(h, "active", ""), 0);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    assert_true(harness_log_has(h, "a header and no record (its connection had sent none)"));
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_false(harness_log_has(h, "instead of sealing it"));
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    assert_string_equal(text, "late 0\n");
    free(text);
}

/* A bad config line stops the daemon with FILE:LINE and exit status 2. */
static void test_bad_config(void **state)
{
    struct harness *h = *state;
    char *err_path = harness_path(h->dir, "stderr.txt");
    char *expected;
    const char *argv[] = { harness_logshardd(), "--config", h->config, "--spool", h->spool,
                           "--socket", h->sock, NULL };
    size_t len;
    char *err;
    int status;

    harness_write_config(h, "# comment\n[limits]\nmax_record_bytes = 12Q\n");
    status = harness_run(argv, NULL, err_path, 10000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    err = harness_slurp(err_path, &len);
    assert_true(asprintf(&expected, "%s:3: max_record_bytes: '12Q' is not a size", h->config) >
                0);
    if (!strstr(err, expected))
        fail_msg("stderr was: %s", err);
    free(expected);
    free(err);
    free(err_path);
}

/* A second daemon on the same socket is refused; a stale socket file from a
 * dead one is replaced. */
static void test_socket_in_use_and_stale(void **state)
{
    struct harness *h = *state;
    char *err_path = harness_path(h->dir, "second.txt");
    char *spool2 = harness_path(h->dir, "spool2");
    const char *argv[] = { harness_logshardd(), "--config", h->config, "--spool", spool2,
                           "--socket", h->sock, NULL };
    size_t len;
    char *err;
    int status;

    harness_start(h, NULL);
    status = harness_run(argv, NULL, err_path, 10000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    err = harness_slurp(err_path, &len);
    assert_non_null(strstr(err, "another daemon is already listening"));
    free(err);

    /* Killed hard, the daemon leaves its socket file behind. */
    assert_true(WIFSIGNALED(harness_stop(h, SIGKILL, 10000)));
    assert_int_equal(access(h->sock, F_OK), 0);
    harness_start(h, NULL);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    free(err_path);
    free(spool2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_producers_exactly_once, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_producers_take_turns, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_reading_holds_for_writes, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_rolls_over_on_size, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_rolls_over_on_age, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_oversized_record, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_sigterm_with_connected_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_first_shard_before_records, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_bad_config, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_in_use_and_stale, harness_setup, harness_teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
