/* The records a handle keeps until the daemon has acknowledged them.
 *
 * A record is copied once, by logshard_append(), into the frame being
 * built. Sealing that frame writes its prefix in front of the records and
 * moves the very same buffer to the tail of the queue, where it stays after
 * it is sent, until an ACK covers its last record; then the buffer goes to
 * a pool and becomes a building frame again. So records are never copied a
 * second time, not even to be sent again after a reconnect, and in the
 * steady state nothing is allocated.
 *
 * The memory is bounded by counting buffers: at most max_frames exist
 * (queued, building or pooled), each of cap bytes. When they are all in
 * use, logshard_append() waits for an ACK (or returns -EAGAIN), which is the
 * library's backpressure, connected or not.
 *
 * When a resumed connection's WELCOME says where the stream continues,
 * frames wholly below it are dropped (the daemon has them) and a frame
 * partly below it loses its first records by moving rec_start forward: the
 * new prefix is written over records nobody needs any more. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "logshard-internal.h"

static size_t prefix_size(const logshard *ls)
{
    return ls->version == WIRE_PROTOCOL_V1 ? FRAME_PREFIX_V1 : FRAME_PREFIX_V2;
}

/* The frame limit is the daemon's max_frame_bytes (which counts neither the
 * header nor, in version 2, the position) and the buffer, whichever is
 * smaller; a record must fit an empty frame. */
void logshard__retain_limits(logshard *ls)
{
    struct retain *r = &ls->r;
    size_t limit = FRAME_UNCOUNTED + (size_t)ls->max_frame_bytes;

    r->limit = limit < r->cap ? limit : r->cap;
    if (ls->max_record_bytes > r->limit - FRAME_RECORDS - WIRE_RECORD_PREFIX)
        ls->max_record_bytes = (uint32_t)(r->limit - FRAME_RECORDS - WIRE_RECORD_PREFIX);
}

size_t logshard__retain_frame_target(size_t requested)
{
    return requested > RETAIN_MIN_BYTES / RETAIN_BUFFERS ? requested
                                                         : RETAIN_MIN_BYTES / RETAIN_BUFFERS;
}

/* How many buffers a handle may fill before it waits for an ACK.
 *
 * Under fsync none and interval the daemon acknowledges a frame once it is
 * written, not synced: an ACK is back within a write into the page cache,
 * and two buffers keep the connection busy, one filling while the other
 * is sent and written. More only queue in the socket, and cost memory
 * touched for the first time (fresh pages: 11 us for each 4 KiB on the
 * development machine's virtual machine). With 64 producers each sending
 * 4 MiB without sync, two buffers rather than four gave 6.4 million
 * records/s instead of 5.0 (docs/BENCHMARKS.md). Under batch and always an
 * ACK waits for a flush of the disk, and a producer that is not flushing
 * goes on appending meanwhile: with two buffers, eight such producers sent
 * half as much. The policy is the one the first WELCOME announced. */
static size_t retain_frames(const logshard *ls, size_t cap)
{
    bool unsynced = ls->fsync_policy == LOGSHARD_FSYNC_NONE ||
                    ls->fsync_policy == LOGSHARD_FSYNC_INTERVAL;
    size_t min_bytes = unsynced ? RETAIN_MIN_BYTES_UNSYNCED : RETAIN_MIN_BYTES;
    size_t min_frames = unsynced ? RETAIN_BUFFERS_UNSYNCED : RETAIN_BUFFERS;
    size_t n = (min_bytes + cap - 1) / cap;

    return n < min_frames ? min_frames : n;
}

/* The buffers: what the caller asked for, but room for one largest record,
 * and never more than one frame the daemon accepts. */
void logshard__retain_setup(logshard *ls, size_t requested)
{
    struct retain *r = &ls->r;
    size_t cap = requested;
    size_t min = FRAME_RECORDS + WIRE_RECORD_PREFIX + (size_t)ls->max_record_bytes;
    size_t max = FRAME_UNCOUNTED + (size_t)ls->max_frame_bytes;

    /* A frame is sealed at the size asked for even where the buffer is
     * larger to hold one largest record: the daemon holds a frame it has
     * begun to receive until its end, and frames larger than the socket's
     * buffer would have it hold one for every producer. Not below a
     * quarter of RETAIN_MIN_BYTES, so that the frames kept still hold that
     * much and a stalled daemon fills the socket before the buffers. */
    r->target = logshard__retain_frame_target(requested);
    if (r->target > max)
        r->target = max;
    if (cap < min)
        cap = min;
    if (cap > max)
        cap = max;
    r->cap = cap;
    r->max_frames = retain_frames(ls, cap);
    logshard__retain_limits(ls);
}

bool logshard__retain_fits(const logshard *ls, size_t len)
{
    const struct frame *f = ls->r.building;
    size_t need = WIRE_RECORD_PREFIX + len;

    if (!f || f->count == UINT32_MAX)
        return false;
    return ls->r.cap - f->used >= need &&
           ls->r.limit - FRAME_RECORDS - (f->used - f->rec_start) >= need &&
           (f->count == 0 || f->used - f->rec_start + FRAME_RECORDS + need <= ls->r.target);
}

bool logshard__retain_can_open(const logshard *ls)
{
    return ls->r.building || ls->r.pool || ls->r.nframes < ls->r.max_frames;
}

/* Makes sure there is a building frame. Only -ENOMEM can fail it; the caller
 * checked logshard__retain_can_open() first. */
int logshard__retain_open(logshard *ls)
{
    struct retain *r = &ls->r;
    struct frame *f;

    if (r->building)
        return 0;
    if (r->pool) {
        f = r->pool;
        r->pool = f->next;
    } else {
        f = calloc(1, sizeof(*f));
        if (!f)
            return -ENOMEM;
        f->buf = malloc(r->cap);
        if (!f->buf) {
            free(f);
            return -ENOMEM;
        }
        f->backed = 0;
        r->nframes++;
    }
    f->next = NULL;
    f->rec_start = f->used = FRAME_RECORDS;
    f->count = 0;
    f->first = ls->appended;
    r->building = f;
    return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Bytes of a new buffer given pages at once, ahead of the records. */
#define FRAME_PREFAULT_BYTES ((size_t)32 * 1024)

/* A new buffer has no pages yet, and the first write to each of them traps
 * into the kernel; in a virtual machine such a trap can cost more than
 * zeroing the page. So the pages ahead of the records are asked for a
 * chunk at a time, one system call for many pages, and only once per
 * buffer: a buffer from the pool has them already. A chunk rather than the
 * whole buffer, so that a program that logs a line or two does not pay for
 * a frame's worth of pages. Where the kernel cannot (before 5.14), the
 * pages come one trap at a time, as without this. */
static void frame_prefault(const struct retain *r, struct frame *f, size_t end)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t from = ((uintptr_t)f->buf + f->backed) & ~(uintptr_t)(page - 1);
    size_t want = end - f->backed > FRAME_PREFAULT_BYTES ? end - f->backed : FRAME_PREFAULT_BYTES;
    size_t upto = f->backed + want < r->cap ? f->backed + want : r->cap;
    uintptr_t to = ((uintptr_t)f->buf + upto) & ~(uintptr_t)(page - 1);

    if (to > from && madvise((void *)from, to - from, MADV_POPULATE_WRITE) != 0)
        upto = r->cap;
    f->backed = upto;
}

/* Copies one record into the building frame, which has room for it. */
void logshard__retain_put(logshard *ls, const void *rec, size_t len)
{
    struct frame *f = ls->r.building;

    if (f->used + WIRE_RECORD_PREFIX + len > f->backed)
        frame_prefault(&ls->r, f, f->used + WIRE_RECORD_PREFIX + len);
    if (f->count == 0)
        f->first = ls->appended;
    wire_put_u32(f->buf + f->used, (uint32_t)len);
    memcpy(f->buf + f->used + WIRE_RECORD_PREFIX, rec, len);
    f->used += WIRE_RECORD_PREFIX + len;
    f->count++;
}

/* The prefix in front of rec_start, in the version spoken. */
static void frame_encode_prefix(const logshard *ls, struct frame *f)
{
    size_t start = f->rec_start - prefix_size(ls);
    unsigned char *p = f->buf + start;

    wire_encode_header(p, WIRE_APPEND, (uint32_t)(f->used - start - WIRE_HEADER_SIZE));
    p += WIRE_HEADER_SIZE;
    if (ls->version != WIRE_PROTOCOL_V1) {
        wire_put_u64(p, f->first);
        p += WIRE_APPEND_POSITION;
    }
    wire_put_u32(p, f->count);
}

/* Moves the building frame, when it holds records, to the queue. */
void logshard__retain_seal(logshard *ls)
{
    struct retain *r = &ls->r;
    struct frame *f = r->building;

    if (!f || f->count == 0)
        return;
    frame_encode_prefix(ls, f);
    f->next = NULL;
    if (r->tail)
        r->tail->next = f;
    else
        r->head = f;
    r->tail = f;
    if (!r->send) {
        r->send = f;
        r->send_off = 0;
    }
    r->building = NULL;
}

void logshard__retain_frame_bytes(const logshard *ls, const struct frame *f,
                                  const unsigned char **ret_bytes, size_t *ret_len)
{
    size_t start = f->rec_start - prefix_size(ls);

    *ret_bytes = f->buf + start;
    *ret_len = f->used - start;
}

static void pool_put(struct retain *r, struct frame *f)
{
    f->next = r->pool;
    r->pool = f;
}

/* Frames whose every record is below acked go back to the pool. The caller
 * checked that acked is not above what was sent whole, so the frame being
 * sent is never among them. */
void logshard__retain_ack(logshard *ls, uint64_t acked)
{
    struct retain *r = &ls->r;

    while (r->head && r->head->first + r->head->count <= acked && r->head != r->send) {
        struct frame *f = r->head;

        r->head = f->next;
        if (!r->head)
            r->tail = NULL;
        pool_put(r, f);
    }
}

/* Cuts the records below pos off the front of f, which holds pos. */
static void frame_trim(struct frame *f, uint64_t pos)
{
    uint64_t skip = pos - f->first;

    for (uint64_t i = 0; i < skip; i++)
        f->rec_start += WIRE_RECORD_PREFIX + wire_get_u32(f->buf + f->rec_start);
    f->count -= (uint32_t)skip;
    f->first = pos;
}

/* A resumed connection continues the stream at next (the caller checked it
 * lies between what was acknowledged and what was appended): everything
 * below it is dropped, and sending starts again with the oldest frame
 * left. Returns 0, or -EMSGSIZE when a daemon that came back with a smaller
 * frame limit cannot take a frame we hold (we do not split frames). */
int logshard__retain_resume(logshard *ls, uint64_t next)
{
    struct retain *r = &ls->r;
    struct frame *f;

    r->send = NULL;
    r->send_off = 0;
    while (r->head && r->head->first + r->head->count <= next) {
        f = r->head;
        r->head = f->next;
        if (!r->head)
            r->tail = NULL;
        pool_put(r, f);
    }
    if (r->head && r->head->first < next) {
        frame_trim(r->head, next);
        frame_encode_prefix(ls, r->head);
    }
    /* Only a daemon that claims records never sent whole gets here. */
    f = r->building;
    if (!r->head && f && f->count > 0 && f->first < next) {
        if (f->first + f->count <= next) {
            f->rec_start = f->used = FRAME_RECORDS;
            f->count = 0;
        } else {
            frame_trim(f, next);
        }
    }
    for (f = r->head; f; f = f->next)
        if (f->used - f->rec_start + FRAME_RECORDS > r->limit)
            return -EMSGSIZE;
    r->send = r->head;
    return 0;
}

static void frames_free(struct frame *f)
{
    while (f) {
        struct frame *next = f->next;

        free(f->buf);
        free(f);
        f = next;
    }
}

void logshard__retain_free(logshard *ls)
{
    struct retain *r = &ls->r;

    frames_free(r->head);
    frames_free(r->pool);
    frames_free(r->building);
    memset(r, 0, sizeof(*r));
}
