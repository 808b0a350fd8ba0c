/* Unit tests of start-up recovery (daemon/recovery.c) on real files in a
 * temporary spool: valid prefixes are sealed into done/ with exactly the
 * torn or corrupt tail cut, files that cannot be the shard their name says
 * go to quarantine/ unchanged, the traces of an interrupted seal or
 * recovery are cleaned up without losing anything, other files are left
 * alone, and a second run changes nothing. The last test runs the real
 * daemon on a spool with a torn temp shard and reads the result back with
 * the real logctl. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "fileutil.h"
#include "harness.h"
#include "recovery.h"
#include "shard_format.h"

#define MAX_LINES 64

struct fixture {
    char dir[64];
    int spool_fd, active_fd, done_fd;
    struct recovery_ops ops;
    int nlines;
    int levels[MAX_LINES];
    char *lines[MAX_LINES];
    int nprogress;
    uint64_t progress_done[MAX_LINES], progress_total[MAX_LINES];
};

__attribute__((format(printf, 3, 4))) static void on_report(void *ctx, int level,
                                                            const char *fmt, ...)
{
    struct fixture *f = ctx;
    va_list ap;

    assert_true(f->nlines < MAX_LINES);
    va_start(ap, fmt);
    assert_true(vasprintf(&f->lines[f->nlines], fmt, ap) >= 0);
    va_end(ap);
    f->levels[f->nlines++] = level;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct fixture *f = ctx;

    assert_true(f->nprogress < MAX_LINES);
    f->progress_done[f->nprogress] = done;
    f->progress_total[f->nprogress++] = total;
}

static void clear_log(struct fixture *f)
{
    for (int i = 0; i < f->nlines; i++)
        free(f->lines[i]);
    f->nlines = 0;
    f->nprogress = 0;
}

static int open_dir(int parent, const char *name)
{
    int fd;

    assert_int_equal(mkdirat(parent, name, 0750), 0);
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-recovery.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->spool_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->spool_fd >= 0);
    f->active_fd = open_dir(f->spool_fd, "active");
    f->done_fd = open_dir(f->spool_fd, "done");
    f->ops.ctx = f;
    f->ops.report = on_report;
    f->ops.progress = on_progress;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];

    clear_log(f);
    close(f->done_fd);
    close(f->active_fd);
    close(f->spool_fd);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* ---- building and inspecting files ---- */

struct shard_bytes {
    unsigned char buf[4096];
    size_t len;
    size_t record_offset[16]; /* where record i starts */
};

/* A shard of producer/id holding records "record <i>" (timestamps 1000 + i)
 * for i < nrec. */
static void build_shard(struct shard_bytes *s, const char *producer, uint64_t id, unsigned nrec)
{
    struct shard_header h;

    assert_true(nrec <= 16);
    memset(&h, 0, sizeof(h));
    h.uid = 1000;
    h.gid = 100;
    h.pid = 4242;
    h.shard_id = id;
    h.created_ns = UINT64_C(1700000000000000000);
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len);
    s->len = shard_encode_header(s->buf, &h);
    for (unsigned i = 0; i < nrec; i++) {
        char rec[32];
        int len = snprintf(rec, sizeof(rec), "record %u", i);

        s->record_offset[i] = s->len;
        s->len += shard_encode_record(s->buf + s->len, rec, (uint32_t)len, 1000 + i);
    }
}

static void write_file(int dir_fd, const char *name, const void *buf, size_t len)
{
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
}

/* The whole file, or NULL when it does not exist. */
static unsigned char *read_file(int dir_fd, const char *name, size_t *ret_len)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    unsigned char *buf;

    if (fd < 0) {
        assert_int_equal(errno, ENOENT);
        return NULL;
    }
    assert_int_equal(fstat(fd, &st), 0);
    buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(read_full(fd, buf, (size_t)st.st_size), st.st_size);
    close(fd);
    *ret_len = (size_t)st.st_size;
    return buf;
}

static void assert_file_equals(int dir_fd, const char *name, const void *expect, size_t len)
{
    size_t got_len = 0;
    unsigned char *got = read_file(dir_fd, name, &got_len);

    if (!got)
        fail_msg("%s is missing", name);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, expect, len);
    free(got);
}

/* name in done/ holds expect (len bytes) and then the seal trailer recovery
 * added: the trailer reads as valid, follows exactly len bytes and ends the
 * file on a multiple of the filesystem's block size. */
static void assert_sealed_equals(int dir_fd, const char *name, const void *expect, size_t len)
{
    size_t got_len = 0;
    unsigned char *got = read_file(dir_fd, name, &got_len);
    long align = fs_block_size(dir_fd, SHARD_ALIGN_MAX);
    int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC);
    struct shard_reader *r;
    struct shard_item item;
    int rc;

    if (!got)
        fail_msg("%s is missing", name);
    assert_true(got_len >= len + SHARD_TRAILER_MIN);
    assert_memory_equal(got, expect, len);
    assert_true(align >= 0);
    if (align > 0)
        assert_int_equal(got_len % (size_t)align, 0);
    free(got);

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    while ((rc = shard_reader_next(r, &item)) == 1 && item.kind != SHARD_ITEM_TRAILER)
        ;
    assert_int_equal(rc, 1);
    assert_int_equal(item.offset, len);
    assert_int_equal(item.trailer->shard_len, len);
    assert_int_equal(item.offset + item.len, got_len);
    assert_int_equal(shard_reader_next(r, &item), 0);
    shard_reader_free(r);
    close(fd);
}

static bool exists(int dir_fd, const char *name)
{
    struct stat st;

    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The stamp recovery leaves in the spool once it has checked every shard in
 * done/. */
#define STAMP "done.checked"

/* The entries of a directory, sorted, each followed by '\n'. */
static char *list_dir(int dir_fd)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fdopendir(fd);
    struct dirent *de;
    char *names[64];
    size_t n = 0, total = 1;
    char *out;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        assert_true(n < 64);
        names[n] = strdup(de->d_name);
        total += strlen(names[n]) + 1;
        n++;
    }
    closedir(d);
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    out = calloc(1, total);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        strcat(out, names[i]);
        strcat(out, "\n");
        free(names[i]);
    }
    return out;
}

static void assert_dir_lists(int dir_fd, const char *expect)
{
    char *got = list_dir(dir_fd);

    assert_string_equal(got, expect);
    free(got);
}

/* Reads done/<name> with the shard reader: the header of producer/id, then
 * exactly "record <i>" for i < nrec, then a clean end of file. */
static void assert_reads_cleanly(struct fixture *f, const char *name, const char *producer,
                                 uint64_t id, unsigned nrec)
{
    int fd = openat(f->done_fd, name, O_RDONLY | O_CLOEXEC);
    struct shard_reader *r;
    struct shard_item item;
    unsigned i = 0;

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &item), 1);
    assert_int_equal(item.kind, SHARD_ITEM_HEADER);
    assert_string_equal(item.header->producer, producer);
    assert_int_equal(item.header->shard_id, id);
    for (;;) {
        char expect[32];
        int rc = shard_reader_next(r, &item), len;

        if (rc == 0)
            break;
        assert_int_equal(rc, 1);
        if (item.kind == SHARD_ITEM_TRAILER) {
            assert_int_equal(item.trailer->records, i);
            continue;
        }
        assert_int_equal(item.kind, SHARD_ITEM_RECORD);
        len = snprintf(expect, sizeof(expect), "record %u", i);
        assert_int_equal(item.len, len);
        assert_memory_equal(item.payload, expect, (size_t)len);
        i++;
    }
    assert_int_equal(i, nrec);
    shard_reader_free(r);
    close(fd);
}

/* Runs recovery, which must succeed. */
static void run_recovery(struct fixture *f, struct recovery_stats *ret)
{
    clear_log(f);
    memset(ret, 0xa5, sizeof(*ret)); /* written only on success: must be overwritten */
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, ret), 0);
}

/* The line must have been reported exactly once, at level. */
static void assert_reported(struct fixture *f, int level, const char *line)
{
    int found = 0;

    for (int i = 0; i < f->nlines; i++)
        if (strcmp(f->lines[i], line) == 0) {
            assert_int_equal(f->levels[i], level);
            found++;
        }
    if (found != 1) {
        for (int i = 0; i < f->nlines; i++)
            fprintf(stderr, "reported: %s\n", f->lines[i]);
        fail_msg("expected once, seen %d times: %s", found, line);
    }
}

static void assert_stats(const struct recovery_stats *s, uint64_t scanned, uint64_t sealed,
                         uint64_t quarantined, uint64_t duplicates, uint64_t ignored,
                         uint64_t records, uint64_t cut)
{
    assert_int_equal(s->files_scanned, scanned);
    assert_int_equal(s->files_sealed, sealed);
    assert_int_equal(s->files_quarantined, quarantined);
    assert_int_equal(s->duplicates_removed, duplicates);
    assert_int_equal(s->files_failed, 0);
    assert_int_equal(s->files_ignored, ignored);
    assert_int_equal(s->records_kept, records);
    assert_int_equal(s->bytes_cut, cut);
}

/* ---- sealing the valid prefix ---- */

/* A whole shard is sealed byte for byte; the stats, the report lines and
 * the progress calls are exactly these. */
static void test_clean_shard_sealed_intact(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;

    build_shard(&s, "web", UINT64_C(0x0123456789abcdef), 3);
    write_file(f->active_fd, "web.0123456789abcdef.tmp", s.buf, s.len);
    run_recovery(f, &st);

    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0123456789abcdef.shard\n");
    assert_sealed_equals(f->done_fd, "web.0123456789abcdef.shard", s.buf, s.len);
    assert_false(exists(f->spool_fd, "quarantine"));
    assert_stats(&st, 1, 1, 0, 0, 0, 3, 0);
    assert_int_equal(f->nlines, 2);
    assert_int_equal(f->levels[0], RECOVERY_LOG_INFO);
    assert_string_equal(f->lines[0],
                        "recovered active/web.0123456789abcdef.tmp into done/: 3 records, "
                        "nothing cut");
    assert_int_equal(f->levels[1], RECOVERY_LOG_INFO);
    assert_string_equal(f->lines[1],
                        "recovery: 1 temp shards in active/: 1 sealed into done/ (3 records "
                        "kept, 0 bytes cut), 0 quarantined, 0 duplicates and 0 empty files "
                        "removed, 0 failed");
    assert_int_equal(f->nprogress, 2);
    assert_int_equal(f->progress_done[0], 0);
    assert_int_equal(f->progress_total[0], 1);
    assert_int_equal(f->progress_done[1], 1);
    assert_int_equal(f->progress_total[1], 1);
}

/* A file cut at every byte inside its last record: the two records before
 * it are kept, exactly the partial bytes are cut, and the sealed file reads
 * cleanly. */
static void test_torn_tail_every_offset(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    size_t last;

    build_shard(&s, "web", 0, 3);
    last = s.record_offset[2];
    for (size_t k = 1; k < s.len - last; k++) {
        uint64_t id = UINT64_C(0x1000) + k;
        struct recovery_stats st;
        char tmp[64], done[64], line[256];

        build_shard(&s, "web", id, 3);
        snprintf(tmp, sizeof(tmp), "web.%016" PRIx64 ".tmp", id);
        snprintf(done, sizeof(done), "web.%016" PRIx64 ".shard", id);
        write_file(f->active_fd, tmp, s.buf, last + k);
        run_recovery(f, &st);

        assert_false(exists(f->active_fd, tmp));
        assert_sealed_equals(f->done_fd, done, s.buf, last);
        assert_reads_cleanly(f, done, "web", id, 2);
        assert_stats(&st, 1, 1, 0, 0, 0, 2, k);
        snprintf(line, sizeof(line),
                 "recovered active/%s into done/: 2 records kept, %zu bytes cut (%s at offset "
                 "%zu)",
                 tmp, k,
                 k < SHARD_RECORD_HEADER ? "file ends inside a record header"
                                         : "file ends inside a record",
                 last);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
}

/* A flipped byte in the middle record ends the valid prefix there: the
 * first record is kept, the middle and the last are cut. */
static void test_corrupt_middle_record(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t mid;
    char line[256];

    build_shard(&s, "api", 7, 3);
    mid = s.record_offset[1];
    s.buf[mid + SHARD_RECORD_HEADER + 3] ^= 0x20;
    write_file(f->active_fd, "api.0000000000000007.tmp", s.buf, s.len);
    run_recovery(f, &st);

    assert_false(exists(f->active_fd, "api.0000000000000007.tmp"));
    assert_sealed_equals(f->done_fd, "api.0000000000000007.shard", s.buf, mid);
    assert_reads_cleanly(f, "api.0000000000000007.shard", "api", 7, 1);
    assert_stats(&st, 1, 1, 0, 0, 0, 1, s.len - mid);
    snprintf(line, sizeof(line),
             "recovered active/api.0000000000000007.tmp into done/: 1 records kept, %zu bytes "
             "cut (record CRC mismatch at offset %zu)",
             s.len - mid, mid);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
}

/* A second shard header belongs in a merged file, never in one shard: the
 * shard ends where it starts. */
static void test_second_header_cut(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s, other;
    struct recovery_stats st;
    size_t first;

    build_shard(&s, "web", 8, 2);
    build_shard(&other, "web", 9, 2);
    first = s.len;
    memcpy(s.buf + s.len, other.buf, other.len);
    s.len += other.len;
    write_file(f->active_fd, "web.0000000000000008.tmp", s.buf, s.len);
    run_recovery(f, &st);
    assert_sealed_equals(f->done_fd, "web.0000000000000008.shard", s.buf, first);
    assert_reads_cleanly(f, "web.0000000000000008.shard", "web", 8, 2);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, other.len);
}

/* Sixteen zero bytes after the last record (a crash after the size was
 * updated but before the data reached the disk) are cut as well. */
static void test_zero_tail(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t whole;

    build_shard(&s, "zeros", 9, 2);
    whole = s.len;
    memset(s.buf + s.len, 0, 4000);
    write_file(f->active_fd, "zeros.0000000000000009.tmp", s.buf, whole + 4000);
    run_recovery(f, &st);
    assert_sealed_equals(f->done_fd, "zeros.0000000000000009.shard", s.buf, whole);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 4000);
}

/* A header alone is a complete shard with no records. */
static void test_header_only(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;

    build_shard(&s, "quiet.app", 42, 0);
    write_file(f->active_fd, "quiet.app.000000000000002a.tmp", s.buf, s.len);
    run_recovery(f, &st);
    assert_dir_lists(f->active_fd, "");
    assert_sealed_equals(f->done_fd, "quiet.app.000000000000002a.shard", s.buf, s.len);
    assert_reads_cleanly(f, "quiet.app.000000000000002a.shard", "quiet.app", 42, 0);
    assert_stats(&st, 1, 1, 0, 0, 0, 0, 0);
    assert_reported(f, RECOVERY_LOG_INFO,
                    "recovered active/quiet.app.000000000000002a.tmp into done/: 0 records, "
                    "nothing cut");
}

/* ---- quarantine ---- */

struct bad_file {
    const char *name;
    unsigned char buf[512];
    size_t len;
    const char *why;
};

/* An empty temp file (the daemon stopped between creating a shard and
 * writing its header) held no record: it is removed, not quarantined. */
static void test_empty_file_removed(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;

    write_file(f->active_fd, "empty.0000000000000001.tmp", "", 0);
    run_recovery(f, &st);
    assert_int_equal(st.empty_removed, 1);
    assert_int_equal(st.files_quarantined, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "");
    assert_int_equal(faccessat(f->spool_fd, "quarantine", F_OK, 0), -1);
}

/* Files that are no shard of their name move to quarantine/ unchanged;
 * nothing is sealed or deleted. */
static void test_quarantine_bad_files(void **state)
{
    struct fixture *f = *state;
    static const char garbage[] = "this is not a shard at all, just some text\n";
    struct bad_file bad[7];
    struct shard_bytes s;
    struct recovery_stats st;
    int qfd;

    memset(bad, 0, sizeof(bad));
    bad[0].name = "onebyte.0000000000000001.tmp";
    bad[0].buf[0] = 'L'; /* the first byte of the magic, and nothing else */
    bad[0].len = 1;
    bad[0].why = "file ends inside a shard header";

    bad[1].name = "short.0000000000000002.tmp";
    build_shard(&s, "short", 2, 1);
    memcpy(bad[1].buf, s.buf, 10);
    bad[1].len = 10;
    bad[1].why = "file ends inside a shard header";

    bad[2].name = "garbage.0000000000000003.tmp";
    memcpy(bad[2].buf, garbage, sizeof(garbage) - 1);
    bad[2].len = sizeof(garbage) - 1;
    bad[2].why = "no shard header (bad magic)";

    bad[3].name = "crc.0000000000000004.tmp";
    build_shard(&s, "crc", 4, 2);
    s.buf[20] ^= 0x01; /* the pid: only the header CRC can tell */
    memcpy(bad[3].buf, s.buf, s.len);
    bad[3].len = s.len;
    bad[3].why = "shard header CRC mismatch";

    bad[4].name = "other.0000000000000005.tmp";
    build_shard(&s, "web", 5, 2);
    memcpy(bad[4].buf, s.buf, s.len);
    bad[4].len = s.len;
    bad[4].why = "its header is for producer web, shard 0000000000000005, not the one its "
                 "name says";

    bad[5].name = "web.0000000000000007.tmp";
    build_shard(&s, "web", 6, 2);
    memcpy(bad[5].buf, s.buf, s.len);
    bad[5].len = s.len;
    bad[5].why = "its header is for producer web, shard 0000000000000006, not the one its "
                 "name says";

    bad[6].name = "web.000000000000000a.tmp";
    build_shard(&s, "web2", 10, 1); /* the file name's producer is a prefix of it */
    memcpy(bad[6].buf, s.buf, s.len);
    bad[6].len = s.len;
    bad[6].why = "its header is for producer web2, shard 000000000000000a, not the one its "
                 "name says";

    for (size_t i = 0; i < 7; i++)
        write_file(f->active_fd, bad[i].name, bad[i].buf, bad[i].len);
    run_recovery(f, &st);

    assert_stats(&st, 7, 0, 7, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    for (size_t i = 0; i < 7; i++) {
        char line[257];

        assert_file_equals(qfd, bad[i].name, bad[i].buf, bad[i].len);
        snprintf(line, sizeof(line), "quarantined active/%s as quarantine/%s: %s", bad[i].name,
                 bad[i].name, bad[i].why);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
    close(qfd);
}

/* A name already taken in quarantine/ by another file gets a suffix; the
 * file there is not overwritten. */
static void test_quarantine_name_clash(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;
    int qfd = open_dir(f->spool_fd, "quarantine");

    write_file(qfd, "junk.0000000000000001.tmp", "older", 5);
    write_file(qfd, "junk.0000000000000001.tmp.1", "old", 3);
    write_file(f->active_fd, "junk.0000000000000001.tmp", "newer junk", 10);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(qfd, "junk.0000000000000001.tmp\njunk.0000000000000001.tmp.1\n"
                          "junk.0000000000000001.tmp.2\n");
    assert_file_equals(qfd, "junk.0000000000000001.tmp", "older", 5);
    assert_file_equals(qfd, "junk.0000000000000001.tmp.1", "old", 3);
    assert_file_equals(qfd, "junk.0000000000000001.tmp.2", "newer junk", 10);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/junk.0000000000000001.tmp as "
                    "quarantine/junk.0000000000000001.tmp.2: no shard header (bad magic)");
    close(qfd);
}

/* A recovery stopped after moving a file to quarantine/ but before syncing
 * active/ can leave it under both names: the temp name goes, and no second
 * copy is made in quarantine/. */
static void test_interrupted_quarantine(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;
    int qfd = open_dir(f->spool_fd, "quarantine");

    write_file(qfd, "junk.0000000000000001.tmp", "junk", 4);
    assert_int_equal(linkat(qfd, "junk.0000000000000001.tmp", f->active_fd,
                            "junk.0000000000000001.tmp", 0),
                     0);
    run_recovery(f, &st);
    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(qfd, "junk.0000000000000001.tmp\n");
    assert_file_equals(qfd, "junk.0000000000000001.tmp", "junk", 4);
    close(qfd);
}

/* quarantine/ cannot be made (a file is in the way): recovery fails, and
 * the file that needed it is still in active/, unchanged. */
static void test_quarantine_unavailable(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;

    write_file(f->spool_fd, "quarantine", "in the way", 10);
    write_file(f->active_fd, "junk.0000000000000001.tmp", "junk", 4);
    clear_log(f);
    memset(&st, 0x5a, sizeof(st));
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, &st),
                     -ENOTDIR);
    assert_int_equal(st.files_scanned, UINT64_C(0x5a5a5a5a5a5a5a5a)); /* untouched */
    assert_file_equals(f->active_fd, "junk.0000000000000001.tmp", "junk", 4);
    assert_file_equals(f->spool_fd, "quarantine", "in the way", 10);
    assert_reported(f, RECOVERY_LOG_ERROR, "cannot open quarantine/: Not a directory");
}

/* ---- names already taken in done/ ---- */

/* A seal interrupted between its rename and the sync of active/ can leave
 * one file under both names: the temp name is removed, the sealed file is
 * untouched. */
static void test_same_inode_duplicate(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;

    build_shard(&s, "web", 0xabc, 2);
    write_file(f->done_fd, "web.0000000000000abc.shard", s.buf, s.len);
    assert_int_equal(linkat(f->done_fd, "web.0000000000000abc.shard", f->active_fd,
                            "web.0000000000000abc.tmp", 0),
                     0);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 0, 1, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0000000000000abc.shard\n");
    assert_file_equals(f->done_fd, "web.0000000000000abc.shard", s.buf, s.len);
    assert_false(exists(f->spool_fd, "quarantine"));
    assert_reported(f, RECOVERY_LOG_INFO,
                    "removed active/web.0000000000000abc.tmp: it is a second name of "
                    "done/web.0000000000000abc.shard (a seal was interrupted after its rename)");
}

/* The done/ name belongs to a different file: the sealed one is kept as it
 * is and the temp file goes to quarantine/. */
static void test_different_inode_clash(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes sealed, tmp;
    struct recovery_stats st;
    int qfd;

    build_shard(&sealed, "web", 0xabc, 2);
    build_shard(&tmp, "web", 0xabc, 3);
    write_file(f->done_fd, "web.0000000000000abc.shard", sealed.buf, sealed.len);
    write_file(f->active_fd, "web.0000000000000abc.tmp", tmp.buf, tmp.len);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_file_equals(f->done_fd, "web.0000000000000abc.shard", sealed.buf, sealed.len);
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_file_equals(qfd, "web.0000000000000abc.tmp", tmp.buf, tmp.len);
    close(qfd);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/web.0000000000000abc.tmp as "
                    "quarantine/web.0000000000000abc.tmp: done/web.0000000000000abc.shard "
                    "already exists and is a different file (the sealed one is kept)");
}

/* ---- other files ---- */

/* Anything not named <producer>.<16 lowercase hex>.tmp, or not a regular
 * file, is left exactly as it is and reported once. Each holds a valid
 * shard, so touching one would show. */
static void test_foreign_names_left_alone(void **state)
{
    struct fixture *f = *state;
    static const char *const names[] = {
        ".0123456789abcdef.tmp",        ".hidden.0123456789abcdef.tmp",
        "bad name.0123456789abcdef.tmp", "notes.txt",
        "web.0123.tmp",                 "web.0123456789ABCDEF.tmp",
        "web.0123456789abcdef.shard",   "web.0123456789abcdef.tmp.bak",
        "web.0123456789abcdefa.tmp",    "web0123456789abcdef.tmp",
    };
    const size_t n = sizeof(names) / sizeof(names[0]);
    struct shard_bytes s;
    struct recovery_stats st;
    char *before;

    build_shard(&s, "web", UINT64_C(0x0123456789abcdef), 2);
    for (size_t i = 0; i < n; i++)
        write_file(f->active_fd, names[i], s.buf, s.len);
    assert_int_equal(mkdirat(f->active_fd, "dir.0123456789abcdef.tmp", 0700), 0);
    write_file(f->spool_fd, "target", s.buf, s.len);
    assert_int_equal(symlinkat("../target", f->active_fd, "link.0123456789abcdef.tmp"), 0);
    before = list_dir(f->active_fd);
    run_recovery(f, &st);

    assert_stats(&st, 0, 0, 0, 0, n + 2, 0, 0);
    assert_dir_lists(f->active_fd, before);
    assert_dir_lists(f->done_fd, "");
    assert_false(exists(f->spool_fd, "quarantine"));
    for (size_t i = 0; i < n; i++) {
        char line[256];

        assert_file_equals(f->active_fd, names[i], s.buf, s.len);
        snprintf(line, sizeof(line),
                 "left active/%s alone: not a shard temp file name (<producer>.<16 hex "
                 "digits>.tmp)",
                 names[i]);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
    assert_file_equals(f->spool_fd, "target", s.buf, s.len);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left active/dir.0123456789abcdef.tmp alone: not a regular file");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left active/link.0123456789abcdef.tmp alone: not a regular file");
    assert_int_equal(f->nlines, (int)n + 2); /* no summary: nothing was recovered */
    free(before);
}

/* After one recovery, a second one finds nothing to do and changes nothing
 * (it still mentions the foreign file). */
static void test_second_run_is_noop(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes a, b, c;
    struct recovery_stats st;
    char *active, *done, *quarantined;
    int qfd;

    build_shard(&a, "a", 1, 3);
    build_shard(&b, "b", 2, 3);
    build_shard(&c, "c", 4, 1);
    write_file(f->active_fd, "a.0000000000000001.tmp", a.buf, a.len);
    write_file(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len - 5);
    write_file(f->active_fd, "c.0000000000000003.tmp", "garbage", 7);
    write_file(f->done_fd, "c.0000000000000004.shard", c.buf, c.len);
    assert_int_equal(linkat(f->done_fd, "c.0000000000000004.shard", f->active_fd,
                            "c.0000000000000004.tmp", 0),
                     0);
    write_file(f->active_fd, "README", "x", 1);
    run_recovery(f, &st);
    assert_stats(&st, 4, 2, 1, 1, 1, 5, b.len - 5 - b.record_offset[2]);

    active = list_dir(f->active_fd);
    done = list_dir(f->done_fd);
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    quarantined = list_dir(qfd);
    assert_string_equal(active, "README\n");
    assert_string_equal(done, "a.0000000000000001.shard\nb.0000000000000002.shard\n"
                              "c.0000000000000004.shard\n");
    assert_string_equal(quarantined, "c.0000000000000003.tmp\n");

    run_recovery(f, &st);
    assert_stats(&st, 0, 0, 0, 0, 1, 0, 0);
    /* The first run checked done/ and left its stamp: no shard is read again. */
    assert_true(exists(f->spool_fd, STAMP));
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 0);
    assert_int_equal(f->nlines, 1);
    assert_int_equal(f->nprogress, 0);
    assert_dir_lists(f->active_fd, active);
    assert_dir_lists(f->done_fd, done);
    assert_dir_lists(qfd, quarantined);
    assert_sealed_equals(f->done_fd, "a.0000000000000001.shard", a.buf, a.len);
    assert_sealed_equals(f->done_fd, "b.0000000000000002.shard", b.buf, b.record_offset[2]);
    assert_file_equals(qfd, "c.0000000000000003.tmp", "garbage", 7);
    close(qfd);
    free(active);
    free(done);
    free(quarantined);
}

/* What a recovery run in a child process saw. */
struct child_result {
    int r;
    struct recovery_stats st;
    int nlines;
    int levels[4];
    char lines[4][256];
};

/* A file recovery cannot open is reported and left in active/ for the next
 * start; the others are still recovered. Permissions do not stop root, so
 * when the tests run as root, recovery runs in a child that has given up
 * root for an unprivileged user owning the spool. */
static void test_unopenable_file_left(void **state)
{
    struct fixture *f = *state;
    const uid_t nobody = 65534;
    struct shard_bytes a, b;
    struct child_result res;
    int fds[2], status;
    pid_t pid;

    build_shard(&a, "a", 1, 1);
    build_shard(&b, "b", 2, 2);
    write_file(f->active_fd, "a.0000000000000001.tmp", a.buf, a.len);
    write_file(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len);
    assert_int_equal(fchmodat(f->active_fd, "b.0000000000000002.tmp", 0400, 0), 0);
    if (geteuid() == 0) {
        assert_int_equal(fchown(f->spool_fd, nobody, nobody), 0);
        assert_int_equal(fchown(f->active_fd, nobody, nobody), 0);
        assert_int_equal(fchown(f->done_fd, nobody, nobody), 0);
        assert_int_equal(fchownat(f->active_fd, "a.0000000000000001.tmp", nobody, nobody, 0), 0);
        assert_int_equal(fchownat(f->active_fd, "b.0000000000000002.tmp", nobody, nobody, 0), 0);
    }
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    clear_log(f);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        memset(&res, 0, sizeof(res));
        if (geteuid() == 0 && (setgid(nobody) < 0 || setuid(nobody) < 0))
            _exit(3);
        res.r = recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, &res.st);
        res.nlines = f->nlines;
        for (int i = 0; i < f->nlines && i < 4; i++) {
            res.levels[i] = f->levels[i];
            snprintf(res.lines[i], sizeof(res.lines[i]), "%s", f->lines[i]);
        }
        _exit(write_all(fds[1], &res, sizeof(res)) == 0 ? 0 : 4);
    }
    close(fds[1]);
    assert_int_equal(read_full(fds[0], &res, sizeof(res)), (ssize_t)sizeof(res));
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_int_equal(res.r, 0);
    assert_int_equal(res.st.files_scanned, 2);
    assert_int_equal(res.st.files_sealed, 1);
    assert_int_equal(res.st.files_failed, 1);
    assert_int_equal(res.st.records_kept, 1);
    assert_int_equal(res.nlines, 3);
    assert_int_equal(res.levels[0], RECOVERY_LOG_INFO);
    assert_string_equal(res.lines[0], "recovered active/a.0000000000000001.tmp into done/: 1 "
                                      "records, nothing cut");
    assert_int_equal(res.levels[1], RECOVERY_LOG_ERROR);
    assert_string_equal(res.lines[1], "cannot recover active/b.0000000000000002.tmp: open: "
                                      "Permission denied; it stays in active/ for the next "
                                      "start");
    assert_int_equal(res.levels[2], RECOVERY_LOG_WARNING);
    assert_string_equal(res.lines[2],
                        "recovery: 2 temp shards in active/: 1 sealed into done/ (1 records "
                        "kept, 0 bytes cut), 0 quarantined, 0 duplicates and 0 empty files "
                        "removed, 1 failed");
    assert_sealed_equals(f->done_fd, "a.0000000000000001.shard", a.buf, a.len);
    assert_file_equals(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len);
    assert_dir_lists(f->active_fd, "b.0000000000000002.tmp\n");
}

/* Without ops, recovery works silently, and ret_stats may be NULL. */
static void test_no_ops(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;

    build_shard(&s, "web", 1, 1);
    write_file(f->active_fd, "web.0000000000000001.tmp", s.buf, s.len);
    write_file(f->active_fd, "web.0000000000000002.tmp", "junk", 4);
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, NULL, NULL), 0);
    assert_dir_lists(f->active_fd, "");
    assert_sealed_equals(f->done_fd, "web.0000000000000001.shard", s.buf, s.len);
}

/* ---- the real daemon ---- */

static bool contains(const char *text, const char *needle)
{
    return strstr(text, needle) != NULL;
}

/* logshardd started on a spool with a torn temp shard seals its valid
 * prefix before READY=1, says so in its log, and logctl cat prints the
 * records that were kept. */
static void test_daemon_recovers_at_start(void **state)
{
    struct harness *h = *state;
    struct shard_bytes s;
    char *active, *log, *done_file, *out_path, *text, *expect_line;
    int fd, status;
    size_t len;

    assert_int_equal(mkdir(h->spool, 0750), 0);
    active = harness_path(h->spool, "active");
    assert_int_equal(mkdir(active, 0750), 0);
    fd = open(active, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    free(active);
    build_shard(&s, "e2e", UINT64_C(0x00000000deadbeef), 4);
    write_file(fd, "e2e.00000000deadbeef.tmp", s.buf, s.record_offset[3] + 7);
    close(fd);

    harness_start(h, NULL);
    status = harness_stop(h, SIGTERM, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_int_equal(harness_count_files(h, "active", ""), 0);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    log = harness_slurp(h->log, &len);
    assert_true(asprintf(&expect_line,
                         "recovered active/e2e.00000000deadbeef.tmp into done/: 3 records kept, "
                         "7 bytes cut (file ends inside a record header at offset %zu)",
                         s.record_offset[3]) > 0);
    if (!contains(log, expect_line))
        fail_msg("daemon log lacks \"%s\":\n%s", expect_line, log);
    free(expect_line);
    free(log);

    done_file = harness_path(h->spool, "done/e2e.00000000deadbeef.shard");
    out_path = harness_path(h->dir, "cat.out");
    {
        const char *argv[] = { harness_logctl(), "cat", done_file, NULL };

        status = harness_run(argv, out_path, NULL, 30000);
    }
    free(done_file);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    text = harness_slurp(out_path, &len);
    free(out_path);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
}

/* The daemon wrote the trailer and was stopped before the rename: the file
 * is sealed as it is, with no second trailer. A trailer torn anywhere is cut
 * and written again. */
static void test_trailer_written_before_crash(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    struct shard_trailer t = { .records = 2, .newest_ns = 1001 };
    unsigned char *full;
    size_t body, total;

    build_shard(&s, "web", 0x51, 2);
    body = s.len;
    t.shard_len = body;
    t.trailer_len = (uint32_t)shard_trailer_size(body, 512);
    total = body + t.trailer_len;
    full = malloc(total);
    assert_non_null(full);
    memcpy(full, s.buf, body);
    shard_encode_trailer(full + body, &t);

    write_file(f->active_fd, "web.0000000000000051.tmp", full, total);
    run_recovery(f, &st);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 0);
    assert_file_equals(f->done_fd, "web.0000000000000051.shard", full, total);

    static const size_t cuts[] = { 1, 3, 4, 8, 39, 40, 100 };
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        char tmp[64], done[64];
        uint64_t id = 0x60 + i;

        build_shard(&s, "web", id, 2);
        memcpy(full, s.buf, body);
        shard_encode_trailer(full + body, &t);
        snprintf(tmp, sizeof(tmp), "web.%016" PRIx64 ".tmp", id);
        snprintf(done, sizeof(done), "web.%016" PRIx64 ".shard", id);
        write_file(f->active_fd, tmp, full, body + cuts[i]);
        run_recovery(f, &st);
        assert_stats(&st, 1, 1, 0, 0, 0, 2, cuts[i]);
        assert_sealed_equals(f->done_fd, done, s.buf, body);
        assert_reads_cleanly(f, done, "web", id, 2);
    }
    free(full);
}

/* A version 1 shard (written before seal trailers existed) is recovered in
 * its own version: nothing is added. */
static void test_version1_gets_no_trailer(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t crc_at;

    build_shard(&s, "old", 0x71, 2);
    crc_at = s.record_offset[0] - 4;
    wire_put_u16(s.buf + 8, 1);
    wire_put_u32(s.buf + crc_at, crc32c(s.buf, crc_at));
    write_file(f->active_fd, "old.0000000000000071.tmp", s.buf, s.len);
    run_recovery(f, &st);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 0);
    assert_file_equals(f->done_fd, "old.0000000000000071.shard", s.buf, s.len);
    assert_reads_cleanly(f, "old.0000000000000071.shard", "old", 0x71, 2);
}

/* ---- done/: what must be a sealed shard ---- */

/* Appends the seal trailer of the shard s holds (records of it), unaligned. */
static void seal_bytes(struct shard_bytes *s, uint64_t records)
{
    struct shard_trailer t = {
        .shard_len = s->len,
        .records = records,
        .newest_ns = 2000,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(s->len, 0);
    assert_true(s->len + t.trailer_len <= sizeof(s->buf));
    shard_encode_trailer(s->buf + s->len, &t);
    s->len += t.trailer_len;
}

/* What an older daemon sealed on a full disk: a seal trailer for a shard of
 * no bytes at all, padded to the block size, with no header before it. */
static size_t trailer_only(unsigned char *buf, size_t cap, size_t align)
{
    struct shard_trailer t = { .shard_len = 0, .records = 0, .newest_ns = 1 };

    t.trailer_len = (uint32_t)shard_trailer_size(0, align);
    assert_true(t.trailer_len <= cap);
    shard_encode_trailer(buf, &t);
    return t.trailer_len;
}

/* Entries of done/ that cannot be the sealed shard their name says move to
 * quarantine/ unchanged, each with a line saying why; whole shards (sealed,
 * sealed without a trailer, version 1), a shard with a damaged record,
 * directories, symbolic links and other names stay where they are. */
static void test_done_invalid_quarantined(void **state)
{
    struct fixture *f = *state;
    static const char garbage[] = "not a shard\n";
    struct shard_bytes s, merged, sealed, bare, v1, damaged;
    unsigned char trailer[1024];
    size_t trailer_len = trailer_only(trailer, sizeof(trailer), 1024);
    struct recovery_stats st;
    const char *kept;
    size_t crc_at, second_at;
    char line[256];
    int qfd;

    write_file(f->done_fd, "empty.0000000000000001.shard", "", 0);
    write_file(f->done_fd, "newp.0000000000000002.shard", trailer, trailer_len);
    build_shard(&s, "short", 3, 1);
    write_file(f->done_fd, "short.0000000000000003.shard", s.buf, 20);
    write_file(f->done_fd, "junk.0000000000000004.shard", garbage, sizeof(garbage) - 1);
    build_shard(&s, "web", 6, 2);
    seal_bytes(&s, 2);
    write_file(f->done_fd, "web.0000000000000005.shard", s.buf, s.len);
    build_shard(&merged, "m", 7, 1);
    seal_bytes(&merged, 1);
    build_shard(&s, "m", 8, 1);
    second_at = merged.len;
    memcpy(merged.buf + merged.len, s.buf, s.len);
    merged.len += s.len;
    write_file(f->done_fd, "m.0000000000000007.shard", merged.buf, merged.len);
    assert_int_equal(mkfifoat(f->done_fd, "fifo.0000000000000009.shard", 0600), 0);

    build_shard(&sealed, "ok", 0x10, 3);
    seal_bytes(&sealed, 3);
    write_file(f->done_fd, "ok.0000000000000010.shard", sealed.buf, sealed.len);
    build_shard(&bare, "bare", 0x11, 2); /* sealed without a trailer (a full disk) */
    write_file(f->done_fd, "bare.0000000000000011.shard", bare.buf, bare.len);
    build_shard(&v1, "old", 0x12, 2);
    crc_at = v1.record_offset[0] - 4;
    wire_put_u16(v1.buf + 8, 1);
    wire_put_u32(v1.buf + crc_at, crc32c(v1.buf, crc_at));
    write_file(f->done_fd, "old.0000000000000012.shard", v1.buf, v1.len);
    build_shard(&damaged, "dmg", 0x13, 3);
    damaged.buf[damaged.record_offset[1] + 17] ^= 0x20;
    write_file(f->done_fd, "dmg.0000000000000013.shard", damaged.buf, damaged.len);
    assert_int_equal(mkdirat(f->done_fd, "dir.0000000000000014.shard", 0700), 0);
    assert_int_equal(symlinkat("ok.0000000000000010.shard", f->done_fd,
                               "link.0000000000000015.shard"),
                     0);
    write_file(f->done_fd, "README", garbage, sizeof(garbage) - 1);

    alarm(30); /* a FIFO opened for reading would block here forever */
    run_recovery(f, &st);
    alarm(0);

    assert_stats(&st, 0, 0, 0, 0, 0, 0, 0);
    assert_int_equal(st.done_checked, 10);
    assert_int_equal(st.done_quarantined, 7);
    assert_int_equal(st.done_damaged, 1);
    assert_int_equal(st.done_failed, 0);
    assert_int_equal(st.done_ignored, 2);
    kept = "README\nbare.0000000000000011.shard\ndir.0000000000000014.shard\n"
           "dmg.0000000000000013.shard\nlink.0000000000000015.shard\n"
           "ok.0000000000000010.shard\nold.0000000000000012.shard\n";
    assert_dir_lists(f->done_fd, kept);
    assert_file_equals(f->done_fd, "ok.0000000000000010.shard", sealed.buf, sealed.len);
    assert_file_equals(f->done_fd, "bare.0000000000000011.shard", bare.buf, bare.len);
    assert_file_equals(f->done_fd, "old.0000000000000012.shard", v1.buf, v1.len);
    assert_file_equals(f->done_fd, "dmg.0000000000000013.shard", damaged.buf, damaged.len);

    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000001.shard\nfifo.0000000000000009.shard\n"
                          "junk.0000000000000004.shard\nm.0000000000000007.shard\n"
                          "newp.0000000000000002.shard\nshort.0000000000000003.shard\n"
                          "web.0000000000000005.shard\n");
    assert_file_equals(qfd, "newp.0000000000000002.shard", trailer, trailer_len);
    assert_file_equals(qfd, "m.0000000000000007.shard", merged.buf, merged.len);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/empty.0000000000000001.shard as "
                    "quarantine/empty.0000000000000001.shard: empty file (no shard header)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/newp.0000000000000002.shard as "
                    "quarantine/newp.0000000000000002.shard: a seal trailer without a shard "
                    "header (what older versions sealed when a full disk kept the header from "
                    "being written)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/short.0000000000000003.shard as "
                    "quarantine/short.0000000000000003.shard: file ends inside a shard header");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/junk.0000000000000004.shard as "
                    "quarantine/junk.0000000000000004.shard: no shard header (bad magic)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/web.0000000000000005.shard as "
                    "quarantine/web.0000000000000005.shard: its header is for producer web, "
                    "shard 0000000000000006, not the one its name says");
    snprintf(line, sizeof(line),
             "quarantined done/m.0000000000000007.shard as quarantine/m.0000000000000007.shard: "
             "a second shard header at offset %zu (a merged file, not a shard)",
             second_at);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/fifo.0000000000000009.shard as "
                    "quarantine/fifo.0000000000000009.shard: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    snprintf(line, sizeof(line),
             "done/dmg.0000000000000013.shard: record CRC mismatch at offset %zu; left in "
             "done/: its header is valid, so only records are damaged, which logctl merge "
             "and verify report",
             damaged.record_offset[1]);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left done/dir.0000000000000014.shard alone: a directory, not a shard");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left done/link.0000000000000015.shard alone: a symbolic link, not a shard");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "recovery: done/: 10 shards checked, 7 entries quarantined (no valid shard "
                    "of their name), 1 damaged shards left for merge, 0 entries could not be "
                    "checked");
    assert_int_equal(f->nlines, 11);

    /* The check is done once: the stamp says so, with its version and the
     * inode of done/. */
    {
        struct stat dst;
        char text[256];
        int len;

        assert_int_equal(fstat(f->done_fd, &dst), 0);
        len = snprintf(text, sizeof(text),
                       "logshardd checked every shard in done/ (inode %ju) at start-up "
                       "(check 1).\nDelete this file to have the next start check them all "
                       "again.\n",
                       (uintmax_t)dst.st_ino);
        assert_file_equals(f->spool_fd, STAMP, text, (size_t)len);
    }
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 0);
    assert_int_equal(st.done_ignored, 2); /* the directory and the link, reported again */
    assert_dir_lists(f->done_fd, kept);
    close(qfd);
}

/* With the stamp of a full check of done/, a start looks only at entries
 * that are not regular files: a FIFO planted since is still moved out of
 * the way, a regular file is not read (that is merge's to judge) until
 * the stamp is deleted, and then the next start checks everything. */
static void test_done_stamp(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    int qfd;

    build_shard(&s, "ok", 1, 2);
    seal_bytes(&s, 2);
    write_file(f->done_fd, "ok.0000000000000001.shard", s.buf, s.len);
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 1);
    assert_int_equal(f->nprogress, 2);
    assert_true(exists(f->spool_fd, STAMP));

    write_file(f->done_fd, "empty.0000000000000002.shard", "", 0);
    assert_int_equal(mkfifoat(f->done_fd, "fifo.0000000000000003.shard", 0600), 0);
    alarm(30);
    run_recovery(f, &st);
    alarm(0);
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 1);
    assert_dir_lists(f->done_fd, "empty.0000000000000002.shard\nok.0000000000000001.shard\n");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/fifo.0000000000000003.shard as "
                    "quarantine/fifo.0000000000000003.shard: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    assert_int_equal(f->nprogress, 2); /* the one odd entry */

    /* A stamp of another version of the check counts as none. */
    assert_int_equal(unlinkat(f->spool_fd, STAMP, 0), 0);
    write_file(f->spool_fd, STAMP, "logshardd checked (check 0)\n", 28);
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 2);
    assert_int_equal(st.done_quarantined, 1);
    assert_dir_lists(f->done_fd, "ok.0000000000000001.shard\n");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000002.shard\nfifo.0000000000000003.shard\n");

    /* The stamp is for this done/: another directory in its place (put
     * back from a backup, say) is checked in full. */
    {
        int other = open_dir(f->spool_fd, "done2");

        write_file(other, "empty.0000000000000004.shard", "", 0);
        clear_log(f);
        assert_int_equal(recovery_run(f->spool_fd, f->active_fd, other, &f->ops, &st), 0);
        assert_int_equal(st.done_checked, 1);
        assert_int_equal(st.done_quarantined, 1);
        assert_dir_lists(other, "");
        close(other);
    }
    close(qfd);
}

/* A FIFO named like a temp shard in active/ is moved to quarantine/ without
 * being opened; the real temp shard beside it is recovered. */
static void test_active_fifo_quarantined(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    struct stat qst;
    int qfd;

    assert_int_equal(mkfifoat(f->active_fd, "pipe.0000000000000001.tmp", 0600), 0);
    build_shard(&s, "web", 2, 2);
    write_file(f->active_fd, "web.0000000000000002.tmp", s.buf, s.len);
    alarm(30); /* a FIFO opened for reading would block here forever */
    run_recovery(f, &st);
    alarm(0);

    assert_stats(&st, 1, 1, 1, 0, 0, 2, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0000000000000002.shard\n");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_int_equal(fstatat(qfd, "pipe.0000000000000001.tmp", &qst, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(qst.st_mode));
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/pipe.0000000000000001.tmp as "
                    "quarantine/pipe.0000000000000001.tmp: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    close(qfd);
}

/* What older versions left in done/ on a full disk (an empty file, a seal
 * trailer without a header), a FIFO in done/ and one in active/: the daemon
 * starts all the same (READY=1), moves each to quarantine/ with a line
 * naming it and why, and logctl merge and cat --spool then work on the
 * valid shard beside them. */
static void test_daemon_quarantines_leftovers(void **state)
{
    struct harness *h = *state;
    unsigned char trailer[4096];
    size_t trailer_len;
    struct shard_bytes s;
    char *log, *text, *out_path;
    int spool_fd, active_fd, done_fd, qfd, status;
    size_t len;
    static const char *const lines[] = {
        "quarantined done/empty.0000000000000001.shard as quarantine/empty.0000000000000001.shard: "
        "empty file (no shard header)",
        "quarantined done/newp.0000000000000002.shard as quarantine/newp.0000000000000002.shard: "
        "a seal trailer without a shard header",
        "quarantined done/pipe.0000000000000003.shard as quarantine/pipe.0000000000000003.shard: "
        "a FIFO, not a shard",
        "quarantined active/pipe.0000000000000004.tmp as quarantine/pipe.0000000000000004.tmp: "
        "a FIFO, not a shard",
    };

    assert_int_equal(mkdir(h->spool, 0750), 0);
    spool_fd = open(h->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(spool_fd >= 0);
    active_fd = open_dir(spool_fd, "active");
    done_fd = open_dir(spool_fd, "done");
    write_file(done_fd, "empty.0000000000000001.shard", "", 0);
    trailer_len = trailer_only(trailer, sizeof(trailer), 4096);
    write_file(done_fd, "newp.0000000000000002.shard", trailer, trailer_len);
    assert_int_equal(mkfifoat(done_fd, "pipe.0000000000000003.shard", 0600), 0);
    assert_int_equal(mkfifoat(active_fd, "pipe.0000000000000004.tmp", 0600), 0);
    build_shard(&s, "good", 5, 3);
    seal_bytes(&s, 3);
    write_file(done_fd, "good.0000000000000005.shard", s.buf, s.len);

    harness_start(h, NULL); /* fails the test unless READY=1 comes */
    log = harness_slurp(h->log, &len);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        if (!contains(log, lines[i]))
            fail_msg("daemon log lacks \"%s\":\n%s", lines[i], log);
    free(log);
    assert_dir_lists(done_fd, "good.0000000000000005.shard\n");
    assert_dir_lists(active_fd, "");
    qfd = openat(spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000001.shard\nnewp.0000000000000002.shard\n"
                          "pipe.0000000000000003.shard\npipe.0000000000000004.tmp\n");
    close(qfd);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    out_path = harness_path(h->dir, "cat-spool.out");
    {
        const char *argv[] = { harness_logctl(), "cat", "--spool", h->spool, NULL };

        status = harness_run(argv, out_path, NULL, 30000);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    text = harness_slurp(out_path, &len);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
    free(out_path);
    text = harness_merge_and_cat(h, "leftovers.lsm", &len);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
    close(active_fd);
    close(done_fd);
    close(spool_fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clean_shard_sealed_intact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_middle_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_header_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trailer_written_before_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version1_gets_no_trailer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_file_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_name_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_quarantine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_unavailable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_inode_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_different_inode_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_names_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_run_is_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unopenable_file_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_ops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_invalid_quarantined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_active_fifo_quarantined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_stamp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_recovers_at_start, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_daemon_quarantines_leftovers, harness_setup,
                                        harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
