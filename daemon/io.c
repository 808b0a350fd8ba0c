/* Asynchronous file I/O for the daemon, on io_uring or on libuv's threads.
 *
 * Requests are collected in a queue while callbacks run and handed to the
 * backend once per loop iteration, from a uv_prepare handle (it runs just
 * before the loop blocks, after every callback that could have queued work),
 * so that all the writes one tick produced cost one io_uring_enter.
 *
 * io_uring: the ring signals completions on an eventfd; a uv_poll_t on it
 * wakes the loop, and every completion found is handed to its request's
 * callback. In-flight requests are capped at the completion ring's size so
 * the kernel never has to hold completions back (CQ overflow); a chain of
 * linked requests goes into one submission, never split across two.
 *
 * threads: each chain becomes one uv_work_t that runs its system calls in
 * order on a pool thread, cancelling the rest of the chain after a failed or
 * short write as the kernel does for linked writes. Results are delivered on
 * the loop thread, in order.
 *
 * With -Dfault_injection=true (tests only, never in release builds) the
 * environment variable LOGSHARD_FAULTS can make io_uring set-up fail, make
 * the Nth fdatasync report EIO, or split every write into short writes. */
#include "io.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

struct io_faults {
    bool uring_setup;           /* io_uring "unavailable" */
    uint64_t fail_fdatasync_at; /* 1-based; 0: never */
    bool short_writes;          /* submit half of every write */
    bool stall_writes;          /* never hand anything over: a hung I/O path */
    uint64_t fdatasyncs;
    uint64_t fail_syncfs_at;    /* 1-based; 0: never */
    uint64_t syncfs_calls;
    uint64_t fail_sync_range_at; /* 1-based; 0: never */
    uint64_t sync_ranges;
    uint64_t fail_direct_write_at; /* 1-based; 0: never */
    uint64_t direct_writes;
    bool direct_einval;          /* every O_DIRECT write "refused" (after it was done) */
    uint64_t fail_truncate_at;   /* 1-based; 0: never (made, then reported failed) */
    uint64_t truncates;
};

struct io {
    uv_loop_t *loop;
    enum io_backend backend;
    struct list_node queue;
    uv_prepare_t prepare;
    unsigned inflight;
    unsigned max_inflight;
    uint64_t syncs_done;
    uint64_t completions;
    unsigned handles_open;
    void (*before_submit)(void *);
    void *before_submit_data;
    void (*close_cb)(void *);
    void *close_data;
    struct io_faults faults;

    /* io_uring backend */
    struct io_uring ring;
    bool ring_ready;
    int eventfd;
    uv_poll_t poll;
};

/* ---- fault injection (test builds only) ---- */

#ifdef LOGSHARD_FAULT_INJECTION
static void faults_parse(struct io_faults *f)
{
    const char *env = getenv("LOGSHARD_FAULTS");
    char *copy, *save = NULL;

    if (!env)
        return;
    copy = strdup(env);
    if (!copy)
        return;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "uring_setup") == 0)
            f->uring_setup = true;
        else if (strcmp(t, "short_writes") == 0)
            f->short_writes = true;
        else if (strcmp(t, "stall_writes") == 0)
            f->stall_writes = true;
        else if (strncmp(t, "fdatasync_eio=", 14) == 0)
            f->fail_fdatasync_at = strtoull(t + 14, NULL, 10);
        else if (strncmp(t, "syncfs_eio=", 11) == 0)
            f->fail_syncfs_at = strtoull(t + 11, NULL, 10);
        else if (strncmp(t, "sync_range_eio=", 15) == 0)
            f->fail_sync_range_at = strtoull(t + 15, NULL, 10);
        else if (strcmp(t, "direct_einval") == 0)
            f->direct_einval = true;
        else if (strncmp(t, "direct_write_eio=", 17) == 0)
            f->fail_direct_write_at = strtoull(t + 17, NULL, 10);
        else if (strncmp(t, "truncate_eio=", 13) == 0)
            f->fail_truncate_at = strtoull(t + 13, NULL, 10);
    }
    free(copy);
}
#else
static void faults_parse(struct io_faults *f)
{
    (void)f;
}
#endif

/* The length to submit for a write (all of it, unless faults say half). */
static uint32_t write_len(const struct io *io, const struct io_req *req)
{
    if (io->faults.short_writes && req->len > 1)
        return req->len / 2;
    return req->len;
}

/* IO_SYNC_RANGE: start the range's write-back and wait for it, after any
 * write-back already under way, so every page dirty at submission is on
 * the device when it completes. */
#define SYNC_RANGE_FLAGS \
    (SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)

/* Counts a completed request and lets faults turn a sync into a failure. */
static int sync_result(struct io *io, const struct io_req *req, int res)
{
    io->completions++;
    if (req->op == IO_WRITE && req->direct && io->faults.direct_einval)
        return -EINVAL;
    if (req->op == IO_WRITE && req->direct && res > 0 && io->faults.fail_direct_write_at &&
        ++io->faults.direct_writes == io->faults.fail_direct_write_at)
        return -EIO;
    if (req->op == IO_SYNC_RANGE && res != -ECANCELED && io->faults.fail_sync_range_at &&
        ++io->faults.sync_ranges == io->faults.fail_sync_range_at)
        return -EIO;
    if (req->op == IO_TRUNCATE && io->faults.fail_truncate_at &&
        ++io->faults.truncates == io->faults.fail_truncate_at)
        return -EIO;
    if (req->op != IO_FDATASYNC && req->op != IO_FSYNC && req->op != IO_SYNCFS)
        return res;
    if (res >= 0)
        io->syncs_done++;
    if (req->op == IO_FDATASYNC && res != -ECANCELED && io->faults.fail_fdatasync_at &&
        ++io->faults.fdatasyncs == io->faults.fail_fdatasync_at)
        return -EIO;
    if (req->op == IO_SYNCFS && io->faults.fail_syncfs_at &&
        ++io->faults.syncfs_calls == io->faults.fail_syncfs_at)
        return -EIO;
    return res;
}

/* Length of the chain starting at n (1 for an unlinked request). */
static unsigned chain_length(struct io *io, struct list_node *n)
{
    unsigned len = 1;

    while (list_entry(n, struct io_req, node)->link && n->next != &io->queue) {
        n = n->next;
        len++;
    }
    return len;
}

/* ---- creating files ---- */

/* How IO_CREATE opens: only a new file, and only in the directory given.
 * Names are checked against the producer name rule before they get here;
 * this is the second line of defence. The ring reads it when the request
 * is submitted, so it lives as long as the program. */
static struct open_how create_how = {
    .flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
    .mode = 0640,
    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
};

/* IO_CREATE as system calls: openat2(2), or openat(2) with O_NOFOLLOW
 * where openat2 is missing (ENOSYS) or filtered (EPERM, some sandboxes).
 * Returns the descriptor, or -1 with errno set. */
static int create_beneath(int dirfd, const char *name)
{
    long fd = syscall(SYS_openat2, dirfd, name, &create_how, sizeof(create_how));

    if (fd >= 0 || (errno != ENOSYS && errno != EPERM))
        return (int)fd;
    return openat(dirfd, name, (int)create_how.flags, (mode_t)create_how.mode);
}

/* ---- io_uring backend ---- */

static void uring_prep(struct io *io, struct io_uring_sqe *sqe, struct io_req *req)
{
    switch (req->op) {
    case IO_WRITE:
        io_uring_prep_write(sqe, req->fd, req->buf, write_len(io, req), req->offset);
        break;
    case IO_FDATASYNC:
        io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
        break;
    case IO_FSYNC:
        io_uring_prep_fsync(sqe, req->fd, 0);
        break;
    case IO_SYNC_RANGE:
        io_uring_prep_sync_file_range(sqe, req->fd, req->len, req->offset, SYNC_RANGE_FLAGS);
        break;
    case IO_RENAMEAT:
        io_uring_prep_renameat(sqe, req->fd, req->oldpath, req->newdirfd, req->newpath,
                               RENAME_NOREPLACE);
        break;
    case IO_CREATE:
        /* Runs on one of the ring's workers (an O_CREAT open cannot be done
         * without blocking), so a slow create never stalls the loop. */
        io_uring_prep_openat2(sqe, req->fd, req->oldpath, &create_how);
        break;
    case IO_SYNCFS: /* never here: uring_submit_queue hands both to the thread pool */
    case IO_TRUNCATE:
        assert(false);
        break;
    }
    if (req->link)
        sqe->flags |= req->op == IO_CREATE ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK;
    io_uring_sqe_set_data(sqe, req);
}

static void uring_reap(struct io *io);

/* Hands every prepared entry to the kernel. Entries a failed submit left in
 * the ring stay there and go with the next one (on_prepare retries). */
static void uring_flush_sq(struct io *io)
{
    while (io_uring_sq_ready(&io->ring)) {
        int r = io_uring_submit(&io->ring);

        if (r == -EINTR)
            continue;
        if (r == -EBUSY) { /* completions must be reaped first */
            uring_reap(io);
            continue;
        }
        if (r <= 0)
            break;
    }
}

static int threads_submit_chain(struct io *io, unsigned len);

static void uring_submit_queue(struct io *io)
{
    while (!list_empty(&io->queue)) {
        struct list_node *n = io->queue.next;
        unsigned len = chain_length(io, n);

        enum io_op op = list_entry(n, struct io_req, node)->op;

        if (op == IO_SYNCFS || op == IO_TRUNCATE) {
            /* No io_uring operation on every kernel: the thread pool runs it. */
            assert(len == 1);
            if (threads_submit_chain(io, 1) < 0)
                break;
            continue;
        }
        if (io->inflight + len > io->max_inflight)
            break;
        if (io_uring_sq_space_left(&io->ring) < len) {
            uring_flush_sq(io);
            if (io_uring_sq_space_left(&io->ring) < len)
                break;
        }
        for (unsigned i = 0; i < len; i++) {
            struct io_req *req = list_entry(io->queue.next, struct io_req, node);
            struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);

            list_del(&req->node);
            uring_prep(io, sqe, req);
            io->inflight++;
        }
    }
    uring_flush_sq(io);
}

static void uring_reap(struct io *io)
{
    struct io_uring_cqe *cqe;

    for (;;) {
        unsigned seen = 0;
        unsigned head;

        io_uring_for_each_cqe(&io->ring, head, cqe) {
            struct io_req *req = io_uring_cqe_get_data(cqe);
            int res = cqe->res;

            seen++;
            io->inflight--;
            if (res == -EAGAIN || res == -EINTR) {
                /* Retried alone: whatever was linked behind it got
                 * -ECANCELED, and its owner requeues it. */
                req->link = false;
                list_add_tail(&io->queue, &req->node);
                continue;
            }
            req->cb(req, sync_result(io, req, res));
        }
        if (!seen)
            break;
        io_uring_cq_advance(&io->ring, seen);
    }
    if (io_uring_cq_has_overflow(&io->ring)) {
        /* Cannot happen while inflight <= CQ size, but if it does, the kernel
         * holds the completions back until asked for them. */
        (void)io_uring_get_events(&io->ring);
        uring_reap(io);
    }
}

static void on_eventfd(uv_poll_t *h, int status, int events)
{
    struct io *io = h->data;
    uint64_t count;

    (void)status;
    (void)events;
    while (read(io->eventfd, &count, sizeof(count)) < 0 && errno == EINTR)
        ;
    uring_reap(io);
}

static int uring_setup(struct io *io, unsigned entries, const char **ret_why)
{
    struct io_uring_params params;
    int r;

    if (io->faults.uring_setup) {
        *ret_why = "io_uring set-up failed (injected fault)";
        return -ENOSYS;
    }
    memset(&params, 0, sizeof(params));
    r = io_uring_queue_init_params(entries, &io->ring, &params);
    if (r < 0) {
        *ret_why = r == -ENOSYS   ? "the kernel has no io_uring"
                   : r == -EPERM  ? "io_uring is disabled (kernel.io_uring_disabled or seccomp)"
                   : r == -ENOMEM ? "no memory for an io_uring (RLIMIT_MEMLOCK?)"
                                  : "io_uring set-up failed";
        return r;
    }
    io->max_inflight = params.cq_entries;
    io->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->eventfd < 0) {
        r = -errno;
        io_uring_queue_exit(&io->ring);
        *ret_why = "cannot create an eventfd";
        return r;
    }
    r = io_uring_register_eventfd(&io->ring, io->eventfd);
    if (r == 0)
        r = uv_poll_init(io->loop, &io->poll, io->eventfd);
    if (r == 0) {
        io->poll.data = io;
        r = uv_poll_start(&io->poll, UV_READABLE, on_eventfd);
        if (r < 0) {
            /* The poll handle exists now; io_close closes it. */
            io->ring_ready = true;
            io->handles_open++;
            *ret_why = "cannot watch the io_uring eventfd";
            return r;
        }
    }
    if (r < 0) {
        (void)close(io->eventfd);
        io_uring_queue_exit(&io->ring);
        *ret_why = "cannot register the io_uring eventfd";
        return r;
    }
    io->ring_ready = true;
    io->handles_open++;
    return 0;
}

/* ---- thread pool backend ---- */

struct work {
    uv_work_t w;
    struct io *io;
    unsigned n;
    struct io_req **reqs;
    int *res;
};

static int run_one(const struct io *io, const struct io_req *req)
{
    ssize_t n;

    for (;;) {
        switch (req->op) {
        case IO_WRITE:
            n = pwrite(req->fd, req->buf, write_len(io, req), (off_t)req->offset);
            break;
        case IO_FDATASYNC:
            n = fdatasync(req->fd);
            break;
        case IO_FSYNC:
            n = fsync(req->fd);
            break;
        case IO_SYNC_RANGE:
            n = sync_file_range(req->fd, (off_t)req->offset, (off_t)req->len, SYNC_RANGE_FLAGS);
            break;
        case IO_RENAMEAT:
            n = renameat2(req->fd, req->oldpath, req->newdirfd, req->newpath, RENAME_NOREPLACE);
            break;
        case IO_SYNCFS:
            n = syncfs(req->fd);
            break;
        case IO_TRUNCATE:
            n = ftruncate(req->fd, (off_t)req->offset);
            break;
        case IO_CREATE:
            n = create_beneath(req->fd, req->oldpath);
            break;
        default:
            return -EINVAL;
        }
        if (n >= 0)
            return (int)n;
        if (errno != EINTR && errno != EAGAIN)
            return -errno;
    }
}

/* Runs on a pool thread. Touches only the chain's own requests, which the
 * loop thread leaves alone until after_chain. */
static void run_chain(uv_work_t *w)
{
    struct work *wk = w->data;
    bool cancelled = false;

    for (unsigned i = 0; i < wk->n; i++) {
        const struct io_req *req = wk->reqs[i];

        if (cancelled) {
            wk->res[i] = -ECANCELED;
            continue;
        }
        wk->res[i] = run_one(wk->io, req);
        if (req->link && req->op != IO_CREATE && (wk->res[i] < 0 ||
                          (req->op == IO_WRITE && (uint32_t)wk->res[i] < req->len)))
            cancelled = true;
    }
}

static void after_chain(uv_work_t *w, int status)
{
    struct work *wk = w->data;
    struct io *io = wk->io;

    io->inflight -= wk->n;
    for (unsigned i = 0; i < wk->n; i++) {
        int res = status == UV_ECANCELED ? -ECANCELED : wk->res[i];
        wk->reqs[i]->cb(wk->reqs[i], sync_result(io, wk->reqs[i], res));
    }
    free(wk);
}

/* Hands the chain of len requests at the head of the queue to a pool
 * thread. Returns 0, or -ENOMEM with the chain still queued (the next tick
 * tries again). */
static int threads_submit_chain(struct io *io, unsigned len)
{
    struct work *wk = calloc(1, sizeof(*wk) + len * (sizeof(struct io_req *) + sizeof(int)));

    if (!wk)
        return -ENOMEM;
    wk->io = io;
    wk->n = len;
    wk->reqs = (struct io_req **)(wk + 1);
    wk->res = (int *)(wk->reqs + len);
    wk->w.data = wk;
    for (unsigned i = 0; i < len; i++) {
        wk->reqs[i] = list_entry(io->queue.next, struct io_req, node);
        list_del(&wk->reqs[i]->node);
    }
    io->inflight += len;
    if (uv_queue_work(io->loop, &wk->w, run_chain, after_chain) < 0) {
        /* Cannot happen with a valid loop and callbacks; report the
         * chain as failed rather than lose it. */
        wk->res[0] = -EIO;
        for (unsigned i = 1; i < len; i++)
            wk->res[i] = -ECANCELED;
        after_chain(&wk->w, 0);
    }
    return 0;
}

static void threads_submit_queue(struct io *io)
{
    while (!list_empty(&io->queue))
        if (threads_submit_chain(io, chain_length(io, io->queue.next)) < 0)
            return; /* stays queued; the next tick tries again */
}

/* ---- common ---- */

static void on_prepare(uv_prepare_t *h)
{
    struct io *io = h->data;

    if (io->before_submit)
        io->before_submit(io->before_submit_data);
    if (io->backend == IO_BACKEND_URING) {
        if (!list_empty(&io->queue) || io_uring_sq_ready(&io->ring))
            uring_submit_queue(io);
    } else if (!list_empty(&io->queue)) {
        threads_submit_queue(io);
    }
    if (list_empty(&io->queue))
        uv_unref((uv_handle_t *)&io->prepare);
}

int io_new(uv_loop_t *loop, enum io_backend backend, unsigned entries, struct io **ret,
           const char **ret_why)
{
    struct io *io = calloc(1, sizeof(*io));
    const char *why = NULL;
    int r;

    if (!io)
        return -ENOMEM;
    io->loop = loop;
    io->eventfd = -1;
    list_init(&io->queue);
    faults_parse(&io->faults);

    if (backend == IO_BACKEND_URING || backend == IO_BACKEND_AUTO) {
        r = uring_setup(io, entries, &why);
        if (r == 0) {
            io->backend = IO_BACKEND_URING;
        } else if (backend == IO_BACKEND_URING || io->handles_open) {
            if (io->handles_open) {
                io_close(io, NULL, NULL);
            } else {
                free(io);
            }
            *ret_why = why;
            return r;
        }
    }
    if (!io->ring_ready)
        io->backend = IO_BACKEND_THREADS;

    (void)uv_prepare_init(loop, &io->prepare); /* cannot fail */
    io->prepare.data = io;
    io->handles_open++;
    (void)uv_prepare_start(&io->prepare, on_prepare); /* cannot fail with a callback */
    uv_unref((uv_handle_t *)&io->prepare);
    *ret_why = why;
    *ret = io;
    return 0;
}

enum io_backend io_backend_in_use(const struct io *io)
{
    return io->backend;
}

void io_queue(struct io *io, struct io_req *req)
{
    if (io->faults.stall_writes) {
        /* A hung I/O path: every request counts as pending forever and is
         * never submitted (a linked sync must not overtake its write). */
        io->inflight++;
        return;
    }
    /* Queued work keeps the loop alive until on_prepare has handed it over
     * (the prepare handle is otherwise unreferenced). */
    if (list_empty(&io->queue))
        uv_ref((uv_handle_t *)&io->prepare);
    list_add_tail(&io->queue, &req->node);
}

void io_want_submit(struct io *io)
{
    uv_ref((uv_handle_t *)&io->prepare);
}

void io_set_before_submit(struct io *io, void (*fn)(void *data), void *data)
{
    io->before_submit = fn;
    io->before_submit_data = data;
}

uint64_t io_pending(const struct io *io)
{
    uint64_t n = io->inflight;
    for (const struct list_node *p = io->queue.next; p != &io->queue; p = p->next)
        n++;
    return n;
}

uint64_t io_completions(const struct io *io)
{
    return io->completions;
}

uint64_t io_syncs_done(const struct io *io)
{
    return io->syncs_done;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct io *io = h->data;

    if (--io->handles_open > 0)
        return;
    if (io->ring_ready) {
        io_uring_queue_exit(&io->ring);
        (void)close(io->eventfd);
    }
    if (io->close_cb)
        io->close_cb(io->close_data);
    free(io);
}

int io_close(struct io *io, void (*cb)(void *data), void *data)
{
    if (io->inflight || !list_empty(&io->queue))
        return -EBUSY;
    io->close_cb = cb;
    io->close_data = data;
    if (io->ring_ready)
        uv_close((uv_handle_t *)&io->poll, on_handle_closed);
    if (io->prepare.data == io) /* initialised */
        uv_close((uv_handle_t *)&io->prepare, on_handle_closed);
    return 0;
}
