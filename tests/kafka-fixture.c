/* See kafka-fixture.h. */
#include "kafka-fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

static bool read_line(int fd, char *buf, size_t size, int timeout_ms)
{
    size_t n = 0;

    while (n + 1 < size) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char c;

        if (poll(&p, 1, timeout_ms) <= 0)
            return false;
        if (read(fd, &c, 1) != 1)
            return false;
        if (c == '\n') {
            buf[n] = '\0';
            return true;
        }
        buf[n++] = c;
    }
    return false;
}

void kafka_mock_start(struct kafka_mock *m, unsigned n_brokers)
{
    const char *mock = getenv("KAFKA_MOCK");
    int in[2], out[2];
    char count[16];

    if (!mock || !*mock || !getenv("KCAT") || !*getenv("KCAT")) {
        print_message("no kafka-mock or no kcat in this build: skipped\n");
        skip();
    }
    memset(m, 0, sizeof(*m));
    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    snprintf(count, sizeof(count), "%u", n_brokers);
    m->pid = fork();
    assert_true(m->pid >= 0);
    if (m->pid == 0) {
        if (process_reset_signals() < 0 || dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
            _exit(127);
        execl(mock, mock, "--brokers", count, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    m->to_mock = in[1];
    m->from_mock = out[0];
    if (!read_line(m->from_mock, m->brokers, sizeof(m->brokers), 20000))
        fail_msg("%s printed no bootstrap servers within 20 s", mock);
    print_message("mock cluster at %s\n", m->brokers);
}

void kafka_mock_command(struct kafka_mock *m, const char *fmt, ...)
{
    char cmd[256], answer[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof(cmd) - 1, fmt, ap);
    va_end(ap);
    cmd[n++] = '\n';
    assert_int_equal(write(m->to_mock, cmd, (size_t)n), n);
    if (!read_line(m->from_mock, answer, sizeof(answer), 10000))
        fail_msg("kafka-mock did not answer '%.*s'", n - 1, cmd);
    if (strcmp(answer, "ok") != 0)
        fail_msg("kafka-mock: '%.*s': %s", n - 1, cmd, answer);
}

void kafka_mock_stop(struct kafka_mock *m)
{
    int status;

    if (m->pid <= 0)
        return;
    close(m->to_mock); /* EOF: it ends */
    for (int i = 0; i < 500; i++) {
        if (waitpid(m->pid, &status, WNOHANG) == m->pid) {
            m->pid = 0;
            break;
        }
        usleep(10000);
    }
    if (m->pid > 0) {
        kill(m->pid, SIGKILL);
        waitpid(m->pid, &status, 0);
    }
    close(m->from_mock);
    m->pid = 0;
}

pid_t ship_spawn(struct harness *h, const struct kafka_mock *m, const char *const *extra)
{
    return ship_spawn_nofile(h, m, extra, 0, 0);
}

pid_t ship_spawn_nofile(struct harness *h, const struct kafka_mock *m, const char *const *extra,
                        uint64_t soft, uint64_t hard)
{
    const char *argv[64] = { harness_logctl(), "ship", "--spool", h->spool, "--brokers",
                             m->brokers, "--admin-socket", h->admin_sock };
    size_t n = 8;
    char *log = harness_path(h->dir, "ship.log");
    pid_t pid;

    pid_t parent = getpid();

    for (; extra && *extra && n + 1 < 64; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

        /* Killed with the test: a shipper a failed test left waiting for
         * a cluster that is gone would hold the test's output open, and
         * meson would wait for it until the suite's timeout. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(125);
        if (process_reset_signals() < 0 || fd < 0 || dup2(fd, 2) < 0)
            _exit(127);
        if ((soft || hard) && process_set_fd_limit(soft, hard) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    free(log);
    return pid;
}

int ship_wait(pid_t pid, int timeout_ms)
{
    int status;

    for (int waited = 0; waited <= timeout_ms; waited += 10) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return status;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("logctl ship (pid %d) did not finish within %d ms", (int)pid, timeout_ms);
    return -1;
}

static char *field(char **p, char sep)
{
    char *start = *p, *end = strchr(start, sep);

    if (!end)
        return NULL;
    *end = '\0';
    *p = end + 1;
    return start;
}

size_t kafka_consume(const struct kafka_mock *m, const char *topic, struct kafka_msg **ret)
{
    char dir[] = "/tmp/logshard-kcat-XXXXXX";
    char out[64], *text, *line, *next;
    size_t len, n = 0, cap = 0;
    struct kafka_msg *v = NULL;
    int status;

    assert_non_null(mkdtemp(dir));
    snprintf(out, sizeof(out), "%s/out", dir);
    {
        /* \x1f between the fields: payloads may hold anything printable. */
        const char *argv[] = { getenv("KCAT"), "-C", "-b", m->brokers, "-t", topic, "-e", "-q",
                               "-X", "isolation.level=read_committed", "-f",
                               "%t\x1f%p\x1f%k\x1f%T\x1f%h\x1f%s\x1e", NULL };

        status = harness_run(argv, out, NULL, 120000);
    }
    text = harness_slurp(out, &len);
    unlink(out);
    rmdir(dir);
    /* kcat exits 1 for a topic that does not exist (yet): no messages. */
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0 && len > 0))
        fail_msg("kcat -C -t %s failed (status %d)", topic, status);
    for (line = text; line && *line; line = next) {
        char *end = strchr(line, '\x1e'), *p = line, *f[6];

        if (!end)
            fail_msg("kcat: a message without its end: %.80s", line);
        *end = '\0';
        next = end + 1;
        if (*next == '\n')
            next++;
        for (int i = 0; i < 5; i++)
            if (!(f[i] = field(&p, '\x1f')))
                fail_msg("kcat: a message with too few fields: %.80s", line);
        f[5] = p;
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            v = realloc(v, cap * sizeof(*v));
            assert_non_null(v);
        }
        v[n].topic = strdup(f[0]);
        v[n].partition = atoi(f[1]);
        v[n].key = strdup(f[2]);
        v[n].timestamp_ms = strtoll(f[3], NULL, 10);
        v[n].headers = strdup(f[4]);
        v[n].payload = strdup(f[5]);
        n++;
    }
    free(text);
    *ret = v;
    return n;
}

void kafka_msgs_free(struct kafka_msg *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].topic);
        free(v[i].key);
        free(v[i].headers);
        free(v[i].payload);
    }
    free(v);
}

const char *kafka_header(const struct kafka_msg *msg, const char *name, char *buf, size_t size)
{
    size_t nl = strlen(name);

    for (const char *p = msg->headers; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);

        if (len > nl && strncmp(p, name, nl) == 0 && p[nl] == '=') {
            snprintf(buf, size, "%.*s", (int)(len - nl - 1), p + nl + 1);
            return buf;
        }
        p = comma ? comma + 1 : NULL;
    }
    return NULL;
}
