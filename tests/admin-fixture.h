/* The fixtures the operator-side integration tests share (tests/test-admin*.c):
 * logctl run against the real daemon started by the harness, its JSON
 * replies, producers in this process through the real liblogshard, and
 * the files a rotation leaves in the spool. Every helper fails the running
 * cmocka test on an unexpected error instead of returning it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"

/* CLOCK_MONOTONIC in milliseconds, for deadlines. */
int64_t now_ms(void);

/* Parses one JSON value; fails the test when text is not JSON. */
struct json_value *parse_json(const char *text, size_t len);

/* Splits JSON lines (NDJSON) into parsed values; returns how many. */
size_t parse_lines(const char *text, struct json_value **out, size_t max);
void free_lines(struct json_value **v, size_t n);

/* The daemon's reply to logctl status --json. */
struct json_value *status_json(struct harness *h);

/* ---- producers, in this process ---- */

logshard *producer_open(struct harness *h, const char *name);
void producer_send(logshard *ls, const void *rec, size_t len);
void producer_sendf(logshard *ls, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void producer_flush(logshard *ls);

/* logctl rotate, of one producer or (producer NULL) of all of them. */
void rotate(struct harness *h, const char *producer);

/* Files in spool/sub whose names start with prefix. */
size_t count_prefix(struct harness *h, const char *sub, const char *prefix);

/* The path of the one file in spool/sub starting with prefix. */
char *find_file(struct harness *h, const char *sub, const char *prefix);

/* ---- fixtures ---- */

/* A child still running when a test fails (cat --follow) would keep the
 * test's output pipes open and the runner waiting; a test that starts one
 * records its pid here, and teardown ends it. */
extern pid_t live_child;

/* harness_teardown, after ending live_child. */
int teardown(void **state);

/* Stops the daemon with SIGTERM and checks that it exited with status 0. */
void stop_daemon(struct harness *h);
