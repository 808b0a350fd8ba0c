/* The two passes of a merge over its sources, the check and the copy, each
 * on one thread or two, and what they report for a progress display.
 *
 * The check pass reads every record of every source (merge-check.c) before
 * anything is written; the copy pass copies each good one into the output
 * (merge-copy.c). With many sources most of the time goes to per-source
 * work (opening, reading a small file, closing), which a second thread
 * overlaps: from CHECK_PARALLEL_MIN sources on, the check pass runs the
 * even sources on the calling thread and the odd ones on a second, and the
 * copy pass hands out runs of consecutive sources to both, each writing at
 * its source's offset in the output. Either way the outcome is the one a
 * pass in order gives: every source before the first that stops the merge
 * is done, and the error is that source's.
 *
 * Progress: both threads add each source they finish to two counters; the
 * calling thread alone reads them, between its own sources and once at the
 * end of a pass, and calls merge_opts.progress. So the callback never runs
 * on the second thread and needs no locking, and a merge takes the same
 * path with or without a progress display. The copy pass stays on one
 * thread only when a test's before_copy hook must see sources one by one,
 * or when the output's filesystem shares extents (see may_share_extents). */
#include "merge-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileutil.h"

/* Not in every <linux/magic.h> yet. */
#ifndef BCACHEFS_SUPER_MAGIC
#define BCACHEFS_SUPER_MAGIC 0xca451a4e
#endif

/* How much copied output may wait before its write-back is started. */
#define WRITEBACK_STEP (8u * 1024u * 1024u)

/* ---- progress ---- */

void merge_meter_begin(struct merge_meter *m, const struct merge_opts *opts,
                       enum merge_phase phase, size_t shards_total, uint64_t bytes_total)
{
    *m = (struct merge_meter){ .opts = opts };
    m->p = (struct merge_progress){ .phase = phase, .shards_total = shards_total,
                                    .bytes_total = bytes_total };
    if (opts->progress)
        opts->progress(&m->p, opts->userdata);
}

/* One source finished, on either thread. */
static void meter_add(struct merge_meter *m, uint64_t bytes)
{
    __atomic_fetch_add(&m->shards_done, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&m->bytes_done, bytes, __ATOMIC_RELAXED);
}

/* On the calling thread only: reports the counters as they are now. The
 * check pass's byte total is a guess from the sizes in done/, so it grows
 * when the sources turn out larger. */
static void meter_report(struct merge_meter *m)
{
    if (!m->opts->progress)
        return;
    m->p.shards_done = __atomic_load_n(&m->shards_done, __ATOMIC_RELAXED);
    m->p.bytes_done = __atomic_load_n(&m->bytes_done, __ATOMIC_RELAXED);
    if (m->p.bytes_done > m->p.bytes_total)
        m->p.bytes_total = m->p.bytes_done;
    m->opts->progress(&m->p, m->opts->userdata);
}

/* ---- two threads ---- */

/* The check pass runs on two threads once there are this many sources:
 * each check is a few system calls, and the copy pass cannot start before
 * the last one is done. Below it a thread costs more than it saves. */
#define CHECK_PARALLEL_MIN 256u

/* What one of two threads working through the sources met. */
struct share_outcome {
    struct merge_result errors; /* only its error is used */
    size_t failed_at;           /* SIZE_MAX: none failed */
    int r;
};

/* Records that source i failed with r, and lowers *first_bad, which both
 * threads read to stop at sources after it, to i if i is lower. */
static void share_failed(struct share_outcome *o, size_t *first_bad, size_t i, int r)
{
    size_t seen = __atomic_load_n(first_bad, __ATOMIC_RELAXED);

    o->r = r;
    o->failed_at = i;
    while (i < seen &&
           !__atomic_compare_exchange_n(first_bad, &seen, i, false, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
        ;
}

/* Once both threads are done: the error of the lower failed source goes
 * to res. Returns it, or 1 when neither failed. */
static int shares_result(struct share_outcome *a, struct share_outcome *b,
                         struct merge_result *res)
{
    struct share_outcome *bad = a->r < 0 ? a : NULL;

    if (b->r < 0 && (!bad || b->failed_at < bad->failed_at))
        bad = b;
    if (bad) {
        free(res->error);
        res->error = bad->errors.error;
        bad->errors.error = NULL;
    }
    free(a->errors.error);
    free(b->errors.error);
    return bad ? bad->r : 1;
}

struct check_share {
    int done_fd;
    const char *done_path;
    struct merge_source *sources;
    size_t n, first, keep_open;
    size_t *first_bad; /* shared: the lowest index that failed */
    struct merge_meter *meter;
    bool reports; /* on the calling thread: reports progress */
    struct share_outcome out;
};

/* Checks sources first, first + 2, ... of the share. A damaged source is
 * only marked (merge_set_aside deals with it afterwards); what stops the
 * share is an error that stops the whole merge (out of memory or of file
 * descriptors), here or in the other share at a lower index, so that the
 * error is the one a check in order gives. */
static void *check_share_run(void *arg)
{
    struct check_share *c = arg;

    c->out = (struct share_outcome){ .failed_at = SIZE_MAX };
    for (size_t i = c->first; i < c->n; i += 2) {
        int r;

        if (i > __atomic_load_n(c->first_bad, __ATOMIC_RELAXED))
            break;
        r = merge_check_source(c->done_fd, c->done_path, &c->sources[i], i < c->keep_open,
                               &c->out.errors);
        if (r < 0) {
            share_failed(&c->out, c->first_bad, i, r);
            break;
        }
        meter_add(c->meter, c->sources[i].bytes);
        if (c->reports)
            meter_report(c->meter);
    }
    return NULL;
}

/* The check pass, the even sources on this thread and the odd ones on a
 * second one. Returns 1 when every source was checked, 0 when no thread
 * could be started (the caller checks them itself), or the error that
 * stopped the merge at the lowest source in output order, as if they had
 * been checked one by one, with res->error set. */
static int check_in_parallel(int done_fd, const char *done_path, struct merge_result *res,
                             size_t keep_open, struct merge_meter *meter)
{
    size_t first_bad = SIZE_MAX;
    struct check_share share[2];
    pthread_t thread;

    for (int k = 0; k < 2; k++)
        share[k] = (struct check_share){ .done_fd = done_fd, .done_path = done_path,
                                         .sources = res->sources, .n = res->n_sources,
                                         .first = (size_t)k, .keep_open = keep_open,
                                         .first_bad = &first_bad, .meter = meter,
                                         .reports = k == 0 };
    (void)crc32c(NULL, 0); /* its one-time set-up, before two threads use it */
    if (pthread_create(&thread, NULL, check_share_run, &share[1]) != 0)
        return 0;
    check_share_run(&share[0]);
    (void)pthread_join(thread, NULL);
    return shares_result(&share[0].out, &share[1].out, res);
}

/* With as many sources, the copy pass runs on two threads too: once every
 * source is checked, each one's place in the output is known, so both
 * threads write at their own offsets. What a second thread overlaps is the
 * per-source work (opening, reading, closing), which dominates for small
 * shards. Sources go out in runs of consecutive ones, in output order, so
 * the output fills from the front and its write-back starts behind. */
#define COPY_RUN_SOURCES 64u

struct copy_run {
    size_t first, end;
};

struct copy_pass {
    int done_fd;
    const char *done_path;
    struct merge_source *sources;
    const uint64_t *offsets; /* where each source goes in the output */
    const struct copy_run *runs;
    size_t n_runs;
    int out_fd;
    const char *tmp_path;
    bool deleting;
    bool fallback;    /* shared: copy_file_range was refused */
    size_t next_run;  /* shared: the first run not handed out yet */
    size_t first_bad; /* shared: the lowest index that failed */
    struct merge_meter *meter;
};

struct copy_share {
    struct copy_pass *pass;
    bool reports; /* on the calling thread: reports progress */
    struct share_outcome out;
};

/* Copies the runs it takes until none is left, one fails, or the other
 * thread failed at a lower index. Runs are taken in order, so every source
 * before the first bad one is copied and the error is the one a copy in
 * order gives. */
static void *copy_share_run(void *arg)
{
    struct copy_share *c = arg;
    struct copy_pass *p = c->pass;

    c->out = (struct share_outcome){ .failed_at = SIZE_MAX };
    for (;;) {
        size_t k = __atomic_fetch_add(&p->next_run, 1, __ATOMIC_RELAXED);
        const struct copy_run *run;

        if (k >= p->n_runs)
            return NULL;
        run = &p->runs[k];
        for (size_t i = run->first; i < run->end; i++) {
            int r;

            if (i > __atomic_load_n(&p->first_bad, __ATOMIC_RELAXED))
                return NULL;
            r = merge_copy_source(p->done_fd, p->done_path, &p->sources[i], p->out_fd,
                            (int64_t)p->offsets[i], p->tmp_path, p->deleting, &p->fallback,
                            &c->out.errors);
            if (r < 0) {
                share_failed(&c->out, &p->first_bad, i, r);
                return NULL;
            }
            meter_add(p->meter, p->sources[i].bytes);
            if (c->reports)
                meter_report(p->meter);
        }
        /* A hint, as in the one-thread pass: the fsync is what counts. */
        (void)sync_file_range(p->out_fd, (off64_t)p->offsets[run->first],
                              (off64_t)(p->offsets[run->end] - p->offsets[run->first]),
                              SYNC_FILE_RANGE_WRITE);
    }
}

/* Whether copy_file_range to fd may share extents rather than copy bytes:
 * then each source's copy is a metadata update made under the output
 * file's lock, and a second copying thread only waits for that lock. */
static bool may_share_extents(int fd)
{
    struct statfs sfs;

    if (fstatfs(fd, &sfs) < 0)
        return false;
    switch ((unsigned long)sfs.f_type) {
    case XFS_SUPER_MAGIC:
    case BTRFS_SUPER_MAGIC:
    case OCFS2_SUPER_MAGIC:
    case BCACHEFS_SUPER_MAGIC:
        return true;
    default:
        return false;
    }
}

/* The copy pass on this thread and a second one. Returns 1 when every
 * source was copied, 0 when nothing was copied because no thread or memory
 * could be had (the caller copies them itself), or the error of the first
 * bad source in output order, with res->error set. */
static int copy_in_parallel(int done_fd, const char *done_path, int out_fd, const char *tmp_path,
                            bool deleting, bool *fallback, struct merge_meter *meter,
                            struct merge_result *res)
{
    size_t n = res->n_sources, n_runs = 0;
    _cleanup_free_ uint64_t *offsets = malloc((n + 1) * sizeof(*offsets));
    _cleanup_free_ struct copy_run *runs = malloc(n * sizeof(*runs));
    struct copy_pass pass;
    struct copy_share share[2];
    pthread_t thread;

    if (!offsets || !runs)
        return 0;
    offsets[0] = 0;
    for (size_t i = 0; i < n; i++) {
        offsets[i + 1] = offsets[i] + res->sources[i].bytes;
        /* A run ends after COPY_RUN_SOURCES sources or WRITEBACK_STEP bytes. */
        if (n_runs == 0 || runs[n_runs - 1].end - runs[n_runs - 1].first >= COPY_RUN_SOURCES ||
            offsets[i] - offsets[runs[n_runs - 1].first] >= WRITEBACK_STEP)
            runs[n_runs++] = (struct copy_run){ .first = i, .end = i };
        runs[n_runs - 1].end = i + 1;
    }
    pass = (struct copy_pass){ .done_fd = done_fd, .done_path = done_path,
                               .sources = res->sources, .offsets = offsets, .runs = runs,
                               .n_runs = n_runs, .out_fd = out_fd, .tmp_path = tmp_path,
                               .deleting = deleting, .fallback = *fallback,
                               .first_bad = SIZE_MAX, .meter = meter };
    for (int k = 0; k < 2; k++)
        share[k] = (struct copy_share){ .pass = &pass, .reports = k == 0 };
    if (pthread_create(&thread, NULL, copy_share_run, &share[1]) != 0)
        return 0;
    copy_share_run(&share[0]);
    (void)pthread_join(thread, NULL);
    *fallback = pass.fallback;
    return shares_result(&share[0].out, &share[1].out, res);
}

/* How many sources the check pass may leave open for the copy pass, which
 * then skips opening them again: what RLIMIT_NOFILE allows (its soft limit
 * raised to the hard one; logctl uses no select()) but a margin. Sources
 * beyond that are opened again for the copy. */
static size_t open_sources_budget(size_t sources)
{
    struct rlimit rl;
    rlim_t cur;

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < (rlim_t)sources + 256) {
        /* Root may raise the hard limit too; for anyone else this fails
         * and the soft limit is raised as far as the hard one allows. */
        struct rlimit more = { .rlim_cur = (rlim_t)sources + 256,
                               .rlim_max = (rlim_t)sources + 256 };

        if (more.rlim_max > (1u << 20))
            more.rlim_cur = more.rlim_max = 1u << 20;
        if (more.rlim_max > rl.rlim_max && setrlimit(RLIMIT_NOFILE, &more) == 0)
            rl = more;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        struct rlimit raised = { .rlim_cur = rl.rlim_max, .rlim_max = rl.rlim_max };

        if (raised.rlim_cur == RLIM_INFINITY || raised.rlim_cur > (1u << 20))
            raised.rlim_cur = 1u << 20;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
            rl.rlim_cur = raised.rlim_cur;
    }
    cur = rl.rlim_cur == RLIM_INFINITY ? (rlim_t)(1u << 20) : rl.rlim_cur;
    return cur > 256 ? (size_t)(cur - 256) : 0;
}

/* Makes the file table big enough for count more descriptors while this
 * thread is the only one. The kernel grows the table by doubling, and once
 * a second thread shares it, every doubling waits for an RCU grace period
 * (milliseconds each; a dozen of them with 100,000 sources). Grown here,
 * up front, it waits for none. A hint: failing costs only that time. */
static void reserve_fds(int any_fd, size_t count)
{
    int fd;

    if (count == 0 || count > INT_MAX - 64)
        return;
    /* F_DUPFD takes the lowest free number at or above the one asked for,
     * so no descriptor in use can be touched. */
    fd = fcntl(any_fd, F_DUPFD_CLOEXEC, (int)count + 64);
    if (fd >= 0)
        (void)close(fd);
}

/* ---- the passes ---- */

int merge_check_pass(int spool_fd, int done_fd, const char *done_path,
                     struct merge_meter *meter, struct merge_result *res)
{
    size_t keep_open = open_sources_budget(res->n_sources);
    bool checked = false;
    int r;

    reserve_fds(spool_fd, res->n_sources < keep_open ? res->n_sources : keep_open);
    if (res->n_sources >= CHECK_PARALLEL_MIN) {
        r = check_in_parallel(done_fd, done_path, res, keep_open, meter);
        if (r < 0)
            return r;
        checked = r > 0;
        if (checked)
            meter_report(meter); /* the other thread's last sources too */
    }
    for (size_t i = 0; i < res->n_sources && !checked; i++) {
        r = merge_check_source(done_fd, done_path, &res->sources[i], i < keep_open, res);
        if (r < 0)
            return r;
        meter_add(meter, res->sources[i].bytes);
        meter_report(meter);
    }
    return 0;
}

int merge_copy_pass(int done_fd, const char *done_path, int out_fd, const char *out_path,
                    const char *tmp_path, const struct merge_opts *opts, bool *fallback,
                    struct merge_meter *meter, struct merge_result *res)
{
    uint64_t written_back = 0;
    bool copied = false;
    int r;

    /* The test hook follows sources one by one. */
    if (!opts->before_copy && res->n_sources >= CHECK_PARALLEL_MIN &&
        !may_share_extents(out_fd)) {
        r = copy_in_parallel(done_fd, done_path, out_fd, tmp_path, opts->delete_sources,
                             fallback, meter, res);
        if (r < 0)
            return r;
        if (r > 0) {
            for (size_t i = 0; i < res->n_sources; i++) {
                res->records += res->sources[i].records;
                res->bytes += res->sources[i].bytes;
            }
            copied = true;
            meter_report(meter); /* the other thread's last sources too */
        }
    }
    for (size_t i = 0; i < res->n_sources && !copied; i++) {
        if (opts->before_copy) {
            r = opts->before_copy(&res->sources[i], opts->userdata);
            if (r < 0)
                return merge_fail(res, r, "%s: merge stopped before copying %s: %s", out_path,
                                  res->sources[i].name, strerror(-r));
        }
        r = merge_copy_source(done_fd, done_path, &res->sources[i], out_fd, -1, tmp_path,
                              opts->delete_sources, fallback, res);
        if (r < 0)
            return r;
        res->records += res->sources[i].records;
        res->bytes += res->sources[i].bytes;
        /* Start writing back what was copied while copying goes on, so the
         * final fsync waits for the tail only. A hint: the fsync is what
         * makes the output durable, and it reports any error. */
        if (res->bytes - written_back >= WRITEBACK_STEP) {
            (void)sync_file_range(out_fd, (off64_t)written_back,
                                  (off64_t)(res->bytes - written_back), SYNC_FILE_RANGE_WRITE);
            written_back = res->bytes;
        }
        meter_add(meter, res->sources[i].bytes);
        meter_report(meter);
    }
    return 0;
}
