/* Session receive side: the receive buffer, frame decoding, and when the
 * connection is read at all.
 *
 * Reads land in the daemon's one shared buffer; only the undecoded tail of
 * a read (an incomplete frame) is copied into a buffer of the session's
 * own, so an idle producer holds no receive buffer. A frame's declared
 * length is checked against max_frame_bytes before the buffer grows for it.
 * Each APPEND is validated whole before any of its records is taken, so a
 * bad frame never leaves half of itself in a shard. Records go to the
 * session's current shard; a shard that is full is retired and the next
 * record opens a new one.
 *
 * Reading stops (enum session_rx) for two reasons of its own: the always
 * gate (an APPEND waits for the sync of the one before it) and the budgets
 * (session_buffer_bytes for the session, memory_limit_bytes for the
 * daemon). A paused session reads again once it is back under half its own
 * budget and the daemon under three quarters of its limit, in the order the
 * sessions were paused. The disk budget (budget.h) is checked before each
 * APPEND: a producer at its quota waits (over_quota = wait; the frame
 * stays in the buffer, unread past it, until budget.c calls back) or is
 * refused; a spool at its budget refuses the frame.
 *
 * Connections take turns (read-turns.h): a read that finds the tick's
 * budget spent stops (RX_TURN), and the connection is read first at the
 * next tick, straight from its socket, up to the end of a frame. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "memory.h"
#include "read-turns.h"
#include "session-internal.h"
#include "shard.h"

#define RX_SCRATCH (64u * 1024u)
#define RX_MIN_OWN (4u * 1024u)
/* Every change of s->rx: a session that is no longer open is never read
 * again, and a paused one is on d->paused_sessions exactly while paused. */
static void set_rx(struct session *s, enum session_rx next)
{
    assert(next == RX_STOPPED || session_is_open(s));
    assert(list_linked(&s->paused_node) == (s->rx == RX_PAUSED));
    assert(list_linked(&s->quota_waiter.node) == (s->rx == RX_QUOTA));
    /* read_turns_take() takes a session off the queue before its turn. */
    assert(!read_turns_waiting(&s->turn) || s->rx == RX_TURN);
    if (s->rx == RX_PAUSED)
        list_del(&s->paused_node);
    if (s->rx == RX_QUOTA)
        budget_unwait(&s->quota_waiter);
    if (s->rx == RX_TURN)
        read_turns_leave(&s->turn);
    if (next == RX_PAUSED)
        list_add_tail(&s->d->paused_sessions, &s->paused_node);
    if (next == RX_TURN)
        read_turns_wait(s->d, &s->turn);
    s->rx = next;
}

/* ---- memory ---- */

/* Whether the session is inside a frame whose receive buffer already has
 * room for all of it. Such a session reads on to the frame's end whatever
 * the daemon as a whole holds: the rest costs no new receive memory, and
 * decoding the frame gives the buffer back. Paused for the daemon's limit
 * instead, a thousand producers each halfway through a frame of 256 KiB
 * held the whole limit in unfinished frames that nothing could finish, and
 * the daemon read nothing again. */
static bool finishing_frame(const struct session *s)
{
    return s->rx_need > s->rx_len && s->rx_cap >= s->rx_need;
}

/* The receive buffer counts here but not for resuming (session_rx_pump()):
 * it may hold a partial frame that only more reading can complete. The
 * daemon's memory counts every session's receive buffer (memory.c). */
static bool over_budget(const struct session *s)
{
    uint64_t held = session_buffered_bytes(s) + s->rx_cap;

    if (finishing_frame(s))
        return memory_session_over_budget(s->d, held);
    return memory_over_budget(s->d, held);
}

void session_rx_release(struct session *s)
{
    memory_map_release(s->d, &s->rx_buf, &s->rx_cap);
    s->rx_len = s->rx_need = 0;
}

/* Makes the session's own buffer hold at least cap bytes. It is a mapping
 * of memory.c's, like the batch buffers, and shares their pool: a thousand
 * producers each leaving a frame unfinished between reads would otherwise
 * map, grow and unmap a buffer each time, and pay for its pages again. */
static int rx_reserve(struct session *s, size_t cap)
{
    if (cap <= s->rx_cap)
        return 0;
    if (cap < RX_MIN_OWN)
        cap = RX_MIN_OWN;
    return memory_map_grow(s->d, &s->rx_buf, &s->rx_cap, cap,
                           (cap + RX_MIN_OWN - 1) & ~(size_t)(RX_MIN_OWN - 1));
}

/* ---- frames ---- */

/* Length of record index of an APPEND payload that was validated up to it. */
static uint32_t record_length_at(const unsigned char *payload, uint32_t index)
{
    size_t pos = WIRE_APPEND_FIXED;

    for (uint32_t i = 0; i < index; i++)
        pos += WIRE_RECORD_PREFIX + wire_get_u32(payload + pos);
    return wire_get_u32(payload + pos);
}

static void handle_append(struct session *s, const unsigned char *payload, size_t len)
{
    struct daemon *d = s->d;
    struct wire_append_iter it;
    const unsigned char *rec;
    uint32_t rlen, count, index;
    const char *why;
    uint64_t now, skip = 0;
    struct shard *reserved = NULL;
    int r;

    if (s->state == SESSION_HELLO_WAIT) {
        session_fail(s, EPROTO, "APPEND before HELLO");
        return;
    }
    if (s->protocol == WIRE_PROTOCOL_V2) {
        /* Version 2: the frame says where its records are in the stream.
         * What the stream has already is acknowledged, not written again;
         * a frame beyond it would leave a gap. */
        uint64_t first, expected = s->stream_start + s->received;

        if (len < WIRE_APPEND_POSITION) {
            session_fail(s, EPROTO, "malformed APPEND frame: %zu bytes, too short for its "
                         "position; the frame is refused", len);
            return;
        }
        first = wire_get_u64(payload);
        if (first > expected) {
            session_fail(s, EPROTO,
                         "APPEND starts at position %" PRIu64 " but the stream is at %" PRIu64
                         "; the records between are missing, so the frame is refused",
                         first, expected);
            return;
        }
        skip = expected - first;
        payload += WIRE_APPEND_POSITION;
        len -= WIRE_APPEND_POSITION;
    }
    r = wire_append_validate(payload, len, (uint32_t)s->max_record_bytes, &count, &index, &why);
    if (r < 0) {
        if (r == -EMSGSIZE)
            session_fail(s, EMSGSIZE,
                         "record %u of the APPEND frame is %" PRIu32 " bytes, over "
                         "max_record_bytes (%" PRIu64 "); the frame is refused",
                         index, record_length_at(payload, index), s->max_record_bytes);
        else
            session_fail(s, EPROTO, "malformed APPEND frame: %s (record %u); the frame is refused",
                         why, index);
        return;
    }

    now = now_realtime_ns();
    wire_append_iter_init(&it, payload, len);
    for (uint32_t i = 0; wire_append_iter_next(&it, &rec, &rlen); i++) {
        if (skip > 0) {
            skip--;
            d->stats.records_duplicate++;
            s->ack_due = true;
            continue;
        }
        r = session_ensure_shard(s);
        if (r == -EMFILE && d->open_shards >= d->config.max_open_shards) {
            d->stats.refused_limit++;
            session_fail(s, EMFILE, "max_open_shards (%" PRIu64 ") reached; no shard for it",
                         d->config.max_open_shards);
            return;
        }
        if (r < 0) {
            session_fail(s, (uint32_t)-r, "cannot create a shard in %s/active: %s",
                         d->config.spool, strerror(-r));
            return;
        }
        if (s->current != reserved) {
            /* The rest of the frame, with the shard's record headers: one
             * growth of the batch instead of several. */
            reserved = s->current;
            (void)shard_reserve(reserved, (size_t)(payload + len - rec) +
                                              (size_t)(count - i) * SHARD_RECORD_HEADER);
        }
        r = shard_append(s->current, rec, rlen, now);
        if (r < 0) {
            session_fail(s, (uint32_t)-r, "cannot take a record: %s", strerror(-r));
            return;
        }
        s->received++;
        d->stats.records_received++;
        d->stats.bytes_received += rlen;
        if (s->current->size_queued >= d->config.max_shard_bytes && session_can_retire(s))
            session_retire_current(s);
    }
}


static void handle_frame(struct session *s, uint8_t type, const unsigned char *payload,
                         size_t len)
{
    switch (type) {
    case WIRE_HELLO:
        session_handle_hello(s, payload, len);
        break;
    case WIRE_APPEND:
        handle_append(s, payload, len);
        break;
    default:
        session_fail(s, EPROTO, "frame type %u (%s) is not accepted from producers", type,
                     wire_type_name(type));
        break;
    }
}

/* fsync = always: the connection is not read while a frame waits for the
 * sync of the one before it. */
static void hold_for_gate(struct session *s)
{
    if (s->rx == RX_READING)
        (void)uv_read_stop((uv_stream_t *)&s->pipe); /* cannot fail */
    set_rx(s, RX_GATED);
}

/* The disk budget's word on the next APPEND: false when it may be taken;
 * true when the session now waits for its producer's share (RX_QUOTA) or
 * has failed with the budget's reason. */
static bool budget_stops(struct session *s)
{
    char why[512];
    int r = budget_admit(s->d, s->budget, why, sizeof(why));

    if (r == 0)
        return false;
    if (r == -EDQUOT && s->d->config.over_quota == OVER_QUOTA_WAIT) {
        if (s->rx == RX_READING)
            (void)uv_read_stop((uv_stream_t *)&s->pipe); /* cannot fail */
        set_rx(s, RX_QUOTA);
        budget_wait(s->d, s->budget, &s->quota_waiter);
        /* Its open shard counts against the quota too, but only a sealed
         * shard can be merged, shipped or pruned away: sealed now (or by
         * the sweep, once the shard before it has settled). */
        if (s->current && s->current->records_queued > 0 && session_can_retire(s)) {
            session_retire_current(s);
            session_pump(s);
        }
        return true;
    }
    budget_count_refused(s->d, s->budget);
    session_fail(s, (uint32_t)-r, "%s; the frame is refused", why);
    return true;
}

/* Decodes every complete frame of buf[0..len) and returns how many bytes
 * were consumed; the rest (an incomplete frame, or frames the always gate
 * holds back) is for the caller to keep. Sets *ret_need to the size of the
 * incomplete frame when its header is known (0 otherwise). */
static size_t decode_frames(struct session *s, const unsigned char *buf, size_t len,
                            size_t *ret_need)
{
    size_t pos = 0;

    *ret_need = 0;
    while (session_is_open(s) && len - pos >= WIRE_HEADER_SIZE) {
        struct wire_header h;
        int r = wire_decode_header(buf + pos, (uint32_t)session_frame_limit(s), &h);
        size_t need;

        if (r == -EMSGSIZE) {
            session_fail(s, EMSGSIZE,
                         "frame of %" PRIu32 " bytes is over max_frame_bytes (%" PRIu64 ")",
                         wire_get_u32(buf + pos), session_frame_limit(s));
            break;
        }
        if (r == -EBADMSG) {
            session_fail(s, EBADMSG, "unknown frame type %u", buf[pos + 4]);
            break;
        }
        if (r < 0) {
            session_fail(s, EPROTO, "malformed frame header (reserved bytes not zero)");
            break;
        }
        need = WIRE_HEADER_SIZE + (size_t)h.length;
        if (h.type == WIRE_APPEND && session_gate_closed(s)) {
            /* always: this frame waits until the one before it is synced
             * and acknowledged, so that no sync is shared. */
            hold_for_gate(s);
            break;
        }
        if (h.type == WIRE_APPEND && budget_stops(s))
            break;
        if (len - pos < need) {
            /* The length is within the limit: safe to make room for it. */
            *ret_need = need;
            break;
        }
        handle_frame(s, h.type, buf + pos + WIRE_HEADER_SIZE, h.length);
        pos += need;
    }
    return pos;
}

/* Decodes what the session's own buffer holds and keeps only the rest. */
static void process_rx(struct session *s)
{
    size_t need, used;

    if (!s->rx_len)
        return;
    used = decode_frames(s, s->rx_buf, s->rx_len, &need);
    if (used > 0) {
        memmove(s->rx_buf, s->rx_buf + used, s->rx_len - used);
        s->rx_len -= used;
    }
    if (s->rx_len == 0)
        session_rx_release(s);
    else if (need > s->rx_cap && rx_reserve(s, need) < 0)
        session_fail(s, ENOMEM, "out of memory for a frame of %zu bytes", need);
    else
        s->rx_need = need;
}

/* Keeps the undecoded tail of a read that landed in the shared buffer. */
static void keep_tail(struct session *s, const unsigned char *tail, size_t len, size_t need)
{
    if (rx_reserve(s, need > len ? need : len) < 0) {
        session_fail(s, ENOMEM, "out of memory for a frame of %zu bytes", need);
        return;
    }
    memcpy(s->rx_buf, tail, len);
    s->rx_len = len;
    s->rx_need = need;
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct session *s = h->data;
    struct daemon *d = s->d;

    (void)suggested;
    if (s->rx_need > s->rx_len) {
        /* An incomplete frame: read no further than its end, so that the
         * read that completes it leaves nothing behind and the buffer is
         * given back. Its turn lasts until then: a connection waiting for
         * its turn holds no partial frame. */
        *buf = uv_buf_init((char *)s->rx_buf + s->rx_len, (unsigned)(s->rx_need - s->rx_len));
        return;
    }
    if (s->rx == RX_READING && read_turns_spent(d)) {
        /* The tick's budget is spent: on_read hears UV_ENOBUFS and makes
         * this connection wait its turn, nothing read. */
        s->turn_over = true;
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    /* Nothing pending: read into the shared buffer, decode from there, and
     * keep only a tail. Most reads of most producers end on a frame
     * boundary, so an idle producer costs no buffer at all. */
    if (s->rx_len == 0 && !d->rx_scratch_busy) {
        d->rx_scratch_busy = true;
        *buf = uv_buf_init((char *)d->rx_scratch, RX_SCRATCH);
        return;
    }
    if (s->rx_cap - s->rx_len < RX_MIN_OWN &&
        rx_reserve(s, s->rx_len + RX_SCRATCH) < 0) {
        *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init((char *)s->rx_buf + s->rx_len, (unsigned)(s->rx_cap - s->rx_len));
}

static void pause_reading(struct session *s)
{
    (void)uv_read_stop((uv_stream_t *)&s->pipe); /* cannot fail */
    set_rx(s, RX_PAUSED);
}

/* What a read brought, from libuv or from a turn: bytes to decode, the
 * end of the connection, or an error. */
static void take_read(struct session *s, ssize_t nread, const uv_buf_t *buf)
{
    /* libuv hands back the buffer on_alloc gave, whatever nread is: a read
     * into the shared buffer is recognised by its address. */
    bool scratch = buf->base && buf->base == (char *)s->d->rx_scratch;
    char w[160];

    if (scratch)
        s->d->rx_scratch_busy = false; /* decoded below before anyone else reads */
    if (nread == 0)
        return;
    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            session_fail(s, ENOMEM, "out of memory for its receive buffer");
        } else if (s->rx_len > 0) {
            uint32_t declared = s->rx_len >= 4 ? wire_get_u32(s->rx_buf) : 0;
            session_fail(s, EPROTO,
                         "connection closed inside a frame (%zu of %s%" PRIu32
                         " bytes received); the partial frame is dropped",
                         s->rx_len, s->rx_len >= 4 ? "" : "at least ",
                         s->rx_len >= 4 ? declared + WIRE_HEADER_SIZE : WIRE_HEADER_SIZE);
        } else {
            if (nread != UV_EOF)
                log_warning_ratelimited(s->d->loop, "producer connections whose read failed",
                                        "%s: read failed: %s", session_who(s, w, sizeof(w)),
                                        uv_strerror((int)nread));
            log_debug("%s: disconnected after %" PRIu64 " records",
                      session_who(s, w, sizeof(w)), s->received);
            /* The peer is gone: nothing more to send, so close now and let
             * the shards finish on their own. */
            session_close(s);
        }
        return;
    }
    s->last_rx_ns = now_monotonic_ns();
    read_turns_spend(s->d, (size_t)nread);
    if (scratch) {
        const unsigned char *base = (const unsigned char *)buf->base;
        size_t need, used = decode_frames(s, base, (size_t)nread, &need);

        if (used < (size_t)nread && session_is_open(s))
            keep_tail(s, base + used, (size_t)nread - used, need);
    } else {
        s->rx_len += (size_t)nread;
        process_rx(s);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct session *s = stream->data;

    if (nread == UV_ENOBUFS && s->turn_over) {
        s->turn_over = false;
        (void)uv_read_stop(stream); /* cannot fail */
        set_rx(s, RX_TURN);
        return;
    }
    take_read(s, nread, buf);
    if (session_is_open(s) && s->rx == RX_READING && over_budget(s))
        pause_reading(s);
    session_pump(s);
}

/* A connection whose turn has come is read straight from its socket
 * (libuv is not reading it), up to the end of a frame. A full read means
 * more may wait: it takes another turn, after the others; a short one goes
 * back to libuv. */
void session_rx_take_turn(struct read_turn *t)
{
    struct session *s = (struct session *)((char *)t - offsetof(struct session, turn));
    uv_os_fd_t fd;
    uv_buf_t buf;
    ssize_t n;

    set_rx(s, RX_STOPPED);
    (void)uv_fileno((uv_handle_t *)&s->pipe, &fd); /* an open pipe has one */
    for (;;) {
        on_alloc((uv_handle_t *)&s->pipe, RX_SCRATCH, &buf);
        if (!buf.base) {
            session_fail(s, ENOMEM, "out of memory for its receive buffer");
            break;
        }
        do
            n = read(fd, buf.base, buf.len);
        while (n < 0 && errno == EINTR);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            take_read(s, 0, &buf); /* nothing read: gives the buffer back */
            session_start_reading(s);
            break;
        }
        /* An error or the end of the connection closes the session. */
        take_read(s, n < 0 ? -errno : n == 0 ? UV_EOF : n, &buf);
        if (!session_is_open(s) || s->rx != RX_STOPPED)
            break;
        if (over_budget(s)) {
            set_rx(s, RX_PAUSED);
            break;
        }
        if ((size_t)n < buf.len) {
            session_start_reading(s);
            break;
        }
        if (s->rx_need <= s->rx_len) {
            set_rx(s, RX_TURN);
            break;
        }
    }
    session_pump(s);
}

void session_start_reading(struct session *s)
{
    int r = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);

    if (r < 0) {
        char w[160];
        log_error("%s: cannot read: %s", session_who(s, w, sizeof(w)), uv_strerror(r));
        session_close(s);
        return;
    }
    set_rx(s, RX_READING);
}

void session_rx_stop(struct session *s)
{
    if (s->rx == RX_READING)
        (void)uv_read_stop((uv_stream_t *)&s->pipe); /* cannot fail */
    set_rx(s, RX_STOPPED);
}

void session_quota_resume(struct budget_waiter *w)
{
    struct session *s = (struct session *)((char *)w - offsetof(struct session, quota_waiter));

    /* budget.c has taken w off its list already. */
    assert(s->rx == RX_QUOTA && session_is_open(s));
    list_init(&w->node);
    s->rx = RX_STOPPED;
    process_rx(s);
    if (session_is_open(s) && s->rx == RX_STOPPED)
        session_start_reading(s);
    session_pump(s);
}

void session_rx_pump(struct session *s)
{
    /* Only an open session is gated or paused (set_rx). */
    if (s->rx == RX_GATED && !session_gate_closed(s)) {
        set_rx(s, RX_STOPPED);
        process_rx(s);
        if (session_is_open(s) && s->rx == RX_STOPPED)
            session_start_reading(s);
    }
    if (s->rx == RX_PAUSED && memory_session_may_resume(s->d, session_buffered_bytes(s)) &&
        (memory_daemon_may_resume(s->d) || finishing_frame(s))) {
        set_rx(s, RX_STOPPED);
        session_start_reading(s);
    }
}
