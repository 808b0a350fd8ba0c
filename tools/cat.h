/* Between logctl cat (cat.c: files and the spool) and its --follow mode
 * (follow.c): which records to print and how. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"

struct cat_opts {
    bool meta;
    bool json;
    const char *const *producers; /* only these (none: every producer) */
    size_t n_producers;
    uint64_t since_ns; /* records received at or after; 0: no bound */
    uint64_t until_ns; /* at or before; UINT64_MAX: no bound */
};

/* Whether records of this producer are wanted. */
bool cat_wants_producer(const struct cat_opts *o, const char *producer);

/* Prints the record if its producer and time are wanted. Returns 0, or a
 * negative errno when standard output failed. */
int cat_print_record(const struct cat_opts *o, const struct shard_item *item);

/* logctl cat --follow: prints the records appended to the active shards of
 * the wanted producers in spool/active from now on, following each
 * producer into its next shard, until SIGINT or SIGTERM. Returns the exit
 * status. */
int cat_follow(const struct cat_opts *o, const char *spool);
