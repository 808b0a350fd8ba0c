/* The daemon's asynchronous file I/O. Requests are queued during a loop tick
 * and handed over together just before the loop waits again, to one of two
 * backends:
 *  - io_uring: one ring; completions are signalled through an eventfd that
 *    a uv_poll_t watches;
 *  - threads: libuv's thread pool runs the plain system calls, for kernels
 *    or sandboxes where io_uring is unavailable (kernel.io_uring_disabled,
 *    seccomp, ENOSYS).
 * Both keep the same promises: ordering of linked requests, short writes
 * reported as such, errors as negative errno values. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "list.h"

enum io_op {
    IO_WRITE,     /* pwrite(fd, buf, len, offset) */
    IO_FDATASYNC, /* fdatasync(fd) */
    IO_FSYNC,     /* fsync(fd), for directories */
    IO_RENAMEAT,  /* renameat2(olddirfd, oldpath, newdirfd, newpath, RENAME_NOREPLACE):
                     never replaces an existing file (-EEXIST) */
    IO_SYNC_RANGE, /* sync_file_range(fd, offset, len, WAIT_BEFORE | WRITE | WAIT_AFTER):
                      the range's dirty pages written out and waited for, no metadata
                      and no cache flush of the disk; its write-back errors reported */
    IO_SYNCFS,    /* syncfs(fd): io_uring has no such operation, so both backends run
                     it on libuv's thread pool; never linked, nor linked to */
    IO_TRUNCATE,  /* ftruncate(fd, offset): io_uring has it only from Linux 6.9, so both
                     backends run it on libuv's thread pool; never linked, nor linked
                     to. A cut inside a block of a file written with O_DIRECT reads
                     that block from the disk first, to zero the rest of it */
    IO_CREATE,    /* a new file oldpath in the directory fd, mode 0640, opened for
                     writing: O_CREAT|O_EXCL, never an existing file (-EEXIST), and
                     through openat2(2) RESOLVE_BENEATH without symlinks where the kernel
                     has it (O_NOFOLLOW where not). The result is the new descriptor,
                     which the caller owns. Linked only to IO_CREATE: a chain of
                     creates runs one after the other, each whatever the one
                     before it returned (a failed create cancels nothing) */
};

struct io_req;
typedef void (*io_cb)(struct io_req *req, int res);

/* One operation. The caller owns the struct and keeps it (and the buffer or
 * paths it points to) alive until its callback has run. */
struct io_req {
    enum io_op op;
    int fd;
    const void *buf;
    uint32_t len;
    uint64_t offset;
    int newdirfd;
    const char *oldpath;
    const char *newpath;
    /* The next request queued with io_queue is linked to this one: it starts
     * only after this one completes. A failed or short IO_WRITE cancels what
     * is linked to it (-ECANCELED); a failed IO_RENAMEAT does not on current
     * kernels (seen on 6.18), and other operations may not either, so never
     * link a step that would be unsafe after a failure of its predecessor. */
    bool link;
    /* IO_WRITE on a file opened O_DIRECT: told apart only for the test
     * builds' faults (direct_write_eio). */
    bool direct;
    io_cb cb;
    void *data;
    struct list_node node; /* internal */
};

struct io;

/* Sets up the backend asked for: IO_BACKEND_URING (fails with -ENOSYS or
 * -EPERM when io_uring is unavailable), IO_BACKEND_THREADS, or
 * IO_BACKEND_AUTO (io_uring, else threads). entries sizes the ring.
 * *ret_why, when io_uring was wanted but not had, says why (static text),
 * else NULL. Returns 0 or a negative errno. */
int io_new(uv_loop_t *loop, enum io_backend backend, unsigned entries, struct io **ret,
           const char **ret_why);

/* The backend in use: IO_BACKEND_URING or IO_BACKEND_THREADS. */
enum io_backend io_backend_in_use(const struct io *io);

/* Queues one request, or a chain when req->link is set on all but the last
 * of consecutive calls. It is submitted at the end of this loop tick.
 * The callback gets the result: >= 0 on success (bytes for IO_WRITE, which
 * may be fewer than asked: the caller resubmits the rest) or a negative errno.
 * -EAGAIN and -EINTR are retried here and never reach the callback. */
void io_queue(struct io *io, struct io_req *req);

/* Sets a function that runs just before each submission, so that callers
 * can turn what the tick accumulated into requests (the shard writer queues
 * one write per dirty shard there). */
void io_set_before_submit(struct io *io, void (*fn)(void *data), void *data);

/* Tells the I/O layer that the before-submit hook has work to do, so the
 * loop must run it even if nothing else would keep the loop going. */
void io_want_submit(struct io *io);

/* Requests in flight or queued. */
uint64_t io_pending(const struct io *io);

/* Requests completed so far, successful or not: progress, for the watchdog. */
uint64_t io_completions(const struct io *io);

/* fdatasync and fsync requests completed so far (for status figures). */
uint64_t io_syncs_done(const struct io *io);

/* Stops watching and releases the backend once nothing is in flight; cb runs
 * when the libuv handles are closed. Returns -EBUSY while requests are
 * pending. */
int io_close(struct io *io, void (*cb)(void *data), void *data);
