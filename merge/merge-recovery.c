/* Recovery of an interrupted merge: at the start of every merge, under the
 * lock, before anything else, the merge that left merge.intent behind is
 * finished or rolled back (merge-run.c lists the steps it may have been
 * killed between).
 *   - merge.intent.tmp is an intent that was never published; the merge
 *     that wrote it had not created anything else yet. It is removed.
 *   - merge.intent with no file under the output name: step 3 never
 *     happened, so no source was deleted (step 5 comes after it). Rolling
 *     back is removing the temp file; the sources stay for this merge. If
 *     a source it lists is missing although the output is missing too, the
 *     output was published and then moved or deleted by someone: the merge
 *     refuses, since neither way is provably right.
 *   - merge.intent and a file under the output name: published. Before a
 *     source is removed, the merge proves its bytes are in that file: the
 *     file must have the recorded total size, and every listed source still
 *     present must equal the file's bytes at its offset. This does not
 *     depend on who created the file: a foreign file under that name (made
 *     between our existence check and a crash before step 3) fails the
 *     comparison and the merge refuses, and a file that passes does hold
 *     every byte of what is deleted. Then the output and its directory are
 *     fsynced (the crash may have come before step 4) and steps 5 and 6 run;
 *     step 5 writes the stream positions of the sources still present again
 *     before it removes any, since the killed merge may not have.
 *   - Either way the temp file is removed if present (a publish through
 *     link(2) leaves it as a second name) before the intent goes.
 * Recovery changes nothing until it has decided, and every step of it is
 * idempotent, so a recovery killed half-way is finished by the next merge.
 * A damaged intent (merge-intent.c) stops the merge with a message: which
 * way is safe cannot be told from it. */
#include "merge-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "spool_names.h"

#define COMPARE_BUFFER (256u * 1024u)

/* Compares len bytes of a (from offset 0) with b at b_off. Returns 0 when
 * equal, 1 with *ret_at (offset in a) at the first difference or where
 * either ended, or a negative errno. */
static int compare_bytes(int a, int b, uint64_t b_off, uint64_t len, uint64_t *ret_at)
{
    unsigned char *x = malloc(COMPARE_BUFFER), *y = malloc(COMPARE_BUFFER);
    uint64_t done = 0;
    int r = 0;

    if (!x || !y) {
        r = -ENOMEM;
        goto out;
    }
    while (done < len) {
        size_t want = len - done > COMPARE_BUFFER ? COMPARE_BUFFER : (size_t)(len - done);
        ssize_t nx, ny;

        if (lseek(a, (off_t)done, SEEK_SET) < 0 || lseek(b, (off_t)(b_off + done), SEEK_SET) < 0) {
            r = -errno;
            goto out;
        }
        nx = read_full(a, x, want);
        ny = read_full(b, y, want);
        if (nx < 0 || ny < 0) {
            r = nx < 0 ? (int)nx : (int)ny;
            goto out;
        }
        if ((size_t)nx != want || (size_t)ny != want || memcmp(x, y, want) != 0) {
            size_t i = 0;

            while (i < (size_t)nx && i < (size_t)ny && x[i] == y[i])
                i++;
            *ret_at = done + i;
            r = 1;
            goto out;
        }
        done += want;
    }
out:
    free(x);
    free(y);
    return r;
}

/* The proof that deleting the listed sources loses nothing: the file under
 * the output name has the recorded size, and every listed source still in
 * done/ has its recorded size and equals the file at its offset. */
static int verify_published(int dir_fd, const char *out_path, int done_fd, const char *done_path,
                            const struct merge_intent *in, const char *intent_path,
                            struct merge_result *res)
{
    /* O_NONBLOCK, here and below: whatever is under these names is
     * looked at, and a FIFO must not stop the merge; reads of a regular
     * file ignore the flag. */
    _cleanup_close_ int fd =
        openat(dir_fd, in->output, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    uint64_t off = 0;

    if (fd < 0)
        return merge_fail(res, -errno, "%s: %s", out_path, strerror(errno));
    if (fstat(fd, &st) < 0)
        return merge_fail(res, -errno, "%s: %s", out_path, strerror(errno));
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != in->bytes)
        return merge_fail(res, -EBADMSG,
                          "%s: the interrupted merge recorded in %s wrote %" PRIu64
                          " bytes there, but this is %s of %" PRIu64
                          " bytes; it is not that merge's output, so no source is removed. "
                          "Move it away (the merge is then rolled back) or check and remove %s",
                          out_path, intent_path, in->bytes,
                          S_ISREG(st.st_mode) ? "a file" : "not a regular file",
                          (uint64_t)st.st_size,
                          intent_path);
    for (size_t i = 0; i < in->n_sources; i++) {
        const struct merge_source *s = &in->sources[i];
        _cleanup_close_ int sfd =
            openat(done_fd, s->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        struct stat sst;
        uint64_t at = 0;
        int r;

        if (sfd < 0) {
            if (errno != ENOENT)
                return merge_fail(res, -errno, "%s/%s: %s", done_path, s->name, strerror(errno));
            off += s->bytes; /* deleted by the interrupted run, after publishing */
            continue;
        }
        if (fstat(sfd, &sst) < 0)
            return merge_fail(res, -errno, "%s/%s: %s", done_path, s->name, strerror(errno));
        r = S_ISREG(sst.st_mode) && (uint64_t)sst.st_size == s->bytes
                ? compare_bytes(sfd, fd, off, s->bytes, &at)
                : 1;
        if (r < 0)
            return merge_fail(res, r, "%s/%s: comparing with %s: %s", done_path, s->name, out_path,
                              strerror(-r));
        if (r > 0)
            return merge_fail(res, -EBADMSG,
                              "%s/%s: differs from the copy at offset %" PRIu64
                              " of %s (recorded in %s); no source is removed. Check them and "
                              "remove %s by hand",
                              done_path, s->name, off + at, out_path, intent_path, intent_path);
        off += s->bytes;
    }
    return 0;
}

/* Before the sources of a published merge are removed, their streams'
 * positions must be durable, and whether the killed merge got that far is
 * unknown. Sources it already removed were recorded before the first of
 * them went (step 5 writes the positions first), so the positions of those
 * still in done/ are written again here: read through the check, which
 * gives each one's stream and record count, as the merge did. A source
 * that cannot be read stops the recovery before anything is removed. */
static int record_positions(int spool_fd, const char *spool, int done_fd, const char *done_path,
                            const struct merge_intent *in, const struct merge_opts *opts,
                            struct merge_result *res)
{
    struct merge_source *v = calloc(in->n_sources ? in->n_sources : 1, sizeof(*v));
    size_t n = 0;
    int r = 0;

    if (!v)
        return merge_fail(res, -ENOMEM, "out of memory");
    for (size_t i = 0; i < in->n_sources; i++) {
        struct merge_source *s = &v[n];

        *s = in->sources[i];
        s->name = NULL;
        s->bad_why = NULL;
        s->fd = -1;
        s->name = strdup(in->sources[i].name);
        if (!s->name) {
            r = merge_fail(res, -ENOMEM, "out of memory");
            break;
        }
        n++;
        r = merge_check_source(done_fd, done_path, s, false, res);
        if (r < 0)
            break;
        if (s->bad == -ENOENT) {
            /* Removed by the killed merge, after it recorded the positions. */
            merge_source_release(s);
            n--;
            continue;
        }
        if (s->bad) {
            r = merge_fail(res, s->bad < 0 ? s->bad : -EIO,
                           "%s/%s: cannot read the stream positions of this source of the "
                           "interrupted merge (%s), so no source is removed",
                           done_path, s->name, s->bad_why ? s->bad_why : "unknown");
            break;
        }
    }
    if (r == 0)
        r = merge_write_positions(spool_fd, spool, v, n, opts, res);
    merge_sources_free(v, n);
    return r;
}

static int recover_from(int spool_fd, const char *spool, int done_fd, const char *done_path,
                        const struct merge_intent *in, const char *intent_path,
                        const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ char *out_path = path_join(in->dir, in->output);
    _cleanup_free_ char *tmp_path = path_join(in->dir, in->temp);
    _cleanup_close_ int dir_fd = -1;
    bool published, temp_removed = false;
    size_t deleted = 0;
    struct stat st;
    int r;

    if (!out_path || !tmp_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    dir_fd = open(in->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return merge_fail(res, -errno,
                          "%s: an interrupted merge into %s was found, but %s cannot be "
                          "opened (%s), "
                          "so whether it was published is unknown and nothing is changed; check, "
                          "then remove %s by hand",
                          intent_path, out_path, in->dir, strerror(errno), intent_path);
    if (fstatat(dir_fd, in->output, &st, AT_SYMLINK_NOFOLLOW) == 0)
        published = true;
    else if (errno == ENOENT)
        published = false;
    else
        return merge_fail(res, -errno, "%s: %s", out_path, strerror(errno));

    if (published) {
        _cleanup_close_ int fd = -1;

        if (in->delete_sources) {
            r = verify_published(dir_fd, out_path, done_fd, done_path, in, intent_path, res);
            if (r < 0)
                return r;
        }
        /* The crash may have come before the directory fsync (step 4). */
        fd = openat(dir_fd, in->output, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        if (fd < 0 || fsync(fd) < 0)
            return merge_fail(res, -errno, "%s: fsync: %s", out_path, strerror(errno));
        r = fsync_dir_fd(dir_fd);
        if (r < 0)
            return merge_fail(res, r, "%s: fsync: %s", in->dir, strerror(-r));
        if (in->delete_sources) {
            r = record_positions(spool_fd, spool, done_fd, done_path, in, opts, res);
            if (r < 0)
                return r;
            r = merge_delete_sources(done_fd, done_path, in->sources, in->n_sources, opts, &deleted,
                               res);
            if (r < 0)
                return r;
        }
    } else if (in->delete_sources) {
        size_t missing = 0;

        for (size_t i = 0; i < in->n_sources; i++) {
            if (fstatat(done_fd, in->sources[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                continue;
            if (errno != ENOENT)
                return merge_fail(res, -errno, "%s/%s: %s", done_path, in->sources[i].name,
                                  strerror(errno));
            missing++;
        }
        /* Sources go only after the output was published: if some are gone,
         * the output existed and was moved away since. Rolling back would
         * merge the rest again; finishing would delete data we cannot see. */
        if (missing > 0)
            return merge_fail(res, -EUCLEAN,
                              "%s: the interrupted merge it records removed %zu of its sources, "
                              "so it had published %s, which is now missing; nothing is changed: "
                              "restore the output, or check and remove %s by hand",
                              intent_path, missing, out_path, intent_path);
    }

    if (unlinkat(dir_fd, in->temp, 0) == 0)
        temp_removed = true;
    else if (errno != ENOENT)
        return merge_fail(res, -errno, "%s: cannot remove: %s", tmp_path, strerror(errno));
    if (temp_removed) {
        r = fsync_dir_fd(dir_fd);
        if (r < 0)
            return merge_fail(res, r, "%s: fsync: %s", in->dir, strerror(-r));
    }
    r = merge_intent_remove(spool_fd, spool, res);
    if (r < 0)
        return r;

    res->recovery = published ? MERGE_RECOVERY_FINISHED : MERGE_RECOVERY_ROLLED_BACK;
    res->recovery_deleted = deleted;
    res->recovery_output = out_path;
    out_path = NULL;
    if (temp_removed) {
        res->recovery_temp = tmp_path;
        tmp_path = NULL;
    }
    return 0;
}

int merge_recover(int spool_fd, const char *spool, int done_fd, const char *done_path,
                  const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ char *intent_path = path_join(spool, SPOOL_MERGE_INTENT);
    _cleanup_free_ char *tmp_path = path_join(spool, SPOOL_MERGE_INTENT_TMP);
    struct merge_intent in = { 0 };
    int r;

    if (!intent_path || !tmp_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* An intent that never got its final name: the merge that wrote it
     * had not created its temp file yet. */
    if (unlinkat(spool_fd, SPOOL_MERGE_INTENT_TMP, 0) < 0 && errno != ENOENT)
        return merge_fail(res, -errno, "%s: cannot remove: %s", tmp_path, strerror(errno));
    r = merge_intent_read(spool_fd, intent_path, &in, res);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = recover_from(spool_fd, spool, done_fd, done_path, &in, intent_path, opts, res);
    merge_intent_free(&in);
    return r;
}
