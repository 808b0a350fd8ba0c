/* Producers for the durability and full-disk tests: child processes that
 * append numbered records through the client library and publish, after
 * every flush, how many of them were acknowledged; and the check that
 * every acknowledged record came back exactly once, in order. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

#define MAX_PRODUCERS 64

/* Each producer writes the count of records acknowledged so far into its
 * own 8-byte slot of a shared file after every successful flush, so the
 * parent knows what was promised even when the producer is cut off. */
struct ack_board {
    char *path;
    int fd;
};

/* <h->dir>/acked.bin with MAX_PRODUCERS zeroed slots. */
void board_open(struct ack_board *b, const struct harness *h);
uint64_t board_get(const struct ack_board *b, unsigned slot);
void board_close(struct ack_board *b);

/* Forks a producer named name on sock: up to count records (0: until an
 * error) made by harness_make_record(name, i, size), a flush every
 * flush_every, the acknowledged count in slot. It exits 0 when all were
 * acknowledged, 10 + errno of the failing call otherwise, 2 when it could
 * not connect. */
pid_t spawn(const char *sock, const char *name, unsigned slot, int board_fd, uint64_t count,
            size_t size, uint64_t flush_every);

/* Waits for a producer; returns its exit status (0, or 10 + errno). */
int reap(pid_t pid);

/* Per producer name: the records in text (one per line, as logctl cat
 * prints them) must be 0, 1, 2, ... in order with no gap and no repeat, and
 * at least acked[i] of them. Lines of producers not listed fail the check.
 * ret_found (may be NULL) gets how many of each were found. */
void check_exactly_once(char *text, char names[][32], const uint64_t *acked, size_t n,
                        uint64_t *ret_found);
