/* Unit tests of the merge engine's copy: merge_copy and merge_copy_at with
 * copy_file_range and with their read/write fallback, when the fallback is
 * taken and when an error is not a reason for it, and whole merges whose
 * source changes between its check and its copy. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "merge.h"

#include "merge-fixture.h"

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

/* ---- a source changed between its check and its copy ---- */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_copy_identical),
        cmocka_unit_test(test_copy_at_offset),
        cmocka_unit_test(test_copy_prefix),
        cmocka_unit_test(test_copy_falls_back_on_einval),
        cmocka_unit_test(test_copy_other_error_fails),
        cmocka_unit_test(test_copy_short_source),
        cmocka_unit_test(test_merge_fails_mid_copy),
        cmocka_unit_test(test_merge_copies_what_was_checked),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
