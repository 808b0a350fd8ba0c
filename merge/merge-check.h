/* Internal to the merge module (merge.c, merge-check.c): the check pass
 * and what becomes of the sources it finds unusable. Not for other parts
 * of logctl; merge.h is the module's interface. */
#pragma once

#include <stdbool.h>

#include "merge.h"

/* The directory of the spool that damaged sources are moved to. */
#define MERGE_QUARANTINE_DIR "quarantine"

/* Sets res->error from fmt and returns err, so that failures read
 * "return merge_fail(res, -E..., ...);". */
__attribute__((format(printf, 3, 4))) int merge_fail(struct merge_result *res, int err,
                                                     const char *fmt, ...);

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
