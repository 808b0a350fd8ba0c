/* logctl prune's engine (docs/RETENTION.md): what logshard has finished
 * with, removed by age and by total size, oldest first. prune-select.c
 * holds the rule (which files of a list go, and why), prune-run.c the run:
 * the lock, what a pending merge names, the merged directory, the shipped
 * shards of done/ and the order in which things are made durable.
 * cmd-prune.c is the command line and what the user sees.
 *
 * The engine never prints: it returns what it did (and what it left
 * alone, and why) for the command to show. Functions return 0 or a
 * negative errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- the rule (prune-select.c) ---- */

enum prune_reason {
    PRUNE_KEEP = 0,
    PRUNE_AGE,  /* older than the age limit */
    PRUNE_SIZE, /* the oldest of a set over its size limit */
};

/* One candidate: a file that may go once the rule says so. */
struct prune_file {
    const char *name; /* for the order among files of the same time */
    uint64_t time_ns; /* what its age counts from (ns since the epoch) */
    uint64_t bytes;
    size_t tag;       /* the caller's, to find its own record again */
    enum prune_reason reason; /* set by prune_select */
};

/* Sorts the n files oldest first (by time_ns, then name) and marks those
 * that go: every file whose age at now_ns is above max_age_ns (0: no age
 * limit), then, oldest first, files of what is left until its total is at
 * most max_bytes (0: no size limit). A file dated after now_ns has age 0.
 * A file larger than max_bytes on its own goes too: the limit is on the
 * total. Returns the total bytes of the files kept. */
uint64_t prune_select(struct prune_file *v, size_t n, uint64_t now_ns, uint64_t max_age_ns,
                      uint64_t max_bytes);

/* ---- the run (prune-run.c) ---- */

struct prune_opts {
    const char *spool;
    const char *merged_dir; /* NULL: <spool>/merged */
    uint64_t merged_max_age_ns;
    uint64_t merged_max_bytes;
    uint64_t shipped_max_age_ns;
    uint64_t shipped_max_bytes;
    uint64_t now_ns; /* the time ages are measured at */
    bool dry_run;    /* decide, remove nothing, write nothing, take no lock */
};

enum prune_kind {
    PRUNE_MERGED,  /* a merged file */
    PRUNE_SHIPPED, /* a sealed shard of done/ shipped whole */
};

/* A file removed, or to be removed in a dry run, or whose removal failed. */
struct prune_entry {
    enum prune_kind kind;
    char *path;
    uint64_t bytes;
    uint64_t time_ns; /* what its age counted from */
    enum prune_reason reason;
    int error; /* 0, or why it is still there: the negative errno of its
                  unlink, or -ESTALE when its name held another file by then
                  (that file was not judged, and is kept) */
};

/* A file left alone that a person should hear of (not a regular file
 * under a name prune would take, a shard that cannot be read, ...). */
struct prune_note {
    char *path;
    char *why;
};

struct prune_result {
    struct prune_entry *entries; /* merged files first, each set oldest first */
    size_t n_entries;
    struct prune_note *notes;
    size_t n_notes;
    char *merged_dir;      /* the merged directory, when it was looked at */
    bool merged_looked;    /* a merged limit is set and its directory was read */
    bool merged_dir_missing; /* ... and it does not exist */
    bool shipped_looked;   /* a shipped limit is set */
    bool shipping;         /* <spool>/ship/progress exists: done/ was looked at */
    size_t merged_kept;    /* merged files left, and their bytes */
    uint64_t merged_kept_bytes;
    size_t shipped_kept;   /* shards shipped whole left, and their bytes */
    uint64_t shipped_kept_bytes;
    size_t not_shipped;    /* sealed shards not shipped whole: never removed */
    size_t pending;        /* files an interrupted merge names: kept for it */
    char *positions_file;  /* written in <spool>/streams/ before shards went */
    bool lock_busy;        /* merge.lock was held: nothing was done */
    char *error;           /* the first failure: "<file>: <reason>" */
};

/* Prunes as opts says. Unless dry_run, <spool>/merge.lock is held
 * (flock, non-blocking) for the whole run, as merge holds it, so no merge
 * reads what is removed. Nothing a pending merge's intent names is
 * removed. Merged files: regular files of the merged directory whose
 * names are merge's default output names (the time in the name is their
 * age's origin). Shipped shards: only when <spool>/ship/progress exists,
 * regular files of done/ under shard names, read as the shipper reads
 * them, shipped whole by its rule (their newest record's time is their
 * age's origin); their streams' positions are made durable in
 * <spool>/streams/ before the first of them is unlinked. No symbolic link
 * is followed: the spool and the merged directory are opened with
 * O_NOFOLLOW, everything in them relative to their descriptors.
 *
 * Returns 0; -EBUSY with res->lock_busy when merge.lock is held (nothing
 * was looked at or removed); or the
 * negative errno of the first failure, with res->error set. A failure in
 * one part (merged files, shipped shards) does not stop the other; a file
 * that cannot be removed does not stop the next. *res is always
 * initialised: prune_result_free it. */
int prune_run(const struct prune_opts *opts, struct prune_result *res);

void prune_result_free(struct prune_result *res);
