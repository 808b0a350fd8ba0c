/* Unit tests for common/spool_names.c: every spool name formats and parses
 * back, every other name is refused, and the no-replace rename and the
 * quarantine move keep their promises on both of their paths (renameat2,
 * and link and unlink) in a real directory. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/fs.h>

#include <cmocka.h>

#include "spool_names.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

/* ---- names ---- */

static void check_round_trip(enum spool_kind kind, const char *producer, uint64_t id,
                             const char *want)
{
    char buf[SPOOL_NAME_SIZE];
    struct spool_name n;
    char *dup = NULL;

    assert_int_equal(spool_name_format(kind, producer, strlen(producer), id, buf, sizeof(buf)),
                     0);
    assert_string_equal(buf, want);
    assert_int_equal(spool_name_new(kind, producer, strlen(producer), id, &dup), 0);
    assert_string_equal(dup, want);
    free(dup);

    memset(&n, 0x5a, sizeof(n));
    assert_int_equal(spool_name_parse(buf, kind, &n), 0);
    assert_string_equal(n.producer, producer);
    assert_int_equal(n.producer_len, strlen(producer));
    assert_true(n.id == id);
    /* A name of one kind is never a name of the other. */
    assert_int_equal(spool_name_parse(buf, kind == SPOOL_TMP ? SPOOL_SHARD : SPOOL_TMP, &n),
                     -EINVAL);
}

static void test_format_round_trip(void **state)
{
    char longest[WIRE_PRODUCER_NAME_MAX + 1];
    char want[SPOOL_NAME_SIZE];

    (void)state;
    check_round_trip(SPOOL_TMP, "a", 0, "a.0000000000000000.tmp");
    check_round_trip(SPOOL_SHARD, "a", 0, "a.0000000000000000.shard");
    check_round_trip(SPOOL_SHARD, "a.b.c", 0xff, "a.b.c.00000000000000ff.shard");
    check_round_trip(SPOOL_TMP, "x_-9", UINT64_MAX, "x_-9.ffffffffffffffff.tmp");
    check_round_trip(SPOOL_SHARD, "web", 0x0123456789abcdefu, "web.0123456789abcdef.shard");
    /* The on-disk rule, not the hello rule: a leading '-' is a name an
     * older daemon may have written, and it still reads back. */
    check_round_trip(SPOOL_SHARD, "-dash", 1, "-dash.0000000000000001.shard");
    /* A producer that looks like a name itself is split from the right. */
    check_round_trip(SPOOL_SHARD, "p.0000000000000001.shard", 2,
                     "p.0000000000000001.shard.0000000000000002.shard");

    /* The longest producer fills SPOOL_NAME_SIZE exactly. */
    memset(longest, 'n', WIRE_PRODUCER_NAME_MAX);
    longest[WIRE_PRODUCER_NAME_MAX] = '\0';
    snprintf(want, sizeof(want), "%s.00000000000000aa.shard", longest);
    assert_int_equal(strlen(want) + 1, SPOOL_NAME_SIZE);
    check_round_trip(SPOOL_SHARD, longest, 0xaa, want);
}

static void test_format_refuses(void **state)
{
    char buf[SPOOL_NAME_SIZE];
    char longest[WIRE_PRODUCER_NAME_MAX + 2];
    char *dup = (char *)"untouched";
    const struct {
        const char *producer;
        size_t len;
    } bad[] = {
        { "", 0 },         { ".hidden", 7 }, { "a/b", 3 },  { "a\0b", 3 },
        { "sp ace", 6 },   { "..", 2 },      { "caf\xc3\xa9", 5 },
    };

    (void)state;
    for (size_t i = 0; i < N_ELEMENTS(bad); i++) {
        memset(buf, 'X', sizeof(buf));
        assert_int_equal(spool_name_format(SPOOL_SHARD, bad[i].producer, bad[i].len, 1, buf,
                                           sizeof(buf)),
                         -EINVAL);
        assert_int_equal(buf[0], 'X');
        assert_int_equal(spool_name_new(SPOOL_TMP, bad[i].producer, bad[i].len, 1, &dup),
                         -EINVAL);
        assert_string_equal(dup, "untouched");
    }
    memset(longest, 'n', WIRE_PRODUCER_NAME_MAX + 1);
    longest[WIRE_PRODUCER_NAME_MAX + 1] = '\0';
    assert_int_equal(spool_name_format(SPOOL_SHARD, longest, WIRE_PRODUCER_NAME_MAX + 1, 1, buf,
                                       sizeof(buf)),
                     -EINVAL);
    assert_int_equal(spool_name_format((enum spool_kind)7, "a", 1, 1, buf, sizeof(buf)),
                     -EINVAL);

    /* One byte short of the name and its NUL: nothing is written. */
    memset(buf, 'X', sizeof(buf));
    assert_int_equal(spool_name_format(SPOOL_TMP, "a", 1, 1, buf, strlen("a.0000000000000001.tmp")),
                     -ENOBUFS);
    assert_int_equal(buf[0], 'X');
    assert_int_equal(spool_name_format(SPOOL_SHARD, longest, WIRE_PRODUCER_NAME_MAX, 1, buf,
                                       SPOOL_NAME_SIZE - 1),
                     -ENOBUFS);
    assert_int_equal(spool_name_format(SPOOL_TMP, "a", 1, 1, buf,
                                       strlen("a.0000000000000001.tmp") + 1),
                     0);
}

static void check_refused(const char *name)
{
    struct spool_name n, before;

    memset(&n, 0x5a, sizeof(n));
    before = n;
    if (spool_name_parse(name, SPOOL_SHARD, &n) != -EINVAL ||
        spool_name_parse(name, SPOOL_TMP, &n) != -EINVAL)
        fail_msg("'%s' was taken for a shard name", name);
    assert_memory_equal(&n, &before, sizeof(n)); /* out-parameter untouched */
}

static void test_parse_refuses(void **state)
{
    static const char *const bad[] = {
        /* too short, or nothing but a suffix */
        "", ".shard", ".tmp", "a.shard", "a.tmp", "0123456789abcdef.shard",
        "0123456789abcdef.tmp", "a0123456789abcdef.shard",
        /* no producer, or one starting with '.' */
        ".0123456789abcdef.shard", ".0123456789abcdef.tmp", "..0123456789abcdef.shard",
        ".a.0123456789abcdef.shard", "..a.0123456789abcdef.tmp",
        /* not 16 lowercase hex digits */
        "a.0123456789abcdeg.shard", "a.0123456789ABCDEF.shard", "a.000000000000000F.tmp",
        "a.0x23456789abcdef.shard", "a. 123456789abcdef.shard", "a.-123456789abcdef.shard",
        "ab.012345678abcdef.shard",   /* 15 digits */
        "a.01234567890abcdef.shard",  /* 17 digits */
        "a.0123456789abcdef0.tmp",    /* 17 digits */
        "a..0123456789abcdef.shard.", /* a suffix that is not the end */
        /* the wrong or a near suffix */
        "a.0123456789abcdef.Shard", "a.0123456789abcdef.shardx", "a.0123456789abcdef.shard.1",
        "a.0123456789abcdef.TMP", "a.0123456789abcdef.lsm", "a.0123456789abcdef",
        "a.0123456789abcdef.", "a.0123456789abcdef.shard.tmp.x",
        /* characters the producer rule refuses: separators, space, UTF-8 */
        "a/b.0123456789abcdef.shard", "../x.0123456789abcdef.shard", "/a.0123456789abcdef.tmp",
        "a\\b.0123456789abcdef.shard", "a b.0123456789abcdef.shard",
        "caf\xc3\xa9.0123456789abcdef.shard", "a:b.0123456789abcdef.tmp",
        "a\n.0123456789abcdef.shard",
    };
    char over[WIRE_PRODUCER_NAME_MAX + 64];
    char with_nul[] = "ab\0.0123456789abcdef.shard";
    struct spool_name n;

    (void)state;
    for (size_t i = 0; i < N_ELEMENTS(bad); i++)
        check_refused(bad[i]);

    /* A producer one byte over the limit, and a name near NAME_MAX. */
    memset(over, 'n', WIRE_PRODUCER_NAME_MAX + 1);
    strcpy(over + WIRE_PRODUCER_NAME_MAX + 1, ".0123456789abcdef.shard");
    check_refused(over);
    {
        char huge[300];

        memset(huge, 'n', sizeof(huge));
        strcpy(huge + sizeof(huge) - sizeof(".0123456789abcdef.tmp"), ".0123456789abcdef.tmp");
        check_refused(huge);
    }
    /* A NUL ends a C string: what comes after it is not part of the name. */
    check_refused(with_nul);
    assert_int_equal(spool_name_parse(with_nul + 3, SPOOL_SHARD, &n), -EINVAL);
    assert_int_equal(spool_name_parse("ab.0123456789abcdef.shard", (enum spool_kind)7, &n),
                     -EINVAL);
}

static void test_sealed_name(void **state)
{
    char buf[SPOOL_NAME_SIZE];

    (void)state;
    assert_int_equal(spool_name_sealed("a.b.0000000000000001.tmp", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "a.b.0000000000000001.shard");
    assert_int_equal(spool_name_sealed("web.ffffffffffffffff.tmp", buf, sizeof(buf)), 0);
    assert_string_equal(buf, "web.ffffffffffffffff.shard");

    memset(buf, 'X', sizeof(buf));
    assert_int_equal(spool_name_sealed("a.b.0000000000000001.shard", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(spool_name_sealed("a.b.000000000000000A.tmp", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(spool_name_sealed(".a.0000000000000001.tmp", buf, sizeof(buf)), -EINVAL);
    assert_int_equal(spool_name_sealed("a.0000000000000001.tmp", buf,
                                       strlen("a.0000000000000001.shard")),
                     -ENOBUFS);
    assert_int_equal(buf[0], 'X');
}

static void test_quarantine_names(void **state)
{
    char *q = (char *)"untouched";

    (void)state;
    assert_int_equal(spool_quarantine_name("a.0000000000000001.shard", 0, &q), 0);
    assert_string_equal(q, "a.0000000000000001.shard");
    free(q);
    assert_int_equal(spool_quarantine_name("a.0000000000000001.shard", 1, &q), 0);
    assert_string_equal(q, "a.0000000000000001.shard.1");
    free(q);
    assert_int_equal(spool_quarantine_name("a.0000000000000001.tmp", SPOOL_QUARANTINE_MAX_SUFFIX,
                                           &q),
                     0);
    assert_string_equal(q, "a.0000000000000001.tmp.999");
    free(q);
    q = (char *)"untouched";
    assert_int_equal(spool_quarantine_name("a.0000000000000001.tmp",
                                           SPOOL_QUARANTINE_MAX_SUFFIX + 1, &q),
                     -ERANGE);
    assert_string_equal(q, "untouched");
    /* A quarantine name is no shard name: nothing reads it for one. */
    assert_int_equal(spool_quarantine_name("a.0000000000000001.shard", 2, &q), 0);
    check_refused(q);
    free(q);
}

static void test_positions_names(void **state)
{
    static const char *refused[] = {
        "",
        ".pos",
        "merge-00000000000000000001-00000000000000ff.pos.1",
        "merge-0000000000000000001-00000000000000ff.pos",   /* 19 digits */
        "merge-000000000000000000001-00000000000000ff.pos", /* 21 digits */
        "merge-18446744073709551616-00000000000000ff.pos",  /* over a u64 */
        "merge-00000000000000000001-00000000000000FF.pos",  /* uppercase */
        "merge-00000000000000000001-0000000000000ff.pos",   /* 15 hex */
        "Merge-00000000000000000001-00000000000000ff.pos",
        "mer.ge-00000000000000000001-00000000000000ff.pos",
        "-00000000000000000001-00000000000000ff.pos",
        "abcdefghijklmnopq-00000000000000000001-00000000000000ff.pos", /* kind of 17 */
        "merge_00000000000000000001-00000000000000ff.pos",
        "merge-00000000000000000001-00000000000000ff.tmp",
        "merge-00000000000000000001-00000000000000ff.pos.tmp", /* a temp is hidden */
        ".merge-00000000000000000001-00000000000000ff.pos",    /* and ends .tmp */
        "..merge-00000000000000000001-00000000000000ff.pos.tmp",
        "app.0000000000000001.shard",
    };
    struct spool_positions_name pn;
    char buf[SPOOL_POSITIONS_NAME_SIZE];

    (void)state;
    assert_int_equal(spool_positions_name_format("merge", 1, 255, false, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merge-00000000000000000001-00000000000000ff.pos");
    assert_int_equal(spool_positions_name_parse(buf, &pn), 0);
    assert_string_equal(pn.kind, "merge");
    assert_true(pn.ns == 1 && pn.nonce == 255 && !pn.temp);
    assert_int_equal(spool_positions_name_format("daemon", UINT64_MAX, UINT64_MAX, true, buf,
                                                 sizeof(buf)), 0);
    assert_string_equal(buf, ".daemon-18446744073709551615-ffffffffffffffff.pos.tmp");
    assert_int_equal(spool_positions_name_parse(buf, &pn), 0);
    assert_string_equal(pn.kind, "daemon");
    assert_true(pn.ns == UINT64_MAX && pn.nonce == UINT64_MAX && pn.temp);
    /* The longest fits the buffer the header promises. */
    assert_int_equal(spool_positions_name_format("abcdefghijklmnop", UINT64_MAX, 0, true, buf,
                                                 sizeof(buf)), 0);
    assert_int_equal(spool_positions_name_parse(buf, &pn), 0);
    assert_int_equal(spool_positions_name_format("abcdefghijklmnop", 0, 0, false, buf, 20),
                     -ENOBUFS);
    assert_int_equal(spool_positions_name_format("abcdefghijklmnopq", 0, 0, false, buf,
                                                 sizeof(buf)), -EINVAL);
    assert_int_equal(spool_positions_name_format("", 0, 0, false, buf, sizeof(buf)), -EINVAL);
    assert_int_equal(spool_positions_name_format("da-mon", 0, 0, false, buf, sizeof(buf)),
                     -EINVAL);
    for (size_t i = 0; i < N_ELEMENTS(refused); i++) {
        memset(&pn, 0x5a, sizeof(pn));
        if (spool_positions_name_parse(refused[i], &pn) != -EINVAL)
            fail_msg("accepted '%s'", refused[i]);
        assert_int_equal(pn.kind[0], 0x5a);
    }
    /* Positions names are never shard names, and the reverse. */
    assert_int_equal(spool_positions_name_format("merge", 1, 2, false, buf, sizeof(buf)), 0);
    check_refused(buf);
}

static void test_merged_names(void **state)
{
    /* 2024-01-01T12:00:00Z */
    struct timespec ts = { .tv_sec = 1704110400, .tv_nsec = 123456789 };
    struct timespec later = { .tv_sec = 1704110400, .tv_nsec = 123456790 };
    char buf[SPOOL_MERGED_NAME_SIZE], other[SPOOL_MERGED_NAME_SIZE];
    char *tmp = NULL;

    (void)state;
    assert_int_equal(spool_merged_name(&ts, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merged-20240101T120000.123456789Z.lsm");
    assert_int_equal(spool_merged_name(&ts, 1, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merged-20240101T120000.123456789Z-1.lsm");
    assert_int_equal(spool_merged_name(&ts, 2, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merged-20240101T120000.123456789Z-2.lsm");
    assert_int_equal(spool_merged_name(&ts, SPOOL_MERGED_MAX_SUFFIX, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merged-20240101T120000.123456789Z-999.lsm");
    memset(buf, 'X', sizeof(buf));
    assert_int_equal(spool_merged_name(&ts, SPOOL_MERGED_MAX_SUFFIX + 1, buf, sizeof(buf)),
                     -ERANGE);
    assert_int_equal(buf[0], 'X');

    /* Nanoseconds are zero-padded, so names sort by time. */
    ts.tv_nsec = 5;
    assert_int_equal(spool_merged_name(&ts, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "merged-20240101T120000.000000005Z.lsm");
    assert_int_equal(spool_merged_name(&later, 0, other, sizeof(other)), 0);
    assert_true(strcmp(buf, other) < 0);

    ts.tv_nsec = 1000000000L;
    assert_int_equal(spool_merged_name(&ts, 0, buf, sizeof(buf)), -EINVAL);
    ts.tv_nsec = -1;
    assert_int_equal(spool_merged_name(&ts, 0, buf, sizeof(buf)), -EINVAL);
    ts.tv_nsec = 0;
    memset(buf, 'X', sizeof(buf));
    assert_int_equal(spool_merged_name(&ts, 0, buf, strlen("merged-20240101T120000.000000000Z.lsm")),
                     -ENOBUFS);
    assert_int_equal(buf[0], 'X');
    if (sizeof(time_t) >= 8) {
        ts.tv_sec = (time_t)INT64_MAX;
        assert_int_equal(spool_merged_name(&ts, 0, buf, sizeof(buf)), -EOVERFLOW);
    }

    assert_int_equal(spool_merged_temp_name("merged-20240101T120000.123456789Z.lsm", 4242, &tmp),
                     0);
    assert_string_equal(tmp, ".merged-20240101T120000.123456789Z.lsm.4242.tmp");
    free(tmp);
}

/* What logctl prune takes for a merged file: exactly the names
 * spool_merged_name writes, read back to the time in them. */
static void test_merged_names_parse(void **state)
{
    struct timespec ts = { .tv_sec = 1704110400, .tv_nsec = 123456789 };
    char buf[SPOOL_MERGED_NAME_SIZE];
    uint64_t ns = 7;
    unsigned attempt = 7;
    static const char *const refused[] = {
        "",
        "merged-",
        "merged-20240101T120000.123456789Z.lsm.4242.tmp",     /* a merge's temp */
        ".merged-20240101T120000.123456789Z.lsm.4242.tmp",
        "merged-20240101T120000.123456789Z.lsm~",
        "merged-20240101T120000.123456789Z.LSM",
        "merged-20240101T120000.123456789Z",
        "Merged-20240101T120000.123456789Z.lsm",
        "merged-20240101T120000.12345678Z.lsm",               /* 8 digits of ns */
        "merged-20240101T120000.1234567890Z.lsm",
        "merged-20240101 120000.123456789Z.lsm",
        "merged-20240101T120000,123456789Z.lsm",
        "merged-20240101T120000.123456789.lsm",
        "merged-20240230T120000.123456789Z.lsm",              /* no February 30th */
        "merged-20241301T120000.123456789Z.lsm",
        "merged-20240100T120000.123456789Z.lsm",
        "merged-20240101T240000.123456789Z.lsm",
        "merged-20240101T126000.123456789Z.lsm",
        "merged-19691231T235959.999999999Z.lsm",              /* before the epoch */
        "merged-+0240101T120000.123456789Z.lsm",
        "merged-20240101T120000.123456789Z-0.lsm",
        "merged-20240101T120000.123456789Z-01.lsm",
        "merged-20240101T120000.123456789Z-1000.lsm",
        "merged-20240101T120000.123456789Z-.lsm",
        "merged-20240101T120000.123456789Z--1.lsm",
        "merged-20240101T120000.123456789Z-1.lsm.lsm",
        "merged-99991231T235959.999999999Z.lsm",              /* past a u64 of ns */
        "today.lsm",
        "app.0000000000000001.shard",
    };

    (void)state;
    assert_int_equal(spool_merged_name_parse("merged-20240101T120000.123456789Z.lsm", &ns,
                                             &attempt),
                     0);
    assert_int_equal(ns, 1704110400123456789ull);
    assert_int_equal(attempt, 0);
    assert_int_equal(spool_merged_name_parse("merged-20240101T120000.123456789Z-999.lsm", &ns,
                                             &attempt),
                     0);
    assert_int_equal(ns, 1704110400123456789ull);
    assert_int_equal(attempt, 999);
    assert_int_equal(spool_merged_name_parse("merged-19700101T000000.000000000Z.lsm", &ns, NULL),
                     0);
    assert_int_equal(ns, 0);
    assert_int_equal(spool_merged_name_parse("merged-20240229T235959.999999999Z-12.lsm", NULL,
                                             NULL),
                     0);
    /* Every name the formatter writes reads back to its time and suffix. */
    for (unsigned a = 0; a <= SPOOL_MERGED_MAX_SUFFIX; a += 37) {
        ts.tv_sec += 86400 * 33 + 3601;
        ts.tv_nsec = (long)(a * 1000003u % 1000000000u);
        assert_int_equal(spool_merged_name(&ts, a, buf, sizeof(buf)), 0);
        assert_int_equal(spool_merged_name_parse(buf, &ns, &attempt), 0);
        assert_int_equal(ns, (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec);
        assert_int_equal(attempt, a);
    }
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        ns = 7;
        attempt = 7;
        if (spool_merged_name_parse(refused[i], &ns, &attempt) != -EINVAL)
            fail_msg("'%s' was taken for a merged file's name", refused[i]);
        assert_int_equal(ns, 7);
        assert_int_equal(attempt, 7);
    }
}

/* ---- the rename, in a real directory ---- */

struct tmp {
    char dir[64];
    int dfd;             /* the temp directory */
    int a, b;            /* two directories in it, "a" and "b" */
    bool append_only_a;  /* "a" was made append-only, and must be cleared */
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    strcpy(t->dir, "/tmp/test-spool-names.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    t->dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(t->dfd >= 0);
    assert_int_equal(mkdirat(t->dfd, "a", 0700), 0);
    assert_int_equal(mkdirat(t->dfd, "b", 0700), 0);
    t->a = openat(t->dfd, "a", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    t->b = openat(t->dfd, "b", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(t->a >= 0 && t->b >= 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tmp *t = *state;

    if (t->append_only_a) {
        int flags = 0;

        assert_int_equal(ioctl(t->a, FS_IOC_SETFLAGS, &flags), 0);
    }
    (void)fchmod(t->a, 0700); /* a test may have taken write access away */
    close(t->a);
    close(t->b);
    close(t->dfd);
    assert_int_equal(nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(t);
    return 0;
}

static void put(int dir, const char *name, const char *text)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(close(fd), 0);
}

static void assert_holds(int dir, const char *name, const char *text)
{
    char buf[64];
    int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        fail_msg("%s: %s", name, strerror(errno));
    n = read(fd, buf, sizeof(buf) - 1);
    assert_true(n >= 0);
    buf[n] = '\0';
    close(fd);
    assert_string_equal(buf, text);
}

static void assert_missing(int dir, const char *name)
{
    struct stat st;

    if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        fail_msg("%s is still there", name);
    assert_int_equal(errno, ENOENT);
}

static void check_rename(struct tmp *t, unsigned flags)
{
    bool left = true;

    put(t->a, "old", "old");
    put(t->a, "taken", "taken");
    put(t->b, "taken", "b-taken");

    /* An existing target is refused, in one directory or across two, and
     * both files stay as they were. */
    assert_int_equal(spool_rename_noreplace(t->a, "old", t->a, "taken", flags, NULL), -EEXIST);
    assert_int_equal(spool_rename_noreplace(t->a, "old", t->b, "taken", flags, &left), -EEXIST);
    assert_true(left); /* untouched on failure */
    assert_holds(t->a, "old", "old");
    assert_holds(t->a, "taken", "taken");
    assert_holds(t->b, "taken", "b-taken");

    /* A free name: the file moves, and the old name is gone. */
    assert_int_equal(spool_rename_noreplace(t->a, "old", t->b, "new", flags, &left), 0);
    assert_false(left);
    assert_missing(t->a, "old");
    assert_holds(t->b, "new", "old");
    assert_int_equal(spool_rename_noreplace(t->b, "new", t->b, "newer", flags, NULL), 0);
    assert_missing(t->b, "new");
    assert_holds(t->b, "newer", "old");

    /* Nothing to move. */
    assert_int_equal(spool_rename_noreplace(t->a, "old", t->b, "other", flags, NULL), -ENOENT);
    assert_missing(t->b, "other");
}

static void test_rename_noreplace(void **state)
{
    check_rename(*state, 0);
}

static void test_rename_via_link(void **state)
{
    check_rename(*state, SPOOL_RENAME_VIA_LINK);
}

static void test_rename_unknown_flag(void **state)
{
    struct tmp *t = *state;

    put(t->a, "old", "old");
    assert_int_equal(spool_rename_noreplace(t->a, "old", t->b, "new", 1u << 7, NULL), -EINVAL);
    assert_holds(t->a, "old", "old");
    assert_missing(t->b, "new");
}

/* Makes unlink(2) in t->a fail while link(2) out of it still works: the
 * append-only attribute where it can be set (root, a filesystem that has
 * it), else a directory without write access (anyone but root). Returns
 * whether either worked. */
static bool forbid_unlink_in_a(struct tmp *t)
{
    int flags = FS_APPEND_FL;

    if (ioctl(t->a, FS_IOC_SETFLAGS, &flags) == 0) {
        t->append_only_a = true;
        return true;
    }
    if (geteuid() != 0 && fchmod(t->a, 0500) == 0)
        return true;
    return false;
}

/* The link path when the old name cannot be removed: an error without
 * ret_old_left, success with it, and the new name in place either way. */
static void test_rename_via_link_old_left(void **state)
{
    struct tmp *t = *state;
    bool left = false;
    struct stat x, y;
    int r;

    put(t->a, "one", "one");
    put(t->a, "two", "two");
    if (!forbid_unlink_in_a(t)) {
        print_message("neither the append-only attribute nor permissions can keep unlink "
                      "from working here\n");
        skip();
    }
    r = spool_rename_noreplace(t->a, "one", t->b, "one", SPOOL_RENAME_VIA_LINK, NULL);
    assert_true(r == -EPERM || r == -EACCES);
    assert_holds(t->b, "one", "one");
    assert_int_equal(fstatat(t->a, "one", &x, 0), 0);
    assert_int_equal(fstatat(t->b, "one", &y, 0), 0);
    assert_true(x.st_ino == y.st_ino); /* two names, one inode */

    assert_int_equal(spool_rename_noreplace(t->a, "two", t->b, "two", SPOOL_RENAME_VIA_LINK,
                                            &left),
                     0);
    assert_true(left);
    assert_holds(t->a, "two", "two");
    assert_holds(t->b, "two", "two");
}

/* ---- the quarantine move ---- */

static void check_quarantine(struct tmp *t, unsigned flags)
{
    const char *name = "p.0000000000000001.shard";
    char *q = NULL;
    bool second = true;
    struct stat st;

    /* Under its own name first, then .1, .2: nothing is replaced. */
    put(t->a, name, "first");
    assert_int_equal(spool_quarantine_move(t->a, name, NULL, t->b, flags, &q, &second), 0);
    assert_string_equal(q, name);
    assert_false(second);
    free(q);
    assert_missing(t->a, name);

    put(t->a, name, "second");
    assert_int_equal(fstatat(t->a, name, &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(spool_quarantine_move(t->a, name, &st, t->b, flags, &q, &second), 0);
    assert_string_equal(q, "p.0000000000000001.shard.1");
    assert_false(second);
    free(q);

    put(t->a, name, "third");
    assert_int_equal(spool_quarantine_move(t->a, name, NULL, t->b, flags, &q, &second), 0);
    assert_string_equal(q, "p.0000000000000001.shard.2");
    free(q);
    assert_missing(t->a, name);
    assert_holds(t->b, name, "first");
    assert_holds(t->b, "p.0000000000000001.shard.1", "second");
    assert_holds(t->b, "p.0000000000000001.shard.2", "third");

    /* A FIFO moves without being opened (an open would wait for a
     * writer and hang the test). */
    assert_int_equal(mkfifoat(t->a, "f.0000000000000002.tmp", 0600), 0);
    assert_int_equal(spool_quarantine_move(t->a, "f.0000000000000002.tmp", NULL, t->b, flags, &q,
                                           &second),
                     0);
    assert_string_equal(q, "f.0000000000000002.tmp");
    free(q);
    assert_int_equal(fstatat(t->b, "f.0000000000000002.tmp", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(st.st_mode));
}

static void test_quarantine_move(void **state)
{
    check_quarantine(*state, 0);
}

static void test_quarantine_move_via_link(void **state)
{
    check_quarantine(*state, SPOOL_RENAME_VIA_LINK);
}

/* A move cut short between link(2) and unlink(2) left the file under both
 * names: the quarantine name that is the same inode is returned as such,
 * and the old name is left to the caller. */
static void test_quarantine_second_name(void **state)
{
    struct tmp *t = *state;
    const char *name = "p.0000000000000003.shard";
    char *q = NULL;
    bool second = false;

    put(t->b, name, "someone else's");
    put(t->a, name, "ours");
    assert_int_equal(linkat(t->a, name, t->b, "p.0000000000000003.shard.1", 0), 0);
    assert_int_equal(spool_quarantine_move(t->a, name, NULL, t->b, 0, &q, &second), 0);
    assert_string_equal(q, "p.0000000000000003.shard.1");
    assert_true(second);
    free(q);
    assert_holds(t->a, name, "ours");
    assert_holds(t->b, name, "someone else's");
    assert_missing(t->b, "p.0000000000000003.shard.2");
}

/* With the name and all its 999 suffixed names taken by other files, the
 * move fails with -EEXIST and the file stays where it is. */
static void test_quarantine_all_taken(void **state)
{
    struct tmp *t = *state;
    const char *name = "p.0000000000000004.tmp";
    char *q = (char *)"untouched";
    bool second = false;

    for (unsigned i = 0; i <= SPOOL_QUARANTINE_MAX_SUFFIX; i++) {
        char taken[64];

        if (i == 0)
            snprintf(taken, sizeof(taken), "%s", name);
        else
            snprintf(taken, sizeof(taken), "%s.%u", name, i);
        put(t->b, taken, "taken");
    }
    put(t->a, name, "ours");
    assert_int_equal(spool_quarantine_move(t->a, name, NULL, t->b, SPOOL_RENAME_VIA_LINK, &q,
                                           &second),
                     -EEXIST);
    assert_string_equal(q, "untouched");
    assert_holds(t->a, name, "ours");
    assert_holds(t->b, "p.0000000000000004.tmp.999", "taken");

    /* Nothing to move at all. */
    assert_int_equal(spool_quarantine_move(t->a, "gone", NULL, t->b, 0, &q, &second), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_format_refuses),
        cmocka_unit_test(test_parse_refuses),
        cmocka_unit_test(test_sealed_name),
        cmocka_unit_test(test_quarantine_names),
        cmocka_unit_test(test_merged_names),
        cmocka_unit_test(test_merged_names_parse),
        cmocka_unit_test(test_positions_names),
        cmocka_unit_test_setup_teardown(test_rename_noreplace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rename_via_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rename_unknown_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rename_via_link_old_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_move_via_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_second_name, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_all_taken, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
