/* Session: one producer connection, from HELLO to close. This file holds
 * its lifecycle and its output; the rest is by concern:
 *  - session-recv.c: the receive buffer, frame decoding, APPEND records into
 *    shards, and when the connection is read (the always gate, the budgets);
 *  - session-ack.c: the ACK ledger, what is acknowledged when, and the
 *    shards the session holds for it;
 *  - session-admit.c: whether a peer may produce here at all.
 *
 * The lifecycle is one enum (session-internal.h lists the transitions, and
 * session_set_state() asserts them): waiting for HELLO, streaming, then
 * draining (the daemon stops) or failing (an error) and closing. Whether the
 * connection is read, how far its output has got and whether it was
 * admitted are small enums of their own, each changed in one place.
 *
 * Output: only one write to the socket is in flight at a time: WELCOME,
 * then ACKs, then the ERROR. The latest ACK value replaces older unsent
 * ones, so a producer that does not read cannot make us queue.
 *
 * Any error ends the session the same way: stop reading, let what was
 * accepted be written, send the last ACK, then the ERROR, close, seal. */
#include "session.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "lifecycle.h"
#include "log.h"
#include "memory.h"
#include "notify.h"
#include "session-internal.h"
#include "shard.h"
#include "streams.h"
#include "wire.h"

const char *session_who(const struct session *s, char *buf, size_t len)
{
    if (session_said_hello(s))
        snprintf(buf, len, "producer %s (conn %" PRIu64 ", pid %d, uid %u)", s->producer,
                 s->id, (int)s->cred.pid, (unsigned)s->cred.uid);
    else
        snprintf(buf, len, "connection %" PRIu64 " (pid %d, uid %u, before HELLO)", s->id,
                 (int)s->cred.pid, (unsigned)s->cred.uid);
    return buf;
}

/* ---- states ---- */

void session_set_state(struct session *s, enum session_state next)
{
    switch (s->state) {
    case SESSION_HELLO_WAIT:
        assert(next != SESSION_HELLO_WAIT);
        break;
    case SESSION_STREAMING:
        assert(next != SESSION_HELLO_WAIT && next != SESSION_STREAMING);
        break;
    case SESSION_DRAINING:
        assert(next == SESSION_FAILING || next == SESSION_CLOSING);
        break;
    case SESSION_FAILING:
        assert(next == SESSION_CLOSING);
        break;
    case SESSION_CLOSING:
        assert(!"a closing session changes state");
        break;
    }
    /* Leaving the open states stops reading first, for good. */
    assert(next == SESSION_STREAMING || s->rx == RX_STOPPED);
    s->state = next;
}

/* The output only moves forward: WELCOME once, after HELLO; ACKs only
 * after it; nothing after DONE. */
static void set_out(struct session *s, enum session_out next)
{
    switch (s->out) {
    case OUT_QUIET:
        assert(next == OUT_WELCOME || next == OUT_DONE);
        break;
    case OUT_WELCOME:
        assert(next == OUT_ACKS);
        break;
    case OUT_ACKS:
        assert(next == OUT_DONE);
        break;
    case OUT_DONE:
        assert(!"output after the last of it");
        break;
    }
    s->out = next;
}

/* ---- shards ---- */

static void on_shard_written(void *owner, struct shard *sh);
static void on_shard_failed(void *owner, struct shard *sh, int err);

static const struct shard_events session_shard_events = {
    .written = on_shard_written,
    .failed = on_shard_failed,
};

static void on_shard_written(void *owner, struct shard *sh)
{
    (void)sh;
    session_pump(owner);
}

static void on_shard_failed(void *owner, struct shard *sh, int err)
{
    struct session *s = owner;

    if (sh == s->current && sh->records_appended == 0) {
        /* The file made at the welcome (open_first_shard) failed before
         * any record: not the producer's failure yet. The shard is removed
         * at its seal; the first record makes another and hears why, as it
         * would have without the early file. */
        session_retire_current(s);
        return;
    }
    session_ack_cap(s, sh);
    if (sh->create_error)
        session_fail(s, (uint32_t)-err,
                     "cannot create shard active/%s in %s: %s; records after the last "
                     "acknowledged one were not kept",
                     shard_display_name(sh), s->d->config.spool, strerror(-err));
    else if (sh->sync_error)
        session_fail(s, (uint32_t)-err,
                     "%s of shard active/%s failed: %s; records after the last "
                     "acknowledged one were not kept",
                     shard_sync_name(sh), shard_display_name(sh), strerror(-err));
    else
        session_fail(s, (uint32_t)-err,
                     "write to shard active/%s failed: %s; records after the last "
                     "acknowledged one were not kept",
                     shard_display_name(sh), strerror(-err));
}

int session_ensure_shard(struct session *s)
{
    struct shard_ident ident;
    int r;

    /* Called for every record: the common case returns before the shard's
     * identity is worked out. */
    if (s->current)
        return 0;
    ident = (struct shard_ident){
        .producer = s->producer,
        .producer_len = s->producer_len,
        .uid = s->cred.uid,
        .gid = s->cred.gid,
        .pid = (uint32_t)s->cred.pid,
        .sync = shard_sync_for_policy(s->d, s->fsync_policy),
        .stream_id = s->stream_id,
        .first_position = s->stream_start + s->received,
        /* Only the newest retired shard can still be writing ahead of the
         * new one: each waits for the one before it (shard.h). */
        .after = s->n_retiring > 0 ? s->retiring[s->n_retiring - 1].shard : NULL,
    };
    r = shard_open(s->d, &ident, s, &session_shard_events, &s->current);
    if (r < 0)
        return r;
    s->current_base = s->received;
    return 0;
}

/* ---- output ---- */

static void on_output_written(uv_write_t *req, int status)
{
    struct session *s = req->data;

    s->write_busy = false;
    if (status < 0 && s->state != SESSION_CLOSING) {
        /* The peer is gone; nothing more can reach it. */
        char w[160];
        log_debug("%s: send failed: %s", session_who(s, w, sizeof(w)), uv_strerror(status));
        if (s->out != OUT_DONE)
            set_out(s, OUT_DONE);
    }
    session_pump(s);
}

static void send_buffer(struct session *s, size_t len)
{
    uv_buf_t b = uv_buf_init((char *)s->obuf, (unsigned)len);
    int r;

    s->wreq.data = s;
    r = uv_write(&s->wreq, (uv_stream_t *)&s->pipe, &b, 1, on_output_written);
    if (r < 0) {
        if (s->out != OUT_DONE)
            set_out(s, OUT_DONE); /* the peer is gone */
        return;
    }
    s->write_busy = true;
}

static void resume_waiting(struct daemon *d);

static void on_closed(uv_handle_t *h)
{
    struct session *s = h->data;
    struct daemon *d = s->d;

    session_release_shards(s);
    list_del(&s->node);
    assert(!list_linked(&s->paused_node));
    if (list_linked(&s->resume_node))
        list_del(&s->resume_node);
    if (s->stream)
        streams_release(d, s->stream, s);
    session_admit_release(s);
    session_rx_release(s);
    assert(!list_linked(&s->quota_waiter.node));
    budget_producer_put(d, s->budget);
    free(s->error_message);
    free(s);
    /* A connection that resumes the stream may have waited for this one. */
    resume_waiting(d);
    lifecycle_maybe_finish(d);
}

void session_close(struct session *s)
{
    if (s->state == SESSION_CLOSING)
        return;
    session_rx_stop(s);
    session_set_state(s, SESSION_CLOSING);
    uv_close((uv_handle_t *)&s->pipe, on_closed);
}

/* When the daemon's memory falls back under the limit, sessions paused for
 * it resume in the order they were paused (each reads once before anyone
 * reads twice). */
static void resume_paused(struct daemon *d)
{
    struct list_node *n, *tmp;

    if (!memory_daemon_may_resume(d))
        return;
    list_for_each_safe(n, tmp, &d->paused_sessions) {
        struct session *p = list_entry(n, struct session, paused_node);
        if (memory_session_may_resume(d, session_buffered_bytes(p)))
            session_pump(p);
    }
}

/* Any shard gave its batch buffers back (shard-events.h): memory may be
 * under the limit again. */
static void on_shard_released(void *data, struct shard *sh)
{
    (void)sh;
    resume_paused(data);
}

/* A shard was sealed: a stream waiting for its last shard may be quiet. */
static void on_shard_sealed(void *data, const struct shard *sh, int err)
{
    (void)sh;
    (void)err;
    resume_waiting(data);
}

static const struct shard_events sessions_shard_events = {
    .released = on_shard_released,
    .sealed = on_shard_sealed,
};

void session_init(struct daemon *d)
{
    shard_subscribe(d, &d->sessions_on_shards, &sessions_shard_events, d);
}

#ifdef LOGSHARD_FAULT_INJECTION
/* Test builds: LOGSHARD_FAULTS=kill_before_ack makes the daemon die, as a
 * crash would, after the records of an ACK are written and synced and
 * before the ACK leaves: the case where a producer that sends its records
 * again would duplicate them without the stream's position. */
static void fault_before_ack(void)
{
    static int armed = -1;

    if (armed < 0) {
        const char *env = getenv("LOGSHARD_FAULTS");
        armed = env && strstr(env, "kill_before_ack") != NULL;
    }
    if (armed)
        (void)raise(SIGKILL);
}
#else
static void fault_before_ack(void)
{
}
#endif

void session_pump(struct session *s)
{
    uint64_t acked;

    if (s->state == SESSION_CLOSING)
        return;
    session_release_settled(s);
    acked = session_acked_through(s);
    session_rx_pump(s);

    if (s->write_busy)
        return;
    if (s->out == OUT_WELCOME) {
        struct wire_welcome w = {
            .version = (uint16_t)s->protocol,
            .fsync_policy = (uint8_t)s->fsync_policy,
            .max_record_bytes = (uint32_t)s->max_record_bytes,
            .max_frame_bytes = (uint32_t)s->max_frame_bytes,
            .next_position = s->stream_start,
        };
        set_out(s, OUT_ACKS);
        send_buffer(s, wire_encode_welcome(s->obuf, &w));
        return;
    }
    if (s->out == OUT_ACKS && (acked > s->ack_sent || s->ack_due)) {
        fault_before_ack();
        s->d->stats.records_acked += acked - s->ack_sent;
        s->ack_sent = acked;
        s->ack_due = false;
        /* Version 2 counts in stream positions, version 1 from the
         * connection's first record. */
        send_buffer(s, wire_encode_ack(s->obuf, s->protocol == WIRE_PROTOCOL_V2
                                                    ? s->stream_start + acked
                                                    : acked));
        return;
    }
    if (session_is_open(s) || !session_all_settled(s))
        return;
    if (s->state == SESSION_FAILING && s->out != OUT_DONE && s->error_message) {
        set_out(s, OUT_DONE);
        send_buffer(s, wire_encode_error(s->obuf, s->error_code, s->error_message));
        return;
    }
    session_close(s);
}

/* What a peer can repeat at will (refusals, malformed frames, timeouts) is
 * logged within a budget per kind; NULL for failures of the daemon's own
 * (writes, syncs, memory, descriptors), which are always logged. */
static struct log_ratelimit *peer_failure_budget(const struct session *s, uint32_t code)
{
    static struct log_ratelimit refused_access =
        LOG_RATELIMIT_INIT("producers refused by the access lists");
    static struct log_ratelimit refused_limit =
        LOG_RATELIMIT_INIT("producers refused at a limit");
    static struct log_ratelimit bad_frames =
        LOG_RATELIMIT_INIT("producers closed for a protocol error");
    static struct log_ratelimit timeouts = LOG_RATELIMIT_INIT("producers closed for a timeout");
    static struct log_ratelimit stopping =
        LOG_RATELIMIT_INIT("producers told to connect again as the daemon stops");

    switch (code) {
    case EACCES: return &refused_access;
    case EUSERS: return &refused_limit;
    case EMFILE: /* max_open_shards, not the daemon out of descriptors */
        return s->d->open_shards >= s->d->config.max_open_shards ? &refused_limit : NULL;
    case EPROTO:
    case EBADMSG:
    case EMSGSIZE:
    case EINVAL:
    case EPROTONOSUPPORT: return &bad_frames;
    case ETIMEDOUT: return &timeouts;
    case ESHUTDOWN: return &stopping;
    default: return NULL;
    }
}

void session_fail(struct session *s, uint32_t code, const char *fmt, ...)
{
    char msg[WIRE_ERROR_MESSAGE_MAX];
    char w[160];
    struct log_ratelimit *budget;
    va_list ap;

    if (!session_is_open(s) && s->state != SESSION_DRAINING)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    budget = peer_failure_budget(s, code);
    if (budget)
        log_msg_ratelimited(budget, s->d->loop, LOG_LEVEL_WARNING,
                            "%s: %s; closing the connection", session_who(s, w, sizeof(w)), msg);
    else
        log_warning("%s: %s; closing the connection", session_who(s, w, sizeof(w)), msg);
    notify_set_error(s->d, "%s: %s", session_who(s, w, sizeof(w)), msg);
    /* Each failure is counted once, by kind: refusals where they are
     * decided (session-admit.c, and max_open_shards in session-recv.c),
     * write and sync failures in shard.c, and here what the peer got wrong
     * and the timeouts. */
    switch (code) {
    case EPROTO:
    case EBADMSG:
    case EMSGSIZE:
    case EINVAL:
    case EPROTONOSUPPORT:
        s->d->stats.protocol_errors++;
        break;
    case ETIMEDOUT:
        s->d->stats.timeouts++;
        break;
    default:
        break;
    }
    s->error_code = code ? code : EPROTO;
    s->error_message = strdup(msg); /* NULL: cannot say why; just close */
    session_rx_stop(s);
    session_set_state(s, SESSION_FAILING);
    session_retire_current(s);
    session_pump(s);
}

/* A random stream identity, never all zero (all zero means no stream).
 * It need not be secret, only unique: before the kernel's pool is ready
 * (early boot) the insecure source is good enough and does not block the
 * event loop. Returns 0 or a negative errno. */
static int pick_stream_id(uint8_t id[SHARD_STREAM_ID_SIZE])
{
    for (;;) {
        ssize_t n = getrandom(id, SHARD_STREAM_ID_SIZE, GRND_NONBLOCK);
        bool zero = true;

#ifdef GRND_INSECURE
        if (n < 0 && errno == EAGAIN)
            n = getrandom(id, SHARD_STREAM_ID_SIZE, GRND_INSECURE);
#endif
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n != SHARD_STREAM_ID_SIZE)
            continue; /* not for 16 bytes, but never trust a short read */
        for (size_t i = 0; i < SHARD_STREAM_ID_SIZE; i++)
            zero = zero && id[i] == 0;
        if (!zero)
            return 0;
    }
}

uint64_t session_frame_limit(const struct session *s)
{
    return s->max_frame_bytes + (s->protocol == WIRE_PROTOCOL_V2 ? WIRE_APPEND_POSITION : 0);
}

static void session_drain(struct session *s);

/* Version 2 HELLO: finds the stream the library names, or starts it, and
 * claims it for this connection. An earlier connection of the stream that
 * is still open has been given up by the library (it would not say HELLO
 * again otherwise): it is drained, and this one waits until it is gone.
 * Returns 0, or -1 after failing the session. */
static int claim_stream(struct session *s, const struct wire_hello *h)
{
    struct daemon *d = s->d;
    struct stream *st = streams_find(d, h->stream_id);
    char hex[2 * SHARD_STREAM_ID_SIZE + 1];
    int r;

    streams_id_hex(h->stream_id, hex);
    if (!st) {
        if (h->first_position > 0) {
            d->stats.streams_refused++;
            session_fail(s, ESTALE,
                         "stream %s is not known here (forgotten after resume_window, %" PRIu64
                         " s, or never written to this spool): its records from position "
                         "%" PRIu64 " are refused, as taking them could write some twice",
                         hex, d->config.resume_window_ms / 1000, h->first_position);
            return -1;
        }
        r = streams_add(d, h->stream_id, s->producer, s->cred.uid, &st);
        if (r < 0) {
            session_fail(s, (uint32_t)-r, "cannot keep its stream %s: %s", hex, strerror(-r));
            return -1;
        }
    } else {
        if (st->uid != s->cred.uid) {
            d->stats.streams_refused++;
            session_fail(s, EACCES, "stream %s belongs to uid %u, not to this peer", hex,
                         (unsigned)st->uid);
            return -1;
        }
        if (strcmp(st->producer, s->producer) != 0) {
            d->stats.streams_refused++;
            session_fail(s, EINVAL, "stream %s belongs to producer %s", hex, st->producer);
            return -1;
        }
        if (st->owner) {
            char w[160];
            struct session *old = st->owner;

            log_info("%s: resumes stream %s; its earlier connection %" PRIu64
                     " is given up and closed",
                     session_who(s, w, sizeof(w)), hex, old->id);
            session_drain(old);
        }
        d->stats.streams_resumed++;
    }
    memcpy(s->stream_id, h->stream_id, SHARD_STREAM_ID_SIZE);
    s->hello_position = h->first_position;
    s->stream = st;
    streams_claim(d, st, s);
    return 0;
}

/* Makes the connection's first shard file while the WELCOME is on its
 * way, rather than when the first record arrives: that record would wait
 * in memory for the create (a directory entry and an inode, slower still
 * in a directory where many files come and go), and a thousand producers
 * that start together would queue their creates behind each other's
 * records. A shard that never gets a record is removed at its seal
 * (seal.c), as if it had never been made. A failure here is not yet the
 * connection's: its first record tries again and says why. */
static void open_first_shard(struct session *s)
{
    /* Connections that may never send take no more than half of
     * max_open_shards ahead of time: the rest stays for records. */
    if (s->d->open_shards >= s->d->config.max_open_shards / 2)
        return;
    (void)session_ensure_shard(s);
}

/* Welcomes a connection that waits for its stream once the stream is
 * quiet: what it is told is then sealed, so nothing still in flight can
 * land after it. */
static void try_resume(struct session *s)
{
    struct stream *st = s->stream;
    char hex[2 * SHARD_STREAM_ID_SIZE + 1];
    char w[160];

    if (!s->resume_wait || !streams_quiet(st, s))
        return;
    s->stream_start = st->stored > s->hello_position ? st->stored : s->hello_position;
    if (st->stored < s->hello_position)
        log_warning("%s: stream %s resumes at position %" PRIu64 ", but the spool holds it "
                    "only up to position %" PRIu64 ": the records between, acknowledged "
                    "earlier, are not in the spool (a machine crash under fsync none or "
                    "interval, or a spool restored from an older copy)",
                    session_who(s, w, sizeof(w)), streams_id_hex(st->id, hex),
                    s->hello_position, st->stored);
    else if (st->stored > 0)
        log_info("%s: resumes stream %s at position %" PRIu64 " (it holds records from %" PRIu64
                 ")",
                 session_who(s, w, sizeof(w)), streams_id_hex(st->id, hex), s->stream_start,
                 s->hello_position);
    s->resume_wait = false;
    list_del(&s->resume_node);
    open_first_shard(s);
    set_out(s, OUT_WELCOME);
    session_pump(s);
}

static void resume_waiting(struct daemon *d)
{
    struct list_node *n, *tmp;

    list_for_each_safe(n, tmp, &d->resuming_sessions)
        try_resume(list_entry(n, struct session, resume_node));
}

void session_handle_hello(struct session *s, const unsigned char *payload, size_t len)
{
    struct wire_hello h;
    int r;

    if (s->state == SESSION_STREAMING) {
        session_fail(s, EPROTO, "HELLO sent twice");
        return;
    }
    r = wire_decode_hello(payload, len, &h);
    if (r == -EPROTONOSUPPORT) {
        session_fail(s, EPROTONOSUPPORT,
                     "protocol version %u is not supported (this daemon speaks %u and %u)",
                     (unsigned)wire_get_u16(payload), WIRE_PROTOCOL_V1, WIRE_PROTOCOL_V2);
        return;
    }
    if (r == -EINVAL) {
        size_t fixed = wire_get_u16(payload) == WIRE_PROTOCOL_V2 ? WIRE_HELLO_FIXED_V2
                                                                 : WIRE_HELLO_FIXED;
        size_t n = len - fixed;
        char shown[WIRE_PRODUCER_NAME_MAX * 4 + 8];
        size_t o = 0;

        /* Show the refused name with anything unprintable escaped. */
        for (size_t i = 0; i < n && i < 80 && o + 5 < sizeof(shown); i++) {
            unsigned char c = payload[fixed + i];
            if (c >= 0x20 && c < 0x7f && c != '\\')
                shown[o++] = (char)c;
            else
                o += (size_t)snprintf(shown + o, sizeof(shown) - o, "\\x%02x", c);
        }
        shown[o] = '\0';
        session_fail(s, EINVAL, "producer name '%s'%s (%zu bytes) is refused: names are %s",
                     shown, n > 80 ? "..." : "", n, wire_producer_name_rule);
        return;
    }
    if (r < 0) {
        session_fail(s, EPROTO,
                     "malformed HELLO frame (%zu bytes payload; flags must be 0, and a version "
                     "2 HELLO names a stream, not all zero, and a position below 2^63)",
                     len);
        return;
    }
    memcpy(s->producer, h.name, h.name_len);
    s->producer[h.name_len] = '\0';
    s->producer_len = h.name_len;
    if (!s->budget)
        s->budget = budget_producer_get(s->d, s->producer);
    s->fsync_policy = (unsigned)s->d->config.fsync_policy;
    s->protocol = h.version;
    if (h.version == WIRE_PROTOCOL_V2) {
        if (claim_stream(s, &h) < 0)
            return;
        session_set_state(s, SESSION_STREAMING);
        s->resume_wait = true;
        list_add_tail(&s->d->resuming_sessions, &s->resume_node);
        log_debug("producer %s connected (conn %" PRIu64 ", pid %d, uid %u), stream from "
                  "position %" PRIu64,
                  s->producer, s->id, (int)s->cred.pid, (unsigned)s->cred.uid,
                  h.first_position);
        try_resume(s);
        return;
    }
    /* Version 1: the connection is a stream of its own that nobody can
     * resume; the daemon names it. */
    r = pick_stream_id(s->stream_id);
    if (r < 0) {
        session_fail(s, (uint32_t)-r, "cannot pick a stream identity: getrandom: %s",
                     strerror(-r));
        return;
    }
    s->stream_start = 0;
    session_set_state(s, SESSION_STREAMING);
    open_first_shard(s);
    set_out(s, OUT_WELCOME);
    log_debug("producer %s connected (conn %" PRIu64 ", pid %d, uid %u), protocol version 1",
              s->producer, s->id, (int)s->cred.pid, (unsigned)s->cred.uid);
}

/* ---- the interface (session.h) ---- */

int session_accept(struct daemon *d, int fd)
{
    struct session *s = calloc(1, sizeof(*s));
    socklen_t sl = sizeof(s->cred);
    int r;

    if (!s) {
        (void)close(fd); /* cannot serve it at all */
        return -ENOMEM;
    }
    s->d = d;
    s->state = SESSION_HELLO_WAIT;
    s->rx = RX_STOPPED;
    s->out = OUT_QUIET;
    s->admission = ADMISSION_PENDING;
    s->ack_limit = UINT64_MAX;
    s->max_frame_bytes = d->config.max_frame_bytes;
    s->max_record_bytes = d->config.max_record_bytes;
    s->id = ++d->next_session_id;
    s->accepted_ns = s->last_rx_ns = now_monotonic_ns();
    s->protocol = WIRE_PROTOCOL_V1;
    list_init(&s->paused_node);
    read_turn_init(&s->turn, session_rx_take_turn);
    list_init(&s->quota_waiter.node);
    s->quota_waiter.resume = session_quota_resume;
    list_init(&s->resume_node);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &s->cred, &sl) < 0) {
        r = -errno;
        (void)close(fd); /* no credentials, no service */
        free(s);
        return r;
    }
    (void)uv_pipe_init(d->loop, &s->pipe, 0); /* cannot fail */
    s->pipe.data = s;
    list_add_tail(&d->sessions, &s->node);
    r = uv_pipe_open(&s->pipe, fd);
    if (r < 0) {
        (void)close(fd);
        session_close(s);
        return r;
    }
    d->stats.connections_accepted++;
    session_start_reading(s);
    if (session_is_open(s))
        session_admit(s);
    return 0;
}

static void session_drain(struct session *s)
{
    if (!session_is_open(s))
        return;
    if (s->state == SESSION_HELLO_WAIT && s->d->lifecycle == LIFECYCLE_DRAINING) {
        /* Accepted just before the drain, not yet welcomed: it cannot be
         * handed to the next daemon, so it is told to connect again (the
         * library does, within its handshake time; under a socket unit it
         * then waits in the backlog for the next daemon). */
        session_fail(s, ESHUTDOWN, "logshardd is stopping (a restart?): connect again");
        return;
    }
    if (s->resume_wait) {
        /* Never welcomed: there is nothing to finish. */
        s->resume_wait = false;
        list_del(&s->resume_node);
    }
    session_rx_stop(s);
    session_set_state(s, SESSION_DRAINING);
    session_retire_current(s);
    session_pump(s);
}

void session_sweep(struct daemon *d)
{
    const struct config *c = &d->config;
    uint64_t now = now_monotonic_ns();
    uint64_t max_age_ns = c->max_shard_age_ms * 1000000ull;
    struct list_node *n, *tmp;

    list_for_each_safe(n, tmp, &d->sessions) {
        struct session *s = list_entry(n, struct session, node);

        if (!session_is_open(s))
            continue;
        if (s->state == SESSION_HELLO_WAIT &&
            now - s->accepted_ns >= c->hello_timeout_ms * 1000000ull) {
            session_fail(s, ETIMEDOUT, "no HELLO within hello_timeout_ms (%" PRIu64 ")",
                         c->hello_timeout_ms);
            continue;
        }
        if (s->rx == RX_READING && s->rx_len > 0 &&
            now - s->last_rx_ns >= c->idle_timeout_ms * 1000000ull) {
            session_fail(s, ETIMEDOUT,
                         "a frame stayed incomplete (%zu bytes received) longer than "
                         "idle_timeout_ms (%" PRIu64 "); its complete records are kept",
                         s->rx_len, c->idle_timeout_ms);
            continue;
        }
        /* A producer waiting for its quota seals what it has, so that
         * merge, ship or prune can free it. */
        if (s->current && s->current->records_queued > 0 &&
            (s->rx == RX_QUOTA || now - s->current->created_mono_ns >= max_age_ns) &&
            session_can_retire(s)) {
            session_retire_current(s);
            session_pump(s);
        }
    }
}

void session_drain_all(struct daemon *d)
{
    struct list_node *n, *tmp;

    list_for_each_safe(n, tmp, &d->sessions)
        session_drain(list_entry(n, struct session, node));
}

size_t session_rotate(struct daemon *d, const char *producer, size_t *ret_busy)
{
    struct list_node *n, *tmp;
    size_t retired = 0, busy = 0;

    list_for_each_safe(n, tmp, &d->sessions) {
        struct session *s = list_entry(n, struct session, node);

        /* A shard without records (made at the welcome) has nothing to
         * seal: the next record would make a new one all the same. */
        if (!session_said_hello(s) || !s->current || s->current->records_appended == 0)
            continue;
        if (producer && strcmp(s->producer, producer) != 0)
            continue;
        if (s->state == SESSION_CLOSING) {
            /* Closed, its close callback still to come, which would seal
             * the shard a moment later: seal it now, so the caller sees it
             * being sealed. Nobody waits for ACKs any more. */
            session_retire_current(s);
            retired++;
            continue;
        }
        if (!session_is_open(s))
            continue; /* draining or failing: its shard is retired already */
        if (!session_can_retire(s)) {
            busy++;
            continue;
        }
        session_retire_current(s);
        retired++;
        session_pump(s);
    }
    if (ret_busy)
        *ret_busy = busy;
    return retired;
}

uint64_t session_acks_pending(const struct daemon *d)
{
    uint64_t n = 0;

    for (const struct list_node *p = d->sessions.next; p != &d->sessions; p = p->next) {
        const struct session *s = list_entry(p, struct session, node);

        if (s->state != SESSION_CLOSING)
            n += s->received - session_acked_through(s);
    }
    return n;
}
