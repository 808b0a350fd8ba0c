/* Creating a shard's file: its id and names, its header, and the create
 * itself on the I/O ring, off the loop. Creating a file can take a while
 * (ext4 without a journal, for one, looks past every inode deleted in the
 * last minute), and the loop keeps serving every other producer meanwhile;
 * records wait in the filling batch until the file is there. A name
 * already taken (EEXIST) gets the next id, the header saying the same; a
 * create that fails is reported like a failed write (create_error). */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"
#include "notify.h"
#include "shard.h"
#include "shard-internal.h"
#include "shard_format.h"
#include "spool_names.h"
#include "stats.h"

static void on_created(struct io_req *req, int res);

/* Picks the shard's id and the two names that go with it. */
int shard__name(struct shard *s)
{
    size_t len = strlen(s->producer);
    int r;

    s->id = shard__next_id(s->d);
    free(s->tmp_name);
    free(s->done_name);
    s->tmp_name = NULL;
    s->done_name = NULL;
    r = spool_name_new(SPOOL_TMP, s->producer, len, s->id, &s->tmp_name);
    if (r == 0)
        r = spool_name_new(SPOOL_SHARD, s->producer, len, s->id, &s->done_name);
    return r;
}

/* Encodes the header at the start of the filling batch: when the shard
 * opens, and again in place, the same length with another id, when its
 * first name was taken. */
int shard__encode_header(struct shard *s)
{
    struct shard_header h;
    int r;

    memset(&h, 0, sizeof(h));
    h.version = SHARD_FORMAT_VERSION_STREAM;
    if (s->has_stream) {
        memcpy(h.stream_id, s->stream_id, SHARD_STREAM_ID_SIZE);
        h.first_position = s->first_position;
    }
    h.source = s->source; /* not the client's: version 4 (shard_header_write_version) */
    h.uid = s->uid;
    h.gid = s->gid;
    h.pid = s->pid;
    h.shard_id = s->id;
    h.created_ns = s->created_ns;
    h.producer_len = strlen(s->producer);
    memcpy(h.producer, s->producer, h.producer_len);
    if (s->header_len == 0) {
        r = shard__batch_reserve(
            s->d, &s->filling, shard_header_size_v(shard_header_write_version(&h), h.producer_len));
        if (r < 0)
            return r;
        s->filling.len = shard_encode_header(s->filling.buf, &h);
        s->header_len = (uint32_t)s->filling.len;
    } else {
        size_t len = shard_encode_header(s->filling.buf, &h);

        assert(len == s->header_len);
        (void)len;
    }
    return 0;
}

/* Creates in one directory take its lock one at a time in the kernel, so
 * several in flight would only wait (or spin) for each other: the shards
 * that want a file are created by one chain at a time, up to
 * CREATE_CHAIN_MAX of them, one after the other on one worker; those that
 * come meanwhile go with the next chain. */
#define CREATE_CHAIN_MAX 32u

void shard__queue_create(struct shard *s)
{
    if (!s->creating)
        s->d->shards_creating++;
    s->creating = true;
    list_add_tail(&s->d->shards_to_create, &s->create_node);
    io_want_submit(s->d->io);
}

void shard__submit_creates(struct daemon *d)
{
    struct shard *s;

    while (d->shard_creates_inflight < CREATE_CHAIN_MAX && !list_empty(&d->shards_to_create)) {
        struct io_req *req;

        s = list_entry(d->shards_to_create.next, struct shard, create_node);
        list_del(&s->create_node);
        req = &s->create_req;
        memset(req, 0, sizeof(*req));
        req->op = IO_CREATE;
        req->fd = d->active_fd;
        req->oldpath = s->tmp_name;
        req->cb = on_created;
        req->data = s;
        req->link = d->shard_creates_inflight + 1 < CREATE_CHAIN_MAX &&
                    !list_empty(&d->shards_to_create);
        d->shard_creates_inflight++;
        io_queue(d->io, req);
    }
}

/* The file could not be created: the shard keeps nothing, and none of its
 * records was acknowledged. A shard held behind an earlier one of its
 * stream leaves that chain now; it will never write anything. */
static void create_failed(struct shard *s, int err)
{
    struct daemon *d = s->d;

    if (s->stream_prev) {
        s->stream_prev->stream_next = NULL;
        s->stream_prev = NULL;
        s->held = false;
    }
    if (s->error)
        return; /* cut for its stream already: said then */
    s->create_error = err;
    s->error = err;
    d->stats.io_errors++;
    log_error("cannot create active/%s for producer %s: %s; its %" PRIu64 " records are "
              "refused",
              s->tmp_name, s->producer, strerror(-err), s->records_queued);
    notify_set_error(d, "cannot create active/%s: %s", s->tmp_name, strerror(-err));
    s->records_queued = 0;
    s->size_queued = 0;
    shard__batch_release(d, &s->inflight);
    shard__batch_release(d, &s->filling);
    shard__report(s, SHARD_REPORT_FAILED, err);
}

static void on_created(struct io_req *req, int res)
{
    struct shard *s = req->data;

    assert(s->creating && s->state != SHARD_SEALING);
    assert(s->d->shard_creates_inflight > 0);
    if (--s->d->shard_creates_inflight == 0 && !list_empty(&s->d->shards_to_create))
        io_want_submit(s->d->io);
    /* O_EXCL makes a name clash an error instead of an overwrite; the next
     * id is tried then, with the header saying the same. */
    if (res == -EEXIST && !s->error && ++s->create_attempts <= 16) {
        int r = shard__name(s);

        if (r == 0) {
            (void)shard__encode_header(s);
            shard__queue_create(s);
            return;
        }
        res = r;
    }
    s->creating = false;
    s->d->shards_creating--;
    if (res >= 0) {
        s->fd = res;
        if (s->filling.len > 0 && !s->error && !s->held)
            shard__mark_dirty(s);
    } else {
        create_failed(s, res);
    }
    shard__maybe_start_seal(s);
}
