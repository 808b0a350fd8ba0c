/* Process set-up (process.h): the tests and the benchmark start logshardd
 * and logctl the way a shell would; the daemon, logctl and the benchmark
 * take the open-file limit they need. */
#include "process.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>

/* Linux's default fs.nr_open: no soft limit may pass it, so an unlimited
 * hard limit is taken as this. */
#define FD_LIMIT_CEILING ((rlim_t)1 << 20)

int process_reset_signals(void)
{
    struct sigaction dfl = { .sa_handler = SIG_DFL };
    sigset_t none;

    sigemptyset(&dfl.sa_mask);
    for (int sig = 1; sig < _NSIG; sig++) {
        if (sig == SIGKILL || sig == SIGSTOP)
            continue;
        /* glibc keeps a few real-time signals for itself and refuses them
         * with EINVAL; their dispositions are its business, not ours. */
        if (sigaction(sig, &dfl, NULL) < 0 && errno != EINVAL)
            return -errno;
    }
    sigemptyset(&none);
    if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        return -errno;
    return 0;
}

int process_raise_fd_limit(uint64_t *ret_before, uint64_t *ret_now)
{
    struct rlimit rl;
    rlim_t want;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    *ret_before = *ret_now = (uint64_t)rl.rlim_cur;
    want = rl.rlim_max == RLIM_INFINITY ? FD_LIMIT_CEILING : rl.rlim_max;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return 0;
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    *ret_now = (uint64_t)want;
    return 0;
}

int process_set_fd_limit(uint64_t soft, uint64_t hard)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    if (hard)
        rl.rlim_max = (rlim_t)hard;
    if (soft)
        rl.rlim_cur = (rlim_t)soft;
    else if (hard)
        rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    return 0;
}
