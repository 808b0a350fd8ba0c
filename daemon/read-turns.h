/* Connections take turns at reading (read-turns.c): one read budget per
 * loop tick, shared by every connection that brings producers' records
 * (producer sessions and syslog stream connections), and the queue of
 * those that spent it and wait to be read at the next tick. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "list.h"

struct daemon;

/* A connection's place in the queue. Set take before the first wait. */
struct read_turn {
    struct list_node node; /* d->rx_turns while waiting; unlinked otherwise */
    /* Reads the connection whose turn came; it is off the queue by then
     * and may wait again (read_turns_wait) when it has more. */
    void (*take)(struct read_turn *t);
};

/* Sets up the queue and the tick's budget. Once, before any connection. */
void read_turns_init(struct daemon *d);

/* Prepares t (not waiting) for a connection that reads with take. */
void read_turn_init(struct read_turn *t, void (*take)(struct read_turn *t));

/* Whether this tick's budget is spent: a connection with more to read
 * should wait for its turn instead. */
bool read_turns_spent(const struct daemon *d);

/* Counts bytes a connection read in this tick against its budget. */
void read_turns_spend(struct daemon *d, size_t bytes);

/* Puts t at the end of the queue (counted in stats.read_turns) and keeps
 * the loop from blocking until the next tick has taken it. */
void read_turns_wait(struct daemon *d, struct read_turn *t);

/* Takes t off the queue, if it waits (a connection that stops or closes). */
void read_turns_leave(struct read_turn *t);

/* Whether t waits for its turn. */
bool read_turns_waiting(const struct read_turn *t);

/* Starts a loop tick's reading: renews the budget and gives the waiting
 * connections their turns, in the order they began to wait, while the
 * budget lasts. Once per tick, before the tick's writes are queued. */
void read_turns_take(struct daemon *d);
