/* The syslog datagram socket itself, with the real logshardd: a stale
 * socket file replaced, mode 0666, kept across a reload and gone after
 * the exit; a socket another process still reads refused; and the socket
 * passed by socket activation (configured, unconfigured, and a path that
 * does not match). What arrives through it is test-syslog-datagram.c's. */
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
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "syslog-fixture.h"

/* The socket from the file's [syslog] datagram_socket: a stale socket
 * file is replaced, the socket is 0666, survives a reload that names
 * another path, and is removed at exit; the shards are sealed by the
 * drain. */
static void test_socket_life(void **state)
{
    struct harness *h = *state;
    char *path = syslog_dgram_path(h);
    char *producer = syslog_producer_of("life");
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    struct syslog_recs r;
    char config[512];
    int fd;

    /* A socket file nobody reads any more, as a killed daemon leaves. */
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);

    snprintf(config, sizeof(config), "[syslog]\ndatagram_socket = %s\n", path);
    harness_write_config(h, config);
    harness_start(h, NULL);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0666);
    syslog_dgram_send_text(h, "<13>life: before the reload");

    snprintf(config, sizeof(config), "[syslog]\ndatagram_socket = %s/other.sock\n", h->dir);
    harness_write_config(h, config);
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    if (!harness_wait_log(h, "reloaded the settings", 10000))
        fail_msg("no reload");
    assert_true(harness_log_has(h, "[syslog] datagram_socket cannot change while running"));
    syslog_dgram_send_text(h, "<13>life: after the reload");
    syslog_stop_clean(h);
    assert_int_equal(access(path, F_OK), -1);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 2);
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>life: before the reload", 27));
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>life: after the reload", 26));
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    syslog_recs_free(&r);
    free(producer);
    free(path);
}

/* The sockets a unit with ListenStream= and ListenDatagram= passes: a
 * listening stream socket at the producer path, and a datagram socket at
 * the syslog path with PassCredentials=yes. */
static void make_unit_sockets(struct harness *h, int *ret_stream, int *ret_dgram)
{
    char *path = syslog_dgram_path(h);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    strcpy(sa.sun_path, h->sock);
    *ret_stream = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(*ret_stream >= 0);
    assert_int_equal(bind(*ret_stream, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(*ret_stream, 16), 0);
    strcpy(sa.sun_path, path);
    *ret_dgram = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(*ret_dgram >= 0);
    /* As PassCredentials=yes in the socket unit: without it, a datagram
     * queued before the daemon turns SO_PASSCRED on carries no sender
     * (the kernel then says pid 0, the overflow uid). */
    assert_int_equal(setsockopt(*ret_dgram, SOL_SOCKET, SO_PASSCRED, &(int){ 1 }, sizeof(int)),
                     0);
    assert_int_equal(bind(*ret_dgram, (struct sockaddr *)&sa, sizeof(sa)), 0);
    free(path);
}

/* Starts the daemon as systemd would, with the two sockets as fds 3 and
 * 4 (LISTEN_FDS=2) and h->config. */
static void spawn_activated(struct harness *h, int stream_fd, int dgram_fd)
{
    /* There before the daemon, so that waiting on it can begin at once. */
    int log = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    assert_true(log >= 0);
    close(log);
    h->daemon = fork();
    assert_true(h->daemon >= 0);
    if (h->daemon == 0) {
        char pid[16];

        log = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (log < 0 || dup2(log, 2) < 0 || dup2(stream_fd, 3) < 0 || dup2(dgram_fd, 4) < 0 ||
            process_reset_signals() < 0)
            _exit(127);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        setenv("LISTEN_PID", pid, 1);
        setenv("LISTEN_FDS", "2", 1);
        unsetenv("NOTIFY_SOCKET");
        execl(harness_logshardd(), harness_logshardd(), "--config", h->config, "--spool",
              h->spool, "--admin-socket", h->admin_sock, (char *)NULL);
        _exit(127);
    }
    h->daemon_pidfd = (int)syscall(SYS_pidfd_open, h->daemon, 0);
    assert_true(h->daemon_pidfd >= 0);
}

/* Socket activation: the daemon reads the datagrams queued before it
 * started and leaves the file to its owner at exit. With datagram_socket
 * at the socket's path (configured) or empty: a unit's datagram socket is
 * the input either way. */
static void socket_activation(struct harness *h, bool configured)
{
    char *path = syslog_dgram_path(h);
    char *producer = syslog_producer_of("early");
    char config[512], needle[600];
    struct syslog_recs r;
    int stream_fd, dgram_fd;

    make_unit_sockets(h, &stream_fd, &dgram_fd);
    /* Sent before the daemon runs: waiting in the socket's queue. */
    syslog_dgram_send_text(h, "<13>early: before the daemon");
    if (configured)
        snprintf(config, sizeof(config), "[syslog]\ndatagram_socket = %s\n", path);
    else
        config[0] = '\0';
    harness_write_config(h, config);
    spawn_activated(h, stream_fd, dgram_fd);
    close(stream_fd);
    snprintf(needle, sizeof(needle), "syslog datagrams on %s (socket from systemd)", path);
    if (!harness_wait_log(h, "(socket from systemd), admin socket", 20000) ||
        !harness_wait_log(h, needle, 20000))
        fail_msg("the daemon did not start on the passed sockets:\n%s",
                 harness_slurp(h->log, &(size_t){ 0 }));
    syslog_dgram_send_text(h, "<13>early: after the start");
    syslog_stop_clean(h);
    /* systemd's socket, not the daemon's: still there, still bound. */
    assert_int_equal(access(path, F_OK), 0);
    close(dgram_fd);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 2);
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>early: before the daemon", 28));
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>early: after the start", 26));
    syslog_recs_free(&r);
    free(producer);
    free(path);
}

static void test_socket_activation(void **state)
{
    socket_activation(*state, true);
}

/* As journald's forwarding socket unit passes it: nothing configured. */
static void test_socket_activation_unconfigured(void **state)
{
    socket_activation(*state, false);
}

/* A unit and a configuration that disagree on the path: the daemon says
 * so, naming both, and does not start. */
static void test_socket_activation_mismatch(void **state)
{
    struct harness *h = *state;
    char config[512], *path = syslog_dgram_path(h);
    int stream_fd, dgram_fd, status;

    make_unit_sockets(h, &stream_fd, &dgram_fd);
    snprintf(config, sizeof(config), "[syslog]\ndatagram_socket = %s/elsewhere.sock\n", h->dir);
    harness_write_config(h, config);
    spawn_activated(h, stream_fd, dgram_fd);
    close(stream_fd);
    close(dgram_fd);
    status = harness_wait_exit(h, 20000);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 1);
    assert_true(harness_log_has(h, "systemd passed a datagram socket at"));
    assert_true(harness_log_has(h, path));
    assert_true(harness_log_has(h, "elsewhere.sock"));
    free(path);
}

/* Another receiver's live socket at the path is not taken over. */
static void test_live_socket_refused(void **state)
{
    struct harness *h = *state;
    char *path = syslog_dgram_path(h);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    const char *extra[] = { "--syslog-socket", NULL, NULL };
    int fd, status;

    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    harness_write_config(h, "");
    extra[1] = path;
    harness_spawn_with(h, extra);
    status = harness_wait_exit(h, 20000);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 0);
    assert_true(harness_log_has(h, "another daemon is receiving there"));
    assert_true(harness_log_has(h, path));
    close(fd);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_socket_life, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation_unconfigured, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation_mismatch, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_live_socket_refused, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
