/* Hostile and greedy producers against the real daemon, at the door:
 * connection floods against max_producers, per-uid and access lists,
 * stalled clients (hello_timeout_ms, idle_timeout_ms), hostile names and a
 * planted symlink, the open-shard cap, running out of descriptors, and a
 * daemon started with the soft descriptor limit of a login shell.
 * Memory under a flood is test-limits-memory.c's, the largest records
 * test-limits-records.c's. */
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

#include "harness.h"
#include "logshard.h"
#include "wire.h"

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
        int type = harness_raw_read_frame(fds[i], payload, sizeof(payload), &len);

        if (type == WIRE_WELCOME) {
            const char *recs[] = { "works" };
            unsigned char frame[64];
            welcomed++;
            harness_raw_send(fds[i], frame, harness_encode_append(frame, recs, 1));
            assert_int_equal(harness_raw_read_frame(fds[i], payload, sizeof(payload), &len), WIRE_ACK);
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

/* Connections that have sent nothing have their first shard made ahead of
 * time only up to half of max_open_shards: three quiet connections leave
 * two of four shards for the producers that send records. */
static void test_quiet_connections_leave_shards(void **state)
{
    struct harness *h = *state;
    logshard_opts o = { .socket_path = h->sock, .producer = "quiet" };
    logshard *quiet[3] = { NULL }, *busy[2] = { NULL };

    harness_write_config(h, "[limits]\nmax_open_shards = 4\n");
    harness_start(h, NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(logshard_connect(&quiet[i], &o), 0);
    o.producer = "busy";
    for (int i = 0; i < 2; i++) {
        assert_int_equal(logshard_connect(&busy[i], &o), 0);
        assert_int_equal(logshard_append(busy[i], "b", 1), 0);
        assert_int_equal(logshard_flush(busy[i], 10000), 0);
    }
    for (int i = 0; i < 2; i++)
        logshard_close(busy[i]);
    for (int i = 0; i < 3; i++)
        logshard_close(quiet[i]);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
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
        assert_int_equal(harness_raw_read_frame(fds[i], payload, sizeof(payload), &l), WIRE_WELCOME);
        close(fds[i]);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    log = harness_slurp(h->log, &len);
    assert_non_null(strstr(log, "pausing accepting"));
    /* Told at start that its limit is short, with the keys to change. */
    assert_non_null(strstr(log, "the open-file limit (RLIMIT_NOFILE) is 40, below the"));
    assert_non_null(strstr(log, "max_producers (4096) and max_open_shards (4096)"));
    free(log);
}

/* Started from a shell whose soft descriptor limit is small (1024 on most
 * systems, 64 here) under a larger hard one, the daemon takes the hard
 * limit: many more producers than the soft limit has room for each get a
 * shard and an acknowledgement. */
static void test_soft_fd_limit(void **state)
{
    enum { N = 200, SOFT = 64 };
    struct harness *h = *state;
    logshard *ls[N];
    struct rlimit rl;
    char name[32], want[96];

    raise_nofile();
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    h->nofile_soft_limit = SOFT;
    harness_start(h, NULL);
    for (int i = 0; i < N; i++) {
        logshard_opts o = { .socket_path = h->sock, .producer = name };

        snprintf(name, sizeof(name), "soft-%d", i);
        ls[i] = NULL;
        assert_int_equal(logshard_connect(&ls[i], &o), 0);
        assert_int_equal(logshard_append(ls[i], name, strlen(name)), 0);
    }
    for (int i = 0; i < N; i++) {
        int r = logshard_flush(ls[i], 30000);

        if (r != 0)
            fail_msg("producer soft-%d: %s (%s)", i, strerror(-r), logshard_error_message(ls[i]));
    }
    for (int i = 0; i < N; i++)
        logshard_close(ls[i]);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), N);
    snprintf(want, sizeof(want), "open-file limit (RLIMIT_NOFILE) raised from %d to %" PRIu64,
             SOFT, rl.rlim_max == RLIM_INFINITY ? (uint64_t)1 << 20 : (uint64_t)rl.rlim_max);
    assert_true(harness_log_has(h, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_max_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_max_producers_per_uid, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_stalled_clients, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_hostile_names_and_symlink, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_allowed_uids, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_max_open_shards, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_quiet_connections_leave_shards, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_out_of_descriptors, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_soft_fd_limit, harness_setup, harness_teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
