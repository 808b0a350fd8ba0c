/* Integration tests of the logctl subcommands that read the spool, against
 * the real logshardd in a temporary directory: verify, cat with its
 * filters, and cat --follow.
 *
 * Records are sent from this process through the real liblogshard, so their
 * shards carry this process's uid and pid. Time filters are tested on
 * records whose receive times are read back from the shards themselves, with
 * a rotate between two batches so the boundary between them is known: no
 * test depends on how fast anything runs. Every wait has a deadline and
 * waits for an event (a reply, a line on a pipe, a process exit). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"
#include "shard_format.h"

#include "admin-fixture.h"

/* ---- verify ---- */

static void test_verify(void **state)
{
    struct harness *h = *state;
    char *file, *copy;
    struct harness_run r;
    logshard *ls;
    char want[128];
    uint64_t header_len = shard_header_size_v(SHARD_FORMAT_VERSION_STREAM, strlen("checked"));
    uint64_t rec2 = header_len + 2 * (16 + 6);
    int fd;
    unsigned char c;

    harness_start(h, NULL);
    ls = producer_open(h, "checked");
    for (int i = 0; i < 5; i++)
        producer_sendf(ls, "rec-%02d", i); /* 6 bytes each */
    producer_flush(ls);
    rotate(h, "checked");
    logshard_close(ls);
    file = find_file(h, "done", "checked.");

    r = harness_run_logctl(h, "verify", file, NULL);
    harness_expect_code(&r, 0, "verify a good file");
    assert_non_null(strstr(r.out, "OK"));
    assert_non_null(strstr(r.out, "5 records"));
    harness_run_free(&r);

    /* A torn copy: the file ends inside record 4. */
    copy = harness_path(h->dir, "torn.shard");
    {
        size_t len;
        char *bytes = harness_slurp(file, &len);
        fd = open(copy, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        size_t records_end = header_len + 5 * (16 + 6);

        /* Sealed: the trailer follows the records and pads to a block. */
        assert_true(len >= records_end + SHARD_TRAILER_MIN);
        assert_int_equal(len % 512, 0);
        assert_int_equal(write(fd, bytes, records_end - 3), (ssize_t)(records_end - 3));
        close(fd);
        free(bytes);
    }

    /* Flip one bit in the payload of record 2. */
    fd = open(file, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &c, 1, (off_t)(rec2 + 16 + 1)), 1);
    c ^= 0x10;
    assert_int_equal(pwrite(fd, &c, 1, (off_t)(rec2 + 16 + 1)), 1);
    close(fd);

    snprintf(want, sizeof(want), "record CRC mismatch at offset %" PRIu64 ": skipped that record",
             rec2);
    r = harness_run_logctl(h, "verify", file, copy, NULL);
    harness_expect_code(&r, 1, "verify a damaged file");
    assert_non_null(strstr(r.out, "CORRUPT"));
    assert_non_null(strstr(r.out, "4 records readable in 1 shard, 22 bytes skipped in 1 place"));
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "TORN"));
    assert_non_null(strstr(r.out, "file ends inside a record"));
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "--json", file, NULL);
    harness_expect_code(&r, 1, "verify --json");
    {
        /* The file's line, then one for the stream its shard names. */
        struct json_value *lines[4];
        size_t n = parse_lines(r.out, lines, 4);
        struct json_value *v = lines[0];

        assert_true(n >= 1);
        for (size_t i = 1; i < n; i++)
            json_value_free(lines[i]);
        assert_false(json_get_bool(v, "ok", true));
        assert_string_equal(json_get_str(v, "verdict", ""), "corrupt");
        assert_true(json_get_u64(v, "offset", 0) == rec2);
        assert_true(json_get_u64(v, "records", 99) == 4); /* the damaged one skipped */
        assert_true(json_get_u64(v, "skipped_bytes", 0) == 22);
        json_value_free(v);
    }
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
    harness_expect_code(&r, 1, "verify --spool");
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "1 file checked, 1 bad"));
    harness_run_free(&r);

    /* cat and ls see it too, and say so; only the damaged record is lost. */
    r = harness_run_logctl(h, "cat", file, NULL);
    harness_expect_code(&r, 1, "cat of a damaged file");
    assert_string_equal(r.out, "rec-00\nrec-01\nrec-03\nrec-04\n");
    assert_non_null(strstr(r.err, want));
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "/nonexistent/file", NULL);
    harness_expect_code(&r, 1, "verify a missing file");
    harness_run_free(&r);
    r = harness_run_logctl(h, "verify", NULL);
    harness_expect_code(&r, 2, "verify without arguments");
    harness_run_free(&r);
    free(file);
    free(copy);
    stop_daemon(h);
}

/* ---- cat ---- */

struct rec {
    char producer[80];
    char payload[80];
    char time[64];
    uint64_t ns;
};

static uint64_t rfc3339_ns(const char *s)
{
    struct tm tm = { 0 };
    unsigned long long frac = 0;
    int y, mo, d, hh, mm, ss;

    assert_int_equal(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d.%9lluZ", &y, &mo, &d, &hh, &mm, &ss,
                            &frac),
                     7);
    assert_int_equal(strlen(s), 30); /* nine digits of fraction */
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = hh;
    tm.tm_min = mm;
    tm.tm_sec = ss;
    return (uint64_t)timegm(&tm) * 1000000000ull + frac;
}

/* Runs logctl cat --json with the arguments given and returns the records. */
static size_t cat_json(struct harness *h, struct rec *out, size_t max, const char *a1,
                       const char *a2, const char *a3, const char *a4)
{
    struct json_value *lines[64];
    struct harness_run r = harness_run_logctl(h, "cat", "--json", "--spool", h->spool, a1, a2, a3, a4, NULL);
    size_t n;

    harness_expect_code(&r, 0, "cat --json");
    n = parse_lines(r.out, lines, 64);
    assert_true(n <= max);
    for (size_t i = 0; i < n; i++) {
        const char *payload = json_get_str(lines[i], "payload", NULL);

        snprintf(out[i].producer, sizeof(out[i].producer), "%s",
                 json_get_str(lines[i], "producer", "?"));
        snprintf(out[i].payload, sizeof(out[i].payload), "%s",
                 payload ? payload : json_get_str(lines[i], "payload_base64", "?"));
        snprintf(out[i].time, sizeof(out[i].time), "%s", json_get_str(lines[i], "time", "?"));
        out[i].ns = rfc3339_ns(out[i].time);
        assert_true(json_get_u64(lines[i], "uid", 99) == (uint64_t)getuid());
        assert_true(json_get_u64(lines[i], "pid", 0) == (uint64_t)getpid());
        assert_int_equal(strlen(json_get_str(lines[i], "shard", "")), 16);
    }
    free_lines(lines, n);
    harness_run_free(&r);
    return n;
}

static void expect_payloads(const struct rec *recs, size_t n, const char *const *want,
                            size_t n_want)
{
    if (n != n_want) {
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  got %s %s\n", recs[i].producer, recs[i].payload);
        fail_msg("%zu records, expected %zu", n, n_want);
    }
    for (size_t i = 0; i < n; i++)
        assert_string_equal(recs[i].payload, want[i]);
}

/* The filters skip sealed shards unread: one whose newest record is before
 * --since, one of another producer. The proof: a record of shard A is
 * damaged (its trailer intact), and cat reports that damage only when it
 * reads A. */
static void test_cat_skips_shards(void **state)
{
    static const char *const batch_b[] = { "B 0", "B 1", "B 2" };
    struct harness *h = *state;
    struct rec recs[32];
    char since[64], *done = harness_path(h->spool, "done"), *first = NULL;
    struct dirent **names = NULL;
    uint64_t a_last;
    logshard *p;
    size_t n;
    int k, fd;

    harness_start(h, NULL);
    p = producer_open(h, "pp");
    for (int i = 0; i < 3; i++)
        producer_sendf(p, "A %d", i);
    producer_flush(p);
    rotate(h, NULL);
    for (int i = 0; i < 3; i++)
        producer_sendf(p, "B %d", i);
    producer_flush(p);
    rotate(h, NULL);
    n = cat_json(h, recs, 32, "--producer", "pp", NULL, NULL);
    assert_int_equal(n, 6);
    a_last = recs[2].ns;
    snprintf(since, sizeof(since), "@%" PRIu64 ".%09" PRIu64, (a_last + 1) / 1000000000u,
             (a_last + 1) % 1000000000u);

    /* Shard ids grow with time: the first name is A's. Its first record's
     * payload ("A 0") is changed to "X 0", which its CRC refuses. */
    k = scandir(done, &names, NULL, alphasort);
    for (int i = 0; i < k; i++) {
        if (!first && strncmp(names[i]->d_name, "pp.", 3) == 0)
            first = harness_path(done, names[i]->d_name);
        free(names[i]);
    }
    free(names);
    assert_non_null(first);
    {
        size_t len;
        char *bytes = harness_slurp(first, &len), *at = memmem(bytes, len, "A 0", 3);

        assert_non_null(at);
        fd = open(first, O_WRONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, "X", 1, at - bytes), 1);
        close(fd);
        free(bytes);
    }

    /* Read whole, A's damage is reported. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
        harness_expect_code(&r, 1, "cat of a spool with a damaged record");
        harness_run_free(&r);
    }
    /* Past A's newest record, A is not read: no damage, only B. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, "--since", since,
                                                  NULL);
        harness_expect_code(&r, 0, "cat --since past the damaged shard");
        assert_true(r.err == NULL || r.err[0] == '\0');
        harness_run_free(&r);
    }
    n = cat_json(h, recs, 32, "--since", since, NULL, NULL);
    expect_payloads(recs, n, batch_b, 3);
    /* Another producer's shards are not read either. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, "--producer",
                                                  "nobody", NULL);
        harness_expect_code(&r, 0, "cat --producer of none");
        assert_int_equal(r.out_len, 0);
        harness_run_free(&r);
    }
    logshard_close(p);
    free(first);
    free(done);
}

static void test_cat_filters(void **state)
{
    static const char *const batch_a[] = { "A 0", "A 1", "A 2" };
    static const char *const batch_b[] = { "B 0", "B 1", "B 2" };
    static const char *const b_and_q[] = { "B 0", "B 1", "B 2", "Q 0", "Q 1" };
    static const char quoted[] = "line\nwith \"quotes\" \xc3\xa9";
    struct harness *h = *state;
    struct rec recs[32];
    char since[64], until[64];
    uint64_t a_last, b_first, b_last;
    logshard *p, *q, *bin;
    size_t n;

    harness_start(h, NULL);
    p = producer_open(h, "pp");
    q = producer_open(h, "qq");
    for (int i = 0; i < 3; i++)
        producer_sendf(p, "A %d", i);
    producer_flush(p);
    rotate(h, NULL);
    /* Batch B is sent after the rotate returned: every B time is later
     * than every A time, and Q's later still. */
    for (int i = 0; i < 3; i++)
        producer_sendf(p, "B %d", i);
    producer_flush(p);
    rotate(h, NULL);
    for (int i = 0; i < 2; i++)
        producer_sendf(q, "Q %d", i);
    producer_flush(q);
    bin = producer_open(h, "bin");
    producer_send(bin, "\xff\xfe raw", 6);
    producer_send(bin, quoted, sizeof(quoted) - 1);
    producer_flush(bin);

    /* Everything of pp, in order (A is sealed, B too). */
    n = cat_json(h, recs, 32, "--producer", "pp", NULL, NULL);
    assert_int_equal(n, 6);
    a_last = recs[2].ns;
    b_first = recs[3].ns;
    b_last = recs[5].ns;
    assert_true(a_last < b_first);

    snprintf(since, sizeof(since), "@%" PRIu64 ".%09" PRIu64, (a_last + 1) / 1000000000u,
             (a_last + 1) % 1000000000u);
    snprintf(until, sizeof(until), "@%" PRIu64 ".%09" PRIu64, a_last / 1000000000u,
             a_last % 1000000000u);
    n = cat_json(h, recs, 32, "--producer", "pp", "--since", since);
    expect_payloads(recs, n, batch_b, 3);
    n = cat_json(h, recs, 32, "--producer", "pp", "--until", until);
    expect_payloads(recs, n, batch_a, 3);
    n = cat_json(h, recs, 32, "--until", until, NULL, NULL);
    expect_payloads(recs, n, batch_a, 3);
    /* Both bounds, inclusive, in RFC 3339 form. */
    {
        char s1[64], s2[64];
        assert_int_equal(rfc3339_format(b_first, 9, s1, sizeof(s1)), 0);
        assert_int_equal(rfc3339_format(b_last, 9, s2, sizeof(s2)), 0);
        n = cat_json(h, recs, 32, "--since", s1, "--until", s2);
        expect_payloads(recs, n, batch_b, 3);
    }
    /* Two producers; the binary one is not asked for. */
    n = cat_json(h, recs, 32, "--since", since, "--producer", "pp");
    expect_payloads(recs, n, batch_b, 3);
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--json", "--spool", h->spool, "--since", since,
                                  "--producer", "pp", "--producer", "qq", NULL);
        struct json_value *lines[16];
        harness_expect_code(&r, 0, "cat two producers");
        n = parse_lines(r.out, lines, 16);
        assert_int_equal(n, 5);
        for (size_t i = 0; i < n; i++)
            assert_string_equal(json_get_str(lines[i], "payload", ""), b_and_q[i]);
        free_lines(lines, n);
        harness_run_free(&r);
    }

    /* A payload that is not UTF-8 comes as base64, one that is comes as a
     * string, newline and quotes included. The shard is still active. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--json", "--spool", h->spool, "--producer", "bin",
                                  NULL);
        struct json_value *lines[4];
        harness_expect_code(&r, 0, "cat --json binary");
        n = parse_lines(r.out, lines, 4);
        assert_int_equal(n, 2);
        assert_null(json_get(lines[0], "payload"));
        assert_string_equal(json_get_str(lines[0], "payload_base64", ""), "//4gcmF3");
        assert_null(json_get(lines[1], "payload_base64"));
        assert_string_equal(json_get_str(lines[1], "payload", ""), quoted);
        free_lines(lines, n);
        harness_run_free(&r);
    }

    /* The plain and --meta forms, on files. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, "--producer", "qq", NULL);
        harness_expect_code(&r, 0, "cat plain");
        assert_string_equal(r.out, "Q 0\nQ 1\n");
        harness_run_free(&r);
        r = harness_run_logctl(h, "cat", "--meta", "--spool", h->spool, "--producer", "qq", NULL);
        harness_expect_code(&r, 0, "cat --meta");
        assert_true(strncmp(r.out, "qq 20", 5) == 0);
        harness_run_free(&r);
    }

    /* Usage errors. */
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--since", "not a time", "--spool", h->spool, NULL);
        harness_expect_code(&r, 2, "cat --since garbage");
        harness_run_free(&r);
        r = harness_run_logctl(h, "cat", "--since", "2026-12-02", "--until", "2026-12-01", "--spool",
                       h->spool, NULL);
        harness_expect_code(&r, 2, "cat --since after --until");
        harness_run_free(&r);
    }
    logshard_close(p);
    logshard_close(q);
    logshard_close(bin);
    stop_daemon(h);
}

/* ---- cat --follow ---- */

struct child {
    struct harness_child proc;
    int out; /* read end of its stdout */
    char *buf;
    size_t len;
};

static void child_start(struct child *c, const char *const *argv)
{
    int p[2];

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    c->proc = harness_child_start_fds(argv, p[1], -1);
    close(p[1]);
    live_child = c->proc.pid;
    c->out = p[0];
    c->buf = NULL;
    c->len = 0;
}

/* Reads what the child printed, waiting up to timeout_ms for something
 * more; returns whether anything came. */
static bool child_read(struct child *c, int timeout_ms)
{
    struct pollfd p = { .fd = c->out, .events = POLLIN };
    char tmp[4096];
    ssize_t n;

    if (poll(&p, 1, timeout_ms) <= 0)
        return false;
    n = read(c->out, tmp, sizeof(tmp));
    if (n <= 0)
        return false;
    c->buf = realloc(c->buf, c->len + (size_t)n + 1);
    assert_non_null(c->buf);
    memcpy(c->buf + c->len, tmp, (size_t)n);
    c->len += (size_t)n;
    c->buf[c->len] = '\0';
    return true;
}

/* Reads until needle appears in the output, within timeout_ms. */
static void child_expect(struct child *c, const char *needle, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;

    while (!c->buf || !strstr(c->buf, needle)) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            fail_msg("'%s' did not appear within %d ms; got:\n%s", needle, timeout_ms,
                     c->buf ? c->buf : "");
        (void)child_read(c, (int)left);
    }
}

static int child_stop(struct child *c, int sig)
{
    int status;

    /* Reaped by harness_child_wait even when it fails the test: nothing
     * left for teardown to end. */
    live_child = -1;
    status = harness_child_wait(&c->proc, sig, 10000, "logctl cat --follow");
    while (child_read(c, 0))
        ;
    close(c->out);
    return status;
}

static void test_follow(void **state)
{
    struct harness *h = *state;
    const char *argv[] = { harness_logctl(), "cat", "--follow", "--spool", h->spool,
                           "--producer", "tailed", NULL };
    struct child c;
    logshard *ls, *other;
    int first = -1, next = 0, status;
    char last[32];

    harness_start(h, NULL);
    ls = producer_open(h, "tailed");
    other = producer_open(h, "other");
    producer_sendf(ls, "before");
    producer_flush(ls);

    child_start(&c, argv);
    /* The child sets up its watch at some point after it starts; append
     * until the first record shows, then everything after it must follow,
     * in order and with no gap. */
    for (int i = 0; first < 0; i++) {
        assert_true(i < 200);
        producer_sendf(ls, "after %d", i);
        producer_flush(ls);
        next = i + 1;
        if (child_read(&c, 50) && strstr(c.buf, "after ")) {
            const char *at = strstr(c.buf, "after ");
            first = atoi(at + 6);
        }
    }
    for (int i = 0; i < 3; i++, next++)
        producer_sendf(ls, "after %d", next);
    producer_flush(ls);
    producer_sendf(other, "not me");
    producer_flush(other);
    /* A rotate: the rest goes to a new shard, which is followed too. */
    rotate(h, "tailed");
    for (int i = 0; i < 3; i++, next++)
        producer_sendf(ls, "after %d", next);
    producer_flush(ls);
    snprintf(last, sizeof(last), "after %d\n", next - 1);
    child_expect(&c, last, 10000);

    status = child_stop(&c, SIGINT);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_null(strstr(c.buf, "before"));
    assert_null(strstr(c.buf, "not me"));
    {
        char *save = NULL;
        int want = first;
        for (char *line = strtok_r(c.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char expect[32];
            snprintf(expect, sizeof(expect), "after %d", want++);
            assert_string_equal(line, expect);
        }
        assert_int_equal(want, next);
    }
    free(c.buf);
    logshard_close(ls);
    logshard_close(other);
    stop_daemon(h);
}

/* cat --follow of many producers, started from a shell whose soft
 * descriptor limit is small (1024 on most systems, 64 here): it holds a
 * descriptor per active shard, takes its hard limit, and follows every
 * producer. */
static void test_follow_many(void **state)
{
    enum { N = 200 };
    struct harness *h = *state;
    const char *argv[] = { "/bin/sh", "-c", "ulimit -Sn 64 && exec \"$0\" cat --follow --spool \"$1\"",
                           harness_logctl(), h->spool, NULL };
    logshard *ls[N];
    bool seen[N] = { false };
    unsigned n_seen = 0;
    struct child c;
    int status;

    harness_start(h, NULL);
    for (int i = 0; i < N; i++) {
        char name[32];

        snprintf(name, sizeof(name), "many-%d", i);
        ls[i] = producer_open(h, name);
        producer_sendf(ls[i], "before");
        producer_flush(ls[i]);
    }
    child_start(&c, argv);
    /* The child sets up its watches at some point after it starts: every
     * producer appends round after round until each has been seen. */
    for (int round = 0; n_seen < N; round++) {
        if (round >= 100)
            fail_msg("cat --follow showed %u of %d producers after 100 rounds", n_seen, N);
        for (int i = 0; i < N; i++) {
            if (seen[i])
                continue;
            producer_sendf(ls[i], "round %d of many-%d", round, i);
            producer_flush(ls[i]);
        }
        while (child_read(&c, 100))
            ;
        for (int i = 0; i < N; i++) {
            char needle[48];

            snprintf(needle, sizeof(needle), " of many-%d\n", i);
            if (!seen[i] && c.buf && strstr(c.buf, needle)) {
                seen[i] = true;
                n_seen++;
            }
        }
    }
    status = child_stop(&c, SIGINT);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_null(strstr(c.buf, "before"));
    free(c.buf);
    for (int i = 0; i < N; i++)
        logshard_close(ls[i]);
    stop_daemon(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_verify, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_cat_filters, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_cat_skips_shards, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow_many, harness_setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
