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

struct client {
    struct admin *a;
    struct list_node node;
    uv_pipe_t pipe;
    uv_timer_t timer;
    unsigned handles_open;
    bool closing;
    struct ucred cred;

    char rx[ADMIN_LINE_MAX];
    size_t rx_len;
    bool reading;
    bool peer_done;    /* end of input: answer what is here, then close */
    bool busy;         /* a request is being answered */
    bool work_pending; /* a status job is on the thread pool */

    /* rotate */
    bool rotating;
    char *rotate_producer; /* NULL: every producer */
    uint64_t *wait_ids;
    size_t n_wait, cap_wait;
    struct rotate_result *results;
    size_t n_results, cap_results;
    size_t rotate_retired, rotate_busy;

    uv_write_t wreq;
    char *out;
    bool writing;
    bool close_after_write;
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
/* Sends an error reply (docs/PROTOCOL.md); then_close: close after it. */
void admin_send_error(struct client *c, int code, bool then_close, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The start and the end of every successful reply; admin_reply_end sends
 * it. */
void admin_reply_begin(struct json_out *o, const char *command);
void admin_reply_end(struct client *c, struct json_out *o);

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
