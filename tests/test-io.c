/* Unit tests of daemon/io.c on a real io_uring and a real libuv loop: writes
 * land where asked, linked requests run in order and a failed write cancels
 * what is linked to it, and many requests queued in one tick all complete. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>

#include "io.h"

struct fixture {
    uv_loop_t loop;
    struct io *io;
    char dir[64];
    int dirfd;
};

struct result {
    int res;
    int order;
    bool done;
};

static int completions;

static void record_result(struct io_req *req, int res)
{
    struct result *r = req->data;

    r->res = res;
    r->order = completions++;
    r->done = true;
}

/* The backend the suite runs on: io_uring, or the thread pool when the
 * suite runs with LOGSHARD_IO_BACKEND=threads (meson test --setup threads). */
static enum io_backend backend_under_test(void)
{
    const char *env = getenv("LOGSHARD_IO_BACKEND");
    return env && strcmp(env, "threads") == 0 ? IO_BACKEND_THREADS : IO_BACKEND_URING;
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    const char *why = NULL;
    int r;

    assert_non_null(f);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    r = io_new(&f->loop, backend_under_test(), 64, &f->io, &why);
    if (r == -ENOSYS || r == -EPERM) {
        fprintf(stderr, "io_uring unavailable here: %s\n", strerror(-r));
        return -1;
    }
    assert_int_equal(r, 0);
    strcpy(f->dir, "/tmp/test-io.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->dirfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->dirfd >= 0);
    completions = 0;
    *state = f;
    return 0;
}

static void run_until(struct fixture *f, const struct result *last)
{
    for (int i = 0; i < 10000 && !last->done; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_true(last->done);
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];

    assert_int_equal(io_pending(f->io), 0);
    assert_int_equal(io_close(f->io, NULL, NULL), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    close(f->dirfd);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static void prep(struct io_req *req, enum io_op op, int fd, struct result *r)
{
    memset(req, 0, sizeof(*req));
    req->op = op;
    req->fd = fd;
    req->cb = record_result;
    req->data = r;
}

/* Writes at explicit offsets, then a linked fdatasync, rename and directory
 * fsync: every step succeeds, in order, and the file holds what was written
 * under its new name. */
static void test_write_sync_rename_chain(void **state)
{
    struct fixture *f = *state;
    struct io_req w1, w2, sync, ren, dsync;
    struct result r1 = { 0 }, r2 = { 0 }, rs = { 0 }, rr = { 0 }, rd = { 0 };
    char buf[16] = { 0 };
    int fd = openat(f->dirfd, "a.tmp", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    prep(&w1, IO_WRITE, fd, &r1);
    w1.buf = "hello ";
    w1.len = 6;
    w1.offset = 0;
    prep(&w2, IO_WRITE, fd, &r2);
    w2.buf = "world";
    w2.len = 5;
    w2.offset = 6;
    io_queue(f->io, &w1);
    io_queue(f->io, &w2);
    run_until(f, &r1); /* unlinked: they may complete in either order */
    run_until(f, &r2);
    assert_int_equal(r1.res, 6);
    assert_int_equal(r2.res, 5);

    prep(&sync, IO_FDATASYNC, fd, &rs);
    sync.link = true;
    prep(&ren, IO_RENAMEAT, f->dirfd, &rr);
    ren.oldpath = "a.tmp";
    ren.newdirfd = f->dirfd;
    ren.newpath = "a.done";
    ren.link = true;
    prep(&dsync, IO_FSYNC, f->dirfd, &rd);
    io_queue(f->io, &sync);
    io_queue(f->io, &ren);
    io_queue(f->io, &dsync);
    run_until(f, &rd);
    assert_int_equal(rs.res, 0);
    assert_int_equal(rr.res, 0);
    assert_int_equal(rd.res, 0);
    assert_true(rs.order < rr.order && rr.order < rd.order);

    close(fd);
    fd = openat(f->dirfd, "a.done", O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, buf, sizeof(buf)), 11);
    assert_string_equal(buf, "hello world");
    assert_int_equal(faccessat(f->dirfd, "a.tmp", F_OK, 0), -1);
    close(fd);
}

/* A failed write cancels the request linked after it, and only that one:
 * the fdatasync behind a write to a read-only descriptor must not run, the
 * unlinked request after the chain must. */
static void test_failed_write_cancels_link(void **state)
{
    struct fixture *f = *state;
    struct io_req w, sync, after;
    struct result rw = { 0 }, rs = { 0 }, ra = { 0 };
    int fd = openat(f->dirfd, "ro-link", O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    prep(&w, IO_WRITE, fd, &rw);
    w.buf = "x";
    w.len = 1;
    w.link = true;
    prep(&sync, IO_FDATASYNC, fd, &rs);
    prep(&after, IO_FSYNC, f->dirfd, &ra);
    io_queue(f->io, &w);
    io_queue(f->io, &sync);
    io_queue(f->io, &after);
    run_until(f, &rs);
    run_until(f, &ra);
    assert_int_equal(rw.res, -EBADF);
    assert_int_equal(rs.res, -ECANCELED);
    assert_int_equal(ra.res, 0);
    close(fd);
}

/* More requests than the ring has entries, queued in one tick: all of them
 * complete (the queue feeds the ring as completions free room). */
static void test_more_requests_than_ring_entries(void **state)
{
    struct fixture *f = *state;
    enum { N = 1000 };
    static struct io_req reqs[N];
    static struct result res[N];
    static char data[N];
    struct stat st;
    int fd = openat(f->dirfd, "many", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    for (int i = 0; i < N; i++) {
        data[i] = (char)('a' + i % 26);
        prep(&reqs[i], IO_WRITE, fd, &res[i]);
        reqs[i].buf = &data[i];
        reqs[i].len = 1;
        reqs[i].offset = (uint64_t)i;
        io_queue(f->io, &reqs[i]);
    }
    for (int i = 0; i < N; i++) {
        run_until(f, &res[i]);
        assert_int_equal(res[i].res, 1);
    }
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, N);
    close(fd);
}

/* Errors come back as negative errno values, not through errno. */
static void test_write_error_is_reported(void **state)
{
    struct fixture *f = *state;
    struct io_req w;
    struct result r = { 0 };
    int fd = openat(f->dirfd, "ro", O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    prep(&w, IO_WRITE, fd, &r);
    w.buf = "x";
    w.len = 1;
    io_queue(f->io, &w);
    run_until(f, &r);
    assert_int_equal(r.res, -EBADF);
    close(fd);
}

/* syncfs, which io_uring lacks, runs on the thread pool whatever the
 * backend, between ring requests queued around it, and counts as a sync. */
static void test_syncfs(void **state)
{
    struct fixture *f = *state;
    struct io_req w, sfs, w2;
    struct result rw = { 0 }, rs = { 0 }, rw2 = { 0 };
    int fd = openat(f->dirfd, "s.tmp", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    uint64_t syncs = io_syncs_done(f->io);

    assert_true(fd >= 0);
    prep(&w, IO_WRITE, fd, &rw);
    w.buf = "abc";
    w.len = 3;
    io_queue(f->io, &w);
    run_until(f, &rw);
    prep(&sfs, IO_SYNCFS, f->dirfd, &rs);
    io_queue(f->io, &sfs);
    prep(&w2, IO_WRITE, fd, &rw2);
    w2.buf = "def";
    w2.len = 3;
    w2.offset = 3;
    io_queue(f->io, &w2);
    run_until(f, &rs);
    run_until(f, &rw2);
    assert_int_equal(rs.res, 0);
    assert_int_equal(rw2.res, 3);
    assert_int_equal(io_syncs_done(f->io), syncs + 1);
    close(fd);
}

/* ftruncate runs on the thread pool whatever the backend: the file ends
 * where it was cut, and an error comes back as a negative errno. */
static void test_truncate(void **state)
{
    struct fixture *f = *state;
    struct io_req w, cut, bad;
    struct result rw = { 0 }, rc = { 0 }, rb = { 0 };
    int fd = openat(f->dirfd, "t.tmp", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    struct stat st;
    char back[8];

    assert_true(fd >= 0);
    prep(&w, IO_WRITE, fd, &rw);
    w.buf = "abcdefgh";
    w.len = 8;
    io_queue(f->io, &w);
    run_until(f, &rw);
    assert_int_equal(rw.res, 8);
    prep(&cut, IO_TRUNCATE, fd, &rc);
    cut.offset = 3;
    io_queue(f->io, &cut);
    run_until(f, &rc);
    assert_int_equal(rc.res, 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(pread(fd, back, sizeof(back), 0), 3);
    assert_memory_equal(back, "abc", 3);
    prep(&bad, IO_TRUNCATE, f->dirfd, &rb); /* a directory cannot be cut */
    io_queue(f->io, &bad);
    run_until(f, &rb);
    assert_true(rb.res == -EINVAL || rb.res == -EISDIR || rb.res == -EBADF);
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_write_sync_rename_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syncfs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_write_cancels_link, setup, teardown),
        cmocka_unit_test_setup_teardown(test_more_requests_than_ring_entries, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error_is_reported, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
