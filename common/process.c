/* Helpers for a process that starts other programs: the tests and the
 * benchmark start logshardd and logctl the way a shell would. */
#include "process.h"

#include <errno.h>
#include <signal.h>

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
