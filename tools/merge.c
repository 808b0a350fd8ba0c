/* logctl merge: concatenates the sealed shards of <spool>/done/ into one
 * merged file, which the shard reader reads like a single shard.
 *
 * Design: two passes. The first lists and sorts the sources and reads every
 * one of them through the shard reader, so a corrupt or misnamed source is
 * refused before any output exists. The second copies each source, checked
 * again by identity (device, inode, size) so that a file swapped between the
 * passes cannot slip in unchecked, into a temp file opened with O_EXCL next
 * to the final name; the temp is fsynced, renamed without replacing anything
 * and the directory is fsynced. Until that rename nothing is visible under
 * the final name, so a merge killed at any instant leaves at most a dotted
 * temp file, which later merges ignore. Sources are never modified.
 *
 * Order of the output: by producer name in byte order (strcmp), then by
 * shard id ascending. It is deterministic and keeps each producer's shards
 * in the order the daemon wrote them (ids increase over time).
 *
 * Known limits: a killed merge leaves its ".<name>.<pid>.tmp" behind (it is
 * not removed automatically, because another merge with that pid could own
 * it); the default output name has a resolution of one second, so a second
 * merge within the same second is refused rather than overwriting. */
#include "merge.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "shard_format.h"

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

void merge_sources_free(struct merge_source *sources, size_t count)
{
    if (!sources)
        return;
    for (size_t i = 0; i < count; i++)
        free(sources[i].name);
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

int merge_copy(int in_fd, int out_fd, uint64_t len, bool force_fallback, bool *ret_fell_back)
{
    uint64_t done = 0;
    bool fallback = force_fallback;
    unsigned char *buf;
    int r = 0;

    while (!fallback && done < len) {
        off64_t off_in = (off64_t)done;
        size_t want = len - done > COPY_CHUNK ? COPY_CHUNK : (size_t)(len - done);
        ssize_t n = copy_file_range(in_fd, &off_in, out_fd, NULL, want, 0);

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
            r = write_all(out_fd, buf, (size_t)n);
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

/* Sets res->error and returns err, so that failures read
 * "return fail(res, -E..., ...);". */
__attribute__((format(printf, 3, 4))) static int fail(struct merge_result *res, int err,
                                                      const char *fmt, ...)
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

/* Pass one for one source: the whole file must read as exactly one valid
 * shard whose header agrees with the file name. */
/* Opens a source read-only (never through a symlink) and stats it. */
static int open_source(int done_fd, const struct merge_source *s, const char *path,
                       int *ret_fd, struct stat *ret_st, struct merge_result *res)
{
    int fd = openat(done_fd, s->name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0)
        return fail(res, -errno, "%s: %s", path, strerror(errno));
    if (fstat(fd, ret_st) < 0) {
        int e = errno;
        (void)close(fd); /* read-only; the fstat error is what matters */
        return fail(res, -e, "%s: %s", path, strerror(e));
    }
    *ret_fd = fd;
    return 0;
}

static int validate_source(int done_fd, const char *done_path, struct merge_source *s,
                           struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(done_path, s->name);
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    struct stat st;
    uint64_t headers = 0;
    int r;

    if (!path)
        return fail(res, -ENOMEM, "out of memory");
    r = open_source(done_fd, s, path, &fd, &st, res);
    if (r < 0)
        return r;
    if (!S_ISREG(st.st_mode))
        return fail(res, -EBADF, "%s: not a regular file", path);

    r = shard_reader_new(&reader, fd);
    if (r < 0)
        return fail(res, r, "%s: %s", path, strerror(-r));
    while ((r = shard_reader_next(reader, &item)) > 0) {
        if (item.kind != SHARD_ITEM_HEADER)
            continue;
        if (++headers > 1) {
            r = fail(res, -EBADMSG,
                     "%s: second shard header at offset %" PRIu64
                     " (a file in done/ must hold exactly one shard)",
                     path, item.offset);
            goto out;
        }
        if (strcmp(item.header->producer, s->producer) != 0 || item.header->shard_id != s->id) {
            r = fail(res, -EBADMSG,
                     "%s: shard header says producer '%s' shard id %016" PRIx64
                     ", which does not match the file name",
                     path, item.header->producer, item.header->shard_id);
            goto out;
        }
    }
    if (r < 0) {
        uint64_t off;
        const char *why;

        shard_reader_error(reader, &off, &why);
        if (r == -EBADMSG || r == -ENODATA)
            r = fail(res, r, "%s: %s at offset %" PRIu64, path, why ? why : strerror(-r), off);
        else
            r = fail(res, r, "%s: %s at offset %" PRIu64 ": %s", path,
                     why ? why : "error", off, strerror(-r));
        goto out;
    }
    s->bytes = shard_reader_valid_end(reader);
    s->records = shard_reader_records(reader);
    if ((uint64_t)st.st_size != s->bytes) {
        r = fail(res, -EBUSY,
                 "%s: size changed while it was checked (%" PRIu64 " bytes, then %" PRIu64
                 "); is it still being written?",
                 path, (uint64_t)st.st_size, s->bytes);
        goto out;
    }
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    r = 0;
out:
    shard_reader_free(reader);
    return r;
}

/* Pass two for one source: the same file as checked, copied whole. */
static int copy_source(int done_fd, const char *done_path, const struct merge_source *s,
                       int out_fd, const char *tmp_path, bool *fallback,
                       struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(done_path, s->name);
    _cleanup_close_ int fd = -1;
    struct stat st;
    bool fell_back = false;
    int r;

    if (!path)
        return fail(res, -ENOMEM, "out of memory");
    r = open_source(done_fd, s, path, &fd, &st, res);
    if (r < 0)
        return r;
    if (st.st_dev != s->dev || st.st_ino != s->ino || (uint64_t)st.st_size != s->bytes)
        return fail(res, -ESTALE, "%s: replaced or changed since it was checked", path);

    r = merge_copy(fd, out_fd, s->bytes, *fallback, &fell_back);
    if (r == -ENODATA)
        return fail(res, r, "%s: ended before its %" PRIu64 " bytes were copied (changed during the merge?)",
                    path, s->bytes);
    if (r < 0)
        return fail(res, r, "%s: copying to %s: %s", path, tmp_path, strerror(-r));
    /* Once the kernel said no, asking again for every shard is pointless. */
    if (fell_back)
        *fallback = true;
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

static int default_output(const char *spool, char **ret_path, struct merge_result *res)
{
    _cleanup_free_ char *merged = path_join(spool, "merged");
    char name[64];
    struct tm tm;
    time_t now = time(NULL);
    char *p;
    int r;

    if (!merged)
        return fail(res, -ENOMEM, "out of memory");
    if (!gmtime_r(&now, &tm) || strftime(name, sizeof(name), "merged-%Y%m%dT%H%M%SZ.lsm", &tm) == 0)
        return fail(res, -EOVERFLOW, "cannot format the current time");
    r = mkdir_if_missing(merged, 0750);
    if (r < 0)
        return fail(res, r, "%s: cannot create: %s", merged, strerror(-r));
    /* The new directory entry must be durable before a file in it is. */
    r = fsync_dir_path(spool);
    if (r < 0)
        return fail(res, r, "%s: fsync: %s", spool, strerror(-r));
    p = path_join(merged, name);
    if (!p)
        return fail(res, -ENOMEM, "out of memory");
    *ret_path = p;
    return 0;
}

/* Gives tmp the name base, never replacing an existing file. renameat2 with
 * RENAME_NOREPLACE does that atomically; filesystems that do not support the
 * flag answer EINVAL, and then link(2), which also fails with EEXIST rather
 * than replace, followed by unlinking the temp name gives the same
 * guarantee. A check-then-rename would race with another merge. */
static int publish(int dir_fd, const char *tmp, const char *base)
{
    if (renameat2(dir_fd, tmp, dir_fd, base, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -errno;
    if (linkat(dir_fd, tmp, dir_fd, base, 0) < 0)
        return -errno;
    /* The output is complete under its final name now; a leftover temp
     * name is only a second link to it and a dotfile merges skip. */
    (void)unlinkat(dir_fd, tmp, 0);
    return 0;
}

int merge_run(const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ char *done_path = NULL;
    _cleanup_free_ char *out_path = NULL;
    _cleanup_free_ char *out_dir = NULL;
    _cleanup_free_ char *out_base = NULL;
    _cleanup_free_ char *tmp_name = NULL;
    _cleanup_free_ char *tmp_path = NULL;
    _cleanup_close_ int done_fd = -1;
    _cleanup_close_ int dir_fd = -1;
    int out_fd = -1;
    bool fallback = opts->force_fallback;
    struct stat st;
    int r;

    memset(res, 0, sizeof(*res));
    if (!opts->spool)
        return fail(res, -EINVAL, "no spool directory given");

    done_path = path_join(opts->spool, "done");
    if (!done_path)
        return fail(res, -ENOMEM, "out of memory");
    done_fd = open(done_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0)
        return fail(res, -errno, "%s: %s", done_path, strerror(errno));
    r = merge_list_sources(done_fd, &res->sources, &res->n_sources);
    if (r < 0)
        return fail(res, r, "%s: cannot list: %s", done_path, strerror(-r));
    if (res->n_sources == 0)
        return 0;

    for (size_t i = 0; i < res->n_sources; i++) {
        r = validate_source(done_fd, done_path, &res->sources[i], res);
        if (r < 0)
            return r;
    }

    if (opts->output) {
        out_path = strdup(opts->output);
        if (!out_path)
            return fail(res, -ENOMEM, "out of memory");
    } else {
        r = default_output(opts->spool, &out_path, res);
        if (r < 0)
            return r;
    }
    r = split_output(out_path, &out_dir, &out_base);
    if (r == -EISDIR)
        return fail(res, -EINVAL, "%s: the output must name a file", out_path);
    if (r < 0)
        return fail(res, r, "out of memory");
    dir_fd = open(out_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return fail(res, -errno, "%s: %s", out_dir, strerror(errno));
    /* Only a courtesy, to fail before copying: publish() is what really
     * guarantees that nothing is replaced. */
    if (fstatat(dir_fd, out_base, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return fail(res, -EEXIST, "%s: already exists; refusing to overwrite it", out_path);
    if (errno != ENOENT)
        return fail(res, -errno, "%s: %s", out_path, strerror(errno));

    if (asprintf(&tmp_name, ".%s.%ld.tmp", out_base, (long)getpid()) < 0) {
        tmp_name = NULL;
        return fail(res, -ENOMEM, "out of memory");
    }
    tmp_path = path_join(out_dir, tmp_name);
    if (!tmp_path)
        return fail(res, -ENOMEM, "out of memory");
    out_fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (out_fd < 0)
        return fail(res, -errno, "%s: cannot create: %s", tmp_path, strerror(errno));

    for (size_t i = 0; i < res->n_sources; i++) {
        if (opts->before_copy) {
            r = opts->before_copy(&res->sources[i], opts->userdata);
            if (r < 0) {
                r = fail(res, r, "%s: merge stopped before copying %s: %s", out_path,
                         res->sources[i].name, strerror(-r));
                goto fail_tmp;
            }
        }
        r = copy_source(done_fd, done_path, &res->sources[i], out_fd, tmp_path, &fallback, res);
        if (r < 0)
            goto fail_tmp;
        res->records += res->sources[i].records;
        res->bytes += res->sources[i].bytes;
    }
    /* Data first, then the name: otherwise a crash could leave the final
     * name on a file whose blocks were never written. */
    if (fsync(out_fd) < 0) {
        r = fail(res, -errno, "%s: fsync: %s", tmp_path, strerror(errno));
        goto fail_tmp;
    }
    r = close(out_fd);
    out_fd = -1;
    if (r < 0) {
        r = fail(res, -errno, "%s: close: %s", tmp_path, strerror(errno));
        goto fail_tmp;
    }
    r = publish(dir_fd, tmp_name, out_base);
    if (r == -EEXIST) {
        r = fail(res, r, "%s: already exists; refusing to overwrite it", out_path);
        goto fail_tmp;
    }
    if (r < 0) {
        r = fail(res, r, "%s: cannot rename %s to it: %s", out_path, tmp_name, strerror(-r));
        goto fail_tmp;
    }

    res->shards = res->n_sources;
    res->used_fallback = fallback;
    res->output_path = out_path;
    out_path = NULL;
    r = fsync_dir_fd(dir_fd);
    if (r < 0)
        return fail(res, r,
                    "%s: written, but fsync of its directory %s failed: %s; it may not "
                    "survive a crash (the sources are untouched)",
                    res->output_path, out_dir, strerror(-r));
    return 0;

fail_tmp:
    if (out_fd >= 0)
        (void)close(out_fd); /* the temp is discarded anyway */
    /* The primary error is what the caller needs; a temp we could not
     * remove is a dotfile that merges skip. */
    (void)unlinkat(dir_fd, tmp_name, 0);
    res->records = 0;
    res->bytes = 0;
    return r;
}

void merge_result_free(struct merge_result *r)
{
    if (!r)
        return;
    free(r->output_path);
    merge_sources_free(r->sources, r->n_sources);
    free(r->error);
    memset(r, 0, sizeof(*r));
}
