/* The spool's names and its no-replace rename; spool_names.h says what each
 * name is and who relies on it. */
#include "spool_names.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

static const char *suffix_of(enum spool_kind kind)
{
    switch (kind) {
    case SPOOL_TMP:
        return SPOOL_TMP_SUFFIX;
    case SPOOL_SHARD:
        return SPOOL_SHARD_SUFFIX;
    }
    return NULL;
}

int spool_name_format(enum spool_kind kind, const char *producer, size_t producer_len,
                      uint64_t id, char *buf, size_t size)
{
    const char *suffix = suffix_of(kind);
    int n;

    /* Checked here rather than trusted, so that every name written parses
     * back to the same producer and id. */
    if (!suffix || wire_check_producer_name(producer, producer_len) < 0)
        return -EINVAL;
    if (producer_len + 1 + SPOOL_ID_DIGITS + strlen(suffix) >= size)
        return -ENOBUFS;
    n = snprintf(buf, size, "%.*s.%016" PRIx64 "%s", (int)producer_len, producer, id, suffix);
    return n > 0 && (size_t)n < size ? 0 : -ENOBUFS;
}

int spool_name_new(enum spool_kind kind, const char *producer, size_t producer_len,
                   uint64_t id, char **ret_name)
{
    char buf[SPOOL_NAME_SIZE];
    char *name;
    int r = spool_name_format(kind, producer, producer_len, id, buf, sizeof(buf));

    if (r < 0)
        return r;
    name = strdup(buf);
    if (!name)
        return -ENOMEM;
    *ret_name = name;
    return 0;
}

int spool_name_parse(const char *name, enum spool_kind kind, struct spool_name *ret)
{
    const char *suffix = suffix_of(kind);
    size_t len = strlen(name), suffix_len;
    const char *id_str;
    size_t producer_len;
    uint64_t id = 0;

    if (!suffix)
        return -EINVAL;
    suffix_len = strlen(suffix);
    if (len < 1 + 1 + SPOOL_ID_DIGITS + suffix_len || strcmp(name + len - suffix_len, suffix) != 0)
        return -EINVAL;
    /* The id has no dots, so the SPOOL_ID_DIGITS characters before the
     * suffix with a dot before them are the split at the last two dots. */
    id_str = name + len - suffix_len - SPOOL_ID_DIGITS;
    if (id_str[-1] != '.')
        return -EINVAL;
    for (size_t i = 0; i < SPOOL_ID_DIGITS; i++) {
        char c = id_str[i];

        if (c >= '0' && c <= '9')
            id = id << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            id = id << 4 | (uint64_t)(c - 'a' + 10);
        else
            return -EINVAL; /* the writer prints lowercase; anything else is not ours */
    }
    producer_len = (size_t)(id_str - 1 - name);
    if (wire_check_producer_name(name, producer_len) < 0)
        return -EINVAL;
    memcpy(ret->producer, name, producer_len);
    ret->producer[producer_len] = '\0';
    ret->producer_len = producer_len;
    ret->id = id;
    return 0;
}

int spool_name_sealed(const char *tmp_name, char *buf, size_t size)
{
    struct spool_name n;
    int r = spool_name_parse(tmp_name, SPOOL_TMP, &n);

    if (r < 0)
        return r;
    return spool_name_format(SPOOL_SHARD, n.producer, n.producer_len, n.id, buf, size);
}

int spool_quarantine_name(const char *name, unsigned attempt, char **ret_name)
{
    char *q;
    int r;

    if (attempt > SPOOL_QUARANTINE_MAX_SUFFIX)
        return -ERANGE;
    if (attempt == 0)
        r = asprintf(&q, "%s", name);
    else
        r = asprintf(&q, "%s.%u", name, attempt);
    if (r < 0)
        return -ENOMEM;
    *ret_name = q;
    return 0;
}

int spool_rename_noreplace(int old_dir, const char *old_name, int new_dir, const char *new_name,
                           unsigned flags, bool *ret_old_left)
{
    if (flags & ~(unsigned)SPOOL_RENAME_VIA_LINK)
        return -EINVAL;
    if (!(flags & SPOOL_RENAME_VIA_LINK)) {
        if (renameat2(old_dir, old_name, new_dir, new_name, RENAME_NOREPLACE) == 0) {
            if (ret_old_left)
                *ret_old_left = false;
            return 0;
        }
        if (errno != EINVAL && errno != ENOSYS)
            return -errno;
    }
    /* No RENAME_NOREPLACE here: link(2) fails with EEXIST rather than
     * replace, and the old name goes only once the new one exists. A check
     * for the new name followed by rename(2) would race with whoever
     * creates it in between. */
    if (linkat(old_dir, old_name, new_dir, new_name, 0) < 0)
        return -errno;
    if (unlinkat(old_dir, old_name, 0) < 0) {
        if (!ret_old_left)
            return -errno;
        *ret_old_left = errno != ENOENT;
        return 0;
    }
    if (ret_old_left)
        *ret_old_left = false;
    return 0;
}

int spool_quarantine_move(int from_dir, const char *name, const struct stat *st, int q_dir,
                          unsigned flags, char **ret_qname, bool *ret_second_name)
{
    struct stat own;

    if (!st) {
        if (fstatat(from_dir, name, &own, AT_SYMLINK_NOFOLLOW) < 0)
            return -errno;
        st = &own;
    }
    for (unsigned i = 0; i <= SPOOL_QUARANTINE_MAX_SUFFIX; i++) {
        struct stat qst;
        char *qname;
        int r = spool_quarantine_name(name, i, &qname);

        if (r < 0)
            return r;
        r = spool_rename_noreplace(from_dir, name, q_dir, qname, flags, NULL);
        if (r == 0) {
            *ret_qname = qname;
            *ret_second_name = false;
            return 0;
        }
        if (r == -EEXIST && fstatat(q_dir, qname, &qst, AT_SYMLINK_NOFOLLOW) == 0 &&
            qst.st_dev == st->st_dev && qst.st_ino == st->st_ino) {
            /* An earlier move through link(2) was stopped before it removed
             * the old name: this quarantine name is the file already. */
            *ret_qname = qname;
            *ret_second_name = true;
            return 0;
        }
        free(qname);
        if (r != -EEXIST)
            return r;
    }
    return -EEXIST;
}

int spool_merged_name(const struct timespec *ts, unsigned attempt, char *buf, size_t size)
{
    char name[SPOOL_MERGED_NAME_SIZE];
    struct tm tm;
    char date[32];
    int n;

    if (attempt > SPOOL_MERGED_MAX_SUFFIX || ts->tv_nsec < 0 || ts->tv_nsec > 999999999L)
        return attempt > SPOOL_MERGED_MAX_SUFFIX ? -ERANGE : -EINVAL;
    if (!gmtime_r(&ts->tv_sec, &tm) || strftime(date, sizeof(date), "%Y%m%dT%H%M%S", &tm) == 0)
        return -EOVERFLOW;
    /* With at most 31 characters of date, nine of nanoseconds and three of
     * attempt, the name always fits SPOOL_MERGED_NAME_SIZE. */
    if (attempt == 0)
        n = snprintf(name, sizeof(name), "merged-%s.%09ldZ" SPOOL_MERGED_SUFFIX, date,
                     (long)ts->tv_nsec);
    else
        n = snprintf(name, sizeof(name), "merged-%s.%09ldZ-%u" SPOOL_MERGED_SUFFIX, date,
                     (long)ts->tv_nsec, attempt);
    if (n < 0 || (size_t)n >= sizeof(name))
        return -EOVERFLOW;
    if ((size_t)n >= size)
        return -ENOBUFS;
    memcpy(buf, name, (size_t)n + 1);
    return 0;
}

/* n decimal digits at p, as a number; -1 when one of them is not a digit. */
static long digits(const char *p, unsigned n)
{
    long v = 0;

    for (unsigned i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

int spool_merged_name_parse(const char *name, uint64_t *ret_ns, unsigned *ret_attempt)
{
    /* "merged-" YYYYmmdd "T" HHMMSS "." 9 digits "Z": the fixed part of a
     * name whose year has four digits, which every time from 1970 to 9999
     * has; a merge at another time is not one prune needs to know. */
    static const char prefix[] = "merged-";
    const size_t fixed = sizeof(prefix) - 1 + 8 + 1 + 6 + 1 + 9 + 1;
    char again[SPOOL_MERGED_NAME_SIZE];
    unsigned attempt = 0;
    struct timespec ts;
    struct tm tm = { 0 };
    const char *p = name, *rest;
    long nsec, v;
    time_t t;

    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0 || strlen(name) < fixed ||
        strlen(name) >= sizeof(again))
        return -EINVAL;
    p += sizeof(prefix) - 1;
    if (p[8] != 'T' || p[15] != '.' || p[25] != 'Z')
        return -EINVAL;
    if ((v = digits(p, 4)) < 1970)
        return -EINVAL;
    tm.tm_year = (int)v - 1900;
    if ((v = digits(p + 4, 2)) < 1)
        return -EINVAL;
    tm.tm_mon = (int)v - 1;
    if ((v = digits(p + 6, 2)) < 1)
        return -EINVAL;
    tm.tm_mday = (int)v;
    if ((v = digits(p + 9, 2)) < 0)
        return -EINVAL;
    tm.tm_hour = (int)v;
    if ((v = digits(p + 11, 2)) < 0)
        return -EINVAL;
    tm.tm_min = (int)v;
    if ((v = digits(p + 13, 2)) < 0)
        return -EINVAL;
    tm.tm_sec = (int)v;
    if ((nsec = digits(p + 16, 9)) < 0)
        return -EINVAL;
    rest = p + 26;
    if (rest[0] == '-') {
        long a = 0;
        size_t n = 0;

        /* 1 to 999, no leading zero: the format check below catches the
         * rest, this only keeps the number small. */
        while (n < 4 && rest[1 + n] >= '0' && rest[1 + n] <= '9')
            a = a * 10 + (rest[1 + n++] - '0');
        if (n == 0 || n > 3)
            return -EINVAL;
        attempt = (unsigned)a;
        if (attempt == 0)
            return -EINVAL;
    }
    /* timegm normalises out-of-range fields (February 30th becomes March
     * 2nd); the canonical check below refuses such names, since the time
     * formats back to another name. */
    t = timegm(&tm);
    /* Nanoseconds since the epoch in a u64 reach into the year 2554. */
    if (t == (time_t)-1 || t < 0 ||
        (uint64_t)t > (UINT64_MAX - 999999999u) / 1000000000u)
        return -EINVAL;
    ts.tv_sec = t;
    ts.tv_nsec = nsec;
    if (spool_merged_name(&ts, attempt, again, sizeof(again)) < 0 || strcmp(again, name) != 0)
        return -EINVAL;
    if (ret_ns)
        *ret_ns = (uint64_t)t * 1000000000u + (uint64_t)nsec;
    if (ret_attempt)
        *ret_attempt = attempt;
    return 0;
}

int spool_merged_temp_name(const char *output_name, pid_t pid, char **ret_name)
{
    char *name;

    if (asprintf(&name, ".%s.%ld" SPOOL_TMP_SUFFIX, output_name, (long)pid) < 0)
        return -ENOMEM;
    *ret_name = name;
    return 0;
}

static bool positions_kind_ok(const char *kind, size_t len)
{
    if (len < 1 || len > SPOOL_POSITIONS_KIND_MAX)
        return false;
    for (size_t i = 0; i < len; i++)
        if (kind[i] < 'a' || kind[i] > 'z')
            return false;
    return true;
}

int spool_positions_name_format(const char *kind, uint64_t ns, uint64_t nonce, bool temp,
                                char *buf, size_t size)
{
    int n;

    if (!positions_kind_ok(kind, strlen(kind)))
        return -EINVAL;
    n = snprintf(buf, size, "%s%s-%020" PRIu64 "-%016" PRIx64 SPOOL_POSITIONS_SUFFIX "%s",
                 temp ? "." : "", kind, ns, nonce, temp ? SPOOL_TMP_SUFFIX : "");
    return n > 0 && (size_t)n < size ? 0 : -ENOBUFS;
}

int spool_positions_name_parse(const char *name, struct spool_positions_name *ret)
{
    /* The fixed part after the kind: "-", 20 digits, "-", 16 hex, ".pos". */
    const size_t tail = 1 + 20 + 1 + 16 + sizeof(SPOOL_POSITIONS_SUFFIX) - 1;
    size_t len = strlen(name), kind_len;
    bool temp = false;
    const char *p;
    uint64_t ns = 0, nonce = 0;

    if (len > 0 && name[0] == '.') {
        size_t tl = sizeof(SPOOL_TMP_SUFFIX) - 1;

        if (len < 1 + tl || strcmp(name + len - tl, SPOOL_TMP_SUFFIX) != 0)
            return -EINVAL;
        temp = true;
        name++;
        len -= 1 + tl;
    }
    if (len <= tail)
        return -EINVAL;
    kind_len = len - tail;
    if (!positions_kind_ok(name, kind_len))
        return -EINVAL;
    p = name + kind_len;
    if (p[0] != '-' || p[21] != '-' || memcmp(p + 38, SPOOL_POSITIONS_SUFFIX, 4) != 0)
        return -EINVAL;
    for (size_t i = 1; i <= 20; i++) {
        unsigned d = (unsigned)(p[i] - '0');

        if (p[i] < '0' || p[i] > '9' || ns > (UINT64_MAX - d) / 10)
            return -EINVAL; /* not a digit, or more than a u64 holds */
        ns = ns * 10 + d;
    }
    for (size_t i = 22; i < 38; i++) {
        char c = p[i];

        if (c >= '0' && c <= '9')
            nonce = nonce << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            nonce = nonce << 4 | (uint64_t)(c - 'a' + 10);
        else
            return -EINVAL;
    }
    memcpy(ret->kind, name, kind_len);
    ret->kind[kind_len] = '\0';
    ret->ns = ns;
    ret->nonce = nonce;
    ret->temp = temp;
    return 0;
}

int spool_merge_lock(int spool_fd, int *ret_fd, long *ret_holder)
{
    char buf[32];
    int fd, len;

    *ret_holder = 0;
    fd = openat(spool_fd, SPOOL_MERGE_LOCK, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
    if (fd < 0)
        return -errno;
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        ssize_t n;

        if (e == EWOULDBLOCK) {
            /* The pid is only for a message; it may be missing or half
             * written if the holder has just started. */
            n = pread(fd, buf, sizeof(buf) - 1, 0);
            if (n > 0) {
                char *end;
                long pid;

                buf[n] = '\0';
                errno = 0;
                pid = strtol(buf, &end, 10);
                if (errno == 0 && end != buf && (*end == '\n' || *end == '\0') && pid > 0)
                    *ret_holder = pid;
            }
        }
        (void)close(fd); /* never locked */
        return e == EWOULDBLOCK ? -EBUSY : -e;
    }
    len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, (size_t)len, 0) != len) {
        /* Ignored: the lock is what matters; a missing pid only makes the
         * message of whoever finds it held shorter. */
    }
    *ret_fd = fd;
    return 0;
}
