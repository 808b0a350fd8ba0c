/* The daemon's open-file limit (fd-limit.h). */
#include "fd-limit.h"

#include <inttypes.h>
#include <string.h>
#include <sys/resource.h>

#include "config.h"
#include "log.h"
#include "process.h"

/* Descriptors that are not a producer's: the spool and its directories,
 * the listeners, the admin socket and its clients, the I/O ring and its
 * eventfd, inotify, the log, the metrics file being written. */
#define FD_LIMIT_MARGIN 64u

uint64_t fd_limit_needed(const struct config *c)
{
    uint64_t sockets = c->max_producers * (c->syslog_stream_socket ? 2u : 1u);

    return sockets + 2u * c->max_open_shards + FD_LIMIT_MARGIN;
}

static void warn_if_short(const struct config *c, uint64_t limit)
{
    uint64_t needed = fd_limit_needed(c);

    if (limit >= needed)
        return;
    log_warning("the open-file limit (RLIMIT_NOFILE) is %" PRIu64 ", below the %" PRIu64
                " descriptors that [limits] max_producers (%" PRIu64
                ") and max_open_shards (%" PRIu64 ") may take: producers past it may be "
                "refused (\"Too many open files\"); raise the hard limit (LimitNOFILE= in the "
                "unit, ulimit -Hn) or lower those keys",
                limit, needed, c->max_producers, c->max_open_shards);
}

void fd_limit_start(const struct config *c)
{
    uint64_t before = 0, now = 0;
    int r = process_raise_fd_limit(&before, &now);

    if (r < 0)
        log_warning("cannot raise the open-file limit (RLIMIT_NOFILE) from %" PRIu64
                    " to its hard limit: %s",
                    before, strerror(-r));
    else if (now != before)
        log_info("open-file limit (RLIMIT_NOFILE) raised from %" PRIu64 " to %" PRIu64, before,
                 now);
    warn_if_short(c, now);
}

void fd_limit_check(const struct config *c)
{
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
        return;
    warn_if_short(c, (uint64_t)rl.rlim_cur);
}
