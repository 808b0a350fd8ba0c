/* logctl merge: concatenates the sealed shards of <spool>/done/ into one
 * merged file, which the shard reader reads like a single shard, and with
 * --delete removes the merged shards once the output is durable.
 *
 * Checking: two passes. The first lists and sorts the sources and reads
 * every record of every one through the shard reader (merge-check.c), so
 * that nothing damaged is copied and nothing unread is ever deleted; a
 * source that fails is moved to <spool>/quarantine/ (or, when it could not
 * be read or is no regular file, left where it is), reported, and left out,
 * before any output exists. The second copies each good source from the
 * file the first one checked, kept open in between where the open-file
 * limit allows; a source opened again is checked by identity (device,
 * inode, size) so that a file swapped between the passes cannot slip in
 * unchecked, and with --delete so is the name of a kept one.
 *
 * Order of the output: by producer name in byte order (strcmp), then by
 * shard id ascending. It is deterministic and keeps each producer's shards
 * in the order the daemon wrote them (ids increase over time).
 *
 * Selection: --producer narrows the list before anything is read; --before
 * keeps the shards whose every record was received before the given time,
 * which only the check pass knows, so every candidate of the producer is
 * checked (and a bad one is still set aside). Whole shards only: a
 * shard that straddles the time stays for a later merge.
 *
 * Exclusion: every merge, with or without --delete, holds
 * flock(LOCK_EX|LOCK_NB) on <spool>/merge.lock from before it looks at
 * anything until it returns; a second merge on the spool fails with -EBUSY.
 * The kernel drops the lock when the holder dies, so kill -9 never leaves a
 * stale lock. The file itself stays: removing it would let two merges lock
 * two different inodes under the same name.
 *
 * Steps of a merge; each starts only after the one before is durable:
 *   1. <spool>/merge.intent: the output's directory (absolute), its name,
 *      the temp name, whether sources are to be deleted, and every source
 *      name with its size, in output order. Written as merge.intent.tmp,
 *      fsynced, renamed, spool fsynced: a visible merge.intent is always
 *      complete. It ends with a CRC32C line anyway, so damage or a hand
 *      edit is recognised, and a damaged intent stops the merge (with a
 *      message) rather than guess which of the two ways below is safe.
 *   2. The temp file ".<output>.<pid>.tmp" next to the output (O_EXCL),
 *      the copy, fsync.
 *   3. renameat2(RENAME_NOREPLACE) to the output name: the commit point.
 *   4. fsync of the output's directory.
 *   5. --delete only: unlink each source, fsync done/.
 *   6. unlink merge.intent, fsync the spool.
 * Without --delete the intent is written too, only so that the temp of a
 * killed merge is known and removed by the next one; --output may point
 * anywhere, so scanning for temp names would not find it.
 *
 * Recovery, at the start of every merge, under the lock:
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
 *     fsynced (the crash may have come before step 4) and steps 5 and 6 run.
 *   - Either way the temp file is removed if present (a publish through
 *     link(2) leaves it as a second name) before the intent goes.
 * Recovery changes nothing until it has decided, and every step of it is
 * idempotent, so a recovery killed half-way is finished by the next merge.
 *
 * Known limits: a failed fsync of the output's directory or of done/ leaves
 * merge.intent in place, and the next merge fsyncs again before it deletes
 * anything; after an I/O error, a later fsync that succeeds proves less
 * than one that never failed. A merge needs write access to the spool
 * directory itself (lock and intent), not only to the output's directory.
 * An output path containing a newline is recorded escaped ("\n", "\\"). */
#include "merge.h"
#include "merge-check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileutil.h"
#include "shard_format.h"
#include "wire.h"

/* Not in every <linux/magic.h> yet. */
#ifndef BCACHEFS_SUPER_MAGIC
#define BCACHEFS_SUPER_MAGIC 0xca451a4e
#endif

/* How much copied output may wait before its write-back is started. */
#define WRITEBACK_STEP (8u * 1024u * 1024u)

#define SHARD_SUFFIX ".shard"
#define SHARD_ID_DIGITS 16u

/* copy_file_range takes a size_t but returns ssize_t; asking for at most
 * 1 GiB per call keeps every count far from either limit. */
#define COPY_CHUNK (1u << 30)
#define FALLBACK_BUFFER (1u << 20)

int merge_parse_source_name(const char *name, char *ret_producer, uint64_t *ret_id)
{
    size_t len = strlen(name);
    size_t suffix = strlen(SHARD_SUFFIX);
    const char *idp;
    size_t plen;
    uint64_t id = 0;

    if (len < 1 + 1 + SHARD_ID_DIGITS + suffix)
        return -EINVAL;
    if (memcmp(name + len - suffix, SHARD_SUFFIX, suffix) != 0)
        return -EINVAL;
    /* The id has no dots, so taking the 16 characters before ".shard" and
     * requiring a dot before them is the split at the last two dots. */
    idp = name + len - suffix - SHARD_ID_DIGITS;
    if (idp[-1] != '.')
        return -EINVAL;
    for (size_t i = 0; i < SHARD_ID_DIGITS; i++) {
        char c = idp[i];
        unsigned digit;

        if (c >= '0' && c <= '9')
            digit = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            digit = (unsigned)(c - 'a') + 10u;
        else
            return -EINVAL; /* the daemon writes lowercase only */
        id = (id << 4) | digit;
    }
    plen = (size_t)(idp - 1 - name);
    /* The rule also refuses a leading '.', which skips dotfiles. */
    if (wire_check_producer_name(name, plen) < 0)
        return -EINVAL;
    memcpy(ret_producer, name, plen);
    ret_producer[plen] = '\0';
    *ret_id = id;
    return 0;
}

static int source_cmp(const void *a, const void *b)
{
    const struct merge_source *x = a, *y = b;
    int c = strcmp(x->producer, y->producer);

    if (c != 0)
        return c;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

/* Frees what one source owns: its name and, if still open, its file. */
static void source_release(struct merge_source *s)
{
    free(s->name);
    s->name = NULL;
    free(s->bad_why);
    s->bad_why = NULL;
    if (s->fd >= 0)
        (void)close(s->fd); /* opened read-only */
    s->fd = -1;
}

void merge_sources_free(struct merge_source *sources, size_t count)
{
    if (!sources)
        return;
    for (size_t i = 0; i < count; i++)
        source_release(&sources[i]);
    free(sources);
}

int merge_list_sources(int done_dirfd, struct merge_source **ret_sources, size_t *ret_count)
{
    struct merge_source *v = NULL;
    size_t n = 0, cap = 0;
    DIR *d;
    int fd, r = 0;

    /* A fresh open file description, so the caller's fd keeps its offset and
     * stays open after closedir. */
    fd = openat(done_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        r = -errno;
        (void)close(fd); /* nothing was read through it */
        return r;
    }

    for (;;) {
        struct merge_source s;
        struct dirent *de;

        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno != 0)
                r = -errno;
            break;
        }
        memset(&s, 0, sizeof(s));
        s.fd = -1;
        if (merge_parse_source_name(de->d_name, s.producer, &s.id) < 0)
            continue;
        if (de->d_type != DT_REG) {
            struct stat st;

            if (de->d_type != DT_UNKNOWN)
                continue;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                    continue; /* gone since readdir; it is not ours to merge */
                r = -errno;
                break;
            }
            if (!S_ISREG(st.st_mode))
                continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct merge_source *nv = reallocarray(v, ncap, sizeof(*v));

            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        s.name = strdup(de->d_name);
        if (!s.name) {
            r = -ENOMEM;
            break;
        }
        v[n++] = s;
    }
    (void)closedir(d); /* read-only directory stream: nothing to lose */

    if (r < 0) {
        merge_sources_free(v, n);
        return r;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), source_cmp);
    *ret_sources = v;
    *ret_count = n;
    return 0;
}

static bool copy_unsupported(int err)
{
    /* What copy_file_range(2) reports when the kernel, the filesystem or the
     * pair of files cannot do it; the data is fine, only the method is not. */
    return err == EXDEV || err == EINVAL || err == EOPNOTSUPP || err == ENOSYS;
}

/* Writes all of buf at out_off, or at the file offset when out_off < 0. */
static int write_at(int fd, const unsigned char *buf, size_t len, int64_t out_off)
{
    if (out_off < 0)
        return write_all(fd, buf, len);
    while (len > 0) {
        ssize_t n = pwrite(fd, buf, len, (off_t)out_off);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        buf += n;
        len -= (size_t)n;
        out_off += n;
    }
    return 0;
}

int merge_copy_at(int in_fd, int out_fd, int64_t out_off, uint64_t len, bool force_fallback,
                  bool *ret_fell_back)
{
    uint64_t done = 0;
    bool fallback = force_fallback;
    unsigned char *buf;
    int r = 0;

    while (!fallback && done < len) {
        off64_t off_in = (off64_t)done;
        off64_t off_out = out_off + (off64_t)done;
        size_t want = len - done > COPY_CHUNK ? COPY_CHUNK : (size_t)(len - done);
        ssize_t n = copy_file_range(in_fd, &off_in, out_fd, out_off < 0 ? NULL : &off_out,
                                    want, 0);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (copy_unsupported(errno)) {
                fallback = true; /* continue from done with read/write */
                break;
            }
            return -errno;
        }
        /* 0 means end of input, and we know the size: the file shrank. */
        if (n == 0)
            return -ENODATA;
        done += (uint64_t)n;
    }

    if (done < len) {
        buf = malloc(FALLBACK_BUFFER);
        if (!buf)
            return -ENOMEM;
        while (done < len) {
            size_t want = len - done > FALLBACK_BUFFER ? FALLBACK_BUFFER : (size_t)(len - done);
            ssize_t n = pread(in_fd, buf, want, (off_t)done);

            if (n < 0) {
                if (errno == EINTR)
                    continue;
                r = -errno;
                break;
            }
            if (n == 0) {
                r = -ENODATA;
                break;
            }
            r = write_at(out_fd, buf, (size_t)n, out_off < 0 ? -1 : out_off + (int64_t)done);
            if (r < 0)
                break;
            done += (uint64_t)n;
        }
        free(buf);
        if (r < 0)
            return r;
    }
    if (ret_fell_back)
        *ret_fell_back = fallback;
    return 0;
}

int merge_copy(int in_fd, int out_fd, uint64_t len, bool force_fallback, bool *ret_fell_back)
{
    return merge_copy_at(in_fd, out_fd, -1, len, force_fallback, ret_fell_back);
}

/* Opens a source read-only (never through a symlink, never blocking on
 * anything but a regular file) and stats it. */
static int open_source(int done_fd, const struct merge_source *s, const char *path,
                       int *ret_fd, struct stat *ret_st, struct merge_result *res)
{
    mode_t mode = 0;
    int fd, r = open_regular_at(done_fd, s->name, O_NOFOLLOW, &fd, &mode);

    if (r == -EISDIR || r == -EBADFD)
        return merge_fail(res, -ESTALE, "%s: now a %s, not the file that was checked", path,
                          file_type_name(mode));
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    if (fstat(fd, ret_st) < 0) {
        int e = errno;
        (void)close(fd); /* read-only; the fstat error is what matters */
        return merge_fail(res, -e, "%s: %s", path, strerror(e));
    }
    *ret_fd = fd;
    return 0;
}

/* Pass two for one source: the same file as checked, copied whole. */
static int copy_source(int done_fd, const char *done_path, struct merge_source *s,
                       int out_fd, int64_t out_off, const char *tmp_path, bool deleting,
                       bool *fallback, struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(done_path, s->name);
    _cleanup_close_ int fd = s->fd;
    struct stat st;
    bool fell_back = false;
    int r;

    s->fd = -1; /* closed here, whatever happens */
    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* A reopened file may be another one; a kept one matters only when
     * its name is to be deleted. */
    bool check_identity = fd < 0 || deleting;

    if (fd >= 0 && deleting) {
        /* The file is the one checked; the name must still be its name,
         * with nothing added, or --delete would remove what was never
         * copied. Without --delete the checked bytes are copied from the
         * checked file, whatever became of its name. */
        if (fstatat(done_fd, s->name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            return merge_fail(res, -errno, "%s: %s", path, strerror(errno));
    } else if (fd < 0) {
        r = open_source(done_fd, s, path, &fd, &st, res);
        if (r < 0)
            return r;
    }
    if (check_identity &&
        (st.st_dev != s->dev || st.st_ino != s->ino || (uint64_t)st.st_size != s->bytes))
        return merge_fail(res, -ESTALE, "%s: replaced or changed since it was checked", path);

    /* fallback may be shared by two copying threads. */
    r = merge_copy_at(fd, out_fd, out_off, s->bytes, __atomic_load_n(fallback, __ATOMIC_RELAXED),
                      &fell_back);
    if (r == -ENODATA)
        return merge_fail(res, r,
                          "%s: ended before its %" PRIu64
                          " bytes were copied (changed during the merge?)",
                          path, s->bytes);
    if (r < 0)
        return merge_fail(res, r, "%s: copying to %s: %s", path, tmp_path, strerror(-r));
    /* Once the kernel said no, asking again for every shard is pointless. */
    if (fell_back)
        __atomic_store_n(fallback, true, __ATOMIC_RELAXED);
    return 0;
}

/* Splits path into its directory and its last component, both new strings. */
static int split_output(const char *path, char **ret_dir, char **ret_base)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir, *b;

    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EISDIR;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    b = strdup(base);
    if (!dir || !b) {
        free(dir);
        free(b);
        return -ENOMEM;
    }
    *ret_dir = dir;
    *ret_base = b;
    return 0;
}

/* ---- the intent file ---- */

#define INTENT_MAGIC "logshard-merge-intent 1"
/* Far above any real merge (about 100 bytes per source), and a bound on
 * what a damaged file can make us allocate. */
#define INTENT_MAX ((uint64_t)256 << 20)
#define COMPARE_BUFFER (256u * 1024u)

/* An intent as read back. The sources carry name and bytes only. */
struct intent {
    bool delete_sources;
    char *dir;    /* absolute */
    char *output; /* a name inside dir */
    char *temp;   /* a name inside dir */
    uint64_t bytes;
    struct merge_source *sources;
    size_t n_sources;
};

static void intent_free(struct intent *in)
{
    free(in->dir);
    free(in->output);
    free(in->temp);
    merge_sources_free(in->sources, in->n_sources);
    memset(in, 0, sizeof(*in));
}

/* Paths are recorded on one line each; a newline or a backslash in one is
 * escaped so the line structure survives any name. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\\\", f);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static int unescape(const char *s, size_t len, char **ret)
{
    char *out = malloc(len + 1);
    size_t n = 0;

    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];

        if (c == '\0')
            goto bad;
        if (c == '\\') {
            if (++i == len)
                goto bad;
            if (s[i] == '\\')
                c = '\\';
            else if (s[i] == 'n')
                c = '\n';
            else
                goto bad;
        }
        out[n++] = c;
    }
    out[n] = '\0';
    *ret = out;
    return 0;
bad:
    free(out);
    return -EBADMSG;
}

/* Formats the intent text, ending with "end <crc32c of all before>\n". */
static int intent_format(bool delete_sources, const char *dir, const char *output,
                         const char *temp, const struct merge_source *v, size_t n,
                         char **ret_buf, size_t *ret_len)
{
    char *buf = NULL;
    size_t len = 0;
    uint64_t total = 0;
    FILE *f = open_memstream(&buf, &len);

    if (!f)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        total += v[i].bytes;
    fprintf(f, "%s\ndelete %d\ndir ", INTENT_MAGIC, delete_sources ? 1 : 0);
    put_escaped(f, dir);
    fputs("\noutput ", f);
    put_escaped(f, output);
    fputs("\ntemp ", f);
    put_escaped(f, temp);
    fprintf(f, "\nbytes %" PRIu64 "\nsources %zu\n", total, n);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "source %" PRIu64 " %s\n", v[i].bytes, v[i].name);
    if (fflush(f) != 0 || ferror(f)) {
        (void)fclose(f); /* memory stream: the error is already known */
        free(buf);
        return -ENOMEM;
    }
    fprintf(f, "end %08" PRIx32 "\n", crc32c(buf, len));
    if (fclose(f) != 0) {
        free(buf);
        return -ENOMEM;
    }
    if ((uint64_t)len > INTENT_MAX) {
        free(buf);
        return -EFBIG;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

/* Digits only, no sign, no overflow. */
static int parse_u64(const char *s, size_t len, uint64_t *ret)
{
    uint64_t v = 0;

    if (len == 0 || len > 20)
        return -EBADMSG;
    for (size_t i = 0; i < len; i++) {
        unsigned d;

        if (s[i] < '0' || s[i] > '9')
            return -EBADMSG;
        d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EBADMSG;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

/* Reads the line at *pos that starts with "<key> " and returns the rest of
 * it (without the newline) in *ret_val, *ret_len. */
static int next_field(const char *buf, size_t end, size_t *pos, const char *key,
                      const char **ret_val, size_t *ret_len)
{
    size_t kl = strlen(key);
    const char *line = buf + *pos;
    const char *nl;

    if (*pos >= end)
        return -EBADMSG;
    nl = memchr(line, '\n', end - *pos);
    if (!nl || (size_t)(nl - line) < kl + 1 || memcmp(line, key, kl) != 0 || line[kl] != ' ')
        return -EBADMSG;
    *ret_val = line + kl + 1;
    *ret_len = (size_t)(nl - line) - kl - 1;
    *pos = (size_t)(nl - buf) + 1;
    return 0;
}

static bool plain_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

/* Parses and checks an intent. On -EBADMSG, *ret_why says what is wrong. */
static int intent_parse(const char *buf, size_t len, struct intent *ret, const char **ret_why)
{
    struct intent in = { 0 };
    const char *v, *endline;
    size_t vl, pos = 0, body;
    uint64_t u, n = 0, sum = 0;
    uint32_t crc;
    int r;

    *ret_why = "damaged (not a complete intent)";
    /* No NUL anywhere, so every string taken from it is all of its line. */
    if (len == 0 || buf[len - 1] != '\n' || memchr(buf, '\0', len))
        return -EBADMSG;
    /* The last line is "end <crc>"; the CRC covers everything before it. */
    endline = memrchr(buf, '\n', len - 1);
    body = endline ? (size_t)(endline - buf) + 1 : 0;
    pos = body;
    if (next_field(buf, len, &pos, "end", &v, &vl) < 0 || vl != 8)
        return -EBADMSG;
    crc = 0;
    for (size_t i = 0; i < 8; i++) {
        char c = v[i];

        if (c >= '0' && c <= '9')
            crc = (crc << 4) | (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            crc = (crc << 4) | ((uint32_t)(c - 'a') + 10u);
        else
            return -EBADMSG;
    }
    if (crc != crc32c(buf, body)) {
        *ret_why = "damaged (checksum mismatch)";
        return -EBADMSG;
    }

    *ret_why = "not in the expected format";
    if (body < sizeof(INTENT_MAGIC) ||
        memcmp(buf, INTENT_MAGIC "\n", sizeof(INTENT_MAGIC)) != 0) {
        *ret_why = "not an intent of this version";
        return -EBADMSG;
    }
    pos = sizeof(INTENT_MAGIC);
    if (next_field(buf, body, &pos, "delete", &v, &vl) < 0 || vl != 1 || (*v != '0' && *v != '1'))
        return -EBADMSG;
    in.delete_sources = *v == '1';
    r = next_field(buf, body, &pos, "dir", &v, &vl);
    if (r == 0)
        r = unescape(v, vl, &in.dir);
    if (r == 0)
        r = next_field(buf, body, &pos, "output", &v, &vl);
    if (r == 0)
        r = unescape(v, vl, &in.output);
    if (r == 0)
        r = next_field(buf, body, &pos, "temp", &v, &vl);
    if (r == 0)
        r = unescape(v, vl, &in.temp);
    if (r == 0)
        r = next_field(buf, body, &pos, "bytes", &v, &vl);
    if (r == 0)
        r = parse_u64(v, vl, &in.bytes);
    if (r == 0)
        r = next_field(buf, body, &pos, "sources", &v, &vl);
    if (r == 0)
        r = parse_u64(v, vl, &n);
    if (r < 0)
        goto out;
    r = -EBADMSG;
    /* Recovery opens and unlinks these: only names it could have written. */
    if (in.dir[0] != '/' || !plain_name(in.output) || !plain_name(in.temp) ||
        strcmp(in.output, in.temp) == 0)
        goto out;
    /* Each source line takes more than 8 bytes, which bounds n by the
     * file's size before anything is allocated for it. */
    if (n > body / 8)
        goto out;
    if (n > 0) {
        in.sources = calloc((size_t)n, sizeof(*in.sources));
        if (!in.sources) {
            r = -ENOMEM;
            goto out;
        }
        for (size_t i = 0; i < (size_t)n; i++)
            in.sources[i].fd = -1;
    }
    for (size_t i = 0; i < (size_t)n; i++) {
        struct merge_source *s = &in.sources[i];
        const char *sp;

        if (next_field(buf, body, &pos, "source", &v, &vl) < 0)
            goto out;
        sp = memchr(v, ' ', vl);
        if (!sp || parse_u64(v, (size_t)(sp - v), &u) < 0)
            goto out;
        s->name = strndup(sp + 1, vl - (size_t)(sp - v) - 1);
        if (!s->name) {
            r = -ENOMEM;
            goto out;
        }
        in.n_sources = i + 1;
        if (merge_parse_source_name(s->name, s->producer, &s->id) < 0)
            goto out;
        s->bytes = u;
        if (sum + u < sum)
            goto out;
        sum += u;
    }
    if (pos != body || sum != in.bytes)
        goto out;
    *ret = in;
    return 0;
out:
    intent_free(&in);
    return r;
}

/* Reads <spool>/merge.intent. Returns -ENOENT (without setting an error)
 * when there is none. */
static int intent_read(int spool_fd, const char *path, struct intent *ret,
                       struct merge_result *res)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    const char *why = NULL;
    struct stat st;
    mode_t mode = 0;
    ssize_t n;
    int r;

    r = open_regular_at(spool_fd, MERGE_INTENT_NAME, O_NOFOLLOW, &fd, &mode);
    if (r == -ENOENT)
        return -ENOENT;
    if (r == -EISDIR || r == -EBADFD || r == -ELOOP)
        return merge_fail(res, -EBADMSG,
                          "%s: not a merge intent (a %s, not a regular file); check it and "
                          "remove it by hand",
                          path, r == -ELOOP ? "symbolic link" : file_type_name(mode));
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    if (fstat(fd, &st) < 0)
        return merge_fail(res, -errno, "%s: %s", path, strerror(errno));
    if ((uint64_t)st.st_size > INTENT_MAX)
        return merge_fail(res, -EBADMSG,
                          "%s: not a merge intent (too large); check it and remove it by hand",
                          path);
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return merge_fail(res, -ENOMEM, "out of memory");
    n = read_full(fd, buf, (size_t)st.st_size);
    if (n < 0)
        return merge_fail(res, (int)n, "%s: %s", path, strerror((int)-n));
    r = intent_parse(buf, (size_t)n, ret, &why);
    if (r == -EBADMSG)
        return merge_fail(res, r,
                          "%s: %s; cannot tell whether the merge that wrote it published its "
                          "output, so nothing is changed: check it and remove it by hand",
                          path, why);
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    return 0;
}

/* Step 1: merge.intent.tmp, fsync, rename to merge.intent, fsync the spool. */
static int intent_write(int spool_fd, const char *spool, const char *text, size_t len,
                        struct merge_result *res)
{
    _cleanup_free_ char *tmp_path = path_join(spool, MERGE_INTENT_TMP_NAME);
    _cleanup_free_ char *path = path_join(spool, MERGE_INTENT_NAME);
    int fd, r;

    if (!tmp_path || !path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* We hold the lock and removed any leftover, so O_TRUNC clobbers
     * nothing of anyone's. */
    fd = openat(spool_fd, MERGE_INTENT_TMP_NAME,
                O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return merge_fail(res, -errno, "%s: cannot create: %s", tmp_path, strerror(errno));
    r = write_all(fd, text, len);
    if (r < 0) {
        r = merge_fail(res, r, "%s: write: %s", tmp_path, strerror(-r));
        goto fail_fd;
    }
    if (fsync(fd) < 0) {
        r = merge_fail(res, -errno, "%s: fsync: %s", tmp_path, strerror(errno));
        goto fail_fd;
    }
    if (close(fd) < 0) {
        fd = -1;
        r = merge_fail(res, -errno, "%s: close: %s", tmp_path, strerror(errno));
        goto fail_tmp;
    }
    fd = -1;
    if (renameat(spool_fd, MERGE_INTENT_TMP_NAME, spool_fd, MERGE_INTENT_NAME) < 0) {
        r = merge_fail(res, -errno, "%s: cannot rename %s to it: %s", path, MERGE_INTENT_TMP_NAME,
                       strerror(errno));
        goto fail_tmp;
    }
    r = fsync_dir_fd(spool_fd);
    if (r < 0) {
        /* Not durable, so not relied on: nothing was created yet, and an
         * intent that does survive is rolled back by the next merge. */
        (void)unlinkat(spool_fd, MERGE_INTENT_NAME, 0);
        return merge_fail(res, r, "%s: fsync: %s", spool, strerror(-r));
    }
    return 0;

fail_fd:
    (void)close(fd); /* the file is discarded */
fail_tmp:
    /* A leftover merge.intent.tmp is removed by the next merge anyway. */
    (void)unlinkat(spool_fd, MERGE_INTENT_TMP_NAME, 0);
    return r;
}

/* Step 6, and the end of a recovery. */
static int intent_remove(int spool_fd, const char *spool, struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(spool, MERGE_INTENT_NAME);
    int r;

    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    if (unlinkat(spool_fd, MERGE_INTENT_NAME, 0) < 0)
        return merge_fail(res, -errno, "%s: cannot remove: %s", path, strerror(errno));
    r = fsync_dir_fd(spool_fd);
    if (r < 0)
        return merge_fail(res, r, "%s: fsync after removing %s: %s", spool, MERGE_INTENT_NAME,
                          strerror(-r));
    return 0;
}

/* ---- the lock ---- */

static int lock_spool(int spool_fd, const char *spool, int *ret_fd, struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(spool, MERGE_LOCK_NAME);
    char buf[32];
    int fd;

    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    fd = openat(spool_fd, MERGE_LOCK_NAME, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return merge_fail(res, -errno, "%s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        ssize_t n;
        char *end;
        long pid = 0;

        if (e != EWOULDBLOCK) {
            (void)close(fd); /* never locked; the flock error is the news */
            return merge_fail(res, -e, "%s: flock: %s", path, strerror(e));
        }
        /* The pid is only for the message; it may be missing or half
         * written if the holder has just started. */
        n = pread(fd, buf, sizeof(buf) - 1, 0);
        (void)close(fd); /* read-only use */
        if (n > 0) {
            buf[n] = '\0';
            errno = 0;
            pid = strtol(buf, &end, 10);
            if (errno != 0 || end == buf || (*end != '\n' && *end != '\0') || pid <= 0)
                pid = 0;
        }
        if (pid > 0)
            return merge_fail(res, -EBUSY,
                              "another logctl merge is running on %s (pid %ld holds %s)",
                              spool, pid, path);
        return merge_fail(res, -EBUSY, "another logctl merge is running on %s (it holds %s)", spool,
                          path);
    }
    {
        int len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());

        if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
            /* Ignored: the lock is what matters, and a missing pid only
             * makes the message of a merge that finds it busy shorter. */
        }
    }
    *ret_fd = fd;
    return 0;
}

/* ---- deleting sources, and recovery ---- */

static void step(const struct merge_opts *opts, enum merge_step s)
{
    if (opts->at_step)
        opts->at_step(s, opts->userdata);
}

/* Step 5: unlinks each source still present and fsyncs done/. A source
 * already gone is fine: a killed run may have removed it. */
static int delete_sources(int done_fd, const char *done_path, const struct merge_source *v,
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
        step(opts, MERGE_STEP_SOURCE_DELETED);
    }
    *ret_deleted = deleted;
    r = fsync_dir_fd(done_fd);
    if (r < 0)
        return merge_fail(res, r, "%s: fsync after removing the merged sources: %s", done_path,
                          strerror(-r));
    step(opts, MERGE_STEP_SOURCES_DELETED);
    return 0;
}

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
                            const struct intent *in, const char *intent_path,
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

static int recover_from(int spool_fd, const char *spool, int done_fd, const char *done_path,
                        const struct intent *in, const char *intent_path,
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
            r = delete_sources(done_fd, done_path, in->sources, in->n_sources, opts, &deleted,
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
    r = intent_remove(spool_fd, spool, res);
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

static int recover(int spool_fd, const char *spool, int done_fd, const char *done_path,
                   const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ char *intent_path = path_join(spool, MERGE_INTENT_NAME);
    _cleanup_free_ char *tmp_path = path_join(spool, MERGE_INTENT_TMP_NAME);
    struct intent in = { 0 };
    int r;

    if (!intent_path || !tmp_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* An intent that never got its final name: the merge that wrote it
     * had not created its temp file yet. */
    if (unlinkat(spool_fd, MERGE_INTENT_TMP_NAME, 0) < 0 && errno != ENOENT)
        return merge_fail(res, -errno, "%s: cannot remove: %s", tmp_path, strerror(errno));
    r = intent_read(spool_fd, intent_path, &in, res);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    r = recover_from(spool_fd, spool, done_fd, done_path, &in, intent_path, opts, res);
    intent_free(&in);
    return r;
}

/* ---- the merge ---- */

/* Gives tmp the name base, never replacing an existing file. renameat2 with
 * RENAME_NOREPLACE does that atomically; filesystems that do not support the
 * flag answer EINVAL, and then link(2), which also fails with EEXIST rather
 * than replace, followed by unlinking the temp name gives the same
 * guarantee. A check-then-rename would race with another merge.
 * *ret_temp_left says whether the temp name is still there (the link path,
 * when its unlink failed): the output is published all the same. */
static int publish(int dir_fd, const char *tmp, const char *base, bool *ret_temp_left)
{
    *ret_temp_left = false;
    if (renameat2(dir_fd, tmp, dir_fd, base, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -errno;
    if (linkat(dir_fd, tmp, dir_fd, base, 0) < 0)
        return -errno;
    if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
        *ret_temp_left = true;
    return 0;
}

/* Makes <spool>/merged/ (durably) and returns its path. */
static int default_output_dir(const char *spool, char **ret_path, struct merge_result *res)
{
    char *merged = path_join(spool, "merged");
    int r;

    if (!merged)
        return merge_fail(res, -ENOMEM, "out of memory");
    r = mkdir_if_missing(merged, 0750);
    if (r < 0) {
        r = merge_fail(res, r, "%s: cannot create: %s", merged, strerror(-r));
        free(merged);
        return r;
    }
    /* The new directory entry must be durable before a file in it is. */
    r = fsync_dir_path(spool);
    if (r < 0) {
        free(merged);
        return merge_fail(res, r, "%s: fsync: %s", spool, strerror(-r));
    }
    *ret_path = merged;
    return 0;
}

/* "merged-YYYYmmddTHHMMSS.nnnnnnnnnZ.lsm": names sort by time, and two
 * merges in the same second get different names. The clock may repeat a
 * value (coarse clocks, a step back), so a taken name gets "-<n>" added
 * until one is free; merges of one spool are serialised by the lock, so
 * the check cannot race with another default-named merge, and publish()
 * refuses to replace anything in any case. */
static int default_output_name(int dir_fd, const char *dir, char **ret_base,
                               struct merge_result *res)
{
    struct timespec ts;
    struct tm tm;
    char date[32];

    (void)clock_gettime(CLOCK_REALTIME, &ts); /* cannot fail for this clock */
    if (!gmtime_r(&ts.tv_sec, &tm) || strftime(date, sizeof(date), "%Y%m%dT%H%M%S", &tm) == 0)
        return merge_fail(res, -EOVERFLOW, "cannot format the current time");
    for (unsigned n = 0; n < 1000; n++) {
        struct stat st;
        char *base;
        int k;

        if (n == 0)
            k = asprintf(&base, "merged-%s.%09ldZ.lsm", date, (long)ts.tv_nsec);
        else
            k = asprintf(&base, "merged-%s.%09ldZ-%u.lsm", date, (long)ts.tv_nsec, n);
        if (k < 0)
            return merge_fail(res, -ENOMEM, "out of memory");
        if (fstatat(dir_fd, base, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno == ENOENT) {
                *ret_base = base;
                return 0;
            }
            k = -errno;
            free(base);
            return merge_fail(res, k, "%s: %s", dir, strerror(-k));
        }
        free(base);
    }
    return merge_fail(res, -EEXIST, "%s: no free output name for the time %s", dir, date);
}

static bool keep_producer(const struct merge_source *s, const struct merge_opts *opts)
{
    return strcmp(s->producer, opts->producer) == 0;
}

static bool keep_before(const struct merge_source *s, const struct merge_opts *opts)
{
    return s->newest_ns < opts->before_ns;
}

/* Narrows res->sources to those keep() selects, in the same order. */
static void keep_sources(struct merge_result *res,
                         bool (*keep)(const struct merge_source *, const struct merge_opts *),
                         const struct merge_opts *opts)
{
    size_t n = 0;

    for (size_t i = 0; i < res->n_sources; i++) {
        if (keep(&res->sources[i], opts))
            res->sources[n++] = res->sources[i];
        else
            source_release(&res->sources[i]);
    }
    res->n_sources = n;
}

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
    }
    return NULL;
}

/* The check pass, the even sources on this thread and the odd ones on a
 * second one. Returns 1 when every source was checked, 0 when no thread
 * could be started (the caller checks them itself), or the error that
 * stopped the merge at the lowest source in output order, as if they had
 * been checked one by one, with res->error set. */
static int check_in_parallel(int done_fd, const char *done_path, struct merge_result *res,
                             size_t keep_open)
{
    size_t first_bad = SIZE_MAX;
    struct check_share share[2];
    pthread_t thread;

    for (int k = 0; k < 2; k++)
        share[k] = (struct check_share){ .done_fd = done_fd, .done_path = done_path,
                                         .sources = res->sources, .n = res->n_sources,
                                         .first = (size_t)k, .keep_open = keep_open,
                                         .first_bad = &first_bad };
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
};

struct copy_share {
    struct copy_pass *pass;
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
            r = copy_source(p->done_fd, p->done_path, &p->sources[i], p->out_fd,
                            (int64_t)p->offsets[i], p->tmp_path, p->deleting, &p->fallback,
                            &c->out.errors);
            if (r < 0) {
                share_failed(&c->out, &p->first_bad, i, r);
                return NULL;
            }
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
                            bool deleting, bool *fallback, struct merge_result *res)
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
                               .first_bad = SIZE_MAX };
    for (int k = 0; k < 2; k++)
        share[k] = (struct copy_share){ .pass = &pass };
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
    size_t intent_len = 0, keep_open;
    bool checked = false, copied = false;
    uint64_t written_back = 0;
    bool have_intent = false, temp_left = false, tried_publish = false;
    int out_fd = -1;
    bool fallback = opts->force_fallback;
    struct merge_progress prog = { 0 };
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
    r = recover(spool_fd, opts->spool, done_fd, done_path, opts, res);
    if (r < 0)
        return r;

    r = merge_list_sources(done_fd, &res->sources, &res->n_sources);
    if (r < 0)
        return merge_fail(res, r, "%s: cannot list: %s", done_path, strerror(-r));
    if (opts->producer)
        keep_sources(res, keep_producer, opts);
    /* Anything else under a shard name is reported, never opened. */
    r = merge_note_not_regular(done_fd, done_path, opts->producer, res);
    if (r < 0)
        return r;
    merge_sort_problems(res);
    if (res->n_sources == 0)
        return 0;

    if (opts->progress) {
        prog.phase = MERGE_PHASE_CHECK;
        prog.shards_total = res->n_sources;
        for (size_t i = 0; i < res->n_sources; i++)
            if (fstatat(done_fd, res->sources[i].name, &st, AT_SYMLINK_NOFOLLOW) == 0)
                prog.bytes_total += (uint64_t)st.st_size; /* a guess; checking is exact */
        opts->progress(&prog, opts->userdata);
    }
    keep_open = open_sources_budget(res->n_sources);
    reserve_fds(spool_fd, res->n_sources < keep_open ? res->n_sources : keep_open);
    if (!opts->progress && res->n_sources >= CHECK_PARALLEL_MIN) {
        r = check_in_parallel(done_fd, done_path, res, keep_open);
        if (r < 0)
            return r;
        checked = r > 0;
    }
    for (size_t i = 0; i < res->n_sources && !checked; i++) {
        r = merge_check_source(done_fd, done_path, &res->sources[i], i < keep_open, res);
        if (r < 0)
            return r;
        if (opts->progress) {
            prog.shards_done = i + 1;
            prog.bytes_done += res->sources[i].bytes;
            if (prog.bytes_done > prog.bytes_total)
                prog.bytes_total = prog.bytes_done;
            opts->progress(&prog, opts->userdata);
        }
    }
    /* Before anything is written: what failed the check goes to
     * quarantine/ (or stays, when it could not be read) and out of the list. */
    r = merge_set_aside(spool_fd, opts->spool, done_fd, done_path, res);
    merge_sort_problems(res);
    if (r < 0)
        return r;
    /* --before needs every record's time, which only the check pass read. */
    if (opts->before_ns)
        keep_sources(res, keep_before, opts);
    if (res->n_sources == 0)
        return 0;
    if (opts->progress) {
        prog.phase = MERGE_PHASE_COPY;
        prog.shards_done = 0;
        prog.shards_total = res->n_sources;
        prog.bytes_done = prog.bytes_total = 0;
        for (size_t i = 0; i < res->n_sources; i++)
            prog.bytes_total += res->sources[i].bytes;
        opts->progress(&prog, opts->userdata);
    }

    if (opts->output) {
        r = split_output(opts->output, &out_dir, &out_base);
        if (r == -EISDIR)
            return merge_fail(res, -EINVAL, "%s: the output must name a file", opts->output);
        if (r < 0)
            return merge_fail(res, r, "out of memory");
    } else {
        r = default_output_dir(opts->spool, &out_dir, res);
        if (r < 0)
            return r;
    }
    dir_fd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return merge_fail(res, -errno, "%s: %s", out_dir, strerror(errno));
    if (!opts->output) {
        r = default_output_name(dir_fd, out_dir, &out_base, res);
        if (r < 0)
            return r;
    }
    out_path = opts->output ? strdup(opts->output) : path_join(out_dir, out_base);
    if (!out_path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* Only a courtesy, to fail before copying: publish() is what really
     * guarantees that nothing is replaced. */
    if (fstatat(dir_fd, out_base, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return merge_fail(res, -EEXIST, "%s: already exists; refusing to overwrite it", out_path);
    if (errno != ENOENT)
        return merge_fail(res, -errno, "%s: %s", out_path, strerror(errno));
    /* The intent must find the output again from any working directory. */
    abs_dir = realpath(out_dir, NULL);
    if (!abs_dir)
        return merge_fail(res, -errno, "%s: %s", out_dir, strerror(errno));

    if (asprintf(&tmp_name, ".%s.%ld.tmp", out_base, (long)getpid()) < 0) {
        tmp_name = NULL;
        return merge_fail(res, -ENOMEM, "out of memory");
    }
    tmp_path = path_join(out_dir, tmp_name);
    if (!tmp_path)
        return merge_fail(res, -ENOMEM, "out of memory");

    /* Step 1: nothing is created in the output's directory before the
     * intent that names it is durable. */
    r = intent_format(opts->delete_sources, abs_dir, out_base, tmp_name, res->sources,
                      res->n_sources, &intent_text, &intent_len);
    if (r == -EFBIG)
        return merge_fail(res, r, "%s/%s: too many sources (%zu) for one merge", opts->spool,
                          MERGE_INTENT_NAME, res->n_sources);
    if (r < 0)
        return merge_fail(res, r, "out of memory");
    r = intent_write(spool_fd, opts->spool, intent_text, intent_len, res);
    if (r < 0)
        return r;
    have_intent = true;
    step(opts, MERGE_STEP_INTENT_WRITTEN);

    /* Step 2. */
    out_fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (out_fd < 0) {
        r = merge_fail(res, -errno, "%s: cannot create: %s", tmp_path, strerror(errno));
        /* A file already under the temp name is not ours: it must not be
         * removed, so the intent naming it goes without the clean-up. */
        if (r == -EEXIST) {
            if (unlinkat(spool_fd, MERGE_INTENT_NAME, 0) == 0)
                (void)fsync_dir_fd(spool_fd); /* a surviving intent only rolls back */
            return r;
        }
        goto fail_tmp;
    }

    /* The hooks and the progress report follow sources one by one. */
    if (!opts->progress && !opts->before_copy && res->n_sources >= CHECK_PARALLEL_MIN &&
        !may_share_extents(out_fd)) {
        r = copy_in_parallel(done_fd, done_path, out_fd, tmp_path, opts->delete_sources,
                             &fallback, res);
        if (r < 0)
            goto fail_tmp;
        if (r > 0) {
            for (size_t i = 0; i < res->n_sources; i++) {
                res->records += res->sources[i].records;
                res->bytes += res->sources[i].bytes;
            }
            copied = true;
        }
    }
    for (size_t i = 0; i < res->n_sources && !copied; i++) {
        if (opts->before_copy) {
            r = opts->before_copy(&res->sources[i], opts->userdata);
            if (r < 0) {
                r = merge_fail(res, r, "%s: merge stopped before copying %s: %s", out_path,
                               res->sources[i].name, strerror(-r));
                goto fail_tmp;
            }
        }
        r = copy_source(done_fd, done_path, &res->sources[i], out_fd, -1, tmp_path,
                        opts->delete_sources, &fallback, res);
        if (r < 0)
            goto fail_tmp;
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
        if (opts->progress) {
            prog.shards_done = i + 1;
            prog.bytes_done = res->bytes;
            opts->progress(&prog, opts->userdata);
        }
    }
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
    step(opts, MERGE_STEP_COPIED);

    /* Step 3, the commit point. */
    tried_publish = true;
    r = publish(dir_fd, tmp_name, out_base, &temp_left);
    if (r == -EEXIST) {
        r = merge_fail(res, r, "%s: already exists; refusing to overwrite it", out_path);
        goto fail_tmp;
    }
    if (r < 0) {
        r = merge_fail(res, r, "%s: cannot rename %s to it: %s", out_path, tmp_name, strerror(-r));
        goto fail_tmp;
    }
    step(opts, MERGE_STEP_PUBLISHED);

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
                          res->output_path, out_dir, strerror(-r), opts->spool, MERGE_INTENT_NAME);
    /* Step 5. */
    if (opts->delete_sources) {
        r = delete_sources(done_fd, done_path, res->sources, res->n_sources, opts, &res->deleted,
                           res);
        if (r < 0)
            return r;
    }
    if (temp_left)
        return merge_fail(res, -EEXIST,
                          "%s: written, but its temp name %s could not be removed; the next merge "
                          "removes it",
                          res->output_path, tmp_path);
    /* Step 6. */
    return intent_remove(spool_fd, opts->spool, res);

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
    if (have_intent && unlinkat(spool_fd, MERGE_INTENT_NAME, 0) == 0)
        (void)fsync_dir_fd(spool_fd); /* a surviving intent only rolls back */
    return r;
}

void merge_result_free(struct merge_result *r)
{
    if (!r)
        return;
    free(r->output_path);
    merge_sources_free(r->sources, r->n_sources);
    free(r->recovery_output);
    free(r->recovery_temp);
    free(r->error);
    merge_problems_free(r->problems, r->n_problems);
    memset(r, 0, sizeof(*r));
}
