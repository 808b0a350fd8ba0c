/* What the logctl prune tests share (tests/test-prune*.c): a spool of
 * done/, active/, merged/ and quarantine/ in the harness's temporary
 * directory, and a directory outside the spool; sealed shards and merged
 * files of a chosen size and age, built by the common encoder as the
 * daemon seals them and merge names them; ship/progress as logctl ship
 * stores it; what streams/ and done/ know of each stream's position; and
 * the real logctl prune run with its output checked. Every helper fails
 * the running cmocka test on an unexpected error instead of returning it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "shard_format.h"
#include "spool_names.h"
#include "stream_positions.h"

#define BLOCK 4096u
#define SEC 1000000000ull
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)

/* ---- the spool ---- */

struct world {
    struct harness h;
    char *done, *active, *merged, *quarantine, *streams, *outside;
    uint64_t now;      /* when the world was made: every age counts from it */
    uint64_t next_id;  /* shard ids of the shards written here */
};

/* Makes the directory path (mode 0750); one that exists already is fine. */
void make_dir(const char *path);

/* cmocka setup and teardown of a struct world: the spool and its
 * directories except streams/ (logctl prune makes it, and some tests
 * check that it does not), and outside/ beside the spool. The teardown
 * kills a daemon the test left running. */
int setup(void **state);
int teardown(void **state);

/* Whether anything is at path, a symbolic link not followed. */
bool exists(const char *path);

/* Creates path (it must not exist) holding exactly buf. */
void write_file(const char *path, const void *buf, size_t len);

/* A shard the test wrote: where it is and what it holds. */
struct shard {
    char name[SPOOL_NAME_SIZE];
    char *path;
    struct shard_header h;
    uint64_t records;
    uint64_t newest_ns;
    uint64_t bytes;
};

/* Frees s->path; the file stays. */
void shard_free(struct shard *s);

/* Writes a sealed shard of producer into dir (done/, or elsewhere) of
 * exactly blocks * BLOCK bytes, its records of 100 bytes "<producer>
 * <position>" a millisecond apart, the newest at newest_ns; with stream
 * (16 bytes) a version 3 shard of that stream from position first. The
 * header names this process's uid and gid: the daemon resumes a stream
 * only for its owner. */
struct shard add_shard(struct world *w, const char *dir, const char *producer,
                       const uint8_t *stream, uint64_t first, unsigned blocks,
                       uint64_t newest_ns);

/* A merged file of blocks one-block shards, under merge's default name for
 * time ns, in dir. Returns its path (free it). */
char *add_merged(struct world *w, const char *dir, uint64_t ns, unsigned blocks);

/* A stream id of SHARD_STREAM_ID_SIZE bytes, the same for the same seed. */
void make_stream_id(uint8_t *id, unsigned seed);

/* <spool>/ship/progress as logctl ship stores it after a commit. */
void store_progress(struct world *w, struct positions_entry *v, size_t n);

/* A progress entry saying the shard s is shipped up to (not including)
 * position upto of its stream (its record index, without a stream). */
struct positions_entry shipped_to(const struct shard *s, uint64_t upto);

/* The position after s's last record. */
uint64_t shard_end(const struct shard *s);

/* ---- what the positions files and done/ know of each stream ---- */

struct known {
    uint8_t id[SHARD_STREAM_ID_SIZE];
    uint64_t next;
};

struct known_set {
    struct known v[256];
    size_t n;
};

/* The positions of streams/ alone (with_done false), or with what the
 * version 3 shards of done/ say, as the daemon rebuilds them at start.
 * A positions file that does not load fails the test. */
void known_positions(const struct world *w, bool with_done, struct known_set *k);

/* The next position k knows of stream id, 0 for a stream it does not know. */
uint64_t known_next(const struct known_set *k, const uint8_t *id);

/* ---- running logctl prune ---- */

/* logctl prune --config <config> --spool <spool> and up to six more
 * arguments, the first NULL ending them. */
struct harness_run prune(struct world *w, const char *a1, const char *a2, const char *a3,
                         const char *a4, const char *a5, const char *a6);

/* Fails unless the lines of r's output that start with verb ("removed",
 * "would remove") name exactly want[0..n), in that order. */
void expect_removed(const struct harness_run *r, const char *verb, char *const *want,
                    size_t n);

/* Fails unless the line of r's output that names path (with a space
 * after it) holds needle. */
void line_has(const struct harness_run *r, const char *path, const char *needle);

/* The formatted string, malloc'd. */
char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
