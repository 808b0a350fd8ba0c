/* The run of logctl prune (docs/RETENTION.md): the lock, what a pending
 * merge names, then two independent parts, each listing its directory,
 * asking prune-select.c which files go, and removing them oldest first.
 *
 * What counts as finished with, and nothing else:
 *  - merged files: regular files of the merged directory under merge's
 *    default output names (spool_merged_name_parse). A merge's temp file,
 *    a file named by hand (--output), a symbolic link or a directory under
 *    such a name is never taken. The time in the name is the age's origin:
 *    it is when the merge wrote the file, and unlike the mtime it survives
 *    a copy, a restore from a backup or a touch, and it is the order an
 *    operator sees in ls.
 *  - shipped shards, only when <spool>/ship/progress exists (the spool is
 *    shipped): regular files of done/ under shard names, read as the
 *    shipper reads them (ship_sealed_read), whose header is the shard the
 *    name says, shipped whole by the shipper's own rule
 *    (ship_sealed_shipped). Their newest record's receive time is the age's
 *    origin: every record of the shard is at least that old.
 * Never active/, quarantine/, streams/ or anything else; never a file an
 * interrupted merge's intent names (its recovery needs the output and the
 * sources where they are); never through a symbolic link: the spool and
 * the merged directory are opened with O_NOFOLLOW (a link there is refused
 * with an error), done/ relative to the spool's descriptor, and every
 * entry is looked at with fstatat(AT_SYMLINK_NOFOLLOW) and removed with
 * unlinkat relative to its directory's descriptor, so nothing outside
 * those two directories can be reached whatever is planted in them.
 *
 * Exclusion: merge.lock, taken as merge takes it (flock, non-blocking) and
 * held to the end, so that no merge is reading or about to delete what is
 * removed, and the shipper's own deletions (which take it too) wait. A
 * dry run takes no lock and writes nothing, so that a member of the
 * logshard group, who may read the spool but not write it, can ask.
 *
 * Crash safety: every unlink stands alone, and what must stay is never a
 * candidate, so a prune killed at any instant has removed a subset of what
 * it was to remove, and the next run removes the rest. The positions of
 * the streams of the shipped shards it removes are durable in streams/
 * before the first of them is unlinked (ship_record_positions); a run
 * killed in between writes them again, which is harmless (the daemon
 * keeps the highest position of each stream). Each directory is fsynced
 * after its last unlink. */
#include <dirent.h>
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
#include "merge.h"
#include "prune.h"
#include "ship.h"
#include "ship_progress.h"
#include "spool_names.h"

/* ---- what the result collects ---- */

static int fail(struct prune_result *res, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct prune_result *res, int err, const char *fmt, ...)
{
    va_list ap;
    char *msg = NULL;

    /* The first failure is the one to report; the rest are in the
     * entries (failed unlinks) or follow from it. */
    if (res->error)
        return err;
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0)
        msg = NULL; /* the caller falls back to strerror(err) */
    va_end(ap);
    res->error = msg;
    return err;
}

static int add_note(struct prune_result *res, const char *dir, const char *name, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));
static int add_note(struct prune_result *res, const char *dir, const char *name, const char *fmt,
                    ...)
{
    struct prune_note *v = realloc(res->notes, (res->n_notes + 1) * sizeof(*v));
    va_list ap;
    char *why = NULL, *path;

    if (!v)
        return -ENOMEM;
    res->notes = v;
    va_start(ap, fmt);
    if (vasprintf(&why, fmt, ap) < 0)
        why = NULL;
    va_end(ap);
    path = path_join(dir, name);
    if (!why || !path) {
        free(why);
        free(path);
        return -ENOMEM;
    }
    v[res->n_notes++] = (struct prune_note){ .path = path, .why = why };
    return 0;
}

static int add_entry(struct prune_result *res, enum prune_kind kind, const char *dir,
                     const struct prune_file *f)
{
    struct prune_entry *v = realloc(res->entries, (res->n_entries + 1) * sizeof(*v));
    char *path;

    if (!v)
        return -ENOMEM;
    res->entries = v;
    path = path_join(dir, f->name);
    if (!path)
        return -ENOMEM;
    v[res->n_entries++] = (struct prune_entry){ .kind = kind,
                                                .path = path,
                                                .bytes = f->bytes,
                                                .time_ns = f->time_ns,
                                                .reason = f->reason };
    return 0;
}

void prune_result_free(struct prune_result *res)
{
    if (!res)
        return;
    for (size_t i = 0; i < res->n_entries; i++)
        free(res->entries[i].path);
    free(res->entries);
    for (size_t i = 0; i < res->n_notes; i++) {
        free(res->notes[i].path);
        free(res->notes[i].why);
    }
    free(res->notes);
    free(res->merged_dir);
    free(res->positions_file);
    free(res->error);
    memset(res, 0, sizeof(*res));
}

/* ---- opening directories without following links ---- */

/* Opens name (relative to at) as a directory, never through a symbolic
 * link: -ELOOP for a link (O_NOFOLLOW|O_DIRECTORY says ENOTDIR for one, so
 * the entry is looked at to tell a link from other files). */
static int open_dir_nofollow(int at, const char *name, int *ret_fd)
{
    struct stat st;
    int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (fd >= 0) {
        *ret_fd = fd;
        return 0;
    }
    if ((errno == ENOTDIR || errno == ELOOP) && fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISLNK(st.st_mode))
        return -ELOOP;
    return -errno;
}

static const char *dir_error(int r)
{
    return r == -ELOOP ? "a symbolic link; logctl prune follows none (name the directory it "
                         "points to)"
                       : strerror(-r);
}

/* ---- the lock ---- */

static int lock_spool(int spool_fd, const char *spool, int *ret_fd, struct prune_result *res)
{
    _cleanup_free_ char *path = path_join(spool, SPOOL_MERGE_LOCK);
    long pid;
    int r;

    if (!path)
        return fail(res, -ENOMEM, "out of memory");
    r = spool_merge_lock(spool_fd, ret_fd, &pid);
    if (r == -EBUSY) {
        res->lock_busy = true;
        if (pid > 0)
            return fail(res, -EBUSY,
                        "%s is held by pid %ld (a logctl merge, a shipper removing shipped "
                        "shards, or another prune); nothing was removed: run again once it is "
                        "done",
                        path, pid);
        return fail(res, -EBUSY,
                    "%s is held (by a logctl merge, a shipper removing shipped shards, or "
                    "another prune); nothing was removed: run again once it is done",
                    path);
    }
    if (r < 0)
        return fail(res, r, "%s: %s", path, strerror(-r));
    return 0;
}

/* ---- removing, oldest first ---- */

/* The identity of a file when it was judged, so that a name that came to
 * hold another file meanwhile is not removed in its place. */
struct judged {
    dev_t dev;
    ino_t ino;
};

/* Removes the files prune_select marked (v is in its order), adding an
 * entry for each; in a dry run only the entries. Returns 0 or the first
 * failure (the others are tried all the same): a file that could not be
 * removed has its error in its entry (-ESTALE: the name held another file
 * by then, which was kept); a failed fsync of the directory is
 * res->error. */
static int remove_marked(int dir_fd, const char *dir, enum prune_kind kind,
                         const struct prune_file *v, size_t n, const struct judged *ids,
                         bool dry_run, struct prune_result *res)
{
    bool removed = false;
    int r = 0, q;

    for (size_t i = 0; i < n; i++) {
        const struct prune_file *f = &v[i];
        struct stat st;

        if (f->reason == PRUNE_KEEP)
            continue;
        if (add_entry(res, kind, dir, f) < 0)
            return fail(res, -ENOMEM, "out of memory");
        if (dry_run)
            continue;
        if (fstatat(dir_fd, f->name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT)
                continue; /* someone else removed it: the goal holds */
            q = -errno;
        } else if (!S_ISREG(st.st_mode) || st.st_dev != ids[f->tag].dev ||
                   st.st_ino != ids[f->tag].ino) {
            /* Replaced since it was judged: the new file was not. */
            res->entries[res->n_entries - 1].error = -ESTALE;
            r = r ? r : -ESTALE;
            continue;
        } else if (unlinkat(dir_fd, f->name, 0) == 0) {
            removed = true;
            continue;
        } else if (errno == ENOENT) {
            continue;
        } else {
            q = -errno;
        }
        /* Said by its entry; the next file is tried all the same. */
        res->entries[res->n_entries - 1].error = q;
        r = r ? r : q;
    }
    /* A removal that a crash could undo is no loss, but the summary says
     * it is done: make it so. */
    if (removed) {
        q = fsync_dir_fd(dir_fd);
        if (q < 0)
            r = fail(res, q, "%s: fsync after removing files: %s", dir, strerror(-q));
    }
    return r;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Whether name is one of the n names of v, sorted by name_cmp: an
 * interrupted merge may list as many sources as done/ holds. */
static bool listed(char *const *v, size_t n, const char *name)
{
    return n > 0 && bsearch(&name, v, n, sizeof(*v), name_cmp) != NULL;
}

/* A growing array of candidates, with their identities and, for shards,
 * what was read of them. */
struct candidates {
    struct prune_file *files;
    struct judged *ids;
    struct ship_sealed *sealed; /* shipped shards only */
    char **names;
    size_t n, cap;
};

static void candidates_free(struct candidates *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->names[i]);
    free(c->files);
    free(c->ids);
    free(c->sealed);
    free(c->names);
    memset(c, 0, sizeof(*c));
}

static int candidates_add(struct candidates *c, const char *name, uint64_t time_ns,
                          const struct stat *st, const struct ship_sealed *sealed)
{
    char *copy;

    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 64;
        struct prune_file *f = realloc(c->files, cap * sizeof(*f));
        struct judged *ids;
        struct ship_sealed *s;
        char **names;

        if (!f)
            return -ENOMEM;
        c->files = f;
        ids = realloc(c->ids, cap * sizeof(*ids));
        if (!ids)
            return -ENOMEM;
        c->ids = ids;
        s = realloc(c->sealed, cap * sizeof(*s));
        if (!s)
            return -ENOMEM;
        c->sealed = s;
        names = realloc(c->names, cap * sizeof(*names));
        if (!names)
            return -ENOMEM;
        c->names = names;
        c->cap = cap;
    }
    copy = strdup(name);
    if (!copy)
        return -ENOMEM;
    c->names[c->n] = copy;
    c->ids[c->n] = (struct judged){ .dev = st->st_dev, .ino = st->st_ino };
    if (sealed)
        c->sealed[c->n] = *sealed;
    c->files[c->n] = (struct prune_file){
        .name = copy, .time_ns = time_ns, .bytes = (uint64_t)st->st_size, .tag = c->n
    };
    c->n++;
    return 0;
}

/* ---- merged files ---- */

static int prune_merged(int spool_fd, const struct prune_opts *opts,
                        const struct merge_pending *pending, struct prune_result *res)
{
    _cleanup_close_ int dir_fd = -1;
    struct candidates c = { 0 };
    struct dirent *de;
    DIR *d;
    int r;

    res->merged_dir = opts->merged_dir ? strdup(opts->merged_dir)
                                       : path_join(opts->spool, SPOOL_MERGED_DIR);
    if (!res->merged_dir)
        return fail(res, -ENOMEM, "out of memory");
    r = open_dir_nofollow(opts->merged_dir ? AT_FDCWD : spool_fd,
                          opts->merged_dir ? opts->merged_dir : SPOOL_MERGED_DIR, &dir_fd);
    if (r == -ENOENT) {
        res->merged_looked = true; /* nothing merged yet: nothing to remove */
        res->merged_dir_missing = true;
        return 0;
    }
    if (r < 0)
        return fail(res, r, "%s: %s; no merged file is removed", res->merged_dir, dir_error(r));
    r = opendir_at(dir_fd, &d);
    if (r < 0)
        return fail(res, r, "%s: cannot list: %s", res->merged_dir, strerror(-r));
    res->merged_looked = true;
    while ((de = readdir(d))) {
        uint64_t ns;
        struct stat st;

        if (spool_merged_name_parse(de->d_name, &ns, NULL) < 0)
            continue; /* not a name merge gives its output: not ours */
        if (fstatat(dir_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                r = add_note(res, res->merged_dir, de->d_name, "cannot be looked at (%s); kept",
                             strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
            r = add_note(res, res->merged_dir, de->d_name,
                         "a %s, not a merged file; left alone", file_type_name(st.st_mode));
        } else if (pending && strcmp(de->d_name, pending->output) == 0) {
            res->pending++;
            r = add_note(res, res->merged_dir, de->d_name,
                         "the output of an interrupted merge (%s/%s); kept until logctl merge "
                         "has finished it",
                         opts->spool, SPOOL_MERGE_INTENT);
        } else {
            r = candidates_add(&c, de->d_name, ns, &st, NULL);
        }
        if (r < 0)
            break;
    }
    closedir(d);
    if (r < 0) {
        candidates_free(&c);
        return fail(res, r, "out of memory");
    }
    res->merged_kept_bytes = prune_select(c.files, c.n, opts->now_ns, opts->merged_max_age_ns,
                                          opts->merged_max_bytes);
    for (size_t i = 0; i < c.n; i++)
        res->merged_kept += c.files[i].reason == PRUNE_KEEP;
    r = remove_marked(dir_fd, res->merged_dir, PRUNE_MERGED, c.files, c.n, c.ids, opts->dry_run,
                      res);
    candidates_free(&c);
    return r;
}

/* ---- shipped shards ---- */

/* Reads done/<name> as the shipper does and checks that its header is the
 * shard the name says. Returns 0, or a negative errno with *ret_why. */
static int read_shard(int done_fd, const char *name, const struct spool_name *sn,
                      struct ship_sealed *ret, struct stat *ret_st, const char **ret_why)
{
    _cleanup_close_ int fd = -1;
    int r = open_regular_at(done_fd, name, O_NOFOLLOW, &fd, NULL);

    if (r < 0) {
        *ret_why = strerror(-r);
        return r;
    }
    /* The identity judged is the file read, not what the name held when
     * it was listed. */
    if (fstat(fd, ret_st) < 0) {
        r = -errno;
        *ret_why = strerror(-r);
        return r;
    }
    r = ship_sealed_read(fd, ret);
    if (r < 0) {
        *ret_why = r == -EBADMSG ? "not one whole sealed shard" : strerror(-r);
        return r;
    }
    if (ret->h.shard_id != sn->id || strcmp(ret->h.producer, sn->producer) != 0) {
        *ret_why = "its header names another shard";
        return -EBADMSG;
    }
    return 0;
}

static int prune_shipped(int spool_fd, const struct prune_opts *opts,
                         const struct merge_pending *pending, struct prune_result *res)
{
    _cleanup_free_ struct positions_entry *shipped = NULL;
    _cleanup_free_ char *done_path = path_join(opts->spool, SPOOL_DONE_DIR);
    _cleanup_close_ int done_fd = -1;
    struct candidates c = { 0 };
    size_t n_shipped = 0, k = 0;
    const char *why = NULL;
    struct ship_sealed *gone = NULL;
    struct dirent *de;
    DIR *d;
    int r;

    if (!done_path)
        return fail(res, -ENOMEM, "out of memory");
    res->shipped_looked = true;
    /* Read under the lock: the shipper only ever moves it forward, so what
     * it says is shipped stays shipped. */
    r = ship_progress_load(spool_fd, &shipped, &n_shipped, &why);
    if (r == -ENOENT)
        return 0; /* not shipped: done/ is merge's alone */
    if (r < 0)
        return fail(res, r,
                    "%s/%s/%s: cannot read what logctl ship has shipped: %s; no sealed shard is "
                    "removed",
                    opts->spool, SHIP_DIR, SHIP_PROGRESS_FILE,
                    r == -EBADMSG && why ? why : strerror(-r));
    res->shipping = true;
    r = open_dir_nofollow(spool_fd, SPOOL_DONE_DIR, &done_fd);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return fail(res, r, "%s: %s; no sealed shard is removed", done_path, dir_error(r));
    r = opendir_at(done_fd, &d);
    if (r < 0)
        return fail(res, r, "%s: cannot list: %s", done_path, strerror(-r));
    while ((de = readdir(d))) {
        struct spool_name sn;
        struct ship_sealed ss;
        struct stat st;

        if (spool_name_parse(de->d_name, SPOOL_SHARD, &sn) < 0)
            continue; /* no shard's name: not ours to judge */
        if (fstatat(done_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                r = add_note(res, done_path, de->d_name, "cannot be looked at (%s); kept",
                             strerror(errno));
        } else if (!S_ISREG(st.st_mode)) {
            r = add_note(res, done_path, de->d_name, "a %s, not a sealed shard; left alone",
                         file_type_name(st.st_mode));
        } else if (read_shard(done_fd, de->d_name, &sn, &ss, &st, &why) < 0) {
            r = add_note(res, done_path, de->d_name,
                         "cannot be read as a sealed shard (%s); kept (logctl verify tells more)",
                         why);
        } else if (!ship_sealed_shipped(&ss, shipped, n_shipped)) {
            res->not_shipped++;
        } else if (pending && listed(pending->sources, pending->n_sources, de->d_name)) {
            res->pending++;
            r = add_note(res, done_path, de->d_name,
                         "a source of an interrupted merge (%s/%s); kept until logctl merge has "
                         "finished it",
                         opts->spool, SPOOL_MERGE_INTENT);
        } else {
            r = candidates_add(&c, de->d_name, ss.newest_ns, &st, &ss);
        }
        if (r < 0)
            break;
    }
    closedir(d);
    if (r < 0) {
        candidates_free(&c);
        return fail(res, r, "out of memory");
    }
    res->shipped_kept_bytes = prune_select(c.files, c.n, opts->now_ns, opts->shipped_max_age_ns,
                                           opts->shipped_max_bytes);
    for (size_t i = 0; i < c.n; i++)
        res->shipped_kept += c.files[i].reason == PRUNE_KEEP;
    /* The daemon learns where a stream continues from done/: before the
     * first shard leaves, the streams of all that leave go to streams/,
     * durably; without that, none leaves. */
    if (!opts->dry_run && c.n > res->shipped_kept) {
        gone = calloc(c.n, sizeof(*gone));
        if (!gone) {
            candidates_free(&c);
            return fail(res, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < c.n; i++)
            if (c.files[i].reason != PRUNE_KEEP)
                gone[k++] = c.sealed[c.files[i].tag];
        r = ship_record_positions(spool_fd, "prune", gone, k, &res->positions_file);
        free(gone);
        if (r < 0) {
            candidates_free(&c);
            res->shipped_kept += k;
            return fail(res, r,
                        "%s/%s: cannot record the stream positions of the %zu shipped shards to "
                        "remove: %s; none was removed",
                        opts->spool, SPOOL_STREAMS_DIR, k,
                        r == -EINVAL ? "a stream position out of range" : strerror(-r));
        }
    }
    r = remove_marked(done_fd, done_path, PRUNE_SHIPPED, c.files, c.n, c.ids, opts->dry_run, res);
    candidates_free(&c);
    return r;
}

/* ---- the run ---- */

int prune_run(const struct prune_opts *opts, struct prune_result *res)
{
    _cleanup_close_ int spool_fd = -1;
    _cleanup_close_ int lock_fd = -1;
    struct merge_pending pending = { 0 };
    bool have_pending = false;
    bool merged = opts->merged_max_age_ns || opts->merged_max_bytes;
    bool shipped = opts->shipped_max_age_ns || opts->shipped_max_bytes;
    char *why = NULL;
    int r, first = 0;

    memset(res, 0, sizeof(*res));
    if (!merged && !shipped)
        return 0; /* no limit: nothing is opened, nothing is taken */
    r = open_dir_nofollow(AT_FDCWD, opts->spool, &spool_fd);
    if (r < 0)
        return fail(res, r, "%s: %s", opts->spool, dir_error(r));
    if (!opts->dry_run) {
        r = lock_spool(spool_fd, opts->spool, &lock_fd, res);
        if (r < 0)
            return r;
    }
    /* A merge killed half-way: its output and sources stay for the next
     * merge, which proves one against the other. An intent that cannot be
     * read names nothing that is known, so nothing is removed. */
    r = merge_pending_read(spool_fd, opts->spool, &pending, &why);
    if (r == 0) {
        have_pending = true;
        qsort(pending.sources, pending.n_sources, sizeof(*pending.sources), name_cmp);
    } else if (r != -ENOENT) {
        r = fail(res, r, "%s; nothing is removed until logctl merge can deal with it",
                 why ? why : strerror(-r));
        free(why);
        return r;
    }
    if (merged) {
        r = prune_merged(spool_fd, opts, have_pending ? &pending : NULL, res);
        first = r;
    }
    if (shipped) {
        r = prune_shipped(spool_fd, opts, have_pending ? &pending : NULL, res);
        if (first == 0)
            first = r;
    }
    merge_pending_free(&pending);
    return first;
}
