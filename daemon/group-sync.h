/* Shared syncs: under fsync = batch with sync_method syncfs or one-flush,
 * the shards that wrote in a loop tick are made durable together instead of
 * by one fdatasync each: by one syncfs(2) of the spool's file system, or,
 * under one-flush, by one fdatasync of a member's file, whose cache flush
 * makes durable every write that completed on the disk before it (each
 * member wrote into space prepared ahead, so its data needs no metadata,
 * and its write was on the disk, with O_DIRECT or after its pages'
 * write-back, before it joined). Members whose files have metadata to
 * make durable (zeros written ahead) get an fdatasync of their file each,
 * started together; then the sync ends when the last of them does.
 *
 * A shard whose write completed joins the group; at the end of the tick
 * (group_sync_submit(), after the writes are queued) one sync starts and
 * covers every member that joined before it. Members joining while it runs
 * are not covered by it (it may have started before their write was in
 * the page cache or on the disk): the next tick starts another for them,
 * up to GROUP_SYNC_INFLIGHT at once, and beyond that they wait for one to
 * end. When it completes, each member it covered hears the result. A failed
 * sync fails every member it covered: which file's pages failed cannot be
 * told, so none of them is trusted (the same rule as a failed fdatasync,
 * never retried). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "list.h"

struct daemon;

struct group_member {
    struct list_node node; /* internal */
    /* Under one-flush, the member's file: the shared fdatasync may be of
     * any member's file, which stays open until its done has run. */
    int fd;
    /* Under one-flush, the member's file has metadata to make durable (zeros
     * written ahead, shard-prepare.c): the sync that covers it includes an
     * fdatasync of its file, which serves the others as the flush they
     * need, so it costs none of its own. */
    bool own_file;
    struct io_req req; /* internal: the fdatasync of an own_file member's file */
    /* The result of the sync that covered this member: 0 or a negative
     * errno. Called once per join, from the loop. */
    void (*done)(struct group_member *m, int res);
};

/* Syncs in flight at once: a member that joins while one runs need not
 * wait for its end before its own starts. */
#define GROUP_SYNC_INFLIGHT 2u

struct group_sync_slot {
    struct list_node covered; /* what this sync covers */
    bool busy;
    unsigned pending; /* its syncs still in flight (one-flush: one per own_file member) */
    int res;          /* the first of them that failed, else 0 */
    struct io_req req;
    struct daemon *d;
};

struct group_sync {
    struct list_node waiting; /* joined since the last syncfs started */
    struct group_sync_slot slot[GROUP_SYNC_INFLIGHT];
    uint64_t syncs;   /* shared syncs completed */
    uint64_t members; /* members they covered: members / syncs shards per sync */
};

void group_sync_init(struct daemon *d);

/* m's shard has written what it wants proven; it hears the result through
 * m->done. m must not be in the group already. */
void group_sync_join(struct daemon *d, struct group_member *m);

/* The end of a loop tick, after the writes are queued: starts a sync for
 * the members waiting, unless GROUP_SYNC_INFLIGHT are in flight (it starts
 * when one of them ends). */
void group_sync_submit(struct daemon *d);
