/* What the admin socket's files share: admin.c (the socket, the
 * connections, the protocol's framing and dispatch) and admin-commands.c
 * (status, ls and rotate). admin.h is the interface the daemon uses. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "admin.h"
#include "list.h"
#include "shard-events.h"
#include "unixsock.h"
#include "wire.h"

struct daemon;
struct json_out;
struct shard;

#define ADMIN_LINE_MAX 4096u
#define ADMIN_MAX_CLIENTS 64u

struct rotate_result {
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id;
    char *file; /* done/<name>, or where it was left */
    uint64_t records, bytes;
    int err;
    bool quarantined;
};

/* A connection's life, one request at a time (admin_client_set_state()
 * asserts every transition):
 *
 *   READING_REQUEST -> WORKING -> WRITING_REPLY -> READING_REQUEST ...
 *
 * WORKING answers directly (ls, an error) or waits: for a status job on
 * the thread pool, or for the seals a rotate asked for (enum client_work).
 * A reply after which the connection must end (a request that is not
 * JSON or of an unsupported version, out of memory) is WRITING_LAST_REPLY;
 * a line too long to read goes there straight from READING_REQUEST.
 * Every state may go to CLOSING (a timeout, a failed write, the end of
 * input with nothing left to answer, the drain); CLOSING is the last state:
 * the connection is freed, not moved to a CLOSED state, once its two
 * handles have closed and nothing of it is in flight (admin_client_maybe_free). */
enum client_state {
    CLIENT_READING_REQUEST, /* waiting for a complete line; the request timer runs */
    CLIENT_WORKING,         /* a request is taken; its reply is not being written yet */
    CLIENT_WRITING_REPLY,   /* a reply is being written; then the next request */
    CLIENT_WRITING_LAST_REPLY, /* a reply is being written; then the connection closes */
    CLIENT_CLOSING,         /* its handles are closing */
};

/* What a WORKING request waits for. Kept apart from the state because a
 * status job on the thread pool cannot be called back: it outlives a close,
 * and a CLOSING connection waits for it before it is freed. */
enum client_work {
    CLIENT_WORK_NONE,
    CLIENT_WORK_STATUS, /* a status job is on the thread pool */
    CLIENT_WORK_ROTATE, /* a rotate waits for the seals in wait_ids */
};

/* The reading side, apart from the state because it runs while a request
 * is answered: lines that arrive meanwhile wait in rx, answered in order.
 * PAUSED -> READING -> PAUSED (rx is full, or the connection closes) or
 * ENDED (the peer is done: what is in rx is answered, then the connection
 * closes). */
enum client_input {
    CLIENT_INPUT_PAUSED, /* not reading: not started yet, or rx is full */
    CLIENT_INPUT_READING,
    CLIENT_INPUT_ENDED,
};

struct client {
    struct admin *a;
    struct list_node node;
    uv_pipe_t pipe;
    uv_timer_t timer;
    unsigned handles_open;
    enum client_state state;
    enum client_work work;
    enum client_input input;
    struct ucred cred;

    char rx[ADMIN_LINE_MAX];
    size_t rx_len;

    /* rotate */
    char *rotate_producer; /* NULL: every producer */
    uint64_t *wait_ids;
    size_t n_wait, cap_wait;
    struct rotate_result *results;
    size_t n_results, cap_results;
    size_t rotate_retired, rotate_busy;
    /* Seals whose result could not be recorded (out of memory): the reply
     * lacks them, so the connection closes after it. */
    size_t rotate_lost;

    uv_write_t wreq;
    char *out; /* the reply being written; not NULL exactly while a write is in flight */
};

struct admin {
    struct daemon *d;
    struct unixsock sock;
    uid_t self_uid;
    struct list_node clients;
    size_t n_clients;
    struct client *collecting; /* the rotate request being set up */
    struct shard_subscriber on_shards; /* sealed events, for rotate */
    bool stopping;
    uint64_t emfile_logged_ns;
    bool sock_closed; /* unixsock_close has called back */
    void (*stop_cb)(void *);
    void *stop_data;
};

/* ---- admin.c ---- */

/* Closes the connection; it is freed once its handles are closed and no
 * work or write of it is in flight (admin_client_maybe_free). */
void admin_client_close(struct client *c);
void admin_client_maybe_free(struct client *c);
/* Says what a WORKING request waits for, or that it waits no more;
 * asserts the change is one that can happen. */
void admin_client_set_work(struct client *c, enum client_work next);
/* Sends an error reply (docs/PROTOCOL.md); then_close: close after it. */
void admin_send_error(struct client *c, int code, bool then_close, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The start and the end of every successful reply; admin_reply_end sends
 * it (then_close: close after it). */
void admin_reply_begin(struct json_out *o, const char *command);
void admin_reply_end(struct client *c, struct json_out *o, bool then_close);

/* ---- admin-commands.c ---- */

/* status: the figures of stats.c, the spool's usage measured on the
 * thread pool. */
void admin_status(struct client *c);
/* ls: the shards not yet sealed (of producer; NULL: of all). */
void admin_ls(struct client *c, const char *producer);
/* rotate: retires the current shards of producer (NULL: of all) and answers
 * once every matching shard being sealed is sealed. */
void admin_rotate(struct client *c, const char *producer);
/* The shards' sealed event (data: the admin): completes the rotate
 * requests that waited for s. */
void admin_on_shard_sealed(void *data, const struct shard *s, int err);
/* Forgets a connection's rotate request, answered or not. */
void admin_rotate_reset(struct client *c);
