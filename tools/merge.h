/* logctl merge as a library: list the sealed shards of a spool, check every
 * one with the shard reader, and copy them back to back into one new file
 * that appears under its final name only once it is complete and synced.
 *
 * The module never prints; it fills a struct merge_result (figures, and an
 * error message naming the file and the reason) and logctl.c reports it.
 * Functions return 0 or a negative errno. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
    dev_t dev;
    ino_t ino;
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

struct merge_opts {
    const char *spool;   /* reads <spool>/done/ */
    const char *output;  /* NULL: <spool>/merged/merged-<UTC YYYYmmddTHHMMSSZ>.lsm */
    bool force_fallback; /* skip copy_file_range (tests; odd filesystems) */
    /* Optional: called after every source was checked, before each one is
     * copied. A negative return aborts the merge with that error (e.g.
     * -ECANCELED on a signal); the temp file is removed and no output is
     * created. Tests use it to interfere with a merge in progress. */
    int (*before_copy)(const struct merge_source *src, void *userdata);
    void *userdata;
};

struct merge_result {
    char *output_path;             /* the file written; NULL when none was */
    size_t shards;                 /* shards merged */
    uint64_t records;              /* records in them */
    uint64_t bytes;                /* bytes written */
    bool used_fallback;            /* the read/write copy was used */
    struct merge_source *sources;  /* the shards, in output order */
    size_t n_sources;
    char *error;                   /* on failure: "<file>: <reason>", or NULL
                                      when even that could not be allocated */
};

/* Runs one merge. *ret is always initialised (call merge_result_free after).
 * Returns 0 when the output is written and durable, or when there was
 * nothing to merge (shards == 0, no file and no directory created);
 * otherwise a negative errno with ret->error set, and no output file. The
 * exception: when only the final fsync of the output's directory fails, the
 * output exists but may not survive a crash; the sources are untouched in
 * every case. */
int merge_run(const struct merge_opts *opts, struct merge_result *ret);

void merge_result_free(struct merge_result *r);
