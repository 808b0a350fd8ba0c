/* liblogshard's connection to the daemon: the handshake, reading ACK and
 * ERROR frames, writing the retained frames, and, in protocol version 2,
 * losing the connection and getting it back without losing a record.
 *
 * The connection is one state (enum conn_state) and every change of it is
 * in this file. A connection that drops after WELCOME (end of file, a
 * reset, a send that fails) is not an error in version 2: the socket is
 * closed, the records stay in retain.c's queue, and the handle waits out a
 * backoff (10 ms, doubling up to 1 s) before it connects again and sends a
 * HELLO naming the same stream and its oldest unacknowledged position. The
 * WELCOME's next_position says what the daemon already has; the rest is
 * sent again. Only when reconnect_timeout_ms has passed since the
 * connection was lost does the handle fail (-ENOTCONN); an ERROR from the
 * daemon fails it at once, as it always did. In version 1 (an old daemon)
 * and with LOGSHARD_NO_RECONNECT a drop fails the handle with -EPIPE.
 *
 * The descriptor number the caller sees (logshard_fd) never changes: a
 * new socket is dup3()ed onto it, and during a backoff a timerfd armed for
 * the next attempt takes its place, so that an event loop's poll() wakes
 * when it is time to try again and never spins.
 *
 * The socket is non-blocking and every wait is one poll() for POLLIN
 * together with POLLOUT, so acknowledgements are read while a frame is being
 * written: a daemon that stops reading until we take its ACKs cannot
 * deadlock with us. Every wait has a CLOCK_MONOTONIC deadline or is one the
 * caller asked to be unbounded. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "logshard-internal.h"

#define BACKOFF_FIRST_MS 10u
#define BACKOFF_MAX_MS 1000u

/* errno values stop well below this; an ERROR code above it (or 0, which
 * would read as success) means the peer is not a logshard daemon. */
#define MAX_ERRNO_CODE 4095u

uint64_t logshard__now_ns(void)
{
    struct timespec ts;

    /* Cannot fail for CLOCK_MONOTONIC with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint64_t logshard__coarse_ns(void)
{
    struct timespec ts;

    (void)clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

uint64_t logshard__deadline_after(int timeout_ms)
{
    if (timeout_ms < 0)
        return NO_DEADLINE;
    return logshard__now_ns() + (uint64_t)timeout_ms * NSEC_PER_MSEC;
}

static uint64_t min_deadline(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* Milliseconds for poll(), rounded up: rounding down would wake just before
 * the deadline and spin through zero-timeout polls until it passes. */
static int poll_timeout(uint64_t deadline)
{
    uint64_t now, ms;

    if (deadline == NO_DEADLINE)
        return -1;
    now = logshard__now_ns();
    if (now >= deadline)
        return 0;
    ms = (deadline - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The first failure sticks: what followed from it explains nothing new. */
int logshard__fail(logshard *ls, int err, enum logshard_error_origin origin)
{
    if (ls->error == 0) {
        ls->error = err;
        ls->error_origin = origin;
        ls->state = CONN_FAILED;
    }
    return ls->error;
}

static int fail(logshard *ls, int err)
{
    return logshard__fail(ls, err, LOGSHARD_ORIGIN_LOCAL);
}

/* A send buffer that holds a whole frame, so that the daemon finds each
 * frame complete when it reads: it keeps the unfinished part of a frame in
 * a receive buffer of the connection's own until the rest arrives, and
 * Linux's default send buffer (net.core.wmem_default, 208 KiB) is smaller
 * than a frame (256 KiB at least). With a thousand producers a thousand
 * such buffers were held at once; with room for a frame the daemon held a
 * third less memory and spent a quarter less CPU (docs/BENCHMARKS.md). The
 * kernel doubles what is asked, for its own bookkeeping, and caps it at
 * net.core.wmem_max; a buffer already as large is left alone. Failing
 * costs only that. */
static void fit_send_buffer(int fd, size_t frame_bytes)
{
    int have = 0, want = frame_bytes < INT_MAX / 2 ? (int)frame_bytes : INT_MAX / 2;
    socklen_t len = sizeof(have);

    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &have, &len) == 0 && have / 2 >= want)
        return;
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof(want));
}

/* Connects a socket to the handle's path, its send buffer fitted to the
 * handle's frames. blocking: as logshard_connect() always did,
 * a connect() that may wait for a full backlog, bounded by SO_SNDTIMEO (a
 * Unix socket then fails with EAGAIN); otherwise one that never waits (a
 * full backlog is -EAGAIN, another reason to try again later). Either way
 * the socket is non-blocking afterwards. */
static int open_socket(const logshard *ls, bool blocking, int *ret_fd)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(ls->path);
    struct timeval tv = { .tv_sec = HANDSHAKE_TIMEOUT_MS / 1000 };
    int fd, flags, r;

    if (len >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, ls->path, len + 1);

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (blocking ? 0 : SOCK_NONBLOCK), 0);
    if (fd < 0)
        return -errno;
    fit_send_buffer(fd, logshard__retain_frame_target(ls->buffer_request));
    /* Failing only loses the bound on connect(); the handshake keeps its own. */
    if (blocking)
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (connect(fd, (const struct sockaddr *)&sa,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1)) < 0) {
        if (errno == EINTR)
            continue; /* a Unix connect() interrupted while waiting did not connect */
        r = errno == EAGAIN && blocking ? -ETIMEDOUT : -errno;
        (void)close(fd);
        return r;
    }
    if (blocking) {
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
            r = -errno;
            (void)close(fd);
            return r;
        }
    }
    *ret_fd = fd;
    return 0;
}

/* Puts fd at the handle's descriptor number (closing what was there) and
 * closes fd itself; the number the caller knows stays valid throughout. */
static int take_fd(logshard *ls, int fd)
{
    int r = 0;

    if (dup3(fd, ls->fd, O_CLOEXEC) < 0)
        r = -errno;
    (void)close(fd); /* a duplicate, or useless; nothing to do if it fails */
    return r;
}

static int hello_prepare(logshard *ls, uint16_t version)
{
    int r;

    if (version == WIRE_PROTOCOL_V1)
        r = wire_encode_hello(ls->hello, ls->name, ls->name_len);
    else
        r = wire_encode_hello_v2(ls->hello, ls->name, ls->name_len, ls->stream_id, ls->acked);
    if (r < 0)
        return r;
    ls->version = version;
    ls->hello_len = (size_t)r;
    ls->hello_sent = 0;
    ls->in_used = 0;
    return 0;
}

/* ---- losing the connection and getting it back ---- */

/* Arms the timer for retry_ns, first putting a timerfd in the socket's
 * place when it is not there yet. A blocking handle can do without it (it
 * sleeps in poll() with a timeout and never looks at the descriptor in a
 * backoff), so failing to make one only leaves the dead socket in place;
 * an event loop's handle needs it to wait without spinning. */
static int arm_timer(logshard *ls, bool have_timer)
{
    struct itimerspec its = {
        .it_value = { .tv_sec = (time_t)(ls->retry_ns / UINT64_C(1000000000)),
                      .tv_nsec = (long)(ls->retry_ns % UINT64_C(1000000000)) },
    };
    int tfd = ls->fd;

    if (!have_timer) {
        tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
        if (tfd < 0)
            return ls->nonblock ? -errno : 0;
    }
    /* A zero it_value would disarm the timer; the monotonic clock is far
     * past zero on any running system, but say so rather than assume. */
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;
    if (timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
        int r = -errno;

        if (!have_timer)
            (void)close(tfd);
        return ls->nonblock ? r : 0;
    }
    if (!have_timer) {
        int r = take_fd(ls, tfd);

        if (r < 0)
            return ls->nonblock ? r : 0;
    }
    return 0;
}

/* The attempt failed (or there was none yet): wait, or give up once the
 * reconnect time is over. have_timer: the descriptor is the timerfd already. */
static void schedule_retry(logshard *ls, bool have_timer)
{
    uint64_t now = logshard__now_ns();
    int r;

    if (now >= ls->lost_deadline) {
        fail(ls, -ENOTCONN);
        return;
    }
    ls->state = CONN_BACKOFF;
    ls->in_used = 0;
    ls->retry_ns = min_deadline(now + ls->backoff_ms * NSEC_PER_MSEC, ls->lost_deadline);
    ls->backoff_ms = ls->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ls->backoff_ms * 2;
    r = arm_timer(ls, have_timer);
    if (r < 0)
        fail(ls, r);
}

/* The connection ended: err is what the caller learns when it cannot be
 * got back (the first handshake, version 1, LOGSHARD_NO_RECONNECT). */
static void conn_lost(logshard *ls, int err)
{
    switch (ls->state) {
    case CONN_HANDSHAKE:
        fail(ls, err);
        return;
    case CONN_UP:
        if (ls->version == WIRE_PROTOCOL_V1 || !ls->reconnect) {
            fail(ls, err);
            return;
        }
        ls->lost_deadline = ls->reconnect_timeout_ms < 0
                                ? NO_DEADLINE
                                : logshard__deadline_after(ls->reconnect_timeout_ms);
        ls->backoff_ms = BACKOFF_FIRST_MS;
        schedule_retry(ls, false);
        return;
    case CONN_RESUMING:
        schedule_retry(ls, false);
        return;
    case CONN_BACKOFF:
    case CONN_FAILED:
        break;
    }
}

/* The backoff is over: one attempt, which never waits (a Unix socket's
 * connect() succeeds at once, into the listener's backlog while a daemon
 * started by a socket unit comes up, or fails at once). */
static void try_reconnect(logshard *ls)
{
    int fd, r;

    r = open_socket(ls, false, &fd);
    if (r == 0)
        r = take_fd(ls, fd);
    if (r < 0) {
        /* ENOENT, ECONNREFUSED, EAGAIN...: the daemon is not back yet. */
        schedule_retry(ls, true);
        return;
    }
    r = hello_prepare(ls, WIRE_PROTOCOL_V2);
    if (r < 0) {
        fail(ls, r);
        return;
    }
    ls->handshake_deadline = min_deadline(logshard__deadline_after(HANDSHAKE_TIMEOUT_MS),
                                          ls->lost_deadline);
    ls->state = CONN_RESUMING;
}

/* ---- frames from the daemon ---- */

static void handle_welcome(logshard *ls, const unsigned char *payload, size_t len)
{
    struct wire_welcome w;
    int r;

    if ((ls->state != CONN_HANDSHAKE && ls->state != CONN_RESUMING) ||
        wire_decode_welcome(payload, len, &w) < 0) {
        fail(ls, -EPROTO);
        return;
    }
    /* WELCOME names the version that will be spoken: a daemon may take a
     * version 2 HELLO and speak version 1, which only the first connection
     * can accept (a resumed stream needs version 2). */
    if (w.version != ls->version) {
        if (ls->state != CONN_HANDSHAKE || w.version != WIRE_PROTOCOL_V1) {
            fail(ls, -EPROTO);
            return;
        }
        ls->version = WIRE_PROTOCOL_V1;
    }
    /* Limits that leave no room for a one-byte record cannot come from a
     * daemon; taking them would make every append fail with -EMSGSIZE. */
    if (w.max_record_bytes == 0 || w.max_frame_bytes > WIRE_MAX_FRAME_BYTES ||
        w.max_frame_bytes < WIRE_APPEND_FIXED + WIRE_RECORD_PREFIX + 1) {
        fail(ls, -EPROTO);
        return;
    }
    /* The stream goes on where the daemon says, which is never below what
     * it acknowledged (the HELLO's position) nor past what we appended. */
    if (ls->version != WIRE_PROTOCOL_V1 &&
        (w.next_position < ls->acked || w.next_position > ls->appended)) {
        fail(ls, -EPROTO);
        return;
    }
    ls->max_record_bytes = w.max_record_bytes;
    ls->max_frame_bytes = w.max_frame_bytes;
    ls->fsync_policy = w.fsync_policy;
    if (ls->state == CONN_HANDSHAKE) {
        logshard__retain_setup(ls, ls->buffer_request);
    } else {
        logshard__retain_limits(ls);
        r = logshard__retain_resume(ls, w.next_position);
        if (r < 0) {
            fail(ls, r);
            return;
        }
        ls->acked = ls->sent = w.next_position;
        ls->reconnects++;
    }
    ls->state = CONN_UP;
}

static void handle_ack(logshard *ls, const unsigned char *payload, size_t len)
{
    uint64_t acked;

    if (ls->state != CONN_UP || wire_decode_ack(payload, len, &acked) < 0) {
        fail(ls, -EPROTO);
        return;
    }
    /* Cumulative: it never goes back and never covers what we did not send
     * (in version 2 it starts at the WELCOME's position). */
    if (acked < ls->acked || acked > ls->sent) {
        fail(ls, -EPROTO);
        return;
    }
    ls->acked = acked;
    logshard__retain_ack(ls, acked);
}

static void handle_error(logshard *ls, const unsigned char *payload, size_t len)
{
    uint32_t code;
    const char *msg;
    size_t msg_len;

    if (wire_decode_error(payload, len, &code, &msg, &msg_len) < 0) {
        fail(ls, -EPROTO);
        return;
    }
    /* A daemon that began to stop as our resumed HELLO reached it: the
     * next one will take the stream, so this is one more lost connection,
     * not the end of the handle. */
    if (ls->state == CONN_RESUMING && code == ESHUTDOWN) {
        ls->retry_now = true;
        return;
    }
    if (msg_len > WIRE_ERROR_MESSAGE_MAX)
        msg_len = WIRE_ERROR_MESSAGE_MAX;
    memcpy(ls->message, msg, msg_len);
    ls->message[msg_len] = '\0';
    ls->has_message = true;
    /* A code that is no errno is our finding about the peer, not its word. */
    if (code == 0 || code > MAX_ERRNO_CODE)
        fail(ls, -EPROTO);
    else
        logshard__fail(ls, -(int)code, LOGSHARD_ORIGIN_DAEMON);
}

static void handle_frame(logshard *ls, uint8_t type, const unsigned char *payload, size_t len)
{
    switch (type) {
    case WIRE_WELCOME:
        handle_welcome(ls, payload, len);
        break;
    case WIRE_ACK:
        handle_ack(ls, payload, len);
        break;
    case WIRE_ERROR:
        handle_error(ls, payload, len);
        break;
    default: /* HELLO and APPEND go the other way */
        fail(ls, -EPROTO);
        break;
    }
}

static void parse_frames(logshard *ls)
{
    size_t pos = 0;

    while (ls->error == 0 && !ls->retry_now && ls->in_used - pos >= WIRE_HEADER_SIZE) {
        struct wire_header h;

        if (wire_decode_header(ls->in + pos, IN_BUFFER_BYTES - WIRE_HEADER_SIZE, &h) < 0) {
            fail(ls, -EPROTO);
            break;
        }
        if (ls->in_used - pos - WIRE_HEADER_SIZE < h.length)
            break;
        handle_frame(ls, h.type, ls->in + pos + WIRE_HEADER_SIZE, h.length);
        pos += WIRE_HEADER_SIZE + h.length;
    }
    if (ls->error)
        return;
    if (ls->retry_now) {
        ls->retry_now = false;
        ls->in_used = 0; /* nothing more of this connection matters */
        conn_lost(ls, -ESHUTDOWN);
        return;
    }
    memmove(ls->in, ls->in + pos, ls->in_used - pos);
    ls->in_used -= pos;
}

static bool connected(const logshard *ls)
{
    return ls->state == CONN_HANDSHAKE || ls->state == CONN_UP || ls->state == CONN_RESUMING;
}

/* Before WELCOME the daemon hung up on the handshake; after it, on records. */
static int closed_error(const logshard *ls)
{
    return ls->state == CONN_HANDSHAKE ? -ECONNRESET : -EPIPE;
}

/* Reads and handles everything the socket has now. The buffer always has
 * room here: frames are at most IN_BUFFER_BYTES (the header check above
 * enforces it) and parse_frames() consumed every complete one, so recv()
 * never gets a zero length that would look like end of file. */
static void do_read(logshard *ls)
{
    while (connected(ls)) {
        ssize_t n = recv(ls->fd, ls->in + ls->in_used, IN_BUFFER_BYTES - ls->in_used,
                         MSG_DONTWAIT);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            /* A Unix socket reports ECONNRESET when the peer closed with our
             * data still unread; for the caller that is the same hang-up. */
            conn_lost(ls, errno == ECONNRESET ? closed_error(ls) : -errno);
            return;
        }
        if (n == 0) {
            conn_lost(ls, closed_error(ls));
            return;
        }
        ls->in_used += (size_t)n;
        parse_frames(ls);
    }
}

/* Sends what the state has to send: the HELLO before WELCOME, the queued
 * frames after it. Returns false when the socket took less than offered or
 * the connection ended. */
static bool send_some(logshard *ls, const unsigned char *buf, size_t len, size_t *sent)
{
    for (;;) {
        ssize_t n = send(ls->fd, buf + *sent, len - *sent, MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n >= 0) {
            *sent += (size_t)n;
            return *sent == len;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return false;
        if (errno == EPIPE || errno == ECONNRESET) {
            /* The daemon may have said why before it hung up; its ERROR is
             * worth more to the caller than our EPIPE. */
            do_read(ls);
            conn_lost(ls, closed_error(ls));
            return false;
        }
        conn_lost(ls, -errno);
        return false;
    }
}

static void do_write(logshard *ls)
{
    if (ls->state == CONN_HANDSHAKE || ls->state == CONN_RESUMING) {
        if (ls->hello_sent < ls->hello_len)
            (void)send_some(ls, ls->hello, ls->hello_len, &ls->hello_sent);
        return;
    }
    while (ls->state == CONN_UP && ls->r.send) {
        struct frame *f = ls->r.send;
        const unsigned char *bytes;
        size_t len;

        logshard__retain_frame_bytes(ls, f, &bytes, &len);
        if (!send_some(ls, bytes, len, &ls->r.send_off))
            return;
        ls->sent = f->first + f->count;
        ls->r.send = f->next;
        ls->r.send_off = 0;
    }
}

/* What the time alone changes: the backoff ends, or a resumed connection
 * that got no WELCOME in time is given up. */
static void check_time(logshard *ls)
{
    uint64_t now = logshard__now_ns();

    if (ls->state == CONN_BACKOFF && now >= ls->retry_ns) {
        try_reconnect(ls);
    } else if (ls->state == CONN_RESUMING && now >= ls->handshake_deadline) {
        if (now >= ls->lost_deadline)
            fail(ls, -ENOTCONN);
        else
            schedule_retry(ls, false);
    }
}

/* One round of work after poll() said revents: read first (an ERROR or end
 * of file explains a failing send), then write, then what the time says. A
 * reconnect that succeeded sends its HELLO at once. */
void logshard__io_step(logshard *ls, short revents)
{
    if (connected(ls) && (revents & (POLLIN | POLLHUP | POLLERR)))
        do_read(ls);
    if (connected(ls) && (revents & (POLLOUT | POLLERR)))
        do_write(ls);
    if (ls->state == CONN_BACKOFF || ls->state == CONN_RESUMING) {
        check_time(ls);
        if (ls->state == CONN_RESUMING)
            do_write(ls);
    }
}

int logshard__events(const logshard *ls)
{
    switch (ls->state) {
    case CONN_HANDSHAKE:
    case CONN_RESUMING:
        return POLLIN | (ls->hello_sent < ls->hello_len ? POLLOUT : 0);
    case CONN_UP:
        /* Records in an unsealed frame count as waiting too: the writable
         * socket wakes the loop, and logshard_process() seals and sends them. */
        return POLLIN | (ls->r.send || (ls->r.building && ls->r.building->count > 0)
                             ? POLLOUT
                             : 0);
    case CONN_BACKOFF:
        return POLLIN; /* the timerfd, readable when the backoff is over */
    case CONN_FAILED:
        break;
    }
    return 0;
}

static bool goal_met(const logshard *ls, enum goal goal, uint64_t target)
{
    switch (goal) {
    case GOAL_WELCOME:
        /* Welcomed, even if the connection was lost right after: the
         * handle then reconnects by itself. */
        return ls->state == CONN_UP || ls->state == CONN_BACKOFF ||
               ls->state == CONN_RESUMING;
    case GOAL_SENT:
        return !ls->r.send;
    case GOAL_ROOM:
        return logshard__retain_can_open(ls);
    case GOAL_ACKED:
        return ls->acked >= target;
    }
    return false;
}

/* Drives the connection until the goal is met, the handle fails or the
 * deadline passes; across reconnects, which are not failures. The goal is
 * checked before the sticky error on purpose: records the daemon
 * acknowledged before it hung up are safe, and saying so is the truth.
 * Polls at least once, so a zero timeout still makes progress. Returns 0,
 * the sticky error, -ETIMEDOUT, or a poll() failure (which does not break
 * the handle). */
int logshard__io_run(logshard *ls, uint64_t deadline, enum goal goal, uint64_t target)
{
    for (bool first = true;; first = false) {
        struct pollfd pfd = { .fd = ls->fd };
        uint64_t wake = deadline;
        nfds_t nfds = 1;
        int timeout;

        if (goal_met(ls, goal, target))
            return 0;
        if (ls->error)
            return ls->error;
        if (poll_timeout(deadline) == 0 && !first)
            return -ETIMEDOUT;
        if (ls->state == CONN_BACKOFF) {
            /* Only the clock matters; the descriptor may be the old socket. */
            wake = min_deadline(wake, ls->retry_ns);
            nfds = 0;
        } else if (ls->state == CONN_RESUMING) {
            wake = min_deadline(wake, ls->handshake_deadline);
        }
        pfd.events = (short)logshard__events(ls);
        timeout = poll_timeout(wake);
        if (poll(&pfd, nfds, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (nfds && (pfd.revents & POLLNVAL))
            return fail(ls, -EBADF);
        logshard__io_step(ls, pfd.revents);
    }
}

/* The first connection: HELLO of the given version, and WELCOME within the
 * deadline. On failure the handle's error says why, and it holds no
 * socket. */
int logshard__handshake(logshard *ls, uint16_t version, uint64_t deadline)
{
    int fd, r;

    if (ls->fd >= 0)
        (void)close(ls->fd); /* the connection of a refused version; nothing to keep */
    ls->fd = -1;
    ls->error = 0;
    ls->error_origin = LOGSHARD_ORIGIN_NONE;
    ls->has_message = false;
    r = open_socket(ls, true, &fd);
    if (r < 0)
        return r;
    ls->fd = fd;
    r = hello_prepare(ls, version);
    if (r < 0)
        return r;
    ls->state = CONN_HANDSHAKE;
    return logshard__io_run(ls, deadline, GOAL_WELCOME, 0);
}
