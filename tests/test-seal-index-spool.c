/* The seal index with the real daemon and the real logctl: an entry for
 * every shard the daemon seals, naming the file's inode and the times its
 * header and trailer say; the file rewritten at start with only the
 * entries of shards still in done/, past a torn tail and over a planted
 * symlink, and filled in from the ends of the shards that have none (the
 * index removed, a file replaced under its name); rewritten at run time
 * as it grows; and logctl cat --since/--until passing over a shard its
 * entry places outside the window, but only while the entry's inode is
 * the file's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "seal_index.h"
#include "shard_format.h"

/* Connects as producer, sends n records and closes: the daemon seals the
 * shard. */
static void send_and_close(struct harness *h, const char *producer, unsigned n)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = producer };
    logshard *ls = NULL;
    char rec[64];

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    for (unsigned i = 0; i < n; i++) {
        size_t len = harness_make_record(rec, sizeof(rec), producer, i, 24);

        assert_int_equal(logshard_append(ls, rec, len), 0);
    }
    assert_int_equal(logshard_flush(ls, 10000), 0);
    logshard_close(ls);
}

static int open_spool(const struct harness *h)
{
    int fd = open(h->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    assert_true(fd >= 0);
    return fd;
}

/* The index as the daemon left it; NULL when there is none. */
static struct seal_index *load_index(const struct harness *h)
{
    struct seal_index *ix = NULL;
    int fd = open_spool(h);
    int r = seal_index_load(fd, &ix);

    close(fd);
    if (r == -ENOENT)
        return NULL;
    assert_int_equal(r, 0);
    return ix;
}

/* The entries in the file, every one counted (parse keeps one per name). */
static size_t raw_entries(const struct harness *h)
{
    char *path = harness_path(h->spool, SEAL_INDEX_FILE);
    size_t len = 0, n = 0, at = 0;
    char *buf;

    if (access(path, F_OK) != 0) {
        free(path);
        return 0;
    }
    buf = harness_slurp(path, &len);
    while (at < len) {
        struct seal_index_entry e;
        size_t elen;

        if (seal_index_decode((unsigned char *)buf + at, len - at, &e, &elen) != 0)
            break;
        n++;
        at += elen;
    }
    free(buf);
    free(path);
    return n;
}

struct count_wait {
    const struct harness *h;
    size_t shards, entries;
};

static bool shards_and_entries(void *arg)
{
    struct count_wait *w = arg;

    return harness_count_files(w->h, "done", ".shard") == w->shards &&
           raw_entries(w->h) == w->entries;
}

static void wait_counts(const struct harness *h, size_t shards, size_t entries)
{
    struct count_wait w = { h, shards, entries };

    if (!harness_wait_for(shards_and_entries, &w, 20000))
        fail_msg("waited for %zu shards in done/ and %zu index entries; have %zu and %zu",
                 shards, entries, harness_count_files(h, "done", ".shard"), raw_entries(h));
}

/* For harness_wait_for: whether the index holds one entry per file of
 * done/, each with that file's inode. */
static bool entries_are_the_files(void *arg)
{
    const struct harness *h = arg;
    struct seal_index *ix = load_index(h);
    char *done = harness_path(h->spool, "done");
    bool all = ix && seal_index_count(ix) == harness_count_files(h, "done", ".shard");

    for (size_t i = 0; all && i < seal_index_count(ix); i++) {
        const struct seal_index_entry *e = seal_index_at(ix, i);
        char *path = harness_path(done, e->name);
        struct stat st;

        all = stat(path, &st) == 0 && e->inode == (uint64_t)st.st_ino;
        free(path);
    }
    seal_index_free(ix);
    free(done);
    return all;
}

/* Every entry names a file of done/ with its inode, its header's creation
 * time and its trailer's newest time; returns how many there are. */
static size_t check_entries(const struct harness *h)
{
    struct seal_index *ix = load_index(h);
    char *done = harness_path(h->spool, "done");
    size_t n;

    assert_non_null(ix);
    n = seal_index_count(ix);
    for (size_t i = 0; i < n; i++) {
        const struct seal_index_entry *e = seal_index_at(ix, i);
        char *path = harness_path(done, e->name);
        struct shard_header hdr;
        struct shard_trailer tr;
        struct stat st;
        uint64_t start;
        int fd = open(path, O_RDONLY | O_CLOEXEC);

        if (fd < 0)
            fail_msg("%s: an entry for a file that is not there", e->name);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(e->inode, (uint64_t)st.st_ino);
        assert_int_equal(shard_locate_before(fd, (uint64_t)st.st_size, &start, &hdr, &tr), 0);
        assert_int_equal(start, 0);
        assert_int_equal(e->created_ns, hdr.created_ns);
        assert_int_equal(e->newest_ns, tr.newest_ns);
        assert_true(e->newest_ns >= e->created_ns - 10ull * 1000000000ull);
        close(fd);
        free(path);
    }
    seal_index_free(ix);
    free(done);
    return n;
}

/* The name in done/ of producer's only shard. */
static char *shard_of(const struct harness *h, const char *producer)
{
    struct seal_index *ix = load_index(h);
    char *name = NULL;

    assert_non_null(ix);
    for (size_t i = 0; i < seal_index_count(ix); i++) {
        const char *n = seal_index_at(ix, i)->name;

        if (strncmp(n, producer, strlen(producer)) == 0 && n[strlen(producer)] == '.')
            name = strdup(n);
    }
    seal_index_free(ix);
    assert_non_null(name);
    return name;
}

static void test_entry_per_seal(void **state)
{
    struct harness *h = *state;
    logshard_opts opts = { .socket_path = h->sock, .producer = "delta" };
    logshard *ls = NULL;

    harness_start(h, NULL);
    send_and_close(h, "alpha", 5);
    send_and_close(h, "beta", 7);
    send_and_close(h, "gamma", 1);
    wait_counts(h, 3, 3);
    assert_int_equal(check_entries(h), 3);

    /* A shard the daemon seals as it stops gets its entry too. */
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_int_equal(logshard_append(ls, "delta 0", 7), 0);
    assert_int_equal(logshard_flush(ls, 10000), 0);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    logshard_close(ls);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 4);
    assert_int_equal(raw_entries(h), 4);
    assert_int_equal(check_entries(h), 4);
    assert_false(harness_log_has(h, SEAL_INDEX_FILE));
}

static void test_rewritten_at_start(void **state)
{
    struct harness *h = *state;
    char *path = harness_path(h->spool, SEAL_INDEX_FILE);
    char *outside = harness_path(h->dir, "not-the-index");
    char *done = harness_path(h->spool, "done");
    char *beta, *beta_path, *text;
    size_t len;
    FILE *f;

    harness_start(h, NULL);
    send_and_close(h, "alpha", 5);
    send_and_close(h, "beta", 7);
    send_and_close(h, "gamma", 1);
    wait_counts(h, 3, 3);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));

    /* beta's shard goes (as merge --delete or prune would remove it), and
     * the last append was torn. */
    beta = shard_of(h, "beta");
    beta_path = harness_path(done, beta);
    assert_int_equal(unlink(beta_path), 0);
    f = fopen(path, "a");
    assert_non_null(f);
    fputs("LSIX\x3c", f);
    fclose(f);
    harness_start(h, NULL);
    wait_counts(h, 2, 2);
    assert_int_equal(check_entries(h), 2);
    text = harness_slurp(path, &len);
    /* alpha's and gamma's entries (names of 28 bytes), the torn bytes gone. */
    assert_int_equal(len, 2 * (SEAL_INDEX_FIXED + 28));
    free(text);

    /* A symlink planted as the index: replaced by a file of the daemon's
     * own at the next start, filled from the shards, and what it pointed
     * at is left alone. */
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    f = fopen(outside, "w");
    assert_non_null(f);
    fputs("keep me", f);
    fclose(f);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink(outside, path), 0);
    harness_start(h, NULL);
    send_and_close(h, "delta", 2);
    wait_counts(h, 3, 3);
    {
        struct stat st;

        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISREG(st.st_mode));
    }
    text = harness_slurp(outside, &len);
    assert_string_equal(text, "keep me");
    free(text);
    assert_int_equal(check_entries(h), 3);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    free(beta);
    free(beta_path);
    free(done);
    free(outside);
    free(path);
}

/* Shards without an entry (the index removed, a file replaced under its
 * name) get one at the next start, read from their own ends. */
static void test_filled_at_start(void **state)
{
    struct harness *h = *state;
    char *path = harness_path(h->spool, SEAL_INDEX_FILE);
    char *done = harness_path(h->spool, "done");
    char *alpha, *alpha_path, *copy, *text;
    struct stat before, after;
    size_t len;
    FILE *f;

    harness_start(h, NULL);
    send_and_close(h, "alpha", 5);
    send_and_close(h, "beta", 7);
    wait_counts(h, 2, 2);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));

    /* alpha's file replaced by a copy (another inode): its entry is stale. */
    alpha = shard_of(h, "alpha");
    alpha_path = harness_path(done, alpha);
    copy = harness_path(h->dir, "alpha-copy");
    assert_int_equal(stat(alpha_path, &before), 0);
    text = harness_slurp(alpha_path, &len);
    f = fopen(copy, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
    assert_int_equal(rename(copy, alpha_path), 0);
    assert_int_equal(stat(alpha_path, &after), 0);
    assert_true(after.st_ino != before.st_ino);
    harness_start(h, NULL);
    /* The stale entry counts as one until the first rewrite replaces it. */
    if (!harness_wait_for(entries_are_the_files, h, 20000))
        fail_msg("the index does not name the files of done/ with their inodes");
    assert_int_equal(check_entries(h), 2);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));

    /* No index at all. */
    assert_int_equal(unlink(path), 0);
    harness_start(h, NULL);
    wait_counts(h, 2, 2);
    assert_int_equal(check_entries(h), 2);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    assert_false(harness_log_has(h, SEAL_INDEX_FILE));
    free(text);
    free(copy);
    free(alpha_path);
    free(alpha);
    free(done);
    free(path);
}

#ifdef LOGSHARD_FAULT_INJECTION
/* With small_seal_index the daemon rewrites after 8 seals: entries of
 * shards removed meanwhile go, the rest and the seals during the rewrite
 * stay. Without the rewrite the file would keep all 8. */
static void test_rewritten_as_it_grows(void **state)
{
    struct harness *h = *state;
    char *done = harness_path(h->spool, "done");
    char name[16];

    setenv("LOGSHARD_FAULTS", "small_seal_index", 1);
    harness_start(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "p%02d", i);
        send_and_close(h, name, 3);
    }
    wait_counts(h, 5, 5);
    for (int i = 0; i < 4; i++) {
        char *shard, *path;

        snprintf(name, sizeof(name), "p%02d", i);
        shard = shard_of(h, name);
        path = harness_path(done, shard);
        assert_int_equal(unlink(path), 0);
        free(path);
        free(shard);
    }
    for (int i = 5; i < 8; i++) {
        snprintf(name, sizeof(name), "p%02d", i);
        send_and_close(h, name, 3);
    }
    /* The eighth seal started the rewrite: p04 to p07 are left. */
    wait_counts(h, 4, 4);
    assert_int_equal(check_entries(h), 4);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    assert_false(harness_log_has(h, SEAL_INDEX_FILE));
    free(done);
}
#endif

/* Runs logctl cat on the spool with args and counts the lines printed. */
static size_t cat_lines(struct harness *h, const char *since, const char *until)
{
    struct harness_run r = since ? harness_run_logctl(h, "cat", "--spool", h->spool, "--since",
                                                      since, "--until", until, (char *)NULL)
                                 : harness_run_logctl(h, "cat", "--spool", h->spool,
                                                      (char *)NULL);
    size_t n = 0;

    harness_expect_code(&r, 0, "logctl cat");
    for (size_t i = 0; i < r.out_len; i++)
        n += r.out[i] == '\n';
    harness_run_free(&r);
    return n;
}

/* Writes an index of one entry for each of alpha, beta and gamma, alpha's
 * with the times given and the inode alpha_inode. */
static void write_index(struct harness *h, uint64_t alpha_inode, uint64_t alpha_ns)
{
    const char *producers[] = { "alpha", "beta", "gamma" };
    char *path = harness_path(h->spool, SEAL_INDEX_FILE);
    char *done = harness_path(h->spool, "done");
    unsigned char buf[3 * SEAL_INDEX_ENTRY_MAX];
    size_t len = 0;
    int fd;

    for (int i = 0; i < 3; i++) {
        struct seal_index_entry e;
        char *name = shard_of(h, producers[i]);
        char *file = harness_path(done, name);
        struct stat st;
        int n;

        assert_int_equal(stat(file, &st), 0);
        memset(&e, 0, sizeof(e));
        snprintf(e.name, sizeof(e.name), "%s", name);
        e.inode = i == 0 ? alpha_inode : (uint64_t)st.st_ino;
        e.created_ns = e.newest_ns = i == 0 ? alpha_ns : 0;
        if (i > 0) { /* the truth, as the daemon wrote it */
            struct seal_index *ix = load_index(h);

            e = *seal_index_find(ix, name, (uint64_t)st.st_ino);
            seal_index_free(ix);
        }
        n = seal_index_encode(&e, buf + len);
        assert_true(n > 0);
        len += (size_t)n;
        free(file);
        free(name);
    }
    fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, len), (ssize_t)len);
    close(fd);
    free(done);
    free(path);
}

static void test_cat_passes_over(void **state)
{
    struct harness *h = *state;
    char *done = harness_path(h->spool, "done");
    char *alpha, *alpha_path;
    uint64_t two_days_ago = (uint64_t)(time(NULL) - 2 * 86400) * 1000000000ull;
    struct stat st;

    harness_start(h, NULL);
    send_and_close(h, "alpha", 5);
    send_and_close(h, "beta", 7);
    send_and_close(h, "gamma", 1);
    wait_counts(h, 3, 3);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 20000));
    alpha = shard_of(h, "alpha");
    alpha_path = harness_path(done, alpha);
    assert_int_equal(stat(alpha_path, &st), 0);

    /* The daemon's own index: every record of the hour is printed. */
    assert_int_equal(cat_lines(h, "-1h", "+1h"), 13);

    /* An entry that puts alpha's shard two days back, with its inode: cat
     * takes its word and passes over the file unread. That alpha's records
     * are then missing is how the test sees the index was used. */
    write_index(h, (uint64_t)st.st_ino, two_days_ago);
    assert_int_equal(cat_lines(h, "-1h", "+1h"), 8);
    /* Without --since/--until the index is not read. */
    assert_int_equal(cat_lines(h, NULL, NULL), 13);
    /* The same entry for another inode is not alpha's file: it is read. */
    write_index(h, (uint64_t)st.st_ino + 1, two_days_ago);
    assert_int_equal(cat_lines(h, "-1h", "+1h"), 13);
    /* Damage: alpha's entry with a bad CRC is passed over, not believed. */
    write_index(h, (uint64_t)st.st_ino, two_days_ago);
    {
        char *path = harness_path(h->spool, SEAL_INDEX_FILE);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        unsigned char c;

        assert_true(fd >= 0);
        assert_int_equal(pread(fd, &c, 1, 20), 1);
        c ^= 0x40;
        assert_int_equal(pwrite(fd, &c, 1, 20), 1);
        close(fd);
        free(path);
    }
    assert_int_equal(cat_lines(h, "-1h", "+1h"), 13);
    free(alpha_path);
    free(alpha);
    free(done);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_entry_per_seal, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_rewritten_at_start, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_filled_at_start, harness_setup, harness_teardown),
#ifdef LOGSHARD_FAULT_INJECTION
        cmocka_unit_test_setup_teardown(test_rewritten_as_it_grows, harness_setup,
                                        harness_teardown),
#endif
        cmocka_unit_test_setup_teardown(test_cat_passes_over, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
