/* Start-up check of <spool>/done: every entry named <producer>.<id>.shard
 * must be a sealed shard of that name, because merge, cat and verify take
 * it for one, and one that is not stops every merge of the spool.
 *
 * This daemon never puts anything else there, but older versions did: on a
 * full disk they sealed a shard whose header had never been written, which
 * left an empty file or a seal trailer without a header. An operator or a
 * stray program can plant anything, a FIFO included. What cannot be the
 * shard its name says is moved to quarantine/, never deleted, with a line
 * saying why; start-up goes on.
 *
 * The full check costs a few system calls per file: open (never blocking:
 * open_regular_at), fstat, one pread of the first block, which holds the
 * whole of most shards, and at most two more preads for the two ends of
 * the seal trailer, the way logctl merge checks a sealed shard
 * (docs/MERGE.md). A valid header for the file's name and a trailer whose
 * lengths add up to the file's size prove the file is one whole sealed
 * shard. Only a file without such a trailer (version 1, or sealed without
 * one on a full disk) is read through record by record.
 *
 * Even so, with 100,000 small shards the full check took about 1 s with
 * the files in the page cache and 16 s from a cold cache (reading one
 * block of each file), against 0.06 s and 0.3 s for the listing alone. So
 * it runs once: after a full check that could read every file, a stamp
 * file beside done/ (<spool>/done.checked) records it, and later starts
 * look only at the entries readdir reports as something other than a
 * regular file (FIFOs and the like, which are moved away without being
 * opened). What this
 * version puts in done/ is valid by construction; a regular file someone
 * copies there by hand later is for merge to judge, or for the next full
 * check once the stamp is deleted.
 *
 * A file whose header is valid but whose records are damaged (a flipped
 * bit, a torn tail) is a shard with damage, not a stranger: it stays in
 * done/, reported; logctl merge, which reads every record, sets it aside in
 * quarantine/ with the offset of the damage, and logctl cat still reads
 * every intact record of it there. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "recovery-internal.h"
#include "shard_format.h"
#include "spool_names.h"

/* The first read of a file: one block, the whole of a small shard. */
#define HEAD_READ 4096u

/* The stamp, SPOOL_DONE_CHECKED: written into the spool beside done/
 * (under SPOOL_DONE_CHECKED_TMP first) once a full check found nothing it
 * could not read (not into done/, whose every file counts as a shard for
 * the figures of logctl status). Its text names the version of the check,
 * so a later version can ask for a new one by changing it, and the inode
 * of done/, so a done/ put back from elsewhere is checked again. */
#define STAMP_FORMAT                                                                \
    "logshardd checked every shard in done/ (inode %ju) at start-up (check 1).\n"   \
    "Delete this file to have the next start check them all again.\n"
#define STAMP_MAX 256u

enum verdict {
    VERDICT_SHARD,   /* a whole shard of its name */
    VERDICT_INVALID, /* not a shard of its name: quarantine it */
    VERDICT_DAMAGED, /* a shard of its name with damaged records */
};

struct check {
    enum verdict verdict;
    uint64_t offset; /* damaged: where the damage starts */
    char why[SPOOL_NAME_SIZE + 160];
};

static void set_verdict(struct check *c, enum verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_verdict(struct check *c, enum verdict v, const char *fmt, ...)
{
    va_list ap;

    c->verdict = v;
    va_start(ap, fmt);
    (void)vsnprintf(c->why, sizeof(c->why), fmt, ap); /* a cut reason still says enough */
    va_end(ap);
}

/* Bytes [offset, offset + len) of the file: from head when it holds them,
 * else read. Returns 0, -ENODATA when the file is shorter, or -errno. */
static int bytes_at(int fd, const unsigned char *head, size_t head_len, uint64_t offset,
                    unsigned char *out, size_t len)
{
    ssize_t n;

    if (offset + len <= head_len) {
        memcpy(out, head + offset, len);
        return 0;
    }
    n = pread(fd, out, len, (off_t)offset);
    if (n < 0)
        return -errno;
    return (size_t)n == len ? 0 : -ENODATA;
}

/* Whether the file ends with a seal trailer that closes the shard whose
 * header (of header_len bytes) starts it: 1, 0, or a negative errno. */
static int trailer_closes(int fd, const unsigned char *head, size_t head_len, uint64_t size,
                          uint32_t header_len)
{
    unsigned char tail[SHARD_TRAILER_TAIL], mark[8];
    struct shard_trailer t;
    uint32_t trailer_len;
    const char *why;
    int r;

    if (size < (uint64_t)header_len + SHARD_TRAILER_MIN)
        return 0;
    r = bytes_at(fd, head, head_len, size - sizeof(tail), tail, sizeof(tail));
    if (r < 0)
        return r == -ENODATA ? 0 : r;
    trailer_len = wire_get_u32(tail + SHARD_TRAILER_TAIL - 8);
    if (trailer_len < SHARD_TRAILER_MIN || trailer_len > size - header_len)
        return 0;
    r = bytes_at(fd, head, head_len, size - trailer_len, mark, sizeof(mark));
    if (r < 0)
        return r == -ENODATA ? 0 : r;
    if (shard_decode_trailer_ends(mark, tail, size, &t, &why) < 0 || t.shard_len < header_len)
        return 0;
    return 1;
}

/* Reads the file through with the shard reader: the slow path, for a file
 * whose ends do not prove it whole. Returns 0 with *c set, or -errno. */
static int read_through(int fd, struct check *c)
{
    struct shard_reader *reader = NULL;
    struct shard_item item;
    uint64_t headers = 0, offset;
    const char *why;
    int r;

    r = shard_reader_new(&reader, fd);
    if (r < 0)
        return r;
    while ((r = shard_reader_next(reader, &item)) == 1) {
        if (item.kind == SHARD_ITEM_HEADER && ++headers > 1) {
            /* A merged file under a shard's name: the daemon writes one
             * header per file, and merge takes a source for one shard. */
            set_verdict(c, VERDICT_INVALID,
                        "a second shard header at offset %" PRIu64 " (a merged file, not a "
                        "shard)",
                        item.offset);
            shard_reader_free(reader);
            return 0;
        }
    }
    if (r == 0) {
        c->verdict = VERDICT_SHARD;
    } else if (r == -EBADMSG || r == -ENODATA) {
        shard_reader_error(reader, &offset, &why);
        c->offset = offset;
        set_verdict(c, VERDICT_DAMAGED, "%s", why);
        r = 0;
    }
    shard_reader_free(reader);
    return r;
}

/* Checks one open file of size bytes against the producer and id of its
 * name. Returns 0 with *c set, or -errno of a read. */
static int check_file(int fd, uint64_t size, const struct spool_name *named, struct check *c)
{
    unsigned char head[HEAD_READ];
    size_t want = size < sizeof(head) ? (size_t)size : sizeof(head);
    struct shard_header h;
    const char *why;
    ssize_t n;
    int r;

    if (size == 0) {
        set_verdict(c, VERDICT_INVALID, "empty file (no shard header)");
        return 0;
    }
    n = pread(fd, head, want, 0);
    if (n < 0)
        return -errno;
    r = shard_decode_header(head, (size_t)n, &h, &why);
    if (r == -EAGAIN) {
        set_verdict(c, VERDICT_INVALID, "file ends inside a shard header");
        return 0;
    }
    if (r < 0) {
        if ((size_t)n >= 4 && wire_get_u32(head) == SHARD_TRAILER_MARKER)
            set_verdict(c, VERDICT_INVALID,
                        "a seal trailer without a shard header (what older versions sealed "
                        "when a full disk kept the header from being written)");
        else
            set_verdict(c, VERDICT_INVALID, "%s", why);
        return 0;
    }
    if (h.producer_len != named->producer_len ||
        memcmp(h.producer, named->producer, named->producer_len) != 0 ||
        h.shard_id != named->id) {
        set_verdict(c, VERDICT_INVALID,
                    "its header is for producer %s, shard %016" PRIx64
                    ", not the one its name says",
                    h.producer, h.shard_id);
        return 0;
    }
    if (h.version >= 2) {
        r = trailer_closes(fd, head, (size_t)n, size, h.header_len);
        if (r < 0)
            return r;
        if (r == 1) {
            c->verdict = VERDICT_SHARD;
            return 0;
        }
    }
    return read_through(fd, c);
}

/* An entry open_regular_at would not open. */
static int check_not_regular(struct recovery *rec, const char *name, int err)
{
    struct stat st;
    char why[160];

    if (fstatat(rec->done_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            return 0; /* gone since the listing */
        return recovery_fail(rec, RECOVERY_DONE, name, "stat", -errno);
    }
    if (S_ISREG(st.st_mode))
        return 0; /* replaced by a file since the listing: the next full check sees it */
    if (recovery_is_special(st.st_mode)) {
        snprintf(why, sizeof(why), "a %s, not a shard (the daemon writes only regular files)",
                 file_type_name(st.st_mode));
        return recovery_quarantine(rec, RECOVERY_DONE, name, &st, why);
    }
    if (S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) {
        /* merge, cat and verify skip these; nothing to move. */
        rec->stats.done_ignored++;
        report(rec, RECOVERY_LOG_WARNING, "left done/%s alone: a %s, not a shard", name,
               file_type_name(st.st_mode));
        return 0;
    }
    return recovery_fail(rec, RECOVERY_DONE, name, "open", err);
}

int recovery_check_done(struct recovery *rec, const struct recovery_entry *e)
{
    const char *name = e->name;
    _cleanup_close_ int fd = -1;
    struct spool_name named;
    struct check c;
    struct stat st;
    int r;

    if (spool_name_parse(name, SPOOL_SHARD, &named) < 0)
        return 0;
    if (!rec->done_full) {
        /* Only entries that are no regular file, and those readdir could
         * not type, are looked at: a stat, and never an open. */
        if (e->type == DT_UNKNOWN) {
            if (fstatat(rec->done_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : recovery_fail(rec, RECOVERY_DONE, name, "stat", -errno);
            if (S_ISREG(st.st_mode))
                return 0;
        }
        return check_not_regular(rec, name, -EBADFD);
    }
    r = open_regular_at(rec->done_fd, name, O_NOFOLLOW, &fd, NULL);
    if (r == -ENOENT)
        return 0; /* merged with --delete since the listing: not ours to judge */
    if (r == -EBADFD || r == -EISDIR || r == -ELOOP)
        return check_not_regular(rec, name, r);
    if (r < 0)
        return recovery_fail(rec, RECOVERY_DONE, name, "open", r);
    if (fstat(fd, &st) < 0)
        return recovery_fail(rec, RECOVERY_DONE, name, "fstat", -errno);
    rec->stats.done_checked++;

    memset(&c, 0, sizeof(c));
    r = check_file(fd, (uint64_t)st.st_size, &named, &c);
    if (r == -ENOMEM)
        return r;
    if (r < 0)
        return recovery_fail(rec, RECOVERY_DONE, name, "read", r);
    switch (c.verdict) {
    case VERDICT_SHARD:
        return 0;
    case VERDICT_DAMAGED:
        rec->stats.done_damaged++;
        report(rec, RECOVERY_LOG_WARNING,
               "done/%s: %s at offset %" PRIu64 "; left in done/: its header is valid, so only "
               "records are damaged, which logctl merge and verify report",
               name, c.why, c.offset);
        return 0;
    case VERDICT_INVALID:
        break;
    }
    return recovery_quarantine(rec, RECOVERY_DONE, name, &st, c.why);
}

/* The stamp's text for this done/, into buf (STAMP_MAX bytes); its length,
 * or a negative errno. */
static int stamp_text(struct recovery *rec, char *buf)
{
    struct stat st;
    int n;

    if (fstat(rec->done_fd, &st) < 0)
        return -errno;
    n = snprintf(buf, STAMP_MAX, STAMP_FORMAT, (uintmax_t)st.st_ino);
    return n > 0 && (unsigned)n < STAMP_MAX ? n : -ENAMETOOLONG;
}

/* Whether the spool carries the stamp of an earlier full check of this
 * done/ by this version of the check. A stamp that cannot be read as
 * exactly that (missing, cut short, of another version or another done/,
 * not a regular file) means: check everything. */
static bool stamp_present(struct recovery *rec)
{
    char want[STAMP_MAX], got[STAMP_MAX];
    _cleanup_close_ int fd = -1;
    int len = stamp_text(rec, want);
    ssize_t n;

    if (len < 0 || open_regular_at(rec->spool_fd, SPOOL_DONE_CHECKED, O_NOFOLLOW, &fd, NULL) < 0)
        return false;
    n = read_full(fd, got, sizeof(got));
    return n == len && memcmp(got, want, (size_t)len) == 0;
}

/* Other names are no shard to anyone (merge, cat and verify skip them
 * too): they are left alone without a word. After a full check, regular
 * files are not even kept in the list: a spool of many shards then costs
 * one pass of readdir. */
static bool wanted(const struct dirent *de, void *ctx)
{
    const struct recovery *rec = ctx;
    struct spool_name named;

    return (rec->done_full || de->d_type != DT_REG) &&
           spool_name_parse(de->d_name, SPOOL_SHARD, &named) == 0;
}

int recovery_done_plan(struct recovery *rec, struct recovery_entry **ret_entries,
                       size_t *ret_count)
{
    int r;

    rec->done_full = !stamp_present(rec);
    r = recovery_list_dir(rec->done_fd, wanted, rec, ret_entries, ret_count);
    if (r < 0)
        report(rec, RECOVERY_LOG_ERROR, "cannot read done/: %s", strerror(-r));
    return r;
}

void recovery_done_finish(struct recovery *rec)
{
    char text[STAMP_MAX];
    int fd, r;

    if (!rec->done_full || rec->stats.done_failed > 0)
        return;
    /* Not synced: a stamp lost in a crash costs one more full check, and a
     * torn one reads as missing. Written under a temp name and renamed, so
     * a reader never sees half of it. */
    r = stamp_text(rec, text);
    if (r >= 0) {
        size_t len = (size_t)r;

        fd = openat(rec->spool_fd, SPOOL_DONE_CHECKED_TMP,
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);
        if (fd < 0) {
            r = -errno;
        } else {
            r = write_all(fd, text, len);
            if (close(fd) < 0 && r == 0)
                r = -errno;
            if (r == 0 && renameat(rec->spool_fd, SPOOL_DONE_CHECKED_TMP, rec->spool_fd,
                                   SPOOL_DONE_CHECKED) < 0)
                r = -errno;
        }
    }
    if (r < 0)
        report(rec, RECOVERY_LOG_WARNING,
               "cannot write " SPOOL_DONE_CHECKED ": %s; the next start checks every shard in "
               "done/ again",
               strerror(-r));
}
