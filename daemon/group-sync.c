/* Shared syncs (group-sync.h): one syncfs of the spool's file system, or
 * one flushing fdatasync, for every shard that wrote since the last one
 * started. */
#include "group-sync.h"

#include "daemon.h"

void group_sync_init(struct daemon *d)
{
    struct group_sync *g = &d->group_sync;

    list_init(&g->waiting);
    for (unsigned i = 0; i < GROUP_SYNC_INFLIGHT; i++) {
        list_init(&g->slot[i].covered);
        g->slot[i].busy = false;
    }
}

void group_sync_join(struct daemon *d, struct group_member *m)
{
    list_add_tail(&d->group_sync.waiting, &m->node);
    io_want_submit(d->io); /* the loop must come round to group_sync_submit */
}

/* Every sync of the slot has ended: each member it covered hears the
 * result, the first failure if any. */
static void slot_done(struct group_sync_slot *slot)
{
    struct daemon *d = slot->d;
    struct group_sync *g = &d->group_sync;

    slot->busy = false;
    g->syncs++;
    while (!list_empty(&slot->covered)) {
        struct group_member *m = list_entry(slot->covered.next, struct group_member, node);

        list_del(&m->node);
        g->members++;
        m->done(m, slot->res);
    }
    if (!list_empty(&g->waiting))
        io_want_submit(d->io);
}

static void on_shared_sync(struct io_req *req, int res)
{
    struct group_sync_slot *slot = req->data;

    if (res < 0 && slot->res == 0)
        slot->res = res;
    if (--slot->pending == 0)
        slot_done(slot);
}

void group_sync_submit(struct daemon *d)
{
    struct group_sync *g = &d->group_sync;
    struct group_sync_slot *slot = NULL;

    if (list_empty(&g->waiting))
        return;
    for (unsigned i = 0; i < GROUP_SYNC_INFLIGHT && !slot; i++)
        if (!g->slot[i].busy)
            slot = &g->slot[i];
    if (!slot)
        return; /* starts when one of those in flight ends */
    slot->busy = true;
    slot->d = d;
    slot->res = 0;
    slot->pending = 0;
    list_move_all(&slot->covered, &g->waiting);
    if (d->batch_sync == SYNC_METHOD_ONE_FLUSH) {
        struct list_node *n;

        /* Each member whose file has metadata to make durable gets the
         * fdatasync of its file, all at once; the others need none of
         * their own, any one of those flushes serves them. */
        for (n = slot->covered.next; n != &slot->covered; n = n->next) {
            struct group_member *m = list_entry(n, struct group_member, node);

            if (!m->own_file)
                continue;
            m->req = (struct io_req){
                .op = IO_FDATASYNC,
                .fd = m->fd,
                .cb = on_shared_sync,
                .data = slot,
            };
            slot->pending++;
            io_queue(d->io, &m->req);
        }
        if (slot->pending > 0)
            return;
        slot->req = (struct io_req){
            .op = IO_FDATASYNC,
            .fd = list_entry(slot->covered.next, struct group_member, node)->fd,
            .cb = on_shared_sync,
            .data = slot,
        };
    } else {
        slot->req = (struct io_req){
            .op = IO_SYNCFS,
            .fd = d->active_fd,
            .cb = on_shared_sync,
            .data = slot,
        };
    }
    slot->pending = 1;
    io_queue(d->io, &slot->req);
}
