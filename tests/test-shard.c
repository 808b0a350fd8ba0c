/* Unit tests of the shard writer and sealing (daemon/shard.c, seal.c) on a
 * real io_uring in a temporary spool: records are batched into the shard
 * file, the owner hears about every completed write, a sealed shard is in
 * done/ and reads back whole, and a write error is reported and never
 * sealed as if it were fine. The test listens to the shards' events
 * (shard-events.h) as the session, the admin socket and the lifecycle do
 * in logshardd; nothing else of the daemon is linked. */
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

#include "daemon.h"
#include "io.h"
#include "shard.h"
#include "shard_format.h"

/* The shards report their seals to the daemon's subscribers, as they do to
 * the lifecycle and the admin socket in logshardd: count them. */
static int finish_calls;

static void on_sealed(void *data, const struct shard *s, int err)
{
    (void)data;
    (void)s;
    (void)err;
    finish_calls++;
}

static const struct shard_events seal_events = { .sealed = on_sealed };

struct fixture {
    uv_loop_t loop;
    struct daemon d;
    struct shard_subscriber seals;
    char dir[64];
};

struct owner {
    int written_calls;
    bool heard_settled; /* the last written report found the shard settled */
    int failed_err;
};

static void on_written(void *owner, struct shard *s)
{
    ((struct owner *)owner)->written_calls++;
    ((struct owner *)owner)->heard_settled = shard_settled(s);
}

static void on_failed(void *owner, struct shard *s, int err)
{
    (void)s;
    ((struct owner *)owner)->failed_err = err;
}

static const struct shard_events events = { .written = on_written, .failed = on_failed };

static int open_dir(int parent, const char *name)
{
    assert_int_equal(mkdirat(parent, name, 0750), 0);
    return openat(parent, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
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
    f->d.loop = &f->loop;
    assert_int_equal(config_init(&f->d.config), 0);
    list_init(&f->d.sessions);
    list_init(&f->d.paused_sessions);
    list_init(&f->d.shards);
    list_init(&f->d.dirty_shards);
    list_init(&f->d.shards_to_create);
    list_init(&f->d.shard_subscribers);
    shard_subscribe(&f->d, &f->seals, &seal_events, f);
    r = io_new(&f->loop, backend_under_test(), 64, &f->d.io, &why);
    if (r == -ENOSYS || r == -EPERM)
        return -1;
    assert_int_equal(r, 0);
    io_set_before_submit(f->d.io, shard_write_dirty, &f->d);
    strcpy(f->dir, "/tmp/test-shard.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->d.spool_fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    f->d.active_fd = open_dir(f->d.spool_fd, "active");
    f->d.done_fd = open_dir(f->d.spool_fd, "done");
    f->d.seal_align = 4096; /* what spool_open finds on ext4 and tmpfs */
    finish_calls = 0;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];

    assert_true(list_empty(&f->d.shards));
    shard_unsubscribe(&f->seals);
    /* Every buffer was given back (to the pool or the kernel). */
    assert_int_equal(f->d.memory_bytes, 0);
    assert_true(f->d.batch_pool.bytes <= BATCH_POOL_MAX_BYTES);
    memory_pool_drain(&f->d);
    assert_int_equal(f->d.batch_pool.n, 0);
    assert_int_equal(io_close(f->d.io, NULL, NULL), 0);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    close(f->d.done_fd);
    close(f->d.active_fd);
    close(f->d.spool_fd);
    config_free(&f->d.config);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

/* Runs the loop until cond holds (bounded in iterations). */
static void run_until(struct fixture *f, const int *counter, int at_least)
{
    for (int i = 0; i < 100000 && *counter < at_least; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_true(*counter >= at_least);
}

/* Runs the loop until the shard's file is created (or could not be). */
static void run_until_created(struct fixture *f, const struct shard *s)
{
    for (int i = 0; i < 100000 && s->creating; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_false(s->creating);
}

static const struct shard_ident ident = {
    .producer = "unit.test", .producer_len = 9, .uid = 1234, .gid = 55, .pid = 4321,
};

/* Reads the one file in done/ back with the shard reader and checks it holds
 * the header of ident and records "record <i>" for i < n. */
static void check_done_shard(struct fixture *f, const char *name, uint64_t n)
{
    int fd = openat(f->d.done_fd, name, O_RDONLY | O_CLOEXEC);
    struct shard_reader *r;
    struct shard_item item;
    char expect[64];
    uint64_t i = 0;

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &item), 1);
    assert_int_equal(item.kind, SHARD_ITEM_HEADER);
    assert_string_equal(item.header->producer, "unit.test");
    assert_int_equal(item.header->uid, 1234);
    assert_int_equal(item.header->gid, 55);
    assert_int_equal(item.header->pid, 4321);
    while (shard_reader_next(r, &item) == 1 && item.kind != SHARD_ITEM_TRAILER) {
        int len = snprintf(expect, sizeof(expect), "record %llu", (unsigned long long)i);
        assert_int_equal(item.kind, SHARD_ITEM_RECORD);
        assert_int_equal(item.len, len);
        assert_memory_equal(item.payload, expect, (size_t)len);
        assert_int_equal(item.timestamp_ns, 1000 + i);
        i++;
    }
    /* Every sealed shard ends with its trailer, on a block boundary. */
    assert_int_equal(item.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(item.trailer->records, n);
    if (f->d.seal_align)
        assert_int_equal((item.offset + item.len) % f->d.seal_align, 0);
    assert_int_equal(shard_reader_next(r, &item), 0);
    assert_int_equal(i, n);
    shard_reader_free(r);
    close(fd);
}

static void append_records(struct shard *s, uint64_t from, uint64_t to)
{
    char rec[64];

    for (uint64_t i = from; i < to; i++) {
        int len = snprintf(rec, sizeof(rec), "record %llu", (unsigned long long)i);
        assert_int_equal(shard_append(s, rec, (uint32_t)len, 1000 + i), 0);
    }
}

static void test_append_write_seal(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    char *done_name;
    struct stat st;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    /* The file is created on the ring, at the end of the loop's tick;
     * records wait in memory until it is there. */
    assert_true(s->creating);
    assert_int_equal(fstatat(f->d.active_fd, s->tmp_name, &st, 0), -1);
    assert_int_equal(errno, ENOENT);
    append_records(s, 0, 500);
    assert_false(shard_settled(s));
    run_until(f, &o.written_calls, 1);
    assert_int_equal(fstatat(f->d.active_fd, s->tmp_name, &st, 0), 0);
    /* Everything queued in one tick went out in one write. */
    assert_int_equal(s->records_written, 500);
    assert_int_equal(o.written_calls, 1);
    assert_true(shard_settled(s));
    append_records(s, 500, 1000);
    run_until(f, &o.written_calls, 2);
    assert_int_equal(s->records_written, 1000);
    assert_int_equal(shard_unwritten_bytes(s), 0);

    done_name = strdup(s->done_name);
    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    assert_int_equal(fstatat(f->d.done_fd, done_name, &st, 0), 0);
    assert_int_equal(o.failed_err, 0);
    check_done_shard(f, done_name, 1000);
    free(done_name);
}

static void before_submit_shared(void *data)
{
    shard_write_dirty(data);
    group_sync_submit(data);
}

/* Runs the loop until every shard of s counts want records acknowledged. */
static void run_until_acked(struct fixture *f, struct shard **s, int n, uint64_t want)
{
    bool all = false;

    for (int k = 0; k < 100000 && !all; k++) {
        uv_run(&f->loop, UV_RUN_ONCE);
        all = true;
        for (int i = 0; i < n; i++)
            all = all && shard_records_acked(s[i]) == want;
    }
    assert_true(all);
}

/* fsync = batch with sync_method syncfs: each shard's write joins the next
 * shared syncfs, and its records count as acknowledged only once that
 * completes; the shards then seal as usual. */
static void test_shared_sync(void **state)
{
    struct fixture *f = *state;
    struct shard_ident shared = ident;
    struct owner o[3] = { { 0 } };
    struct shard *s[3];
    char *names[3];

    shared.sync = SHARD_SYNC_SHARED;
    f->d.batch_sync = SYNC_METHOD_SYNCFS;
    group_sync_init(&f->d);
    io_set_before_submit(f->d.io, before_submit_shared, &f->d);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(shard_open(&f->d, &shared, &o[i], &events, &s[i]), 0);
        append_records(s[i], 0, 100);
        assert_int_equal(shard_records_acked(s[i]), 0);
    }
    run_until_acked(f, s, 3, 100);
    /* Each shard wrote once and was covered once, by one syncfs or more. */
    assert_int_equal(f->d.group_sync.members, 3);
    assert_true(f->d.group_sync.syncs >= 1 && f->d.group_sync.syncs <= 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(o[i].failed_err, 0);
        assert_true(shard_settled(s[i]));
        names[i] = strdup(s[i]->done_name);
        shard_detach(s[i]);
        shard_seal(s[i]);
    }
    run_until(f, &finish_calls, 3);
    for (int i = 0; i < 3; i++) {
        check_done_shard(f, names[i], 100);
        free(names[i]);
    }
}

/* fsync = batch with sync_method one-flush: zeros are written ahead of the
 * records and made durable by the shared fdatasync of the shard's file;
 * once they are, a write into them goes to the disk with O_DIRECT (or is
 * written back) and is acknowledged after a shared fdatasync; the seal cuts the zeros, so the sealed shard ends
 * with its trailer. */
static void test_one_flush(void **state)
{
    struct fixture *f = *state;
    struct shard_ident flush = ident;
    struct owner o[3] = { { 0 } };
    struct shard *s[3];
    char *names[3];
    uint64_t n = 0;

    flush.sync = SHARD_SYNC_FLUSH;
    f->d.batch_sync = SYNC_METHOD_ONE_FLUSH;
    group_sync_init(&f->d);
    io_set_before_submit(f->d.io, before_submit_shared, &f->d);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(shard_open(&f->d, &flush, &o[i], &events, &s[i]), 0);
        append_records(s[i], 0, 100);
    }
    n = 100;
    run_until_acked(f, s, 3, n);
    /* The first write extended the file: an fdatasync of its own. Zeros
     * follow it, and become prepared space once their sync is done. */
    for (int k = 0; k < 100000 && !(s[0]->prepared_end > s[0]->size_written &&
                                     s[1]->prepared_end > s[1]->size_written &&
                                     s[2]->prepared_end > s[2]->size_written); k++)
        uv_run(&f->loop, UV_RUN_ONCE);
    for (int i = 0; i < 3; i++) {
        struct stat st;

        /* The fill's sync was the last thing in flight: the owner heard
         * that the shard is settled (a draining session waits for that). */
        assert_true(shard_settled(s[i]));
        assert_true(o[i].heard_settled);
        assert_true(s[i]->prepared_end >= s[i]->size_written + 32 * 1024);
        assert_int_equal(fstat(s[i]->fd, &st), 0);
        assert_true((uint64_t)st.st_size >= s[i]->prepared_end);
    }
    /* Writes within it go through the write-back and the shared sync. */
    for (int round = 0; round < 20; round++) {
        uint64_t members = f->d.group_sync.members;

        for (int i = 0; i < 3; i++)
            append_records(s[i], n, n + 100);
        n += 100;
        run_until_acked(f, s, 3, n);
        assert_true(f->d.group_sync.members >= members + 3);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(o[i].failed_err, 0);
            assert_true(s[i]->size_synced <= s[i]->prepared_end);
        }
    }
    /* Settled, the shards hold no batch: what counts towards
     * memory_limit_bytes is the copy of each one's last file block. */
    assert_int_equal(f->d.memory_bytes, 3 * SHARD_BLOCK);
    for (int i = 0; i < 3; i++) {
        /* The rounds' writes went to the disk with O_DIRECT (but for the
         * first, whose file block's earlier bytes were not kept yet), or,
         * where the file system refuses it, were written back. */
        if (s[i]->direct_off)
            assert_int_equal(s[i]->sync_req.op, IO_SYNC_RANGE);
        else
            assert_true(s[i]->direct_writes >= 18);
        assert_true(s[i]->fills >= 1);
        assert_true(shard_settled(s[i]));
        assert_non_null(s[i]->tail);
        names[i] = strdup(s[i]->done_name);
        shard_detach(s[i]);
        shard_seal(s[i]);
    }
    run_until(f, &finish_calls, 3);
    for (int i = 0; i < 3; i++) {
        check_done_shard(f, names[i], n);
        free(names[i]);
    }
}

/* Two shards of one producer opened back to back get distinct, increasing
 * ids, and both file names exist. */
/* A settled shard holds no buffer: it went to the pool, and the next
 * burst takes it back instead of mapping a new one. Memory the pool does
 * not take is unmapped. */
static void test_buffers_return_to_pool(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    unsigned pooled;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    append_records(s, 0, 2000);
    run_until(f, &o.written_calls, 1);
    assert_true(shard_settled(s));
    assert_int_equal(shard_buffer_bytes(s), 0);
    assert_int_equal(f->d.memory_bytes, 0);
    pooled = f->d.batch_pool.n;
    assert_true(pooled >= 1);
    assert_true(f->d.batch_pool.bytes > 0);

    append_records(s, 2000, 2010);
    assert_int_equal(f->d.batch_pool.n, pooled - 1);
    assert_true(f->d.memory_bytes > 0);
    run_until(f, &o.written_calls, 2);
    assert_int_equal(f->d.batch_pool.n, pooled);

    /* A full pool unmaps what comes back. */
    append_records(s, 2010, 2020);
    assert_int_equal(f->d.batch_pool.n, pooled - 1);
    f->d.batch_pool.bytes = BATCH_POOL_MAX_BYTES;
    run_until(f, &o.written_calls, 3);
    assert_int_equal(f->d.batch_pool.n, pooled - 1);
    f->d.batch_pool.bytes = 0; /* the drain in teardown does not look at it */

    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
}

/* A buffer is taken from the pool when one there is no larger than what
 * would be mapped instead (the most recently pooled first), else the
 * smallest that fits; below the arena's size, all of them mappings. */
static void test_pool_takes_a_fitting_buffer(void **state)
{
    struct fixture *f = *state;
    const size_t k = 1024;
    unsigned char *a = NULL, *b = NULL, *c = NULL, *x = NULL;
    size_t acap = 0, bcap = 0, ccap = 0, xcap = 0;
    unsigned char *a_was, *c_was;

    assert_int_equal(memory_map_grow(&f->d, &a, &acap, 10 * k, 64 * k), 0);
    assert_int_equal(memory_map_grow(&f->d, &b, &bcap, 10 * k, 96 * k), 0);
    assert_int_equal(memory_map_grow(&f->d, &c, &ccap, 10 * k, 64 * k), 0);
    assert_int_equal(acap, 64 * k);
    assert_int_equal(bcap, 96 * k);
    a_was = a;
    c_was = c;
    memory_map_release(&f->d, &a, &acap);
    memory_map_release(&f->d, &b, &bcap);
    memory_map_release(&f->d, &c, &ccap);
    assert_int_equal(f->d.batch_pool.n, 3);

    /* Of the two of 64 KiB, the one pooled last; not the one of 96. */
    assert_int_equal(memory_map_grow(&f->d, &x, &xcap, 10 * k, 64 * k), 0);
    assert_ptr_equal(x, c_was);
    assert_int_equal(xcap, 64 * k);
    memory_map_release(&f->d, &x, &xcap);
    /* None is small enough to take at once: the smallest that fits. */
    assert_int_equal(memory_map_grow(&f->d, &x, &xcap, 60 * k, 62 * k), 0);
    assert_int_equal(xcap, 64 * k);
    assert_true(x == a_was || x == c_was);
    memory_map_release(&f->d, &x, &xcap);
    assert_int_equal(memory_map_grow(&f->d, &x, &xcap, 70 * k, 80 * k), 0);
    assert_int_equal(xcap, 96 * k);
    memory_map_release(&f->d, &x, &xcap);
    assert_int_equal(f->d.batch_pool.n, 3);
    assert_int_equal(f->d.memory_bytes, 0);
}

static void test_ids_are_unique_and_increasing(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *a = NULL, *b = NULL;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &a), 0);
    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &b), 0);
    assert_true(b->id > a->id);
    assert_string_not_equal(a->tmp_name, b->tmp_name);
    shard_detach(a);
    shard_detach(b);
    shard_seal(a);
    shard_seal(b);
    run_until(f, &finish_calls, 2);
}

/* A write that fails is reported to the owner with its errno, later appends
 * are refused with it, and the shard is not published in done/ with data
 * the writer could not vouch for. Here the header and five records were
 * written first, so the shard is worth keeping: it is cut back to them
 * before sealing, and since the cut fails on the read-only descriptor, the
 * file stays in active/ for recovery. */
static void test_write_error(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    char *tmp_name;
    int ro;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    tmp_name = strdup(s->tmp_name);
    append_records(s, 0, 5);
    for (int i = 0; i < 1000 && s->records_written < 5; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(s->records_written, 5);
    /* Swap the shard's descriptor for a read-only one: writes now fail. */
    ro = openat(f->d.active_fd, tmp_name, O_RDONLY | O_CLOEXEC);
    assert_true(ro >= 0);
    assert_int_equal(dup2(ro, s->fd), s->fd);
    close(ro);
    append_records(s, 5, 10);
    for (int i = 0; i < 1000 && o.failed_err == 0; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(o.failed_err, -EBADF);
    assert_int_equal(shard_append(s, "x", 1, 1), -EBADF);
    assert_int_equal(s->records_written, 5);

    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    assert_int_equal(faccessat(f->d.active_fd, tmp_name, F_OK, 0), 0);
    free(tmp_name);
}

/* A shard whose first write (its header and first records) fails holds no
 * record: sealing removes its temp file, and nothing reaches done/. */
static void test_write_error_before_header(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    char *tmp_name, *done_name;
    int ro;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    run_until_created(f, s);
    tmp_name = strdup(s->tmp_name);
    done_name = strdup(s->done_name);
    ro = openat(f->d.active_fd, tmp_name, O_RDONLY | O_CLOEXEC);
    assert_true(ro >= 0);
    assert_int_equal(dup2(ro, s->fd), s->fd);
    close(ro);
    append_records(s, 0, 10);
    for (int i = 0; i < 1000 && o.failed_err == 0; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(o.failed_err, -EBADF);
    assert_int_equal(s->records_written, 0);

    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    assert_int_equal(faccessat(f->d.active_fd, tmp_name, F_OK, 0), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(faccessat(f->d.done_fd, done_name, F_OK, 0), -1);
    assert_int_equal(errno, ENOENT);
    free(tmp_name);
    free(done_name);
}

/* A shard whose file cannot be created (here active/ is not a directory:
 * ENOTDIR) reports it to its owner like a failed write, with create_error
 * set; it refuses records from then on, none of them counts as written,
 * and its seal ends without a file anywhere. */
static void test_create_failure(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    char *path, *done_name;
    int saved = dup(f->d.active_fd), file;

    assert_true(saved >= 0);
    assert_true(asprintf(&path, "%s/not-a-directory", f->dir) > 0);
    file = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(file >= 0);
    assert_int_equal(dup2(file, f->d.active_fd), f->d.active_fd);
    close(file);

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    done_name = strdup(s->done_name);
    append_records(s, 0, 10);
    for (int i = 0; i < 100000 && o.failed_err == 0; i++)
        uv_run(&f->loop, UV_RUN_ONCE);
    assert_int_equal(o.failed_err, -ENOTDIR);
    assert_int_equal(s->create_error, -ENOTDIR);
    assert_int_equal(s->fd, -1);
    assert_int_equal(s->records_written, 0);
    assert_int_equal(shard_records_acked(s), 0);
    assert_int_equal(shard_records_kept(s), 0);
    assert_int_equal(shard_append(s, "x", 1, 1), -ENOTDIR);
    assert_true(shard_settled(s));

    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    assert_int_equal(faccessat(f->d.done_fd, done_name, F_OK, 0), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(dup2(saved, f->d.active_fd), f->d.active_fd);
    close(saved);
    assert_int_equal(unlink(path), 0);
    free(path);
    free(done_name);
}

/* O_EXCL never overwrites: a file already there under the shard's first
 * name stays as it was, and the shard takes the next id, its header saying
 * the same. */
static void test_create_name_taken(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    struct shard_reader *r;
    struct shard_item item;
    char *planted, *done_name;
    struct stat st;
    int fd;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    planted = strdup(s->tmp_name);
    fd = openat(f->d.active_fd, planted, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "planted", 7), 7);
    close(fd);
    append_records(s, 0, 3);
    run_until(f, &o.written_calls, 1);
    assert_int_equal(o.failed_err, 0);
    assert_string_not_equal(s->tmp_name, planted);
    assert_int_equal(fstatat(f->d.active_fd, planted, &st, 0), 0);
    assert_int_equal(st.st_size, 7);

    done_name = strdup(s->done_name);
    fd = openat(f->d.active_fd, s->tmp_name, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &item), 1);
    assert_int_equal(item.kind, SHARD_ITEM_HEADER);
    assert_true(item.header->shard_id == s->id);
    shard_reader_free(r);
    close(fd);
    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    check_done_shard(f, done_name, 3);
    assert_int_equal(unlinkat(f->d.active_fd, planted, 0), 0);
    free(planted);
    free(done_name);
}

/* A seal whose rename fails leaves the shard in active/ under its temp name
 * (for recovery) and publishes nothing in done/. */
static void test_seal_rename_failure(void **state)
{
    struct fixture *f = *state;
    struct owner o = { 0 };
    struct shard *s = NULL;
    char *tmp_name, *done_name;
    struct stat st;

    assert_int_equal(shard_open(&f->d, &ident, &o, &events, &s), 0);
    append_records(s, 0, 3);
    run_until(f, &o.written_calls, 1);
    tmp_name = strdup(s->tmp_name);
    done_name = strdup(s->done_name);
    /* A directory in the way makes rename(2) fail with EISDIR. */
    assert_int_equal(mkdirat(f->d.done_fd, done_name, 0700), 0);
    shard_detach(s);
    shard_seal(s);
    run_until(f, &finish_calls, 1);
    assert_int_equal(fstatat(f->d.active_fd, tmp_name, &st, 0), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(fstatat(f->d.done_fd, done_name, &st, 0), 0);
    assert_true(S_ISDIR(st.st_mode));
    free(tmp_name);
    free(done_name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_write_seal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_sync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_buffers_return_to_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pool_takes_a_fitting_buffer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_are_unique_and_increasing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error_before_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_seal_rename_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_name_taken, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
