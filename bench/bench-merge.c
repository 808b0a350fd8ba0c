/* logshard-bench --mode merge: what logctl merge costs next to a plain copy.
 *
 * The same sealed shards are concatenated four ways, each into a new file
 * in the run's temp directory: `logctl merge --output` (checks every source,
 * copies with copy_file_range, fsyncs the output and its directory),
 * `cat` through /bin/sh (no checks, no sync), the same followed by sync(1)
 * of the output (an fsync: the durability merge gives), and a read/write
 * loop here (128 KiB buffer, like cat's; no sync). The shards were just written, so
 * all three read them from the page cache; nothing drops caches. Each
 * output must come out exactly as long as the shards together, or the
 * figures would compare different work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "fileutil.h"
#include "seal_index.h"
#include "shard_format.h"
#include "spool_names.h"

#define COPY_BUFFER (128u * 1024u)

struct shard_list {
    char **names;
    size_t n;
    uint64_t bytes;
};

static void shard_list_free(struct shard_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->names[i]);
    free(l->names);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_shard_name(const char *name)
{
    struct spool_name n;

    return spool_name_parse(name, SPOOL_SHARD, &n) == 0;
}

static int list_shards(const char *done, struct shard_list *l)
{
    DIR *d = opendir(done);
    struct dirent *de;
    size_t cap = 0;
    int r = 0;

    if (!d)
        return -errno;
    while ((de = readdir(d)) != NULL) {
        struct stat st;

        if (!is_shard_name(de->d_name))
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            r = -errno;
            break;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        if (l->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            char **v = realloc(l->names, ncap * sizeof(*v));
            if (!v) {
                r = -ENOMEM;
                break;
            }
            l->names = v;
            cap = ncap;
        }
        l->names[l->n] = strdup(de->d_name);
        if (!l->names[l->n]) {
            r = -ENOMEM;
            break;
        }
        l->n++;
        l->bytes += (uint64_t)st.st_size;
    }
    (void)closedir(d); /* read-only stream */
    if (r == 0 && l->n)
        qsort(l->names, l->n, sizeof(*l->names), cmp_name);
    return r;
}

static int file_size(const char *path, uint64_t *ret)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    *ret = (uint64_t)st.st_size;
    return 0;
}

static int copy_loop(const char *done, const struct shard_list *l, const char *out_path)
{
    _cleanup_free_ char *buf = malloc(COPY_BUFFER);
    _cleanup_close_ int dfd = open(done, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int out = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int r = 0;

    if (!buf)
        return -ENOMEM;
    if (dfd < 0 || out < 0)
        return -errno;
    for (size_t i = 0; i < l->n && r == 0; i++) {
        _cleanup_close_ int in = openat(dfd, l->names[i], O_RDONLY | O_CLOEXEC);

        if (in < 0)
            return -errno;
        for (;;) {
            ssize_t n = read(in, buf, COPY_BUFFER);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                r = -errno;
                break;
            }
            if (n == 0)
                break;
            r = write_all(out, buf, (size_t)n);
            if (r < 0)
                break;
        }
    }
    if (r == 0) {
        /* close() reports a late write error; after a failure the cleanup
         * closes it. */
        r = close(out) < 0 ? -errno : 0;
        out = -1;
    }
    return r;
}

/* Runs argv, timed, and checks that it succeeded and wrote out_path with
 * the shards' length. */
/* Writes back what earlier steps left dirty on dir's filesystem, untimed,
 * so that no step pays for the one before it. */
static void settle(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd >= 0) {
        (void)syncfs(fd); /* only evens out timings; a failure changes nothing */
        (void)close(fd);
    }
}

static int timed_program(const char *what, const char *const *argv, const char *out_path,
                         const char *log_out, const char *log_err, uint64_t want_bytes,
                         uint64_t deadline_ns, double *ret_s, char *why, size_t why_len)
{
    uint64_t t0, t1, got = 0;
    int status, r;

    t0 = now_monotonic_ns();

    r = bench_run_program(argv, log_out, log_err, deadline_ns, &status);
    t1 = now_monotonic_ns();
    if (r < 0) {
        snprintf(why, why_len, "%s: %s", what, r == -ETIMEDOUT ? "timed out" : strerror(-r));
        return r;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        _cleanup_free_ char *err = NULL;
        char st[96];

        bench_describe_status(status, st, sizeof(st));
        if (log_err)
            (void)bench_read_file(log_err, &err, NULL); /* best effort, for the message */
        snprintf(why, why_len, "%s failed (%s)%s%s", what, st, err && *err ? ": " : "",
                 err ? err : "");
        return -EIO;
    }
    r = file_size(out_path, &got);
    if (r < 0 || got != want_bytes) {
        snprintf(why, why_len, "%s wrote %" PRIu64 " bytes to %s; the shards hold %" PRIu64,
                 what, got, out_path, want_bytes);
        return -EIO;
    }
    *ret_s = (double)(t1 - t0) / 1e9;
    return 0;
}

int bench_merge_time(const char *logctl, const char *spool, const char *workdir,
                     uint64_t deadline_ns, struct bench_merge_result *ret, char *why,
                     size_t why_len)
{
    _cleanup_free_ char *done = path_join(spool, "done");
    _cleanup_free_ char *out_logctl = path_join(workdir, "merged-logctl.lsm");
    _cleanup_free_ char *abs_workdir = realpath(workdir, NULL);
    _cleanup_free_ char *out_cat = abs_workdir ? path_join(abs_workdir, "merged-cat") : NULL;
    _cleanup_free_ char *out_cat_sync =
        abs_workdir ? path_join(abs_workdir, "merged-cat-sync") : NULL;
    _cleanup_free_ char *out_copy = path_join(workdir, "merged-copy");
    _cleanup_free_ char *logctl_out = path_join(workdir, "logctl-merge.out");
    _cleanup_free_ char *logctl_err = path_join(workdir, "logctl-merge.err");
    _cleanup_free_ char *cat_err = path_join(workdir, "cat.err");
    struct shard_list l = { 0 };
    struct bench_merge_result res = { 0 };
    uint64_t t0, got = 0;
    int r;

    if (!done || !out_logctl || !out_cat || !out_cat_sync || !out_copy || !logctl_out ||
        !logctl_err || !cat_err) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    r = list_shards(done, &l);
    if (r < 0) {
        snprintf(why, why_len, "cannot list %s: %s", done, strerror(-r));
        goto out;
    }
    if (l.n == 0) {
        snprintf(why, why_len, "no sealed shards in %s to merge", done);
        r = -ENOENT;
        goto out;
    }
    res.shards = l.n;
    res.bytes = l.bytes;

    {
        const char *argv[] = { logctl, "merge", "--spool", spool, "--output", out_logctl, NULL };
        settle(done);
        r = timed_program("logctl merge", argv, out_logctl, logctl_out, logctl_err, l.bytes,
                          deadline_ns, &res.logctl_s, why, why_len);
        if (r < 0)
            goto out;
    }
    {
        /* The shards are named by the shell, in its (sorted) glob order;
         * printf is built in, so no argument list limits a huge spool, and
         * xargs starts as few cats as the limit allows. */
        const char *argv[] = { "/bin/sh", "-c",
                               "cd -- \"$1\" && printf '%s\\0' *.shard | xargs -0 cat -- > \"$2\"",
                               "sh", done, out_cat, NULL };
        const char *argv_sync[] = { "/bin/sh", "-c",
                                    "cd -- \"$1\" && printf '%s\\0' *.shard | "
                                    "xargs -0 cat -- > \"$2\" && sync -- \"$2\"",
                                    "sh", done, out_cat_sync, NULL };
        settle(done);
        r = timed_program("cat", argv, out_cat, NULL, cat_err, l.bytes, deadline_ns, &res.cat_s,
                          why, why_len);
        if (r < 0)
            goto out;
        settle(done);
        r = timed_program("cat + sync", argv_sync, out_cat_sync, NULL, cat_err, l.bytes,
                          deadline_ns, &res.cat_sync_s, why, why_len);
        if (r < 0)
            goto out;
    }
    settle(done);
    t0 = now_monotonic_ns();
    r = copy_loop(done, &l, out_copy);
    res.copy_s = (double)(now_monotonic_ns() - t0) / 1e9;
    if (r < 0) {
        snprintf(why, why_len, "copying the shards to %s: %s", out_copy, strerror(-r));
        goto out;
    }
    r = file_size(out_copy, &got);
    if (r < 0 || got != l.bytes) {
        snprintf(why, why_len, "the copy loop wrote %" PRIu64 " bytes; the shards hold %" PRIu64,
                 got, l.bytes);
        r = -EIO;
        goto out;
    }
    *ret = res;
    r = 0;
out:
    shard_list_free(&l);
    return r;
}

/* The records of one shard, all but the header, at times first_ns,
 * first_ns + step_ns, ...; returns the length up to the trailer's end. */
static size_t encode_shard_body(unsigned char *buf, size_t header_len, const unsigned char *payload,
                                size_t record_bytes, size_t records, uint64_t first_ns,
                                uint64_t step_ns, long align)
{
    struct shard_trailer t = { 0 };
    size_t len = header_len;

    for (size_t j = 0; j < records; j++)
        len += shard_encode_record(buf + len, payload, (uint32_t)record_bytes,
                                   first_ns + j * step_ns);
    t.shard_len = len;
    t.records = records;
    t.newest_ns = first_ns + (records - 1) * step_ns;
    t.trailer_len = (uint32_t)shard_trailer_size(len, align > 0 ? (size_t)align : 0);
    shard_encode_trailer(buf + len, &t);
    return len + t.trailer_len;
}

/* The seal index the daemon would have written for the shards laid out
 * (common/seal_index.h), so that reads of the spool are timed as on one
 * the daemon made. */
static void index_bytes_free(struct seal_index_bytes *ix)
{
    free(ix->buf);
}

/* Adds the entry of the shard just written to fd: its header's creation
 * time, its trailer's newest time. */
static int index_add(struct seal_index_bytes *ix, int fd, const char *name, uint64_t created_ns,
                     uint64_t newest_ns)
{
    struct seal_index_entry e = { .created_ns = created_ns, .newest_ns = newest_ns };
    struct stat st;

    if (fstat(fd, &st) < 0)
        return -errno;
    e.inode = (uint64_t)st.st_ino;
    snprintf(e.name, sizeof(e.name), "%s", name);
    return seal_index_bytes_add(ix, &e);
}

static int index_write(const struct seal_index_bytes *ix, const char *spool, char *why, size_t why_len)
{
    _cleanup_free_ char *path = path_join(spool, SEAL_INDEX_FILE);
    _cleanup_close_ int fd = -1;
    int r;

    if (!path)
        r = -ENOMEM;
    else if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640)) < 0)
        r = -errno;
    else
        r = write_all(fd, ix->buf, ix->len);
    if (r < 0)
        snprintf(why, why_len, "cannot write %s: %s", path ? path : SEAL_INDEX_FILE,
                 strerror(-r));
    return r;
}

int bench_merge_layout(const char *spool, uint64_t shards, uint64_t shard_bytes,
                       size_t record_bytes, uint64_t span_ns, char *why, size_t why_len)
{
    __attribute__((cleanup(index_bytes_free))) struct seal_index_bytes ix = { 0 };
    _cleanup_free_ char *done = path_join(spool, "done");
    _cleanup_free_ unsigned char *buf = NULL, *payload = NULL;
    _cleanup_close_ int dfd = -1;
    struct shard_header h = { .uid = getuid(), .gid = getgid(), .pid = (uint32_t)getpid() };
    size_t header_len, len, records = 0, cap;
    uint64_t step_ns = 0, start_ns = now_realtime_ns();
    long align;
    int r;

    if (!done)
        return -ENOMEM;
    if (record_bytes < 1 || record_bytes > SHARD_RECORD_MAX) {
        snprintf(why, why_len, "--size %zu: records are 1 byte to %u bytes", record_bytes,
                 SHARD_RECORD_MAX);
        return -EINVAL;
    }
    r = mkdir_if_missing(spool, 0750);
    if (r == 0)
        r = mkdir_if_missing(done, 0750);
    if (r < 0) {
        snprintf(why, why_len, "cannot create %s: %s", done, strerror(-r));
        return r;
    }
    dfd = open(done, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(why, why_len, "cannot open %s: %s", done, strerror(errno));
        return -errno;
    }
    align = fs_block_size(dfd, SHARD_ALIGN_MAX);
    memcpy(h.producer, "bench", 5);
    h.producer_len = 5;
    header_len = shard_header_size(h.producer_len);
    cap = (size_t)shard_bytes + record_bytes + SHARD_HEADER_MAX + SHARD_TRAILER_MAX;
    buf = malloc(cap);
    payload = malloc(record_bytes);
    if (!buf || !payload)
        return -ENOMEM;
    for (size_t i = 0; i < record_bytes; i++)
        payload[i] = (unsigned char)('a' + i % 26);
    len = header_len;
    while (len + SHARD_RECORD_HEADER + record_bytes + SHARD_TRAILER_MIN <= shard_bytes ||
           records == 0) {
        len += SHARD_RECORD_HEADER + record_bytes;
        records++;
    }
    if (span_ns > 0) {
        step_ns = span_ns / (shards * records);
        start_ns -= span_ns;
    }
    /* Without a span the records are the same in every shard; only the
     * header and its id change from one shard to the next. */
    len = encode_shard_body(buf, header_len, payload, record_bytes, records, start_ns, 0, align);

    for (uint64_t i = 0; i < shards; i++) {
        char name[SPOOL_NAME_SIZE];
        _cleanup_close_ int fd = -1;

        h.shard_id = i + 1;
        h.created_ns = now_realtime_ns();
        if (span_ns > 0) {
            h.created_ns = start_ns + i * records * step_ns;
            len = encode_shard_body(buf, header_len, payload, record_bytes, records,
                                    h.created_ns, step_ns, align);
        }
        (void)shard_encode_header(buf, &h);
        (void)spool_name_format(SPOOL_SHARD, "bench", 5, h.shard_id, name, sizeof(name));
        fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        if (fd < 0) {
            snprintf(why, why_len, "cannot create %s/%s: %s", done, name, strerror(errno));
            return -errno;
        }
        r = write_all(fd, buf, len);
        if (r < 0) {
            snprintf(why, why_len, "writing %s/%s: %s", done, name, strerror(-r));
            return r;
        }
        r = index_add(&ix, fd, name, h.created_ns,
                      (span_ns > 0 ? h.created_ns : start_ns) + (records - 1) * step_ns);
        if (r < 0)
            return r;
    }
    return index_write(&ix, spool, why, why_len);
}
