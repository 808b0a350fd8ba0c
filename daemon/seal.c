/* Sealing a shard, as one chain of linked io_uring requests so the event
 * loop never waits on a sync:
 *
 *   fdatasync(file) -> renameat(active/tmp, done/shard) -> fsync(done/) -> fsync(active/)
 *
 * The data is synced before the rename, so after a crash a name in done/
 * never points at unsynced data (ext4's delayed allocation could otherwise
 * leave it empty). done/ is synced so that the new name survives, then
 * active/ so that the old name is gone for good and recovery cannot find the
 * same shard under both names. A failed step cancels the rest; the file is
 * then left in active/ for recovery, and a failed sync is never retried. */
#include "seal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "shard.h"

static const char *const step_names[4] = {
    "fdatasync", "rename into done/", "fsync of done/", "fsync of active/",
};

static void on_seal_step(struct io_req *req, int res)
{
    struct shard *s = req->data;
    unsigned step = (unsigned)(req - s->seal_req);

    if (res < 0 && s->seal_error == 0) {
        s->seal_error = res;
        s->seal_failed_step = step_names[step];
    }
    if (++s->seal_completed == 4)
        shard_sealed(s, s->seal_error);
}

void seal_start(struct shard *s)
{
    struct daemon *d = s->d;

    /* After a write error the file may hold part of the refused batch past
     * the last complete write; cut it so the shard stays valid. */
    if (s->error && ftruncate(s->fd, (off_t)s->size_written) < 0) {
        s->seal_failed_step = "truncate after a write error";
        shard_sealed(s, -errno);
        return;
    }

    memset(s->seal_req, 0, sizeof(s->seal_req));
    s->seal_completed = 0;
    s->seal_error = 0;
    s->seal_req[0].op = IO_FDATASYNC;
    s->seal_req[0].fd = s->fd;
    s->seal_req[1].op = IO_RENAMEAT;
    s->seal_req[1].fd = d->active_fd;
    s->seal_req[1].oldpath = s->tmp_name;
    s->seal_req[1].newdirfd = d->done_fd;
    s->seal_req[1].newpath = s->done_name;
    s->seal_req[2].op = IO_FSYNC;
    s->seal_req[2].fd = d->done_fd;
    s->seal_req[3].op = IO_FSYNC;
    s->seal_req[3].fd = d->active_fd;
    for (unsigned i = 0; i < 4; i++) {
        s->seal_req[i].link = i < 3;
        s->seal_req[i].cb = on_seal_step;
        s->seal_req[i].data = s;
        io_queue(d->io, &s->seal_req[i]);
    }
}
