/* What the shipping tests share (test-ship.c, test-ship-fence.c): a mock
 * cluster and a daemon per test, producers written against <logshard.h>,
 * and what a read_committed consumer (kcat) sees, checked record by
 * record. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "kafka-fixture.h"

struct ship_test {
    struct harness h;
    struct kafka_mock m;
};

/* cmocka setup and teardown: a harness, and after the test the mock and
 * the daemon stopped and the directory removed. */
int ship_test_setup(void **state);
int ship_test_teardown(void **state);

/* A producer process sending records "<name> <12-digit index>" 0 .. count
 * - 1, flushing every 256; started with default signal dispositions. */
pid_t spawn_producer(struct harness *h, const char *name, uint64_t count);
/* Waits for each; fails the test unless each exited 0. */
void wait_producers(const pid_t *pids, unsigned n);
/* spawn_producer and wait_producers for one. */
void produce(struct harness *h, const char *name, uint64_t count);

/* Checks topic logs.<name> for each producer: records 0 .. count - 1 of
 * it, once each, in order, with key, headers and timestamp as
 * documented. */
void expect_exactly_once(struct ship_test *t, char names[][32], unsigned n, uint64_t count);

/* What logctl ship wrote to <dir>/ship.log so far ("" when nothing). */
char *ship_log(struct ship_test *t);
/* logctl ship with these extra arguments, to its end: its exit status
 * (-1 when killed). */
int run_ship(struct ship_test *t, const char *const *extra);
/* --topic logs.{producer} */
extern const char *const logs_topic[];

/* A figure of the running shipper's status file; -1 when it has none. */
int64_t status_figure(const char *path, const char *key);

struct shipped_cond {
    const char *path;
    int64_t records;
};

/* For harness_wait_for: the follower has committed at least that many
 * records and has no lag. */
bool has_shipped(void *arg);
