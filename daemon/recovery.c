/* Start-up recovery: owns what an earlier run left in <spool>/active.
 *
 * Every entry named <producer>.<16 hex>.tmp is read through the one shard
 * reader (common/shard_format.c). What it accepts (the header, then whole
 * records whose length and CRC32C check out) is the valid prefix; the torn
 * or corrupt tail after it is cut with ftruncate, and the file is sealed
 * through the same steps as seal.c seals (seal-steps.h): the trailer, then
 * fdatasync, then renameat into done/, then fsync of done/ and active/ (once
 * for all files, before recovery_run returns). A file
 * that cannot be a shard of its name (no valid header, or a header for
 * another producer or id) goes to <spool>/quarantine/ unchanged: recovery
 * never deletes bytes it cannot prove are a torn tail, and never overwrites.
 *
 * Recovery must be right after a crash at any instant, its own included.
 * Each step leaves a state the next run handles:
 *  - crash before or after the ftruncate, or before the fdatasync: the file
 *    is still in active/ and is simply read again (a cut that did not reach
 *    the disk is cut again);
 *  - crash after a rename into done/ or quarantine/ but before the
 *    directory syncs: the file may show up under both names, one inode.
 *    Recovery checks done/<stem>.shard (and quarantine/<name>) for the same
 *    inode first and then only removes the temp name, after syncing the
 *    directory that holds the other;
 *  - crash after creating quarantine/ but before syncing the spool: the
 *    spool is synced every time quarantine/ is opened, existing or not, so
 *    nothing is renamed into a directory whose own name is not durable.
 *
 * All names are single components relative to the directory descriptors.
 * This is blocking code; it runs once before the daemon listens.
 *
 * Known limit: when fdatasync of a file fails, the file stays in active/
 * and the next start syncs it again. By then the kernel may have dropped
 * the pages that failed; recovery re-reads and re-checks every CRC, so a
 * record that is gone is cut, but one still held only in the page cache
 * cannot be told apart from one on disk. */
#include "recovery.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "recovery-internal.h"
#include "seal-steps.h"
#include "shard_format.h"
#include "spool_names.h"

/* A temp file whose name has the shard form. */
struct candidate {
    const char *tmp_name;             /* in active/ */
    char shard_name[SPOOL_NAME_SIZE]; /* its sealed name in done/ */
    struct spool_name name;           /* the producer and id its name says */
};

/* What reading a temp file through found. */
struct scan {
    bool have_header;
    struct shard_header header;
    uint64_t keep_end; /* length of the valid prefix */
    uint64_t records;  /* records in it */
    uint64_t newest_ns; /* the latest record's receive time (0: no record) */
    bool sealed;        /* the prefix ends with a seal trailer */
    const char *why;   /* why the prefix ends before the file does (or why
                          there is no header); NULL when the file is whole */
    bool unwritten;    /* it ends at zeros: space written ahead, or a record
                          not written whole, nothing that was acknowledged */
};

/* A temp file name of the shard form, with its sealed name. */
static bool parse_name(const char *name, struct candidate *ret)
{
    if (spool_name_parse(name, SPOOL_TMP, &ret->name) < 0 ||
        spool_name_sealed(name, ret->shard_name, sizeof(ret->shard_name)) < 0)
        return false;
    ret->tmp_name = name;
    return true;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int recovery_fail(struct recovery *rec, enum recovery_dir dir, const char *name,
                  const char *what, int err)
{
    if (dir == RECOVERY_DONE) {
        rec->stats.done_failed++;
        report(rec, RECOVERY_LOG_ERROR,
               "cannot check done/%s: %s: %s; it stays in done/", name, what, strerror(-err));
        return 0;
    }
    rec->stats.files_failed++;
    report(rec, RECOVERY_LOG_ERROR,
           "cannot recover active/%s: %s: %s; it stays in active/ for the next start", name,
           what, strerror(-err));
    return 0;
}

static int fail_file(struct recovery *rec, const char *name, const char *what, int err)
{
    return recovery_fail(rec, RECOVERY_ACTIVE, name, what, err);
}

static int open_quarantine(struct recovery *rec)
{
    int fd, r;

    if (rec->quarantine_fd >= 0)
        return 0;
    if (mkdirat(rec->spool_fd, SPOOL_QUARANTINE_DIR, 0750) < 0 && errno != EEXIST) {
        r = -errno;
        report(rec, RECOVERY_LOG_ERROR, "cannot create " SPOOL_QUARANTINE_DIR "/: %s",
               strerror(-r));
        return r;
    }
    fd = openat(rec->spool_fd, SPOOL_QUARANTINE_DIR,
                O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        r = -errno;
        report(rec, RECOVERY_LOG_ERROR, "cannot open " SPOOL_QUARANTINE_DIR "/: %s",
               strerror(-r));
        return r;
    }
    /* Synced even when it already existed: an earlier run may have crashed
     * between creating it and syncing the spool. */
    r = fsync_dir_fd(rec->spool_fd);
    if (r < 0) {
        (void)close(fd); /* read-only directory descriptor */
        report(rec, RECOVERY_LOG_ERROR,
               "cannot sync the spool after creating " SPOOL_QUARANTINE_DIR "/: %s",
               strerror(-r));
        return r;
    }
    rec->quarantine_fd = fd;
    return 0;
}

int recovery_quarantine(struct recovery *rec, enum recovery_dir dir, const char *name,
                        const struct stat *st, const char *why)
{
    const char *from = dir == RECOVERY_DONE ? "done" : "active";
    int from_fd = dir == RECOVERY_DONE ? rec->done_fd : rec->active_fd;
    uint64_t *counter =
        dir == RECOVERY_DONE ? &rec->stats.done_quarantined : &rec->stats.files_quarantined;
    bool *sync_from = dir == RECOVERY_DONE ? &rec->sync_done : &rec->sync_active;
    _cleanup_free_ char *qname = NULL;
    bool second_name = false;
    int r = open_quarantine(rec);

    if (r < 0)
        return r;
    r = spool_quarantine_move(from_fd, name, st, rec->quarantine_fd, 0, &qname, &second_name);
    if (r == -EEXIST)
        return recovery_fail(rec, dir, name,
                             "every name for it in " SPOOL_QUARANTINE_DIR "/ is taken", r);
    if (r < 0)
        return recovery_fail(rec, dir, name, "cannot move it to " SPOOL_QUARANTINE_DIR "/", r);
    if (second_name) {
        /* An earlier recovery moved it here and was stopped before it
         * synced the directory it came from. Make the quarantine name
         * durable, then drop the old name. */
        r = fsync_dir_fd(rec->quarantine_fd);
        if (r < 0)
            return recovery_fail(rec, dir, name, "cannot sync " SPOOL_QUARANTINE_DIR "/", r);
        if (unlinkat(from_fd, name, 0) < 0)
            return recovery_fail(rec, dir, name, "cannot remove its second name", -errno);
        *sync_from = true;
        (*counter)++;
        report(rec, RECOVERY_LOG_WARNING,
               "quarantined %s/%s as " SPOOL_QUARANTINE_DIR "/%s: %s (an earlier recovery "
               "had moved it already)",
               from, name, qname, why);
        return 0;
    }
    *sync_from = rec->sync_quarantine = true;
    (*counter)++;
    report(rec, RECOVERY_LOG_WARNING, "quarantined %s/%s as " SPOOL_QUARANTINE_DIR "/%s: %s",
           from, name, qname, why);
    return 0;
}

static int quarantine(struct recovery *rec, const char *name, const struct stat *st,
                      const char *why)
{
    return recovery_quarantine(rec, RECOVERY_ACTIVE, name, st, why);
}

/* Reads fd through from the start. Returns 0 with *ret filled, or the
 * negative errno of a read error or of memory. */
static int scan_file(int fd, struct scan *ret)
{
    struct shard_reader *reader = NULL;
    struct shard_item item;
    struct scan s;
    int r;

    memset(&s, 0, sizeof(s));
    r = shard_reader_new(&reader, fd);
    if (r < 0)
        return r;
    /* Written as an active shard: zeros the daemon wrote ahead end what
     * it wrote, as a torn tail does. */
    shard_reader_set_active(reader);
    r = shard_reader_next(reader, &item);
    if (r == 1) {
        /* The reader returns nothing before a header. */
        s.have_header = true;
        s.header = *item.header;
        for (;;) {
            r = shard_reader_next(reader, &item);
            if (r != 1)
                break;
            if (item.kind == SHARD_ITEM_HEADER) {
                /* Valid in a merged file, never in one shard: the writer
                 * writes one header. What follows is not this shard's. */
                s.keep_end = item.offset;
                s.why = "a second shard header";
                r = 0;
                goto done;
            }
            if (item.kind == SHARD_ITEM_TRAILER)
                s.sealed = true;
            else if (item.timestamp_ns > s.newest_ns)
                s.newest_ns = item.timestamp_ns;
        }
    }
    if (r == 0) {
        s.keep_end = shard_reader_valid_end(reader);
    } else if (r == -EBADMSG || r == -ENODATA) {
        shard_reader_error(reader, &s.keep_end, &s.why);
        s.unwritten = shard_reader_error_unwritten(reader);
        r = 0;
    } else {
        shard_reader_free(reader);
        return r;
    }
    if (!s.have_header && !s.why)
        s.why = "no shard header";
done:
    s.records = shard_reader_records(reader);
    shard_reader_free(reader);
    *ret = s;
    return 0;
}

/* Appends the seal trailer the daemon did not get to write. Returns 0, or
 * the negative errno of the write after cutting the file back (the shard is
 * then sealed without a trailer, which is valid), or of that cut. */
static int write_trailer(struct recovery *rec, int fd, const struct scan *s, bool *ret_torn)
{
    struct shard_trailer t = {
        .shard_len = s->keep_end,
        .records = s->records,
        .newest_ns = s->newest_ns ? s->newest_ns : s->header.created_ns,
    };
    long align = fs_block_size(rec->done_fd, SHARD_ALIGN_MAX);
    _cleanup_free_ unsigned char *buf = NULL;
    int r;

    t.trailer_len = (uint32_t)shard_trailer_size(s->keep_end, align > 0 ? (size_t)align : 0);
    buf = malloc(t.trailer_len);
    if (!buf)
        return -ENOMEM;
    shard_encode_trailer(buf, &t);
    *ret_torn = false;
    if (lseek(fd, (off_t)s->keep_end, SEEK_SET) < 0)
        return -errno;
    r = write_all(fd, buf, t.trailer_len);
    if (r < 0 && ftruncate(fd, (off_t)s->keep_end) < 0) {
        *ret_torn = true; /* the next recovery cuts it */
        return -errno;
    }
    return r;
}

/* Seals active/<tmp> into done/: cut to the valid prefix, add the seal
 * trailer, sync, rename. */
static int seal_file(struct recovery *rec, const struct candidate *c, int fd,
                     const struct scan *s)
{
    struct stat st;
    uint64_t cut;
    int r;

    if (fstat(fd, &st) < 0)
        return fail_file(rec, c->tmp_name, "fstat", -errno);
    if ((uint64_t)st.st_size < s->keep_end)
        return fail_file(rec, c->tmp_name, "it shrank while it was read", -ESTALE);
    cut = (uint64_t)st.st_size - s->keep_end;
    if (cut > 0 && ftruncate(fd, (off_t)s->keep_end) < 0)
        return fail_file(rec, c->tmp_name, "cannot cut its tail", -errno);
    /* The steps of seal-steps.h, in its order; the directory syncs are
     * done once for all files, before recovery_run returns. */
    for (enum seal_step step = 0; step < SEAL_STEPS; step++) {
        switch (step) {
        case SEAL_STEP_TRAILER:
            if (!s->sealed && s->header.version >= 2) {
                bool torn = false;

                r = write_trailer(rec, fd, s, &torn);
                if (r < 0 && torn)
                    return fail_file(rec, c->tmp_name, "cannot cut a torn seal trailer", r);
                if (r < 0)
                    report(rec, RECOVERY_LOG_WARNING,
                           "active/%s: cannot write its seal trailer (%s); sealing it without one",
                           c->tmp_name, strerror(-r));
            }
            break;
        case SEAL_STEP_DATASYNC:
            /* The data (and the new size) must be on disk before the name
             * in done/ promises a complete shard. A failed sync is not
             * retried here. */
            if (fdatasync(fd) < 0)
                return fail_file(rec, c->tmp_name, seal_step_name(step), -errno);
            break;
        case SEAL_STEP_RENAME:
            r = spool_rename_noreplace(rec->active_fd, c->tmp_name, rec->done_fd,
                                       c->shard_name, 0, NULL);
            if (r < 0)
                return fail_file(rec, c->tmp_name, "cannot rename it into done/", r);
            break;
        case SEAL_STEP_SYNC_DONE:
            rec->sync_done = true;
            break;
        case SEAL_STEP_SYNC_ACTIVE:
            rec->sync_active = true;
            break;
        case SEAL_STEPS:
            break;
        }
    }
    rec->stats.files_sealed++;
    rec->stats.records_kept += s->records;
    rec->stats.bytes_cut += cut;
    /* Zeros are the normal end of a shard the daemon was writing when it
     * stopped (under one-flush every shard has space written ahead), so a
     * thousand producers' worth of them after a crash are not a thousand
     * warnings; bytes that are wrong are. */
    if (cut > 0)
        report(rec, s->unwritten ? RECOVERY_LOG_INFO : RECOVERY_LOG_WARNING,
               "recovered active/%s into done/: %" PRIu64 " records kept, %" PRIu64
               " bytes cut (%s at offset %" PRIu64 ")",
               c->tmp_name, s->records, cut, s->why ? s->why : "unexpected bytes", s->keep_end);
    else
        report(rec, RECOVERY_LOG_INFO, "recovered active/%s into done/: %" PRIu64
               " records, nothing cut", c->tmp_name, s->records);
    return 0;
}

/* A header and no record: the daemon makes a connection's first shard
 * file when it welcomes the connection, so every connection that had sent
 * nothing when the daemon stopped leaves one. Sealed, it would put an empty
 * shard in done/ for each; it holds nothing, so it goes. What follows the
 * header was never acknowledged: zeros are said, other bytes warned about. */
static int remove_recordless(struct recovery *rec, const struct candidate *c,
                             const struct scan *s)
{
    if (unlinkat(rec->active_fd, c->tmp_name, 0) < 0)
        return fail_file(rec, c->tmp_name, "cannot remove it", -errno);
    rec->sync_active = true;
    rec->stats.empty_removed++;
    if (s->why && !s->unwritten)
        report(rec, RECOVERY_LOG_WARNING,
               "removed active/%s: a header and no record, then bytes that are none (%s at "
               "offset %" PRIu64 ")",
               c->tmp_name, s->why, s->keep_end);
    else
        report(rec, RECOVERY_LOG_INFO,
               "removed active/%s: a header and no record (its connection had sent none)",
               c->tmp_name);
    return 0;
}

/* Handles one temp file. Returns 0 (also when this file failed) or a
 * negative errno that must stop recovery. */
static int recover_one(struct recovery *rec, const struct candidate *c)
{
    _cleanup_close_ int fd = -1;
    char why[SPOOL_NAME_SIZE + 160];
    struct stat st, other;
    struct scan s;
    int r;

    if (fstatat(rec->active_fd, c->tmp_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return fail_file(rec, c->tmp_name, "stat", -errno);
    if (recovery_is_special(st.st_mode)) {
        /* Never opened: opening a FIFO for reading waits for a writer. */
        snprintf(why, sizeof(why), "a %s, not a shard (the daemon writes only regular files)",
                 file_type_name(st.st_mode));
        return quarantine(rec, c->tmp_name, &st, why);
    }
    if (!S_ISREG(st.st_mode)) {
        rec->stats.files_ignored++;
        report(rec, RECOVERY_LOG_WARNING, "left active/%s alone: not a regular file",
               c->tmp_name);
        return 0;
    }
    rec->stats.files_scanned++;

    /* Already sealed? The seal renames, then syncs the directories; a crash
     * in between can leave the file under both names. */
    if (fstatat(rec->done_fd, c->shard_name, &other, AT_SYMLINK_NOFOLLOW) == 0) {
        if (!same_file(&st, &other)) {
            snprintf(why, sizeof(why),
                     "done/%s already exists and is a different file (the sealed one is kept)",
                     c->shard_name);
            return quarantine(rec, c->tmp_name, &st, why);
        }
        /* The temp name goes only once the done/ name is durable. */
        r = fsync_dir_fd(rec->done_fd);
        if (r < 0)
            return fail_file(rec, c->tmp_name, "cannot sync done/", r);
        if (unlinkat(rec->active_fd, c->tmp_name, 0) < 0)
            return fail_file(rec, c->tmp_name, "cannot remove its second name", -errno);
        rec->sync_active = true;
        rec->stats.duplicates_removed++;
        report(rec, RECOVERY_LOG_INFO,
               "removed active/%s: it is a second name of done/%s (a seal was interrupted "
               "after its rename)",
               c->tmp_name, c->shard_name);
        return 0;
    } else if (errno != ENOENT) {
        return fail_file(rec, c->tmp_name, "cannot stat its name in done/", -errno);
    }

    /* A crash between creating a shard and writing its header leaves an
     * empty file: it never held a record, so it is removed rather than
     * quarantined after every such crash. */
    if (st.st_size == 0) {
        if (unlinkat(rec->active_fd, c->tmp_name, 0) < 0)
            return fail_file(rec, c->tmp_name, "cannot remove the empty file", -errno);
        rec->sync_active = true;
        rec->stats.empty_removed++;
        report(rec, RECOVERY_LOG_INFO,
               "removed active/%s: empty (the daemon stopped before writing its header)",
               c->tmp_name);
        return 0;
    }

    fd = openat(rec->active_fd, c->tmp_name,
                O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return fail_file(rec, c->tmp_name, "open", -errno);
    if (fstat(fd, &other) < 0)
        return fail_file(rec, c->tmp_name, "fstat", -errno);
    if (!same_file(&st, &other))
        return fail_file(rec, c->tmp_name, "it was replaced while recovery ran", -ESTALE);

    r = scan_file(fd, &s);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return fail_file(rec, c->tmp_name, "read", r);
    if (!s.have_header)
        return quarantine(rec, c->tmp_name, &st, s.why);
    if (s.header.producer_len != c->name.producer_len ||
        memcmp(s.header.producer, c->name.producer, c->name.producer_len) != 0 ||
        s.header.shard_id != c->name.id) {
        snprintf(why, sizeof(why),
                 "its header is for producer %s, shard %016" PRIx64 ", not the one its name says",
                 s.header.producer, s.header.shard_id);
        return quarantine(rec, c->tmp_name, &st, why);
    }
    if (s.records == 0 && !s.sealed)
        return remove_recordless(rec, c, &s);
    return seal_file(rec, c, fd, &s);
}

/* Syncs the directories whose entries changed, the new names' directories
 * first. Returns 0 or the first error. */
static int sync_dirs(struct recovery *rec)
{
    const struct {
        bool needed;
        int fd;
        const char *name;
    } dirs[] = {
        { rec->sync_done, rec->done_fd, "done/" },
        { rec->sync_quarantine, rec->quarantine_fd, SPOOL_QUARANTINE_DIR "/" },
        { rec->sync_active, rec->active_fd, "active/" },
    };
    int first = 0;

    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        int r;

        if (!dirs[i].needed)
            continue;
        r = fsync_dir_fd(dirs[i].fd);
        if (r < 0) {
            report(rec, RECOVERY_LOG_ERROR, "cannot sync %s: %s", dirs[i].name, strerror(-r));
            if (first == 0)
                first = r;
        }
    }
    return first;
}

void recovery_free_entries(struct recovery_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(entries[i].name);
    free(entries);
}

static int compare_entries(const void *a, const void *b)
{
    return strcmp(((const struct recovery_entry *)a)->name,
                  ((const struct recovery_entry *)b)->name);
}

int recovery_list_dir(int dir_fd, bool (*keep)(const struct dirent *de, void *ctx), void *ctx,
                      struct recovery_entry **ret_entries, size_t *ret_count)
{
    /* A new open file description: readdir on a dup would move the shared
     * offset of the caller's descriptor. */
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct recovery_entry *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    DIR *dir;
    int r = 0;

    if (fd < 0)
        return -errno;
    dir = fdopendir(fd);
    if (!dir) {
        r = -errno;
        (void)close(fd); /* read-only directory descriptor */
        return r;
    }
    for (;;) {
        errno = 0;
        de = readdir(dir);
        if (!de) {
            r = errno ? -errno : 0;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (keep && !keep(de, ctx))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct recovery_entry *nv = reallocarray(v, ncap, sizeof(*v));

            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        v[n].name = strdup(de->d_name);
        if (!v[n].name) {
            r = -ENOMEM;
            break;
        }
        v[n].type = de->d_type;
        n++;
    }
    (void)closedir(dir); /* read-only; nothing to flush */
    if (r < 0) {
        recovery_free_entries(v, n);
        return r;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), compare_entries);
    *ret_entries = v;
    *ret_count = n;
    return 0;
}

int recovery_run(int spool_fd, int active_fd, int done_fd, const struct recovery_ops *ops,
                 struct recovery_stats *ret_stats)
{
    struct recovery rec = {
        .spool_fd = spool_fd,
        .active_fd = active_fd,
        .done_fd = done_fd,
        .quarantine_fd = -1,
        .ops = ops,
    };
    struct recovery_entry *active = NULL, *done = NULL;
    size_t n_active = 0, n_done = 0;
    struct candidate c;
    uint64_t total = 0, handled = 0;
    int r, rs;

    r = recovery_list_dir(active_fd, NULL, NULL, &active, &n_active);
    if (r < 0) {
        report(&rec, RECOVERY_LOG_ERROR, "cannot read active/: %s", strerror(-r));
        return r;
    }
    /* done/ is listed before anything is sealed into it: what this run
     * seals was just checked, and needs no second look. */
    r = recovery_done_plan(&rec, &done, &n_done);
    if (r < 0) {
        recovery_free_entries(active, n_active);
        return r;
    }
    for (size_t i = 0; i < n_active; i++)
        total += parse_name(active[i].name, &c);
    total += n_done;
    if (total > 0 && ops && ops->progress)
        ops->progress(ops->ctx, 0, total);

    for (size_t i = 0; i < n_active; i++) {
        if (!parse_name(active[i].name, &c)) {
            rec.stats.files_ignored++;
            report(&rec, RECOVERY_LOG_WARNING,
                   "left active/%s alone: not a shard temp file name "
                   "(<producer>.<16 hex digits>.tmp)",
                   active[i].name);
            continue;
        }
        r = recover_one(&rec, &c);
        if (r < 0)
            break;
        handled++;
        if (ops && ops->progress)
            ops->progress(ops->ctx, handled, total);
    }
    for (size_t i = 0; i < n_done && r == 0; i++) {
        r = recovery_check_done(&rec, &done[i]);
        if (r < 0)
            break;
        handled++;
        if (ops && ops->progress)
            ops->progress(ops->ctx, handled, total);
    }
    if (r == 0)
        recovery_done_finish(&rec);

    /* Also after a fatal error: whatever was renamed so far must be durable. */
    rs = sync_dirs(&rec);
    if (r == 0)
        r = rs;
    if (rec.quarantine_fd >= 0)
        (void)close(rec.quarantine_fd); /* read-only directory descriptor */
    recovery_free_entries(active, n_active);
    recovery_free_entries(done, n_done);
    if (r < 0)
        return r;

    if (rec.stats.files_scanned > 0)
        report(&rec, rec.stats.files_failed > 0 ? RECOVERY_LOG_WARNING : RECOVERY_LOG_INFO,
               "recovery: %" PRIu64 " temp shards in active/: %" PRIu64
               " sealed into done/ (%" PRIu64 " records kept, %" PRIu64 " bytes cut), %" PRIu64
               " quarantined, %" PRIu64 " duplicates and %" PRIu64 " empty files removed, %" PRIu64
               " failed",
               rec.stats.files_scanned, rec.stats.files_sealed, rec.stats.records_kept,
               rec.stats.bytes_cut, rec.stats.files_quarantined, rec.stats.duplicates_removed,
               rec.stats.empty_removed, rec.stats.files_failed);
    /* A clean done/ is the normal case and says nothing. */
    if (rec.stats.done_quarantined + rec.stats.done_damaged + rec.stats.done_failed > 0)
        report(&rec, RECOVERY_LOG_WARNING,
               "recovery: done/: %" PRIu64 " shards checked, %" PRIu64
               " entries quarantined (no valid shard of their name), %" PRIu64
               " damaged shards left for merge, %" PRIu64 " entries could not be checked",
               rec.stats.done_checked, rec.stats.done_quarantined, rec.stats.done_damaged,
               rec.stats.done_failed);
    if (ret_stats)
        *ret_stats = rec.stats;
    return 0;
}
