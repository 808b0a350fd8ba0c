/* Shared syncs: under fsync = batch with sync_method syncfs, the shards
 * that wrote in a loop tick are made durable together, by one syncfs(2) of
 * the spool's file system, instead of one fdatasync each.
 *
 * A shard whose write completed joins the group; at the end of the tick
 * (group_sync_submit(), after the writes are queued) one syncfs starts and
 * covers every member that joined before it. Members joining while it runs
 * are not covered by it (it may have started before their write was in
 * the page cache): the next tick starts another for them, up to
 * GROUP_SYNC_INFLIGHT at once, and beyond that they wait for one to end. When it completes, each member it covered hears the
 * result. A failed syncfs fails every member it covered: which file's pages
 * failed cannot be told, so none of them is trusted (the same rule as a
 * failed fdatasync, never retried). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "list.h"

struct daemon;

struct group_member {
    struct list_node node; /* internal */
    /* The result of the syncfs that covered this member: 0 or a negative
     * errno. Called once per join, from the loop. */
    void (*done)(struct group_member *m, int res);
};

/* Syncs in flight at once: a member that joins while one runs need not
 * wait for its end before its own starts. */
#define GROUP_SYNC_INFLIGHT 2u

struct group_sync_slot {
    struct list_node covered; /* what this syncfs covers */
    bool busy;
    struct io_req req;
    struct daemon *d;
};

struct group_sync {
    struct list_node waiting; /* joined since the last syncfs started */
    struct group_sync_slot slot[GROUP_SYNC_INFLIGHT];
    uint64_t syncs;   /* syncfs calls completed */
    uint64_t members; /* members they covered: members / syncs shards per sync */
};

void group_sync_init(struct daemon *d);

/* m's shard has written what it wants proven; it hears the result through
 * m->done. m must not be in the group already. */
void group_sync_join(struct daemon *d, struct group_member *m);

/* The end of a loop tick, after the writes are queued: starts a syncfs for
 * the members waiting, unless one is in flight (it starts when that one
 * ends). */
void group_sync_submit(struct daemon *d);
