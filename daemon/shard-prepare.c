/* Space prepared ahead of a shard's records, for fsync = batch with
 * sync_method one-flush (shard.h, group-sync.h).
 *
 * An append that extends a file changes its metadata (its size, and blocks
 * allocated for it), and only an fdatasync of that file makes those
 * durable: one cache flush of the disk per shard. Writing into blocks that
 * are already allocated and written, below a size already durable, changes
 * nothing but data; such writes, once on the disk (sync_file_range), are
 * made durable by any later cache flush of the same disk, for every shard
 * at once.
 *
 * So after a write completes, when fewer than half a fill's bytes are left
 * between the records written and the zeros asked for so far, zeros are
 * written after the records: 64 KiB the first time, 128 KiB after that,
 * twice a write's size after a larger write, up to 1 MiB.
 * They cost no cache flush of their own: the next shared fdatasync
 * (group-sync.h) is of this shard's file, which writes them back and makes
 * the new size and blocks durable, while its flush serves every shard that
 * joined it. Larger fills were measured slower: the disk takes a while to
 * write 1 MiB, and every flush queued behind it waits (docs/BENCHMARKS.md).
 * Until that sync has completed the space counts for nothing
 * (prepared_end stays), and no record write starts while the zeros are
 * being written, so the two never overlap in flight. A fill that cannot be
 * written (a full disk) is not tried again: the shard's writes go on with
 * an fdatasync each. A fill's sync that fails is a failed sync of the
 * shard like any other.
 *
 * Readers of active shards take a run of zeros where a record would start
 * as the end of what was written (docs/FORMAT.md); the seal cuts the file
 * back to its last record before writing the trailer. */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "shard.h"
#include "shard-internal.h"

#define FILL_MIN (64u * 1024u)
#define FILL_MAX (128u * 1024u)
#define FILL_LARGEST (1024u * 1024u)
#define FILL_ALIGN 4096u

/* What every fill writes. Never written to, so its pages are the kernel's
 * shared zero page and cost no memory (not const: a const array would be
 * 1 MiB of the program file). Aligned for O_DIRECT. */
static unsigned char zeros[FILL_LARGEST] __attribute__((aligned(SHARD_BLOCK)));

static uint64_t round_up(uint64_t v, uint64_t to)
{
    return (v + to - 1) / to * to;
}

static void on_fill_written(struct io_req *req, int res);
static void on_fill_synced(struct group_member *m, int res);

/* A fill in flight keeps the shard from being settled: its session waits
 * for that (a drain, a retired shard let go, the always gate), and hears of
 * it as a write would tell it. */
static void report_if_settled(struct shard *s)
{
    if (!s->error && shard_settled(s))
        shard__report(s, SHARD_REPORT_WRITTEN, 0);
}

void shard__prepare_ahead(struct shard *s, uint64_t wrote)
{
    uint64_t chunk = s->fills == 0 ? FILL_MIN : FILL_MAX;
    uint64_t cap = round_up(s->d->config.max_shard_bytes, FILL_ALIGN) + FILL_ALIGN;
    uint64_t from, to;
    bool direct;

    if (s->sync != SHARD_SYNC_FLUSH || s->fill_off || s->fill_writing || s->fill_syncing ||
        s->write_busy || s->error || s->state != SHARD_OPEN || s->fd < 0)
        return;
    /* Writes larger than a fill (a producer that flushes seldom) would
     * outrun it and overwrite its zeros before they count: twice the
     * write, up to FILL_LARGEST. */
    if (wrote * 2 > chunk)
        chunk = wrote * 2 < FILL_LARGEST ? wrote * 2 : FILL_LARGEST;
    if (s->fill_end >= s->size_written + chunk / 2)
        return; /* enough ahead */
    from = s->fill_end > s->size_written ? s->fill_end : s->size_written;
    to = round_up(from + chunk, FILL_ALIGN);
    if (to > cap)
        to = cap;
    if (to <= from)
        return; /* the shard is full: its seal comes first */

    s->fill_from = from;
    s->fill_end = to;
    s->fill_writing = true;
    s->fill_syncing = true;
    /* Once the file is open with O_DIRECT (shard-direct.c), the zeros go
     * to the disk as they are written, and the fill's fdatasync has only
     * the size and the blocks to make durable, which keeps short the
     * shared sync that every shard waiting joins. */
    direct = s->direct_fd >= 0 && from % SHARD_BLOCK == 0;
    s->fill_write_req = (struct io_req){
        .op = IO_WRITE,
        .fd = direct ? s->direct_fd : s->fd,
        .buf = zeros,
        .len = (uint32_t)(to - from),
        .offset = from,
        .direct = direct,
        .cb = on_fill_written,
        .data = s,
    };
    io_queue(s->d->io, &s->fill_write_req);
}

static void on_fill_written(struct io_req *req, int res)
{
    struct shard *s = req->data;

    s->fill_writing = false;
    if (req->direct && (res == -EINVAL || res == -EOPNOTSUPP)) {
        /* O_DIRECT refused: nothing counts of this fill, which is asked
         * for again through the page cache. */
        s->fill_syncing = false;
        s->fill_end = s->fill_from;
        shard__direct_refused(s, req, res);
        shard__prepare_ahead(s, 0);
    } else if (res >= 0 && (uint32_t)res == req->len) {
        /* The next shared fdatasync is of this file: it writes back the
         * zeros not on the disk yet, makes the new size and blocks
         * durable, and its cache flush serves every shard that joined it. */
        s->fill_sync.own_file = true;
        s->fill_sync.fd = s->fd;
        s->fill_sync.done = on_fill_synced;
        group_sync_join(s->d, &s->fill_sync);
    } else {
        /* The zeros that were written are overwritten by records or cut
         * at the seal. */
        s->fill_syncing = false;
        s->fill_off = true;
        log_warning("active/%s: cannot write %" PRIu32 " bytes of zeros ahead of its records "
                    "at offset %" PRIu64 " (%s); its writes are synced with an fdatasync each",
                    s->tmp_name, req->len, req->offset,
                    res < 0 ? strerror(-res) : "a short write");
    }
    if (s->filling.len > 0 && !s->error)
        shard__mark_dirty(s); /* records held back while the zeros went in */
    report_if_settled(s);
    shard__maybe_start_seal(s);
}

static void on_fill_synced(struct group_member *m, int res)
{
    struct shard *s = (struct shard *)((char *)m - offsetof(struct shard, fill_sync));

    s->fill_syncing = false;
    if (res < 0) {
        shard__sync_failed(s, "fdatasync of the space prepared ahead", res);
    } else if (!s->sync_error && s->fill_end > s->prepared_end) {
        /* Every byte below fill_end was written (to the page cache or the
         * disk) when this sync started (the records before fill_from had
         * completed, the zeros too), so their blocks and the size are
         * durable now. */
        s->prepared_end = s->fill_end;
        s->fills++;
        shard__open_direct(s);
        shard__prepare_ahead(s, 0);
    }
    report_if_settled(s);
    shard__maybe_start_seal(s);
}
