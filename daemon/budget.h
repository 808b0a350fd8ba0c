/* The disk budget (docs/BUDGET.md): what each producer name holds in the
 * spool against its quota, and what the whole spool holds against
 * spool_budget_bytes and spool_min_free_bytes.
 *
 * A producer's bytes are those of its open shards, counted as records are
 * taken (so a check before each frame lets it overshoot by one frame at
 * most), and those of its sealed shards in done/. The spool's bytes add
 * merged/ and quarantine/. The files of done/, merged/ and quarantine/ are
 * read once at start and then followed with inotify, so what logctl merge
 * --delete, logctl ship or logctl prune removes is freed as it goes, with
 * no rescans. Sessions whose producer is over its quota wait on the
 * producer (budget_wait) and are called back when its share is freed.
 *
 * A service beside memory.c: shards and sessions call in; it calls out
 * only through the waiters' callbacks. Every function accepts a daemon
 * without a budget (d->budget NULL: tests of the shards alone). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "list.h"

struct daemon;
struct budget_producer;

/* A connection that waits for its producer's share to be freed. */
struct budget_waiter {
    struct list_node node; /* the producer's waiters while waiting */
    void (*resume)(struct budget_waiter *w);
};

/* Reads done/, merged/ and quarantine/ and starts following them. Called
 * once after recovery, before anything is accepted. 0, or a negative errno
 * with why set. */
int budget_start(struct daemon *d, char *why, size_t why_len);

/* Stops following the directories and closes the handles (the loop's last
 * run frees them). Producers still referenced stay valid until put. */
void budget_stop(struct daemon *d);

/* Frees what budget_start made, once the loop has closed its handles. */
void budget_free(struct daemon *d);

/* The producer named name, created on first use with its quota from the
 * configuration; NULL without a budget or memory. Every get is paired
 * with a budget_producer_put. */
struct budget_producer *budget_producer_get(struct daemon *d, const char *name);
void budget_producer_put(struct daemon *d, struct budget_producer *p);

/* Bytes taken into one of p's open shards (p may be NULL). */
void budget_taken(struct daemon *d, struct budget_producer *p, uint64_t bytes);

/* Where a shard's file went when it ended. */
enum budget_shard_end {
    BUDGET_END_DONE,       /* done/<file> */
    BUDGET_END_QUARANTINE, /* quarantine/<file> */
    BUDGET_END_REMOVED,    /* gone */
    BUDGET_END_LEFT,       /* left in active/ for the next start's recovery */
};

/* A shard of p that had `taken` bytes counted ended; file is its name in
 * the directory `end` names (NULL for REMOVED and LEFT). */
void budget_shard_ended(struct daemon *d, struct budget_producer *p, uint64_t taken,
                        enum budget_shard_end end, const char *file);

/* Whether a frame of p may be taken now: 0; -EDQUOT when p is at or over
 * its quota; -ENOSPC when the spool is at spool_budget_bytes or its
 * filesystem at spool_min_free_bytes. why says which, with the figures. */
int budget_admit(struct daemon *d, struct budget_producer *p, char *why, size_t why_len);

/* w waits until p is under its quota again (then w->resume is called,
 * once, with w already off the list). budget_unwait takes it off early;
 * safe when not waiting. */
void budget_wait(struct daemon *d, struct budget_producer *p, struct budget_waiter *w);
void budget_unwait(struct budget_waiter *w);

/* A frame of p refused by over_quota = refuse, or a syslog message dropped
 * over the quota or the budget: counted for status. */
void budget_count_refused(struct daemon *d, struct budget_producer *p);

/* The quotas after a reload: every producer's quota read again; those now
 * under it resume. */
void budget_reload(struct daemon *d);

/* The figures for status and metrics. */
struct budget_figures {
    uint64_t spool_bytes;      /* active (taken) + done/ + merged/ + quarantine/ */
    uint64_t active_bytes, done_bytes, merged_bytes, quarantine_bytes;
    uint64_t free_bytes;       /* the filesystem's, estimated since the last statvfs */
    uint64_t budget_bytes, min_free_bytes;
    uint64_t refused_budget;   /* frames and messages refused by the spool budget */
    uint64_t producers_waiting; /* producers over quota with connections waiting */
    uint64_t quota_pauses;     /* times a producer started waiting */
    uint64_t freed_bytes;      /* of files that left done/, merged/, quarantine/ since
                                  start: merge --delete, ship, prune */
};
void budget_figures(const struct daemon *d, struct budget_figures *ret);

/* Per producer with bytes in the spool or a connection, in no order:
 * calls fn for each. Stops when fn returns nonzero and returns that. */
struct budget_producer_figures {
    const char *name;
    uint64_t bytes, active_bytes, sealed_bytes, sealed_files;
    uint64_t quota;            /* 0: none */
    bool waiting;              /* connections wait for its share */
    uint64_t wait_ns;          /* waited in all, the current wait included */
    uint64_t pauses, refused;
};
int budget_each_producer(const struct daemon *d,
                         int (*fn)(void *data, const struct budget_producer_figures *f),
                         void *data);
