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
 * publish data nobody vouched for.
 *
 * When a sync failed (the seal's own fdatasync, or an earlier one under
 * none or interval, whose records were acknowledged before any sync proved
 * them) nothing can vouch for the file's tail: it is moved to quarantine/,
 * kept whole for an operator, and never published in done/. Under batch and
 * always, a failed earlier sync only ever covered unacknowledged records, so
 * the file is cut back to what the last good sync proved and sealed. A
 * failed rename leaves the file in active/ for recovery. */
#include "seal.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "log.h"
#include "shard.h"

enum {
    STEP_DATASYNC,
    STEP_RENAME,
    STEP_SYNC_DONE,
    STEP_SYNC_ACTIVE,
    STEP_QUARANTINE,
    STEP_SYNC_QUARANTINE,
    STEP_SYNC_ACTIVE_AFTER_QUARANTINE,
};

static const char *const step_names[] = {
    [STEP_DATASYNC] = "fdatasync",
    [STEP_RENAME] = "rename into done/",
    [STEP_SYNC_DONE] = "fsync of done/",
    [STEP_SYNC_ACTIVE] = "fsync of active/",
    [STEP_QUARANTINE] = "rename into quarantine/",
    [STEP_SYNC_QUARANTINE] = "fsync of quarantine/",
    [STEP_SYNC_ACTIVE_AFTER_QUARANTINE] = "fsync of active/",
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
    case STEP_SYNC_ACTIVE_AFTER_QUARANTINE:
        req->op = IO_FSYNC;
        req->fd = d->active_fd;
        break;
    case STEP_QUARANTINE:
        req->op = IO_RENAMEAT;
        req->fd = d->active_fd;
        req->oldpath = s->tmp_name;
        req->newdirfd = s->quarantine_fd;
        req->newpath = s->tmp_name;
        break;
    case STEP_SYNC_QUARANTINE:
        req->op = IO_FSYNC;
        req->fd = s->quarantine_fd;
        break;
    }
    req->cb = on_seal_step;
    req->data = s;
    io_queue(d->io, req);
}

/* Opens (creating if needed) <spool>/quarantine and queues the move there.
 * Opening a directory does not wait on the disk; the renames and syncs go
 * through the ring. */
static void start_quarantine(struct shard *s)
{
    struct daemon *d = s->d;

    s->quarantined = true;
    if (mkdirat(d->spool_fd, "quarantine", 0750) < 0 && errno != EEXIST) {
        s->seal_failed_step = "creating quarantine/";
        shard_sealed(s, -errno);
        return;
    }
    s->quarantine_fd = openat(d->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->quarantine_fd < 0) {
        s->seal_failed_step = "opening quarantine/";
        shard_sealed(s, -errno);
        return;
    }
    queue_step(s, STEP_QUARANTINE);
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
        if (res < 0) {
            log_error("fdatasync of active/%s failed while sealing: %s; moving it to "
                      "quarantine/",
                      s->tmp_name, strerror(-res));
            start_quarantine(s);
        } else {
            queue_step(s, STEP_RENAME);
        }
        return;
    case STEP_QUARANTINE:
        if (res < 0) {
            shard_sealed(s, res);
            return;
        }
        s->seal_completed = 0;
        queue_step(s, STEP_SYNC_QUARANTINE);
        queue_step(s, STEP_SYNC_ACTIVE_AFTER_QUARANTINE);
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
    bool synced_each_write = s->policy == FSYNC_BATCH || s->policy == FSYNC_ALWAYS;
    uint64_t keep = s->size_written;

    s->seal_error = 0;
    s->seal_failed_step = NULL;
    s->quarantine_fd = -1;

    if (s->sync_error) {
        if (!synced_each_write) {
            log_error("active/%s: an fdatasync failed after records were acknowledged; "
                      "moving it to quarantine/ rather than vouch for it",
                      s->tmp_name);
            start_quarantine(s);
            return;
        }
        keep = s->size_synced;
    }
    /* After a write or sync error the file may hold bytes nothing vouched
     * for past the last good write or sync; cut them so the shard holds
     * exactly what was acknowledged. */
    if (s->error && ftruncate(s->fd, (off_t)keep) < 0) {
        s->seal_failed_step = "truncate after an I/O error";
        shard_sealed(s, -errno);
        return;
    }
    queue_step(s, STEP_DATASYNC);
}
