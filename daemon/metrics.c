/* The metrics file (metrics_file, every metrics_interval_s).
 *
 * On each tick the loop takes a snapshot of the counters (stats_collect,
 * memory only) and hands it to libuv's thread pool, which measures the
 * spool, formats the text, writes it to a temp file next to the target and
 * renames it over the target. The loop never waits on the file system for
 * it, and a reader (node_exporter) sees either the old file or the new one,
 * never a part. The temp name starts with a dot and does not end in .prom,
 * so the textfile collector never reads it.
 *
 * The file is not fsynced: it is rewritten every interval, and what a crash
 * could cost (an empty or missing file until the next write) is not worth a
 * disk flush every few seconds on the spool's device.
 *
 * One write at a time: a tick that comes while the previous write is still
 * running is skipped. A failure is logged once, and again only when the
 * reason changes; a success after a failure is logged too. */
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "stats.h"

struct metrics {
    struct daemon *d;
    uv_timer_t timer;
    bool job_running;
    bool stopped;
    bool timer_closed;
    char last_error[512];
};

struct metrics_job {
    uv_work_t w;
    struct metrics *m;
    struct stats_figures fig;
    char *path;
    int err;
    char why[512];
};

static void metrics_maybe_free(struct metrics *m)
{
    if (m->stopped && m->timer_closed && !m->job_running)
        free(m);
}

/* Runs on a pool thread: touches only the job. */
static void write_work(uv_work_t *w)
{
    struct metrics_job *job = w->data;
    _cleanup_free_ char *tmp = NULL;
    _cleanup_free_ char *text = NULL;
    const char *slash = strrchr(job->path, '/');
    const char *base = slash ? slash + 1 : job->path;
    size_t dir_len = slash ? (size_t)(slash - job->path) + 1 : 0;
    struct stat st;
    size_t len;
    int fd, r;

    (void)stats_measure_spool(&job->fig); /* without it, the spool figures are left out */
    r = stats_format_prometheus(&job->fig, &text, &len);
    if (r < 0) {
        job->err = r;
        snprintf(job->why, sizeof(job->why), "out of memory");
        return;
    }
    if (asprintf(&tmp, "%.*s.%s.%ld.tmp", (int)dir_len, job->path, base, (long)getpid()) < 0) {
        tmp = NULL;
        job->err = -ENOMEM;
        snprintf(job->why, sizeof(job->why), "out of memory");
        return;
    }
    /* Non-blocking, and checked to be a regular file: a FIFO planted under
     * the temp name would otherwise hold a pool thread forever. */
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0)
        r = errno == ENXIO ? -EBADFD : -errno; /* ENXIO: a FIFO with no reader */
    else if (fstat(fd, &st) < 0)
        r = -errno;
    else
        r = S_ISREG(st.st_mode) ? 0 : -EBADFD;
    if (r < 0) {
        job->err = r;
        snprintf(job->why, sizeof(job->why), "cannot create %s: %s", tmp,
                 r == -EBADFD ? "a file that is not a regular file is in the way"
                              : strerror(-r));
        if (fd >= 0)
            (void)close(fd); /* nothing was written to it */
        return;
    }
    r = write_all(fd, text, len);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, job->path) < 0)
        r = -errno;
    if (r < 0) {
        job->err = r;
        snprintf(job->why, sizeof(job->why), "cannot write %s: %s", job->path, strerror(-r));
        (void)unlink(tmp); /* a partial temp file helps nobody */
    }
}

static void write_done(uv_work_t *w, int status)
{
    struct metrics_job *job = w->data;
    struct metrics *m = job->m;

    (void)status;
    m->job_running = false;
    if (job->err < 0) {
        if (strcmp(m->last_error, job->why) != 0)
            log_error("metrics file: %s; trying again every interval", job->why);
        snprintf(m->last_error, sizeof(m->last_error), "%s", job->why);
    } else if (m->last_error[0]) {
        log_info("metrics file %s is written again", job->path);
        m->last_error[0] = '\0';
    }
    stats_figures_free(&job->fig);
    free(job->path);
    free(job);
    metrics_maybe_free(m);
}

static void on_tick(uv_timer_t *t)
{
    struct metrics *m = t->data;
    struct daemon *d = m->d;
    struct metrics_job *job;

    if (m->job_running || m->stopped || !d->config.metrics_file)
        return;
    job = calloc(1, sizeof(*job));
    if (!job)
        return; /* the next tick tries again */
    job->m = m;
    job->w.data = job;
    job->path = strdup(d->config.metrics_file);
    if (!job->path || stats_collect(d, &job->fig) < 0) {
        free(job->path);
        free(job);
        return;
    }
    if (uv_queue_work(d->loop, &job->w, write_work, write_done) < 0) {
        stats_figures_free(&job->fig);
        free(job->path);
        free(job);
        return;
    }
    m->job_running = true;
}

static void arm(struct metrics *m)
{
    const struct config *c = &m->d->config;

    if (!c->metrics_file) {
        (void)uv_timer_stop(&m->timer);
        return;
    }
    /* The first file at once, so it exists as soon as the daemon runs. */
    (void)uv_timer_start(&m->timer, on_tick, 0, c->metrics_interval_ms);
    uv_unref((uv_handle_t *)&m->timer);
}

int metrics_start(struct daemon *d)
{
    struct metrics *m = calloc(1, sizeof(*m));

    if (!m)
        return -ENOMEM;
    m->d = d;
    (void)uv_timer_init(d->loop, &m->timer);
    m->timer.data = m;
    d->metrics = m;
    arm(m);
    return 0;
}

void metrics_reconfigure(struct daemon *d)
{
    if (d->metrics)
        arm(d->metrics);
}

static void on_timer_closed(uv_handle_t *h)
{
    struct metrics *m = h->data;

    m->timer_closed = true;
    metrics_maybe_free(m);
}

void metrics_stop(struct daemon *d)
{
    struct metrics *m = d->metrics;

    if (!m)
        return;
    d->metrics = NULL;
    m->stopped = true;
    uv_close((uv_handle_t *)&m->timer, on_timer_closed);
}
