/* io_uring driven from the libuv loop.
 *
 * Requests are collected in a queue while callbacks run and moved into the
 * submission ring once per loop iteration, from a uv_prepare handle (it runs
 * just before the loop blocks, after every callback that could have queued
 * work), so that all the writes one tick produced cost one io_uring_enter. The ring
 * signals completions on an eventfd; a uv_poll_t on it wakes the loop, and
 * every completion found is handed to its request's callback.
 *
 * In-flight requests are capped at the completion ring's size so that the
 * kernel never has to hold back completions (CQ overflow); a chain of linked
 * requests goes into one submission, never split across two. */
#include "io.h"

#include <errno.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

struct io {
    struct io_uring ring;
    int eventfd;
    uv_poll_t poll;
    uv_prepare_t prepare;
    struct list_node queue;
    unsigned inflight;
    unsigned max_inflight;
    unsigned handles_open;
    void (*before_submit)(void *);
    void *before_submit_data;
    void (*close_cb)(void *);
    void *close_data;
};

static void prep(struct io_uring_sqe *sqe, struct io_req *req)
{
    switch (req->op) {
    case IO_WRITE:
        io_uring_prep_write(sqe, req->fd, req->buf, req->len, req->offset);
        break;
    case IO_FDATASYNC:
        io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
        break;
    case IO_FSYNC:
        io_uring_prep_fsync(sqe, req->fd, 0);
        break;
    case IO_RENAMEAT:
        io_uring_prep_renameat(sqe, req->fd, req->oldpath, req->newdirfd, req->newpath, 0);
        break;
    }
    if (req->link)
        sqe->flags |= IOSQE_IO_LINK;
    io_uring_sqe_set_data(sqe, req);
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

static void reap(struct io *io);

/* Hands every prepared entry to the kernel. Entries a failed submit left in
 * the ring stay there and go with the next one (on_prepare retries). */
static void flush_sq(struct io *io)
{
    while (io_uring_sq_ready(&io->ring)) {
        int r = io_uring_submit(&io->ring);

        if (r == -EINTR)
            continue;
        if (r == -EBUSY) { /* completions must be reaped first */
            reap(io);
            continue;
        }
        if (r <= 0)
            break;
    }
}

static void submit_queue(struct io *io)
{

    while (!list_empty(&io->queue)) {
        struct list_node *n = io->queue.next;
        unsigned len = chain_length(io, n);

        if (io->inflight + len > io->max_inflight)
            break;
        if (io_uring_sq_space_left(&io->ring) < len) {
            flush_sq(io);
            if (io_uring_sq_space_left(&io->ring) < len)
                break;
        }
        for (unsigned i = 0; i < len; i++) {
            struct io_req *req = list_entry(io->queue.next, struct io_req, node);
            struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);

            list_del(&req->node);
            prep(sqe, req);
            io->inflight++;
        }
    }
    flush_sq(io);
}

static void on_prepare(uv_prepare_t *h)
{
    struct io *io = h->data;

    if (io->before_submit)
        io->before_submit(io->before_submit_data);
    if (!list_empty(&io->queue) || io_uring_sq_ready(&io->ring))
        submit_queue(io);
}

static void reap(struct io *io)
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
                /* A retried link member would lose its chain; these ops are
                 * only ever retried alone (the rest got -ECANCELED). */
                req->link = false;
                list_add_tail(&io->queue, &req->node);
                continue;
            }
            req->cb(req, res);
        }
        if (!seen)
            break;
        io_uring_cq_advance(&io->ring, seen);
    }
    if (io_uring_cq_has_overflow(&io->ring)) {
        /* Cannot happen while inflight <= CQ size, but if it does, the kernel
         * holds the completions back until asked for them. */
        (void)io_uring_get_events(&io->ring);
        reap(io);
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
    reap(io);
}

int io_new(uv_loop_t *loop, unsigned entries, struct io **ret)
{
    struct io_uring_params params;
    struct io *io = calloc(1, sizeof(*io));
    int r;

    if (!io)
        return -ENOMEM;
    list_init(&io->queue);
    memset(&params, 0, sizeof(params));
    r = io_uring_queue_init_params(entries, &io->ring, &params);
    if (r < 0) {
        free(io);
        return r;
    }
    io->max_inflight = params.cq_entries;
    io->eventfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (io->eventfd < 0) {
        r = -errno;
        goto fail_ring;
    }
    r = io_uring_register_eventfd(&io->ring, io->eventfd);
    if (r < 0)
        goto fail_eventfd;
    r = uv_poll_init(loop, &io->poll, io->eventfd);
    if (r < 0)
        goto fail_eventfd;
    io->poll.data = io;
    (void)uv_prepare_init(loop, &io->prepare); /* cannot fail */
    io->prepare.data = io;
    io->handles_open = 2;
    r = uv_poll_start(&io->poll, UV_READABLE, on_eventfd);
    if (r == 0)
        r = uv_prepare_start(&io->prepare, on_prepare);
    if (r < 0) {
        /* The handles are closed by io_close. */
        *ret = io;
        io_close(io, NULL, NULL);
        return r;
    }
    uv_unref((uv_handle_t *)&io->prepare);
    *ret = io;
    return 0;

fail_eventfd:
    (void)close(io->eventfd);
fail_ring:
    io_uring_queue_exit(&io->ring);
    free(io);
    return r;
}

void io_queue(struct io *io, struct io_req *req)
{
    list_add_tail(&io->queue, &req->node);
}

void io_set_before_submit(struct io *io, void (*fn)(void *data), void *data)
{
    io->before_submit = fn;
    io->before_submit_data = data;
}

void io_submit_now(struct io *io)
{
    submit_queue(io);
}

uint64_t io_pending(const struct io *io)
{
    uint64_t n = io->inflight;
    for (const struct list_node *p = io->queue.next; p != &io->queue; p = p->next)
        n++;
    return n;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct io *io = h->data;

    if (--io->handles_open > 0)
        return;
    io_uring_queue_exit(&io->ring);
    (void)close(io->eventfd);
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
    uv_close((uv_handle_t *)&io->poll, on_handle_closed);
    uv_close((uv_handle_t *)&io->prepare, on_handle_closed);
    return 0;
}
