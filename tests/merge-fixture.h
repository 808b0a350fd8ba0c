/* The fixtures the merge engine's unit tests share (tests/test-merge*.c):
 * a spool in its own mkdtemp directory, shards built by the common encoder
 * as the daemon writes and seals them, the eleven sorted_specs most tests
 * merge, and the checks of a merged file and of what a merge leaves behind.
 * Every helper fails the running cmocka test on an unexpected error instead
 * of returning it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BASE_TS 1700000000000000000ull

struct shard_spec {
    const char *producer;
    uint64_t id;
    unsigned records;
};

/* A spool: <tmp>/spool/{done,active}, and <tmp>/out for outputs. */
struct fixture {
    char *tmp;
    char *spool;
    char *done;
    char *out;
};

/* Makes the spool and output directories under a fresh temporary one. */
void fixture_init(struct fixture *f);

/* Frees f's paths and removes its whole temporary directory. */
void fixture_free(struct fixture *f);

/* A fresh mkdtemp directory under /tmp; the caller frees it with rm_rf. */
char *make_tmpdir(void);

/* Removes dir and everything below it, then frees the string. */
void rm_rf(char *dir);

/* a/b, malloc'd. */
char *join(const char *a, const char *b);

void write_file(const char *path, const void *buf, size_t len);

/* The whole file, malloc'd, its length in *ret_len. */
unsigned char *read_file(const char *path, size_t *ret_len);

bool exists(const char *path);

/* Entries of dir other than "." and "..". */
size_t count_entries(const char *dir);

/* The size of the file at path. */
uint64_t file_size(const char *path);

/* len bytes of a fixed pseudo-random sequence chosen by seed, malloc'd. */
unsigned char *pattern(size_t len, uint32_t seed);

/* The bytes of one shard, a header and spec->records records, malloc'd. */
unsigned char *build_shard(const struct shard_spec *spec, size_t *ret_len);

/* The file name the daemon gives the shard: <producer>.<16 hex>.shard. */
char *shard_name(const char *producer, uint64_t id);

/* build_shard's bytes, into done/ under shard_name. */
void write_shard(const char *done, const struct shard_spec *spec);

/* The shard of spec as the daemon seals it, trailer and padding included. */
unsigned char *build_sealed(const struct shard_spec *spec, size_t *ret_len);

/* build_sealed's bytes, altered by damage unless it is NULL, into f's
 * done/ under shard_name. */
void write_sealed(const struct fixture *f, const struct shard_spec *spec,
                  void (*damage)(unsigned char *buf, size_t *len));

/* A damage for write_sealed: the last three bytes cut off. */
void cut_three(unsigned char *buf, size_t *len);

/* Files under and around done/ that merge must never take. */
void write_junk(const struct fixture *f);

/* The shards most merges are tested on, in the order a merge must copy
 * them; merge-fixture.c says why they are these. */
#define N_SORTED ((size_t)11)
extern const struct shard_spec sorted_specs[];

/* sorted_specs written into done in a fixed order other than theirs. */
void write_sorted_specs_shuffled(const char *done);

/* How many of sorted_specs are still in f's done/. */
size_t sources_left(const struct fixture *f);

/* Asserts that no intent, half-written intent or temp output is left. */
void check_no_leftovers(const struct fixture *f);

/* Asserts that path is the merge of sorted_specs without sorted_specs[skip]
 * (SIZE_MAX: of all of them), byte for byte and record by record. */
void check_output_without(const char *path, size_t skip);

/* check_output_without(path, SIZE_MAX). */
void check_output(const char *path, const struct fixture *f);
