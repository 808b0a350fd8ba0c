/* logshard-bench: child processes, waits and files.
 *
 * Every wait in the bench goes through bench_poll(): a ppoll(2) with a
 * deadline, during which SIGINT, SIGTERM and SIGHUP (blocked at all other
 * times) may arrive. A signal therefore never lands between a check and a
 * wait, and an interrupted bench still kills its children and removes its
 * temp directory. Child exits are waited for through pidfds, so they take
 * part in the same poll as everything else. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "fileutil.h"
#include "process.h"

static volatile sig_atomic_t interrupted_by;
static sigset_t start_mask;
static uint64_t start_nofile; /* the soft limit the bench started with; 0: unknown */

static void on_signal(int sig)
{
    interrupted_by = sig;
}

int bench_signals_setup(void)
{
    static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
    struct sigaction sa = { .sa_handler = on_signal };
    sigset_t block;

    sigemptyset(&sa.sa_mask);
    sigemptyset(&block);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(&block, sigs[i]);
    if (sigprocmask(SIG_BLOCK, &block, &start_mask) < 0)
        return -errno;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return -errno;
    return 0;
}

int bench_fd_limit_setup(void)
{
    uint64_t now;

    return process_raise_fd_limit(&start_nofile, &now);
}

int bench_interrupted(void)
{
    return interrupted_by;
}

int bench_child_setup(pid_t bench_pid)
{
    /* Dispositions and mask survive exec. The daemon is measured as a user
     * starts it, with nothing ignored that the bench (or whatever started
     * the bench) ignored, and nothing blocked: a daemon started with SIGTERM
     * blocked would never drain. */
    int r = process_reset_signals();

    if (r < 0)
        return r;
    if (start_nofile) {
        r = process_set_fd_limit(start_nofile, 0);
        if (r < 0)
            return r;
    }
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
        return -errno;
    /* The bench may have died before the prctl took effect. */
    if (getppid() != bench_pid)
        return -ESRCH;
    return 0;
}

int bench_poll(struct pollfd *fds, nfds_t n, uint64_t deadline_ns)
{
    for (;;) {
        uint64_t now = now_monotonic_ns();
        struct timespec ts, *tsp = NULL;
        int r;

        if (interrupted_by)
            return -EINTR;
        if (deadline_ns != BENCH_NO_DEADLINE) {
            uint64_t left;
            if (now >= deadline_ns)
                return -ETIMEDOUT;
            left = deadline_ns - now;
            ts.tv_sec = (time_t)(left / 1000000000u);
            ts.tv_nsec = (long)(left % 1000000000u);
            tsp = &ts;
        }
        r = ppoll(fds, n, tsp, &start_mask);
        if (r > 0)
            return r;
        if (r < 0 && errno != EINTR)
            return -errno;
        /* r == 0: the timeout; the next round sees the deadline passed. */
    }
}

int bench_pidfd_open(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? -errno : fd;
}

int bench_wait_exit(pid_t pid, int pidfd, uint64_t deadline_ns, int *ret_status,
                    struct rusage *ret_ru)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    struct rusage ru;
    int status, r;

    r = bench_poll(&p, 1, deadline_ns);
    if (r < 0)
        return r;
    /* The pidfd is readable: the child has exited, so this does not block. */
    if (wait4(pid, &status, 0, &ru) < 0)
        return -errno;
    *ret_status = status;
    if (ret_ru)
        *ret_ru = ru;
    return 0;
}

void bench_kill_and_reap(pid_t pid, int pidfd)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    uint64_t deadline = now_monotonic_ns() + 10 * 1000000000ull;
    int status;

    if (pid <= 0)
        return;
    (void)kill(pid, SIGKILL); /* it may be gone already; the reap tells */
    if (pidfd >= 0) {
        /* Not bench_poll: cleanup must go on after an interrupting signal. */
        for (;;) {
            uint64_t now = now_monotonic_ns();
            int r;
            if (now >= deadline)
                return; /* stuck in the kernel; it stays a zombie until we exit */
            r = poll(&p, 1, (int)((deadline - now) / 1000000u) + 1);
            if (r > 0 || (r < 0 && errno != EINTR))
                break;
        }
    }
    (void)waitpid(pid, &status, 0); /* ECHILD when reaped already: nothing to do */
}

void bench_describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "killed by signal %d (%s)", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    else
        snprintf(buf, len, "wait status 0x%x", (unsigned)status);
}

static int open_out(const char *path, int dflt_fd)
{
    if (!path)
        return dflt_fd;
    return open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

int bench_run_program(const char *const *argv, const char *out_path, const char *err_path,
                      uint64_t deadline_ns, int *ret_status)
{
    pid_t self = getpid(), pid;
    int null_fd, out_fd, err_fd, pidfd, r, status;

    /* Opened here, not in the child, so that a failure is reported with
     * its path instead of as exit status 127. */
    null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return -errno;
    out_fd = open_out(out_path, null_fd);
    err_fd = open_out(err_path, STDERR_FILENO);
    if (out_fd < 0 || err_fd < 0) {
        r = -errno;
        goto out;
    }
    fflush(NULL); /* a child must not write our buffered output twice */
    pid = fork();
    if (pid < 0) {
        r = -errno;
        goto out;
    }
    if (pid == 0) {
        if (bench_child_setup(self) < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
            dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    pidfd = bench_pidfd_open(pid);
    if (pidfd < 0) {
        r = pidfd;
        bench_kill_and_reap(pid, -1);
        goto out;
    }
    r = bench_wait_exit(pid, pidfd, deadline_ns, &status, NULL);
    if (r < 0)
        bench_kill_and_reap(pid, pidfd);
    else
        *ret_status = status;
    (void)close(pidfd);
out:
    if (out_fd >= 0 && out_fd != null_fd)
        (void)close(out_fd);
    if (err_fd >= 0 && err_fd != STDERR_FILENO)
        (void)close(err_fd);
    (void)close(null_fd);
    return r;
}

/* The directory of /proc/self/exe, as a new string. */
static char *exe_dir(void)
{
    size_t cap = 256;

    for (;;) {
        char *buf = malloc(cap);
        ssize_t n;

        if (!buf)
            return NULL;
        n = readlink("/proc/self/exe", buf, cap);
        if (n < 0) {
            free(buf);
            return NULL;
        }
        if ((size_t)n < cap) {
            char *slash;
            buf[n] = '\0';
            slash = strrchr(buf, '/');
            if (!slash) {
                free(buf);
                return NULL;
            }
            *slash = '\0';
            return buf;
        }
        free(buf);
        cap *= 2; /* cut off: try a larger buffer */
    }
}

static bool is_executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

char *bench_find_program(const char *explicit_path, const char *env_name, const char *const *rel,
                         const char *name)
{
    const char *env = env_name ? getenv(env_name) : NULL;
    _cleanup_free_ char *dir = NULL;
    _cleanup_free_ char *path_copy = NULL;
    char *save = NULL;

    if (explicit_path)
        return strdup(explicit_path);
    if (env && *env)
        return strdup(env);
    dir = exe_dir();
    for (size_t i = 0; dir && rel && rel[i]; i++) {
        char *p = path_join(dir, rel[i]);
        if (p && is_executable_file(p)) {
            /* Without the "..": the path is printed in the report. */
            char *real = realpath(p, NULL);
            if (real) {
                free(p);
                return real;
            }
            return p;
        }
        free(p);
    }
    env = getenv("PATH");
    if (!env || !*env)
        return NULL;
    path_copy = strdup(env);
    if (!path_copy)
        return NULL;
    for (char *d = strtok_r(path_copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char *p = path_join(*d ? d : ".", name);
        if (p && is_executable_file(p))
            return p;
        free(p);
    }
    return NULL;
}

int bench_make_tempdir(const char *base, char **ret_dir)
{
    char *tmpl;

    if (asprintf(&tmpl, "%s/logshard-bench.XXXXXX", base) < 0)
        return -ENOMEM;
    if (!mkdtemp(tmpl)) {
        int r = -errno;
        free(tmpl);
        return r;
    }
    *ret_dir = tmpl;
    return 0;
}

/* Removes name (in parent_fd) and, when it is a directory, everything in
 * it; symlinks are removed, never followed. Goes on after an error so that
 * as much as possible is gone, and returns the first error. */
static int remove_tree_at(int parent_fd, const char *name)
{
    int fd = openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct dirent *de;
    int first = 0;
    DIR *d;

    if (fd < 0) {
        if (errno == ENOTDIR || errno == ELOOP)
            return unlinkat(parent_fd, name, 0) < 0 ? -errno : 0;
        return -errno;
    }
    d = fdopendir(fd);
    if (!d) {
        first = -errno;
        (void)close(fd);
        return first;
    }
    while ((de = readdir(d)) != NULL) {
        int r;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        r = remove_tree_at(dirfd(d), de->d_name);
        if (r < 0 && first == 0)
            first = r;
    }
    (void)closedir(d); /* a read-only directory stream: nothing to lose */
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) < 0 && first == 0)
        first = -errno;
    return first;
}

int bench_remove_tree(const char *path)
{
    return remove_tree_at(AT_FDCWD, path);
}

int bench_fs_type(const char *path, char *buf, size_t len, bool *ret_volatile)
{
    static const struct {
        unsigned long magic;
        const char *name;
        bool is_volatile;
    } types[] = {
        { EXT4_SUPER_MAGIC, "ext4", false }, /* also ext2 and ext3 */
        { XFS_SUPER_MAGIC, "xfs", false },
        { BTRFS_SUPER_MAGIC, "btrfs", false },
        { TMPFS_MAGIC, "tmpfs", true },
        { RAMFS_MAGIC, "ramfs", true },
        { OVERLAYFS_SUPER_MAGIC, "overlayfs", false },
        { NFS_SUPER_MAGIC, "nfs", false },
        { F2FS_SUPER_MAGIC, "f2fs", false },
        { 0x2fc12fc1ul, "zfs", false },
        { FUSE_SUPER_MAGIC, "fuse", false },
        { V9FS_MAGIC, "9p", false },
    };
    struct statfs sf;

    if (statfs(path, &sf) < 0)
        return -errno;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if ((unsigned long)sf.f_type == types[i].magic) {
            snprintf(buf, len, "%s", types[i].name);
            *ret_volatile = types[i].is_volatile;
            return 0;
        }
    }
    snprintf(buf, len, "0x%lx", (unsigned long)sf.f_type);
    *ret_volatile = false;
    return 0;
}

int bench_read_file(const char *path, char **ret_text, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t cap = 4096, len = 0;
    char *buf;

    if (fd < 0)
        return -errno;
    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        ssize_t n;
        if (cap - len < 2) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return -ENOMEM;
            }
            buf = bigger;
            cap *= 2;
        }
        n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int r = -errno;
            free(buf);
            return r;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    *ret_text = buf;
    if (ret_len)
        *ret_len = len;
    return 0;
}
