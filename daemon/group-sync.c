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

static void on_shared_sync(struct io_req *req, int res)
{
    struct group_sync_slot *slot = req->data;
    struct daemon *d = slot->d;
    struct group_sync *g = &d->group_sync;

    slot->busy = false;
    g->syncs++;
    while (!list_empty(&slot->covered)) {
        struct group_member *m = list_entry(slot->covered.next, struct group_member, node);

        list_del(&m->node);
        g->members++;
        m->done(m, res);
    }
    if (!list_empty(&g->waiting))
        io_want_submit(d->io);
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
    if (d->batch_sync == SYNC_METHOD_ONE_FLUSH) {
        struct group_member *own = NULL;
        struct list_node *n, *tmp;

        list_for_each_safe(n, tmp, &g->waiting) {
            struct group_member *m = list_entry(n, struct group_member, node);

            if (m->own_file && own)
                continue; /* the next sync is of its file */
            if (m->own_file)
                own = m;
            list_del(&m->node);
            list_add_tail(&slot->covered, &m->node);
        }
        if (!own)
            own = list_entry(slot->covered.next, struct group_member, node);
        slot->req = (struct io_req){
            .op = IO_FDATASYNC,
            .fd = own->fd,
            .cb = on_shared_sync,
            .data = slot,
        };
    } else {
        list_move_all(&slot->covered, &g->waiting);
        slot->req = (struct io_req){
            .op = IO_SYNCFS,
            .fd = d->active_fd,
            .cb = on_shared_sync,
            .data = slot,
        };
    }
    io_queue(d->io, &slot->req);
}
