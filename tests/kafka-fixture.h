/* For the shipping tests: librdkafka's own mock Kafka cluster, run by
 * tests/kafka-mock in a process of its own (the real Kafka protocol over
 * 127.0.0.1), commands to it (a broker down, errors injected), logctl ship
 * started as a user starts it, and kcat reading back what a
 * read_committed consumer sees. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

struct kafka_mock {
    pid_t pid;
    int to_mock;    /* its stdin: commands */
    int from_mock;  /* its stdout: the answers */
    char brokers[512];
};

/* Starts a mock cluster of n_brokers; fails the test when it cannot.
 * Skips the test (77 through cmocka's skip()) when KAFKA_MOCK or KCAT is
 * not set, i.e. the build found no librdkafka or no kcat. */
void kafka_mock_start(struct kafka_mock *m, unsigned n_brokers);
/* Sends one command ("down 1") and fails the test unless it says ok. */
void kafka_mock_command(struct kafka_mock *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void kafka_mock_stop(struct kafka_mock *m);

/* logctl ship --spool <spool> --brokers <brokers> plus extra (NULL-ended),
 * started with default signal dispositions, stderr appended to
 * <dir>/ship.log. Returns its pid. */
pid_t ship_spawn(struct harness *h, const struct kafka_mock *m, const char *const *extra);
/* ship_spawn, with RLIMIT_NOFILE's soft and hard limits set to these
 * before exec (0: that one unchanged). */
pid_t ship_spawn_nofile(struct harness *h, const struct kafka_mock *m, const char *const *extra,
                        uint64_t soft, uint64_t hard);
/* Waits up to timeout_ms for pid; its wait status (fails on a timeout). */
int ship_wait(pid_t pid, int timeout_ms);

/* One message as kcat printed it. */
struct kafka_msg {
    char *topic;
    char *key;
    int64_t timestamp_ms;
    char *headers; /* "k=v,k=v" */
    char *payload;
    int partition;
};

/* Every message of topic, read with isolation.level=read_committed from
 * the start to the end. Returns the count; *ret gets a new array. */
size_t kafka_consume(const struct kafka_mock *m, const char *topic, struct kafka_msg **ret);
void kafka_msgs_free(struct kafka_msg *v, size_t n);
/* A header's value (NULL when missing), copied into buf. */
const char *kafka_header(const struct kafka_msg *msg, const char *name, char *buf, size_t size);
