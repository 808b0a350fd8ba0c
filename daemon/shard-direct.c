/* Writes into prepared space with O_DIRECT, under fsync = batch with
 * sync_method one-flush (shard-prepare.c, group-sync.h).
 *
 * A write through the page cache has to be written back before the shared
 * fdatasync may count it: sync_file_range, which blocks, so the ring hands
 * it to a worker thread, and the kernel copies the bytes and runs its
 * write-back for each shard. Once a shard's space ahead is durable, its
 * file is opened a second time with O_DIRECT, and a write whose blocks all
 * lie in that space goes from the batch buffer to the disk itself; when it
 * completes it is on the device, and the next shared fdatasync's cache
 * flush makes it stay, as after a write-back (docs/BENCHMARKS.md measures
 * both: a third of the CPU time).
 *
 * O_DIRECT writes whole blocks: from the start of the block the records
 * begin in to the end of the one they end in. Each batch keeps room for
 * that (shard.h: head), the bytes of the file's last block that are
 * written already are kept here (the tail) and go in front of the records
 * again, and zeros after them, as the prepared space holds. Rewriting
 * those bytes puts nothing at risk: they are the same bytes, and the
 * device writes each of its sectors whole or not at all.
 *
 * Where O_DIRECT is refused (a file system without it, EINVAL), or a write
 * comes back short, the rest goes through the page cache as before. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "memory.h"
#include "shard.h"
#include "shard-internal.h"

static uint64_t block_down(uint64_t v)
{
    return v & ~(uint64_t)(SHARD_BLOCK - 1);
}

static uint64_t block_up(uint64_t v)
{
    return block_down(v + SHARD_BLOCK - 1);
}

void shard__open_direct(struct shard *s)
{
    struct stat a, b;
    int fd;

    if (s->direct_fd >= 0 || s->direct_off || !s->tail || s->fd < 0 || s->state != SHARD_OPEN)
        return;
    fd = openat(s->d->active_fd, s->tmp_name, O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        /* No O_DIRECT here (EINVAL), or no descriptor to spare: the
         * shard's writes go through the page cache. */
        s->direct_off = true;
        return;
    }
    /* The name is the daemon's own in its own directory; still, only the
     * very file the shard writes is written to. */
    if (fstat(fd, &a) < 0 || fstat(s->fd, &b) < 0 || a.st_dev != b.st_dev ||
        a.st_ino != b.st_ino) {
        (void)close(fd);
        s->direct_off = true;
        log_warning("active/%s: another file under its name; its writes go through "
                    "the page cache",
                    s->tmp_name);
        return;
    }
    s->direct_fd = fd;
}

void shard__direct_refused(struct shard *s, const struct io_req *req, int res)
{
    log_warning("active/%s: the file system refused a write of %" PRIu32 " bytes at offset "
                "%" PRIu64 " with O_DIRECT (%s); its writes go through the page cache",
                s->tmp_name, req->len, req->offset, strerror(-res));
    s->direct_off = true;
    shard__close_direct(s);
}

void shard__close_direct(struct shard *s)
{
    if (s->direct_fd >= 0)
        (void)close(s->direct_fd);
    s->direct_fd = -1;
}

bool shard__can_write_direct(const struct shard *s)
{
    const struct shard_batch *b = &s->inflight;
    uint64_t from = s->size_written - b->head;

    return s->direct_fd >= 0 && !s->direct_off && b->len > 0 &&
           s->tail_end == s->size_written && b->head == s->size_written % SHARD_BLOCK &&
           (uintptr_t)b->buf % SHARD_BLOCK == 0 && b->cap >= block_up(b->head + b->len) &&
           block_up(s->size_written + b->len) <= s->prepared_end &&
           block_up(s->size_written + b->len) - from <= UINT32_MAX - SHARD_BLOCK;
}

size_t shard__batch_begin(struct shard *s)
{
    if (s->sync != SHARD_SYNC_FLUSH)
        return 0;
    if (s->filling.len == 0)
        s->filling.head = s->size_queued % SHARD_BLOCK;
    return s->filling.head + SHARD_BLOCK;
}

void shard__stage_direct(struct shard *s, struct io_req *req)
{
    struct shard_batch *b = &s->inflight;
    size_t end = b->head + b->len;
    size_t total = (size_t)block_up(end);

    memcpy(b->buf, s->tail, b->head);
    memset(b->buf + end, 0, total - end);
    req->fd = s->direct_fd;
    req->buf = b->buf;
    req->len = (uint32_t)total;
    req->offset = s->size_written - b->head;
    req->direct = true;
}

int shard__direct_written(struct shard *s, const struct io_req *req, int res)
{
    const struct shard_batch *b = &s->inflight;

    if (res >= 0 && (uint64_t)res >= b->head + b->len) {
        s->direct_writes++;
        return (int)b->len;
    }
    if (res == -EINVAL || res == -EOPNOTSUPP) {
        shard__direct_refused(s, req, res);
        s->inflight_done = 0;
        return 0;
    }
    if (res < 0)
        return res;
    s->inflight_done = (size_t)res > b->head ? (size_t)res - b->head : 0;
    return 0;
}

void shard__alloc_tail(struct shard *s)
{
    s->tail = malloc(SHARD_BLOCK);
    if (s->tail)
        memory_adjust(s->d, SHARD_BLOCK, 0);
}

void shard__free_tail(struct shard *s)
{
    if (!s->tail)
        return;
    free(s->tail);
    s->tail = NULL;
    memory_adjust(s->d, 0, SHARD_BLOCK);
}

void shard__keep_tail(struct shard *s, const struct shard_batch *b)
{
    uint64_t end = s->size_written, start = end - b->len;
    uint64_t block = block_down(end);

    if (!s->tail)
        return;
    if (block >= start) {
        memcpy(s->tail, b->buf + b->head + (block - start), end - block);
        s->tail_end = end;
    } else if (s->tail_end == start) {
        /* Within the block the last write ended in: what it kept, then
         * this write's bytes. */
        memcpy(s->tail + (start - block), b->buf + b->head, b->len);
        s->tail_end = end;
    }
    /* Else the block's earlier bytes are unknown: no O_DIRECT until a
     * write crosses into a block of its own. */
}
