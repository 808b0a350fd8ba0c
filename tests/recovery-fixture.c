/* The fixtures of the start-up recovery tests (tests/test-recovery*.c), in
 * one place so that every program builds, recovers and checks spools the
 * same way; recovery-fixture.h says what each one does. */
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

#include "recovery-fixture.h"

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

void clear_log(struct fixture *f)
{
    for (int i = 0; i < f->nlines; i++)
        free(f->lines[i]);
    f->nlines = 0;
    f->nprogress = 0;
}

int open_dir(int parent, const char *name)
{
    int fd;

    assert_int_equal(mkdirat(parent, name, 0750), 0);
    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

int setup(void **state)
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

int teardown(void **state)
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

/* A shard of producer/id holding records "record <i>" (timestamps 1000 + i)
 * for i < nrec. */
void build_shard(struct shard_bytes *s, const char *producer, uint64_t id, unsigned nrec)
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

void write_file(int dir_fd, const char *name, const void *buf, size_t len)
{
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
}

/* The whole file, or NULL when it does not exist. */
unsigned char *read_file(int dir_fd, const char *name, size_t *ret_len)
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

void assert_file_equals(int dir_fd, const char *name, const void *expect, size_t len)
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
void assert_sealed_equals(int dir_fd, const char *name, const void *expect, size_t len)
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

bool exists(int dir_fd, const char *name)
{
    struct stat st;

    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* The entries of a directory, sorted, each followed by '\n'. */
char *list_dir(int dir_fd)
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

void assert_dir_lists(int dir_fd, const char *expect)
{
    char *got = list_dir(dir_fd);

    assert_string_equal(got, expect);
    free(got);
}

/* Reads done/<name> with the shard reader: the header of producer/id, then
 * exactly "record <i>" for i < nrec, then a clean end of file. */
void assert_reads_cleanly(struct fixture *f, const char *name, const char *producer,
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
void run_recovery(struct fixture *f, struct recovery_stats *ret)
{
    clear_log(f);
    memset(ret, 0xa5, sizeof(*ret)); /* written only on success: must be overwritten */
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, ret), 0);
}

/* The line must have been reported exactly once, at level. */
void assert_reported(struct fixture *f, int level, const char *line)
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

void assert_stats(const struct recovery_stats *s, uint64_t scanned, uint64_t sealed,
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

/* Appends the seal trailer of the shard s holds (records of it), unaligned. */
void seal_bytes(struct shard_bytes *s, uint64_t records)
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
size_t trailer_only(unsigned char *buf, size_t cap, size_t align)
{
    struct shard_trailer t = { .shard_len = 0, .records = 0, .newest_ns = 1 };

    t.trailer_len = (uint32_t)shard_trailer_size(0, align);
    assert_true(t.trailer_len <= cap);
    shard_encode_trailer(buf, &t);
    return t.trailer_len;
}
