/* logctl merge as a library: list the sealed shards of a spool, read every
 * record of every one through the shard reader, move a damaged one to
 * <spool>/quarantine/, and copy the others back to back into one new file
 * that appears under its final name only once it is complete and synced;
 * optionally (--delete) remove the merged sources once the output is
 * durable. An intent file and a lock make a merge killed at any instant and
 * run again leave every record exactly once (see the top of merge-run.c,
 * which lists the files of the engine, and docs/MERGE.md).
 *
 * The module never prints; it fills a struct merge_result (figures, what was
 * recovered, and an error message naming the file and the reason) and
 * logctl/cmd-merge.c reports it. Functions return 0 or a negative errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shard_format.h"
#include "wire.h"

/* A sealed shard file in <spool>/done/: "<producer>.<id>.shard", where <id>
 * is exactly 16 lowercase hex digits and <producer> follows the producer
 * name rule (it may contain dots, so the name is split at the last two). */
struct merge_source {
    char *name; /* file name inside done/, owned */
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id;
    /* Filled in by merge_run when it validates the file. */
    uint64_t bytes;
    uint64_t records;
    uint64_t newest_ns; /* latest record receive time; the header's
                           creation time when it has no record */
    dev_t dev;
    ino_t ino;
    /* The stream of a version 3 shard (has_stream false for any other):
     * its id, the position of its first record and the uid of its header,
     * and its seal trailer's newest_ns (0 without a trailer): for the
     * output order (a stream's shards go in first_position order) and the
     * stream positions written before --delete removes it. */
    bool has_stream;
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t first_position;
    uint32_t uid;
    uint64_t trailer_newest_ns;
    int fd; /* the file opened by the check, kept for the copy; -1: closed */
    /* What the check found wrong: 0, or the negative errno that keeps the
     * source out of the merge (-EBADMSG or -ENODATA: damaged; anything else:
     * it could not be read), with the offset of the first bad byte
     * (UINT64_MAX when there is none) and the reason, owned. */
    int bad;
    uint64_t bad_offset;
    char *bad_why;
};

/* Parses a done/ file name. Returns 0 and fills ret_producer (at least
 * WIRE_PRODUCER_NAME_MAX + 1 bytes) and *ret_id, or -EINVAL when the name
 * does not follow the pattern (the caller then ignores the file). */
int merge_parse_source_name(const char *name, char *ret_producer, uint64_t *ret_id);

/* Lists the regular files in the directory done_dirfd whose names follow the
 * pattern and sorts them: by producer name in byte order (strcmp), then by
 * shard id ascending. Everything else (temp files, dotfiles, foreign names,
 * directories, symlinks) is skipped. done_dirfd is not consumed and its
 * offset is not moved. On success *ret_sources is a new array of *ret_count
 * entries (NULL when there are none), freed with merge_sources_free(). */
int merge_list_sources(int done_dirfd, struct merge_source **ret_sources, size_t *ret_count);

void merge_sources_free(struct merge_source *sources, size_t count);

/* Copies the first len bytes of in_fd (from offset 0, whatever in_fd's file
 * offset is) to out_fd at out_fd's current file offset, with
 * copy_file_range(2) in a loop. When copy_file_range fails with EXDEV,
 * EINVAL, EOPNOTSUPP or ENOSYS, or when force_fallback is set, the rest is
 * copied with pread/write. Returns 0 and sets *ret_fell_back (may be NULL)
 * to whether the read/write path was used; -ENODATA when in_fd ends before
 * len bytes; or the errno of the failing call. */
int merge_copy(int in_fd, int out_fd, uint64_t len, bool force_fallback, bool *ret_fell_back);

/* The same as merge_copy, but writes at offset out_off of out_fd (out_fd's
 * file offset is neither used nor moved), so that several threads can fill
 * one output at once; out_off < 0 means out_fd's file offset, as
 * merge_copy does. */
int merge_copy_at(int in_fd, int out_fd, int64_t out_off, uint64_t len, bool force_fallback,
                  bool *ret_fell_back);

/* The files a merge keeps in the spool directory itself (merge.lock,
 * merge.intent, merge.intent.tmp) are named in common/spool_names.h. */

/* Points in a merge at which merge_opts.at_step is called; tests end the
 * process there to leave exactly the state a kill at that instant leaves. */
enum merge_step {
    MERGE_STEP_INTENT_WRITTEN = 1, /* merge.intent is durable; no temp file yet */
    MERGE_STEP_COPIED,             /* the temp file is complete and synced */
    MERGE_STEP_PUBLISHED,          /* renamed to the output; directory not synced */
    MERGE_STEP_SOURCE_DELETED,     /* one source unlinked (also during recovery) */
    MERGE_STEP_SOURCES_DELETED,    /* every source gone and done/ synced; the
                                      intent is still there */
    MERGE_STEP_POSITIONS_WRITTEN,  /* --delete: the stream positions of the
                                      sources are durable in <spool>/streams/,
                                      no source is unlinked yet (also during
                                      recovery) */
};

/* Where a merge is, for a progress display: the check pass reads every
 * candidate, the copy pass copies the selected ones. */
enum merge_phase {
    MERGE_PHASE_CHECK = 1,
    MERGE_PHASE_COPY,
};

struct merge_progress {
    enum merge_phase phase;
    size_t shards_done, shards_total;
    uint64_t bytes_done, bytes_total;
};

struct merge_opts {
    const char *spool;   /* reads <spool>/done/ */
    const char *producer; /* only this producer's shards; NULL: every producer */
    uint64_t before_ns;   /* only shards whose every record was received before
                             this time (ns since the epoch); 0: no bound */
    const char *output;  /* NULL: <spool>/merged/merged-<UTC time, ns>Z.lsm */
    bool delete_sources; /* --delete: unlink the merged sources once the
                            output is durable, after writing the positions
                            of their streams to <spool>/streams/; on a
                            spool that logctl ship ships (<spool>/ship/
                            progress exists) only shards it has shipped
                            whole are merged, the rest wait in done/ */
    bool force_fallback; /* skip copy_file_range (tests; odd filesystems) */
    /* Optional: called after every source was checked, before each one is
     * copied. A negative return aborts the merge with that error (e.g.
     * -ECANCELED on a signal); the temp file is removed and no output is
     * created. Tests use it to interfere with a merge in progress. */
    int (*before_copy)(const struct merge_source *src, void *userdata);
    /* Optional: called at each enum merge_step. Tests only. */
    void (*at_step)(enum merge_step step, void *userdata);
    /* Optional: called once at the start of each pass, as shards are
     * checked and copied, and with each pass's final figures. Always on
     * the thread that called merge_run, also while a pass runs on two
     * threads (the second one only adds to counters this one reads), so it
     * needs no locking; it may then see several shards done at once.
     * Setting it never changes how the merge runs. */
    void (*progress)(const struct merge_progress *p, void *userdata);
    void *userdata;
};

/* What the start of a merge found and did about an interrupted one. */
enum merge_recovery {
    MERGE_RECOVERY_NONE = 0,    /* no merge.intent: nothing was interrupted */
    MERGE_RECOVERY_FINISHED,    /* its output had been published: the sources
                                   it listed were removed (with --delete) */
    MERGE_RECOVERY_ROLLED_BACK, /* it had not been published: its temp file
                                   was removed, the sources kept */
};

/* A file of done/ that was not merged, and what became of it. */
enum merge_problem_kind {
    MERGE_PROBLEM_DAMAGED = 1, /* not one valid shard of its name (a bad record,
                                  header or trailer, cut short, empty, not a
                                  shard at all): moved to quarantine/ unchanged */
    MERGE_PROBLEM_UNREADABLE,  /* opening or reading it failed (permissions,
                                  an I/O error), or it changed while it was
                                  read: left in done/ */
    MERGE_PROBLEM_NOT_REGULAR, /* a FIFO, directory, symlink, socket or device
                                  under a shard name: never opened, left in done/ */
};

struct merge_problem {
    enum merge_problem_kind kind;
    char *name;           /* the file's name in done/ */
    uint64_t offset;      /* where the damage starts; UINT64_MAX: no offset */
    char *why;            /* what is wrong with it */
    char *quarantined_as; /* its name in quarantine/ now; NULL: still in done/ */
    int move_error;       /* a damaged file that could not be moved: the
                             negative errno of the move (it stays in done/) */
};

struct merge_result {
    char *output_path;             /* the file written; NULL when none was */
    size_t shards;                 /* shards merged */
    uint64_t records;              /* records in them */
    uint64_t bytes;                /* bytes written */
    bool used_fallback;            /* the read/write copy was used */
    size_t deleted;                /* sources removed after publishing (--delete) */
    size_t not_shipped;            /* --delete on a shipped spool: shards left
                                      out because logctl ship has not yet
                                      committed every record of them */
    char *positions_file;          /* the stream positions file written before
                                      removing sources, its name in
                                      <spool>/streams/; NULL when none was
                                      (no source had a stream, or no --delete) */
    struct merge_source *sources;  /* the shards, in output order */
    size_t n_sources;
    enum merge_recovery recovery;  /* an interrupted merge found at the start */
    char *recovery_output;         /* its output path */
    char *recovery_temp;           /* the temp file removed; NULL when none was left */
    size_t recovery_deleted;       /* sources it listed that were removed now */
    char *error;                   /* on failure: "<file>: <reason>", or NULL
                                      when even that could not be allocated */
    struct merge_problem *problems; /* files of done/ not merged, in name order */
    size_t n_problems;
};

/* Runs one merge. *ret is always initialised (call merge_result_free after).
 *
 * First it takes <spool>/merge.lock (flock, non-blocking): -EBUSY when
 * another merge holds it. Then, when <spool>/merge.intent exists, it
 * finishes or rolls back the merge that wrote it (ret->recovery says which);
 * when that cannot be done safely it returns an error and changes nothing.
 * Then it merges what is in done/ now: every record of every source is
 * read and checked first; a damaged source is moved to <spool>/quarantine/
 * (created when needed) and left out, and so is, left in place, one that
 * cannot be read or is not a regular file. Each is listed in
 * ret->problems; the rest is merged as usual.
 *
 * Returns 0 when the output is written and durable (and, with
 * delete_sources, the sources are removed), or when there was nothing to
 * merge (shards == 0, no file and no directory created), whether or not
 * ret->problems lists files that were left out; otherwise a
 * negative errno with ret->error set. ret->output_path is set only when the
 * output exists: then the failure came after publishing (a directory fsync,
 * writing the stream positions, or removing a source), and merge.intent is
 * left in place so the next merge finishes the job; a failure to write the
 * stream positions leaves every source in done/. Without output_path, no output was created and every
 * source is untouched. */
int merge_run(const struct merge_opts *opts, struct merge_result *ret);

void merge_result_free(struct merge_result *r);

/* What an interrupted merge left for the next merge to finish or roll
 * back: the output and the sources <spool>/merge.intent names. Until that
 * merge runs they must stay where they are: its recovery proves the
 * output against the sources still in done/, and refuses to go on when
 * the output is gone and sources are missing (docs/MERGE.md, "Recovery").
 * logctl prune keeps them. */
struct merge_pending {
    char *dir;       /* the output's directory, absolute */
    char *output;    /* the output's name in dir */
    char *temp;      /* the temp file's name in dir */
    char **sources;  /* the sources' names in done/ */
    size_t n_sources;
};

/* Reads <spool>/merge.intent (spool_fd: the spool directory; spool: its
 * path, for messages) and changes nothing; the caller holds merge.lock for
 * the answer to stay true. Returns 0 with *ret filled (merge_pending_free
 * it), -ENOENT when there is none (no merge is pending), or a negative
 * errno with a new message in *ret_error ("<file>: <reason>"; free it;
 * NULL when even that could not be allocated): -EBADMSG when the intent
 * is damaged or no regular file, and then nothing it might name is known. */
int merge_pending_read(int spool_fd, const char *spool, struct merge_pending *ret,
                       char **ret_error);

/* Frees what p holds; p may be zeroed or half-filled. */
void merge_pending_free(struct merge_pending *p);

