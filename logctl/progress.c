/* The progress line of logctl merge: drawn only on a terminal, only once the
 * merge has run for a second (so short merges print nothing but their
 * summary), redrawn at most ten times a second, and erased before the
 * summary is printed. When neither standard error nor standard output is a
 * terminal it draws nothing at all, so pipes and logs get the summary only.
 *
 * The work is both passes, checking (every candidate read) and copying:
 * the bar and the ETA count the bytes of both. LOGCTL_PROGRESS_AFTER_MS
 * (milliseconds, default 1000) moves the one-second threshold; tests set it
 * to 0 to see the line at once.
 *
 * The merge engine calls back on the thread that runs the merge, also while
 * its passes run on two threads (merge/merge-passes.c), so nothing here
 * needs locking, and the merge runs the same way with or without a
 * terminal to draw on. */
#include "progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fileutil.h"
#include "logctl.h"

#define REDRAW_NS 100000000ull

void progress_init(struct progress *p)
{
    const char *after = getenv("LOGCTL_PROGRESS_AFTER_MS");
    uint64_t ms = 1000;

    memset(p, 0, sizeof(*p));
    if (isatty(STDERR_FILENO))
        p->fd = STDERR_FILENO;
    else if (isatty(STDOUT_FILENO))
        p->fd = STDOUT_FILENO;
    else
        p->fd = -1;
    if (after && *after) {
        char *end;
        unsigned long long v = strtoull(after, &end, 10);
        if (!*end)
            ms = v;
    }
    p->after_ns = ms * 1000000ull;
    p->start_ns = now_monotonic_ns();
}

static unsigned term_width(int fd)
{
    struct winsize ws;

    if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    return 80;
}

void progress_update(struct progress *p, bool copying, size_t shards_done, size_t shards_total,
                     uint64_t bytes_done, uint64_t bytes_total)
{
    uint64_t now = now_monotonic_ns();
    uint64_t work_done, work_total;
    double elapsed, rate;
    char line[512], done_s[32], total_s[32], rate_s[32], eta[32];
    unsigned width, bar;
    size_t n;
    double frac;

    if (p->fd < 0)
        return;
    /* Bytes of the check pass, then of the copy pass: the copy's total is
     * only known once checking is over, so the check's is counted twice
     * until then. */
    if (!copying) {
        p->check_total = bytes_total;
        work_done = bytes_done;
        work_total = 2 * bytes_total;
    } else {
        work_done = p->check_total + bytes_done;
        work_total = p->check_total + bytes_total;
    }
    if (now - p->start_ns < p->after_ns)
        return;
    if (p->drawn && now - p->last_draw_ns < REDRAW_NS && shards_done < shards_total)
        return;
    p->last_draw_ns = now;

    elapsed = (double)(now - p->start_ns) / 1e9;
    rate = elapsed > 0 ? (double)work_done / elapsed : 0;
    frac = work_total ? (double)work_done / (double)work_total : 0;
    if (frac > 1)
        frac = 1;
    logctl_format_size(bytes_done, false, done_s, sizeof(done_s));
    logctl_format_size(bytes_total, false, total_s, sizeof(total_s));
    logctl_format_size((uint64_t)rate, false, rate_s, sizeof(rate_s));
    if (rate > 0 && work_total > work_done) {
        uint64_t s = (uint64_t)((double)(work_total - work_done) / rate + 0.5);
        snprintf(eta, sizeof(eta), "%" PRIu64 ":%02" PRIu64, s / 60, s % 60);
    } else {
        snprintf(eta, sizeof(eta), work_total && work_done >= work_total ? "0:00" : "-:--");
    }

    width = term_width(p->fd);
    /* Text first, then as much bar as the terminal has room for. */
    n = (size_t)snprintf(line, sizeof(line),
                         " %3.0f%% %s %s/%s, %zu/%zu shards, %s/s, ETA %s",
                         frac * 100.0, copying ? "copying" : "checking", done_s, total_s,
                         shards_done, shards_total, rate_s, eta);
    bar = width > n + 12 ? (unsigned)(width - n - 12) : 0;
    if (bar > 40)
        bar = 40;
    dprintf(p->fd, "\r\033[Kmerge: ");
    if (bar) {
        unsigned full = (unsigned)(frac * bar);
        char b[48];

        for (unsigned i = 0; i < bar; i++)
            b[i] = i < full ? '#' : '.';
        b[bar] = '\0';
        dprintf(p->fd, "[%s]", b);
    }
    dprintf(p->fd, "%s", line);
    p->drawn = true;
}

void progress_clear(struct progress *p)
{
    if (p->fd >= 0 && p->drawn)
        dprintf(p->fd, "\r\033[K");
    p->drawn = false;
}
