/* What the syslog stream socket's two files share: the listener
 * (syslog-stream.c: the socket, admission, sweep, rotate, drain) and its
 * connections (syslog-stream-conn.c: reading, framing, storing, waiting).
 * Nothing else includes this. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "budget.h"
#include "list.h"
#include "read-turns.h"
#include "shard-events.h"
#include "shard_format.h"
#include "syslog_frame.h"
#include "syslog_msg.h"
#include "unixsock.h"

enum conn_state {
    CONN_READING, /* watching the socket */
    CONN_PAUSED,  /* over a budget: on l->paused until buffers come back */
    CONN_QUOTA,   /* its producer is at its disk quota: waits on it (budget.h) */
    CONN_TURN,    /* found the tick's read budget spent: waits for its turn (read-turns.h) */
    CONN_CLOSING, /* the poll handle is closing */
};

struct conn {
    struct syslog_stream *l;
    struct list_node node;        /* l->conns */
    struct list_node paused_node; /* l->paused while CONN_PAUSED */
    struct read_turn turn;        /* in read-turns.c's queue while CONN_TURN */
    enum conn_state state;
    int fd;
    uv_poll_t poll;
    uint64_t id;
    struct shard_creds creds; /* the peer's, from SO_PEERCRED */
    struct syslog_framer framer;
    char *buf; /* bytes read and not yet framed; NULL when there are none */
    size_t len, cap;
    size_t stalled; /* of len, counted as stalled while CONN_PAUSED (memory.h) */
    struct shard *shard; /* open, or NULL: the next message opens one */
    bool got_message; /* frame_buffer() stored one: the idle clock restarts */
    /* The producer name, from the first message; empty until then. */
    char name[SYSLOG_PRODUCER_NAME_SIZE];
    size_t name_len;
    uint64_t last_msg_mono_ns;
    uint64_t last_read_mono_ns;
    /* The producer's share of the disk budget, once named, and the
     * connection's place among its waiters while CONN_QUOTA; quota_hold:
     * framing stopped at a message its quota has no room for. */
    struct budget_producer *budget;
    struct budget_waiter quota_waiter;
    bool quota_hold;
};

struct syslog_stream {
    struct daemon *d;
    struct unixsock sock;
    bool activated;
    bool stopping;
    bool sock_closed;
    char *path;
    struct list_node conns;
    size_t n_conns;
    struct list_node paused; /* connections not reading, oldest pause first */
    uint64_t next_id;
    struct shard_subscriber on_shards;
    void (*stop_cb)(void *);
    void *stop_data;
};

/* ---- syslog-stream-conn.c, for the listener ---- */

/* Takes an admitted connection (fd, with its peer's credentials uc) into
 * l->conns and starts reading it; a connection that cannot be watched is
 * closed and logged. */
void stream_conn_accept(struct syslog_stream *l, int fd, const struct ucred *uc);

/* The periodic check at now: seals the shard idle for idle_ns or older
 * than max_age_ns, and gives back an empty receive buffer unused for a
 * while. */
void stream_conn_sweep(struct conn *c, uint64_t now, uint64_t idle_ns, uint64_t max_age_ns);

/* Seals c's shard if it has one and its producer is producer (NULL: any).
 * Returns whether it did. */
bool stream_conn_rotate(struct conn *c, const char *producer);

/* The drain: reads what the peer has sent, stores it, and closes c (it is
 * freed once its handle is closed). */
void stream_conn_drain(struct conn *c);

/* Buffers came back: the connections paused for memory read again, first
 * paused first, while the daemon stays under three quarters of its limit. */
void stream_conns_resume(struct syslog_stream *l);

/* ---- syslog-stream.c, for the connections ---- */

/* A connection was freed (or the socket closed): l frees itself and calls
 * its stop callback once it is stopping and nothing is left open. */
void syslog_stream_conn_gone(struct syslog_stream *l);
