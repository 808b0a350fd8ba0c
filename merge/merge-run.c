/* The run of one merge: logctl merge concatenates the sealed shards of
 * <spool>/done/ into one merged file, which the shard reader reads like a
 * single shard, and with --delete removes the merged shards once the
 * output is durable. This file holds merge_run, the steps in their order,
 * and the lock; each concern it calls on has a file of its own
 * (docs/MERGE.md):
 *   merge-sources.c   listing done/, selection, order, the names written
 *   merge-check.c     every record of every source read; damaged ones set
 *                     aside in quarantine/
 *   merge-passes.c    the check and copy passes, on one thread or two,
 *                     and their progress
 *   merge-copy.c      copy_file_range with its read/write fallback
 *   merge-intent.c    merge.intent: its text, written and read back
 *   merge-positions.c the stream positions of the sources --delete removes
 *   merge-recovery.c  finishing or rolling back an interrupted merge
 *
 * Checking: two passes. The first reads every record of every source, so
 * that nothing damaged is copied and nothing unread is ever deleted; a
 * source that fails is moved to <spool>/quarantine/ (or, when it could not
 * be read or is no regular file, left where it is), reported, and left
 * out, before any output exists. The second copies each good source from
 * the file the first one checked.
 *
 * Exclusion: every merge, with or without --delete, holds
 * flock(LOCK_EX|LOCK_NB) on <spool>/merge.lock from before it looks at
 * anything until it returns; a second merge on the spool fails with -EBUSY.
 * The kernel drops the lock when the holder dies, so kill -9 never leaves a
 * stale lock. The file itself stays: removing it would let two merges lock
 * two different inodes under the same name.
 *
 * Steps of a merge; each starts only after the one before is durable:
 *   0. Recovery of a merge that left merge.intent (merge-recovery.c).
 *   1. <spool>/merge.intent: the output's directory (absolute), its name,
 *      the temp name, whether sources are to be deleted, and every source
 *      name with its size, in output order (merge-intent.c).
 *   2. The temp file ".<output>.<pid>.tmp" next to the output (O_EXCL),
 *      the copy, fsync.
 *   3. renameat2(RENAME_NOREPLACE) to the output name: the commit point.
 *   4. fsync of the output's directory.
 *   5. --delete only: the positions of the sources' streams made durable
 *      in <spool>/streams/ (merge-positions.c), then unlink each source,
 *      fsync done/.
 *   6. unlink merge.intent, fsync the spool.
 * Without --delete the intent is written too, only so that the temp of a
 * killed merge is known and removed by the next one; --output may point
 * anywhere, so scanning for temp names would not find it.
 *
 * Known limits: a failed fsync of the output's directory or of done/ leaves
 * merge.intent in place, and the next merge fsyncs again before it deletes
 * anything; after an I/O error, a later fsync that succeeds proves less
 * than one that never failed. A merge needs write access to the spool
 * directory itself (lock and intent), not only to the output's directory.
 * An output path containing a newline is recorded escaped ("\n", "\\"). */
#include "merge-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "spool_names.h"

int merge_fail(struct merge_result *res, int err, const char *fmt, ...)
{
    va_list ap;
    char *msg = NULL;

    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL; /* the caller falls back to strerror(err) */
    va_end(ap);
    free(res->error);
    res->error = msg;
    return err;
}

/* ---- the lock ---- */

static int lock_spool(int spool_fd, const char *spool, int *ret_fd, struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(spool, SPOOL_MERGE_LOCK);
    long pid;
    int r;

    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    r = spool_merge_lock(spool_fd, ret_fd, &pid);
    if (r == -EBUSY && pid > 0)
        return merge_fail(res, -EBUSY,
                          "another logctl merge is running on %s (pid %ld holds %s)",
                          spool, pid, path);
    if (r == -EBUSY)
        return merge_fail(res, -EBUSY, "another logctl merge is running on %s (it holds %s)", spool,
                          path);
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    return 0;
}

/* ---- the steps ---- */

int merge_delete_sources(int done_fd, const char *done_path, const struct merge_source *v,
                         size_t n, const struct merge_opts *opts, size_t *ret_deleted,
                         struct merge_result *res)
{
    size_t deleted = 0;
    int r;

    for (size_t i = 0; i < n; i++) {
        if (unlinkat(done_fd, v[i].name, 0) < 0) {
            if (errno == ENOENT)
                continue;
            r = -errno;
            *ret_deleted = deleted;
            return merge_fail(res, r, "%s/%s: cannot remove: %s", done_path, v[i].name,
                              strerror(-r));
        }
        deleted++;
        merge_at_step(opts, MERGE_STEP_SOURCE_DELETED);
    }
    *ret_deleted = deleted;
    r = fsync_dir_fd(done_fd);
    if (r < 0)
        return merge_fail(res, r, "%s: fsync after removing the merged sources: %s", done_path,
                          strerror(-r));
    merge_at_step(opts, MERGE_STEP_SOURCES_DELETED);
    return 0;
}

int merge_run(const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ char *done_path = NULL;
    _cleanup_free_ char *out_path = NULL;
    _cleanup_free_ char *out_dir = NULL;
    _cleanup_free_ char *out_base = NULL;
    _cleanup_free_ char *abs_dir = NULL;
    _cleanup_free_ char *tmp_name = NULL;
    _cleanup_free_ char *tmp_path = NULL;
    _cleanup_free_ char *intent_text = NULL;
    _cleanup_close_ int spool_fd = -1;
    _cleanup_close_ int lock_fd = -1;
    _cleanup_close_ int done_fd = -1;
    _cleanup_close_ int dir_fd = -1;
    size_t intent_len = 0;
    bool have_intent = false, temp_left = false, tried_publish = false;
    int out_fd = -1;
    bool fallback = opts->force_fallback;
    struct merge_meter meter;
    uint64_t bytes_total = 0;
    struct stat st;
    int r;

    memset(res, 0, sizeof(*res));
    if (!opts->spool)
        return merge_fail(res, -EINVAL, "no spool directory given");

    spool_fd = open(opts->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (spool_fd < 0)
        return merge_fail(res, -errno, "%s: %s", opts->spool, strerror(errno));
    done_path = path_join(opts->spool, "done");
    if (!done_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* done/ first, so that pointing merge at a directory that is no spool
     * fails without leaving a lock file there. */
    done_fd = openat(spool_fd, "done", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0)
        return merge_fail(res, -errno, "%s: %s", done_path, strerror(errno));
    r = lock_spool(spool_fd, opts->spool, &lock_fd, res);
    if (r < 0)
        return r;
    r = merge_recover(spool_fd, opts->spool, done_fd, done_path, opts, res);
    if (r < 0)
        return r;

    r = merge_list_sources(done_fd, &res->sources, &res->n_sources);
    if (r < 0)
        return merge_fail(res, r, "%s: cannot list: %s", done_path, strerror(-r));
    if (opts->producer)
        merge_select_producer(res, opts);
    /* Anything else under a shard name is reported, never opened. */
    r = merge_note_not_regular(done_fd, done_path, opts->producer, res);
    if (r < 0)
        return r;
    merge_sort_problems(res);
    if (res->n_sources == 0)
        return 0;

    if (opts->progress)
        for (size_t i = 0; i < res->n_sources; i++)
            if (fstatat(done_fd, res->sources[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                bytes_total += (uint64_t)st.st_size; /* a guess; checking is exact */
    merge_meter_begin(&meter, opts, MERGE_PHASE_CHECK, res->n_sources, bytes_total);
    r = merge_check_pass(spool_fd, done_fd, done_path, &meter, res);
    if (r < 0)
        return r;
    /* Before anything is written: what failed the check goes to
     * quarantine/ (or stays, when it could not be read) and out of the list. */
    r = merge_set_aside(spool_fd, opts->spool, done_fd, done_path, res);
    merge_sort_problems(res);
    if (r < 0)
        return r;
    /* The check read every header: each stream's shards can now be put in
     * position order, before the intent records the order. */
    r = merge_order_streams(res);
    if (r < 0)
        return r;
    /* --before needs every record's time, which only the check pass read. */
    if (opts->before_ns)
        merge_select_before(res, opts);
    /* Under the lock, so a shipper deleting shards waits for this merge
     * and this merge reads a progress file that only ever grows. */
    if (opts->delete_sources) {
        r = merge_select_shipped(spool_fd, opts->spool, res);
        if (r < 0)
            return r;
    }
    if (res->n_sources == 0)
        return 0;
    bytes_total = 0;
    for (size_t i = 0; i < res->n_sources; i++)
        bytes_total += res->sources[i].bytes; /* exact now */
    merge_meter_begin(&meter, opts, MERGE_PHASE_COPY, res->n_sources, bytes_total);

    if (opts->output) {
        r = merge_split_output(opts->output, &out_dir, &out_base);
        if (r == -EISDIR)
            return merge_fail(res, -EINVAL, "%s: the output must name a file", opts->output);
        if (r < 0)
            return merge_fail(res, r, "out of memory");
    } else {
        r = merge_default_output_dir(opts->spool, &out_dir, res);
        if (r < 0)
            return r;
    }
    dir_fd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return merge_fail(res, -errno, "%s: %s", out_dir, strerror(errno));
    if (!opts->output) {
        r = merge_default_output_name(dir_fd, out_dir, &out_base, res);
        if (r < 0)
            return r;
    }
    out_path = opts->output ? strdup(opts->output) : path_join(out_dir, out_base);
    if (!out_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* Only a courtesy, to fail before copying: spool_rename_noreplace() is what really
     * guarantees that nothing is replaced. */
    if (fstatat(dir_fd, out_base, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return merge_fail(res, -EEXIST, "%s: already exists; refusing to overwrite it", out_path);
    if (errno != ENOENT)
        return merge_fail(res, -errno, "%s: %s", out_path, strerror(errno));
    /* The intent must find the output again from any working directory. */
    abs_dir = realpath(out_dir, NULL);
    if (!abs_dir)
        return merge_fail(res, -errno, "%s: %s", out_dir, strerror(errno));

    if (spool_merged_temp_name(out_base, getpid(), &tmp_name) < 0)
        return merge_fail(res, -ENOMEM, "out of memory");
    tmp_path = path_join(out_dir, tmp_name);
    if (!tmp_path)
        return merge_fail(res, -ENOMEM, "out of memory");

    /* Step 1: nothing is created in the output's directory before the
     * intent that names it is durable. */
    r = merge_intent_format(opts->delete_sources, abs_dir, out_base, tmp_name, res->sources,
                            res->n_sources, &intent_text, &intent_len);
    if (r == -EFBIG)
        return merge_fail(res, r, "%s/%s: too many sources (%zu) for one merge", opts->spool,
                          SPOOL_MERGE_INTENT, res->n_sources);
    if (r < 0)
        return merge_fail(res, r, "out of memory");
    r = merge_intent_write(spool_fd, opts->spool, intent_text, intent_len, res);
    if (r < 0)
        return r;
    have_intent = true;
    merge_at_step(opts, MERGE_STEP_INTENT_WRITTEN);

    /* Step 2. */
    out_fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (out_fd < 0) {
        r = merge_fail(res, -errno, "%s: cannot create: %s", tmp_path, strerror(errno));
        /* A file already under the temp name is not ours: it must not be
         * removed, so the intent naming it goes without the clean-up. */
        if (r == -EEXIST) {
            if (unlinkat(spool_fd, SPOOL_MERGE_INTENT, 0) == 0)
                (void)fsync_dir_fd(spool_fd); /* a surviving intent only rolls back */
            return r;
        }
        goto fail_tmp;
    }

    /* Step 2, continued: the copy pass. */
    r = merge_copy_pass(done_fd, done_path, out_fd, out_path, tmp_path, opts, &fallback, &meter,
                        res);
    if (r < 0)
        goto fail_tmp;
    /* Data first, then the name: otherwise a crash could leave the final
     * name on a file whose blocks were never written. */
    if (fsync(out_fd) < 0) {
        r = merge_fail(res, -errno, "%s: fsync: %s", tmp_path, strerror(errno));
        goto fail_tmp;
    }
    r = close(out_fd);
    out_fd = -1;
    if (r < 0) {
        r = merge_fail(res, -errno, "%s: close: %s", tmp_path, strerror(errno));
        goto fail_tmp;
    }
    merge_at_step(opts, MERGE_STEP_COPIED);

    /* Step 3, the commit point. */
    tried_publish = true;
    r = spool_rename_noreplace(dir_fd, tmp_name, dir_fd, out_base, 0, &temp_left);
    if (r == -EEXIST) {
        r = merge_fail(res, r, "%s: already exists; refusing to overwrite it", out_path);
        goto fail_tmp;
    }
    if (r < 0) {
        r = merge_fail(res, r, "%s: cannot rename %s to it: %s", out_path, tmp_name, strerror(-r));
        goto fail_tmp;
    }
    merge_at_step(opts, MERGE_STEP_PUBLISHED);

    /* From here on the output exists: a failure leaves the intent, and
     * the next merge finishes what this one could not. */
    res->shards = res->n_sources;
    res->used_fallback = fallback;
    res->output_path = out_path;
    out_path = NULL;
    /* Step 4. */
    r = fsync_dir_fd(dir_fd);
    if (r < 0)
        return merge_fail(res, r,
                          "%s: written, but fsync of its directory %s failed: %s; it may not "
                          "survive a crash (the sources are untouched, and %s/%s is kept so the "
                          "next merge syncs again before it finishes)",
                          res->output_path, out_dir, strerror(-r), opts->spool, SPOOL_MERGE_INTENT);
    /* Step 5: the positions of the sources' streams first, so that the
     * daemon still knows where they continue once the shards are gone;
     * without them no source is removed. */
    if (opts->delete_sources) {
        r = merge_write_positions(spool_fd, opts->spool, res->sources, res->n_sources, opts, res);
        if (r < 0)
            return r;
        r = merge_delete_sources(done_fd, done_path, res->sources, res->n_sources, opts,
                                 &res->deleted, res);
        if (r < 0)
            return r;
    }
    if (temp_left)
        return merge_fail(res, -EEXIST,
                          "%s: written, but its temp name %s could not be removed; the next merge "
                          "removes it",
                          res->output_path, tmp_path);
    /* Step 6. */
    return merge_intent_remove(spool_fd, opts->spool, res);

fail_tmp:
    if (out_fd >= 0)
        (void)close(out_fd); /* the temp is discarded anyway */
    res->records = 0;
    res->bytes = 0;
    /* The primary error is what the caller needs. Each clean-up below that
     * fails leaves merge.intent, and the next merge rolls back from it. */
    if (unlinkat(dir_fd, tmp_name, 0) < 0) {
        /* After a failed rename, a temp name that is gone may mean the
         * rename happened after all: the next merge looks at the output
         * and decides. */
        if (errno != ENOENT || tried_publish)
            return r;
    }
    if (fsync_dir_fd(dir_fd) < 0)
        return r;
    if (have_intent && unlinkat(spool_fd, SPOOL_MERGE_INTENT, 0) == 0)
        (void)fsync_dir_fd(spool_fd); /* a surviving intent only rolls back */
    return r;
}

void merge_result_free(struct merge_result *r)
{
    if (!r)
        return;
    free(r->output_path);
    free(r->positions_file);
    merge_sources_free(r->sources, r->n_sources);
    free(r->recovery_output);
    free(r->recovery_temp);
    free(r->error);
    merge_problems_free(r->problems, r->n_problems);
    memset(r, 0, sizeof(*r));
}
