/* logshard-bench: the logshardd the bench starts for a run.
 *
 * The daemon runs as systemd would run it, with its own NOTIFY_SOCKET (a
 * datagram socket the bench binds in its temp directory): the run starts
 * when the daemon says READY=1, not after a guessed delay, and a daemon
 * that dies first is noticed through its pidfd. Its stderr goes to a file;
 * the line it writes at a clean exit is where the sync count comes from.
 *
 * The daemon gets its own process group, so a ^C in the terminal reaches
 * only the bench, which then kills it; PR_SET_PDEATHSIG kills it should the
 * bench itself die. It starts with every signal at its default disposition
 * and none blocked, as from a shell, whatever the bench inherited. JOURNAL_STREAM is removed from its environment so its
 * log lines carry the "logshardd: " prefix the parser looks for. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "fileutil.h"

#define SEALED_LINE "logshardd: all shards sealed ("

void bench_daemon_init(struct bench_daemon *d)
{
    memset(d, 0, sizeof(*d));
    d->pid = -1;
    d->pidfd = -1;
    d->notify_fd = -1;
}

static int bind_notify(struct bench_daemon *d)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;

    if (strlen(d->notify_path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, d->notify_path, strlen(d->notify_path) + 1);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -errno;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        (void)close(fd);
        return r;
    }
    d->notify_fd = fd;
    return 0;
}

/* Reads every queued notification; returns 1 once READY=1 was among them.
 * The temp directory is ours alone (mode 0700), so whatever arrives on the
 * socket comes from the daemon. */
static int read_notifications(struct bench_daemon *d)
{
    int ready = 0;

    for (;;) {
        char msg[4096];
        ssize_t n = recv(d->notify_fd, msg, sizeof(msg) - 1, 0);
        char *save = NULL;

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? ready : -errno;
        msg[n] = '\0';
        for (char *line = strtok_r(msg, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (strcmp(line, "READY=1") == 0) {
                ready = 1;
            } else if (strncmp(line, "STATUS=", 7) == 0) {
                char *s = strdup(line + 7);
                if (s) {
                    free(d->status);
                    d->status = s;
                }
            }
        }
    }
}

static void exec_daemon(const struct bench_daemon *d, pid_t bench_pid, const char *exe,
                        const char *policy, int log_fd, int null_fd)
{
    const char *argv[] = { exe,      "--config",       d->config ? d->config : "/dev/null",
                           "--spool",
                           d->spool, "--socket",       d->socket,       "--admin-socket",
                           d->admin_socket, "--fsync", policy,          NULL };
    /* What systemd may have given the bench must not reach this daemon. */
    static const char *const drop[] = { "LISTEN_FDS",    "LISTEN_PID",   "LISTEN_FDNAMES",
                                        "WATCHDOG_USEC", "WATCHDOG_PID", "JOURNAL_STREAM" };

    /* systemd starts every service in a session of its own (setsid), and
     * where the kernel groups tasks by session for the scheduler
     * (autogroup), the daemon then shares the CPU with the producers'
     * session as a whole, not with each producer: the bench places it the
     * same way unless told to leave it in the bench's session. Either way
     * it is in a process group of its own, which the bench can signal. */
    if ((d->shared_session ? setpgid(0, 0) : setsid()) < 0 || bench_child_setup(bench_pid) < 0)
        _exit(127);
    if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(log_fd, STDOUT_FILENO) < 0 ||
        dup2(log_fd, STDERR_FILENO) < 0)
        _exit(127);
    for (size_t i = 0; i < sizeof(drop) / sizeof(drop[0]); i++)
        (void)unsetenv(drop[i]); /* fails only for a malformed name */
    if (setenv("NOTIFY_SOCKET", d->notify_path, 1) < 0)
        _exit(127);
    execv(exe, (char *const *)argv);
    fprintf(stderr, "logshard-bench: cannot run %s: %s\n", exe, strerror(errno));
    _exit(127);
}

int bench_daemon_start(struct bench_daemon *d, const char *exe, const char *dir,
                       const char *policy, uint64_t deadline_ns, char *why, size_t why_len)
{
    struct sockaddr_un sa;
    pid_t self = getpid(), pid;
    int log_fd = -1, null_fd = -1, r;

    d->spool = path_join(dir, "spool");
    d->socket = path_join(dir, "producer.sock");
    d->admin_socket = path_join(dir, "admin.sock");
    d->notify_path = path_join(dir, "notify.sock");
    d->log_path = path_join(dir, "daemon.log");
    if (!d->spool || !d->socket || !d->admin_socket || !d->notify_path || !d->log_path) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    if (strlen(d->socket) >= sizeof(sa.sun_path)) {
        snprintf(why, why_len, "socket path %s is longer than a Unix socket allows (%zu bytes); "
                 "use a shorter --spool", d->socket, sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    r = bind_notify(d);
    if (r < 0) {
        snprintf(why, why_len, "cannot bind the notify socket %s: %s", d->notify_path,
                 strerror(-r));
        return r;
    }
    log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (log_fd < 0 || null_fd < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot open %s: %s", log_fd < 0 ? d->log_path : "/dev/null",
                 strerror(-r));
        goto out;
    }
    fflush(NULL); /* the child must not write our buffered output again */
    pid = fork();
    if (pid < 0) {
        r = -errno;
        snprintf(why, why_len, "fork: %s", strerror(-r));
        goto out;
    }
    if (pid == 0)
        exec_daemon(d, self, exe, policy, log_fd, null_fd);
    d->pid = pid;
    r = bench_pidfd_open(pid);
    if (r < 0) {
        snprintf(why, why_len, "pidfd_open: %s (needs Linux 5.3 or later)", strerror(-r));
        goto out;
    }
    d->pidfd = r;

    for (;;) {
        struct pollfd p[2] = {
            { .fd = d->notify_fd, .events = POLLIN },
            { .fd = d->pidfd, .events = POLLIN },
        };

        r = bench_poll(p, 2, deadline_ns);
        if (r == -ETIMEDOUT) {
            snprintf(why, why_len, "%s did not send READY=1 in time", exe);
            goto out;
        }
        if (r < 0) {
            snprintf(why, why_len, "waiting for READY=1: %s", strerror(-r));
            goto out;
        }
        r = read_notifications(d);
        if (r < 0) {
            snprintf(why, why_len, "reading %s: %s", d->notify_path, strerror(-r));
            goto out;
        }
        if (r == 1)
            break;
        if (p[1].revents) {
            int status;
            char desc[64];

            if (waitpid(d->pid, &status, 0) == d->pid) {
                d->pid = -1;
                bench_describe_status(status, desc, sizeof(desc));
            } else {
                snprintf(desc, sizeof(desc), "exited");
            }
            snprintf(why, why_len, "%s ended before READY=1 (%s)", exe, desc);
            r = -ECHILD;
            goto out;
        }
    }
    r = 0;
out:
    if (log_fd >= 0)
        (void)close(log_fd);
    if (null_fd >= 0)
        (void)close(null_fd);
    return r;
}

int bench_daemon_sample(const struct bench_daemon *d, double *ret_cpu_s, double *ret_hwm_kib)
{
    _cleanup_free_ char *stat_path = NULL, *status_path = NULL, *stat = NULL, *status = NULL;
    unsigned long long utime = 0, stime = 0, hwm = 0;
    long ticks = sysconf(_SC_CLK_TCK);
    const char *p;
    int r;

    if (asprintf(&stat_path, "/proc/%d/stat", (int)d->pid) < 0 ||
        asprintf(&status_path, "/proc/%d/status", (int)d->pid) < 0)
        return -ENOMEM;
    r = bench_read_file(stat_path, &stat, NULL);
    if (r < 0)
        return r;
    r = bench_read_file(status_path, &status, NULL);
    if (r < 0)
        return r;
    /* The command name in parentheses may hold spaces and ')': fields are
     * counted from the last ')'. utime and stime are fields 14 and 15,
     * the 12th and 13th after it, and cover every thread of the process. */
    p = strrchr(stat, ')');
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                     &stime) != 2)
        return -EBADMSG;
    p = strstr(status, "\nVmHWM:");
    if (!p || sscanf(p + 7, " %llu kB", &hwm) != 1)
        return -EBADMSG;
    *ret_cpu_s = (double)(utime + stime) / (double)(ticks > 0 ? ticks : 100);
    *ret_hwm_kib = (double)hwm;
    return 0;
}

/* Finds the last exit line in the log. The daemon writes it once, but a
 * log holds every line of this daemon only, and the last one is the exit. */
static void parse_exit_line(const struct bench_daemon *d, struct bench_daemon_exit *ret)
{
    _cleanup_free_ char *log = NULL;
    const char *p, *last = NULL;

    if (bench_read_file(d->log_path, &log, NULL) < 0)
        return;
    for (p = strstr(log, SEALED_LINE); p; p = strstr(p + 1, SEALED_LINE))
        if (p == log || p[-1] == '\n')
            last = p;
    if (last && sscanf(last + strlen(SEALED_LINE),
                       "%" SCNu64 " records in %" SCNu64 " shards, %" SCNu64 " syncs this run)",
                       &ret->records, &ret->shards, &ret->syncs) == 3)
        ret->sealed_line = true;
}

int bench_daemon_stop(struct bench_daemon *d, uint64_t deadline_ns, struct bench_daemon_exit *ret,
                      char *why, size_t why_len)
{
    struct bench_daemon_exit e = { 0 };
    struct rusage ru;
    int r;

    if (kill(d->pid, SIGTERM) < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot send SIGTERM to logshardd: %s", strerror(-r));
        return r;
    }
    r = bench_wait_exit(d->pid, d->pidfd, deadline_ns, &e.status, &ru);
    if (r < 0) {
        snprintf(why, why_len, "%s while waiting for logshardd to drain and exit",
                 r == -ETIMEDOUT ? "timed out" : strerror(-r));
        return r; /* bench_daemon_destroy() kills it */
    }
    d->pid = -1;
    e.cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    parse_exit_line(d, &e);
    *ret = e;
    return 0;
}

void bench_daemon_dump_log(const struct bench_daemon *d, FILE *out)
{
    _cleanup_free_ char *log = NULL;
    size_t len = 0;
    const char *start;

    if (!d->log_path || bench_read_file(d->log_path, &log, &len) < 0)
        return;
    /* The end tells why it failed; 4 KiB of it is plenty. */
    start = len > 4096 ? log + len - 4096 : log;
    fprintf(out, "---- %s%s ----\n%s%s---- end of daemon log ----\n",
             start == log ? "" : "end of ", d->log_path, start,
             len && log[len - 1] != '\n' ? "\n" : "");
}

void bench_daemon_destroy(struct bench_daemon *d)
{
    if (d->pid > 0)
        bench_kill_and_reap(d->pid, d->pidfd);
    if (d->pidfd >= 0)
        (void)close(d->pidfd);
    if (d->notify_fd >= 0)
        (void)close(d->notify_fd);
    free(d->spool);
    free(d->socket);
    free(d->admin_socket);
    free(d->notify_path);
    free(d->log_path);
    free(d->status);
    bench_daemon_init(d);
}
