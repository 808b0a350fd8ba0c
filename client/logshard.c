/* liblogshard: one producer stream to logshardd.
 *
 * This file is the public API: the options, connect, append, flush, close
 * and the calls that report on a handle. The records a handle keeps until
 * they are acknowledged live in retain.c; the socket, the handshake and
 * getting a lost connection back live in connection.c; logshard-internal.h
 * is the handle they share.
 *
 * A handle is a stream (protocol version 2): logshard_connect() picks a
 * random 128-bit stream id and every record appended gets the next position,
 * 0, 1, 2, ... A record is copied once, into the frame being built; the
 * frame is sealed when it is full, at a flush, or when its oldest record
 * has waited LOGSHARD_LINGER_MS, and then kept, sent or not, until an ACK
 * covers it. When the daemon goes away the handle connects again by itself
 * and sends what the daemon does not have, so logshard_append() and
 * logshard_flush() carry on across a daemon restart; they fail only when
 * the daemon stays away past reconnect_timeout_ms (-ENOTCONN). A daemon that
 * speaks only version 1 gets a version 1 HELLO and a handle that cannot
 * resume (a drop fails it with -EPIPE, as before streams existed).
 *
 * Memory is bounded: at most max(RETAIN_BUFFERS frame buffers, RETAIN_MIN_BYTES)
 * of records wait for their ACK; beyond that logshard_append() blocks (or
 * returns -EAGAIN with LOGSHARD_NONBLOCK), connected or not.
 *
 * Errors are sticky: once the daemon sent ERROR, said something that is
 * not the protocol, or stayed away too long, the handle is dead and every
 * later call returns the same error. The handle remembers whether the daemon
 * sent that error or we found it, because the same errno can mean both (a
 * daemon's ETIMEDOUT ends the connection; flush's own just expired). The
 * library never prints, never reports through errno, and never raises
 * SIGPIPE (MSG_NOSIGNAL on every send). */
#include "logshard.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "logshard-internal.h"
#include "wire.h"

#define DEFAULT_BUFFER_BYTES ((size_t)256 * 1024)
#define DEFAULT_RECONNECT_TIMEOUT_MS 60000

/* Used when the process has no name to offer; it is a valid producer name. */
#define FALLBACK_PRODUCER "logshard"

#define KNOWN_FLAGS (LOGSHARD_NONBLOCK | LOGSHARD_NO_RECONNECT)

/* The program's name made into a valid producer name: cut to the limit,
 * every byte outside the allowed set (and a leading '.' or '-') turned into
 * '_'. name must hold WIRE_PRODUCER_NAME_MAX + 1 bytes. Returns the length. */
static size_t default_producer(char *name)
{
    const char *prog = program_invocation_short_name;
    size_t len = prog ? strnlen(prog, WIRE_PRODUCER_NAME_MAX) : 0;

    if (len == 0) {
        memcpy(name, FALLBACK_PRODUCER, sizeof(FALLBACK_PRODUCER));
        return sizeof(FALLBACK_PRODUCER) - 1;
    }
    /* Ask the codec, so there is one copy of the rule: each byte as it
     * would be after another, then the first byte as a first byte. */
    for (size_t i = 0; i < len; i++) {
        char pair[2] = { 'a', prog[i] };

        name[i] = wire_check_hello_name(pair, 2) == 0 ? prog[i] : '_';
    }
    if (wire_check_hello_name(name, 1) < 0)
        name[0] = '_';
    name[len] = '\0';
    return len;
}

static void handle_free(logshard *ls)
{
    if (ls->fd >= 0)
        (void)close(ls->fd); /* nothing useful to do if close fails */
    logshard__retain_free(ls);
    free(ls);
}

/* A stream id nobody else has: 16 random bytes, never all zero (the
 * protocol keeps zero for "no stream"). */
static int pick_stream_id(uint8_t *id)
{
    for (;;) {
        size_t got = 0;

        while (got < WIRE_STREAM_ID_SIZE) {
            ssize_t n = getrandom(id + got, WIRE_STREAM_ID_SIZE - got, 0);

            if (n < 0) {
                if (errno == EINTR)
                    continue;
                return -errno;
            }
            got += (size_t)n;
        }
        for (size_t i = 0; i < WIRE_STREAM_ID_SIZE; i++)
            if (id[i] != 0)
                return 0;
    }
}

/* Copies the caller's logshard_opts of opts_size bytes into *ret_opts: the
 * members it covers, defaults (zeros) for the rest. Bytes past the
 * structure this library knows must be zero, or the caller asked for
 * something we cannot do; bytes that were padding in an earlier version of
 * the structure (reserved_1 included) are never looked at. */
static int opts_copy(const logshard_opts *opts, size_t opts_size, logshard_opts *ret_opts)
{
    logshard_opts o = { .socket_path = NULL };

    if (!opts) {
        *ret_opts = o;
        return 0;
    }
    if (opts_size < LOGSHARD_OPTS_SIZE_1)
        return -EINVAL;
    for (size_t i = sizeof(logshard_opts); i < opts_size; i++)
        if (((const unsigned char *)opts)[i] != 0)
            return -E2BIG;
    /* Member by member rather than a memcpy of the first opts_size bytes,
     * so that no padding byte is ever read, and each later member only
     * when the caller's size covers it. */
    o.socket_path = opts->socket_path;
    o.producer = opts->producer;
    o.buffer_bytes = opts->buffer_bytes;
    o.flags = opts->flags;
    if (opts_size >= LOGSHARD_OPTS_SIZE_2)
        o.reconnect_timeout_ms = opts->reconnect_timeout_ms;
    *ret_opts = o;
    return 0;
}

LOGSHARD_EXPORT int logshard_connect(logshard **out, const logshard_opts *opts)
{
    return logshard_connect_sized(out, opts, LOGSHARD_OPTS_SIZE_1);
}

/* Whether the first handshake's failure r means the daemon went away
 * while it took us, so that the next one is worth waiting for within the
 * handshake time. A daemon that is stopping (a restart) says so before
 * WELCOME; one that dies (a crash, a SIGKILL) hangs up without a word.
 * Once either happened, finding no daemon (ENOENT, ECONNREFUSED) means it
 * is not back yet, not that there is none: a daemon without a socket unit
 * needs a moment to listen again. With LOGSHARD_NO_RECONNECT a hang-up is
 * returned at once. *away_error keeps the latest sign of going away, which
 * is what the caller learns if no daemon comes back in time. */
static bool daemon_went_away(const logshard *ls, int r, int *away_error)
{
    if (r == -ESHUTDOWN && ls->error_origin == LOGSHARD_ORIGIN_DAEMON)
        *away_error = r;
    else if (r == -ECONNRESET && ls->reconnect)
        *away_error = r;
    else if (!(*away_error && (r == -ENOENT || r == -ECONNREFUSED)))
        return false;
    return true;
}

LOGSHARD_EXPORT int logshard_connect_sized(logshard **out, const logshard_opts *opts,
                                           size_t opts_size)
{
    logshard_opts o;
    const char *path;
    uint64_t deadline;
    int away_error = 0; /* how the daemon went away, once it did */
    logshard *ls;
    int r;

    if (!out)
        return -EINVAL;
    r = opts_copy(opts, opts_size, &o);
    if (r < 0)
        return r;
    if ((o.flags & ~KNOWN_FLAGS) || o.reconnect_timeout_ms < -1)
        return -EINVAL;
    if (o.producer && wire_check_hello_name(o.producer,
                                            strnlen(o.producer, WIRE_PRODUCER_NAME_MAX + 1)) < 0)
        return -EINVAL; /* strnlen: a name over the limit is refused unread */

    path = o.socket_path;
    if (!path || !*path) {
        /* secure_getenv: a setuid producer must not be pointed elsewhere by
         * whoever runs it. */
        path = secure_getenv("LOGSHARD_SOCKET");
        if (!path || !*path)
            path = LOGSHARD_DEFAULT_SOCKET;
    }

    ls = calloc(1, sizeof(*ls));
    if (!ls)
        return -ENOMEM;
    ls->fd = -1;
    if (strlen(path) >= sizeof(ls->path)) {
        r = -ENAMETOOLONG;
        goto err;
    }
    strcpy(ls->path, path);
    if (o.producer) {
        ls->name_len = strlen(o.producer);
        memcpy(ls->name, o.producer, ls->name_len + 1);
    } else {
        ls->name_len = default_producer(ls->name);
    }
    ls->nonblock = (o.flags & LOGSHARD_NONBLOCK) != 0;
    ls->reconnect = (o.flags & LOGSHARD_NO_RECONNECT) == 0;
    ls->reconnect_timeout_ms =
        o.reconnect_timeout_ms == 0 ? DEFAULT_RECONNECT_TIMEOUT_MS : o.reconnect_timeout_ms;
    ls->buffer_request = o.buffer_bytes ? o.buffer_bytes : DEFAULT_BUFFER_BYTES;
    r = pick_stream_id(ls->stream_id);
    if (r < 0)
        goto err;

    /* The newest version first; a daemon that speaks only version 1 says
     * so with EPROTONOSUPPORT, and gets what it speaks. Its refusal and
     * ours look alike only in the errno, so the origin decides. */
    deadline = logshard__deadline_after(HANDSHAKE_TIMEOUT_MS);
    for (unsigned backoff_ms = 10;; backoff_ms = backoff_ms * 2 > 1000 ? 1000 : backoff_ms * 2) {
        struct timespec pause = { .tv_sec = 0, .tv_nsec = (long)backoff_ms * 1000000L };

        r = logshard__handshake(ls, WIRE_PROTOCOL_V2, deadline);
        if (r == -EPROTONOSUPPORT && ls->error_origin == LOGSHARD_ORIGIN_DAEMON)
            r = logshard__handshake(ls, WIRE_PROTOCOL_V1, deadline);
        if (!daemon_went_away(ls, r, &away_error))
            break;
        if (logshard__now_ns() + (uint64_t)backoff_ms * NSEC_PER_MSEC >= deadline) {
            r = away_error; /* not "no daemon here": one was, and did not come back */
            break;
        }
        while (nanosleep(&pause, &pause) < 0 && errno == EINTR)
            ;
    }
    if (r < 0)
        goto err;

    *out = ls;
    return 0;

err:
    handle_free(ls);
    return r;
}

LOGSHARD_EXPORT int logshard_append(logshard *ls, const void *rec, size_t len)
{
    uint64_t now;
    int r;

    if (!ls || !rec || len == 0)
        return -EINVAL;
    if (ls->error)
        return ls->error;
    if (len > ls->max_record_bytes)
        return -EMSGSIZE;

    if (!logshard__retain_fits(ls, len)) {
        /* The full frame joins the queue; the record needs a free buffer,
         * which only an ACK gives back once all are in use. Non-blocking:
         * one attempt to move things along, then give the record back
         * rather than wait. */
        logshard__retain_seal(ls);
        if (!logshard__retain_can_open(ls)) {
            r = logshard__io_run(ls, ls->nonblock ? logshard__now_ns() : NO_DEADLINE,
                                 GOAL_ROOM, 0);
            if (r == -ETIMEDOUT && ls->nonblock)
                return -EAGAIN;
            if (r < 0)
                return r;
        }
        r = logshard__retain_open(ls);
        if (r < 0)
            return r;
    }

    now = logshard__coarse_ns();
    if (ls->r.building->count == 0)
        ls->oldest_ns = now;
    logshard__retain_put(ls, rec, len);
    ls->appended++;

    /* Linger: the frame goes now, but only as far as the socket takes it
     * without waiting; the next call finishes it. The record is kept and
     * counted either way, so a failure here is left for the next call to
     * report rather than making the caller believe the record was refused
     * (and send it again). */
    if (now - ls->oldest_ns >= (uint64_t)LOGSHARD_LINGER_MS * NSEC_PER_MSEC) {
        logshard__retain_seal(ls);
        (void)logshard__io_run(ls, logshard__now_ns(), GOAL_SENT, 0);
    }
    return 0;
}

LOGSHARD_EXPORT int logshard_flush(logshard *ls, int timeout_ms)
{
    uint64_t deadline;

    if (!ls)
        return -EINVAL;
    if (ls->error)
        return ls->error;
    deadline = logshard__deadline_after(timeout_ms);
    logshard__retain_seal(ls);
    return logshard__io_run(ls, deadline, GOAL_ACKED, ls->appended);
}

LOGSHARD_EXPORT void logshard_close(logshard *ls)
{
    if (!ls)
        return;
    /* Its result has nowhere to go; callers who care flush first. */
    if (ls->error == 0)
        (void)logshard_flush(ls, -1);
    handle_free(ls);
}

LOGSHARD_EXPORT uint64_t logshard_unacked(const logshard *ls)
{
    return ls ? ls->appended - ls->acked : 0;
}

LOGSHARD_EXPORT uint64_t logshard_reconnects(const logshard *ls)
{
    return ls ? ls->reconnects : 0;
}

LOGSHARD_EXPORT int logshard_fsync_policy(const logshard *ls)
{
    return ls ? (int)ls->fsync_policy : -EINVAL;
}

LOGSHARD_EXPORT const char *logshard_error_message(const logshard *ls)
{
    return ls && ls->has_message ? ls->message : NULL;
}

LOGSHARD_EXPORT int logshard_error(const logshard *ls)
{
    return ls ? ls->error : -EINVAL;
}

LOGSHARD_EXPORT int logshard_error_origin(const logshard *ls)
{
    if (!ls)
        return -EINVAL;
    return ls->error ? (int)ls->error_origin : LOGSHARD_ORIGIN_NONE;
}

/* ---- for event loops ---- */

LOGSHARD_EXPORT int logshard_fd(const logshard *ls)
{
    return ls ? ls->fd : -EINVAL;
}

LOGSHARD_EXPORT int logshard_events(const logshard *ls)
{
    if (!ls)
        return -EINVAL;
    if (ls->error)
        return 0;
    return logshard__events(ls);
}

/* One round of what io_run() does after poll(), without the poll(): both
 * directions go only as far as the socket allows now, and a backoff that
 * is over makes one attempt to connect, which never waits either. */
LOGSHARD_EXPORT int logshard_process(logshard *ls)
{
    if (!ls)
        return -EINVAL;
    if (ls->error)
        return ls->error;
    logshard__retain_seal(ls);
    logshard__io_step(ls, POLLIN | POLLOUT);
    return ls->error;
}

LOGSHARD_EXPORT unsigned logshard_version(void)
{
    return LOGSHARD_VERSION_NUMBER;
}

LOGSHARD_EXPORT const char *logshard_version_string(void)
{
    return LOGSHARD_VERSION_STRING;
}

LOGSHARD_EXPORT const char *logshard_strerror(int err)
{
    /* long long: negating INT_MIN as an int would overflow. */
    long long e = err < 0 ? -(long long)err : err;

    switch (e) {
    case 0: return "Success";
    case EINVAL: return "Invalid argument (producer name, flags or empty record)";
    case EMSGSIZE: return "Record larger than the daemon accepts";
    case EPIPE: return "The daemon closed the connection";
    case ECONNRESET: return "The daemon closed the connection without answering";
    case ETIMEDOUT: return "Timed out waiting for the daemon";
    case EPROTO: return "The peer does not speak the logshard protocol";
    case ENAMETOOLONG: return "Socket path too long for a Unix socket address";
    case ENOENT: return "No logshard socket at this path";
    case ECONNREFUSED: return "No daemon listening on the socket";
    case EACCES: return "Permission denied on the logshard socket";
    case ENOMEM: return "Out of memory";
    case ENOSPC: return "No space left on the daemon's spool";
    case EUSERS: return "Too many producers connected to the daemon";
    case EMFILE: return "The daemon has too many shards open";
    case E2BIG: return "Options set that this library version does not know";
    case ENOTCONN: return "The daemon stayed away longer than the reconnect timeout";
    case ESTALE: return "The daemon no longer knows this producer's stream";
    case ESHUTDOWN: return "The daemon was stopping and did not come back in time";
    case EPROTONOSUPPORT: return "The daemon does not speak this protocol version";
    default: break;
    }
#if defined(__GLIBC__) && defined(__GLIBC_PREREQ)
#if __GLIBC_PREREQ(2, 32)
    /* Unlike strerror(), this returns static text and is thread-safe. */
    if (e <= INT_MAX) {
        const char *s = strerrordesc_np((int)e);

        if (s)
            return s;
    }
#endif
#endif
    return "Unknown error";
}
