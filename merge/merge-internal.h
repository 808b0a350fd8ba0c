/* Internal to the merge engine: what its files share. merge.h is the
 * engine's interface for everyone else (logctl, the tests of the whole
 * run); this header is for the engine's own files and for the tests and
 * the fuzz target that drive one of its parts alone (the intent parser).
 *
 * Every function that can fail returns 0 or a negative errno; those that
 * take a struct merge_result set res->error (through merge_fail) when they
 * fail, so that merge_run can return their error as it is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merge.h"

/* The directory of the spool that damaged sources are moved to. */

/* Sets res->error from fmt and returns err, so that failures read
 * "return merge_fail(res, -E..., ...);". (merge-run.c) */
__attribute__((format(printf, 3, 4))) int merge_fail(struct merge_result *res, int err,
                                                     const char *fmt, ...);

/* Calls opts->at_step, the tests' hook, when there is one. */
static inline void merge_at_step(const struct merge_opts *opts, enum merge_step s)
{
    if (opts->at_step)
        opts->at_step(s, opts->userdata);
}

/* ---- sources and names (merge-sources.c) ---- */

/* The order of names, for qsort: by producer name in byte order (strcmp),
 * then by shard id ascending. merge_list_sources sorts by it; the output
 * order is this one with each stream's shards then put in position order
 * (merge_order_streams). */
int merge_source_cmp(const void *a, const void *b);

/* Once every source is checked (so its header's stream is known): puts the
 * shards of each producer stream, among the places they hold in name
 * order, in first_position order (common/shard_order.h); a shard without a
 * stream keeps its place. Returns 0, or -ENOMEM with res->error set. */
int merge_order_streams(struct merge_result *res);

/* Frees what one source owns: its name and, if still open, its file. */
void merge_source_release(struct merge_source *s);

/* Narrows res->sources to opts->producer's, or to those whose every
 * record came before opts->before_ns (known only after the check pass);
 * the others are released. The order is kept. */
void merge_select_producer(struct merge_result *res, const struct merge_opts *opts);
void merge_select_before(struct merge_result *res, const struct merge_opts *opts);

/* With --delete on a shipped spool (<spool>/ship/progress exists): keeps
 * only the sources every record of which logctl ship has committed, so
 * that nothing is deleted before it is in Kafka (docs/SHIP.md); counts the
 * others in res->not_shipped. A progress file that cannot be read fails
 * the merge (nothing is then deleted). Returns 0 or a negative errno with
 * res->error set. */
int merge_select_shipped(int spool_fd, const char *spool, struct merge_result *res);

/* Splits path into its directory and its last component, both new strings.
 * -EISDIR when the last component is empty, "." or "..". */
int merge_split_output(const char *path, char **ret_dir, char **ret_base);

/* Makes <spool>/merged/ (durably) and returns its path. */
int merge_default_output_dir(const char *spool, char **ret_path, struct merge_result *res);

/* "merged-YYYYmmddTHHMMSS.nnnnnnnnnZ.lsm": names sort by time, and two
 * merges in the same second get different names. The clock may repeat a
 * value (coarse clocks, a step back), so a taken name gets "-<n>" added
 * until one is free; merges of one spool are serialised by the lock, so
 * the check cannot race with another default-named merge, and the
 * publishing rename (spool_rename_noreplace) refuses to replace anything in
 * any case. */
int merge_default_output_name(int dir_fd, const char *dir, char **ret_base,
                              struct merge_result *res);

/* ---- the check pass and what it sets aside (merge-check.c) ---- */

/* Reads the source s of done/ through the shard reader, every record's
 * length and CRC included: it must hold exactly one valid shard whose header
 * matches its name, and nothing else. Fills s (bytes, records, newest_ns,
 * dev, ino; with keep_open, the open file in s->fd) when it does, and sets
 * s->bad, s->bad_offset and s->bad_why when it does not. Never blocks on a
 * file that is not regular. Returns 0 either way, or a negative errno with
 * res->error set when the merge as a whole cannot go on (out of memory or
 * of file descriptors). Safe to call from two threads for different
 * sources with different res. */
int merge_check_source(int done_fd, const char *done_path, struct merge_source *s,
                       bool keep_open, struct merge_result *res);

/* Adds a MERGE_PROBLEM_NOT_REGULAR problem for every entry of done/ with a
 * shard name (and, when producer is not NULL, that producer's) that is not
 * a regular file. Nothing is opened. Returns 0 or a negative errno with
 * res->error set. */
int merge_note_not_regular(int done_fd, const char *done_path, const char *producer,
                           struct merge_result *res);

/* Takes every source with s->bad set out of res->sources (the others keep
 * their order) and adds a problem for each: a damaged one is moved to
 * <spool>/quarantine/ first (no replace; created and synced when needed;
 * both directories synced after the moves), one that could not be read
 * stays in done/. A move that fails leaves the file in done/ and is
 * recorded in the problem, not returned. Returns 0, or a negative errno
 * with res->error set when memory runs out. */
int merge_set_aside(int spool_fd, const char *spool, int done_fd, const char *done_path,
                    struct merge_result *res);

/* Sorts res->problems by file name. */
void merge_sort_problems(struct merge_result *res);

void merge_problems_free(struct merge_problem *v, size_t n);

/* ---- copying one source (merge-copy.c) ---- */

/* The copy pass for one source: the same file as checked, copied whole to
 * out_fd at out_off (< 0: at out_fd's file offset). A source the check
 * left open is copied from that file (with deleting, only while its name
 * is still the file's); one opened again must be the file checked (device,
 * inode, size), or -ESTALE. *fallback, which two copying threads may
 * share, is read and set atomically: once set, the read/write copy is
 * used. Closes s->fd. Returns 0 or a negative errno with res->error set. */
int merge_copy_source(int done_fd, const char *done_path, struct merge_source *s, int out_fd,
                      int64_t out_off, const char *tmp_path, bool deleting, bool *fallback,
                      struct merge_result *res);

/* ---- the passes and their progress (merge-passes.c) ---- */

/* What a pass reports to opts->progress. The counters are added to by
 * both threads of a pass; p, and the calls to opts->progress, belong to
 * the thread that called merge_run. */
struct merge_meter {
    const struct merge_opts *opts;
    struct merge_progress p; /* what was reported last */
    size_t shards_done;      /* atomic */
    uint64_t bytes_done;     /* atomic */
};

/* Starts a pass: counters at zero, and one report with the totals (the
 * check pass's byte total is a guess from the file sizes). */
void merge_meter_begin(struct merge_meter *m, const struct merge_opts *opts,
                       enum merge_phase phase, size_t shards_total, uint64_t bytes_total);

/* The check pass: merge_check_source for every source of res, on two
 * threads when there are many, leaving as many open for the copy as the
 * open-file limit allows. Returns 0 (bad sources are only marked), or the
 * error that stops the merge at the lowest source in output order, with
 * res->error set. */
int merge_check_pass(int spool_fd, int done_fd, const char *done_path,
                     struct merge_meter *meter, struct merge_result *res);

/* The copy pass: every source of res into out_fd (the temp file
 * tmp_path, to become out_path), back to back in order, on two threads
 * when there are many and no before_copy hook is set; adds them up in
 * res->records and res->bytes. Returns 0, or the error of the first
 * source in output order that failed, with res->error set. */
int merge_copy_pass(int done_fd, const char *done_path, int out_fd, const char *out_path,
                    const char *tmp_path, const struct merge_opts *opts, bool *fallback,
                    struct merge_meter *meter, struct merge_result *res);

/* ---- merge.intent (merge-intent.c) ---- */

/* An intent as read back. The sources carry name, producer, id and bytes
 * only (fd is -1). */
struct merge_intent {
    bool delete_sources;
    char *dir;    /* absolute */
    char *output; /* a name inside dir */
    char *temp;   /* a name inside dir */
    uint64_t bytes;
    struct merge_source *sources;
    size_t n_sources;
};

void merge_intent_free(struct merge_intent *in);

/* Formats the intent text, ending with "end <crc32c of all before>\n".
 * Returns 0 with a new buffer in *ret_buf and its length in *ret_len,
 * -ENOMEM, or -EFBIG when the text would be larger than an intent may be
 * (256 MiB). */
int merge_intent_format(bool delete_sources, const char *dir, const char *output,
                        const char *temp, const struct merge_source *v, size_t n,
                        char **ret_buf, size_t *ret_len);

/* Parses and checks the text of an intent, len bytes at buf (it need not
 * end with a NUL). Returns 0 and fills *ret (free it with
 * merge_intent_free); -EBADMSG when the text is not an intent a merge
 * could have written, with *reason (when reason is not NULL) saying what
 * is wrong, for a message; or -ENOMEM. *ret is written only on success,
 * *reason only on -EBADMSG. */
int merge_intent_parse(const char *buf, size_t len, struct merge_intent *ret,
                       const char **reason);

/* Reads <spool>/merge.intent (path is its path, for messages). Returns 0
 * and *ret; -ENOENT (without setting an error) when there is none; or a
 * negative errno with res->error set, -EBADMSG when it is damaged or not
 * a regular file. */
int merge_intent_read(int spool_fd, const char *path, struct merge_intent *ret,
                      struct merge_result *res);

/* Step 1: merge.intent.tmp, fsync, rename to merge.intent, fsync the spool. */
int merge_intent_write(int spool_fd, const char *spool, const char *text, size_t len,
                       struct merge_result *res);

/* Step 6, and the end of a recovery: unlinks merge.intent, fsyncs the
 * spool. */
int merge_intent_remove(int spool_fd, const char *spool, struct merge_result *res);

/* ---- stream positions (merge-positions.c) ---- */

/* Before --delete removes the n sources at v: writes one entry for every
 * stream among them (version 3 shards with a stream) to <spool>/streams/
 * with positions_write(spool_fd, "merge", ...), durably: next_position is
 * the highest first_position + records of the stream's sources, newest_ns
 * the highest newest record time (the trailer's, when it says later), uid
 * and producer those of its header. Nothing is written when no source has
 * a stream. Returns 0 (with res->positions_file set, after opts->at_step
 * MERGE_STEP_POSITIONS_WRITTEN, when a file was written), or a negative errno with res->error set: then
 * no source may be removed. */
int merge_write_positions(int spool_fd, const char *spool, const struct merge_source *v, size_t n,
                          const struct merge_opts *opts, struct merge_result *res);

/* ---- the steps (merge-run.c) and recovery (merge-recovery.c) ---- */

/* Step 5: unlinks each source still present and fsyncs done/. A source
 * already gone is fine: a killed run may have removed it. */
int merge_delete_sources(int done_fd, const char *done_path, const struct merge_source *v,
                         size_t n, const struct merge_opts *opts, size_t *ret_deleted,
                         struct merge_result *res);

/* Finishes or rolls back the merge that left <spool>/merge.intent, and
 * removes a leftover merge.intent.tmp; res->recovery and the recovery_*
 * fields say what was done. Returns 0 (also when there was nothing to
 * do), or a negative errno with res->error set, having changed nothing
 * when it could not decide safely. */
int merge_recover(int spool_fd, const char *spool, int done_fd, const char *done_path,
                  const struct merge_opts *opts, struct merge_result *res);
