/* Unit tests of the merge engine (merge/, through merge.h): which files of
 * done/ are taken and in what order, the copy loop with and without its
 * read/write fallback, whole merges, good and refused, progress reports,
 * and the crash safety of --delete: the lock, the intent file, and
 * recovery from a merge that died at each of its steps. A crash is a
 * forked child that runs the merge and calls _exit() from a step hook,
 * which leaves exactly the files a kill -9 at that instant leaves;
 * tests/test-merge-crash.c kills the real logctl at random instants. Every
 * test works in its own mkdtemp directory with shards built by the common
 * encoder, so the merge is checked against the same format the daemon
 * writes. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileutil.h"
#include "merge.h"
#include "shard_format.h"
#include "spool_names.h"

#include "merge-fixture.h"

/* ---- names and listing ---- */

static void test_parse_names(void **state)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id = 0;
    char long_name[WIRE_PRODUCER_NAME_MAX + 2 + 32];

    (void)state;
    assert_int_equal(merge_parse_source_name("a.b.c.00000000000000ff.shard", producer, &id), 0);
    assert_string_equal(producer, "a.b.c");
    assert_int_equal(id, 0xff);
    assert_int_equal(merge_parse_source_name("x_-9.ffffffffffffffff.shard", producer, &id), 0);
    assert_string_equal(producer, "x_-9");
    assert_true(id == UINT64_MAX);

    assert_int_equal(merge_parse_source_name("a.0000000000000001.tmp", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name(".a.0000000000000001.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name(".0000000000000001.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("a.000000000000000F.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("a.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("", producer, &id), -EINVAL);

    /* 64 bytes is the longest name the rule allows; 65 is refused. */
    memset(long_name, 'n', WIRE_PRODUCER_NAME_MAX);
    strcpy(long_name + WIRE_PRODUCER_NAME_MAX, ".0000000000000001.shard");
    assert_int_equal(merge_parse_source_name(long_name, producer, &id), 0);
    assert_int_equal(strlen(producer), WIRE_PRODUCER_NAME_MAX);
    memset(long_name, 'n', WIRE_PRODUCER_NAME_MAX + 1);
    strcpy(long_name + WIRE_PRODUCER_NAME_MAX + 1, ".0000000000000001.shard");
    assert_int_equal(merge_parse_source_name(long_name, producer, &id), -EINVAL);
}

static void test_list_order(void **state)
{
    struct fixture f;
    struct merge_source *v = NULL;
    size_t n = 0;
    int dfd;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);

    dfd = open(f.done, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(merge_list_sources(dfd, &v, &n), 0);
    assert_int_equal(n, N_SORTED);
    for (size_t i = 0; i < n; i++) {
        char *name = shard_name(sorted_specs[i].producer, sorted_specs[i].id);

        assert_string_equal(v[i].producer, sorted_specs[i].producer);
        assert_true(v[i].id == sorted_specs[i].id);
        assert_string_equal(v[i].name, name);
        free(name);
    }
    merge_sources_free(v, n);

    /* The caller's descriptor stays usable: listing twice gives the same. */
    assert_int_equal(merge_list_sources(dfd, &v, &n), 0);
    assert_int_equal(n, N_SORTED);
    merge_sources_free(v, n);
    assert_int_equal(close(dfd), 0);
    fixture_free(&f);
}

/* ---- the copy loop ---- */

/* A multi-MiB source, not a multiple of the fallback buffer, copied both
 * ways after a prefix already in the output and with the input's file offset
 * moved: both outputs must be the prefix plus the exact source bytes. */
static void test_copy_identical(void **state)
{
    const size_t len = 5u * 1024 * 1024 + 12345;
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src");
    unsigned char *data = pattern(len, 7);

    (void)state;
    write_file(src, data, len);
    for (int force = 0; force <= 1; force++) {
        char *dst = join(tmp, force ? "dst-fallback" : "dst-cfr");
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        bool fell_back = !force;
        unsigned char *got;
        size_t got_len;

        assert_true(in >= 0 && out >= 0);
        assert_int_equal(write_all(out, "PFX", 3), 0);
        assert_true(lseek(in, 1000, SEEK_SET) == 1000);
        assert_int_equal(merge_copy(in, out, len, force, &fell_back), 0);
        if (force)
            assert_true(fell_back);
        else
            print_message("copy_file_range path %s\n", fell_back ? "fell back" : "used");
        assert_int_equal(close(in), 0);
        assert_int_equal(close(out), 0);

        got = read_file(dst, &got_len);
        assert_int_equal(got_len, len + 3);
        assert_memory_equal(got, "PFX", 3);
        assert_memory_equal(got + 3, data, len);
        free(got);
        free(dst);
    }
    free(data);
    free(src);
    rm_rf(tmp);
}

/* merge_copy_at writes at the offset it is given, by either method, and
 * leaves the output's file offset alone. */
static void test_copy_at_offset(void **state)
{
    const size_t len = 3u * 1024 * 1024 + 777;
    const off_t at = 2u * 1024 * 1024 + 5;
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src");
    unsigned char *data = pattern(len, 11);

    (void)state;
    write_file(src, data, len);
    for (int force = 0; force <= 1; force++) {
        char *dst = join(tmp, force ? "dst-fallback" : "dst-cfr");
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        unsigned char *got;
        size_t got_len;

        assert_true(in >= 0 && out >= 0);
        assert_int_equal(write_all(out, "HEAD", 4), 0);
        assert_int_equal(merge_copy_at(in, out, (int64_t)at, len, force, NULL), 0);
        assert_true(lseek(out, 0, SEEK_CUR) == 4);
        assert_int_equal(close(in), 0);
        assert_int_equal(close(out), 0);

        got = read_file(dst, &got_len);
        assert_int_equal(got_len, (size_t)at + len);
        assert_memory_equal(got, "HEAD", 4);
        for (size_t i = 4; i < (size_t)at; i++)
            assert_int_equal(got[i], 0);
        assert_memory_equal(got + at, data, len);
        free(got);
        free(dst);
    }
    free(data);
    free(src);
    rm_rf(tmp);
}

/* Only part of the source when len says so. */
static void test_copy_prefix(void **state)
{
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src"), *dst = join(tmp, "dst");
    unsigned char *data = pattern(100000, 3), *got;
    size_t got_len;
    int in, out;

    (void)state;
    write_file(src, data, 100000);
    in = open(src, O_RDONLY | O_CLOEXEC);
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    assert_true(in >= 0 && out >= 0);
    assert_int_equal(merge_copy(in, out, 4097, false, NULL), 0);
    assert_int_equal(merge_copy(in, out, 0, false, NULL), 0);
    assert_int_equal(close(in), 0);
    assert_int_equal(close(out), 0);
    got = read_file(dst, &got_len);
    assert_int_equal(got_len, 4097);
    assert_memory_equal(got, data, 4097);
    free(got);
    free(data);
    free(src);
    free(dst);
    rm_rf(tmp);
}

/* copy_file_range refuses a pipe with EINVAL: the copy must fall back on its
 * own and still deliver every byte. */
static void test_copy_falls_back_on_einval(void **state)
{
    const size_t len = 30000; /* below the pipe's capacity */
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src");
    unsigned char *data = pattern(len, 11), *got = malloc(len);
    bool fell_back = false;
    int p[2], in;

    (void)state;
    assert_non_null(got);
    write_file(src, data, len);
    in = open(src, O_RDONLY | O_CLOEXEC);
    assert_true(in >= 0);
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    assert_int_equal(merge_copy(in, p[1], len, false, &fell_back), 0);
    assert_true(fell_back);
    assert_int_equal(close(p[1]), 0);
    assert_int_equal(read_full(p[0], got, len), (ssize_t)len);
    assert_memory_equal(got, data, len);
    assert_int_equal(close(p[0]), 0);
    assert_int_equal(close(in), 0);
    free(got);
    free(data);
    free(src);
    rm_rf(tmp);
}

/* An error that is not "unsupported" must fail the copy, not fall back:
 * copy_file_range refuses an O_APPEND output with EBADF, where write(2)
 * would have worked. */
static void test_copy_other_error_fails(void **state)
{
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src"), *dst = join(tmp, "dst");
    unsigned char *data = pattern(5000, 5);
    struct stat st;
    int in, out;

    (void)state;
    write_file(src, data, 5000);
    in = open(src, O_RDONLY | O_CLOEXEC);
    out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
    assert_true(in >= 0 && out >= 0);
    assert_int_equal(merge_copy(in, out, 5000, false, NULL), -EBADF);
    assert_int_equal(fstat(out, &st), 0);
    assert_int_equal(st.st_size, 0);
    assert_int_equal(close(in), 0);
    assert_int_equal(close(out), 0);
    free(data);
    free(src);
    free(dst);
    rm_rf(tmp);
}

/* A source shorter than promised is an error both ways. */
static void test_copy_short_source(void **state)
{
    char *tmp = make_tmpdir();
    char *src = join(tmp, "src");
    unsigned char *data = pattern(3000, 9);

    (void)state;
    write_file(src, data, 3000);
    for (int force = 0; force <= 1; force++) {
        char *dst = join(tmp, force ? "d1" : "d0");
        int in = open(src, O_RDONLY | O_CLOEXEC);
        int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

        assert_true(in >= 0 && out >= 0);
        assert_int_equal(merge_copy(in, out, 3001, force, NULL), -ENODATA);
        assert_int_equal(close(in), 0);
        assert_int_equal(close(out), 0);
        free(dst);
    }
    free(data);
    free(src);
    rm_rf(tmp);
}

/* ---- whole merges ---- */

static uint64_t total_records(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i < N_SORTED; i++)
        n += sorted_specs[i].records;
    return n;
}

static void test_merge_end_to_end(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out = NULL, *out2 = NULL;
    unsigned char *before, *after;
    size_t before_len, after_len;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    out2 = join(f.out, "merged-fallback.lsm");

    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_string_equal(res.output_path, out);
    assert_int_equal(res.shards, N_SORTED);
    assert_true(res.records == total_records());
    assert_int_equal(res.n_sources, N_SORTED);
    /* A directory and a symlink under shard names are reported and left
     * alone; the other junk has no shard name and is not looked at. */
    assert_int_equal(res.n_problems, 2);
    assert_string_equal(res.problems[0].name, "dir.0000000000000001.shard");
    assert_string_equal(res.problems[0].why, "a directory, not a regular file");
    assert_int_equal(res.problems[0].kind, MERGE_PROBLEM_NOT_REGULAR);
    assert_null(res.problems[0].quarantined_as);
    assert_string_equal(res.problems[1].name, "link.0000000000000001.shard");
    assert_string_equal(res.problems[1].why, "a symbolic link, not a regular file");
    assert_null(res.problems[1].quarantined_as);
    {
        uint64_t bytes = 0;

        for (size_t i = 0; i < res.n_sources; i++) {
            assert_true(res.sources[i].records == sorted_specs[i].records);
            bytes += res.sources[i].bytes;
        }
        assert_true(res.bytes == bytes);
    }
    merge_result_free(&res);
    check_output(out, &f);
    /* Only the output: no temp file left behind, and no intent. */
    assert_int_equal(count_entries(f.out), 1);
    check_no_leftovers(&f);
    /* The sources stay where they were, junk included. */
    assert_int_equal(count_entries(f.done), N_SORTED + 16);

    /* An existing output is refused and left alone. */
    before = read_file(out, &before_len);
    assert_int_equal(merge_run(&opts, &res), -EEXIST);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, out));
    assert_non_null(strstr(res.error, "already exists"));
    assert_null(res.output_path);
    merge_result_free(&res);
    after = read_file(out, &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    free(before);
    free(after);
    assert_int_equal(count_entries(f.out), 1);

    /* The forced read/write path gives the same bytes and says so. */
    opts.output = out2;
    opts.force_fallback = true;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_true(res.used_fallback);
    merge_result_free(&res);
    check_output(out2, &f);
    assert_int_equal(count_entries(f.out), 2);

    free(out);
    free(out2);
    fixture_free(&f);
}

/* "/merged-YYYYmmddTHHMMSS.nnnnnnnnnZ.lsm" */
static void check_default_name(const char *path, const char *merged)
{
    const char *base;

    assert_true(strncmp(path, merged, strlen(merged)) == 0);
    base = path + strlen(merged);
    assert_int_equal(strlen(base), strlen("/merged-20240101T000000.123456789Z.lsm"));
    assert_true(strncmp(base, "/merged-", 8) == 0);
    assert_true(base[16] == 'T' && base[23] == '.' && base[33] == 'Z');
    for (int i = 24; i < 33; i++)
        assert_true(base[i] >= '0' && base[i] <= '9');
    assert_string_equal(base + 34, ".lsm");
}

/* Two default-named merges right after each other (nearly always within
 * one second) must both succeed, under different names. */
static void test_merge_default_output(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res, res2;
    char *merged;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    merged = join(f.spool, "merged");
    opts.spool = f.spool;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_non_null(res.output_path);
    check_default_name(res.output_path, merged);
    check_output(res.output_path, &f);
    assert_int_equal(count_entries(merged), 1);

    assert_int_equal(merge_run(&opts, &res2), 0);
    assert_non_null(res2.output_path);
    check_default_name(res2.output_path, merged);
    assert_string_not_equal(res.output_path, res2.output_path);
    /* Names sort by time. */
    assert_true(strcmp(res.output_path, res2.output_path) < 0);
    check_output(res2.output_path, &f);
    assert_int_equal(count_entries(merged), 2);
    merge_result_free(&res);
    merge_result_free(&res2);
    free(merged);
    fixture_free(&f);
}

/* Writes the shard of spec into done/ under its name, altered by damage. */
typedef void (*damage_fn)(unsigned char *buf, size_t *len, const struct shard_spec *spec);

static void flip_payload_byte(unsigned char *buf, size_t *len, const struct shard_spec *spec)
{
    /* The last byte of the last record's payload. */
    (void)spec;
    buf[*len - 1] ^= 0x20;
}

static void cut_tail(unsigned char *buf, size_t *len, const struct shard_spec *spec)
{
    (void)buf;
    (void)spec;
    *len -= 3;
}

struct damage_case {
    damage_fn damage;
    const char *expect_why;
};

/* Asserts that res lists exactly one problem, the damaged file name at
 * offset for why, and that quarantine/<name> holds bytes, unchanged, and
 * done/<name> is gone. */
static void check_quarantined(const struct fixture *f, const struct merge_result *res,
                              const char *name, uint64_t offset, const char *why,
                              const unsigned char *bytes, size_t len)
{
    char *qdir = join(f->spool, "quarantine");
    char *qpath = join(qdir, name);
    char *dpath = join(f->done, name);
    unsigned char *got;
    size_t got_len;

    assert_int_equal(res->n_problems, 1);
    assert_int_equal(res->problems[0].kind, MERGE_PROBLEM_DAMAGED);
    assert_string_equal(res->problems[0].name, name);
    assert_true(res->problems[0].offset == offset);
    assert_string_equal(res->problems[0].why, why);
    assert_non_null(res->problems[0].quarantined_as);
    assert_string_equal(res->problems[0].quarantined_as, name);
    assert_false(exists(dpath));
    got = read_file(qpath, &got_len);
    assert_int_equal(got_len, len);
    if (len > 0)
        assert_memory_equal(got, bytes, len);
    free(got);
    free(dpath);
    free(qpath);
    free(qdir);
}

static void run_damage_case(const struct damage_case *c)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    const struct shard_spec *victim = &sorted_specs[2];
    unsigned char *buf;
    size_t len, last_rec;
    char *out, *name, *path;

    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    buf = build_shard(victim, &len);
    {
        /* Where the last record starts: the reported offset. */
        struct shard_spec shorter = *victim;
        unsigned char *b;

        shorter.records--;
        b = build_shard(&shorter, &last_rec);
        free(b);
    }
    c->damage(buf, &len, victim);
    name = shard_name(victim->producer, victim->id);
    path = join(f.done, name);
    write_file(path, buf, len);

    /* The damaged shard goes to quarantine/ unchanged; the rest is merged. */
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_string_equal(res.output_path, out);
    assert_int_equal(res.shards, N_SORTED - 1);
    assert_true(res.records == total_records() - victim->records);
    check_quarantined(&f, &res, name, last_rec, c->expect_why, buf, len);
    merge_result_free(&res);
    check_output_without(out, 2);
    check_no_leftovers(&f);

    free(buf);
    free(out);
    free(path);
    free(name);
    fixture_free(&f);
}

static void test_merge_quarantines_corrupt_source(void **state)
{
    static const struct damage_case crc = { flip_payload_byte, "record CRC mismatch" };
    static const struct damage_case torn = { cut_tail, "file ends inside a record" };

    (void)state;
    run_damage_case(&crc);
    run_damage_case(&torn);
}

/* A valid shard under the wrong name, and a file holding two shards, are not
 * what the daemon seals into done/, so they go to quarantine/ too. */
static void test_merge_quarantines_misnamed_and_double(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    static const struct shard_spec other = { "c", 9, 2 };
    unsigned char *a, *b, *both;
    size_t alen, blen;
    char *out, *p;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;

    a = build_shard(&other, &alen);
    p = join(f.done, "b.0000000000000009.shard");
    write_file(p, a, alen);
    assert_int_equal(merge_run(&opts, &res), 0);
    check_quarantined(&f, &res, "b.0000000000000009.shard", 0,
                      "shard header says producer 'c' shard id 0000000000000009, which does "
                      "not match the file name",
                      a, alen);
    merge_result_free(&res);
    check_output(out, &f);
    assert_int_equal(unlink(out), 0);
    free(p);

    b = build_shard(&other, &blen);
    both = malloc(alen + blen);
    assert_non_null(both);
    memcpy(both, a, alen);
    memcpy(both + alen, b, blen);
    p = join(f.done, "c.0000000000000009.shard");
    write_file(p, both, alen + blen);
    assert_int_equal(merge_run(&opts, &res), 0);
    check_quarantined(&f, &res, "c.0000000000000009.shard", alen,
                      "a second shard header (a file in done/ must hold exactly one shard)",
                      both, alen + blen);
    merge_result_free(&res);
    check_output(out, &f);

    free(p);
    free(a);
    free(b);
    free(both);
    free(out);
    fixture_free(&f);
}

struct interference {
    const struct fixture *f;
    const char *out_dir;
    size_t calls;
    size_t at;      /* act on this call (0-based) */
    int mode;       /* 0: cancel, 1: grow the source, 2: replace the source */
    bool saw_temp;
};

static int interfere(const struct merge_source *src, void *userdata)
{
    struct interference *in = userdata;
    char *expect_tmp, *path;
    DIR *d;
    struct dirent *de;

    /* While copying, the output exists only as .<basename>.<pid>.tmp. */
    assert_true(asprintf(&expect_tmp, ".merged.lsm.%ld.tmp", (long)getpid()) > 0);
    d = opendir(in->out_dir);
    assert_non_null(d);
    while ((de = readdir(d)))
        if (strcmp(de->d_name, expect_tmp) == 0)
            in->saw_temp = true;
    closedir(d);
    free(expect_tmp);

    if (in->calls++ != in->at)
        return 0;
    if (in->mode == 0)
        return -ECANCELED;
    path = join(in->f->done, src->name);
    if (in->mode == 1) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);

        assert_true(fd >= 0);
        assert_int_equal(write_all(fd, "more", 4), 0);
        assert_int_equal(close(fd), 0);
    } else {
        /* Same bytes, new inode: still not the file that was checked. */
        size_t len;
        unsigned char *buf = read_file(path, &len);
        char *tmp = join(in->f->tmp, "replacement");

        write_file(tmp, buf, len);
        assert_int_equal(rename(tmp, path), 0);
        free(tmp);
        free(buf);
    }
    free(path);
    return 0;
}

/* Runs a merge of the sorted specs whose before_copy hook interferes with
 * source 3 as mode says; f, in and *ret_out are set up here. */
static int merge_interfered(struct fixture *f, struct interference *in, int mode, bool delete,
                            struct merge_result *res, char **ret_out)
{
    struct merge_opts opts = { 0 };

    fixture_init(f);
    write_sorted_specs_shuffled(f->done);
    *ret_out = join(f->out, "merged.lsm");
    *in = (struct interference){ .f = f, .out_dir = f->out, .at = 3, .mode = mode };
    opts.spool = f->spool;
    opts.output = *ret_out;
    opts.before_copy = interfere;
    opts.userdata = in;
    opts.delete_sources = delete;
    return merge_run(&opts, res);
}

/* A merge that fails after its temp file exists must remove it and leave
 * no output: cancelled, or, with --delete, a source changed between check
 * and copy (deleting its name would lose what was never copied). */
static void test_merge_fails_mid_copy(void **state)
{
    static const int expect[] = { -ECANCELED, -ESTALE, -ESTALE };

    (void)state;
    for (int mode = 0; mode < 3; mode++) {
        struct fixture f;
        struct merge_result res;
        struct interference in;
        char *out;

        assert_int_equal(merge_interfered(&f, &in, mode, true, &res, &out), expect[mode]);
        assert_true(in.saw_temp);
        assert_int_equal(in.calls, 4);
        assert_non_null(res.error);
        if (mode > 0) {
            char *name = shard_name(sorted_specs[3].producer, sorted_specs[3].id);

            assert_non_null(strstr(res.error, name));
            assert_non_null(strstr(res.error, "changed since it was checked"));
            free(name);
        }
        assert_null(res.output_path);
        merge_result_free(&res);
        assert_false(exists(out));
        assert_int_equal(count_entries(f.out), 0);
        /* A failure before publishing takes its intent with it. */
        check_no_leftovers(&f);
        free(out);
        fixture_free(&f);
    }
}

/* Without --delete, a source appended to or replaced after its check is
 * copied as it was checked, from the file that was checked, and stays. */
static void test_merge_copies_what_was_checked(void **state)
{
    (void)state;
    for (int mode = 1; mode < 3; mode++) {
        struct fixture f;
        struct merge_result res;
        struct interference in;
        char *out;

        assert_int_equal(merge_interfered(&f, &in, mode, false, &res, &out), 0);
        assert_int_equal(in.calls, (int)N_SORTED);
        merge_result_free(&res);
        check_output(out, &f);
        assert_int_equal(count_entries(f.done), N_SORTED);
        free(out);
        fixture_free(&f);
    }
}

static void test_merge_zero_shards(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *merged;

    (void)state;
    fixture_init(&f);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    merged = join(f.spool, "merged");
    opts.spool = f.spool;

    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.n_sources, 0);
    assert_int_equal(res.shards, 0);
    assert_null(res.output_path);
    assert_null(res.error);
    merge_result_free(&res);
    assert_int_equal(count_entries(f.out), 0);

    /* With the default output, not even merged/ is created. */
    opts.output = NULL;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.output_path);
    merge_result_free(&res);
    assert_false(exists(merged));

    free(merged);
    free(out);
    fixture_free(&f);
}

static void test_merge_missing_spool(void **state)
{
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *tmp = make_tmpdir();
    char *done = join(tmp, "done");

    (void)state;
    opts.spool = tmp;
    assert_int_equal(merge_run(&opts, &res), -ENOENT);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, done));
    merge_result_free(&res);
    free(done);
    rm_rf(tmp);
}

/* ---- --delete, the lock, the intent and recovery ---- */

static uint64_t sorted_specs_bytes(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i < N_SORTED; i++) {
        size_t len;
        unsigned char *b = build_shard(&sorted_specs[i], &len);

        n += len;
        free(b);
    }
    return n;
}

struct delete_watch {
    const struct fixture *f;
    const char *out;
    uint64_t full_size;
    size_t copies, published, deleted, finished;
};

static int watch_copy(const struct merge_source *src, void *userdata)
{
    struct delete_watch *w = userdata;
    char *intent = join(w->f->spool, SPOOL_MERGE_INTENT);

    (void)src;
    /* The intent is durable before the copy starts; nothing is gone yet. */
    assert_true(exists(intent));
    assert_false(exists(w->out));
    assert_int_equal(sources_left(w->f), N_SORTED);
    w->copies++;
    free(intent);
    return 0;
}

static void watch_step(enum merge_step step, void *userdata)
{
    struct delete_watch *w = userdata;

    switch (step) {
    case MERGE_STEP_INTENT_WRITTEN:
    case MERGE_STEP_COPIED:
        assert_false(exists(w->out));
        assert_int_equal(sources_left(w->f), N_SORTED);
        break;
    case MERGE_STEP_PUBLISHED:
        assert_true(file_size(w->out) == w->full_size);
        assert_int_equal(sources_left(w->f), N_SORTED);
        w->published++;
        break;
    case MERGE_STEP_SOURCE_DELETED:
        /* Only ever after the complete output is under its name. */
        assert_int_equal(w->published, 1);
        assert_true(file_size(w->out) == w->full_size);
        w->deleted++;
        assert_int_equal(sources_left(w->f), N_SORTED - w->deleted);
        break;
    case MERGE_STEP_SOURCES_DELETED:
        assert_int_equal(sources_left(w->f), 0);
        w->finished++;
        break;
    }
}

static void test_merge_delete(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct delete_watch w = { 0 };
    char *out;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    w.f = &f;
    w.out = out;
    w.full_size = sorted_specs_bytes();
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    opts.before_copy = watch_copy;
    opts.at_step = watch_step;
    opts.userdata = &w;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_int_equal(res.recovery, MERGE_RECOVERY_NONE);
    assert_int_equal(res.shards, N_SORTED);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    assert_int_equal(w.copies, N_SORTED);
    assert_int_equal(w.published, 1);
    assert_int_equal(w.deleted, N_SORTED);
    assert_int_equal(w.finished, 1);
    check_output(out, &f);
    check_no_leftovers(&f);
    /* Only the merged shards went: the junk that was never taken stays. */
    assert_int_equal(count_entries(f.done), 16);

    /* A second run has nothing to merge and leaves the output alone. */
    opts.before_copy = NULL;
    opts.at_step = NULL;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.n_sources, 0);
    assert_null(res.output_path);
    merge_result_free(&res);
    check_output(out, &f);
    assert_int_equal(count_entries(f.out), 1);
    free(out);
    fixture_free(&f);
}

/* A crash: a child runs the merge and leaves with _exit(0) at the chosen
 * point, so nothing after it runs, as with kill -9. */
struct crash_plan {
    enum merge_step step; /* 0: none */
    unsigned nth;         /* at the nth time step is reached (1-based) */
    int before_copy;      /* >= 0: before copying source number before_copy */
    unsigned seen;
};

static void crash_step(enum merge_step step, void *userdata)
{
    struct crash_plan *p = userdata;

    if (step == p->step && ++p->seen == p->nth)
        _exit(0);
}

static int crash_copy(const struct merge_source *src, void *userdata)
{
    struct crash_plan *p = userdata;

    (void)src;
    if (p->before_copy == 0)
        _exit(0);
    p->before_copy--;
    return 0;
}

static void run_crashing(const struct merge_opts *base, struct crash_plan plan)
{
    pid_t pid;
    int status;

    fflush(NULL); /* or the child's exit would print our buffers twice */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct merge_opts o = *base;
        struct merge_result res;

        o.at_step = crash_step;
        o.before_copy = plan.before_copy >= 0 ? crash_copy : NULL;
        o.userdata = &plan;
        (void)merge_run(&o, &res);
        _exit(3); /* the crash point was never reached */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

struct crash_case {
    const char *what;
    struct crash_plan plan;
    bool delete_sources;
    enum merge_recovery expect;
    bool expect_temp;        /* rollback finds the temp file */
    size_t left_after_crash; /* sources still in done/ after the crash */
};

static void run_crash_case(const struct crash_case *c)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *intent, *tmp;

    print_message("crash case: %s\n", c->what);
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = c->delete_sources;
    run_crashing(&opts, c->plan);

    /* The state the crash left. */
    assert_true(exists(intent));
    assert_int_equal(sources_left(&f), c->left_after_crash);
    assert_int_equal(exists(out), c->expect == MERGE_RECOVERY_FINISHED);

    /* Without --delete, a finished merge leaves the sources, so the rerun
     * merges them again, into the same name: refused, as it would be
     * without any crash. */
    if (!c->delete_sources && c->expect == MERGE_RECOVERY_FINISHED) {
        assert_int_equal(merge_run(&opts, &res), -EEXIST);
        assert_non_null(strstr(res.error, "already exists"));
    } else {
        assert_int_equal(merge_run(&opts, &res), 0);
        assert_null(res.error);
    }
    assert_int_equal(res.recovery, c->expect);
    assert_non_null(res.recovery_output);
    assert_string_equal(res.recovery_output, out);
    if (c->expect == MERGE_RECOVERY_FINISHED) {
        /* The rest of the sources went; nothing was left to merge again. */
        assert_int_equal(res.recovery_deleted, c->delete_sources ? c->left_after_crash : 0);
        assert_int_equal(res.n_sources, c->delete_sources ? 0 : N_SORTED);
        assert_null(res.recovery_temp);
    } else {
        assert_int_equal(res.recovery_deleted, 0);
        assert_int_equal(res.n_sources, N_SORTED);
        assert_string_equal(res.output_path, out);
        if (c->expect_temp) {
            assert_true(asprintf(&tmp, "%s/.merged.lsm.", f.out) > 0);
            assert_non_null(res.recovery_temp);
            assert_true(strncmp(res.recovery_temp, tmp, strlen(tmp)) == 0);
            free(tmp);
        } else {
            assert_null(res.recovery_temp);
        }
    }
    merge_result_free(&res);

    /* Every record exactly once: one output, holding every shard once. */
    assert_int_equal(count_entries(f.out), 1);
    check_output(out, &f);
    assert_int_equal(sources_left(&f), c->delete_sources ? 0 : N_SORTED);
    check_no_leftovers(&f);
    free(intent);
    free(out);
    fixture_free(&f);
}

static void test_merge_crash_recovery(void **state)
{
    static const struct crash_case cases[] = {
        { "after the intent, before the temp file",
          { MERGE_STEP_INTENT_WRITTEN, 1, -1, 0 }, true, MERGE_RECOVERY_ROLLED_BACK, false,
          N_SORTED },
        { "in the middle of the copy", { 0, 0, 4, 0 }, true, MERGE_RECOVERY_ROLLED_BACK, true,
          N_SORTED },
        { "copied and synced, not renamed", { MERGE_STEP_COPIED, 1, -1, 0 }, true,
          MERGE_RECOVERY_ROLLED_BACK, true, N_SORTED },
        { "renamed, directory not synced", { MERGE_STEP_PUBLISHED, 1, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED },
        { "after the first source was removed", { MERGE_STEP_SOURCE_DELETED, 1, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED - 1 },
        { "after six sources were removed", { MERGE_STEP_SOURCE_DELETED, 6, -1, 0 }, true,
          MERGE_RECOVERY_FINISHED, false, N_SORTED - 6 },
        { "all sources removed, intent still there", { MERGE_STEP_SOURCES_DELETED, 1, -1, 0 },
          true, MERGE_RECOVERY_FINISHED, false, 0 },
        { "without --delete, in the middle of the copy", { 0, 0, 2, 0 }, false,
          MERGE_RECOVERY_ROLLED_BACK, true, N_SORTED },
        { "without --delete, renamed", { MERGE_STEP_PUBLISHED, 1, -1, 0 }, false,
          MERGE_RECOVERY_FINISHED, false, N_SORTED },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_crash_case(&cases[i]);
}

/* A recovery that is itself killed half-way is finished by the next run. */
static void test_merge_crash_during_recovery(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 2, -1, 0 });
    assert_int_equal(sources_left(&f), N_SORTED - 2);
    /* The recovery deletes the rest; this one dies after three of them. */
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 3, -1, 0 });
    assert_int_equal(sources_left(&f), N_SORTED - 5);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
    assert_int_equal(res.recovery_deleted, N_SORTED - 5);
    assert_int_equal(res.n_sources, 0);
    merge_result_free(&res);
    assert_int_equal(count_entries(f.out), 1);
    check_output(out, &f);
    check_no_leftovers(&f);
    free(out);
    fixture_free(&f);
}

/* A merge.intent.tmp is an intent that was never published: removed, and
 * the merge goes on as if there had been nothing. */
static void test_merge_stray_intent_tmp(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *p;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    p = join(f.spool, SPOOL_MERGE_INTENT_TMP);
    write_file(p, "logshard-merge-intent 1\ndelete 1\ndir /", 38);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_NONE);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    free(p);
    free(out);
    fixture_free(&f);
}

/* Leaves the state of a --delete merge killed after its temp file was
 * complete: merge.intent, the temp, every source; returns the temp's path. */
static char *crash_before_publish(const struct fixture *f, const struct merge_opts *opts)
{
    char *tmp = NULL;
    DIR *d;
    struct dirent *de;

    run_crashing(opts, (struct crash_plan){ MERGE_STEP_COPIED, 1, -1, 0 });
    d = opendir(f->out);
    assert_non_null(d);
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, ".merged.lsm.", 12) == 0) {
            assert_null(tmp);
            tmp = join(f->out, de->d_name);
        }
    }
    closedir(d);
    assert_non_null(tmp);
    return tmp;
}

/* An intent that does not check out, and an output name taken by a file
 * that is not the merge's output: the merge changes nothing and says why,
 * because neither finishing nor rolling back is provably right. */
static void test_merge_refuses_unclear_recovery(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *intent, *tmp, *moved;
    unsigned char *text, *foreign;
    size_t len;
    uint64_t size;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    moved = join(f.tmp, "moved.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    tmp = crash_before_publish(&f, &opts);
    text = read_file(intent, &len);

    /* A flipped byte: the checksum line catches it. */
    text[30] ^= 1;
    write_file(intent, text, len);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, intent));
    assert_non_null(strstr(res.error, "checksum mismatch"));
    merge_result_free(&res);
    text[30] ^= 1;
    /* Torn: the end line is missing. */
    write_file(intent, text, len - 5);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "damaged"));
    merge_result_free(&res);
    assert_true(exists(tmp));
    assert_int_equal(sources_left(&f), N_SORTED);

    /* Someone else's file under the output name, of the right size but
     * other bytes: the sources must stay. */
    write_file(intent, text, len);
    size = file_size(tmp);
    foreign = pattern((size_t)size, 99);
    write_file(out, foreign, (size_t)size);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "differs from the copy"));
    merge_result_free(&res);
    /* Of another size. */
    write_file(out, foreign, (size_t)size - 1);
    assert_int_equal(merge_run(&opts, &res), -EBADMSG);
    assert_non_null(strstr(res.error, "not that merge's output"));
    merge_result_free(&res);
    assert_true(exists(intent));
    assert_true(exists(tmp));
    assert_int_equal(sources_left(&f), N_SORTED);

    /* Moved away, the merge is rolled back and done again. */
    assert_int_equal(rename(out, moved), 0);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_ROLLED_BACK);
    assert_string_equal(res.recovery_temp, tmp);
    assert_int_equal(res.deleted, N_SORTED);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(unlink(moved), 0);
    assert_int_equal(unlink(out), 0);

    /* Published, partly deleted, and then the output moved away: the
     * remaining sources are not merged again nor deleted. */
    write_sorted_specs_shuffled(f.done);
    run_crashing(&opts, (struct crash_plan){ MERGE_STEP_SOURCE_DELETED, 2, -1, 0 });
    assert_int_equal(rename(out, moved), 0);
    assert_int_equal(merge_run(&opts, &res), -EUCLEAN);
    assert_non_null(strstr(res.error, "now missing"));
    merge_result_free(&res);
    assert_int_equal(sources_left(&f), N_SORTED - 2);
    assert_true(exists(intent));
    /* Put back, it is finished. */
    assert_int_equal(rename(moved, out), 0);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
    assert_int_equal(res.recovery_deleted, N_SORTED - 2);
    merge_result_free(&res);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(sources_left(&f), 0);

    free(foreign);
    free(text);
    free(tmp);
    free(moved);
    free(intent);
    free(out);
    fixture_free(&f);
}

/* The lock: held through another open file description in this process,
 * then by a real merge in another process (whose pid the message names). */
struct lock_holder {
    int ready_fd;
    int go_fd;
};

static void hold_at_copy(enum merge_step step, void *userdata)
{
    struct lock_holder *h = userdata;
    char c = 0;

    if (step != MERGE_STEP_COPIED)
        return;
    if (write(h->ready_fd, "r", 1) != 1 || read(h->go_fd, &c, 1) != 1)
        _exit(4);
}

static void test_merge_lock(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *lock, *expect;
    int fd, ready[2], go[2], status;
    struct lock_holder h;
    pid_t pid;
    char c;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    lock = join(f.spool, SPOOL_MERGE_LOCK);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;

    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    assert_int_equal(merge_run(&opts, &res), -EBUSY);
    assert_non_null(res.error);
    assert_true(asprintf(&expect, "another logctl merge is running on %s", f.spool) > 0);
    assert_true(strncmp(res.error, expect, strlen(expect)) == 0);
    free(expect);
    merge_result_free(&res);
    assert_int_equal(sources_left(&f), N_SORTED);
    assert_false(exists(out));
    assert_int_equal(close(fd), 0);

    /* A real merge holds it while it waits at the end of its copy. */
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        h.ready_fd = ready[1];
        h.go_fd = go[0];
        opts.at_step = hold_at_copy;
        opts.userdata = &h;
        _exit(merge_run(&opts, &res) == 0 ? 0 : 5);
    }
    assert_int_equal(read(ready[0], &c, 1), 1);
    assert_int_equal(merge_run(&opts, &res), -EBUSY);
    assert_true(asprintf(&expect, "another logctl merge is running on %s (pid %ld ", f.spool,
                         (long)pid) > 0);
    assert_true(strncmp(res.error, expect, strlen(expect)) == 0);
    free(expect);
    merge_result_free(&res);
    assert_int_equal(write(go[1], "g", 1), 1);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    check_output(out, &f);
    check_no_leftovers(&f);
    assert_int_equal(sources_left(&f), 0);

    /* Released with the process: the next merge runs. */
    assert_int_equal(merge_run(&opts, &res), 0);
    merge_result_free(&res);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(close(ready[i]), 0);
        assert_int_equal(close(go[i]), 0);
    }
    free(lock);
    free(out);
    fixture_free(&f);
}

/* ---- sealed shards: checked from their two ends ---- */

static const struct shard_spec sealed_specs[] = {
    { "alpha", 1, 3 }, { "alpha", 2, 300 }, { "beta", 7, 0 }, { "gamma", 9, 40 },
};
#define N_SEALED (sizeof(sealed_specs) / sizeof(sealed_specs[0]))

/* Offset of the first record of sealed_specs[1] within its file. */
static size_t sealed_victim_record0(void)
{
    return shard_header_size(strlen(sealed_specs[1].producer));
}

static void flip_first_record(unsigned char *buf, size_t *len)
{
    (void)len;
    buf[sealed_victim_record0() + SHARD_RECORD_HEADER] ^= 0x01;
}

static void flip_trailer_records(unsigned char *buf, size_t *len)
{
    buf[*len - 24] ^= 0x01; /* the trailer's record count */
}

/* Runs a merge of the sealed specs, sealed_specs[1] damaged by damage, and
 * checks that the output is every other one (every one when damage is
 * NULL) back to back, block-aligned. */
static int merge_sealed(void (*damage)(unsigned char *buf, size_t *len), struct merge_result *res,
                        char **ret_victim, char **ret_out)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    char *name;
    int r;

    fixture_init(&f);
    for (size_t i = 0; i < N_SEALED; i++)
        write_sealed(&f, &sealed_specs[i], i == 1 ? damage : NULL);
    name = shard_name(sealed_specs[1].producer, sealed_specs[1].id);
    *ret_victim = name;
    *ret_out = join(f.tmp, "merged.lsm");
    opts.spool = f.spool;
    opts.output = *ret_out;
    r = merge_run(&opts, res);
    if (r == 0) {
        size_t got_len, off = 0;
        unsigned char *got = read_file(*ret_out, &got_len);

        for (size_t i = 0; i < N_SEALED; i++) {
            size_t len;
            unsigned char *b;

            if (i == 1 && damage)
                continue;
            b = build_sealed(&sealed_specs[i], &len);
            assert_true(off + len <= got_len);
            assert_memory_equal(got + off, b, len);
            assert_int_equal(off % 4096, 0);
            off += len;
            free(b);
        }
        assert_int_equal(off, got_len);
        free(got);
    }
    fixture_free(&f);
    return r;
}

static void test_merge_sealed_shards(void **state)
{
    static const struct {
        void (*damage)(unsigned char *buf, size_t *len);
        const char *why;
    } cases[] = {
        { flip_first_record, "record CRC mismatch" },
        { flip_trailer_records, "seal trailer CRC mismatch" },
        { cut_three, "file ends inside the seal trailer" },
    };
    struct merge_result res;
    char *victim, *out;
    uint64_t records = 0;
    (void)state;

    for (size_t i = 0; i < N_SEALED; i++)
        records += sealed_specs[i].records;

    assert_int_equal(merge_sealed(NULL, &res, &victim, &out), 0);
    assert_int_equal(res.shards, N_SEALED);
    assert_true(res.records == records);
    assert_int_equal(res.n_problems, 0);
    for (size_t i = 0; i < N_SEALED; i++) {
        assert_true(res.sources[i].records == sealed_specs[i].records);
        /* Every record is read: the newest one's time, or the header's. */
        assert_true(res.sources[i].newest_ns ==
                    BASE_TS + (sealed_specs[i].records ? sealed_specs[i].records - 1 : 0));
        assert_int_equal(res.sources[i].bytes % 4096, 0);
    }
    merge_result_free(&res);
    free(victim);
    free(out);

    /* Damage anywhere in a sealed shard, inside a record too, is found: the
     * shard is left out and the others merged. */
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        assert_int_equal(merge_sealed(cases[k].damage, &res, &victim, &out), 0);
        assert_int_equal(res.shards, N_SEALED - 1);
        assert_true(res.records == records - sealed_specs[1].records);
        assert_int_equal(res.n_problems, 1);
        assert_string_equal(res.problems[0].name, victim);
        assert_string_equal(res.problems[0].why, cases[k].why);
        assert_non_null(res.problems[0].quarantined_as);
        if (k == 0)
            assert_true(res.problems[0].offset == sealed_victim_record0());
        merge_result_free(&res);
        free(victim);
        free(out);
    }
}

/* A sealed shard under another shard's name is found from its header. */
static void test_merge_sealed_misnamed(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    size_t len;
    unsigned char *buf = build_sealed(&sealed_specs[0], &len);
    char *path;
    (void)state;

    fixture_init(&f);
    path = join(f.done, "alpha.00000000000000ff.shard");
    write_file(path, buf, len);
    opts.spool = f.spool;
    opts.output = "unused.lsm";
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, 0);
    assert_null(res.output_path);
    check_quarantined(&f, &res, "alpha.00000000000000ff.shard", 0,
                      "shard header says producer 'alpha' shard id 0000000000000001, "
                      "which does not match the file name",
                      buf, len);
    merge_result_free(&res);
    free(path);
    free(buf);
    fixture_free(&f);
}

/* With hundreds of sources the check runs on two threads; every bad source
 * is found, whichever thread met it, and the rest merged in order. */
static void test_merge_many_sources_bad(void **state)
{
    enum { N = 300 };
    static const size_t bad_pairs[][2] = { { 150, 201 }, { 151, 200 }, { 7, 299 }, { 10, 11 },
                                           { 21, 22 } };
    enum { NPAIRS = sizeof(bad_pairs) / sizeof(bad_pairs[0]) };
    (void)state;

    for (size_t k = 0; k <= NPAIRS; k++) {
        struct fixture f;
        struct merge_opts opts = { 0 };
        struct merge_result res;
        uint64_t records = 0;
        size_t n_bad = 0, j = 0;
        char *out;

        fixture_init(&f);
        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { "many", i + 1, (unsigned)(i % 5) };
            bool bad = k < NPAIRS && (i == bad_pairs[k][0] || i == bad_pairs[k][1]);

            write_sealed(&f, &spec, bad ? cut_three : NULL);
            if (bad)
                n_bad++;
            else
                records += i % 5;
        }
        out = join(f.out, "merged.lsm");
        opts.spool = f.spool;
        opts.output = out;
        assert_int_equal(merge_run(&opts, &res), 0);
        assert_int_equal(res.shards, N - n_bad);
        assert_true(res.records == records);
        for (size_t i = 0; i < N; i++) {
            if (k < NPAIRS && (i == bad_pairs[k][0] || i == bad_pairs[k][1]))
                continue;
            assert_true(res.sources[j++].id == i + 1);
        }
        assert_int_equal(res.n_problems, n_bad);
        for (size_t p = 0; p < n_bad; p++) {
            size_t lo = bad_pairs[k][0] < bad_pairs[k][1] ? bad_pairs[k][0] : bad_pairs[k][1];
            size_t hi = bad_pairs[k][0] ^ bad_pairs[k][1] ^ lo;
            char *want = shard_name("many", (p == 0 ? lo : hi) + 1);

            /* Sorted by name, which is by id here. */
            assert_string_equal(res.problems[p].name, want);
            assert_string_equal(res.problems[p].why, "file ends inside the seal trailer");
            assert_non_null(res.problems[p].quarantined_as);
            free(want);
        }
        merge_result_free(&res);
        free(out);
        fixture_free(&f);
    }
}

/* With hundreds of sources the copy runs on two threads too, each writing
 * at its sources' offsets: the output is still every source byte for
 * byte, in order. */
static void test_merge_many_sources_copy(void **state)
{
    enum { N = 700 };
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    unsigned char *want = NULL, *got;
    size_t want_len = 0, got_len;
    char *out;
    (void)state;

    fixture_init(&f);
    for (size_t i = 0; i < N; i++) {
        /* Up to 120 records: shards of one to three blocks. */
        struct shard_spec spec = { i % 3 ? "many" : "more", i + 1, (unsigned)(i * 37 % 121) };

        write_sealed(&f, &spec, NULL);
    }
    /* The expected output: producers in byte order, then shard ids. */
    for (int pass = 0; pass < 2; pass++) {
        const char *producer = pass == 0 ? "many" : "more";

        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { i % 3 ? "many" : "more", i + 1,
                                       (unsigned)(i * 37 % 121) };
            size_t len;
            unsigned char *buf;

            if (strcmp(spec.producer, producer) != 0)
                continue;
            buf = build_sealed(&spec, &len);
            want = realloc(want, want_len + len);
            assert_non_null(want);
            memcpy(want + want_len, buf, len);
            want_len += len;
            free(buf);
        }
    }
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, N);
    assert_true(res.bytes == want_len);
    got = read_file(out, &got_len);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    free(want);
    merge_result_free(&res);
    free(out);
    fixture_free(&f);
}

/* The threads of this process now, from /proc/self/status. */
static unsigned thread_count(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned n = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %u", &n) == 1)
            break;
    fclose(f);
    assert_true(n >= 1);
    return n;
}

struct progress_log {
    pthread_t caller;
    enum merge_phase phase;
    size_t calls[3];
    unsigned max_threads[3];
    struct merge_progress last[3];
};

static void log_progress(const struct merge_progress *p, void *userdata)
{
    struct progress_log *log = userdata;
    const struct merge_progress *prev = &log->last[p->phase];
    unsigned threads = thread_count();

    /* Always on the thread that called merge_run. */
    assert_true(pthread_equal(pthread_self(), log->caller));
    assert_true(p->phase == MERGE_PHASE_CHECK || p->phase == MERGE_PHASE_COPY);
    assert_true(p->phase >= log->phase);
    if (log->calls[p->phase] > 0) {
        /* Within a pass the figures only grow. */
        assert_true(p->shards_done >= prev->shards_done);
        assert_true(p->bytes_done >= prev->bytes_done);
        assert_true(p->shards_total == prev->shards_total);
    }
    assert_true(p->shards_done <= p->shards_total);
    assert_true(p->bytes_done <= p->bytes_total);
    log->phase = p->phase;
    log->calls[p->phase]++;
    log->last[p->phase] = *p;
    if (threads > log->max_threads[p->phase])
        log->max_threads[p->phase] = threads;
}

/* A progress callback does not change how a merge runs: with hundreds of
 * sources both passes still run on two threads (on filesystems where the
 * copy does), the callback is called on the calling thread only, and each
 * pass ends with its final figures. */
static void test_merge_progress_two_threads(void **state)
{
    enum { N = 600 };
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct progress_log log = { .caller = pthread_self() };
    struct statfs sfs;
    char *out;
    (void)state;

    fixture_init(&f);
    for (size_t i = 0; i < N; i++) {
        struct shard_spec spec = { "many", i + 1, (unsigned)(i % 7) };

        write_sealed(&f, &spec, NULL);
    }
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    opts.progress = log_progress;
    opts.userdata = &log;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, N);
    for (int phase = MERGE_PHASE_CHECK; phase <= MERGE_PHASE_COPY; phase++) {
        /* The start of the pass, some of the way, and its end. */
        assert_true(log.calls[phase] >= 3);
        assert_int_equal(log.last[phase].shards_done, N);
        assert_int_equal(log.last[phase].shards_total, N);
        assert_true(log.last[phase].bytes_done == res.bytes);
        assert_true(log.last[phase].bytes_total == res.bytes);
    }
    assert_true(log.max_threads[MERGE_PHASE_CHECK] >= 2);
    /* The copy stays on one thread where copy_file_range shares extents;
     * on these filesystems it copies bytes and runs on two. */
    assert_int_equal(statfs(f.out, &sfs), 0);
    if (sfs.f_type == EXT4_SUPER_MAGIC || sfs.f_type == TMPFS_MAGIC)
        assert_true(log.max_threads[MERGE_PHASE_COPY] >= 2);
    merge_result_free(&res);
    free(out);
    fixture_free(&f);
}

struct shrink_plan {
    const struct fixture *f;
    size_t victims[2];
};

/* After the check and before the copy: the victims lose their second half. */
static void shrink_at_intent(enum merge_step step, void *userdata)
{
    const struct shrink_plan *plan = userdata;

    if (step != MERGE_STEP_INTENT_WRITTEN)
        return;
    for (int k = 0; k < 2; k++) {
        char *name = shard_name("many", plan->victims[k] + 1);
        char *path = join(plan->f->done, name);
        struct stat st;

        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(truncate(path, st.st_size / 2), 0);
        free(path);
        free(name);
    }
}

/* A source that shrinks between the check and the two-thread copy fails
 * the merge, and the error names the first such source in output order,
 * whichever thread met it; nothing is published. */
static void test_merge_many_sources_copy_first_bad(void **state)
{
    enum { N = 600 };
    /* Sources go out in runs of 64: a pair at the end of one run and the
     * start of the next usually fails on both threads, and which thread
     * meets the lower one varies from run to run. */
    static const size_t bad_pairs[][2] = { { 300, 301 }, { 451, 64 }, { 0, 599 },
                                           { 127, 128 }, { 191, 192 }, { 255, 256 },
                                           { 383, 384 }, { 447, 448 } };
    (void)state;

    for (size_t k = 0; k < sizeof(bad_pairs) / sizeof(bad_pairs[0]); k++) {
        struct fixture f;
        struct merge_opts opts = { 0 };
        struct merge_result res;
        struct shrink_plan plan;
        size_t first = bad_pairs[k][0] < bad_pairs[k][1] ? bad_pairs[k][0] : bad_pairs[k][1];
        char *out, *want_name, *want_path;

        fixture_init(&f);
        for (size_t i = 0; i < N; i++) {
            struct shard_spec spec = { "many", i + 1, (unsigned)(i % 50) };

            write_sealed(&f, &spec, NULL);
        }
        plan = (struct shrink_plan){ .f = &f, .victims = { bad_pairs[k][0], bad_pairs[k][1] } };
        out = join(f.out, "merged.lsm");
        opts.spool = f.spool;
        opts.output = out;
        opts.at_step = shrink_at_intent;
        opts.userdata = &plan;
        assert_int_equal(merge_run(&opts, &res), -ENODATA);
        want_name = shard_name("many", first + 1);
        want_path = join(f.done, want_name);
        assert_non_null(strstr(res.error, want_path));
        assert_non_null(strstr(res.error, "ended before its"));
        assert_false(exists(out));
        check_no_leftovers(&f);
        merge_result_free(&res);
        free(want_path);
        free(want_name);
        free(out);
        fixture_free(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_list_order),
        cmocka_unit_test(test_copy_identical),
        cmocka_unit_test(test_copy_at_offset),
        cmocka_unit_test(test_copy_prefix),
        cmocka_unit_test(test_copy_falls_back_on_einval),
        cmocka_unit_test(test_copy_other_error_fails),
        cmocka_unit_test(test_copy_short_source),
        cmocka_unit_test(test_merge_end_to_end),
        cmocka_unit_test(test_merge_default_output),
        cmocka_unit_test(test_merge_quarantines_corrupt_source),
        cmocka_unit_test(test_merge_quarantines_misnamed_and_double),
        cmocka_unit_test(test_merge_sealed_shards),
        cmocka_unit_test(test_merge_sealed_misnamed),
        cmocka_unit_test(test_merge_many_sources_bad),
        cmocka_unit_test(test_merge_many_sources_copy),
        cmocka_unit_test(test_merge_many_sources_copy_first_bad),
        cmocka_unit_test(test_merge_progress_two_threads),
        cmocka_unit_test(test_merge_fails_mid_copy),
        cmocka_unit_test(test_merge_copies_what_was_checked),
        cmocka_unit_test(test_merge_zero_shards),
        cmocka_unit_test(test_merge_missing_spool),
        cmocka_unit_test(test_merge_delete),
        cmocka_unit_test(test_merge_crash_recovery),
        cmocka_unit_test(test_merge_crash_during_recovery),
        cmocka_unit_test(test_merge_stray_intent_tmp),
        cmocka_unit_test(test_merge_refuses_unclear_recovery),
        cmocka_unit_test(test_merge_lock),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
