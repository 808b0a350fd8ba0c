/* A one-line progress display for long logctl operations (merge), on a
 * terminal only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct progress {
    int fd; /* the terminal drawn on; -1: none, draw nothing */
    uint64_t start_ns, after_ns, last_draw_ns;
    uint64_t check_total;
    bool drawn;
};

/* Picks standard error if it is a terminal, else standard output if it is,
 * else nothing; starts the clock. */
void progress_init(struct progress *p);

/* The work so far: in the check pass (copying false) or the copy pass. */
void progress_update(struct progress *p, bool copying, size_t shards_done, size_t shards_total,
                     uint64_t bytes_done, uint64_t bytes_total);

/* Erases the line, before anything else is printed. */
void progress_clear(struct progress *p);
