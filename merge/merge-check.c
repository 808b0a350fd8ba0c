/* The check pass of logctl merge, and what becomes of a source that fails
 * it (docs/MERGE.md, "Damaged sources").
 *
 * Every record of every source is read through the shard reader before
 * anything is written: the header must match the file name, every record's
 * length and CRC32C must hold, the seal trailer (when there is one) must
 * agree with what was read, and the file must end there. An earlier merge
 * checked a sealed shard from its two ends only, which cannot see a flipped
 * byte inside a record; it then copied the damage into the output, where a
 * reader stops at it, and with --delete removed the only other copy. The
 * sources are usually still in the page cache, since they were sealed
 * recently, so the read costs memory bandwidth rather than disk time
 * (docs/BENCHMARKS.md has the figures).
 *
 * A source that fails is never merged and never deleted. A damaged one
 * (bad bytes, cut short, empty, misnamed, not a shard at all, such as the
 * lone seal trailer an older daemon could leave on a full disk) is moved
 * unchanged to <spool>/quarantine/, where `logctl cat` and `verify` can
 * still read what is left of it, so that it does not come up again at
 * every merge. One that could not be read (permissions, an I/O error) may
 * be fine, so it stays in done/ and is reported at every merge until
 * someone looks. An entry that is not a regular file is never opened for
 * reading in a way that could block (open_regular_at), and stays where it
 * is: the daemon never makes one, so someone put it there on purpose.
 *
 * The moves happen before the merge writes its intent, so a moved source is
 * in no intent and no output. A merge killed during the moves leaves each
 * source either in done/, where the next merge checks it again, or in
 * quarantine/; with the link(2) fallback, possibly under both names, which
 * the next move recognises by the inode. */
#include "merge-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "shard_format.h"
#include "spool_names.h"

/* Errors that say nothing about the source but stop the whole merge. */
static bool fatal_error(int err)
{
    return err == -ENOMEM || err == -EMFILE || err == -ENFILE;
}

/* Records what is wrong with s. Returns 0, or -ENOMEM after merge_fail. */
__attribute__((format(printf, 5, 6))) static int set_bad(struct merge_source *s,
                                                         struct merge_result *res, int err,
                                                         uint64_t offset, const char *fmt, ...)
{
    va_list ap;
    char *why = NULL;

    va_start(ap, fmt);
    if (vasprintf(&why, fmt, ap) < 0)
        why = NULL;
    va_end(ap);
    if (!why)
        return merge_fail(res, -ENOMEM, "out of memory");
    free(s->bad_why);
    s->bad = err;
    s->bad_offset = offset;
    s->bad_why = why;
    return 0;
}

int merge_check_source(int done_fd, const char *done_path, struct merge_source *s,
                       bool keep_open, struct merge_result *res)
{
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    struct stat st;
    mode_t mode = 0;
    uint64_t headers = 0;
    int r;

    s->bad = 0;
    s->bad_offset = UINT64_MAX;
    r = open_regular_at(done_fd, s->name, O_NOFOLLOW, &fd, &mode);
    if (r == -EISDIR || r == -EBADFD)
        return set_bad(s, res, r, UINT64_MAX, "a %s, not a regular file", file_type_name(mode));
    if (r == -ELOOP)
        return set_bad(s, res, r, UINT64_MAX, "a symbolic link, not a regular file");
    if (fatal_error(r))
        return merge_fail(res, r, "%s/%s: %s", done_path, s->name, strerror(-r));
    if (r < 0)
        return set_bad(s, res, r, UINT64_MAX, "cannot open it: %s", strerror(-r));
    if (fstat(fd, &st) < 0)
        return set_bad(s, res, -errno, UINT64_MAX, "cannot stat it: %s", strerror(errno));

    r = shard_reader_new(&reader, fd);
    if (r < 0)
        return merge_fail(res, r, "%s/%s: %s", done_path, s->name, strerror(-r));
    s->newest_ns = 0;
    s->trailer_newest_ns = 0;
    while ((r = shard_reader_next(reader, &item)) > 0) {
        if (item.kind == SHARD_ITEM_TRAILER) {
            s->trailer_newest_ns = item.trailer->newest_ns;
            continue;
        }
        if (item.kind != SHARD_ITEM_HEADER) {
            if (item.timestamp_ns > s->newest_ns)
                s->newest_ns = item.timestamp_ns;
            continue;
        }
        if (!s->newest_ns)
            s->newest_ns = item.header->created_ns;
        if (++headers > 1) {
            r = set_bad(s, res, -EBADMSG, item.offset,
                        "a second shard header (a file in done/ must hold exactly one shard)");
            goto out;
        }
        if (strcmp(item.header->producer, s->producer) != 0 || item.header->shard_id != s->id) {
            r = set_bad(s, res, -EBADMSG, item.offset,
                        "shard header says producer '%s' shard id %016" PRIx64
                        ", which does not match the file name",
                        item.header->producer, item.header->shard_id);
            goto out;
        }
        /* Read here, where the header is read anyway, for the order of the
         * output (merge_order_streams) and the positions --delete records. */
        s->has_stream = shard_header_has_stream(item.header);
        memcpy(s->stream_id, item.header->stream_id, sizeof(s->stream_id));
        s->first_position = item.header->first_position;
        s->uid = item.header->uid;
    }
    if (r < 0) {
        uint64_t off;
        const char *why;

        shard_reader_error(reader, &off, &why);
        if (fatal_error(r))
            r = merge_fail(res, r, "%s/%s: %s", done_path, s->name, strerror(-r));
        else if (r == -EBADMSG || r == -ENODATA)
            r = set_bad(s, res, r, off, "%s", why ? why : strerror(-r));
        else
            r = set_bad(s, res, r, off, "%s: %s", why ? why : "read error", strerror(-r));
        goto out;
    }
    s->bytes = shard_reader_valid_end(reader);
    s->records = shard_reader_records(reader);
    if ((uint64_t)st.st_size != s->bytes) {
        r = set_bad(s, res, -EBUSY, UINT64_MAX,
                    "its size changed while it was read (%" PRIu64 " bytes, then %" PRIu64
                    "); is something still writing it?",
                    (uint64_t)st.st_size, s->bytes);
        goto out;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    if (keep_open) {
        s->fd = fd;
        fd = -1;
    }
    r = 0;
out:
    shard_reader_free(reader);
    return r;
}

/* Appends a problem; it owns quarantined_as from here on, even on failure. */
static int add_problem(struct merge_result *res, enum merge_problem_kind kind, const char *name,
                       uint64_t offset, const char *why, char *quarantined_as, int move_error)
{
    struct merge_problem *v = reallocarray(res->problems, res->n_problems + 1, sizeof(*v));
    struct merge_problem *p;

    if (!v) {
        free(quarantined_as);
        return merge_fail(res, -ENOMEM, "out of memory");
    }
    res->problems = v;
    p = &v[res->n_problems];
    *p = (struct merge_problem){ .kind = kind, .offset = offset, .move_error = move_error };
    p->name = strdup(name);
    p->why = strdup(why);
    if (!p->name || !p->why) {
        free(p->name);
        free(p->why);
        free(quarantined_as);
        return merge_fail(res, -ENOMEM, "out of memory");
    }
    p->quarantined_as = quarantined_as;
    res->n_problems++;
    return 0;
}

int merge_note_not_regular(int done_fd, const char *done_path, const char *producer,
                           struct merge_result *res)
{
    DIR *d;
    int r = opendir_at(done_fd, &d);

    if (r < 0)
        return merge_fail(res, r, "%s: cannot list: %s", done_path, strerror(-r));
    for (;;) {
        char prod[WIRE_PRODUCER_NAME_MAX + 1], why[64];
        struct dirent *de;
        struct stat st;
        uint64_t id;

        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno != 0)
                r = merge_fail(res, -errno, "%s: cannot list: %s", done_path, strerror(errno));
            break;
        }
        if (de->d_type == DT_REG)
            continue;
        if (merge_parse_source_name(de->d_name, prod, &id) < 0)
            continue;
        if (producer && strcmp(prod, producer) != 0)
            continue;
        /* fstatat never opens, so a FIFO or a device cannot block it. */
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* gone since readdir */
            r = merge_fail(res, -errno, "%s/%s: %s", done_path, de->d_name, strerror(errno));
            break;
        }
        if (S_ISREG(st.st_mode))
            continue; /* DT_UNKNOWN: merge_list_sources took it */
        snprintf(why, sizeof(why), "a %s, not a regular file", file_type_name(st.st_mode));
        r = add_problem(res, MERGE_PROBLEM_NOT_REGULAR, de->d_name, UINT64_MAX, why, NULL, 0);
        if (r < 0)
            break;
    }
    (void)closedir(d); /* read-only directory stream: nothing to lose */
    return r;
}

/* Opens <spool>/quarantine/, creating it when missing. The spool is synced
 * every time, existing or not: a merge killed after creating it and before
 * the sync would otherwise move files into a directory whose own name may
 * not survive a crash. */
static int open_quarantine(int spool_fd, int *ret_fd)
{
    int fd, r;

    if (mkdirat(spool_fd, SPOOL_QUARANTINE_DIR, 0750) < 0 && errno != EEXIST)
        return -errno;
    fd = openat(spool_fd, SPOOL_QUARANTINE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    r = fsync_dir_fd(spool_fd);
    if (r < 0) {
        (void)close(fd); /* read-only directory descriptor */
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* Moves done/<name> to quarantine/ (spool_quarantine_move: its own name,
 * or with ".1" to ".999" added, never replacing a file). Returns 0 with the
 * new name in *ret_qname, or a negative errno (the file stays in done/). */
static int quarantine_one(int done_fd, int q_fd, const char *name, char **ret_qname)
{
    bool second_name;
    char *qname;
    int r = spool_quarantine_move(done_fd, name, NULL, q_fd, 0, &qname, &second_name);

    if (r < 0)
        return r;
    /* An earlier move through link(2) was stopped before it removed the
     * done/ name: the quarantine name is already there. */
    if (second_name && unlinkat(done_fd, name, 0) < 0) {
        r = -errno;
        free(qname);
        return r;
    }
    *ret_qname = qname;
    return 0;
}

int merge_set_aside(int spool_fd, const char *spool, int done_fd, const char *done_path,
                    struct merge_result *res)
{
    _cleanup_close_ int q_fd = -1;
    int q_err = 0, r = 0;
    bool moved = false;
    size_t n = 0;

    for (size_t i = 0; i < res->n_sources; i++) {
        struct merge_source *s = &res->sources[i];
        enum merge_problem_kind kind = MERGE_PROBLEM_UNREADABLE;
        char *qname = NULL;
        int move_error = 0;

        if (!s->bad) {
            res->sources[n++] = *s;
            continue;
        }
        if (s->bad == -EISDIR || s->bad == -EBADFD || s->bad == -ELOOP)
            kind = MERGE_PROBLEM_NOT_REGULAR;
        if (s->bad == -EBADMSG || s->bad == -ENODATA) {
            kind = MERGE_PROBLEM_DAMAGED;
            if (q_fd < 0 && q_err == 0)
                q_err = open_quarantine(spool_fd, &q_fd);
            move_error = q_err;
            if (q_fd >= 0) {
                move_error = quarantine_one(done_fd, q_fd, s->name, &qname);
                moved = moved || move_error == 0;
            }
        }
        if (r == 0)
            r = add_problem(res, kind, s->name, s->bad_offset,
                            s->bad_why ? s->bad_why : strerror(-s->bad), qname, move_error);
        else
            free(qname); /* out of memory already: the merge stops */
        /* Out of the list: not merged, never deleted. */
        free(s->name);
        free(s->bad_why);
        if (s->fd >= 0)
            (void)close(s->fd); /* opened read-only by the check */
    }
    res->n_sources = n;
    if (moved) {
        /* The new names first, then the removal of the old ones; until
         * both are durable a crash only brings a file back to done/,
         * where the next merge checks it again. */
        int e = fsync_dir_fd(q_fd);

        if (e == 0)
            e = fsync_dir_fd(done_fd);
        if (e < 0 && r == 0)
            r = merge_fail(res, e, "%s/%s and %s: fsync after moving damaged shards: %s", spool,
                           SPOOL_QUARANTINE_DIR, done_path, strerror(-e));
    }
    return r;
}

static int problem_cmp(const void *a, const void *b)
{
    const struct merge_problem *x = a, *y = b;

    return strcmp(x->name, y->name);
}

void merge_sort_problems(struct merge_result *res)
{
    if (res->n_problems > 1)
        qsort(res->problems, res->n_problems, sizeof(*res->problems), problem_cmp);
}

void merge_problems_free(struct merge_problem *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].name);
        free(v[i].why);
        free(v[i].quarantined_as);
    }
    free(v);
}
