/* What the syslog input tests share (test-syslog-datagram.c,
 * test-syslog-stream.c, test-syslog-stream-limits.c): senders that are not
 * ours, found on $PATH; the daemon started with a stream socket and
 * connections to it from the test itself; and the spool read back through
 * the real logctl. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "harness.h"

/* The program's path from $PATH (harness_run does not search it), or
 * NULL. */
char *syslog_find_program(const char *name);

/* The same, or the test is skipped when it is not installed. */
char *syslog_need_program(const char *name);

/* One record as logctl cat --json shows it. */
struct syslog_rec {
    char producer[80];
    char source[32];
    char shard[80]; /* the shard's id */
    uint64_t hdr_pid, hdr_uid, hdr_gid;
    uint64_t pid, uid, gid; /* the record's credentials */
    char *payload;          /* the bytes, or the base64 text when b64 */
    size_t len;
    bool b64;
};

/* Every record of a spool. */
struct syslog_recs {
    struct syslog_rec *v;
    size_t n;
};

void syslog_recs_free(struct syslog_recs *r);

/* Every record of the spool, as logctl cat --spool --json shows it, once
 * logctl verify has found every shard sound. */
struct syslog_recs syslog_read_spool(struct harness *h);

/* The one record of producer with exactly these payload bytes, whose
 * source (syslog-datagram, syslog-stream) must be source; fails the test
 * unless there is exactly one, listing the records. */
const struct syslog_rec *syslog_expect_once(const struct syslog_recs *r, const char *source,
                                           const char *producer, const void *payload,
                                           size_t len);

/* The record must name this process as its sender, in its credentials
 * and in the header (it opened the shard). */
void syslog_expect_our_creds(const struct syslog_rec *x);

/* "<ident>.u<our uid>", malloc'd. */
char *syslog_producer_of(const char *ident);

/* SIGTERM, and the daemon must exit 0 within 30 s. */
void syslog_stop_clean(struct harness *h);

/* A number of logctl status --json: key of the syslog object (group
 * NULL), of an object in it named by a dotted path ("dropped",
 * "stream.dropped"), or (group "") of the top level. UINT64_MAX when it
 * is absent. */
uint64_t syslog_status(struct harness *h, const char *group, const char *key);

/* Waits up to timeout_ms until done/ holds at least n sealed shards. */
bool syslog_wait_sealed(struct harness *h, size_t n, int timeout_ms);

/* ---- the stream socket ---- */

/* Where syslog_stream_start puts the stream socket: stream.sock in the
 * harness's directory. malloc'd. */
char *syslog_stream_path(struct harness *h);

/* Writes config (NULL: an empty file) and starts the daemon with
 * --syslog-stream-socket at syslog_stream_path. */
void syslog_stream_start(struct harness *h, const char *config);

/* A connection to the stream socket from this process (the test is the
 * peer, its credentials the ones stored). */
int syslog_stream_connect(struct harness *h);

/* Sends all len bytes of buf on the connection fd, blocking as long as
 * the daemon does not read; fails the test when the connection breaks. */
void syslog_send_all(int fd, const void *buf, size_t len);

/* syslog_send_all of the string text, without its NUL. */
void syslog_send_text(int fd, const char *text);

/* ---- the datagram socket ---- */

/* Where syslog_dgram_start puts the datagram socket: log.sock in the
 * harness's directory. malloc'd. */
char *syslog_dgram_path(struct harness *h);

/* Writes config (NULL: an empty file) and starts the daemon with
 * --syslog-socket at syslog_dgram_path. */
void syslog_dgram_start(struct harness *h, const char *config);

/* A datagram socket of this process (the test is the sender, so the
 * credentials stored must be its own), with a send buffer of 256 KiB
 * where the system allows. */
int syslog_dgram_socket(void);

/* The address of syslog_dgram_path, its length in *ret_len. */
struct sockaddr_un syslog_dgram_address(struct harness *h, socklen_t *ret_len);

/* Sends len bytes of buf as one datagram to the socket; fails the test
 * when it cannot. */
void syslog_dgram_send_raw(struct harness *h, const void *buf, size_t len);

/* syslog_dgram_send_raw of the string text, without its NUL. */
void syslog_dgram_send_text(struct harness *h, const char *text);
