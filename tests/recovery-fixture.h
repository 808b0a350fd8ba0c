/* The fixtures the start-up recovery tests share (tests/test-recovery*.c):
 * a spool of active/ and done/ in its own mkdtemp directory, with recovery's
 * report lines and progress calls recorded; shards built by the common
 * encoder; and the checks of files, directories and recovery's figures.
 * Every helper fails the running cmocka test on an unexpected error instead
 * of returning it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "recovery.h"

#define MAX_LINES 64

/* A spool in dir, its directories open, and what recovery reported. */
struct fixture {
    char dir[64];
    int spool_fd, active_fd, done_fd;
    struct recovery_ops ops;
    int nlines;
    int levels[MAX_LINES];
    char *lines[MAX_LINES];
    int nprogress;
    uint64_t progress_done[MAX_LINES], progress_total[MAX_LINES];
};

/* Forgets the report lines and progress calls recorded so far. */
void clear_log(struct fixture *f);

/* Makes the directory parent/name (mode 0750) and opens it. */
int open_dir(int parent, const char *name);

/* cmocka setup and teardown of a struct fixture. */
int setup(void **state);
int teardown(void **state);

/* ---- building and inspecting files ---- */

struct shard_bytes {
    unsigned char buf[4096];
    size_t len;
    size_t record_offset[16]; /* where record i starts */
};

/* A shard of producer/id holding records "record <i>" (timestamps 1000 + i)
 * for i < nrec. */
void build_shard(struct shard_bytes *s, const char *producer, uint64_t id, unsigned nrec);

void write_file(int dir_fd, const char *name, const void *buf, size_t len);

/* The whole file, or NULL when it does not exist. */
unsigned char *read_file(int dir_fd, const char *name, size_t *ret_len);

/* name holds exactly expect (len bytes). */
void assert_file_equals(int dir_fd, const char *name, const void *expect, size_t len);

/* name in done/ holds expect (len bytes) and then the seal trailer recovery
 * added: the trailer reads as valid, follows exactly len bytes and ends the
 * file on a multiple of the filesystem's block size. */
void assert_sealed_equals(int dir_fd, const char *name, const void *expect, size_t len);

bool exists(int dir_fd, const char *name);

/* The stamp recovery leaves in the spool once it has checked every shard in
 * done/. */
#define STAMP "done.checked"

/* The entries of a directory, sorted, each followed by '\n'. */
char *list_dir(int dir_fd);
void assert_dir_lists(int dir_fd, const char *expect);

/* Reads done/<name> with the shard reader: the header of producer/id, then
 * exactly "record <i>" for i < nrec, then a clean end of file. */
void assert_reads_cleanly(struct fixture *f, const char *name, const char *producer,
                          uint64_t id, unsigned nrec);

/* Runs recovery, which must succeed. */
void run_recovery(struct fixture *f, struct recovery_stats *ret);

/* The line must have been reported exactly once, at level. */
void assert_reported(struct fixture *f, int level, const char *line);

void assert_stats(const struct recovery_stats *s, uint64_t scanned, uint64_t sealed,
                  uint64_t quarantined, uint64_t duplicates, uint64_t ignored,
                  uint64_t records, uint64_t cut);

/* ---- done/ ---- */

/* Appends the seal trailer of the shard s holds (records of it), unaligned. */
void seal_bytes(struct shard_bytes *s, uint64_t records);

/* What an older daemon sealed on a full disk: a seal trailer for a shard of
 * no bytes at all, padded to the block size, with no header before it. */
size_t trailer_only(unsigned char *buf, size_t cap, size_t align);
