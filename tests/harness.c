/* Integration test harness; see harness.h. Every wait has a deadline, and
 * the daemon's readiness is its own READY=1, not a guess. */
#include "harness.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
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
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "wire.h"

int64_t harness_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *harness_logshardd(void)
{
    const char *p = getenv("LOGSHARDD");
    if (!p)
        fail_msg("LOGSHARDD is not set (run the tests with meson test)");
    return p;
}

const char *harness_logctl(void)
{
    const char *p = getenv("LOGCTL");
    if (!p)
        fail_msg("LOGCTL is not set (run the tests with meson test)");
    return p;
}

char *harness_path(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        fail_msg("out of memory");
    return p;
}

void harness_init(struct harness *h)
{
    char tmpl[] = "/tmp/logshard-test.XXXXXX";

    memset(h, 0, sizeof(*h));
    h->notify_fd = -1;
    h->daemon = -1;
    h->daemon_pidfd = -1;
    if (!mkdtemp(tmpl))
        fail_msg("mkdtemp: %s", strerror(errno));
    h->dir = strdup(tmpl);
    h->spool = harness_path(h->dir, "spool");
    h->sock = harness_path(h->dir, "producer.sock");
    h->admin_sock = harness_path(h->dir, "admin.sock");
    h->config = harness_path(h->dir, "logshard.conf");
    h->log = harness_path(h->dir, "daemon.log");
    h->notify_path = harness_path(h->dir, "notify.sock");
    harness_write_config(h, "");
}

void harness_write_config(struct harness *h, const char *text)
{
    FILE *f = fopen(h->config, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void bind_notify(struct harness *h)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    if (h->notify_fd >= 0)
        close(h->notify_fd);
    unlink(h->notify_path);
    h->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    assert_true(h->notify_fd >= 0);
    assert_true(strlen(h->notify_path) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, h->notify_path);
    assert_int_equal(bind(h->notify_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void dump_log(const struct harness *h)
{
    size_t len;
    char *text = harness_slurp(h->log, &len);
    fprintf(stderr, "---- daemon log ----\n%s---- end ----\n", text);
    free(text);
}

bool harness_log_has(const struct harness *h, const char *needle)
{
    size_t len;
    char *text = harness_slurp(h->log, &len);
    bool found = strstr(text, needle) != NULL;

    free(text);
    return found;
}

struct log_wait {
    const struct harness *h;
    const char *needle;
};

static bool log_wait_cond(void *arg)
{
    const struct log_wait *w = arg;

    return harness_log_has(w->h, w->needle);
}

bool harness_wait_log(const struct harness *h, const char *needle, int timeout_ms)
{
    struct log_wait w = { h, needle };

    return harness_wait_for(log_wait_cond, &w, timeout_ms);
}

static void notify_append(struct harness *h, const char *msg, size_t len)
{
    char *n = realloc(h->notify_log, h->notify_len + len + 3);

    assert_non_null(n);
    h->notify_log = n;
    memcpy(h->notify_log + h->notify_len, msg, len);
    memcpy(h->notify_log + h->notify_len + len, "\n\n", 3);
    h->notify_len += len + 2;
}

void harness_notify_drain(struct harness *h)
{
    char msg[4096];
    ssize_t len;

    while ((len = recv(h->notify_fd, msg, sizeof(msg), 0)) > 0)
        notify_append(h, msg, (size_t)len);
}

size_t harness_notify_wait(struct harness *h, size_t from, const char *needle, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;

    for (;;) {
        struct pollfd p = { .fd = h->notify_fd, .events = POLLIN };
        int64_t left;

        harness_notify_drain(h);
        if (h->notify_log && from < h->notify_len) {
            char *hit = strstr(h->notify_log + from, needle);
            if (hit) {
                char *end = strstr(hit, "\n\n");
                return (size_t)((end ? end + 2 : h->notify_log + h->notify_len) - h->notify_log);
            }
        }
        left = deadline - harness_now_ms();
        if (left <= 0)
            return 0;
        (void)poll(&p, 1, (int)left);
    }
}

static void spawn_daemon(struct harness *h, const char *const *argv)
{
    h->daemon = fork();
    assert_true(h->daemon >= 0);
    if (h->daemon == 0) {
        int fd = open(h->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0)
            _exit(127);
        if (process_reset_signals() < 0)
            _exit(125);
        if (h->fsize_limit) {
            struct rlimit rl = { .rlim_cur = h->fsize_limit, .rlim_max = h->fsize_limit };
            if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
                _exit(126);
        }
        if (h->nofile_limit && process_set_fd_limit(h->nofile_limit, h->nofile_limit) < 0)
            _exit(126);
        if (h->nofile_soft_limit && process_set_fd_limit(h->nofile_soft_limit, 0) < 0)
            _exit(126);
        setenv("NOTIFY_SOCKET", h->notify_path, 1);
        unsetenv("LISTEN_FDS");
        unsetenv("LISTEN_PID");
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    h->daemon_pidfd = (int)syscall(SYS_pidfd_open, h->daemon, 0);
    assert_true(h->daemon_pidfd >= 0);
}

void harness_spawn(struct harness *h, const char *const *argv)
{
    bind_notify(h);
    spawn_daemon(h, argv);
}

void harness_spawn_with(struct harness *h, const char *const *extra)
{
    const char *argv[32];
    size_t n = 0;

    argv[n++] = harness_logshardd();
    argv[n++] = "--config";
    argv[n++] = h->config;
    argv[n++] = "--spool";
    argv[n++] = h->spool;
    argv[n++] = "--socket";
    argv[n++] = h->sock;
    argv[n++] = "--admin-socket";
    argv[n++] = h->admin_sock;
    for (size_t i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    harness_spawn(h, argv);
}

void harness_start(struct harness *h, const char *const *extra)
{
    int64_t deadline;
    bool ready = false;

    harness_spawn_with(h, extra);

    deadline = harness_now_ms() + 20000;
    while (!ready) {
        struct pollfd p[2] = {
            { .fd = h->notify_fd, .events = POLLIN },
            { .fd = h->daemon_pidfd, .events = POLLIN },
        };
        int64_t left = deadline - harness_now_ms();
        char msg[4096];
        ssize_t len;

        if (left <= 0) {
            dump_log(h);
            fail_msg("logshardd did not send READY=1 within 20 s");
        }
        if (poll(p, 2, (int)left) < 0 && errno != EINTR)
            fail_msg("poll: %s", strerror(errno));
        if (p[1].revents) {
            dump_log(h);
            fail_msg("logshardd exited before READY=1");
        }
        while ((len = recv(h->notify_fd, msg, sizeof(msg) - 1, 0)) > 0) {
            msg[len] = '\0';
            notify_append(h, msg, (size_t)len);
            if (strncmp(msg, "READY=1", 7) == 0 || strstr(msg, "\nREADY=1"))
                ready = true;
        }
    }
}

static int wait_pid(pid_t pid, int pidfd, int timeout_ms)
{
    int status;
    struct pollfd p = { .fd = pidfd, .events = POLLIN };

    for (;;) {
        int r = poll(&p, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            return -ETIMEDOUT;
        break;
    }
    if (waitpid(pid, &status, 0) < 0)
        return -errno;
    return status;
}

int harness_stop(struct harness *h, int sig, int timeout_ms)
{
    int status;

    assert_true(h->daemon > 0);
    assert_int_equal(kill(h->daemon, sig), 0);
    status = wait_pid(h->daemon, h->daemon_pidfd, timeout_ms);
    if (status == -ETIMEDOUT) {
        kill(h->daemon, SIGKILL);
        (void)wait_pid(h->daemon, h->daemon_pidfd, 5000);
        dump_log(h);
        fail_msg("logshardd did not exit within %d ms of signal %d", timeout_ms, sig);
    }
    close(h->daemon_pidfd);
    h->daemon_pidfd = -1;
    h->daemon = -1;
    return status;
}

int harness_wait_exit(struct harness *h, int timeout_ms)
{
    int status = wait_pid(h->daemon, h->daemon_pidfd, timeout_ms);

    if (status == -ETIMEDOUT) {
        dump_log(h);
        fail_msg("logshardd did not exit within %d ms", timeout_ms);
    }
    close(h->daemon_pidfd);
    h->daemon_pidfd = -1;
    h->daemon = -1;
    return status;
}

bool harness_daemon_exited(struct harness *h, int *ret_status)
{
    struct pollfd p = { .fd = h->daemon_pidfd, .events = POLLIN };
    int status;

    assert_true(h->daemon > 0);
    if (poll(&p, 1, 0) <= 0)
        return false; /* EINTR too: it was running a moment ago */
    assert_int_equal(waitpid(h->daemon, &status, 0), h->daemon);
    close(h->daemon_pidfd);
    h->daemon_pidfd = -1;
    h->daemon = -1;
    *ret_status = status;
    return true;
}

void harness_assert_running(struct harness *h)
{
    int status;

    if (!harness_daemon_exited(h, &status))
        return;
    dump_log(h);
    if (WIFSIGNALED(status))
        fail_msg("logshardd died of signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    fail_msg("logshardd exited with status %d", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

struct harness_child harness_child_start_fds(const char *const *argv, int out_fd, int err_fd)
{
    struct harness_child c;

    fflush(NULL); /* what the test printed so far, not again by the child */
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        if (process_reset_signals() < 0)
            _exit(125);
        if ((out_fd >= 0 && dup2(out_fd, 1) < 0) || (err_fd >= 0 && dup2(err_fd, 2) < 0))
            _exit(127);
        execv(argv[0], (char *const *)argv);
        /* Said, so that a failure of the program and a failure to start it
         * (a binary relinked at that moment, say) read differently. */
        dprintf(2, "harness: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
    if (c.pidfd < 0) {
        int e = errno;

        kill(c.pid, SIGKILL);
        (void)waitpid(c.pid, NULL, 0);
        fail_msg("pidfd_open for %s: %s", argv[0], strerror(e));
    }
    return c;
}

static int open_output(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0)
        fail_msg("harness: cannot open %s: %s", path, strerror(errno));
    return fd;
}

struct harness_child harness_child_start(const char *const *argv, const char *out_path,
                                         const char *err_path)
{
    int out = out_path ? open_output(out_path) : -1;
    int err = -1;
    struct harness_child c;

    if (err_path && out_path && strcmp(err_path, out_path) == 0)
        err = out; /* one open file: neither overwrites the other */
    else if (err_path)
        err = open_output(err_path);
    c = harness_child_start_fds(argv, out, err);

    if (err >= 0 && err != out)
        close(err);
    if (out >= 0)
        close(out);
    return c;
}

int harness_child_wait(struct harness_child *c, int sig, int timeout_ms, const char *what)
{
    pid_t pid = c->pid;
    int status;

    assert_true(pid > 0 && c->pidfd >= 0);
    if (sig)
        assert_int_equal(kill(pid, sig), 0); /* not reaped yet: never ESRCH */
    status = wait_pid(pid, c->pidfd, timeout_ms);
    if (status == -ETIMEDOUT) {
        kill(pid, SIGKILL);
        (void)wait_pid(pid, c->pidfd, 5000);
    }
    close(c->pidfd);
    c->pidfd = -1;
    c->pid = -1;
    if (status == -ETIMEDOUT) {
        if (sig)
            fail_msg("%s (pid %ld) did not exit within %d ms of signal %d (%s)", what, (long)pid,
                     timeout_ms, sig, strsignal(sig));
        fail_msg("%s (pid %ld) did not exit within %d ms", what, (long)pid, timeout_ms);
    }
    if (status < 0)
        fail_msg("waitpid for %s (pid %ld): %s", what, (long)pid, strerror(-status));
    return status;
}

int harness_run(const char *const *argv, const char *out_path, const char *err_path,
                int timeout_ms)
{
    struct harness_child c =
        harness_child_start(argv, out_path ? out_path : "/dev/null", err_path);

    return harness_child_wait(&c, 0, timeout_ms, argv[0]);
}

size_t harness_count_files(const struct harness *h, const char *sub, const char *suffix)
{
    char *path = harness_path(h->spool, sub);
    DIR *d = opendir(path);
    struct dirent *de;
    size_t n = 0, sl = strlen(suffix);

    free(path);
    if (!d)
        return 0;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] != '.' && len >= sl && strcmp(de->d_name + len - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

bool harness_wait_for(bool (*cond)(void *arg), void *arg, int timeout_ms)
{
    int64_t deadline = harness_now_ms() + timeout_ms;

    for (;;) {
        if (cond(arg))
            return true;
        if (harness_now_ms() >= deadline)
            return false;
        poll(NULL, 0, 10);
    }
}

char *harness_slurp(const char *path, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    char *buf;
    size_t got = 0;

    if (fd < 0)
        fail_msg("open %s: %s", path, strerror(errno));
    assert_int_equal(fstat(fd, &st), 0);
    buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = '\0';
    *ret_len = got;
    return buf;
}

static int remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *de;

    if (!d)
        return unlink(path);
    while ((de = readdir(d)) != NULL) {
        char *child;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        child = harness_path(path, de->d_name);
        remove_tree(child);
        free(child);
    }
    closedir(d);
    return rmdir(path);
}

void harness_cleanup(struct harness *h)
{
    if (h->daemon > 0) {
        kill(h->daemon, SIGKILL);
        if (h->daemon_pidfd >= 0)
            (void)wait_pid(h->daemon, h->daemon_pidfd, 5000);
    }
    if (h->daemon_pidfd >= 0)
        close(h->daemon_pidfd);
    if (h->notify_fd >= 0)
        close(h->notify_fd);
    if (h->dir && !getenv("LOGSHARD_KEEP_TEST_DIR"))
        remove_tree(h->dir);
    free(h->dir);
    free(h->spool);
    free(h->sock);
    free(h->admin_sock);
    free(h->config);
    free(h->log);
    free(h->notify_path);
    free(h->notify_log);
    memset(h, 0, sizeof(*h));
    h->notify_fd = -1;
    h->daemon_pidfd = -1;
}

/* ---- raw protocol client ---- */

int harness_raw_connect(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    strcpy(sa.sun_path, path);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

void harness_raw_send(int fd, const void *buf, size_t len)
{
    assert_int_equal(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
}

void harness_raw_hello(int fd, const char *name)
{
    unsigned char buf[128];
    int n = wire_encode_hello(buf, name, strlen(name));
    assert_true(n > 0);
    harness_raw_send(fd, buf, (size_t)n);
}

int harness_raw_read_frame(int fd, unsigned char *payload, size_t cap, uint32_t *ret_len)
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

uint32_t harness_raw_read_until_error(int fd, char *msg, size_t msg_len, uint64_t *ret_acked)
{
    static unsigned char payload[65536];
    uint64_t acked = 0;
    uint32_t code = 0, len;
    int type;

    msg[0] = '\0';
    while ((type = harness_raw_read_frame(fd, payload, sizeof(payload), &len)) != 0) {
        if (type == WIRE_ACK)
            acked = wire_get_u64(payload);
        if (type == WIRE_ERROR) {
            size_t mlen = len - WIRE_ERROR_FIXED;

            if (mlen >= msg_len)
                mlen = msg_len - 1;
            code = wire_get_u32(payload);
            memcpy(msg, payload + WIRE_ERROR_FIXED, mlen);
            msg[mlen] = '\0';
            break;
        }
    }
    if (ret_acked)
        *ret_acked = acked;
    return code;
}

size_t harness_encode_append(unsigned char *out, const char *const *recs, size_t n)
{
    size_t pos = WIRE_HEADER_SIZE + WIRE_APPEND_FIXED;

    wire_put_u32(out + WIRE_HEADER_SIZE, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(recs[i]);
        wire_put_u32(out + pos, (uint32_t)len);
        memcpy(out + pos + 4, recs[i], len);
        pos += 4 + len;
    }
    wire_encode_header(out, WIRE_APPEND, (uint32_t)(pos - WIRE_HEADER_SIZE));
    return pos;
}


/* ---- results ---- */

size_t harness_make_record(char *buf, size_t cap, const char *name, uint64_t seq, size_t size)
{
    size_t len = (size_t)snprintf(buf, cap, "%s %" PRIu64 " ", name, seq);

    while (len < size && len < cap)
        buf[len++] = 'x';
    return len;
}

char *harness_merge_and_cat(struct harness *h, const char *tag, size_t *ret_len)
{
    char *merged = harness_path(h->dir, tag);
    char *text_path, *err_path, *text;
    const char *merge[] = { harness_logctl(), "merge", "--spool", h->spool, "--output", merged,
                            NULL };
    const char *cat[] = { harness_logctl(), "cat", merged, NULL };
    int status;

    assert_true(asprintf(&text_path, "%s.txt", merged) > 0);
    assert_true(asprintf(&err_path, "%s.err", merged) > 0);
    status = harness_run(merge, NULL, err_path, 120000);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        size_t n;
        char *e = harness_slurp(err_path, &n);
        fail_msg("logctl merge failed: %s", e);
    }
    status = harness_run(cat, text_path, err_path, 120000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    text = harness_slurp(text_path, ret_len);
    free(merged);
    free(text_path);
    free(err_path);
    return text;
}

/* ---- fixtures ---- */

int harness_setup(void **state)
{
    struct harness *h = calloc(1, sizeof(*h));

    assert_non_null(h);
    harness_init(h);
    *state = h;
    return 0;
}

int harness_teardown(void **state)
{
    struct harness *h = *state;

    harness_cleanup(h);
    free(h);
    return 0;
}

void harness_assert_clean_exit(int status)
{
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- running logctl ---- */

void harness_run_free(struct harness_run *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof(*r));
}

struct harness_run harness_run_logctl(struct harness *h, ...)
{
    const char *argv[40];
    char *out_path = harness_path(h->dir, "logctl.out");
    char *err_path = harness_path(h->dir, "logctl.err");
    struct harness_run r = { 0 };
    size_t n = 0, len;
    va_list ap;
    int status;

    argv[n++] = harness_logctl();
    va_start(ap, h);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 39;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    status = harness_run(argv, out_path, err_path, HARNESS_LOGCTL_MS);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = harness_slurp(out_path, &r.out_len);
    r.err = harness_slurp(err_path, &len);
    free(out_path);
    free(err_path);
    return r;
}

void harness_expect_code(const struct harness_run *r, int code, const char *what)
{
    if (r->code != code)
        fail_msg("%s: exit %d, expected %d\nstdout: %s\nstderr: %s", what, r->code, code,
                 r->out, r->err);
}

void harness_expect_in(const char *text, const char *needle, const char *what)
{
    if (!strstr(text, needle))
        fail_msg("%s: \"%s\" not in:\n%s", what, needle, text);
}

/* ---- chance with a printed seed ---- */

static uint64_t rng_state = 1;

void harness_seed_rng(void)
{
    const char *env = getenv("LOGSHARD_TEST_SEED");
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    rng_state = env ? strtoull(env, NULL, 10) : (uint64_t)ts.tv_nsec | 1;
    if (rng_state == 0)
        rng_state = 1; /* xorshift never leaves 0 */
    fprintf(stderr, "seed: LOGSHARD_TEST_SEED=%" PRIu64 "\n", rng_state);
}

uint64_t harness_rng_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

bool harness_file_has(void *arg)
{
    const struct harness_file_needle *w = arg;
    int fd = open(w->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    static char buf[65536];
    ssize_t n;

    if (fd < 0)
        return false;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n < 0 || (n == 0 && w->needle))
        return false;
    buf[n] = '\0';
    return !w->needle || strstr(buf, w->needle) != NULL;
}
