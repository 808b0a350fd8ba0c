/* Sealing a shard, step by step through the I/O ring so the event loop
 * never waits on a sync:
 *
 *   fdatasync(file) -> renameat(active/tmp, done/shard) -> fsync(done/) + fsync(active/)
 *
 * The data is synced before the rename, so after a crash a name in done/
 * never points at unsynced data (ext4's delayed allocation could otherwise
 * leave it empty). done/ is synced so that the new name survives, active/ so
 * that the old name is gone for good and recovery cannot find the same shard
 * under both names.
 *
 * Each step is submitted only after the one before it has succeeded. The
 * steps are not linked in the ring: the kernel cancels what is linked to a
 * failed write, but a failed renameat (and possibly fsync) does not cancel
 * its successors on every kernel, and a rename after a failed sync would
 * publish data nobody vouched for. A failed step ends the seal; the file is
 * then left in active/ for recovery, and a failed sync is never retried. */
#include "seal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "shard.h"

enum { STEP_DATASYNC, STEP_RENAME, STEP_SYNC_DONE, STEP_SYNC_ACTIVE };

static const char *const step_names[] = {
    [STEP_DATASYNC] = "fdatasync",
    [STEP_RENAME] = "rename into done/",
    [STEP_SYNC_DONE] = "fsync of done/",
    [STEP_SYNC_ACTIVE] = "fsync of active/",
};

static void on_seal_step(struct io_req *req, int res);

static void queue_step(struct shard *s, unsigned step)
{
    struct daemon *d = s->d;
    struct io_req *req = &s->seal_req[step];

    memset(req, 0, sizeof(*req));
    switch (step) {
    case STEP_DATASYNC:
        req->op = IO_FDATASYNC;
        req->fd = s->fd;
        break;
    case STEP_RENAME:
        req->op = IO_RENAMEAT;
        req->fd = d->active_fd;
        req->oldpath = s->tmp_name;
        req->newdirfd = d->done_fd;
        req->newpath = s->done_name;
        break;
    case STEP_SYNC_DONE:
        req->op = IO_FSYNC;
        req->fd = d->done_fd;
        break;
    case STEP_SYNC_ACTIVE:
        req->op = IO_FSYNC;
        req->fd = d->active_fd;
        break;
    }
    req->cb = on_seal_step;
    req->data = s;
    io_queue(d->io, req);
}

static void on_seal_step(struct io_req *req, int res)
{
    struct shard *s = req->data;
    unsigned step = (unsigned)(req - s->seal_req);

    if (res < 0 && s->seal_error == 0) {
        s->seal_error = res;
        s->seal_failed_step = step_names[step];
    }
    switch (step) {
    case STEP_DATASYNC:
        if (res < 0)
            shard_sealed(s, res);
        else
            queue_step(s, STEP_RENAME);
        return;
    case STEP_RENAME:
        if (res < 0) {
            shard_sealed(s, res);
            return;
        }
        /* The two directories are independent; sync them together. */
        s->seal_completed = 0;
        queue_step(s, STEP_SYNC_DONE);
        queue_step(s, STEP_SYNC_ACTIVE);
        return;
    default:
        if (++s->seal_completed == 2)
            shard_sealed(s, s->seal_error);
        return;
    }
}

void seal_start(struct shard *s)
{
    s->seal_error = 0;
    s->seal_failed_step = NULL;

    /* After a write error the file may hold part of the refused batch past
     * the last complete write; cut it so the shard stays valid. */
    if (s->error && ftruncate(s->fd, (off_t)s->size_written) < 0) {
        s->seal_failed_step = "truncate after a write error";
        shard_sealed(s, -errno);
        return;
    }
    queue_step(s, STEP_DATASYNC);
}
