/* The daemon as systemd sees it: the sd_notify messages on a NOTIFY_SOCKET
 * the test binds itself (READY, STATUS, WATCHDOG, RELOADING, STOPPING),
 * socket activation through the real systemd-socket-activate, and reloads
 * on SIGHUP with good and broken configuration files. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"

static int teardown(void **state)
{
    unsetenv("WATCHDOG_USEC");
    unsetenv("LOGSHARD_FAULTS");
    return harness_teardown(state);
}

static int connect_and_send(const struct harness *h, const char *name, int *ret_policy)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = name };
    logshard *ls = NULL;
    int r = logshard_connect(&ls, &opts);

    if (r < 0)
        return r;
    if (ret_policy)
        *ret_policy = logshard_fsync_policy(ls);
    r = logshard_append(ls, name, strlen(name));
    if (r == 0)
        r = logshard_flush(ls, 10000);
    logshard_close(ls);
    return r;
}

/* The sequence systemd relies on: READY=1 once the socket accepts, STATUS=
 * lines that follow what happens, WATCHDOG=1 pings at half WATCHDOG_USEC,
 * RELOADING=1 with MONOTONIC_USEC then READY=1 on SIGHUP, STOPPING=1 on
 * SIGTERM. */
static void test_notify_sequence(void **state)
{
    struct harness *h = *state;
    size_t at, ready;

    setenv("WATCHDOG_USEC", "200000", 1);
    harness_start(h, NULL);
    ready = harness_notify_wait(h, 0, "READY=1", 1000);
    assert_true(ready > 0);
    /* READY=1 came with a STATUS describing the daemon. */
    assert_non_null(strstr(h->notify_log, "STATUS=0 producers"));
    /* Ready means accepting: a producer gets through at once. */
    assert_int_equal(connect_and_send(h, "notified", NULL), 0);

    /* A producer came and went: a fresh STATUS follows within moments. */
    at = harness_notify_wait(h, ready, "STATUS=", 3000);
    assert_true(at > 0);
    assert_non_null(strstr(h->notify_log + ready, "records/s"));
    assert_non_null(strstr(h->notify_log + ready, "fsync batch"));

    /* Watchdog pings every 100 ms: several arrive within a second. */
    at = harness_notify_wait(h, at, "WATCHDOG=1", 2000);
    assert_true(at > 0);
    at = harness_notify_wait(h, at, "WATCHDOG=1", 2000);
    assert_true(at > 0);

    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    at = harness_notify_wait(h, at, "RELOADING=1", 5000);
    assert_true(at > 0);
    {
        /* The reloading message carries the monotonic time of the request. */
        const char *msg = h->notify_log;
        const char *rl = strstr(msg + (at > 200 ? at - 200 : 0), "RELOADING=1");
        assert_non_null(rl);
        assert_non_null(strstr(rl, "MONOTONIC_USEC="));
    }
    at = harness_notify_wait(h, at, "READY=1", 5000);
    assert_true(at > 0);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    harness_notify_drain(h);
    assert_non_null(strstr(h->notify_log + at, "STOPPING=1"));
}

#ifdef LOGSHARD_FAULT_INJECTION
/* A write path that hangs must let the watchdog fire: once a write is stuck,
 * no WATCHDOG=1 follows, although the loop itself keeps turning. */
static void test_watchdog_stops_when_writes_hang(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "stuck" };
    logshard *ls = NULL;
    size_t at, stuck;

    setenv("WATCHDOG_USEC", "200000", 1);
    setenv("LOGSHARD_FAULTS", "stall_writes", 1);
    harness_start(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    at = harness_notify_wait(h, 0, "WATCHDOG=1", 2000);
    assert_true(at > 0); /* idle: pings */

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "stuck", 5), 0);
    assert_int_equal(logshard_flush(ls, 300), -ETIMEDOUT);
    /* Whatever was in flight when the write hung may still be answered by
     * one ping; after that, silence for many periods. */
    harness_notify_drain(h);
    stuck = h->notify_len;
    at = harness_notify_wait(h, stuck, "WATCHDOG=1", 350);
    if (at)
        stuck = at;
    assert_int_equal(harness_notify_wait(h, stuck, "WATCHDOG=1", 1000), 0);
    /* A hung daemon is what the watchdog is for; here the test ends it. */
    assert_true(WIFSIGNALED(harness_stop(h, SIGKILL, 10000)));
    logshard_close(ls); /* the connection is gone: close does not wait */
}
#endif

/* With fsync = none in the file, SIGHUP after switching it to always: new
 * connections get always. A broken file on the next SIGHUP is refused, with
 * the file and line in the log, and the daemon keeps always. */
static void test_reload(void **state)
{
    struct harness *h = *state;
    size_t at, len;
    char *log;
    char *expect;
    int policy = -1;

    harness_write_config(h, "[sync]\nfsync = none\n");
    harness_start(h, NULL);
    assert_int_equal(connect_and_send(h, "before", &policy), 0);
    assert_int_equal(policy, LOGSHARD_FSYNC_NONE);

    harness_write_config(h, "[sync]\nfsync = always\n[daemon]\nsocket_mode = 0600\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    at = harness_notify_wait(h, 0, "RELOADING=1", 5000);
    assert_true(at > 0);
    at = harness_notify_wait(h, at, "READY=1", 5000);
    assert_true(at > 0);
    assert_int_equal(connect_and_send(h, "after", &policy), 0);
    assert_int_equal(policy, LOGSHARD_FSYNC_ALWAYS);

    harness_write_config(h, "[sync]\nfsync = none\n\nbogus line\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    at = harness_notify_wait(h, at, "RELOADING=1", 5000);
    assert_true(at > 0);
    at = harness_notify_wait(h, at, "READY=1", 5000);
    assert_true(at > 0);
    assert_int_equal(connect_and_send(h, "broken", &policy), 0);
    assert_int_equal(policy, LOGSHARD_FSYNC_ALWAYS);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    log = harness_slurp(h->log, &len);
    /* The socket's mode cannot change while running; the log says so by
     * name. */
    assert_non_null(strstr(log, "[daemon] socket_mode cannot change while running"));
    assert_true(asprintf(&expect, "reload refused, the running settings stay: %s:4:", h->config) >
                0);
    if (!strstr(log, expect))
        fail_msg("log lacks '%s':\n%s", expect, log);
    free(expect);
    free(log);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 3);
}

static const char *socket_activate_path(void)
{
    static const char *const candidates[] = { "/usr/bin/systemd-socket-activate",
                                              "/bin/systemd-socket-activate", NULL };
    for (size_t i = 0; candidates[i]; i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

static bool socket_exists(void *arg)
{
    struct stat st;
    return stat(arg, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* The socket at path arg is listening: bound is not enough, since a connect
 * between bind(2) and listen(2) is refused. /proc/net/unix says so without
 * connecting (which would wake the activator early): flag __SO_ACCEPTCON
 * (0x10000) is set on a listening socket. */
static bool socket_listening(void *arg)
{
    const char *path = arg;
    FILE *f = fopen("/proc/net/unix", "re");
    char line[4096];
    bool found = false;

    if (!f)
        return false;
    while (!found && fgets(line, sizeof(line), f)) {
        unsigned long flags;
        char name[4096];

        if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %4095s", &flags, name) == 2 &&
            strcmp(name, path) == 0 && (flags & 0x10000ul))
            found = true;
    }
    fclose(f);
    return found;
}

/* The real systemd-socket-activate binds the socket and starts the daemon
 * on the first connection with the socket passed (LISTEN_FDS); producers
 * get through it. */
static void test_socket_activation(void **state)
{
    struct harness *h = *state;
    const char *sa = socket_activate_path();
    char *listen_arg;
    size_t len;
    char *log;

    if (!sa) {
        fprintf(stderr, "systemd-socket-activate is not installed\n");
        skip();
    }
    assert_true(asprintf(&listen_arg, "--listen=%s", h->sock) > 0);
    {
        const char *argv[] = { sa, listen_arg, "-E", "NOTIFY_SOCKET", harness_logshardd(),
                               "--config", h->config, "--spool", h->spool, NULL };
        harness_spawn(h, argv);
    }
    assert_true(harness_wait_for(socket_listening, h->sock, 10000));
    /* This connection starts the daemon. */
    assert_int_equal(connect_and_send(h, "activated", NULL), 0);
    assert_true(harness_notify_wait(h, 0, "READY=1", 5000) > 0);
    assert_int_equal(connect_and_send(h, "second", NULL), 0);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    log = harness_slurp(h->log, &len);
    if (!strstr(log, "(socket from systemd)"))
        fail_msg("daemon log: %s", log);
    free(log);
    free(listen_arg);
}

/* A datagram socket passed by systemd is refused with a message that says
 * what was wrong, and the daemon exits instead of serving nobody. */
static void test_socket_activation_wrong_type(void **state)
{
    struct harness *h = *state;
    const char *sa = socket_activate_path();
    char *listen_arg;
    size_t len;
    char *log;
    int status;

    if (!sa) {
        fprintf(stderr, "systemd-socket-activate is not installed\n");
        skip();
    }
    assert_true(asprintf(&listen_arg, "--listen=%s", h->sock) > 0);
    {
        const char *argv[] = { sa, "--datagram", listen_arg, harness_logshardd(), "--config",
                               h->config, "--spool", h->spool, NULL };
        harness_spawn(h, argv);
    }
    assert_true(harness_wait_for(socket_exists, h->sock, 10000));
    {
        /* A datagram wakes the activator, which starts the daemon. */
        struct sockaddr_un addr = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        strcpy(addr.sun_path, h->sock);
        assert_int_equal(sendto(fd, "x", 1, 0, (struct sockaddr *)&addr, sizeof(addr)), 1);
        close(fd);
    }
    status = harness_wait_exit(h, 10000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    log = harness_slurp(h->log, &len);
    if (!strstr(log, "none is a listening Unix stream socket for producers"))
        fail_msg("daemon log: %s", log);
    free(log);
    free(listen_arg);
}

/* A supervisor that stops reading its notify socket (its queue holds a
 * few datagrams) must not stop the daemon: the harness does not read it
 * while 40 producers come and go, each bringing a STATUS soon after, and the
 * daemon still answers the admin socket and stops at SIGTERM. Before the
 * daemon's own non-blocking notify it hung in sendmsg() after about ten. */
static void test_notify_reader_stalls(void **state)
{
    struct harness *h = *state;

    harness_start(h, NULL);
    for (int i = 0; i < 40; i++) {
        struct timespec pause = { .tv_nsec = 120 * 1000000L }; /* a STATUS each */

        assert_int_equal(connect_and_send(h, "stall", NULL), 0);
        nanosleep(&pause, NULL);
    }
    {
        struct harness_run r = harness_run_logctl(h, "status", "--admin-socket", h->admin_sock,
                                                  NULL);
        harness_expect_code(&r, 0, "logctl status while nobody reads the notify socket");
        harness_run_free(&r);
    }
    harness_assert_running(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_notify_sequence, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_notify_reader_stalls, harness_setup, teardown),
#ifdef LOGSHARD_FAULT_INJECTION
        cmocka_unit_test_setup_teardown(test_watchdog_stops_when_writes_hang, harness_setup, teardown),
#endif
        cmocka_unit_test_setup_teardown(test_reload, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation_wrong_type, harness_setup, teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
