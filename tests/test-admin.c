/* Integration tests of the operator side: the admin socket against the
 * real logshardd in a temporary directory, logctl status, ls and rotate,
 * who may use the socket, and the admin protocol itself. The other
 * subcommands are in test-admin-read.c (verify, cat, cat --follow),
 * test-admin-merge.c (merge and its progress line on a pseudo-terminal)
 * and test-admin-metrics.c (the metrics file).
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

#include "admin-fixture.h"

#define NOBODY 65534


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
    struct harness_run r;
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
    r = harness_run_logctl(h, "status", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "logctl status");
    assert_non_null(strstr(r.out, "logshardd 0.1.0"));
    assert_non_null(strstr(r.out, "records in:"));
    assert_non_null(strstr(r.out, "10 in all"));
    assert_non_null(strstr(r.out, "fsync policy:   batch"));
    harness_run_free(&r);
    assert_int_equal(setenv("LOGSHARD_ADMIN_SOCKET", h->admin_sock, 1), 0);
    r = harness_run_logctl(h, "status", NULL);
    unsetenv("LOGSHARD_ADMIN_SOCKET");
    harness_expect_code(&r, 0, "logctl status with $LOGSHARD_ADMIN_SOCKET");
    harness_run_free(&r);
    {
        char *conf = harness_path(h->dir, "logctl.conf");
        FILE *f = fopen(conf, "we");
        assert_non_null(f);
        fprintf(f, "[daemon]\nadmin_socket = %s\n", h->admin_sock);
        assert_int_equal(fclose(f), 0);
        r = harness_run_logctl(h, "status", "--config", conf, NULL);
        harness_expect_code(&r, 0, "logctl status --config");
        harness_run_free(&r);
        free(conf);
    }

    /* Exit statuses: no daemon there is 1, a bad option 2, --help 0. */
    r = harness_run_logctl(h, "status", "--admin-socket", "/nonexistent/admin.sock", NULL);
    harness_expect_code(&r, 1, "logctl status, no daemon");
    assert_non_null(strstr(r.err, "cannot reach logshardd"));
    harness_run_free(&r);
    r = harness_run_logctl(h, "status", "--bogus", NULL);
    harness_expect_code(&r, 2, "logctl status --bogus");
    harness_run_free(&r);
    r = harness_run_logctl(h, "status", "--help", NULL);
    harness_expect_code(&r, 0, "logctl status --help");
    harness_run_free(&r);
    stop_daemon(h);
}

/* ---- ls and rotate ---- */

static void test_ls_and_rotate(void **state)
{
    struct harness *h = *state;
    struct json_value *lines[16];
    logshard *a, *b;
    size_t n;
    struct harness_run r;
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

    r = harness_run_logctl(h, "ls", "--active", "--json", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "ls --active --json");
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
    harness_run_free(&r);

    /* rotate returns once the shard is in done/: no waiting here. */
    r = harness_run_logctl(h, "rotate", "--producer", "alpha", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "rotate --producer alpha");
    assert_non_null(strstr(r.out, "sealed done/alpha."));
    assert_non_null(strstr(r.out, ": 3 records"));
    harness_run_free(&r);
    assert_int_equal(count_prefix(h, "done", "alpha."), 1);
    assert_int_equal(count_prefix(h, "active", "alpha."), 0);
    assert_int_equal(count_prefix(h, "active", "beta."), 1);

    r = harness_run_logctl(h, "ls", "--json", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "ls --json");
    n = parse_lines(r.out, lines, 16);
    assert_int_equal(n, 2);
    assert_string_equal(json_get_str(lines[0], "producer", ""), "alpha");
    assert_string_equal(json_get_str(lines[0], "state", ""), "done");
    assert_true(json_get_u64(lines[0], "records", 0) == 3);
    assert_true(json_get_u64(lines[0], "pid", 0) == (uint64_t)getpid());
    assert_string_equal(json_get_str(lines[1], "state", ""), "active");
    free_lines(lines, n);
    harness_run_free(&r);

    /* The next record of alpha opens a new shard. */
    producer_sendf(a, "alpha %d", 3);
    producer_flush(a);
    r = harness_run_logctl(h, "ls", "--producer", "alpha", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "ls --producer alpha");
    assert_non_null(strstr(r.out, "PRODUCER"));
    assert_non_null(strstr(r.out, "done"));
    assert_non_null(strstr(r.out, "active"));
    assert_non_null(strstr(r.out, pid));
    assert_null(strstr(r.out, "beta"));
    harness_run_free(&r);

    r = harness_run_logctl(h, "rotate", "--json", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "rotate --json");
    {
        struct json_value *v = parse_json(r.out, r.out_len);
        assert_int_equal(json_get(v, "sealed")->n, 2);
        assert_int_equal(json_get(v, "failed")->n, 0);
        json_value_free(v);
    }
    harness_run_free(&r);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 3);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);

    r = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "rotate with nothing to do");
    assert_non_null(strstr(r.out, "nothing to rotate"));
    harness_run_free(&r);

    /* Sealed shards are listed without the daemon. */
    logshard_close(a);
    logshard_close(b);
    stop_daemon(h);
    r = harness_run_logctl(h, "ls", "--done", "--bytes", "--spool", h->spool, NULL);
    harness_expect_code(&r, 0, "ls --done without a daemon");
    assert_non_null(strstr(r.out, "alpha"));
    assert_non_null(strstr(r.out, "beta"));
    harness_run_free(&r);
    r = harness_run_logctl(h, "ls", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 1, "ls without a daemon");
    harness_run_free(&r);
    r = harness_run_logctl(h, "rotate", "--producer", "bad/name", NULL);
    harness_expect_code(&r, 2, "rotate with a bad name");
    harness_run_free(&r);
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
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status_figures_move, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_ls_and_rotate, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_refuses_other_uid, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_protocol, harness_setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
