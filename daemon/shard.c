/* Shard writer: owns a shard's file descriptor, its two batch buffers and
 * the write in flight. See shard.h for the batching scheme. Creating the
 * file lives in shard-create.c, sealing in seal.c; this file decides when
 * sealing may start (nothing left to write) and frees the shard once it is
 * over. Everything a shard has to tell the rest of the daemon goes through
 * shard__report() (shard-events.h): it never calls into the session, the
 * admin socket or the lifecycle. */
#include "shard.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "group-sync.h"
#include "log.h"
#include "notify.h"
#include "seal.h"
#include "seal-index.h"
#include "shard-internal.h"
#include "shard_format.h"
#include "streams.h"
#include "spool_names.h"
#include "stats.h"

void shard_subscribe(struct daemon *d, struct shard_subscriber *sub,
                     const struct shard_events *events, void *data)
{
    sub->events = events;
    sub->data = data;
    list_add_tail(&d->shard_subscribers, &sub->node);
}

void shard_unsubscribe(struct shard_subscriber *sub)
{
    if (list_linked(&sub->node))
        list_del(&sub->node);
}

static void deliver(const struct shard_events *ev, void *data, struct shard *s,
                    enum shard_report what, int err)
{
    switch (what) {
    case SHARD_REPORT_WRITTEN:
        if (ev->written)
            ev->written(data, s);
        break;
    case SHARD_REPORT_FAILED:
        if (ev->failed)
            ev->failed(data, s, err);
        break;
    case SHARD_REPORT_RELEASED:
        if (ev->released)
            ev->released(data, s);
        break;
    case SHARD_REPORT_SEALED:
        if (ev->sealed)
            ev->sealed(data, s, err);
        break;
    }
}

/* The one way up: every subscriber of the daemon, then the owner. */
void shard__report(struct shard *s, enum shard_report what, int err)
{
    struct list_node *n, *tmp;

    list_for_each_safe(n, tmp, &s->d->shard_subscribers) {
        struct shard_subscriber *sub = list_entry(n, struct shard_subscriber, node);
        deliver(sub->events, sub->data, s, what, err);
    }
    if (s->owner)
        deliver(s->events, s->owner, s, what, err);
}

void shard__mark_dirty(struct shard *s)
{
    if (!list_linked(&s->dirty_node)) {
        list_add_tail(&s->d->dirty_shards, &s->dirty_node);
        io_want_submit(s->d->io);
    }
}

/* Picks an id above every id used so far by this daemon and, being based on
 * the clock, above those of earlier runs: ids sort by creation time. */
uint64_t shard__next_id(struct daemon *d)
{
    uint64_t id = now_realtime_ns();

    if (id <= d->last_shard_id)
        id = d->last_shard_id + 1;
    d->last_shard_id = id;
    return id;
}

static void shard_free(struct shard *s)
{
    if (!s)
        return;
    /* Links are cut when the earlier shard starts sealing, which comes
     * before either of the two is freed. */
    assert(!s->stream_prev && !s->stream_next);
    if (s->fd >= 0)
        (void)close(s->fd); /* data was synced, or the shard failed already */
    shard__close_direct(s);
    shard__free_tail(s);
    seal_free(&s->seal);
    free(s->tmp_name);
    free(s->done_name);
    shard__batch_release(s->d, &s->filling);
    shard__batch_release(s->d, &s->inflight);
    if (s->counted_open)
        s->d->open_shards--;
    budget_producer_put(s->d, s->budget);
    free(s);
}

int shard_open(struct daemon *d, const struct shard_ident *ident, void *owner,
               const struct shard_events *events, struct shard **ret)
{
    struct shard *s = calloc(1, sizeof(*s));
    int r;

    if (!s)
        return -ENOMEM;
    if (d->open_shards >= d->config.max_open_shards) {
        free(s);
        return -EMFILE;
    }
    s->d = d;
    s->fd = -1;
    s->direct_fd = -1;
    s->state = SHARD_OPEN;
    seal_init(&s->seal);
    s->counted_open = true;
    d->open_shards++;
    s->owner = owner;
    s->events = events;
    list_init(&s->node);
    list_init(&s->dirty_node);
    list_init(&s->create_node);

    memcpy(s->producer, ident->producer, ident->producer_len);
    s->producer[ident->producer_len] = '\0';
    s->uid = ident->uid;
    s->gid = ident->gid;
    s->pid = ident->pid;
    s->source = ident->source;
    s->created_ns = now_realtime_ns();
    if (ident->stream_id) {
        memcpy(s->stream_id, ident->stream_id, SHARD_STREAM_ID_SIZE);
        s->first_position = ident->first_position;
        s->has_stream = true;
    }
    r = shard__name(s);
    if (r == 0)
        r = shard__encode_header(s);
    if (r < 0) {
        shard_free(s);
        return r;
    }
    /* A shard that is retired but still writing (or syncing) may yet fail
     * and lose its tail; until it has settled, this one's records would
     * follow a gap should it fail, so they wait. */
    if (ident->after && ident->after->state != SHARD_SEALING) {
        assert(!ident->after->stream_next);
        ident->after->stream_next = s;
        s->stream_prev = ident->after;
        s->held = true;
    }
    s->size_queued = s->filling.len;
    s->budget = budget_producer_get(d, s->producer);
    s->budget_taken = s->filling.len;
    budget_taken(d, s->budget, s->filling.len);
    s->created_mono_ns = now_monotonic_ns();
    s->sync = ident->sync;
    if (s->sync == SHARD_SYNC_FLUSH)
        shard__alloc_tail(s);
    list_add_tail(&d->shards, &s->node);
    d->stats.shards_opened++;
    if (s->has_stream)
        streams_shard_opened(d, s->stream_id);
    shard__queue_create(s);
    *ret = s;
    return 0;
}

/* The one way a record enters the filling batch. Credentials make it
 * SHARD_RECORD_CREDS bytes longer than a client's: every count of bytes
 * here (the reservation, size_queued, and through it the trailer's
 * shard_len) comes from shard_record_size(), never from 16 + len. */
static int append_record(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns,
                         const struct shard_creds *creds)
{
    size_t size = shard_record_size(len, creds != NULL);
    unsigned char *at;
    int r;

    assert(s->state == SHARD_OPEN);
    if (s->error)
        return s->error;
    r = shard__batch_reserve(s->d, &s->filling, size + shard__batch_begin(s));
    if (r < 0)
        return r;
    at = s->filling.buf + s->filling.head + s->filling.len;
    if (creds)
        (void)shard_encode_record_creds_unsummed(at, rec, len, timestamp_ns, creds);
    else
        (void)shard_encode_record_unsummed(at, rec, len, timestamp_ns);
    shard__batch_unsummed(&s->filling, s->filling.len);
    s->filling.len += size;
    s->filling.records++;
    if (s->records_queued == 0)
        s->first_record_ns = timestamp_ns;
    /* A shard made when its connection was welcomed may have waited long
     * for this record; its age starts now, or it would be sealed with it. */
    if (s->records_appended == 0)
        s->created_mono_ns = now_monotonic_ns();
    s->last_record_ns = timestamp_ns;
    if (timestamp_ns > s->newest_record_ns)
        s->newest_record_ns = timestamp_ns;
    s->records_queued++;
    s->records_appended++;
    s->size_queued += size;
    s->budget_taken += size;
    budget_taken(s->d, s->budget, size);
    shard__mark_dirty(s);
    return 0;
}

int shard_reserve(struct shard *s, size_t bytes)
{
    uint64_t room = s->d->config.max_shard_bytes > s->size_queued
                        ? s->d->config.max_shard_bytes - s->size_queued
                        : 0;

    if (s->state != SHARD_OPEN || s->error)
        return 0;
    return shard__batch_reserve(s->d, &s->filling,
                                (bytes < room ? bytes : (size_t)room) + shard__batch_begin(s));
}

int shard_append(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns)
{
    /* A client's shard is version 3, where a credential block is invalid. */
    assert(s->source == SHARD_SOURCE_CLIENT);
    return append_record(s, rec, len, timestamp_ns, NULL);
}

int shard_append_creds(struct shard *s, const void *rec, uint32_t len, uint64_t timestamp_ns,
                       const struct shard_creds *creds)
{
    /* Only a version 4 header allows the credentials flag in a record. */
    assert(s->source != SHARD_SOURCE_CLIENT && creds);
    return append_record(s, rec, len, timestamp_ns, creds);
}

enum shard_sync shard_sync_for_policy(const struct daemon *d, unsigned fsync_policy)
{
    switch ((enum fsync_policy)fsync_policy) {
    case FSYNC_NONE: return SHARD_SYNC_AT_SEAL;
    case FSYNC_INTERVAL: return SHARD_SYNC_INTERVAL;
    case FSYNC_BATCH:
        switch (d->batch_sync) {
        case SYNC_METHOD_SYNCFS: return SHARD_SYNC_SHARED;
        case SYNC_METHOD_ONE_FLUSH: return SHARD_SYNC_FLUSH;
        default: return SHARD_SYNC_EACH_WRITE;
        }
    case FSYNC_ALWAYS: return SHARD_SYNC_EACH_WRITE;
    }
    assert(!"an fsync policy config.c does not know");
    return SHARD_SYNC_EACH_WRITE;
}

const char *shard_sync_name(const struct shard *s)
{
    if (s->sync_failed_what)
        return s->sync_failed_what;
    switch (s->sync) {
    case SHARD_SYNC_SHARED: return "syncfs";
    case SHARD_SYNC_FLUSH: return "shared fdatasync";
    default: return "fdatasync";
    }
}

bool shard_syncs_each_write(const struct shard *s)
{
    return s->sync == SHARD_SYNC_EACH_WRITE || s->sync == SHARD_SYNC_SHARED ||
           s->sync == SHARD_SYNC_FLUSH;
}

uint64_t shard_records_acked(const struct shard *s)
{
    return shard_syncs_each_write(s) ? s->records_synced : s->records_written;
}

uint64_t shard_records_kept(const struct shard *s)
{
    return s->sync_error ? s->records_synced : s->records_written;
}

uint64_t shard_bytes_kept(const struct shard *s)
{
    return s->sync_error ? s->size_synced : s->size_written;
}

enum seal_outcome shard_seal_outcome(const struct shard *s)
{
    return seal_outcome(&s->seal);
}

uint64_t shard_unwritten_bytes(const struct shard *s)
{
    return s->size_queued - s->size_written;
}

uint64_t shard_buffer_bytes(const struct shard *s)
{
    return (uint64_t)s->filling.cap + s->inflight.cap;
}

bool shard_settled(const struct shard *s)
{
    return !s->creating && !s->write_busy && !s->sync_busy && !s->sync_wanted &&
           !s->fill_writing && !s->fill_syncing && s->filling.len == 0;
}

const char *shard_display_name(const struct shard *s)
{
    return s->tmp_name;
}

/* The next shard of s's stream was held and s failed: the next one keeps
 * nothing (it has written nothing yet), so that no record of the stream
 * reaches the disk after the ones s lost. Its owner hears it as a failure;
 * none of its records was acknowledged, as none of s's lost ones was. */
static void cut_for_stream(struct shard *s, const struct shard *prev, int err)
{
    struct daemon *d = s->d;

    assert(s->size_written == 0 && !s->write_busy);
    s->stream_cut = true;
    if (!s->error) {
        log_warning("active/%s of producer %s keeps none of its %" PRIu64 " records: "
                    "active/%s before it in the same stream failed (%s), and they would "
                    "follow a gap",
                    s->tmp_name, s->producer, s->records_queued, prev->tmp_name,
                    strerror(-err));
        s->error = err;
        s->records_queued = 0;
        s->size_queued = 0;
        shard__batch_release(d, &s->inflight);
        shard__batch_release(d, &s->filling);
        shard__report(s, SHARD_REPORT_FAILED, err);
    }
    shard__maybe_start_seal(s);
}

/* s settled and starts sealing: whatever it lost is known now. The next
 * shard of its stream writes from here on, or, if s failed, is cut. */
static void release_stream_next(struct shard *s)
{
    struct shard *next = s->stream_next;
    int err = s->error ? s->error : s->sync_error;

    if (!next)
        return;
    s->stream_next = NULL;
    next->stream_prev = NULL;
    next->held = false;
    if (err)
        cut_for_stream(next, s, err);
    else if (next->filling.len > 0 && !next->error)
        shard__mark_dirty(next);
}

void shard__maybe_start_seal(struct shard *s)
{
    if (s->state != SHARD_RETIRED || !shard_settled(s))
        return;
    s->state = SHARD_SEALING;
    if (list_linked(&s->dirty_node))
        list_del(&s->dirty_node);
    shard__close_direct(s); /* nothing is written with it any more */
    /* The seal never ends within seal_start() (seal.h), so s is still
     * there for its next shard to be released after it. */
    seal_start(s);
    release_stream_next(s);
}

static void on_write(struct io_req *req, int res);
static void on_sync(struct io_req *req, int res);
static void on_written_back(struct io_req *req, int res);
static void on_group_sync(struct group_member *m, int res);

static void enter_group(struct shard *s)
{
    s->group.done = on_group_sync;
    s->group.fd = s->fd;
    group_sync_join(s->d, &s->group);
}

/* Everything written so far waits for the next shared sync (group-sync.h). */
static void join_group_sync(struct shard *s)
{
    s->sync_busy = true;
    s->sync_size = s->size_written;
    s->sync_records = s->records_written;
    s->sync_queued_ns = now_monotonic_ns();
    enter_group(s);
}

/* Queues a sync that will prove everything written so far (and, when
 * linked behind a write, that write too): an fdatasync, or under one-flush,
 * when all of it lies in prepared space, the write-back of the bytes not
 * yet proven, after which the shard joins the shared fdatasync. */
static void queue_sync(struct shard *s, uint64_t size, uint64_t records)
{
    struct io_req *req = &s->sync_req;

    memset(req, 0, sizeof(*req));
    if (s->sync == SHARD_SYNC_FLUSH && size <= s->prepared_end &&
        size - (s->size_synced & ~(uint64_t)(SHARD_BLOCK - 1)) <= UINT32_MAX) {
        uint64_t from = s->size_synced & ~(uint64_t)(SHARD_BLOCK - 1);

        req->op = IO_SYNC_RANGE;
        req->offset = from;
        req->len = (uint32_t)(size - from); /* at most a batch and a page */
        req->cb = on_written_back;
    } else {
        req->op = IO_FDATASYNC;
        req->cb = on_sync;
    }
    req->fd = s->fd;
    req->data = s;
    s->sync_busy = true;
    s->sync_wanted = false;
    s->sync_size = size;
    s->sync_records = records;
    s->sync_queued_ns = now_monotonic_ns();
    io_queue(s->d->io, req);
}

static void queue_write(struct shard *s, bool then_sync)
{
    struct io_req *req = &s->write_req;

    memset(req, 0, sizeof(*req));
    req->op = IO_WRITE;
    req->cb = on_write;
    req->data = s;
    if (s->write_direct) {
        shard__stage_direct(s, req);
        io_queue(s->d->io, req);
        return; /* it joins the shared fdatasync once written */
    }
    req->fd = s->fd;
    req->buf = s->inflight.buf + s->inflight.head + s->inflight_done;
    req->len = (uint32_t)(s->inflight.len - s->inflight_done);
    req->offset = s->size_written + s->inflight_done;
    req->link = then_sync;
    io_queue(s->d->io, req);
    if (then_sync)
        queue_sync(s, s->size_written + s->inflight.len,
                   s->records_written + s->inflight.records);
}

static void start_write(struct shard *s)
{
    struct shard_batch tmp = s->inflight;

    assert(s->state != SHARD_SEALING && !s->write_busy);
    shard__batch_sum(&s->filling);
    s->inflight = s->filling;
    s->filling = tmp;
    s->filling.len = 0;
    s->filling.records = 0;
    s->filling.n_unsummed = 0;
    s->inflight_done = 0;
    s->write_busy = true;
    s->d->shard_writes_busy++;
    s->write_direct = s->sync == SHARD_SYNC_FLUSH && shard__can_write_direct(s);
    /* A header alone (the file is made when its connection is welcomed)
     * proves nothing to anyone: the sync of the first records covers it. */
    queue_write(s, (s->sync == SHARD_SYNC_EACH_WRITE && s->inflight.records > 0) ||
                       s->sync == SHARD_SYNC_FLUSH);
}

static void fail_shard(struct shard *s, int err)
{
    struct daemon *d = s->d;

    s->error = err;
    d->stats.io_errors++;
    log_error("write to active/%s failed: %s; %" PRIu64 " records in it are safe, the "
              "batch of %" PRIu64 " records is refused",
              s->tmp_name, strerror(-err), s->records_written, s->inflight.records);
    notify_set_error(d, "write to active/%s failed: %s", s->tmp_name, strerror(-err));
    /* What was not written is dropped here and reported to the producer;
     * only records_written were ever acknowledged. */
    s->records_queued = s->records_written;
    s->size_queued = s->size_written;
    shard__batch_release(d, &s->inflight);
    shard__batch_release(d, &s->filling);
    shard__report(s, SHARD_REPORT_FAILED, err);
}

static void on_write(struct io_req *req, int res)
{
    struct shard *s = req->data;
    uint64_t wrote, wrote_records;

    assert(s->write_busy && s->state != SHARD_SEALING);
    if (s->write_direct) {
        s->write_direct = false;
        res = shard__direct_written(s, req, res);
        if (res == 0) {
            /* Short, or refused: the rest through the page cache. */
            s->sync_wanted = true;
            queue_write(s, false);
            return;
        }
    }
    if (res < 0) {
        s->write_busy = false;
        s->d->shard_writes_busy--;
        s->sync_wanted = false; /* the linked sync, if any, was cancelled */
        fail_shard(s, res);
        shard__maybe_start_seal(s);
        return;
    }
    if (res == 0) { /* no progress and no error: treat as a full disk */
        s->write_busy = false;
        s->d->shard_writes_busy--;
        s->sync_wanted = false;
        fail_shard(s, -ENOSPC);
        shard__maybe_start_seal(s);
        return;
    }
    s->inflight_done += (size_t)res;
    if (s->inflight_done < s->inflight.len) {
        /* A short write: the rest goes next, alone; a sync linked to this
         * write comes back cancelled and is issued again after it. */
        queue_write(s, false);
        return;
    }
    s->write_busy = false;
    s->d->shard_writes_busy--;
    wrote = s->inflight.len;
    wrote_records = s->inflight.records;
    s->size_written += s->inflight.len;
    s->records_written += s->inflight.records;
    if (s->sync == SHARD_SYNC_FLUSH)
        shard__keep_tail(s, &s->inflight); /* before the buffer goes back */
    if (s->filling.len > 0) {
        /* Busy: keep the buffer for the next swap. */
        s->inflight.len = 0;
        s->inflight.records = 0;
    } else {
        /* Nothing waits: give back both buffers. The empty filling one is
         * the buffer of the write before this one; kept, it would hold the
         * size of an old burst for as long as the producer stays idle. */
        shard__batch_release(s->d, &s->inflight);
        shard__batch_release(s->d, &s->filling);
        shard__report(s, SHARD_REPORT_RELEASED, 0);
    }
    if (s->sync_wanted && !s->sync_busy)
        queue_sync(s, s->size_written, s->records_written);
    if ((s->sync == SHARD_SYNC_SHARED && wrote_records > 0) ||
        (s->sync == SHARD_SYNC_FLUSH && req->direct))
        join_group_sync(s);
    if (s->sync == SHARD_SYNC_FLUSH)
        shard__prepare_ahead(s, wrote);
    if (s->sync == SHARD_SYNC_INTERVAL && s->dirty_since_ns == 0 && s->size_written > s->size_synced)
        s->dirty_since_ns = now_monotonic_ns();
    if (s->filling.len > 0 && !s->sync_busy)
        shard__mark_dirty(s);
    shard__report(s, SHARD_REPORT_WRITTEN, 0);
    shard__maybe_start_seal(s);
}

void shard__sync_failed(struct shard *s, const char *what, int res)
{
    struct daemon *d = s->d;

    /* Never retried: after a failed fdatasync the kernel may have dropped
     * the dirty pages, and a later success would prove nothing. Only what
     * earlier syncs proved is kept. */
    s->sync_error = res;
    s->sync_failed_what = s->sync_failed_what ? s->sync_failed_what : what; /* the first */
    d->stats.io_errors++;
    log_error("%s of active/%s failed: %s; the %" PRIu64 " records synced before "
              "stay, nothing after them is trusted",
              what, s->tmp_name, strerror(-res), s->records_synced);
    notify_set_error(d, "%s of active/%s failed: %s", what, s->tmp_name, strerror(-res));
    if (!s->error) {
        s->error = res;
        s->records_queued = shard_records_acked(s);
        s->size_queued = s->size_written;
        shard__batch_release(d, &s->filling);
        shard__report(s, SHARD_REPORT_FAILED, res);
    }
}

/* A sync's end: the shard's own fdatasync, a shared sync, or a write-back
 * that failed before it could join one (what names it for messages). */
static void sync_done(struct shard *s, int res, const char *what);

static void on_sync(struct io_req *req, int res)
{
    sync_done(req->data, res, "fdatasync");
}

/* One-flush: the pages are on the disk; the shared fdatasync keeps them. */
static void on_written_back(struct io_req *req, int res)
{
    struct shard *s = req->data;

    if (res < 0) {
        sync_done(s, res, "write-back (sync_file_range)"); /* or cancelled */
        return;
    }
    enter_group(s); /* what it proves, queue_sync set */
}

static void on_group_sync(struct group_member *m, int res)
{
    struct shard *s = (struct shard *)((char *)m - offsetof(struct shard, group));

    sync_done(s, res, shard_sync_name(s));
}

static void sync_done(struct shard *s, int res, const char *what)
{
    assert(s->sync_busy && s->state != SHARD_SEALING);
    s->sync_busy = false;
    if (res == -ECANCELED && !s->error) {
        /* The write it was linked to came back short (or is being retried);
         * sync once that write is complete. */
        if (s->write_busy)
            s->sync_wanted = true;
        else
            queue_sync(s, s->size_written, s->records_written);
        return;
    }
    if (res < 0 && res != -ECANCELED) {
        shard__sync_failed(s, what, res);
        shard__maybe_start_seal(s);
        return;
    }
    if (res >= 0)
        stats_observe_fsync(&s->d->stats, now_monotonic_ns() - s->sync_queued_ns);
    /* After a failed sync of the file (a fill's, under one-flush), a later
     * success proves nothing about the pages that one may have dropped. */
    if (res >= 0 && !s->sync_error && s->sync_size > s->size_synced) {
        s->size_synced = s->sync_size;
        s->records_synced = s->sync_records;
        /* Under one-flush an fdatasync of the shard's own proved the size
         * and blocks up to here, so overwriting them changes no metadata. */
        if (s->sync == SHARD_SYNC_FLUSH && s->sync_req.op == IO_FDATASYNC &&
            s->size_synced > s->prepared_end)
            s->prepared_end = s->size_synced;
    }
    if (s->filling.len > 0 && !s->error)
        shard__mark_dirty(s);
    shard__report(s, SHARD_REPORT_WRITTEN, 0);
    shard__maybe_start_seal(s);
}

void shard_sync_due(struct daemon *d)
{
    uint64_t now = now_monotonic_ns();
    uint64_t wait_ns = d->config.fsync_interval_ms * 1000000ull / 2;
    struct list_node *n;

    for (n = d->shards.next; n != &d->shards; n = n->next) {
        struct shard *s = list_entry(n, struct shard, node);

        if (s->sync != SHARD_SYNC_INTERVAL || s->sync_busy || s->state == SHARD_SEALING ||
            s->error || s->dirty_since_ns == 0 || now - s->dirty_since_ns < wait_ns)
            continue;
        /* Writes completing from here on are not covered: they start a new
         * wait of their own. */
        s->dirty_since_ns = 0;
        queue_sync(s, s->size_written, s->records_written);
    }
}

void shard_write_dirty(void *data)
{
    struct daemon *d = data;
    struct list_node *n, *tmp;

    /* The next chain of creates, once the one before it has ended. */
    if (d->shard_creates_inflight == 0)
        shard__submit_creates(d);

    list_for_each_safe(n, tmp, &d->dirty_shards) {
        struct shard *s = list_entry(n, struct shard, dirty_node);

        if (s->write_busy || s->sync_busy || s->sync_wanted || s->fill_writing)
            continue; /* its completion marks it dirty again */
        list_del(&s->dirty_node);
        /* A held one is marked dirty again when released, one being
         * created once its file is there. */
        if (s->filling.len > 0 && !s->error && !s->held && !s->creating)
            start_write(s);
    }
}

void shard_detach(struct shard *s)
{
    s->owner = NULL;
    s->events = NULL;
}

void shard_seal(struct shard *s)
{
    assert(s->state == SHARD_OPEN);
    s->state = SHARD_RETIRED;
    shard__maybe_start_seal(s);
}

void shard_sealed(struct shard *s, int err)
{
    struct daemon *d = s->d;
    enum seal_outcome where = seal_outcome(&s->seal);

    assert(s->state == SHARD_SEALING);
    switch (where) {
    case SEAL_REMOVED:
        /* The error that cut the shard short was reported to its producer
         * and logged when it happened; this says where the file went. A
         * file never created has nowhere to go. */
        if (s->fd < 0)
            break;
        if (s->records_appended == 0) {
            /* A connection that sent nothing: no news for the operator. */
            log_debug("removed active/%s of producer %s: no record reached it", s->tmp_name,
                      s->producer);
            break;
        }
        log_warning("removed active/%s of producer %s instead of sealing it: %s (%s), so it "
                    "holds no record; nothing of it goes to done/",
                    s->tmp_name, s->producer, seal_discard_why(&s->seal),
                    strerror(-(s->error ? s->error : s->sync_error)));
        break;
    case SEAL_IN_QUARANTINE:
        log_error("active/%s is now quarantine/%s: %" PRIu64 " records in it were never "
                  "proven durable",
                  s->tmp_name, s->tmp_name, s->records_written - s->records_synced);
        break;
    case SEAL_IN_DONE:
        d->stats.shards_sealed++;
        /* The trailer's newest time, as the seal wrote it. */
        seal_index_note(d, s->done_name, s->fd, s->created_ns,
                        s->newest_record_ns ? s->newest_record_ns : s->created_ns);
        log_info("sealed done/%s: %" PRIu64 " records, %" PRIu64 " bytes", s->done_name,
                 shard_records_kept(s), shard_bytes_kept(s));
        break;
    case SEAL_FAILED:
        d->stats.io_errors++;
        log_error("sealing active/%s failed at %s: %s; the file is left for recovery",
                  s->tmp_name, seal_failed_step(&s->seal), strerror(-err));
        break;
    }
    list_del(&s->node);
    if (list_linked(&s->dirty_node))
        list_del(&s->dirty_node);
    budget_shard_ended(d, s->budget, s->budget_taken,
                       where == SEAL_IN_DONE         ? BUDGET_END_DONE
                       : where == SEAL_IN_QUARANTINE ? BUDGET_END_QUARANTINE
                       : where == SEAL_REMOVED       ? BUDGET_END_REMOVED
                                                     : BUDGET_END_LEFT,
                       where == SEAL_IN_DONE ? s->done_name : s->tmp_name);
    s->budget_taken = 0;
    /* The stream's position counts what the spool keeps of it: a shard in
     * done/, or one left in active/ that recovery will seal at the next
     * start. What went to quarantine/ or was removed is not the stream's. */
    if (s->has_stream)
        streams_shard_sealed(d, s->stream_id, s->first_position,
                             where == SEAL_IN_DONE || where == SEAL_FAILED
                                 ? shard_records_kept(s)
                                 : 0);
    /* A removed shard was not sealed: whoever waits for its seal (a rotate
     * request) hears the error that kept it from being written. */
    shard__report(s, SHARD_REPORT_SEALED, where == SEAL_REMOVED ? (s->error ? s->error : -EIO) : err);
    shard_free(s);
}
