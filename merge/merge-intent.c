/* merge.intent: what a merge records before it creates anything, so that
 * the next merge can finish or roll back one that was killed
 * (merge-recovery.c), and what --delete removes when it finishes one.
 *
 * The text, one field per line, in this order:
 *   logshard-merge-intent 1
 *   delete <0|1>                  whether the sources are to be removed
 *   dir <absolute directory>      where the output is
 *   output <name>                 the output's name in dir
 *   temp <name>                   the temp file's name in dir
 *   bytes <total>                 the output's size: the sum below
 *   sources <count>
 *   source <bytes> <name>         one per source, in output order
 *   end <crc32c>                  8 lowercase hex digits, of all above
 * A newline or a backslash in dir, output or temp is written "\n" or "\\"
 * so the line structure survives any path; source names follow the shard
 * name rule and need no escaping.
 *
 * It is written as merge.intent.tmp, fsynced, renamed, and the spool
 * fsynced: a visible merge.intent is always complete. It ends with a
 * CRC32C line anyway, so damage or a hand edit is recognised, and a damaged
 * intent stops the merge (with a message) rather than guess which way is
 * safe. The parser accepts only what a merge could have written: every
 * field where it belongs, paths that recovery may open and unlink (an
 * absolute dir, output and temp plain names in it, not the same), source
 * names that follow the shard name rule, producers in byte order (the
 * shards of one producer in any order: its streams go by position) with
 * none listed twice, and sizes that add up. It never allocates more than the text
 * could hold, whatever a count says. */
#include "merge-internal.h"
#include "text.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileutil.h"
#include "spool_names.h"

#define INTENT_MAGIC "logshard-merge-intent 1"
/* Far above any real merge (about 100 bytes per source), and a bound on
 * what a damaged file can make us allocate. */
#define INTENT_MAX ((uint64_t)256 << 20)
/* The shortest source line: "source 0 ", the shortest shard name
 * ("a.<16 hex digits>.shard", 24 bytes), the newline. */
#define SOURCE_LINE_MIN (sizeof("source 0 ") - 1 + 24 + 1)

void merge_intent_free(struct merge_intent *in)
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

int merge_intent_format(bool delete_sources, const char *dir, const char *output,
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

/* Digits only, no sign, no overflow; leading zeros are taken. */
static int parse_u64(const char *s, size_t len, uint64_t *ret)
{
    return decimal_parse_u64(s, len, false, ret);
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

static int cmp_source_ptr(const void *a, const void *b)
{
    const struct merge_source *const *x = a, *const *y = b;

    return merge_source_cmp(*x, *y);
}

/* Whether in lists every source once. Its producers are in order, so a
 * name twice is two entries of one producer, which need not be next to
 * each other: sorting pointers to them by name finds it. Returns 0,
 * -EBADMSG with *ret_why, or -ENOMEM. */
static int check_no_name_twice(const struct merge_intent *in, const char **ret_why)
{
    const struct merge_source **v;
    int r = 0;

    if (in->n_sources < 2)
        return 0;
    v = calloc(in->n_sources, sizeof(*v));
    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < in->n_sources; i++)
        v[i] = &in->sources[i];
    qsort(v, in->n_sources, sizeof(*v), cmp_source_ptr);
    for (size_t i = 1; i < in->n_sources && r == 0; i++)
        if (merge_source_cmp(v[i - 1], v[i]) == 0) {
            *ret_why = "not in the expected format (a source listed twice or out of order)";
            r = -EBADMSG;
        }
    free(v);
    return r;
}

/* merge_intent_parse without the care for *reason, which it sets on the
 * way whatever the outcome. */
static int parse(const char *buf, size_t len, struct merge_intent *ret, const char **ret_why)
{
    struct merge_intent in = { 0 };
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
    /* Each source line takes at least SOURCE_LINE_MIN bytes, which bounds
     * n by the text's size before anything is allocated for it. */
    if (n > body / SOURCE_LINE_MIN)
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
        /* A merge lists its sources in output order, producers in byte
         * order (within a producer, a stream's shards go by position, which
         * the names do not show), and a directory holds a name once: a
         * list out of order or with a name twice was not written by a
         * merge, and recovery must not act on it. */
        if (i > 0 && strcmp(in.sources[i - 1].producer, s->producer) > 0) {
            *ret_why = "not in the expected format (a source listed twice or out of order)";
            goto out;
        }
        s->bytes = u;
        if (sum + u < sum)
            goto out;
        sum += u;
    }
    if (pos != body || sum != in.bytes)
        goto out;
    r = check_no_name_twice(&in, ret_why);
    if (r < 0)
        goto out;
    *ret = in;
    return 0;
out:
    merge_intent_free(&in);
    return r;
}

int merge_intent_parse(const char *buf, size_t len, struct merge_intent *ret,
                       const char **reason)
{
    const char *why = NULL;
    int r = parse(buf, len, ret, &why);

    if (r == -EBADMSG && reason)
        *reason = why;
    return r;
}

int merge_intent_read(int spool_fd, const char *path, struct merge_intent *ret,
                      struct merge_result *res)
{
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *buf = NULL;
    const char *why = NULL;
    struct stat st;
    mode_t mode = 0;
    ssize_t n;
    int r;

    r = open_regular_at(spool_fd, SPOOL_MERGE_INTENT, O_NOFOLLOW, &fd, &mode);
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
    r = merge_intent_parse(buf, (size_t)n, ret, &why);
    if (r == -EBADMSG)
        return merge_fail(res, r,
                          "%s: %s; cannot tell whether the merge that wrote it published its "
                          "output, so nothing is changed: check it and remove it by hand",
                          path, why);
    if (r < 0)
        return merge_fail(res, r, "%s: %s", path, strerror(-r));
    return 0;
}

int merge_pending_read(int spool_fd, const char *spool, struct merge_pending *ret,
                       char **ret_error)
{
    _cleanup_free_ char *path = path_join(spool, SPOOL_MERGE_INTENT);
    struct merge_result res = { 0 };
    struct merge_intent in;
    struct merge_pending p = { 0 };
    int r;

    if (!path) {
        *ret_error = NULL;
        return -ENOMEM;
    }
    r = merge_intent_read(spool_fd, path, &in, &res);
    if (r == -ENOENT)
        return r;
    if (r < 0) {
        *ret_error = res.error;
        return r;
    }
    p.dir = in.dir;
    p.output = in.output;
    p.temp = in.temp;
    in.dir = in.output = in.temp = NULL;
    p.sources = calloc(in.n_sources ? in.n_sources : 1, sizeof(*p.sources));
    r = p.sources ? 0 : -ENOMEM;
    for (size_t i = 0; r == 0 && i < in.n_sources; i++) {
        p.sources[i] = in.sources[i].name;
        in.sources[i].name = NULL;
        p.n_sources++;
    }
    merge_intent_free(&in);
    if (r < 0) {
        merge_pending_free(&p);
        *ret_error = strdup("out of memory");
        return r;
    }
    *ret = p;
    return 0;
}

void merge_pending_free(struct merge_pending *p)
{
    if (!p)
        return;
    free(p->dir);
    free(p->output);
    free(p->temp);
    for (size_t i = 0; i < p->n_sources; i++)
        free(p->sources[i]);
    free(p->sources);
    memset(p, 0, sizeof(*p));
}

int merge_intent_write(int spool_fd, const char *spool, const char *text, size_t len,
                       struct merge_result *res)
{
    _cleanup_free_ char *tmp_path = path_join(spool, SPOOL_MERGE_INTENT_TMP);
    _cleanup_free_ char *path = path_join(spool, SPOOL_MERGE_INTENT);
    int fd, r;

    if (!tmp_path || !path)
        return merge_fail(res, -ENOMEM, "out of memory");
    /* We hold the lock and removed any leftover, so O_TRUNC clobbers
     * nothing of anyone's. */
    fd = openat(spool_fd, SPOOL_MERGE_INTENT_TMP,
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
    if (renameat(spool_fd, SPOOL_MERGE_INTENT_TMP, spool_fd, SPOOL_MERGE_INTENT) < 0) {
        r = merge_fail(res, -errno, "%s: cannot rename %s to it: %s", path, SPOOL_MERGE_INTENT_TMP,
                       strerror(errno));
        goto fail_tmp;
    }
    r = fsync_dir_fd(spool_fd);
    if (r < 0) {
        /* Not durable, so not relied on: nothing was created yet, and an
         * intent that does survive is rolled back by the next merge. */
        (void)unlinkat(spool_fd, SPOOL_MERGE_INTENT, 0);
        return merge_fail(res, r, "%s: fsync: %s", spool, strerror(-r));
    }
    return 0;

fail_fd:
    (void)close(fd); /* the file is discarded */
fail_tmp:
    /* A leftover merge.intent.tmp is removed by the next merge anyway. */
    (void)unlinkat(spool_fd, SPOOL_MERGE_INTENT_TMP, 0);
    return r;
}

int merge_intent_remove(int spool_fd, const char *spool, struct merge_result *res)
{
    _cleanup_free_ char *path = path_join(spool, SPOOL_MERGE_INTENT);
    int r;

    if (!path)
        return merge_fail(res, -ENOMEM, "out of memory");
    if (unlinkat(spool_fd, SPOOL_MERGE_INTENT, 0) < 0)
        return merge_fail(res, -errno, "%s: cannot remove: %s", path, strerror(errno));
    r = fsync_dir_fd(spool_fd);
    if (r < 0)
        return merge_fail(res, r, "%s: fsync after removing %s: %s", spool, SPOOL_MERGE_INTENT,
                          strerror(-r));
    return 0;
}
