/* Session: one producer connection, from HELLO to close.
 *
 * Frames are read into one receive buffer; a frame's declared length is
 * checked against max_frame_bytes before the buffer grows for it. Each
 * APPEND is validated whole before any of its records is taken, so a bad
 * frame never leaves half of itself in a shard. Records go to the session's
 * current shard; a shard that is full or too old is retired (sealed once its
 * writes are done) and the next record opens a new one.
 *
 * ACKs are cumulative over the connection. A record counts as acknowledged
 * once every record before it, in this shard and in older shards of the
 * session that are still being written, is written too. Only one write to
 * the socket is in flight at a time; the latest ACK value replaces older
 * unsent ones, so a producer that does not read cannot make us queue.
 *
 * Any error ends the session the same way: stop reading, let what was
 * accepted be written, send the last ACK, then the ERROR, close, seal. */
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "notify.h"
#include "shard.h"
#include "wire.h"

#define RX_SCRATCH (64u * 1024u)
#define RX_MIN_OWN (4u * 1024u)
#define MAX_RETIRING 8u

enum session_state {
    SESSION_OPEN,
    SESSION_DRAINING, /* no more reading; finish, ACK, close */
    SESSION_FAILING,  /* like draining, then send the ERROR */
    SESSION_CLOSING,  /* uv_close called */
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

    bool hello_done;
    unsigned fsync_policy; /* enum fsync_policy, fixed at HELLO */
    bool gated;            /* always: frames wait until the last one is synced */
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    size_t producer_len;

    /* Bytes of an incomplete frame (or of frames held back by the always
     * gate) between reads. NULL while there are none: an idle producer
     * holds no receive buffer; reads land in the daemon's shared one. */
    unsigned char *rx;
    size_t rx_len, rx_cap;
    bool rx_in_scratch; /* the read in progress uses d->rx_scratch */
    bool reading;
    bool paused;        /* reading stopped: over its own or the daemon's budget */
    struct list_node paused_node; /* d->paused_sessions while paused */
    bool admitted;      /* counted in sessions_open */
    uint64_t accepted_ns;
    uint64_t last_rx_ns;

    uint64_t received;
    uint64_t ack_sent;

    struct shard *current;
    uint64_t current_base;
    struct retired retiring[MAX_RETIRING];
    unsigned n_retiring;
    uint64_t ack_limit; /* records after a failed write are never acknowledged */
    /* Limits as announced in WELCOME; a reload does not change them under a
     * client that has built its frames for them. */
    uint64_t max_frame_bytes;
    uint64_t max_record_bytes;

    /* Output: one write at a time, WELCOME, then ACKs, then the ERROR. */
    uv_write_t wreq;
    bool write_busy;
    bool welcome_pending;
    unsigned char obuf[WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX];
    uint32_t error_code;
    char *error_message;
    bool error_sent;
};

static void session_pump(struct session *s);
static void resume_paused(struct daemon *d);
static void start_reading(struct session *s);
static bool gate_closed(const struct session *s);
static void process_rx(struct session *s);

static const char *who(const struct session *s, char *buf, size_t len)
{
    if (s->hello_done)
        snprintf(buf, len, "producer %s (conn %" PRIu64 ", pid %d, uid %u)", s->producer,
                 s->id, (int)s->cred.pid, (unsigned)s->cred.uid);
    else
        snprintf(buf, len, "connection %" PRIu64 " (pid %d, uid %u, before HELLO)", s->id,
                 (int)s->cred.pid, (unsigned)s->cred.uid);
    return buf;
}

/* ---- acknowledgement bookkeeping ---- */

static uint64_t acked_through_shards(const struct session *s)
{
    for (unsigned i = 0; i < s->n_retiring; i++) {
        const struct retired *r = &s->retiring[i];
        uint64_t acked = shard_records_acked(r->shard);
        if (r->shard->error || acked < r->shard->records_queued)
            return r->base + acked;
    }
    if (s->current)
        return s->current_base + shard_records_acked(s->current);
    return s->received;
}

static uint64_t acked_through(const struct session *s)
{
    uint64_t a = acked_through_shards(s);
    return a < s->ack_limit ? a : s->ack_limit;
}

static bool all_settled(const struct session *s)
{
    if (s->n_retiring > 0)
        return false;
    return !s->current || shard_settled(s->current) || s->current->error;
}

/* Memory held for the session's records until they are written: the
 * capacity of its shards' batch buffers, not only the bytes in them, since
 * capacity is what the daemon's RSS pays for. session_buffer_bytes bounds
 * this (with the receive buffer, see over_budget()). */
static uint64_t buffered_bytes(const struct session *s)
{
    uint64_t n = s->current ? shard_buffer_bytes(s->current) : 0;

    for (unsigned i = 0; i < s->n_retiring; i++)
        n += shard_buffer_bytes(s->retiring[i].shard);
    return n;
}

/* ---- shards ---- */

static void on_shard_written(void *owner, struct shard *sh);
static void on_shard_failed(void *owner, struct shard *sh, int err);

static const struct shard_events session_shard_events = {
    .written = on_shard_written,
    .failed = on_shard_failed,
};

static void drop_retired(struct session *s, unsigned i)
{
    memmove(&s->retiring[i], &s->retiring[i + 1],
            (s->n_retiring - i - 1) * sizeof(s->retiring[0]));
    s->n_retiring--;
}

/* Hands the current shard over to sealing. Its writes may still be in
 * flight; it then stays on the retiring list (and counts for ACKs) until
 * they are done. Callers check can_retire() first, except when the session
 * ends and ACKs no longer matter. */
static bool can_retire(const struct session *s)
{
    return s->n_retiring < MAX_RETIRING;
}

static void retire_current(struct session *s)
{
    struct shard *sh = s->current;

    if (!sh)
        return;
    s->current = NULL;
    if (shard_settled(sh) || sh->error || !can_retire(s)) {
        shard_detach(sh);
    } else {
        s->retiring[s->n_retiring].shard = sh;
        s->retiring[s->n_retiring].base = s->current_base;
        s->n_retiring++;
    }
    shard_seal(sh);
}

static void release_settled_retired(struct session *s)
{
    for (unsigned i = 0; i < s->n_retiring;) {
        struct shard *sh = s->retiring[i].shard;

        if (shard_settled(sh) || sh->error) {
            shard_detach(sh);
            drop_retired(s, i);
        } else {
            i++;
        }
    }
}

static void on_shard_written(void *owner, struct shard *sh)
{
    (void)sh;
    session_pump(owner);
}

static void session_fail(struct session *s, uint32_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void on_shard_failed(void *owner, struct shard *sh, int err)
{
    struct session *s = owner;
    uint64_t base = s->current_base;

    for (unsigned i = 0; i < s->n_retiring; i++)
        if (s->retiring[i].shard == sh)
            base = s->retiring[i].base;
    if (base + shard_records_acked(sh) < s->ack_limit)
        s->ack_limit = base + shard_records_acked(sh);
    if (sh->sync_error)
        session_fail(s, (uint32_t)-err,
                     "fdatasync of shard active/%s failed: %s; records after the last "
                     "acknowledged one were not kept",
                     shard_display_name(sh), strerror(-err));
    else
        session_fail(s, (uint32_t)-err,
                     "write to shard active/%s failed: %s; records after the last "
                     "acknowledged one were not kept",
                     shard_display_name(sh), strerror(-err));
}

static int ensure_shard(struct session *s)
{
    struct shard_ident ident = {
        .producer = s->producer,
        .producer_len = s->producer_len,
        .uid = s->cred.uid,
        .gid = s->cred.gid,
        .pid = (uint32_t)s->cred.pid,
        .fsync_policy = s->fsync_policy,
    };
    int r;

    if (s->current)
        return 0;
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
        log_debug("%s: send failed: %s", who(s, w, sizeof(w)), uv_strerror(status));
        s->error_sent = true;
        s->ack_sent = UINT64_MAX;
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
        s->error_sent = true;
        s->ack_sent = UINT64_MAX;
        return;
    }
    s->write_busy = true;
}

static void on_closed(uv_handle_t *h);

static void session_close(struct session *s)
{
    if (s->state == SESSION_CLOSING)
        return;
    s->state = SESSION_CLOSING;
    if (s->reading)
        (void)uv_read_stop((uv_stream_t *)&s->pipe);
    s->reading = false;
    uv_close((uv_handle_t *)&s->pipe, on_closed);
}

/* Moves the session forward: sends what is due and closes once a draining or
 * failing session has nothing left to say. */
void session_resume_paused(struct daemon *d)
{
    resume_paused(d);
}

/* When the daemon's memory falls back under the limit, sessions paused for
 * it resume in the order they were paused (each reads once before anyone
 * reads twice). */
static void resume_paused(struct daemon *d)
{
    struct list_node *n, *tmp;

    if (d->memory_bytes > d->config.memory_limit_bytes / 4 * 3)
        return;
    list_for_each_safe(n, tmp, &d->paused_sessions) {
        struct session *p = list_entry(n, struct session, paused_node);
        if (buffered_bytes(p) <= d->config.session_buffer_bytes / 2)
            session_pump(p);
    }
}

static void session_pump(struct session *s)
{
    uint64_t acked;

    if (s->state == SESSION_CLOSING)
        return;
    release_settled_retired(s);
    acked = acked_through(s);

    if (s->gated && s->state == SESSION_OPEN && !gate_closed(s)) {
        s->gated = false;
        process_rx(s);
        if (s->state == SESSION_OPEN && !s->gated && !s->paused && !s->reading)
            start_reading(s);
    }
    if (s->paused && s->state == SESSION_OPEN &&
        buffered_bytes(s) <= s->d->config.session_buffer_bytes / 2 &&
        s->d->memory_bytes <= s->d->config.memory_limit_bytes / 4 * 3) {
        s->paused = false;
        list_del(&s->paused_node);
        if (!s->gated && !s->reading)
            start_reading(s);
    }

    if (s->write_busy)
        return;
    if (s->welcome_pending) {
        struct wire_welcome w = {
            .version = WIRE_PROTOCOL_VERSION,
            .fsync_policy = (uint8_t)s->fsync_policy,
            .max_record_bytes = (uint32_t)s->max_record_bytes,
            .max_frame_bytes = (uint32_t)s->max_frame_bytes,
        };
        s->welcome_pending = false;
        send_buffer(s, wire_encode_welcome(s->obuf, &w));
        return;
    }
    if (s->ack_sent != UINT64_MAX && acked > s->ack_sent) {
        s->d->stats.records_acked += acked - s->ack_sent;
        s->ack_sent = acked;
        send_buffer(s, wire_encode_ack(s->obuf, acked));
        return;
    }
    if (s->state == SESSION_OPEN || !all_settled(s))
        return;
    if (s->state == SESSION_FAILING && !s->error_sent) {
        s->error_sent = true;
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
    default: return NULL;
    }
}

static void session_fail(struct session *s, uint32_t code, const char *fmt, ...)
{
    char msg[WIRE_ERROR_MESSAGE_MAX];
    char w[160];
    struct log_ratelimit *budget;
    va_list ap;

    if (s->state != SESSION_OPEN && s->state != SESSION_DRAINING)
        return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    budget = peer_failure_budget(s, code);
    if (budget)
        log_msg_ratelimited(budget, s->d->loop, LOG_LEVEL_WARNING,
                            "%s: %s; closing the connection", who(s, w, sizeof(w)), msg);
    else
        log_warning("%s: %s; closing the connection", who(s, w, sizeof(w)), msg);
    notify_set_error(s->d, "%s: %s", who(s, w, sizeof(w)), msg);
    /* Each failure is counted once, by kind: refusals where they are
     * decided (admit), write and sync failures in shard.c, and here what the
     * peer got wrong and the timeouts. */
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
    s->error_message = strdup(msg);
    if (!s->error_message) {
        s->error_sent = true; /* cannot say why; just close */
    }
    s->state = SESSION_FAILING;
    if (s->reading)
        (void)uv_read_stop((uv_stream_t *)&s->pipe);
    s->reading = false;
    retire_current(s);
    session_pump(s);
}

/* ---- frames ---- */

static void handle_hello(struct session *s, const unsigned char *payload, size_t len)
{
    struct wire_hello h;
    int r;

    if (s->hello_done) {
        session_fail(s, EPROTO, "HELLO sent twice");
        return;
    }
    r = wire_decode_hello(payload, len, &h);
    if (r == -EPROTONOSUPPORT) {
        session_fail(s, EPROTONOSUPPORT, "protocol version %u is not supported (this daemon speaks %u)",
                     (unsigned)wire_get_u16(payload), WIRE_PROTOCOL_VERSION);
        return;
    }
    if (r == -EINVAL) {
        size_t n = len - WIRE_HELLO_FIXED;
        char shown[WIRE_PRODUCER_NAME_MAX * 4 + 8];
        size_t o = 0;

        /* Show the refused name with anything unprintable escaped. */
        for (size_t i = 0; i < n && i < 80 && o + 5 < sizeof(shown); i++) {
            unsigned char c = payload[WIRE_HELLO_FIXED + i];
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
        session_fail(s, EPROTO, "malformed HELLO frame (%zu bytes payload, flags must be 0)",
                     len);
        return;
    }
    memcpy(s->producer, h.name, h.name_len);
    s->producer[h.name_len] = '\0';
    s->producer_len = h.name_len;
    s->hello_done = true;
    s->fsync_policy = (unsigned)s->d->config.fsync_policy;
    s->welcome_pending = true;
    log_debug("producer %s connected (conn %" PRIu64 ", pid %d, uid %u)", s->producer, s->id,
              (int)s->cred.pid, (unsigned)s->cred.uid);
}

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
    uint64_t now;
    int r;

    if (!s->hello_done) {
        session_fail(s, EPROTO, "APPEND before HELLO");
        return;
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
    while (wire_append_iter_next(&it, &rec, &rlen)) {
        r = ensure_shard(s);
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
        r = shard_append(s->current, rec, rlen, now);
        if (r < 0) {
            session_fail(s, (uint32_t)-r, "cannot take a record: %s", strerror(-r));
            return;
        }
        s->received++;
        d->stats.records_received++;
        d->stats.bytes_received += rlen;
        if (s->current->size_queued >= d->config.max_shard_bytes && can_retire(s))
            retire_current(s);
    }
}

static void handle_frame(struct session *s, uint8_t type, const unsigned char *payload,
                         size_t len)
{
    switch (type) {
    case WIRE_HELLO:
        handle_hello(s, payload, len);
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

static bool gate_closed(const struct session *s)
{
    return s->fsync_policy == FSYNC_ALWAYS && !all_settled(s);
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
    while (s->state == SESSION_OPEN && len - pos >= WIRE_HEADER_SIZE) {
        struct wire_header h;
        int r = wire_decode_header(buf + pos, (uint32_t)s->max_frame_bytes, &h);
        size_t need;

        if (r == -EMSGSIZE) {
            session_fail(s, EMSGSIZE,
                         "frame of %" PRIu32 " bytes is over max_frame_bytes (%" PRIu64 ")",
                         wire_get_u32(buf + pos), s->max_frame_bytes);
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
        if (h.type == WIRE_APPEND && gate_closed(s)) {
            /* always: this frame waits until the one before it is synced
             * and acknowledged, so that no sync is shared. */
            s->gated = true;
            break;
        }
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

static void mem_adjust(struct daemon *d, size_t add, size_t sub)
{
    d->memory_bytes += add;
    d->memory_bytes -= sub;
}

static void rx_release(struct session *s)
{
    mem_adjust(s->d, 0, s->rx_cap);
    free(s->rx);
    s->rx = NULL;
    s->rx_len = s->rx_cap = 0;
}

/* Makes the session's own buffer hold at least cap bytes. */
static int rx_reserve(struct session *s, size_t cap)
{
    unsigned char *nb;

    if (cap <= s->rx_cap)
        return 0;
    if (cap < RX_MIN_OWN)
        cap = RX_MIN_OWN;
    nb = realloc(s->rx, cap);
    if (!nb)
        return -ENOMEM;
    mem_adjust(s->d, cap, s->rx_cap);
    s->rx = nb;
    s->rx_cap = cap;
    return 0;
}

/* Decodes what the session's own buffer holds and keeps only the rest. */
static void process_rx(struct session *s)
{
    size_t need, used;

    if (!s->rx_len)
        return;
    used = decode_frames(s, s->rx, s->rx_len, &need);
    if (used > 0) {
        memmove(s->rx, s->rx + used, s->rx_len - used);
        s->rx_len -= used;
    }
    if (s->rx_len == 0)
        rx_release(s);
    else if (need > s->rx_cap && rx_reserve(s, need) < 0)
        session_fail(s, ENOMEM, "out of memory for a frame of %zu bytes", need);
}

/* Keeps the undecoded tail of a read that landed in the shared buffer. */
static void keep_tail(struct session *s, const unsigned char *tail, size_t len, size_t need)
{
    if (rx_reserve(s, need > len ? need : len) < 0) {
        session_fail(s, ENOMEM, "out of memory for a frame of %zu bytes", need);
        return;
    }
    memcpy(s->rx, tail, len);
    s->rx_len = len;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct session *s = h->data;
    struct daemon *d = s->d;

    (void)suggested;
    /* Nothing pending: read into the shared buffer, decode from there, and
     * keep only a tail. Most reads of most producers end on a frame
     * boundary, so an idle producer costs no buffer at all. */
    if (s->rx_len == 0 && !d->rx_scratch_busy) {
        d->rx_scratch_busy = true;
        s->rx_in_scratch = true;
        *buf = uv_buf_init((char *)d->rx_scratch, RX_SCRATCH);
        return;
    }
    if (s->rx_cap - s->rx_len < RX_MIN_OWN &&
        rx_reserve(s, s->rx_len + RX_SCRATCH) < 0) {
        *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
        return;
    }
    *buf = uv_buf_init((char *)s->rx + s->rx_len, (unsigned)(s->rx_cap - s->rx_len));
}

/* The receive buffer counts here but not for resuming (session_pump()):
 * it may hold a partial frame that only more reading can complete. */
static bool over_budget(const struct session *s)
{
    return buffered_bytes(s) + s->rx_cap > s->d->config.session_buffer_bytes ||
           s->d->memory_bytes > s->d->config.memory_limit_bytes;
}

static void pause_reading(struct session *s)
{
    (void)uv_read_stop((uv_stream_t *)&s->pipe);
    s->reading = false;
    if (!s->gated) {
        s->paused = true;
        if (!list_linked(&s->paused_node))
            list_add_tail(&s->d->paused_sessions, &s->paused_node);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct session *s = stream->data;
    bool scratch = s->rx_in_scratch;
    char w[160];

    s->rx_in_scratch = false;
    if (scratch)
        s->d->rx_scratch_busy = false; /* decoded below before anyone else reads */
    if (nread == 0)
        return;
    if (nread < 0) {
        if (nread == UV_ENOBUFS) {
            session_fail(s, ENOMEM, "out of memory for its receive buffer");
        } else if (s->rx_len > 0) {
            uint32_t declared = s->rx_len >= 4 ? wire_get_u32(s->rx) : 0;
            session_fail(s, EPROTO,
                         "connection closed inside a frame (%zu of %s%" PRIu32
                         " bytes received); the partial frame is dropped",
                         s->rx_len, s->rx_len >= 4 ? "" : "at least ",
                         s->rx_len >= 4 ? declared + WIRE_HEADER_SIZE : WIRE_HEADER_SIZE);
        } else {
            if (nread != UV_EOF)
                log_warning_ratelimited(s->d->loop, "producer connections whose read failed",
                                        "%s: read failed: %s", who(s, w, sizeof(w)),
                                        uv_strerror((int)nread));
            log_debug("%s: disconnected after %" PRIu64 " records", who(s, w, sizeof(w)),
                      s->received);
            if (s->reading)
                (void)uv_read_stop(stream);
            s->reading = false;
            /* The peer is gone: nothing more to send, so close now and let
             * the shards finish on their own. */
            session_close(s);
        }
        return;
    }
    s->last_rx_ns = now_monotonic_ns();
    if (scratch) {
        size_t need, used = decode_frames(s, (const unsigned char *)buf->base, (size_t)nread, &need);
        if (used < (size_t)nread && s->state == SESSION_OPEN)
            keep_tail(s, (const unsigned char *)buf->base + used, (size_t)nread - used, need);
    } else {
        s->rx_len += (size_t)nread;
        process_rx(s);
    }
    if (s->state == SESSION_OPEN && s->reading && (s->gated || over_budget(s)))
        pause_reading(s);
    session_pump(s);
}

static void start_reading(struct session *s)
{
    int r = uv_read_start((uv_stream_t *)&s->pipe, on_alloc, on_read);

    if (r < 0) {
        char w[160];
        log_error("%s: cannot read: %s", who(s, w, sizeof(w)), uv_strerror(r));
        session_close(s);
        return;
    }
    s->reading = true;
}

/* ---- lifetime ---- */

static void on_closed(uv_handle_t *h)
{
    struct session *s = h->data;
    struct daemon *d = s->d;

    retire_current(s);
    for (unsigned i = 0; i < s->n_retiring; i++)
        shard_detach(s->retiring[i].shard);
    s->n_retiring = 0;
    list_del(&s->node);
    if (list_linked(&s->paused_node))
        list_del(&s->paused_node);
    if (s->admitted) {
        d->stats.sessions_open--;
        notify_changed(d);
    }
    mem_adjust(d, 0, s->rx_cap);
    free(s->rx);
    free(s->error_message);
    free(s);
    daemon_maybe_finish(d);
}

static size_t sessions_of_uid(const struct daemon *d, uint32_t uid)
{
    size_t n = 0;

    for (const struct list_node *p = d->sessions.next; p != &d->sessions; p = p->next) {
        const struct session *o = list_entry(p, struct session, node);
        n += o->admitted && o->cred.uid == uid;
    }
    return n;
}

/* The access lists and the connection limits, checked before the producer
 * says anything. A refused peer gets an ERROR naming the rule and its
 * value, and is closed. */
static void admit(struct session *s)
{
    struct daemon *d = s->d;
    const struct config *c = &d->config;

    if ((c->allowed_uids.n || c->allowed_gids.n) &&
        !config_id_list_contains(&c->allowed_uids, s->cred.uid) &&
        !config_id_list_contains(&c->allowed_gids, s->cred.gid)) {
        d->stats.refused_access++;
        session_fail(s, EACCES,
                     "uid %u, gid %u may not produce here (not in allowed_uids or "
                     "allowed_gids)",
                     (unsigned)s->cred.uid, (unsigned)s->cred.gid);
        return;
    }
    if (d->stats.sessions_open >= c->max_producers) {
        d->stats.refused_limit++;
        session_fail(s, EUSERS, "max_producers (%" PRIu64 ") reached", c->max_producers);
        return;
    }
    if (c->max_producers_per_uid && sessions_of_uid(d, s->cred.uid) >= c->max_producers_per_uid) {
        d->stats.refused_limit++;
        session_fail(s, EUSERS, "max_producers_per_uid (%" PRIu64 ") reached for uid %u",
                     c->max_producers_per_uid, (unsigned)s->cred.uid);
        return;
    }
    s->admitted = true;
    d->stats.sessions_open++;
    notify_changed(d);
}

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
    s->ack_limit = UINT64_MAX;
    s->max_frame_bytes = d->config.max_frame_bytes;
    s->max_record_bytes = d->config.max_record_bytes;
    s->id = ++d->next_session_id;
    s->accepted_ns = s->last_rx_ns = now_monotonic_ns();
    list_init(&s->paused_node);
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
    start_reading(s);
    if (s->state == SESSION_OPEN)
        admit(s);
    return 0;
}

static void session_drain(struct session *s)
{
    if (s->state != SESSION_OPEN)
        return;
    s->state = SESSION_DRAINING;
    if (s->reading)
        (void)uv_read_stop((uv_stream_t *)&s->pipe);
    s->reading = false;
    s->paused = false;
    retire_current(s);
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

        if (s->state != SESSION_OPEN)
            continue;
        if (!s->hello_done && now - s->accepted_ns >= c->hello_timeout_ms * 1000000ull) {
            session_fail(s, ETIMEDOUT, "no HELLO within hello_timeout_ms (%" PRIu64 ")",
                         c->hello_timeout_ms);
            continue;
        }
        if (s->rx_len > 0 && !s->gated && s->reading &&
            now - s->last_rx_ns >= c->idle_timeout_ms * 1000000ull) {
            session_fail(s, ETIMEDOUT,
                         "a frame stayed incomplete (%zu bytes received) longer than "
                         "idle_timeout_ms (%" PRIu64 "); its complete records are kept",
                         s->rx_len, c->idle_timeout_ms);
            continue;
        }
        if (s->current && s->current->records_queued > 0 &&
            now - s->current->created_mono_ns >= max_age_ns && can_retire(s)) {
            retire_current(s);
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

        if (!s->hello_done || !s->current)
            continue;
        if (producer && strcmp(s->producer, producer) != 0)
            continue;
        if (s->state == SESSION_CLOSING) {
            /* Closed, its close callback still to come, which would seal
             * the shard a moment later: seal it now, so the caller sees it
             * being sealed. Nobody waits for ACKs any more. */
            retire_current(s);
            retired++;
            continue;
        }
        if (s->state != SESSION_OPEN)
            continue; /* draining or failing: its shard is retired already */
        if (!can_retire(s)) {
            busy++;
            continue;
        }
        retire_current(s);
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
            n += s->received - acked_through(s);
    }
    return n;
}
