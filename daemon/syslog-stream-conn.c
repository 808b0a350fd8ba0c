/* One connection of the syslog stream socket (syslog-stream-internal.h).
 *
 * Each connection is one producer, as a liblogshard connection is: its
 * records go to shards of its own (format version 4, source
 * syslog-stream), named <identifier>.u<uid> after the identifier of its
 * first message and the uid the kernel gives for the peer (SO_PEERCRED),
 * which every record carries with the peer's pid and gid. Later messages
 * with another identifier stay in the connection's shards: the connection,
 * not the text, is the producer.
 *
 * Where a message ends is syslog_frame.c's: LF or NUL, or RFC 6587 octet
 * counting, told apart by the first byte of the connection. A line over
 * max_record_bytes is cut there and stored cut (as every syslog daemon
 * does), the rest of it dropped and counted; an octet-counted frame whose
 * length field is malformed or over the limit leaves no way to find the
 * next message, so the connection is closed, with what came before it
 * kept. Every message is stored as received, less the trailer senders add
 * (syslog_msg_strip_trailer).
 *
 * Backpressure: a connection is not read while its shard and its receive
 * buffer hold more than session_buffer_bytes or the daemon more than
 * memory_limit_bytes; the sender then blocks in write() once the socket's
 * buffer is full. It reads again, in the order the connections paused,
 * under the same thresholds as a session (memory.h). While it is not read,
 * a connection keeps only the bytes of its unfinished message (rx_shrink),
 * and those count as stalled (memory_adjust_stalled): only reading the
 * connection on can end the message, so they keep nobody paused, this
 * connection included, and the periodic sweep looks at the paused again
 * (nothing in flight may be left to wake them). And a connection
 * shares the loop tick's read budget with the producer sessions: once it
 * is spent, the connection waits for its turn (read-turns.h), so that 64
 * busy senders do not fill 64 batch buffers of megabytes in one tick.
 *
 * A connection's shard is sealed when it is full (max_shard_bytes), old
 * (max_shard_age), idle ([syslog] idle_timeout), failed, or when the
 * connection ends; the connection's next message opens the next one. A
 * message that cannot be stored (no shard could be opened for it, the
 * daemon is out of memory) is counted and logged with the connection,
 * within a rate limit; nothing is dropped silently. There is no
 * acknowledgement in syslog: what a peer wrote just before the daemon
 * stops is read at the drain, and only bytes still in flight then, or
 * the rest of an octet-counted frame the peer never finished, are lost,
 * and counted. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "budget.h"
#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "list.h"
#include "log.h"
#include "memory.h"
#include "read-turns.h"
#include "shard.h"
#include "syslog-stream-internal.h"
#include "syslog_msg.h"

/* The first receive buffer of a connection, doubled while a message does
 * not fit, up to syslog_framer_buffer_size(max_record_bytes). It is given
 * back by the sweep once it holds no partial message and the connection
 * has sent nothing for RX_KEEP_NS, so an idle connection holds none. */
#define RX_INITIAL (64u * 1024u)
/* What a buffer cut to its unfinished bytes is rounded up to. */
#define RX_SHRINK_ROUND 4096u
/* How long an empty receive buffer is kept after the last read. */
#define RX_KEEP_NS (1000ull * 1000000ull)
/* Reads per wakeup, so that one busy connection leaves the loop to the
 * others in between. */
#define READS_PER_WAKEUP 8u
/* What the drain reads of one connection at most: far more than a socket
 * buffer holds, and a bound against a peer that keeps writing. */
#define DRAIN_MAX_BYTES (64u * 1024u * 1024u)

/* ---- log lines ---- */

/* "connection 3 (pid 812, uid 1000, producer app.u1000)", for log lines. */
static const char *who(const struct conn *c, char *buf, size_t len)
{
    snprintf(buf, len, "connection %" PRIu64 " (pid %" PRIu32 ", uid %" PRIu32 "%s%s)", c->id,
             c->creds.pid, c->creds.uid, c->name_len ? ", producer " : "",
             c->name_len ? c->name : "");
    return buf;
}

/* ---- memory ---- */

static void rx_release(struct conn *c)
{
    memory_adjust(c->l->d, 0, c->cap);
    free(c->buf);
    c->buf = NULL;
    c->len = c->cap = 0;
}

/* Room to read into: a buffer when there is none, a bigger one when it is
 * full and a message may still be longer. Returns the free bytes, 0 when
 * the buffer is at its limit and full (the framer then always has made
 * progress), or -ENOMEM. */
static ssize_t rx_room(struct conn *c)
{
    size_t limit = syslog_framer_buffer_size(c->l->d->config.max_record_bytes);
    size_t want;
    char *nb;

    if (c->len < c->cap)
        return (ssize_t)(c->cap - c->len);
    if (c->cap >= limit)
        return 0;
    want = c->cap * 2 > RX_INITIAL ? c->cap * 2 : RX_INITIAL;
    if (want > limit)
        want = limit;
    nb = realloc(c->buf, want);
    if (!nb)
        return -ENOMEM;
    memory_adjust(c->l->d, want, c->cap);
    c->buf = nb;
    c->cap = want;
    return (ssize_t)(c->cap - c->len);
}

/* A connection that stops being read (paused for memory, waiting for its
 * quota) keeps only the bytes it has not framed, in a buffer cut to their
 * size: what a thousand waiting connections hold is then what their senders
 * left unfinished, not a thousand receive buffers. Those buffers would keep
 * the daemon above the point where paused connections read again, and none
 * would ever be read to the end of its message. */
static void rx_shrink(struct conn *c)
{
    size_t want = (c->len + RX_SHRINK_ROUND - 1) & ~(size_t)(RX_SHRINK_ROUND - 1);
    char *nb;

    if (c->len == 0) {
        rx_release(c);
        return;
    }
    if (want >= c->cap)
        return;
    nb = realloc(c->buf, want);
    if (!nb)
        return; /* the larger buffer stays: nothing is lost */
    memory_adjust(c->l->d, want, c->cap);
    c->buf = nb;
    c->cap = want;
}

static uint64_t conn_held(const struct conn *c)
{
    return (c->shard ? shard_buffer_bytes(c->shard) : 0) + c->cap;
}

/* ---- the connection's shards ---- */

/* The shard is sealed once its writes are done (on its own); the
 * connection's next message opens the next one. */
static void retire_shard(struct conn *c)
{
    struct shard *sh = c->shard;

    if (!sh)
        return;
    c->shard = NULL;
    shard_detach(sh);
    if (sh->state == SHARD_OPEN)
        shard_seal(sh);
}

/* The connection's shard failed; syslog-producers.c's subscriber counts
 * and logs what it loses, for every syslog shard. */
static void on_own_shard_failed(void *owner, struct shard *sh, int err)
{
    struct conn *c = owner;

    (void)err;
    assert(c->shard == sh);
    retire_shard(c);
}

static const struct shard_events conn_shard_events = {
    .failed = on_own_shard_failed,
};

static int open_shard(struct conn *c)
{
    struct daemon *d = c->l->d;
    struct shard_ident ident = {
        .producer = c->name,
        .producer_len = c->name_len,
        .uid = c->creds.uid,
        .gid = c->creds.gid,
        .pid = c->creds.pid,
        .sync = shard_sync_for_policy(d, (unsigned)d->config.fsync_policy),
        .source = SHARD_SOURCE_SYSLOG_STREAM,
    };

    return shard_open(d, &ident, c, &conn_shard_events, &c->shard);
}

/* ---- messages ---- */

static void drop_message(struct conn *c, const char *detail)
{
    static struct log_ratelimit rl = LOG_RATELIMIT_INIT("refused syslog stream messages");
    char w[160];

    c->l->d->stats.syslog_stream_refused++;
    log_msg_ratelimited(&rl, c->l->d->loop, LOG_LEVEL_WARNING,
                        "%s: dropped a message of %s: %s", c->l->path, who(c, w, sizeof(w)),
                        detail);
}

static void take_message(struct conn *c, const char *msg, size_t len, bool cut, uint64_t now)
{
    struct daemon *d = c->l->d;
    size_t plen = syslog_msg_strip_trailer(msg, len);
    char detail[200], w[160];
    int r;

    if (cut) {
        d->stats.syslog_stream_cut++;
        log_warning_ratelimited(d->loop, "cut syslog stream messages",
                                "%s: a message of %s is longer than max_record_bytes (%" PRIu64
                                "): stored cut to that length, the rest of its line dropped",
                                c->l->path, who(c, w, sizeof(w)), d->config.max_record_bytes);
    }
    /* An empty line, or the NUL some senders add after a newline: there
     * is no message in it. */
    if (plen == 0)
        return;
    if (!c->name_len) {
        struct syslog_msg m;

        syslog_msg_parse(msg, plen, now, &m);
        r = syslog_producer_name(m.app_name.ptr, m.app_name.len, (uid_t)c->creds.uid, c->name,
                                 sizeof(c->name));
        if (r < 0) { /* the buffer is SYSLOG_PRODUCER_NAME_SIZE: never */
            drop_message(c, "no producer name could be made for it");
            return;
        }
        c->name_len = (size_t)r;
        c->budget = budget_producer_get(d, c->name);
    }
    if (!c->shard) {
        r = open_shard(c);
        if (r < 0) {
            if (r == -EMFILE && d->open_shards >= d->config.max_open_shards)
                snprintf(detail, sizeof(detail), "max_open_shards (%" PRIu64 ") reached",
                         d->config.max_open_shards);
            else
                snprintf(detail, sizeof(detail), "no shard could be opened: %s", strerror(-r));
            drop_message(c, detail);
            return;
        }
    }
    /* Over its quota, with over_quota = wait, the connection waits (its
     * sender gets backpressure); otherwise, and over the spool's budget,
     * the message is dropped and counted: a syslog sender has no way to
     * hear a refusal, and the framing goes on. At the drain nothing
     * waits: what a peer had sent is stored over its quota (a stop must
     * not cost it its messages), though never over the spool's budget. */
    {
        char why[512];

        r = budget_admit(d, c->budget, why, sizeof(why));
        if (r == -EDQUOT && c->l->stopping)
            r = 0;
        if (r == -EDQUOT && d->config.over_quota == OVER_QUOTA_WAIT && !c->l->stopping) {
            c->quota_hold = true;
            return;
        }
        if (r < 0) {
            budget_count_refused(d, c->budget);
            drop_message(c, why);
            return;
        }
    }
    r = shard_append_creds(c->shard, msg, (uint32_t)plen, now, &c->creds);
    if (r < 0) {
        snprintf(detail, sizeof(detail), "its shard cannot take it: %s", strerror(-r));
        drop_message(c, detail);
        return;
    }
    d->stats.syslog_stream_records++;
    d->stats.records_received++;
    d->stats.bytes_received += plen;
    c->got_message = true;
    if (c->shard->size_queued >= d->config.max_shard_bytes)
        retire_shard(c);
}

/* Frames and stores every whole message in the buffer; with at_end (the
 * peer closed, or the drain), also what is left: a last line without its
 * line end is a message. Drops what it consumed from the buffer. Returns 0,
 * or the framer's error (the connection cannot go on). */
static int frame_buffer(struct conn *c, bool at_end)
{
    /* The messages of one read share its receive time: they came in
     * together, and two clock reads per message would cost more than the
     * framing. */
    uint64_t now = now_realtime_ns();
    size_t off = 0;
    int r;

    c->got_message = false;

    for (;;) {
        struct syslog_frame f;

        r = at_end ? syslog_framer_finish(&c->framer, c->buf + off, c->len - off, &f)
                   : syslog_framer_next(&c->framer, c->buf + off, c->len - off, &f);
        if (r < 0)
            break;
        switch (f.kind) {
        case SYSLOG_FRAME_MESSAGE:
        case SYSLOG_FRAME_CUT:
            take_message(c, f.msg, f.msg_len, f.kind == SYSLOG_FRAME_CUT, now);
            break;
        case SYSLOG_FRAME_DISCARDED:
            c->l->d->stats.syslog_stream_discarded_bytes += f.consumed;
            break;
        }
        if (c->quota_hold) {
            r = 0; /* the message stays in the buffer, framed again later */
            break;
        }
        off += f.consumed;
    }
    if (off) {
        memmove(c->buf, c->buf + off, c->len - off);
        c->len -= off;
    }
    if (c->got_message)
        c->last_msg_mono_ns = now_monotonic_ns();
    return r == -EAGAIN || r == -ENODATA ? 0 : r;
}

/* ---- the connection ---- */

static void on_conn_closed(uv_handle_t *h);

static void set_state(struct conn *c, enum conn_state next)
{
    assert(c->state != CONN_CLOSING);
    if (c->state == CONN_PAUSED) {
        list_del(&c->paused_node);
        memory_adjust_stalled(c->l->d, 0, c->stalled);
        c->stalled = 0;
    }
    if (c->state == CONN_QUOTA)
        budget_unwait(&c->quota_waiter);
    if (c->state == CONN_TURN)
        read_turns_leave(&c->turn); /* read_turns_take() may have done it */
    if (next == CONN_PAUSED)
        list_add_tail(&c->l->paused, &c->paused_node);
    if (next == CONN_TURN)
        read_turns_wait(c->l->d, &c->turn);
    c->state = next;
}

/* The connection ends: what it has left in the buffer was framed by the
 * caller; its shard is sealed, the socket closed. */
static void close_conn(struct conn *c)
{
    if (c->state == CONN_CLOSING)
        return;
    retire_shard(c);
    (void)uv_poll_stop(&c->poll);
    set_state(c, CONN_CLOSING);
    uv_close((uv_handle_t *)&c->poll, on_conn_closed);
}

static void framing_failed(struct conn *c, int err)
{
    struct daemon *d = c->l->d;
    char w[160];

    d->stats.syslog_stream_framing_errors++;
    d->stats.syslog_stream_unfinished_bytes += c->len;
    if (err == -EMSGSIZE)
        log_warning_ratelimited(d->loop, "syslog stream framing errors",
                                "%s: %s sent an octet-counted message longer than "
                                "max_record_bytes (%" PRIu64 "); the next message cannot be "
                                "found: closing the connection (messages before it are kept)",
                                c->l->path, who(c, w, sizeof(w)), d->config.max_record_bytes);
    else
        log_warning_ratelimited(d->loop, "syslog stream framing errors",
                                "%s: %s sent a malformed octet count (not \"LENGTH SP "
                                "MESSAGE\", LENGTH a decimal without a leading zero); the next "
                                "message cannot be found: closing the connection (messages "
                                "before it are kept)",
                                c->l->path, who(c, w, sizeof(w)));
    close_conn(c);
}

/* The peer is done (end of file, or an error such as a reset): the rest
 * of the buffer is framed as the end of the connection. Bytes of a frame
 * it never finished are lost, and counted. */
static void finish_conn(struct conn *c, const char *how)
{
    struct daemon *d = c->l->d;
    char w[160];
    int r = frame_buffer(c, true);

    if (r == -EPIPE) {
        d->stats.syslog_stream_unfinished_bytes += c->len;
        log_warning_ratelimited(d->loop, "unfinished syslog stream frames",
                                "%s: %s %s inside an octet-counted message; its %zu bytes "
                                "received are dropped",
                                c->l->path, who(c, w, sizeof(w)), how, c->len);
    } else if (r < 0) {
        framing_failed(c, r);
        return;
    }
    log_debug("%s: %s %s", c->l->path, who(c, w, sizeof(w)), how);
    close_conn(c);
}

/* The connection's producer is at its quota: not read until its share is
 * freed, and its shard sealed now, so that merge, ship or prune can free
 * what it holds. */
static void wait_for_quota(struct conn *c)
{
    (void)uv_poll_stop(&c->poll);
    set_state(c, CONN_QUOTA);
    budget_wait(c->l->d, c->budget, &c->quota_waiter);
    retire_shard(c);
    rx_shrink(c);
}

static void start_reading(struct conn *c);
static void framing_failed(struct conn *c, int err);

/* budget.c's call back: the producer has room again. The held messages
 * are framed first; the socket is read again unless they fill the quota
 * once more. */
static void on_quota_resume(struct budget_waiter *w)
{
    struct conn *c = (struct conn *)((char *)w - offsetof(struct conn, quota_waiter));
    int r;

    assert(c->state == CONN_QUOTA);
    list_init(&w->node); /* budget.c took it off its list */
    c->quota_hold = false;
    start_reading(c);
    r = frame_buffer(c, false);
    if (r < 0)
        framing_failed(c, r);
    else if (c->quota_hold)
        wait_for_quota(c);
}

/* Reads what the socket holds, at most max_bytes, framing as it goes.
 * Returns 1 when the peer has closed (or the connection failed: how says
 * which), 0 when the socket is empty or max_bytes were read, or the
 * framer's error. With budget, stops early (returning 0) once the
 * connection is over its memory budget, and pauses it, or once the tick's
 * read budget is spent, and makes it wait for its turn. */
static int read_some(struct conn *c, size_t max_reads, size_t max_bytes, bool budget,
                     const char **how)
{
    struct daemon *d = c->l->d;
    size_t total = 0;

    for (size_t i = 0; i < max_reads && total < max_bytes; i++) {
        ssize_t room, n;
        int r;

        if (budget && read_turns_spent(d)) {
            (void)uv_poll_stop(&c->poll);
            set_state(c, CONN_TURN);
            return 0;
        }
        room = rx_room(c);
        if (room < 0) {
            *how = "could not be read further: out of memory";
            return 1;
        }
        assert(room > 0); /* a full buffer of the largest size always frames */
        n = read(c->fd, c->buf + c->len, (size_t)room);
        if (n == 0) {
            *how = "closed the connection";
            return 1;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
                return 0;
            *how = errno == ECONNRESET ? "reset the connection" : "failed (read error)";
            return 1;
        }
        c->len += (size_t)n;
        total += (size_t)n;
        read_turns_spend(d, (size_t)n);
        c->last_read_mono_ns = now_monotonic_ns();
        r = frame_buffer(c, false);
        if (r < 0)
            return r;
        if (c->quota_hold) {
            wait_for_quota(c);
            return 0;
        }
        if (budget && memory_over_budget(d, conn_held(c))) {
            char w[160];

            set_state(c, CONN_PAUSED);
            (void)uv_poll_stop(&c->poll);
            d->stats.syslog_stream_pauses++;
            log_warning_ratelimited(d->loop, "pauses of syslog stream connections",
                                    "%s: not reading %s while it holds %" PRIu64
                                    " bytes and the daemon %" PRIu64 " (session_buffer_bytes %"
                                    PRIu64 ", memory_limit_bytes %" PRIu64 "); the sender waits",
                                    c->l->path, who(c, w, sizeof(w)), conn_held(c),
                                    memory_used(d), d->config.session_buffer_bytes,
                                    d->config.memory_limit_bytes);
            rx_shrink(c);
            c->stalled = c->len;
            memory_adjust_stalled(d, c->stalled, 0);
            return 0;
        }
    }
    return 0;
}

/* One wakeup's or one turn's reading. */
static void read_and_frame(struct conn *c)
{
    const char *how = NULL;
    int r = read_some(c, READS_PER_WAKEUP, SIZE_MAX, true, &how);

    if (r == 1)
        finish_conn(c, how);
    else if (r < 0)
        framing_failed(c, r);
}

static void on_conn_readable(uv_poll_t *h, int status, int events)
{
    struct conn *c = h->data;

    (void)events;
    if (c->state != CONN_READING)
        return;
    if (status < 0) {
        finish_conn(c, "failed (poll error)");
        return;
    }
    read_and_frame(c);
}

static void start_reading(struct conn *c)
{
    set_state(c, CONN_READING);
    (void)uv_poll_start(&c->poll, UV_READABLE | UV_DISCONNECT, on_conn_readable); /* a valid fd */
}

/* The connection's turn came: it is watched again, and read now. */
static void on_turn(struct read_turn *t)
{
    struct conn *c = (struct conn *)((char *)t - offsetof(struct conn, turn));

    assert(c->state == CONN_TURN);
    start_reading(c);
    read_and_frame(c);
}

void stream_conns_resume(struct syslog_stream *l)
{
    while (!list_empty(&l->paused) && memory_daemon_may_resume(l->d)) {
        struct conn *c = list_entry(l->paused.next, struct conn, paused_node);

        if (!memory_session_may_resume(l->d, c->shard ? shard_buffer_bytes(c->shard) : 0))
            break; /* in order: the first waits for its own shard */
        start_reading(c);
    }
}

static void on_conn_closed(uv_handle_t *h)
{
    struct conn *c = h->data;
    struct syslog_stream *l = c->l;

    (void)close(c->fd); /* ours; a socket, nothing to flush */
    rx_release(c);
    list_del(&c->node);
    l->n_conns--;
    assert(!list_linked(&c->quota_waiter.node));
    budget_producer_put(l->d, c->budget);
    free(c);
    syslog_stream_conn_gone(l);
}

/* ---- the listener's calls ---- */

void stream_conn_accept(struct syslog_stream *l, int fd, const struct ucred *uc)
{
    struct daemon *d = l->d;
    struct conn *c;

    c = calloc(1, sizeof(*c));
    if (!c || uv_poll_init(d->loop, &c->poll, fd) < 0) {
        log_warning("%s: a connection was dropped at accept: %s", l->path,
                    c ? "cannot watch it" : "out of memory");
        free(c);
        (void)close(fd);
        return;
    }
    c->l = l;
    c->fd = fd;
    c->id = ++l->next_id;
    c->creds = (struct shard_creds){ .pid = (uint32_t)uc->pid, .uid = (uint32_t)uc->uid,
                                     .gid = (uint32_t)uc->gid };
    (void)syslog_framer_init(&c->framer, (size_t)d->config.max_record_bytes); /* in range */
    c->poll.data = c;
    c->state = CONN_READING;
    list_init(&c->paused_node);
    read_turn_init(&c->turn, on_turn);
    list_init(&c->quota_waiter.node);
    c->quota_waiter.resume = on_quota_resume;
    list_add_tail(&l->conns, &c->node);
    l->n_conns++;
    d->stats.syslog_stream_connections++;
    start_reading(c);
}

void stream_conn_sweep(struct conn *c, uint64_t now, uint64_t idle_ns, uint64_t max_age_ns)
{
    if (c->shard && (now - c->last_msg_mono_ns >= idle_ns ||
                     now - c->shard->created_mono_ns >= max_age_ns))
        retire_shard(c);
    /* A buffer with no partial message in it goes back once the
     * connection has been quiet for a sweep: a busy one keeps its pages
     * rather than fault them in again at every read. */
    if (c->buf && c->len == 0 && now - c->last_read_mono_ns >= RX_KEEP_NS)
        rx_release(c);
}

bool stream_conn_rotate(struct conn *c, const char *producer)
{
    if (!c->shard || (producer && strcmp(c->name, producer) != 0))
        return false;
    retire_shard(c);
    return true;
}

void stream_conn_drain(struct conn *c)
{
    const char *how = "was closed by the drain";
    int r;

    if (c->state == CONN_CLOSING)
        return;
    c->quota_hold = false; /* the drain waits for no quota: over it, dropped */
    r = read_some(c, SIZE_MAX, DRAIN_MAX_BYTES, false, &how);
    if (r < 0)
        framing_failed(c, r);
    else
        finish_conn(c, how);
}
