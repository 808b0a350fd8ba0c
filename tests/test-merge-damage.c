/* Integration test of what the real `logctl merge` ($LOGCTL) does with a
 * spool that holds something other than good sealed shards: the first of
 * three sealed shards damaged (one flipped byte in its header, in a record's
 * length, in a record's payload, in its seal trailer, or a bogus record
 * length), the leftovers an older daemon could leave in done/ on a full
 * disk (an empty file, a lone seal trailer), and a FIFO.
 *
 * In every case, with and without --delete: logctl exits 1 and names the
 * file (and the offset of the damage), the damaged file is in quarantine/
 * byte for byte, the FIFO is still in done/, only the sources that were
 * merged are deleted, and every record of the good shards is read back from
 * the merged file exactly once. Every logctl run has a deadline, so a merge
 * that blocks on the FIFO fails the test instead of hanging it. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileutil.h"
#include "harness.h"
#include "shard_format.h"

#define RECORDS 50u
#define RUN_TIMEOUT_MS 20000
#define BASE_TS 1700000000000000000ull

/* The three shards, in output order: the first is the one damaged. */
static const char *const producers[] = { "a", "b", "c" };
#define VICTIM "a.0000000000000001.shard"

struct sealed {
    unsigned char *buf;
    size_t len;
    size_t record_off[RECORDS]; /* where each record starts */
    size_t trailer_off;
};

static void build_sealed(const char *producer, struct sealed *ret)
{
    struct shard_header h = { .uid = 1, .gid = 1, .pid = 1, .shard_id = 1,
                              .created_ns = BASE_TS };
    struct shard_trailer t = { .records = RECORDS, .newest_ns = BASE_TS + RECORDS };
    size_t cap = SHARD_HEADER_MAX + RECORDS * (SHARD_RECORD_HEADER + 64) + 8192;
    unsigned char *buf = calloc(1, cap);
    size_t len;

    assert_non_null(buf);
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len);
    len = shard_encode_header(buf, &h);
    for (unsigned i = 0; i < RECORDS; i++) {
        char p[64];
        int n = snprintf(p, sizeof(p), "%s-record-%u", producer, i);

        ret->record_off[i] = len;
        len += shard_encode_record(buf + len, p, (uint32_t)n, BASE_TS + i);
    }
    ret->trailer_off = len;
    t.shard_len = len;
    t.trailer_len = (uint32_t)shard_trailer_size(len, 4096);
    shard_encode_trailer(buf + len, &t);
    ret->buf = buf;
    ret->len = len + t.trailer_len;
}

struct spool {
    char *dir, *spool, *done, *quarantine, *out, *err;
};

static void spool_init(struct spool *s)
{
    char tmpl[] = "/tmp/test-merge-damage-XXXXXX";

    assert_non_null(mkdtemp(tmpl));
    s->dir = strdup(tmpl);
    assert_non_null(s->dir);
    s->spool = harness_path(s->dir, "spool");
    s->done = harness_path(s->spool, "done");
    s->quarantine = harness_path(s->spool, "quarantine");
    s->out = harness_path(s->dir, "merged.lsm");
    s->err = harness_path(s->dir, "merge.err");
    assert_int_equal(mkdir(s->spool, 0750), 0);
    assert_int_equal(mkdir(s->done, 0750), 0);
}

static void spool_free(struct spool *s)
{
    char *argv[] = { "/bin/rm", "-rf", "--", s->dir, NULL };

    assert_int_equal(harness_run((const char *const *)argv, NULL, NULL, RUN_TIMEOUT_MS), 0);
    free(s->dir);
    free(s->spool);
    free(s->done);
    free(s->quarantine);
    free(s->out);
    free(s->err);
}

static void put(const char *dir, const char *name, const void *buf, size_t len)
{
    char *path = harness_path(dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
    free(path);
}

static bool present(const char *dir, const char *name)
{
    char *path = harness_path(dir, name);
    struct stat st;
    bool r = lstat(path, &st) == 0;

    free(path);
    return r;
}

/* Runs logctl merge on s (with --delete when asked) and returns its exit
 * status; its stderr is in s->err. A merge that does not end within the
 * deadline fails the test. */
static int run_merge(const struct spool *s, bool delete)
{
    const char *argv[] = { harness_logctl(), "merge", "--spool", s->spool, "--output", s->out,
                           delete ? "--delete" : NULL, NULL };
    int status = harness_run(argv, NULL, s->err, RUN_TIMEOUT_MS);

    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Every record of producers b and c is in the output exactly once, in
 * order, and nothing of a is. */
static void check_output(const struct spool *s)
{
    int fd = open(s->out, O_RDONLY | O_CLOEXEC);
    struct shard_reader *r = NULL;
    struct shard_item item;
    unsigned next[3] = { 0, 0, 0 };
    int rc;

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    while ((rc = shard_reader_next(r, &item)) > 0) {
        char want[64];
        size_t p;
        int n;

        if (item.kind != SHARD_ITEM_RECORD)
            continue;
        for (p = 0; p < 3; p++)
            if (strcmp(item.header->producer, producers[p]) == 0)
                break;
        assert_true(p == 1 || p == 2);
        n = snprintf(want, sizeof(want), "%s-record-%u", producers[p], next[p]);
        assert_int_equal(item.len, n);
        assert_memory_equal(item.payload, want, (size_t)n);
        next[p]++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(next[0], 0);
    assert_int_equal(next[1], RECORDS);
    assert_int_equal(next[2], RECORDS);
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);
}

/* The file was moved to quarantine/ unchanged, and logctl said so. */
static void check_quarantined(const struct spool *s, const char *name, const void *bytes,
                              size_t len, const char *why, uint64_t offset)
{
    char *path = harness_path(s->quarantine, name);
    size_t got_len, err_len;
    char *err = harness_slurp(s->err, &err_len);
    char *want;
    char *got;

    assert_false(present(s->done, name));
    got = harness_slurp(path, &got_len);
    assert_int_equal(got_len, len);
    if (len > 0)
        assert_memory_equal(got, bytes, len);
    assert_true(asprintf(&want, "%s/%s: %s at offset %" PRIu64 "; not merged, moved to %s",
                         s->done, name, why, offset, path) > 0);
    if (!strstr(err, want))
        fail_msg("logctl merge did not report '%s'; it said:\n%s", want, err);
    free(want);
    free(got);
    free(err);
    free(path);
}

/* The sources that were merged are gone with --delete, there otherwise. */
static void check_sources(const struct spool *s, bool delete)
{
    assert_true(present(s->done, "b.0000000000000001.shard") == !delete);
    assert_true(present(s->done, "c.0000000000000001.shard") == !delete);
}

typedef void (*damage_fn)(struct sealed *sh, uint64_t *ret_offset, const char **ret_why);

static void flip_header(struct sealed *sh, uint64_t *off, const char **why)
{
    sh->buf[20] ^= 0x01; /* inside the pid field */
    *off = 0;
    *why = "shard header CRC mismatch";
}

static void flip_record_length(struct sealed *sh, uint64_t *off, const char **why)
{
    sh->buf[sh->record_off[7]] ^= 0x01; /* the low byte of the length */
    *off = sh->record_off[7];
    *why = "record CRC mismatch";
}

static void bogus_record_length(struct sealed *sh, uint64_t *off, const char **why)
{
    wire_put_u32(sh->buf + sh->record_off[3], 0x7fffffffu);
    *off = sh->record_off[3];
    *why = "impossible record length";
}

static void huge_record_length(struct sealed *sh, uint64_t *off, const char **why)
{
    /* Plausible, but runs past the end of the file. */
    wire_put_u32(sh->buf + sh->record_off[RECORDS - 2], 1u << 20);
    *off = sh->record_off[RECORDS - 2];
    *why = "file ends inside a record";
}

static void flip_payload(struct sealed *sh, uint64_t *off, const char **why)
{
    sh->buf[sh->record_off[20] + SHARD_RECORD_HEADER + 2] ^= 0x40;
    *off = sh->record_off[20];
    *why = "record CRC mismatch";
}

static void flip_trailer(struct sealed *sh, uint64_t *off, const char **why)
{
    sh->buf[sh->len - 24] ^= 0x01; /* the trailer's record count */
    *off = sh->trailer_off;
    *why = "seal trailer CRC mismatch";
}

static void test_damaged_first_shard(void **state)
{
    static const damage_fn damages[] = { flip_header, flip_record_length, bogus_record_length,
                                         huge_record_length, flip_payload, flip_trailer };
    (void)state;

    for (size_t k = 0; k < sizeof(damages) / sizeof(damages[0]); k++) {
        for (int delete = 0; delete < 2; delete++) {
            struct spool s;
            struct sealed sh[3];
            uint64_t off;
            const char *why;

            spool_init(&s);
            for (size_t p = 0; p < 3; p++) {
                char name[64];

                build_sealed(producers[p], &sh[p]);
                if (p == 0)
                    damages[k](&sh[p], &off, &why);
                snprintf(name, sizeof(name), "%s.0000000000000001.shard", producers[p]);
                put(s.done, name, sh[p].buf, sh[p].len);
            }
            assert_int_equal(run_merge(&s, delete), 1);
            check_quarantined(&s, VICTIM, sh[0].buf, sh[0].len, why, off);
            check_sources(&s, delete);
            check_output(&s);
            /* Once it is out of the way, the next merge is clean. */
            assert_int_equal(unlink(s.out), 0);
            assert_int_equal(run_merge(&s, delete), 0);
            for (size_t p = 0; p < 3; p++)
                free(sh[p].buf);
            spool_free(&s);
        }
    }
}

/* What an older daemon could leave in done/ when the disk was full: an
 * empty file, and a seal trailer without a header. */
static void test_leftovers_of_older_versions(void **state)
{
    (void)state;
    for (int delete = 0; delete < 2; delete++) {
        struct spool s;
        struct sealed sh[3];
        unsigned char trailer[1024];
        struct shard_trailer t = { .trailer_len = sizeof(trailer), .shard_len = 60 };

        spool_init(&s);
        for (size_t p = 1; p < 3; p++) {
            char name[64];

            build_sealed(producers[p], &sh[p]);
            snprintf(name, sizeof(name), "%s.0000000000000001.shard", producers[p]);
            put(s.done, name, sh[p].buf, sh[p].len);
        }
        shard_encode_trailer(trailer, &t);
        put(s.done, "a.0000000000000001.shard", "", 0);
        put(s.done, "a.0000000000000002.shard", trailer, sizeof(trailer));
        assert_int_equal(run_merge(&s, delete), 1);
        check_quarantined(&s, "a.0000000000000001.shard", "", 0, "empty file (no shard header)",
                          0);
        check_quarantined(&s, "a.0000000000000002.shard", trailer, sizeof(trailer),
                          "no shard header (bad magic)", 0);
        check_sources(&s, delete);
        check_output(&s);
        for (size_t p = 1; p < 3; p++)
            free(sh[p].buf);
        spool_free(&s);
    }
}

/* A FIFO under a shard name is never opened in a way that blocks: merge
 * reports it, leaves it, and merges the rest within the deadline. */
static void test_fifo_in_done(void **state)
{
    (void)state;
    for (int delete = 0; delete < 2; delete++) {
        struct spool s;
        struct sealed sh[3];
        char *fifo, *err, *want;
        size_t err_len;
        struct stat st;

        spool_init(&s);
        for (size_t p = 1; p < 3; p++) {
            char name[64];

            build_sealed(producers[p], &sh[p]);
            snprintf(name, sizeof(name), "%s.0000000000000001.shard", producers[p]);
            put(s.done, name, sh[p].buf, sh[p].len);
        }
        fifo = harness_path(s.done, VICTIM);
        assert_int_equal(mkfifo(fifo, 0640), 0);
        assert_int_equal(run_merge(&s, delete), 1);
        err = harness_slurp(s.err, &err_len);
        assert_true(asprintf(&want, "%s: a FIFO, not a regular file; not merged, left in place",
                             fifo) > 0);
        if (!strstr(err, want))
            fail_msg("logctl merge did not report '%s'; it said:\n%s", want, err);
        assert_int_equal(lstat(fifo, &st), 0);
        assert_true(S_ISFIFO(st.st_mode));
        check_sources(&s, delete);
        check_output(&s);
        free(want);
        free(err);
        free(fifo);
        for (size_t p = 1; p < 3; p++)
            free(sh[p].buf);
        spool_free(&s);
    }
}

/* The same spool without damage merges with exit status 0: the checks
 * above can tell the difference. */
static void test_clean_spool(void **state)
{
    struct spool s;
    struct sealed sh;
    (void)state;

    spool_init(&s);
    for (size_t p = 1; p < 3; p++) {
        char name[64];

        build_sealed(producers[p], &sh);
        snprintf(name, sizeof(name), "%s.0000000000000001.shard", producers[p]);
        put(s.done, name, sh.buf, sh.len);
        free(sh.buf);
    }
    assert_int_equal(run_merge(&s, true), 0);
    assert_false(present(s.spool, "quarantine"));
    check_sources(&s, true);
    check_output(&s);
    spool_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clean_spool),
        cmocka_unit_test(test_damaged_first_shard),
        cmocka_unit_test(test_leftovers_of_older_versions),
        cmocka_unit_test(test_fifo_in_done),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
