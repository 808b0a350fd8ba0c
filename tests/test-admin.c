/* Integration tests of the operator side: the admin socket and every logctl
 * subcommand against the real logshardd in a temporary directory, the
 * metrics file read by a real Prometheus parser, and merge's progress line
 * on a pseudo-terminal.
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
#include <grp.h>
#include <inttypes.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"
#include "shard_format.h"

#define NOBODY 65534

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- running logctl ---- */

struct run {
    int code; /* exit status, or -1 when killed */
    char *out;
    size_t out_len;
    char *err;
};

static void run_free(struct run *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

/* Runs logctl with the arguments given (NULL-terminated), capturing both
 * outputs. */
static struct run logctl_run(struct harness *h, ...)
{
    const char *argv[40];
    char *out_path = harness_path(h->dir, "logctl.out");
    char *err_path = harness_path(h->dir, "logctl.err");
    struct run r = { 0 };
    size_t n = 0, len;
    va_list ap;
    int status;

    argv[n++] = harness_logctl();
    va_start(ap, h);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 39;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    status = harness_run(argv, out_path, err_path, 60000);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = harness_slurp(out_path, &r.out_len);
    r.err = harness_slurp(err_path, &len);
    free(out_path);
    free(err_path);
    return r;
}

static void expect_code(const struct run *r, int code, const char *what)
{
    if (r->code != code)
        fail_msg("%s: exit %d, expected %d\nstdout: %s\nstderr: %s", what, r->code, code,
                 r->out, r->err);
}

static struct json_value *parse_json(const char *text, size_t len)
{
    struct json_value *v = NULL;
    const char *why = NULL;
    size_t off = 0;

    if (json_parse(text, len, &v, &why, &off) < 0)
        fail_msg("not JSON (%s at %zu): %.*s", why ? why : "?", off, (int)len, text);
    return v;
}

/* Splits JSON lines (NDJSON) into parsed values. */
static size_t parse_lines(const char *text, struct json_value **out, size_t max)
{
    size_t n = 0;

    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(n < max);
        out[n++] = parse_json(p, (size_t)(nl - p));
        p = nl + 1;
    }
    return n;
}

static void free_lines(struct json_value **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_value_free(v[i]);
}

static struct json_value *status_json(struct harness *h)
{
    struct run r = logctl_run(h, "status", "--json", "--admin-socket", h->admin_sock, NULL);
    struct json_value *v;

    expect_code(&r, 0, "logctl status --json");
    v = parse_json(r.out, r.out_len);
    run_free(&r);
    return v;
}

/* ---- producers, in this process ---- */

static logshard *producer_open(struct harness *h, const char *name)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = name };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    return ls;
}

static void producer_send(logshard *ls, const void *rec, size_t len)
{
    assert_int_equal(logshard_append(ls, rec, len), 0);
}

static void producer_sendf(logshard *ls, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void producer_sendf(logshard *ls, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    producer_send(ls, buf, (size_t)n);
}

static void producer_flush(logshard *ls)
{
    assert_int_equal(logshard_flush(ls, 20000), 0);
}

static void rotate(struct harness *h, const char *producer)
{
    struct run r = producer
                       ? logctl_run(h, "rotate", "--producer", producer, "--admin-socket",
                                    h->admin_sock, NULL)
                       : logctl_run(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "logctl rotate");
    run_free(&r);
}

/* Files in spool/sub whose names start with prefix. */
static size_t count_prefix(struct harness *h, const char *sub, const char *prefix)
{
    char *path = harness_path(h->spool, sub);
    DIR *d = opendir(path);
    struct dirent *de;
    size_t n = 0;

    free(path);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* The path of the one file in spool/sub starting with prefix. */
static char *find_file(struct harness *h, const char *sub, const char *prefix)
{
    char *path = harness_path(h->spool, sub);
    DIR *d = opendir(path);
    struct dirent *de;
    char *found = NULL;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            assert_null(found);
            found = harness_path(path, de->d_name);
        }
    closedir(d);
    free(path);
    assert_non_null(found);
    return found;
}

/* ---- fixtures ---- */

/* A child still running when a test fails (cat --follow) would keep the
 * test's output pipes open and the runner waiting; teardown ends it. */
static pid_t live_child = -1;

static int teardown(void **state)
{
    if (live_child > 0) {
        kill(live_child, SIGKILL);
        (void)waitpid(live_child, NULL, 0);
        live_child = -1;
    }
    return harness_teardown(state);
}

static void stop_daemon(struct harness *h)
{
    int status = harness_stop(h, SIGTERM, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- status ---- */

static bool no_producers(void *arg)
{
    struct json_value *st = status_json(arg);
    bool none = json_get_u64(st, "producers_connected", 99) == 0;

    json_value_free(st);
    return none;
}

static void test_status_figures_move(void **state)
{
    struct harness *h = *state;
    struct json_value *st;
    struct run r;
    logshard *ls;

    harness_start(h, NULL);
    st = status_json(h);
    assert_string_equal(json_get_str(st, "version", ""), "0.1.0");
    assert_string_equal(json_get_str(st, "fsync_policy", ""), "batch");
    {
        const char *io = json_get_str(st, "io_backend", "");
        const char *want = getenv("LOGSHARD_IO_BACKEND");
        if (want && strcmp(want, "threads") == 0)
            assert_string_equal(io, "threads");
        else
            assert_true(strcmp(io, "io_uring") == 0 || strcmp(io, "threads") == 0);
    }
    assert_string_equal(json_get_str(st, "spool", ""), h->spool);
    assert_true(json_get_u64(st, "producers_connected", 99) == 0);
    assert_true(json_get_u64(json_get(st, "records"), "received", 99) == 0);
    assert_true(json_get_u64(json_get(st, "fsync"), "count", 99) == 0);
    assert_int_equal(json_get(json_get(st, "fsync"), "p50_s")->type, JSON_NULL);
    assert_true(json_get_u64(json_get(st, "disk"), "done_files", 99) == 0);
    assert_true(json_get_u64(json_get(st, "disk"), "fs_size_bytes", 0) > 0);
    json_value_free(st);

    ls = producer_open(h, "mover");
    for (int i = 0; i < 10; i++)
        producer_sendf(ls, "record %02d", i); /* 9 bytes each */
    producer_flush(ls);

    st = status_json(h);
    assert_true(json_get_u64(st, "producers_connected", 0) == 1);
    assert_true(json_get_u64(st, "active_shards", 0) == 1);
    assert_true(json_get_u64(json_get(st, "records"), "received", 0) == 10);
    assert_true(json_get_u64(json_get(st, "records"), "acknowledged", 0) == 10);
    assert_true(json_get_u64(json_get(st, "bytes"), "received", 0) == 90);
    assert_true(json_get_double(json_get(st, "records"), "per_s_since_start", 0) > 0);
    assert_true(json_get_double(json_get(st, "records"), "per_s_10s", 0) > 0);
    /* batch: the flush waited for an fdatasync, which the histogram saw. */
    assert_true(json_get_u64(json_get(st, "fsync"), "count", 0) >= 1);
    assert_int_equal(json_get(json_get(st, "fsync"), "p50_s")->type, JSON_NUMBER);
    assert_true(json_get_u64(st, "acks_pending", 99) == 0);
    assert_true(json_get_u64(json_get(st, "disk"), "active_files", 0) == 1);
    assert_true(json_get_u64(json_get(st, "disk"), "active_bytes", 0) >= 90 + 10 * 16);
    json_value_free(st);

    logshard_close(ls);
    if (!harness_wait_for(no_producers, h, 10000))
        fail_msg("the closed producer is still counted");
    rotate(h, NULL); /* waits for the closed connection's shard to be sealed */
    st = status_json(h);
    assert_true(json_get_u64(st, "producers_connected", 99) == 0);
    assert_true(json_get_u64(st, "shards_sealed", 0) == 1);
    assert_true(json_get_u64(json_get(st, "disk"), "done_files", 0) == 1);
    json_value_free(st);

    /* The human form, and the ways to find the socket. */
    r = logctl_run(h, "status", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "logctl status");
    assert_non_null(strstr(r.out, "logshardd 0.1.0"));
    assert_non_null(strstr(r.out, "records in:"));
    assert_non_null(strstr(r.out, "10 in all"));
    assert_non_null(strstr(r.out, "fsync policy:   batch"));
    run_free(&r);
    assert_int_equal(setenv("LOGSHARD_ADMIN_SOCKET", h->admin_sock, 1), 0);
    r = logctl_run(h, "status", NULL);
    unsetenv("LOGSHARD_ADMIN_SOCKET");
    expect_code(&r, 0, "logctl status with $LOGSHARD_ADMIN_SOCKET");
    run_free(&r);
    {
        char *conf = harness_path(h->dir, "logctl.conf");
        FILE *f = fopen(conf, "we");
        assert_non_null(f);
        fprintf(f, "[daemon]\nadmin_socket = %s\n", h->admin_sock);
        assert_int_equal(fclose(f), 0);
        r = logctl_run(h, "status", "--config", conf, NULL);
        expect_code(&r, 0, "logctl status --config");
        run_free(&r);
        free(conf);
    }

    /* Exit statuses: no daemon there is 1, a bad option 2, --help 0. */
    r = logctl_run(h, "status", "--admin-socket", "/nonexistent/admin.sock", NULL);
    expect_code(&r, 1, "logctl status, no daemon");
    assert_non_null(strstr(r.err, "cannot reach logshardd"));
    run_free(&r);
    r = logctl_run(h, "status", "--bogus", NULL);
    expect_code(&r, 2, "logctl status --bogus");
    run_free(&r);
    r = logctl_run(h, "status", "--help", NULL);
    expect_code(&r, 0, "logctl status --help");
    run_free(&r);
    stop_daemon(h);
}

/* ---- ls and rotate ---- */

static void test_ls_and_rotate(void **state)
{
    struct harness *h = *state;
    struct json_value *lines[16];
    logshard *a, *b;
    size_t n;
    struct run r;
    char pid[32];

    snprintf(pid, sizeof(pid), "%d", (int)getpid());
    harness_start(h, NULL);
    a = producer_open(h, "alpha");
    b = producer_open(h, "beta");
    for (int i = 0; i < 3; i++)
        producer_sendf(a, "alpha %d", i);
    for (int i = 0; i < 2; i++)
        producer_sendf(b, "beta %d", i);
    producer_flush(a);
    producer_flush(b);

    r = logctl_run(h, "ls", "--active", "--json", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "ls --active --json");
    n = parse_lines(r.out, lines, 16);
    assert_int_equal(n, 2);
    assert_string_equal(json_get_str(lines[0], "producer", ""), "alpha");
    assert_string_equal(json_get_str(lines[1], "producer", ""), "beta");
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(json_get_str(lines[i], "state", ""), "active");
        assert_true(json_get_u64(lines[i], "uid", 99) == (uint64_t)getuid());
        assert_true(json_get_u64(lines[i], "pid", 0) == (uint64_t)getpid());
        assert_int_equal(strlen(json_get_str(lines[i], "shard", "")), 16);
        assert_int_equal(json_get(lines[i], "first")->type, JSON_STRING);
    }
    assert_true(json_get_u64(lines[0], "records", 0) == 3);
    assert_true(json_get_u64(lines[1], "records", 0) == 2);
    free_lines(lines, n);
    run_free(&r);

    /* rotate returns once the shard is in done/: no waiting here. */
    r = logctl_run(h, "rotate", "--producer", "alpha", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "rotate --producer alpha");
    assert_non_null(strstr(r.out, "sealed done/alpha."));
    assert_non_null(strstr(r.out, ": 3 records"));
    run_free(&r);
    assert_int_equal(count_prefix(h, "done", "alpha."), 1);
    assert_int_equal(count_prefix(h, "active", "alpha."), 0);
    assert_int_equal(count_prefix(h, "active", "beta."), 1);

    r = logctl_run(h, "ls", "--json", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "ls --json");
    n = parse_lines(r.out, lines, 16);
    assert_int_equal(n, 2);
    assert_string_equal(json_get_str(lines[0], "producer", ""), "alpha");
    assert_string_equal(json_get_str(lines[0], "state", ""), "done");
    assert_true(json_get_u64(lines[0], "records", 0) == 3);
    assert_true(json_get_u64(lines[0], "pid", 0) == (uint64_t)getpid());
    assert_string_equal(json_get_str(lines[1], "state", ""), "active");
    free_lines(lines, n);
    run_free(&r);

    /* The next record of alpha opens a new shard. */
    producer_sendf(a, "alpha %d", 3);
    producer_flush(a);
    r = logctl_run(h, "ls", "--producer", "alpha", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "ls --producer alpha");
    assert_non_null(strstr(r.out, "PRODUCER"));
    assert_non_null(strstr(r.out, "done"));
    assert_non_null(strstr(r.out, "active"));
    assert_non_null(strstr(r.out, pid));
    assert_null(strstr(r.out, "beta"));
    run_free(&r);

    r = logctl_run(h, "rotate", "--json", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "rotate --json");
    {
        struct json_value *v = parse_json(r.out, r.out_len);
        assert_int_equal(json_get(v, "sealed")->n, 2);
        assert_int_equal(json_get(v, "failed")->n, 0);
        json_value_free(v);
    }
    run_free(&r);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 3);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);

    r = logctl_run(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 0, "rotate with nothing to do");
    assert_non_null(strstr(r.out, "nothing to rotate"));
    run_free(&r);

    /* Sealed shards are listed without the daemon. */
    logshard_close(a);
    logshard_close(b);
    stop_daemon(h);
    r = logctl_run(h, "ls", "--done", "--bytes", "--spool", h->spool, NULL);
    expect_code(&r, 0, "ls --done without a daemon");
    assert_non_null(strstr(r.out, "alpha"));
    assert_non_null(strstr(r.out, "beta"));
    run_free(&r);
    r = logctl_run(h, "ls", "--admin-socket", h->admin_sock, NULL);
    expect_code(&r, 1, "ls without a daemon");
    run_free(&r);
    r = logctl_run(h, "rotate", "--producer", "bad/name", NULL);
    expect_code(&r, 2, "rotate with a bad name");
    run_free(&r);
}

/* ---- verify ---- */

static void test_verify(void **state)
{
    struct harness *h = *state;
    char *file, *copy;
    struct run r;
    logshard *ls;
    char want[128];
    uint64_t header_len = 46 + strlen("checked");
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

    r = logctl_run(h, "verify", file, NULL);
    expect_code(&r, 0, "verify a good file");
    assert_non_null(strstr(r.out, "OK"));
    assert_non_null(strstr(r.out, "5 records"));
    run_free(&r);

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
    r = logctl_run(h, "verify", file, copy, NULL);
    expect_code(&r, 1, "verify a damaged file");
    assert_non_null(strstr(r.out, "CORRUPT"));
    assert_non_null(strstr(r.out, "4 records readable in 1 shard, 22 bytes skipped in 1 place"));
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "TORN"));
    assert_non_null(strstr(r.out, "file ends inside a record"));
    run_free(&r);

    r = logctl_run(h, "verify", "--json", file, NULL);
    expect_code(&r, 1, "verify --json");
    {
        struct json_value *v = parse_json(r.out, r.out_len);
        assert_false(json_get_bool(v, "ok", true));
        assert_string_equal(json_get_str(v, "verdict", ""), "corrupt");
        assert_true(json_get_u64(v, "offset", 0) == rec2);
        assert_true(json_get_u64(v, "records", 99) == 4); /* the damaged one skipped */
        assert_true(json_get_u64(v, "skipped_bytes", 0) == 22);
        json_value_free(v);
    }
    run_free(&r);

    r = logctl_run(h, "verify", "--spool", h->spool, NULL);
    expect_code(&r, 1, "verify --spool");
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "1 file checked, 1 bad"));
    run_free(&r);

    /* cat and ls see it too, and say so; only the damaged record is lost. */
    r = logctl_run(h, "cat", file, NULL);
    expect_code(&r, 1, "cat of a damaged file");
    assert_string_equal(r.out, "rec-00\nrec-01\nrec-03\nrec-04\n");
    assert_non_null(strstr(r.err, want));
    run_free(&r);

    r = logctl_run(h, "verify", "/nonexistent/file", NULL);
    expect_code(&r, 1, "verify a missing file");
    run_free(&r);
    r = logctl_run(h, "verify", NULL);
    expect_code(&r, 2, "verify without arguments");
    run_free(&r);
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
    struct run r = logctl_run(h, "cat", "--json", "--spool", h->spool, a1, a2, a3, a4, NULL);
    size_t n;

    expect_code(&r, 0, "cat --json");
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
    run_free(&r);
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
        struct run r = logctl_run(h, "cat", "--json", "--spool", h->spool, "--since", since,
                                  "--producer", "pp", "--producer", "qq", NULL);
        struct json_value *lines[16];
        expect_code(&r, 0, "cat two producers");
        n = parse_lines(r.out, lines, 16);
        assert_int_equal(n, 5);
        for (size_t i = 0; i < n; i++)
            assert_string_equal(json_get_str(lines[i], "payload", ""), b_and_q[i]);
        free_lines(lines, n);
        run_free(&r);
    }

    /* A payload that is not UTF-8 comes as base64, one that is comes as a
     * string, newline and quotes included. The shard is still active. */
    {
        struct run r = logctl_run(h, "cat", "--json", "--spool", h->spool, "--producer", "bin",
                                  NULL);
        struct json_value *lines[4];
        expect_code(&r, 0, "cat --json binary");
        n = parse_lines(r.out, lines, 4);
        assert_int_equal(n, 2);
        assert_null(json_get(lines[0], "payload"));
        assert_string_equal(json_get_str(lines[0], "payload_base64", ""), "//4gcmF3");
        assert_null(json_get(lines[1], "payload_base64"));
        assert_string_equal(json_get_str(lines[1], "payload", ""), quoted);
        free_lines(lines, n);
        run_free(&r);
    }

    /* The plain and --meta forms, on files. */
    {
        struct run r = logctl_run(h, "cat", "--spool", h->spool, "--producer", "qq", NULL);
        expect_code(&r, 0, "cat plain");
        assert_string_equal(r.out, "Q 0\nQ 1\n");
        run_free(&r);
        r = logctl_run(h, "cat", "--meta", "--spool", h->spool, "--producer", "qq", NULL);
        expect_code(&r, 0, "cat --meta");
        assert_true(strncmp(r.out, "qq 20", 5) == 0);
        run_free(&r);
    }

    /* Usage errors. */
    {
        struct run r = logctl_run(h, "cat", "--since", "not a time", "--spool", h->spool, NULL);
        expect_code(&r, 2, "cat --since garbage");
        run_free(&r);
        r = logctl_run(h, "cat", "--since", "2026-12-02", "--until", "2026-12-01", "--spool",
                       h->spool, NULL);
        expect_code(&r, 2, "cat --since after --until");
        run_free(&r);
    }
    logshard_close(p);
    logshard_close(q);
    logshard_close(bin);
    stop_daemon(h);
}

/* ---- cat --follow ---- */

struct child {
    pid_t pid;
    int pidfd;
    int out; /* read end of its stdout */
    char *buf;
    size_t len;
};

static void child_start(struct child *c, const char *const *argv)
{
    int p[2];

    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        if (process_reset_signals() < 0 || dup2(p[1], 1) < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    live_child = c->pid;
    c->out = p[0];
    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    assert_true(c->pidfd >= 0);
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
    struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
    int status;

    assert_int_equal(kill(c->pid, sig), 0);
    if (poll(&p, 1, 10000) != 1) {
        kill(c->pid, SIGKILL);
        fail_msg("the child did not exit within 10 s of signal %d", sig);
    }
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    live_child = -1;
    while (child_read(c, 0))
        ;
    close(c->out);
    close(c->pidfd);
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

/* ---- access ---- */

/* In a child that became nobody: connects to the admin socket and asks for
 * the status. Exit 0: the daemon refused with EACCES; 10: connect failed
 * with EACCES; other values: something else happened. */
static int as_nobody(const char *path)
{
    pid_t pid = fork();
    int status;

    assert_true(pid >= 0);
    if (pid == 0) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        const char req[] = "{\"version\":1,\"command\":\"status\"}\n";
        char buf[4096];
        struct json_value *v = NULL;
        size_t len = 0;
        int fd;

        if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
            _exit(20);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        strcpy(sa.sun_path, path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            _exit(errno == EACCES ? 10 : 21);
        if (send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) < 0 && errno != EPIPE &&
            errno != ECONNRESET)
            _exit(22);
        for (;;) {
            struct pollfd p = { .fd = fd, .events = POLLIN };
            ssize_t n;

            if (poll(&p, 1, 10000) != 1)
                _exit(23);
            n = read(fd, buf + len, sizeof(buf) - 1 - len);
            if (n <= 0)
                break;
            len += (size_t)n;
        }
        if (len == 0 || buf[len - 1] != '\n')
            _exit(24);
        if (json_parse(buf, len - 1, &v, NULL, NULL) < 0)
            _exit(25);
        if (json_get_bool(v, "ok", true) || json_get_u64(json_get(v, "error"), "code", 0) != EACCES)
            _exit(26);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_refuses_other_uid(void **state)
{
    struct harness *h = *state;
    struct json_value *st;
    struct stat sb;

    if (geteuid() != 0) {
        fprintf(stderr, "not root: cannot run a child as another uid\n");
        skip();
    }
    /* nobody may traverse the directory, so only the socket's own mode and
     * the daemon's check stand in the way. */
    assert_int_equal(chmod(h->dir, 0711), 0);
    harness_start(h, NULL);
    assert_int_equal(stat(h->admin_sock, &sb), 0);
    assert_true(S_ISSOCK(sb.st_mode));
    assert_int_equal(sb.st_mode & 07777, 0600);

    /* The mode stops nobody at connect. */
    assert_int_equal(as_nobody(h->admin_sock), 10);
    /* With the mode loosened by mistake, the daemon's own check refuses. */
    assert_int_equal(chmod(h->admin_sock, 0666), 0);
    assert_int_equal(as_nobody(h->admin_sock), 0);

    st = status_json(h); /* root is still served */
    assert_true(json_get_u64(json_get(st, "errors"), "refused_admin", 0) == 1);
    json_value_free(st);
    stop_daemon(h);
    {
        size_t len;
        char *log = harness_slurp(h->log, &len);
        if (!strstr(log, "refused pid") || !strstr(log, "uid 65534"))
            fail_msg("daemon log: %s", log);
        free(log);
    }
}

/* ---- the admin protocol itself ---- */

static char *admin_exchange(int fd, const char *request, size_t replies)
{
    char *buf = calloc(1, 65536);
    size_t len = 0, got = 0;

    assert_non_null(buf);
    harness_raw_send(fd, request, strlen(request));
    while (got < replies) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        ssize_t n;

        assert_int_equal(poll(&p, 1, 10000), 1);
        n = read(fd, buf + len, 65535 - len);
        assert_true(n > 0);
        for (ssize_t i = 0; i < n; i++)
            got += buf[len + (size_t)i] == '\n';
        len += (size_t)n;
    }
    return buf;
}

static void test_admin_protocol(void **state)
{
    struct harness *h = *state;
    int fd;
    char *reply;
    struct json_value *lines[4];
    size_t n;

    harness_start(h, NULL);
    fd = harness_raw_connect(h->admin_sock);

    reply = admin_exchange(fd, "{\"version\":1,\"command\":\"fly\"}\n", 1);
    n = parse_lines(reply, lines, 4);
    assert_int_equal(n, 1);
    assert_false(json_get_bool(lines[0], "ok", true));
    assert_string_equal(json_get_str(json_get(lines[0], "error"), "name", ""), "EINVAL");
    free_lines(lines, n);
    free(reply);

    /* The same connection goes on; two requests at once get two replies,
     * in order. */
    reply = admin_exchange(fd,
                           "{\"version\":1,\"command\":\"ls\"}\n"
                           "{\"version\":1,\"command\":\"status\"}\n",
                           2);
    n = parse_lines(reply, lines, 4);
    assert_int_equal(n, 2);
    assert_string_equal(json_get_str(lines[0], "command", ""), "ls");
    assert_string_equal(json_get_str(lines[1], "command", ""), "status");
    assert_true(json_get_bool(lines[1], "ok", false));
    free_lines(lines, n);
    free(reply);

    reply = admin_exchange(fd, "{\"version\":2,\"command\":\"status\"}\n", 1);
    n = parse_lines(reply, lines, 4);
    assert_string_equal(json_get_str(json_get(lines[0], "error"), "name", ""),
                        "EPROTONOSUPPORT");
    free_lines(lines, n);
    free(reply);
    close(fd);

    fd = harness_raw_connect(h->admin_sock);
    reply = admin_exchange(fd, "status please\n", 1);
    n = parse_lines(reply, lines, 4);
    assert_string_equal(json_get_str(json_get(lines[0], "error"), "name", ""), "EBADMSG");
    free_lines(lines, n);
    free(reply);
    close(fd);
    stop_daemon(h);
}

/* ---- merge progress ---- */

static void make_shards(struct harness *h, int producers, int records)
{
    for (int p = 0; p < producers; p++) {
        char name[32];
        logshard *ls;

        snprintf(name, sizeof(name), "merged-%d", p);
        ls = producer_open(h, name);
        for (int i = 0; i < records; i++)
            producer_sendf(ls, "%s record %d", name, i);
        producer_flush(ls);
        logshard_close(ls);
    }
    rotate(h, NULL);
}

/* Runs logctl merge on a pseudo-terminal; returns what the terminal got. */
static char *merge_on_pty(struct harness *h, const char *output, bool knob)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    char *buf = calloc(1, 65536);
    size_t len = 0;
    int64_t deadline = now_ms() + 30000;
    int status;

    assert_true(pid >= 0);
    assert_non_null(buf);
    if (pid == 0) {
        const char *argv[] = { harness_logctl(), "merge", "--spool", h->spool, "--output",
                               output, NULL };
        if (process_reset_signals() < 0)
            _exit(127);
        if (knob)
            setenv("LOGCTL_PROGRESS_AFTER_MS", "0", 1);
        else
            unsetenv("LOGCTL_PROGRESS_AFTER_MS");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    for (;;) {
        struct pollfd p = { .fd = master, .events = POLLIN };
        ssize_t n;

        assert_true(now_ms() < deadline);
        if (poll(&p, 1, 1000) <= 0)
            continue;
        n = read(master, buf + len, 65535 - len);
        if (n <= 0)
            break; /* EIO: the child and its terminal are gone */
        len += (size_t)n;
    }
    close(master);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    return buf;
}

static void test_merge_progress(void **state)
{
    struct harness *h = *state;
    char *out1 = harness_path(h->dir, "m1.lsm");
    char *out2 = harness_path(h->dir, "m2.lsm");
    char *out3 = harness_path(h->dir, "m3.lsm");
    char *tty;
    struct run r;

    harness_start(h, NULL);
    make_shards(h, 3, 20);

    /* LOGCTL_PROGRESS_AFTER_MS=0 (a test knob) shows the line at once,
     * instead of after a second. */
    tty = merge_on_pty(h, out1, true);
    if (!strstr(tty, "\r\033[Kmerge: ") || !strstr(tty, "3/3 shards") || !strstr(tty, "ETA") ||
        !strstr(tty, "merged 3 shards"))
        fail_msg("terminal output: %s", tty);
    free(tty);

    /* A merge shorter than a second shows nothing but its summary. */
    tty = merge_on_pty(h, out2, false);
    if (strstr(tty, "ETA") || strstr(tty, "\033[K") || !strstr(tty, "merged 3 shards"))
        fail_msg("terminal output: %s", tty);
    free(tty);

    /* Not a terminal: the summary only, even with the knob. */
    assert_int_equal(setenv("LOGCTL_PROGRESS_AFTER_MS", "0", 1), 0);
    r = logctl_run(h, "merge", "--spool", h->spool, "--output", out3, NULL);
    unsetenv("LOGCTL_PROGRESS_AFTER_MS");
    expect_code(&r, 0, "merge on a pipe");
    assert_null(strchr(r.out, '\r'));
    assert_null(strstr(r.out, "ETA"));
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "merged 3 shards, 60 records"));
    run_free(&r);

    free(out1);
    free(out2);
    free(out3);
    stop_daemon(h);
}

static void test_merge_selection(void **state)
{
    struct harness *h = *state;
    char *out = harness_path(h->dir, "sel.lsm");
    char before[64];
    struct run r;
    logshard *ls;

    harness_start(h, NULL);
    make_shards(h, 2, 5);
    /* Everything so far was received before this instant; the next shard
     * of merged-0 is not. */
    {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(before, sizeof(before), "@%lld.%09ld", (long long)ts.tv_sec, ts.tv_nsec);
    }
    ls = producer_open(h, "merged-0");
    producer_sendf(ls, "late");
    producer_flush(ls);
    logshard_close(ls);
    rotate(h, NULL);

    r = logctl_run(h, "merge", "--spool", h->spool, "--output", out, "--producer", "merged-0",
                   "--before", before, "--delete", "--json", NULL);
    expect_code(&r, 0, "merge --producer --before --json");
    {
        struct json_value *v = parse_json(r.out, r.out_len);
        assert_true(json_get_bool(v, "ok", false));
        assert_string_equal(json_get_str(v, "output", ""), out);
        assert_true(json_get_u64(v, "shards", 0) == 1);
        assert_true(json_get_u64(v, "records", 0) == 5);
        assert_true(json_get_u64(v, "deleted", 0) == 1);
        assert_int_equal(json_get(v, "sources")->n, 1);
        assert_int_equal(json_get(v, "error")->type, JSON_NULL);
        json_value_free(v);
    }
    run_free(&r);
    /* What was left: merged-1's shard and the late one. */
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    assert_int_equal(count_prefix(h, "done", "merged-1."), 1);
    r = logctl_run(h, "cat", out, NULL);
    expect_code(&r, 0, "cat the selection");
    assert_null(strstr(r.out, "late"));
    assert_null(strstr(r.out, "merged-1"));
    run_free(&r);
    free(out);
    stop_daemon(h);
}

/* ---- metrics ---- */

struct metrics_wait {
    const char *path;
    const char *needle;
};

static bool metrics_has(void *arg)
{
    struct metrics_wait *w = arg;
    int fd = open(w->path, O_RDONLY | O_CLOEXEC);
    char buf[65536];
    ssize_t n;

    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    return strstr(buf, w->needle) != NULL;
}

/* A FIFO planted under the metrics file's temp name must not hold the
 * thread that writes it: the write fails with a line naming the file, and
 * the daemon still stops cleanly (a blocked pool thread would keep it from
 * exiting). */
static void test_metrics_fifo_in_the_way(void **state)
{
    struct harness *h = *state;
    char *dir = harness_path(h->dir, "metrics");
    char *file = harness_path(dir, "logshard.prom");
    char *conf, *fifo;

    assert_int_equal(mkdir(dir, 0755), 0);
    assert_true(asprintf(&conf, "[daemon]\nmetrics_file = %s\nmetrics_interval_s = 1\n", file) >
                0);
    harness_write_config(h, conf);
    harness_start(h, NULL);
    assert_true(asprintf(&fifo, "%s/.logshard.prom.%ld.tmp", dir, (long)h->daemon) > 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    if (!harness_wait_log(h, "a file that is not a regular file is in the way", 15000))
        fail_msg("no log line about the FIFO at %s", fifo);
    assert_true(harness_log_has(h, fifo));
    stop_daemon(h);
    free(fifo);
    free(conf);
    free(file);
    free(dir);
}

static bool valid_name(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return n > 0;
}

/* A strict reading of the text exposition format, for what promtool may not
 * be there to check: HELP and TYPE before every family's samples, valid
 * names, label syntax, numeric values, counters named _total, and
 * histograms whose buckets grow, end at +Inf and agree with _count. */
static void check_exposition(char *text)
{
    char family[128] = "", type[32] = "";
    bool helped = false;
    uint64_t last_bucket = 0, inf_bucket = UINT64_MAX;
    char *save = NULL;
    size_t samples = 0;

    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], *value, *end;
        size_t nl;

        if (strncmp(line, "# HELP ", 7) == 0) {
            char *sp = strchr(line + 7, ' ');
            assert_non_null(sp);
            assert_true(valid_name(line + 7, (size_t)(sp - line - 7)));
            snprintf(family, sizeof(family), "%.*s", (int)(sp - line - 7), line + 7);
            helped = true;
            type[0] = '\0';
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            size_t fl = strlen(family);
            assert_true(helped);
            assert_true(strncmp(line + 7, family, fl) == 0 && line[7 + fl] == ' ');
            snprintf(type, sizeof(type), "%s", line + 8 + fl);
            assert_true(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
                        strcmp(type, "histogram") == 0);
            if (strcmp(type, "counter") == 0)
                assert_true(fl > 6 && strcmp(family + fl - 6, "_total") == 0);
            last_bucket = 0;
            inf_bucket = UINT64_MAX;
            continue;
        }
        assert_true(line[0] != '#');
        assert_true(type[0] != '\0');
        nl = strcspn(line, "{ ");
        assert_true(valid_name(line, nl));
        snprintf(name, sizeof(name), "%.*s", (int)nl, line);
        if (strcmp(type, "histogram") == 0) {
            size_t fl = strlen(family);
            assert_true(strncmp(name, family, fl) == 0);
            assert_true(strcmp(name + fl, "_bucket") == 0 || strcmp(name + fl, "_sum") == 0 ||
                        strcmp(name + fl, "_count") == 0);
        } else {
            assert_string_equal(name, family);
        }
        value = line + nl;
        if (*value == '{') {
            char *close = strchr(value, '}');
            assert_non_null(close);
            /* label="value"(,label="value")* */
            for (char *p = value + 1; p < close;) {
                size_t ln = strcspn(p, "=");
                assert_true(valid_name(p, ln));
                p += ln;
                assert_true(p[0] == '=' && p[1] == '"');
                p += 2;
                while (*p != '"') {
                    assert_true(*p != '\0' && *p != '\n');
                    p += *p == '\\' ? 2 : 1;
                }
                p++;
                assert_true(*p == ',' || *p == '}');
                if (*p == ',')
                    p++;
            }
            if (strstr(name, "_bucket")) {
                const char *le = strstr(value, "le=\"");
                uint64_t v;
                assert_non_null(le);
                v = strtoull(close + 2, NULL, 10);
                assert_true(v >= last_bucket);
                last_bucket = v;
                if (strncmp(le + 4, "+Inf\"", 5) == 0)
                    inf_bucket = v;
            }
            value = close + 1;
        }
        assert_true(*value == ' ');
        (void)strtod(value + 1, &end);
        assert_true(end != value + 1 && *end == '\0');
        if (strstr(name, "_count") && strcmp(type, "histogram") == 0)
            assert_true(inf_bucket == strtoull(value + 1, NULL, 10));
        samples++;
    }
    assert_true(samples > 20);
}

static void test_metrics_file(void **state)
{
    struct harness *h = *state;
    char *dir = harness_path(h->dir, "metrics");
    char *file = harness_path(dir, "logshard.prom");
    char *conf;
    struct metrics_wait w = { .path = file, .needle = "logshard_records_received_total 7\n" };
    char *text;
    size_t len;
    logshard *ls;

    assert_int_equal(mkdir(dir, 0755), 0);
    assert_true(asprintf(&conf, "[daemon]\nmetrics_file = %s\nmetrics_interval_s = 1\n", file) >
                0);
    harness_write_config(h, conf);
    harness_start(h, NULL);
    ls = producer_open(h, "measured");
    for (int i = 0; i < 7; i++)
        producer_sendf(ls, "m %d", i);
    producer_flush(ls);
    if (!harness_wait_for(metrics_has, &w, 15000))
        fail_msg("%s never showed 7 records received", file);
    logshard_close(ls);

    text = harness_slurp(file, &len);
    assert_non_null(strstr(text, "# TYPE logshard_fsync_duration_seconds histogram\n"));
    assert_non_null(strstr(text, "logshard_fsync_duration_seconds_bucket{le=\"+Inf\"}"));
    assert_non_null(strstr(text, "logshard_producers_connected "));
    assert_non_null(strstr(text, "logshard_bytes_received_total "));
    assert_non_null(strstr(text, "logshard_errors_total{kind=\"protocol\"} 0\n"));
    assert_non_null(strstr(text, "logshard_spool_bytes{dir=\"active\"}"));
    check_exposition(text);
    free(text);

    /* The real parser, when the prometheus package is installed. */
    if (access("/usr/bin/promtool", X_OK) == 0) {
        char *cmd, *out_path = harness_path(h->dir, "promtool.out");
        const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
        size_t n;
        char *out;
        int status;

        assert_true(asprintf(&cmd, "/usr/bin/promtool check metrics < '%s' 2>&1", file) > 0);
        argv[2] = cmd;
        status = harness_run(argv, out_path, NULL, 60000);
        out = harness_slurp(out_path, &n);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != 0)
            fail_msg("promtool check metrics: status %d: %s", status, out);
        free(out);
        free(out_path);
        free(cmd);
    } else {
        fprintf(stderr, "promtool not installed (Debian package prometheus): only the strict "
                        "parser of this test checked the file\n");
    }

    /* Written by rename: once the daemon is gone (it finishes a write in
     * progress before it exits), no temp file stays next to it. */
    stop_daemon(h);
    {
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t files = 0;
        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                files++;
        closedir(d);
        assert_int_equal(files, 1);
    }
    free(conf);
    free(dir);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status_figures_move, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_ls_and_rotate, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_cat_filters, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_follow, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_other_uid, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_protocol, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_progress, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_selection, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_file, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_fifo_in_the_way, harness_setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
