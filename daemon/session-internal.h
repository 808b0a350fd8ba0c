/* What the session's files share: the connection's struct and its states.
 * session.h is the interface the rest of the daemon uses; this header is
 * for session.c (lifecycle and output), session-recv.c (receiving),
 * session-ack.c (the ACK ledger) and session-admit.c (admission) only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "budget.h"
#include "list.h"
#include "read-turns.h"
#include "session.h"
#include "shard_format.h"
#include "wire.h"

struct shard;

/* Shards a session may have retired and still be waiting on (for ACKs)
 * before it stops retiring more (session_can_retire). */
#define SESSION_MAX_RETIRING 8u

/* The connection's life. Every change goes through session_set_state(),
 * which asserts that it is one of these:
 *   HELLO_WAIT -> STREAMING | DRAINING | FAILING | CLOSING
 *   STREAMING  -> DRAINING | FAILING | CLOSING
 *   DRAINING   -> FAILING | CLOSING
 *   FAILING    -> CLOSING
 *   CLOSING    -> (nothing; the close callback frees the session) */
enum session_state {
    SESSION_HELLO_WAIT, /* admitted (or being refused); no HELLO yet */
    SESSION_STREAMING,  /* HELLO taken: APPENDs are accepted */
    SESSION_DRAINING,   /* no more reading; finish, ACK, close */
    SESSION_FAILING,    /* like draining, then send the ERROR */
    SESSION_CLOSING,    /* uv_close called */
};

/* Whether the connection is read, and if not, why. Orthogonal to the
 * lifecycle only while the session is open (HELLO_WAIT or STREAMING): once
 * it is not, this is RX_STOPPED for good. */
enum session_rx {
    RX_STOPPED, /* not reading: not started yet, or the session is no longer open */
    RX_READING, /* uv_read_start in force */
    RX_GATED,   /* held by the always gate: a frame waits for the last sync */
    RX_PAUSED,  /* over its own or the daemon's budget; on d->paused_sessions */
    RX_QUOTA,   /* its producer is at its disk quota: waits on it (budget.h) */
    RX_TURN,    /* has more to read, but the loop tick's read budget is spent:
                 * waits its turn on d->rx_turns, read first at the next tick */
};

/* What the connection's output has got to: WELCOME, then ACKs, then the
 * ERROR of a failing session. Every change goes through session_set_out(),
 * which asserts the order. */
enum session_out {
    OUT_QUIET,   /* before HELLO: nothing is due yet */
    OUT_WELCOME, /* HELLO taken, WELCOME not yet sent */
    OUT_ACKS,    /* WELCOME sent: ACKs as records are acknowledged */
    OUT_DONE,    /* the ERROR sent, or the peer gone: nothing more is sent */
};

/* Whether the session holds a place in sessions_open (and in its uid's
 * count). Kept apart from the lifecycle because it outlives the open
 * states: a failing or closing session that was admitted still holds its
 * place until it is freed, one that was refused never did. */
enum session_admission {
    ADMISSION_PENDING,  /* not decided yet (or closed before it was) */
    ADMISSION_ADMITTED, /* counted in sessions_open */
    ADMISSION_REFUSED,  /* an access list or a limit refused it */
};

struct retired {
    struct shard *shard;
    uint64_t base; /* session sequence number of the shard's first record */
};

struct session {
    struct daemon *d;
    struct list_node node;
    uv_pipe_t pipe;
    uint64_t id;
    struct ucred cred;
    enum session_state state;
    enum session_rx rx;
    enum session_out out;
    enum session_admission admission;

    unsigned fsync_policy; /* enum fsync_policy, fixed at HELLO */
    /* Empty until HELLO: names are never empty (session_said_hello). */
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    size_t producer_len;

    /* Bytes of an incomplete frame (or of frames held back by the always
     * gate) between reads. NULL while there are none: an idle producer
     * holds no receive buffer; reads land in the daemon's shared one. */
    unsigned char *rx_buf;
    size_t rx_len, rx_cap;
    size_t rx_need; /* the size of the incomplete frame rx_buf begins, once its header
                     * is in (0 before): reads end where it does */
    struct list_node paused_node; /* d->paused_sessions while RX_PAUSED */
    struct read_turn turn;        /* waits in read-turns.c's queue while RX_TURN */
    bool turn_over; /* on_alloc found the tick's budget spent: defer, not fail */
    /* The producer's share of the disk budget, from HELLO on (NULL
     * before), and the session's place among its waiters while RX_QUOTA. */
    struct budget_producer *budget;
    struct budget_waiter quota_waiter;
    uint64_t accepted_ns;
    uint64_t last_rx_ns;

    uint64_t received;
    uint64_t ack_sent;
    bool ack_due; /* duplicates came: the producer waits for an ACK that covers them */

    /* The producer's stream (docs/FORMAT.md): until the protocol lets the
     * library name its stream, every connection is a stream of its own,
     * with an identity picked at HELLO (random, never all zero) and
     * positions from stream_start (0). Record n of the connection (the
     * session sequence number, as received counts them) has position
     * stream_start + n, so a roll-over continues where the last shard
     * stopped. Records are counted only once taken into a shard, and
     * after a failure the session takes none, so no position is skipped. */
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t stream_start;

    /* Protocol version 2 (docs/PROTOCOL.md): the library names the stream
     * and the first position it still holds; the daemon answers with the
     * position the stream continues at (stream_start), once the stream is
     * quiet: no earlier connection of it left and every shard of it
     * sealed. Until then (resume_wait) APPENDs wait like behind the always
     * gate. */
    unsigned protocol;            /* WIRE_PROTOCOL_V1 or WIRE_PROTOCOL_V2, from HELLO */
    struct stream *stream;        /* version 2: the table's entry, claimed at HELLO */
    uint64_t hello_position;      /* version 2: HELLO's first_position */
    bool resume_wait;
    struct list_node resume_node; /* d->resuming_sessions while resume_wait */

    struct shard *current;
    uint64_t current_base;
    struct retired retiring[SESSION_MAX_RETIRING];
    unsigned n_retiring;
    uint64_t ack_limit; /* records after a failed write are never acknowledged */
    /* Limits as announced in WELCOME; a reload does not change them under a
     * client that has built its frames for them. */
    uint64_t max_frame_bytes;
    uint64_t max_record_bytes;

    /* Output: one write at a time. Whether one is in flight is independent
     * of how far the output has got (a WELCOME, an ACK or the ERROR may be
     * the one in flight), so it is its own flag: libuv keeps no such state
     * on a uv_write_t we could ask. */
    uv_write_t wreq;
    bool write_busy;
    unsigned char obuf[WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX];
    uint32_t error_code;
    char *error_message; /* NULL: no ERROR to send (none, or no memory to say it) */
};

static inline bool session_is_open(const struct session *s)
{
    return s->state == SESSION_HELLO_WAIT || s->state == SESSION_STREAMING;
}

/* Whether the producer has named itself; it stays so after the session
 * stops being open, for the messages about it. */
static inline bool session_said_hello(const struct session *s)
{
    return s->producer_len > 0;
}

/* ---- session.c: lifecycle and output ---- */

void session_set_state(struct session *s, enum session_state next);
/* Sends what is due and closes once a draining or failing session has
 * nothing left to say; reading resumes where it may. */
void session_pump(struct session *s);
/* Ends the session: stop reading, let what was accepted be written, send
 * the last ACK, then the ERROR (code, message), close. */
void session_fail(struct session *s, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void session_close(struct session *s);
void session_handle_hello(struct session *s, const unsigned char *payload, size_t len);
/* The frame limit of the connection: max_frame_bytes, plus the position
 * an APPEND carries in version 2. */
uint64_t session_frame_limit(const struct session *s);
/* Opens the session's current shard if it has none. */
int session_ensure_shard(struct session *s);
/* "producer NAME (conn N, ...)" or "connection N (...)", for messages. */
const char *session_who(const struct session *s, char *buf, size_t len);

/* ---- session-recv.c: receive buffer, frames, backpressure ---- */

void session_start_reading(struct session *s);
/* Stops reading for good (the session is no longer open). */
void session_rx_stop(struct session *s);

/* Reads a session whose turn came (read-turns.h), straight from its
 * socket, up to the end of a frame; a full read takes another turn. */
void session_rx_take_turn(struct read_turn *t);
/* For session_pump: lifts the always gate once the last frame is synced,
 * and resumes a paused session once it is back under its budgets. */
void session_rx_pump(struct session *s);

/* budget.c's call back to a session waiting in RX_QUOTA: decodes the held
 * frames and reads again (or waits again). */
void session_quota_resume(struct budget_waiter *w);
/* Gives back the receive buffer and the memory it counted for. */
void session_rx_release(struct session *s);

/* ---- session-ack.c: the ACK ledger and the session's shards ---- */

/* Records acknowledged so far: every record up to it is written (and
 * synced, as the fsync policy asks). */
uint64_t session_acked_through(const struct session *s);
/* Whether every record taken has reached its end (written, or failed). */
bool session_all_settled(const struct session *s);
/* Memory held for the session's records until they are written. */
uint64_t session_buffered_bytes(const struct session *s);
/* fsync = always: whether the next APPEND must wait for the last sync. */
bool session_gate_closed(const struct session *s);
bool session_can_retire(const struct session *s);
void session_retire_current(struct session *s);
/* Lets go of retired shards that have nothing more to report. */
void session_release_settled(struct session *s);
/* A write or sync of sh failed: nothing after what it had acknowledged
 * will ever be. */
void session_ack_cap(struct session *s, const struct shard *sh);
/* Called at close: the session lets go of every shard. */
void session_release_shards(struct session *s);

/* ---- session-admit.c: admission ---- */

/* The access lists and the connection limits, checked before the producer
 * says anything. A refused peer gets an ERROR naming the rule and its
 * value, and is closed. */
void session_admit(struct session *s);
/* At close: gives back the session's place, if it held one. */
void session_admit_release(struct session *s);
