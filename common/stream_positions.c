/* The stream positions file: its text, and writing, reading, removing and
 * quarantining the files of <spool>/streams/. stream_positions.h says what
 * the file is for and who writes and reads it; docs/FORMAT.md gives the
 * format line by line.
 *
 * The text is strict on purpose: every byte of a file is something the
 * formatter writes, so a file either is what a writer wrote or is refused
 * whole. Positions decide which records the daemon accepts again after a
 * restart; a guess from half a file could make it store a record twice. */
#include "stream_positions.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fileutil.h"
#include "spool_names.h"

/* "stream " + 32 hex + " 0 0 0 " + a one-byte producer + "\n": the shortest
 * stream line, which bounds the entries a buffer can hold. */
#define MIN_STREAM_LINE (7u + 32u + 7u + 1u + 1u)
/* "stream " + 32 hex + three numbers of at most 20 digits and spaces + a
 * producer of 64 + "\n". */
#define MAX_STREAM_LINE (7u + 32u + 3u * 21u + 1u + WIRE_PRODUCER_NAME_MAX + 1u)
#define MAX_END_LINE (4u + 20u + 1u + 8u + 1u)
/* How often a taken name is tried again with another random part. */
#define NAME_ATTEMPTS 16u

static const char header_line[] = POSITIONS_MAGIC " 1\n";

bool positions_entry_valid(const struct positions_entry *e)
{
    static const uint8_t zero[SHARD_STREAM_ID_SIZE];
    size_t len = strnlen(e->producer, sizeof(e->producer));

    return memcmp(e->stream_id, zero, sizeof(zero)) != 0 &&
           e->next_position < SHARD_POSITION_LIMIT && len < sizeof(e->producer) &&
           wire_check_producer_name(e->producer, len) == 0;
}

int positions_format(const struct positions_entry *v, size_t n, char **ret_buf, size_t *ret_len)
{
    size_t cap, len = 0;
    char *buf;
    int k;

    if (n > POSITIONS_FILE_MAX / MIN_STREAM_LINE)
        return -EFBIG; /* the text could not be shorter than that */
    for (size_t i = 0; i < n; i++)
        if (!positions_entry_valid(&v[i]))
            return -EINVAL;
    cap = sizeof(header_line) + n * MAX_STREAM_LINE + MAX_END_LINE + 1;
    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, header_line, sizeof(header_line) - 1);
    len = sizeof(header_line) - 1;
    for (size_t i = 0; i < n; i++) {
        const struct positions_entry *e = &v[i];

        memcpy(buf + len, "stream ", 7);
        len += 7;
        for (size_t j = 0; j < SHARD_STREAM_ID_SIZE; j++) {
            static const char hex[] = "0123456789abcdef";

            buf[len++] = hex[e->stream_id[j] >> 4];
            buf[len++] = hex[e->stream_id[j] & 15];
        }
        k = snprintf(buf + len, cap - len, " %" PRIu64 " %" PRIu64 " %" PRIu32 " %s\n",
                     e->next_position, e->newest_ns, e->uid, e->producer);
        if (k < 0 || (size_t)k >= cap - len) {
            free(buf);
            return -ENOMEM; /* cannot happen: cap counts the longest line */
        }
        len += (size_t)k;
    }
    k = snprintf(buf + len, cap - len, "end %zu %08" PRIx32 "\n", n, crc32c(buf, len));
    if (k < 0 || (size_t)k >= cap - len) {
        free(buf);
        return -ENOMEM;
    }
    len += (size_t)k;
    if (len > POSITIONS_FILE_MAX) {
        free(buf);
        return -EFBIG;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

/* ---- parsing ---- */

/* A plain decimal at *p (of the n bytes there), up to max: digits only,
 * no leading zero but for "0" itself. Advances *p. Returns 0 or -1. */
static int parse_dec(const char **p, const char *end, uint64_t max, uint64_t *ret)
{
    const char *s = *p;
    uint64_t v = 0;

    if (s >= end || *s < '0' || *s > '9')
        return -1;
    if (*s == '0' && s + 1 < end && s[1] >= '0' && s[1] <= '9')
        return -1;
    for (; s < end && *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *p = s;
    *ret = v;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1; /* uppercase too: the writer prints lowercase only */
}

/* One stream line, the bytes from s to end ('\n' excluded). Returns NULL
 * and fills *e, or the reason it is refused. */
static const char *parse_stream_line(const char *s, const char *end, struct positions_entry *e)
{
    static const uint8_t zero[SHARD_STREAM_ID_SIZE];
    uint64_t v;
    size_t plen;

    s += 7; /* "stream " */
    if (end - s < 32)
        return "stream id is not 32 lowercase hex digits";
    for (size_t i = 0; i < SHARD_STREAM_ID_SIZE; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);

        if (hi < 0 || lo < 0)
            return "stream id is not 32 lowercase hex digits";
        e->stream_id[i] = (uint8_t)(hi << 4 | lo);
    }
    s += 32;
    if (memcmp(e->stream_id, zero, sizeof(zero)) == 0)
        return "stream id is all zero";
    if (s >= end || *s++ != ' ')
        return "stream id is not 32 lowercase hex digits";
    if (parse_dec(&s, end, UINT64_MAX, &v) < 0 || s >= end || *s++ != ' ')
        return "next position is not a decimal number of at most 64 bits";
    if (v >= SHARD_POSITION_LIMIT)
        return "next position out of range (2^63 or more)";
    e->next_position = v;
    if (parse_dec(&s, end, UINT64_MAX, &v) < 0 || s >= end || *s++ != ' ')
        return "newest time is not a decimal number of at most 64 bits";
    e->newest_ns = v;
    if (parse_dec(&s, end, UINT32_MAX, &v) < 0 || s >= end || *s++ != ' ')
        return "uid is not a decimal number of at most 32 bits";
    e->uid = (uint32_t)v;
    plen = (size_t)(end - s);
    if (plen > WIRE_PRODUCER_NAME_MAX || wire_check_producer_name(s, plen) < 0)
        return "producer name breaks the naming rule";
    memcpy(e->producer, s, plen);
    e->producer[plen] = '\0';
    return NULL;
}

/* The order the result is sorted in: by stream id, and within one stream
 * by every other field, so that the last entry of a stream's run is the
 * one whose uid and producer are kept, whatever the order of the lines. */
static int entry_cmp(const void *a, const void *b)
{
    const struct positions_entry *x = a, *y = b;
    int c = memcmp(x->stream_id, y->stream_id, sizeof(x->stream_id));

    if (c != 0)
        return c;
    if (x->next_position != y->next_position)
        return x->next_position < y->next_position ? -1 : 1;
    if (x->newest_ns != y->newest_ns)
        return x->newest_ns < y->newest_ns ? -1 : 1;
    if (x->uid != y->uid)
        return x->uid < y->uid ? -1 : 1;
    return strcmp(x->producer, y->producer);
}

/* Sorts v and folds each stream's entries into one (positions_parse). */
static size_t fold_streams(struct positions_entry *v, size_t n)
{
    size_t out = 0;

    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), entry_cmp);
    for (size_t i = 0; i < n; i++) {
        if (out > 0 && memcmp(v[out - 1].stream_id, v[i].stream_id, sizeof(v[i].stream_id)) == 0) {
            uint64_t newest = v[out - 1].newest_ns;

            /* v[i] sorts after v[out - 1]: its next position is as high or
             * higher, so it is the one kept; the newest time is the
             * highest of both. */
            v[out - 1] = v[i];
            if (newest > v[out - 1].newest_ns)
                v[out - 1].newest_ns = newest;
            continue;
        }
        v[out++] = v[i];
    }
    return out;
}

static int parse_fail(size_t line, const char *why, size_t *ret_line, const char **ret_why)
{
    if (ret_line)
        *ret_line = line;
    if (ret_why)
        *ret_why = why;
    return -EBADMSG;
}

int positions_parse(const char *buf, size_t len, struct positions_entry **ret_v, size_t *ret_n,
                    size_t *ret_line, const char **ret_why)
{
    const char *p = buf, *end = buf + len;
    struct positions_entry *v = NULL;
    size_t lines = 0, n = 0, line = 1;
    const char *why;
    int r;

    if (len > POSITIONS_FILE_MAX)
        return -EFBIG;
    /* The header, before anything is counted or allocated. */
    if (len == 0)
        return parse_fail(1, "empty file (no header line)", ret_line, ret_why);
    if (len < sizeof(header_line) - 1 || memcmp(buf, header_line, sizeof(header_line) - 1) != 0) {
        size_t m = sizeof(POSITIONS_MAGIC " ") - 1;

        if (len >= m && memcmp(buf, POSITIONS_MAGIC " ", m) == 0 &&
            memchr(buf, '\n', len) != NULL)
            return parse_fail(1, "unsupported stream positions version", ret_line, ret_why);
        if (len < sizeof(header_line) - 1 &&
            memcmp(buf, header_line, len) == 0)
            return parse_fail(1, "file ends inside the header line", ret_line, ret_why);
        return parse_fail(1, "not a stream positions file (bad header line)", ret_line, ret_why);
    }
    p += sizeof(header_line) - 1;
    line = 2;
    /* Every line but the header and the end line may be a stream: no more
     * entries than that are ever needed, and the file size bounds it. */
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; q++)
        lines++;
    if (lines > 0) {
        v = calloc(lines, sizeof(*v));
        if (!v)
            return -ENOMEM;
    }
    for (;;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        size_t ll;

        if (p == end) {
            r = parse_fail(line, "file ends before its end line (cut short?)", ret_line, ret_why);
            goto fail;
        }
        if (!eol) {
            r = parse_fail(line, "last line has no newline (cut short?)", ret_line, ret_why);
            goto fail;
        }
        ll = (size_t)(eol - p);
        if (ll >= 7 && memcmp(p, "stream ", 7) == 0) {
            why = parse_stream_line(p, eol, &v[n]);
            if (why) {
                r = parse_fail(line, why, ret_line, ret_why);
                goto fail;
            }
            n++;
        } else if (ll >= 4 && memcmp(p, "end ", 4) == 0) {
            const char *s = p + 4;
            uint64_t count;
            uint32_t crc = 0;

            if (parse_dec(&s, eol, UINT64_MAX, &count) < 0 || s >= eol || *s++ != ' ' ||
                eol - s != 8) {
                r = parse_fail(line, "end line is not \"end <count> <8 hex digits>\"", ret_line,
                               ret_why);
                goto fail;
            }
            for (int i = 0; i < 8; i++) {
                int d = hex_digit(s[i]);

                if (d < 0) {
                    r = parse_fail(line, "end line is not \"end <count> <8 hex digits>\"",
                                   ret_line, ret_why);
                    goto fail;
                }
                crc = crc << 4 | (uint32_t)d;
            }
            if (crc != crc32c(buf, (size_t)(p - buf))) {
                r = parse_fail(line, "CRC32C mismatch (the file is damaged)", ret_line, ret_why);
                goto fail;
            }
            if (count != n) {
                r = parse_fail(line, "end line's count differs from the stream lines", ret_line,
                               ret_why);
                goto fail;
            }
            if (eol + 1 != end) {
                r = parse_fail(line + 1, "data after the end line", ret_line, ret_why);
                goto fail;
            }
            break;
        } else {
            r = parse_fail(line, "unknown line (neither \"stream\" nor \"end\")", ret_line,
                           ret_why);
            goto fail;
        }
        p = eol + 1;
        line++;
    }
    n = fold_streams(v, n);
    if (n == 0) {
        free(v);
        v = NULL;
    }
    *ret_v = v;
    *ret_n = n;
    return 0;

fail:
    free(v);
    return r;
}

/* ---- files ---- */

/* Opens <spool>/<name>, creating it (0750) when missing, and syncs the
 * spool every time: a writer killed after creating it and before the sync
 * would otherwise leave a directory whose own entry may not survive a
 * crash, and the next writer would find it and trust it. */
static int open_spool_dir(int spool_fd, const char *name, bool create, int *ret_fd)
{
    int fd, r;

    if (create && mkdirat(spool_fd, name, 0750) < 0 && errno != EEXIST)
        return -errno;
    fd = openat(spool_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    if (create) {
        r = fsync_dir_fd(spool_fd);
        if (r < 0) {
            (void)close(fd); /* read-only directory descriptor */
            return r;
        }
    }
    *ret_fd = fd;
    return 0;
}

static uint64_t random_nonce(void)
{
    uint64_t v;

    /* GRND_NONBLOCK: early at boot the pool may not be ready, and a name
     * only needs to differ from others; the rename refuses a taken one. */
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
        return v;
    return now_monotonic_ns() * UINT64_C(0x9e3779b97f4a7c15) ^ (uint64_t)getpid();
}

int positions_write(int spool_fd, const char *kind, const struct positions_entry *v, size_t n,
                    char **ret_name)
{
    _cleanup_free_ char *text = NULL;
    _cleanup_close_ int dir_fd = -1;
    char tmp[SPOOL_POSITIONS_NAME_SIZE], name[SPOOL_POSITIONS_NAME_SIZE];
    uint64_t ns = now_realtime_ns(), nonce = random_nonce();
    size_t len;
    int fd, r;

    r = spool_positions_name_format(kind, ns, nonce, true, tmp, sizeof(tmp));
    if (r < 0)
        return r;
    r = positions_format(v, n, &text, &len);
    if (r < 0)
        return r;
    r = open_spool_dir(spool_fd, SPOOL_STREAMS_DIR, true, &dir_fd);
    if (r < 0)
        return r;
    fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return -errno;
    r = write_all(fd, text, len);
    /* The data before the name: a crash must never leave the final name on
     * a file whose blocks were not written. */
    if (r == 0 && fdatasync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    for (unsigned i = 0; r == 0 && i < NAME_ATTEMPTS; i++) {
        bool tmp_left = false;

        r = spool_positions_name_format(kind, ns, nonce, false, name, sizeof(name));
        if (r < 0)
            break;
        r = spool_rename_noreplace(dir_fd, tmp, dir_fd, name, 0, &tmp_left);
        if (r == -EEXIST) {
            nonce = random_nonce();
            r = i + 1 < NAME_ATTEMPTS ? 0 : -EEXIST;
            continue;
        }
        if (r < 0)
            break;
        /* With link(2) and a failed unlink(2) the temp name is a second
         * name of the file; positions_load lists it as a temp and never
         * reads it, so a failure to remove it here costs nothing. */
        if (tmp_left)
            (void)unlinkat(dir_fd, tmp, 0);
        r = fsync_dir_fd(dir_fd);
        if (r < 0)
            return r;
        if (ret_name) {
            char *copy = strdup(name);

            if (!copy)
                return -ENOMEM; /* the file is durable; only its name is lost */
            *ret_name = copy;
        }
        return 0;
    }
    /* The temp never got its final name; what it holds is not needed. */
    (void)unlinkat(dir_fd, tmp, 0);
    return r;
}

void positions_load_report_free(struct positions_load_report *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_read; i++)
        free(r->read[i]);
    free(r->read);
    for (size_t i = 0; i < r->n_bad; i++)
        free(r->bad[i].name);
    free(r->bad);
    for (size_t i = 0; i < r->n_temps; i++)
        free(r->temps[i]);
    free(r->temps);
    memset(r, 0, sizeof(*r));
}

static int push_name(char ***v, size_t *n, const char *name)
{
    char **nv = reallocarray(*v, *n + 1, sizeof(**v));

    if (!nv)
        return -ENOMEM;
    *v = nv;
    nv[*n] = strdup(name);
    if (!nv[*n])
        return -ENOMEM;
    (*n)++;
    return 0;
}

static int push_bad(struct positions_load_report *rep, const char *name, int error, size_t line,
                    const char *why)
{
    struct positions_bad_file *nv = reallocarray(rep->bad, rep->n_bad + 1, sizeof(*nv));

    if (!nv)
        return -ENOMEM;
    rep->bad = nv;
    nv[rep->n_bad] = (struct positions_bad_file){
        .name = strdup(name), .error = error, .line = line, .why = why
    };
    if (!nv[rep->n_bad].name)
        return -ENOMEM;
    rep->n_bad++;
    return 0;
}

/* Reads streams/<name> whole into a new buffer. Returns 0, or a negative
 * errno with *ret_why set for what makes the file damaged (-EBADMSG) rather
 * than unreadable. */
static int read_positions_file(int dir_fd, const char *name, char **ret_buf, size_t *ret_len,
                               const char **ret_why)
{
    _cleanup_close_ int fd = -1;
    struct stat st;
    mode_t mode = 0;
    char *buf;
    ssize_t got;
    int r;

    r = open_regular_at(dir_fd, name, O_NOFOLLOW, &fd, &mode);
    if (r == -EISDIR || r == -EBADFD || r == -ELOOP) {
        *ret_why = r == -ELOOP ? "a symbolic link, not a regular file" : "not a regular file";
        return -EBADMSG;
    }
    if (r < 0) {
        *ret_why = "cannot open it";
        return r;
    }
    if (fstat(fd, &st) < 0) {
        *ret_why = "cannot stat it";
        return -errno;
    }
    if ((uint64_t)st.st_size > POSITIONS_FILE_MAX) {
        *ret_why = "larger than a stream positions file may be (16 MiB)";
        return -EBADMSG;
    }
    /* One byte more than the size: a file that grew while it was read is
     * seen to be longer, and refused, rather than cut. */
    buf = malloc((size_t)st.st_size + 1);
    if (!buf)
        return -ENOMEM;
    got = read_full(fd, buf, (size_t)st.st_size + 1);
    if (got < 0) {
        free(buf);
        *ret_why = "cannot read it";
        return (int)got;
    }
    if ((size_t)got != (size_t)st.st_size) {
        free(buf);
        *ret_why = "its size changed while it was read";
        return -EBUSY;
    }
    *ret_buf = buf;
    *ret_len = (size_t)got;
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int positions_load(int spool_fd, int (*each)(const struct positions_entry *e, void *arg),
                   void *arg, struct positions_load_report *ret_report)
{
    struct positions_load_report rep = { 0 };
    _cleanup_close_ int dir_fd = -1;
    char **names = NULL;
    size_t n_names = 0;
    struct dirent *de;
    DIR *d;
    int r;

    r = open_spool_dir(spool_fd, SPOOL_STREAMS_DIR, false, &dir_fd);
    if (r == -ENOENT) {
        *ret_report = rep;
        return 0;
    }
    if (r < 0)
        return r;
    r = opendir_at(dir_fd, &d);
    if (r < 0)
        return r;
    for (;;) {
        struct spool_positions_name pn;

        errno = 0;
        de = readdir(d);
        if (!de) {
            r = -errno; /* 0 at the end of the directory */
            break;
        }
        if (spool_positions_name_parse(de->d_name, &pn) < 0)
            continue; /* not ours, like any foreign name in the spool */
        r = pn.temp ? push_name(&rep.temps, &rep.n_temps, de->d_name)
                    : push_name(&names, &n_names, de->d_name);
        if (r < 0)
            break;
    }
    (void)closedir(d); /* a read-only directory stream: nothing to lose */
    if (r < 0)
        goto fail;
    if (n_names > 0)
        qsort(names, n_names, sizeof(*names), name_cmp);
    if (rep.n_temps > 0)
        qsort(rep.temps, rep.n_temps, sizeof(*rep.temps), name_cmp);

    for (size_t i = 0; i < n_names; i++) {
        struct positions_entry *v = NULL;
        size_t len = 0, n = 0, line = 0;
        const char *why = NULL;
        char *buf = NULL;

        r = read_positions_file(dir_fd, names[i], &buf, &len, &why);
        if (r == -ENOMEM)
            goto fail;
        if (r < 0) {
            r = push_bad(&rep, names[i], r, 0, why);
            if (r < 0)
                goto fail;
            continue;
        }
        r = positions_parse(buf, len, &v, &n, &line, &why);
        free(buf);
        if (r == -ENOMEM)
            goto fail;
        if (r < 0) {
            r = push_bad(&rep, names[i], -EBADMSG, r == -EBADMSG ? line : 0,
                         r == -EBADMSG ? why : "larger than a stream positions file may be");
            if (r < 0)
                goto fail;
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            r = each(&v[j], arg);
            if (r < 0) {
                free(v);
                goto fail;
            }
        }
        free(v);
        r = push_name(&rep.read, &rep.n_read, names[i]);
        if (r < 0)
            goto fail;
    }
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    *ret_report = rep;
    return 0;

fail:
    for (size_t i = 0; i < n_names; i++)
        free(names[i]);
    free(names);
    positions_load_report_free(&rep);
    return r;
}

static bool is_positions_name(const char *name)
{
    struct spool_positions_name pn;

    return spool_positions_name_parse(name, &pn) == 0;
}

int positions_remove(int spool_fd, const char *const *names, size_t n)
{
    _cleanup_close_ int dir_fd = -1;
    int r, first = 0;

    for (size_t i = 0; i < n; i++)
        if (!is_positions_name(names[i]))
            return -EINVAL;
    r = open_spool_dir(spool_fd, SPOOL_STREAMS_DIR, false, &dir_fd);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++) {
        if (unlinkat(dir_fd, names[i], 0) < 0 && errno != ENOENT) {
            first = -errno;
            break;
        }
    }
    /* Synced also after a failure, so the removals that were done hold. */
    r = fsync_dir_fd(dir_fd);
    return first < 0 ? first : r;
}

int positions_quarantine(int spool_fd, const char *name, char **ret_qname)
{
    _cleanup_close_ int dir_fd = -1;
    _cleanup_close_ int q_fd = -1;
    char *qname = NULL;
    bool second_name = false;
    int r;

    if (!is_positions_name(name))
        return -EINVAL;
    r = open_spool_dir(spool_fd, SPOOL_STREAMS_DIR, false, &dir_fd);
    if (r < 0)
        return r;
    r = open_spool_dir(spool_fd, SPOOL_QUARANTINE_DIR, true, &q_fd);
    if (r < 0)
        return r;
    r = spool_quarantine_move(dir_fd, name, NULL, q_fd, 0, &qname, &second_name);
    if (r < 0)
        return r;
    /* An earlier move through link(2) was stopped before it removed the
     * streams/ name: the quarantine name is the file already. */
    if (second_name && unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT) {
        r = -errno;
        free(qname);
        return r;
    }
    r = fsync_dir_fd(q_fd);
    if (r == 0)
        r = fsync_dir_fd(dir_fd);
    if (r < 0) {
        free(qname);
        return r;
    }
    if (ret_qname)
        *ret_qname = qname;
    else
        free(qname);
    return 0;
}
