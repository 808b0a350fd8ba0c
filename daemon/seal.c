/* Sealing a shard, step by step through the I/O ring so the event loop
 * never waits on a sync:
 *
 *   write trailer -> fdatasync(file) -> renameat(active/tmp, done/shard)
 *     -> fsync(done/) + fsync(active/)
 *
 * (the steps of seal-steps.h, which recovery runs too). The seal's state is
 * a struct seal of its own inside the shard; only this file writes it.
 *
 * The seal trailer (docs/FORMAT.md) pads the shard to the filesystem's block
 * size and records its length and record count, so merge can check a sealed
 * shard from its two ends and reflink it whole. A trailer that cannot be
 * written (a full disk) is cut off again and the shard sealed without one:
 * it stays a valid shard, which merge then checks record by record.
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
 * failed rename leaves the file in active/ for recovery.
 *
 * A shard keeps nothing when what it may keep is shorter than its header:
 * its first write (the header and the first records) failed or came back
 * short, typically on a full disk, or under batch and always no sync ever
 * proved it. No record of it was acknowledged, and a seal would put a file
 * without a header (empty, or a trailer alone) into done/, which every
 * reader refuses. Its temp file is removed instead, and nothing reaches
 * done/. The same goes for a shard that was held behind an earlier shard
 * of its producer's stream which failed (shard.h): it wrote nothing, and
 * its records would follow a gap in the stream's positions. */
#include "seal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "shard.h"
#include "shard_format.h"

static const char *step_name(unsigned step)
{
    switch (step) {
    case SEAL_STEP_QUARANTINE: return "rename into quarantine/";
    case SEAL_STEP_SYNC_QUARANTINE: return "fsync of quarantine/";
    case SEAL_STEP_SYNC_ACTIVE_AFTER_QUARANTINE:
    case SEAL_STEP_FINISH: return "fsync of active/";
    case SEAL_STEP_CUT: return "cutting the file after its last record";
    default: return seal_step_name((enum seal_step)step);
    }
}

void seal_init(struct seal *seal)
{
    memset(seal, 0, sizeof(*seal));
    seal->state = SEAL_IDLE;
    seal->quarantine_fd = -1;
}

void seal_free(struct seal *seal)
{
    if (seal->quarantine_fd >= 0)
        (void)close(seal->quarantine_fd); /* a directory, read-only */
    seal->quarantine_fd = -1;
    free(seal->trailer);
    seal->trailer = NULL;
}

enum seal_outcome seal_outcome(const struct seal *seal)
{
    assert(seal->state == SEAL_ENDED);
    if (seal->error)
        return SEAL_FAILED;
    if (seal->discarded)
        return SEAL_REMOVED;
    return seal->quarantined ? SEAL_IN_QUARANTINE : SEAL_IN_DONE;
}

const char *seal_discard_why(const struct seal *seal)
{
    return seal->discard_why;
}

const char *seal_failed_step(const struct seal *seal)
{
    return seal->failed_step ? seal->failed_step : "?";
}

/* The one way a seal ends: the shard hears it, then frees itself. */
static void end(struct shard *s, int err)
{
    struct seal *seal = &s->seal;

    assert(seal->state == SEAL_RUNNING);
    seal->state = SEAL_ENDED;
    seal->error = err;
    shard_sealed(s, err);
}

static void on_seal_step(struct io_req *req, int res);

static void queue_step(struct shard *s, unsigned step)
{
    struct daemon *d = s->d;
    struct seal *seal = &s->seal;
    struct io_req *req = &seal->req[step];

    assert(seal->state == SEAL_RUNNING);
    memset(req, 0, sizeof(*req));
    switch (step) {
    case SEAL_STEP_TRAILER:
        req->op = IO_WRITE;
        req->fd = s->fd;
        req->buf = seal->trailer + seal->trailer_done;
        req->len = seal->trailer_len - seal->trailer_done;
        req->offset = seal->trailer_offset + seal->trailer_done;
        break;
    case SEAL_STEP_DATASYNC:
        req->op = IO_FDATASYNC;
        req->fd = s->fd;
        break;
    case SEAL_STEP_RENAME:
        req->op = IO_RENAMEAT;
        req->fd = d->active_fd;
        req->oldpath = s->tmp_name;
        req->newdirfd = d->done_fd;
        req->newpath = s->done_name;
        break;
    case SEAL_STEP_SYNC_DONE:
        req->op = IO_FSYNC;
        req->fd = d->done_fd;
        break;
    case SEAL_STEP_SYNC_ACTIVE:
    case SEAL_STEP_SYNC_ACTIVE_AFTER_QUARANTINE:
    case SEAL_STEP_FINISH:
        req->op = IO_FSYNC;
        req->fd = d->active_fd;
        break;
    case SEAL_STEP_QUARANTINE:
        req->op = IO_RENAMEAT;
        req->fd = d->active_fd;
        req->oldpath = s->tmp_name;
        req->newdirfd = seal->quarantine_fd;
        req->newpath = s->tmp_name;
        break;
    case SEAL_STEP_SYNC_QUARANTINE:
        req->op = IO_FSYNC;
        req->fd = seal->quarantine_fd;
        break;
    case SEAL_STEP_CUT:
        req->op = IO_TRUNCATE;
        req->fd = s->fd;
        req->offset = seal->trailer_offset;
        break;
    default:
        assert(!"a seal step without a request");
        break;
    }
    req->cb = on_seal_step;
    req->data = s;
    io_queue(d->io, req);
}

/* Ends a seal that stopped before its first step went to the ring (err 0
 * for a shard that was removed, else the error and the step it failed at).
 * seal_start() runs inside whatever made the shard seal, often a write's
 * completion that still uses the shard afterwards, so the shard must not
 * be freed from there: the end goes through the ring as an fsync of
 * active/, which also makes a removal from active/ durable. */
static void finish_later(struct shard *s, int err, const char *step)
{
    s->seal.error = err;
    s->seal.failed_step = step;
    queue_step(s, SEAL_STEP_FINISH);
}

/* Opens (creating if needed) <spool>/quarantine and queues the move there.
 * Opening a directory does not wait on the disk; the renames and syncs go
 * through the ring. */
static void start_quarantine(struct shard *s)
{
    struct daemon *d = s->d;
    struct seal *seal = &s->seal;

    seal->quarantined = true;
    if (mkdirat(d->spool_fd, "quarantine", 0750) < 0 && errno != EEXIST) {
        finish_later(s, -errno, "creating quarantine/");
        return;
    }
    seal->quarantine_fd = openat(d->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (seal->quarantine_fd < 0) {
        finish_later(s, -errno, "opening quarantine/");
        return;
    }
    queue_step(s, SEAL_STEP_QUARANTINE);
}

/* The trailer's write finished, fully or not. */
static void on_trailer_written(struct shard *s, int res)
{
    struct seal *seal = &s->seal;

    if (res > 0 && seal->trailer_done + (uint32_t)res < seal->trailer_len) {
        seal->trailer_done += (uint32_t)res;
        queue_step(s, SEAL_STEP_TRAILER);
        return;
    }
    if (res <= 0) {
        log_warning("active/%s: cannot write its seal trailer (%s); sealing it without "
                    "one, merge will check it record by record",
                    s->tmp_name, res < 0 ? strerror(-res) : "no progress");
        /* A torn trailer would make the sealed file corrupt; cut it. */
        if (ftruncate(s->fd, (off_t)seal->trailer_offset) < 0) {
            seal->failed_step = "cutting a torn seal trailer";
            end(s, -errno);
            return;
        }
    }
    queue_step(s, SEAL_STEP_DATASYNC);
}

/* The file was cut after its last record kept, or could not be. */
static void on_cut(struct shard *s, int res)
{
    struct seal *seal = &s->seal;

    if (res < 0) {
        finish_later(s, res,
                     s->error ? "truncate after an I/O error" : "cutting the zeros written ahead");
        return;
    }
    queue_step(s, seal->trailer ? SEAL_STEP_TRAILER : SEAL_STEP_DATASYNC);
}

static void on_seal_step(struct io_req *req, int res)
{
    struct shard *s = req->data;
    struct seal *seal = &s->seal;
    unsigned step = (unsigned)(req - seal->req);

    assert(step < SEAL_REQS);
    if (step == SEAL_STEP_TRAILER) {
        on_trailer_written(s, res);
        return;
    }
    if (step == SEAL_STEP_CUT) {
        on_cut(s, res);
        return;
    }

    if (res < 0 && seal->error == 0) {
        seal->error = res;
        seal->failed_step = step_name(step);
    }
    switch (step) {
    case SEAL_STEP_FINISH:
        end(s, seal->error);
        return;
    case SEAL_STEP_DATASYNC:
        if (res < 0) {
            log_error("fdatasync of active/%s failed while sealing: %s; moving it to "
                      "quarantine/",
                      s->tmp_name, strerror(-res));
            start_quarantine(s);
        } else {
            queue_step(s, SEAL_STEP_RENAME);
        }
        return;
    case SEAL_STEP_QUARANTINE:
        if (res < 0) {
            end(s, res);
            return;
        }
        seal->completed = 0;
        queue_step(s, SEAL_STEP_SYNC_QUARANTINE);
        queue_step(s, SEAL_STEP_SYNC_ACTIVE_AFTER_QUARANTINE);
        return;
    case SEAL_STEP_RENAME:
        if (res < 0) {
            end(s, res);
            return;
        }
        /* The two directories are independent; sync them together. */
        seal->completed = 0;
        queue_step(s, SEAL_STEP_SYNC_DONE);
        queue_step(s, SEAL_STEP_SYNC_ACTIVE);
        return;
    default:
        /* SEAL_STEP_SYNC_DONE and SEAL_STEP_SYNC_ACTIVE, or the two syncs
         * after the move into quarantine/. */
        assert(seal->completed < 2);
        if (++seal->completed == 2)
            end(s, seal->error);
        return;
    }
}

/* Removes the temp file of a shard that holds no header (see the top of
 * this file), then syncs active/. Should a crash lose the removal anyway,
 * recovery finds the temp file again and treats it like any other (removed
 * when empty, moved to quarantine/ without a whole header, sealed with its
 * valid prefix otherwise), so no file without a header reaches done/. */
static void discard(struct shard *s, const char *why)
{
    struct daemon *d = s->d;

    if (unlinkat(d->active_fd, s->tmp_name, 0) < 0) {
        finish_later(s, -errno, "removing a shard whose header was never written");
        return;
    }
    s->seal.discarded = true;
    s->seal.discard_why = why;
    finish_later(s, 0, NULL);
}

void seal_start(struct shard *s)
{
    struct seal *seal = &s->seal;
    uint64_t keep = shard_bytes_kept(s);
    struct shard_trailer t;

    assert(seal->state == SEAL_IDLE);
    seal->state = SEAL_RUNNING;
    if (s->fd < 0) {
        /* Its file could not be created (shard.h): there is nothing to
         * seal or remove, and none of its records was acknowledged. */
        seal->discarded = true;
        seal->discard_why = "its file could not be created";
        finish_later(s, 0, NULL);
        return;
    }
    if (s->records_appended == 0) {
        /* Made when its connection was welcomed (session.c), it never got
         * a record: nothing to keep, and an empty shard in done/ would only
         * say that a connection came and went. */
        discard(s, "no record reached it");
        return;
    }
    if (s->sync_error && !shard_syncs_each_write(s)) {
        log_error("active/%s: an fdatasync failed after records were acknowledged; "
                  "moving it to quarantine/ rather than vouch for it",
                  s->tmp_name);
        start_quarantine(s);
        return;
    }
    if (s->stream_cut) {
        /* Nothing of it was written (shard.h): it was held behind the
         * shard before it in its stream, which failed. */
        discard(s, "the shard before it in the same stream failed, so its records would "
                   "follow a gap");
        return;
    }
    if (keep < s->header_len) {
        /* Nothing acknowledged can be lost here: every record follows the
         * header, and the header is not there. */
        discard(s, s->sync_error && keep < s->size_written
                       ? "no fdatasync ever proved its header durable"
                       : "its header was never written whole");
        return;
    }
    if (shard_records_kept(s) == 0) {
        /* Its header went out with no record (the file is made when its
         * connection is welcomed), and none of its records followed it:
         * an empty shard in done/ would say nothing. */
        discard(s, "none of its records was written");
        return;
    }
    memset(&t, 0, sizeof(t));
    t.shard_len = keep;
    t.records = shard_records_kept(s);
    /* After a cut this may be later than the newest record kept: it is an
     * upper bound, which is what merge --before needs. */
    t.newest_ns = s->newest_record_ns ? s->newest_record_ns : s->created_ns;
    seal->trailer_offset = keep;
    t.trailer_len = (uint32_t)shard_trailer_size(keep, s->d->seal_align);
    seal->trailer = malloc(t.trailer_len);
    if (seal->trailer) {
        shard_encode_trailer(seal->trailer, &t);
        seal->trailer_len = t.trailer_len;
        seal->trailer_done = 0;
    } else {
        log_warning("active/%s: no memory for its seal trailer; sealing it without one",
                    s->tmp_name);
    }
    /* After a write or sync error the file may hold bytes nothing vouched
     * for past the last good write or sync; under one-flush, zeros written
     * ahead of the records (shard-prepare.c). Cut them so the shard holds
     * exactly what was acknowledged, and its trailer ends the file. The cut
     * goes to a thread: inside a block written with O_DIRECT, the kernel
     * reads the block back from the disk before it zeroes the rest, and
     * the loop would wait for that read with every producer. */
    if (s->error || s->fill_end > keep) {
        queue_step(s, SEAL_STEP_CUT);
        return;
    }
    queue_step(s, seal->trailer ? SEAL_STEP_TRAILER : SEAL_STEP_DATASYNC);
}
