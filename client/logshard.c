/* liblogshard: one producer connection to logshardd.
 *
 * This file owns the whole client: the handshake, the batch buffer and the
 * socket loop. They share one small state machine (the handle), so they live
 * together; splitting them would only add an internal header.
 *
 * The batch buffer holds exactly one APPEND frame, built in place: the frame
 * header and the record count are reserved at the front and written when the
 * frame is sealed, so a record is copied once, by logshard_append(). A sealed
 * frame is sent whole before new records go in; a frame left half-sent by a
 * flush that timed out is finished by the next call. Known limit: with one
 * buffer, an append that finds the previous frame still in flight waits for
 * it to leave even when there would be room for the record.
 *
 * The socket is non-blocking after connect() and every wait is one poll() for
 * POLLIN together with POLLOUT, so acknowledgements are read while a frame is
 * being written: a daemon that stops reading until we take its ACKs cannot
 * deadlock with us. Every wait has a CLOCK_MONOTONIC deadline or is one the
 * caller asked to be unbounded. logshard_process() is one round of that
 * loop without the poll(), for callers that wait in an event loop of their
 * own on logshard_fd().
 *
 * Errors from the connection are sticky: once the daemon sent ERROR, closed,
 * or said something that is not the protocol, the handle is dead and every
 * later call returns the same error. The handle remembers whether the daemon
 * sent that error or we found it, because the same errno can mean both
 * (a daemon's ETIMEDOUT ends the connection; flush's own just expired). The library never prints, never reports
 * through errno, and never raises SIGPIPE (MSG_NOSIGNAL on every send). */
#include "logshard.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "wire.h"

/* The build hides every symbol; only the public API is let out (and the
 * version script keeps it that way for the shared library). */
#define LOGSHARD_EXPORT __attribute__((visibility("default")))

#define DEFAULT_BUFFER_BYTES ((size_t)256 * 1024)
#define HANDSHAKE_TIMEOUT_MS 30000
#define NSEC_PER_MSEC UINT64_C(1000000)
#define NO_DEADLINE UINT64_MAX

/* Header and record count, reserved at the front of the batch buffer. */
#define FRAME_PREFIX (WIRE_HEADER_SIZE + WIRE_APPEND_FIXED)

/* Used when the process has no name to offer; it is a valid producer name. */
#define FALLBACK_PRODUCER "logshard"

/* The daemon sends us only WELCOME, ACK and ERROR; the largest is an ERROR
 * whose message the encoder cut at WIRE_ERROR_MESSAGE_MAX. Anything longer is
 * not the protocol, so a fixed buffer inside the handle is enough and the
 * read path never allocates. */
#define IN_BUFFER_BYTES (WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX)

/* errno values stop well below this; an ERROR code above it (or 0, which
 * would read as success) means the peer is not a logshard daemon. */
#define MAX_ERRNO_CODE 4095u

struct logshard {
    int fd;
    int error;        /* 0, or the negative errno every call now returns */
    enum logshard_error_origin error_origin; /* who found error */
    bool welcomed;
    bool has_message;

    uint32_t max_record_bytes; /* the daemon's, cut to what fits one frame */
    uint32_t max_frame_bytes;  /* payload bytes, as WELCOME says */
    uint8_t fsync_policy;      /* as WELCOME says */
    bool nonblock;             /* LOGSHARD_NONBLOCK */

    unsigned char *out; /* the frame being built or sent */
    size_t out_cap;
    size_t out_used;    /* frame bytes so far, header included */
    size_t out_sent;    /* bytes of a sealed frame the kernel has taken */
    bool out_sealed;
    uint32_t out_count; /* records in the frame */
    uint64_t oldest_ns; /* when the frame's first record came in */

    uint64_t appended;  /* records taken by logshard_append() */
    uint64_t sent;      /* records in frames handed to the kernel whole */
    uint64_t acked;     /* the daemon's cumulative ACK */

    unsigned char in[IN_BUFFER_BYTES];
    size_t in_used;

    char message[WIRE_ERROR_MESSAGE_MAX + 1];
};

enum goal {
    GOAL_WELCOME, /* HELLO out, WELCOME in */
    GOAL_SENT,    /* no sealed frame left in the buffer */
    GOAL_ACKED,   /* the daemon acknowledged a given number of records */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    /* Cannot fail for CLOCK_MONOTONIC with a valid pointer. */
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec;
}

static uint64_t deadline_after(int timeout_ms)
{
    if (timeout_ms < 0)
        return NO_DEADLINE;
    return now_ns() + (uint64_t)timeout_ms * NSEC_PER_MSEC;
}

/* Milliseconds for poll(), rounded up: rounding down would wake just before
 * the deadline and spin through zero-timeout polls until it passes. */
static int poll_timeout(uint64_t deadline)
{
    uint64_t now, ms;

    if (deadline == NO_DEADLINE)
        return -1;
    now = now_ns();
    if (now >= deadline)
        return 0;
    ms = (deadline - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The first failure sticks: what followed from it explains nothing new. */
static int fail_from(logshard *ls, int err, enum logshard_error_origin origin)
{
    if (ls->error == 0) {
        ls->error = err;
        ls->error_origin = origin;
    }
    return ls->error;
}

static int fail(logshard *ls, int err)
{
    return fail_from(ls, err, LOGSHARD_ORIGIN_LOCAL);
}

/* Before WELCOME the daemon hung up on the handshake; after it, on records. */
static int closed_error(const logshard *ls)
{
    return ls->welcomed ? -EPIPE : -ECONNRESET;
}

static void frame_reset(logshard *ls)
{
    ls->out_used = FRAME_PREFIX;
    ls->out_sent = 0;
    ls->out_sealed = false;
    ls->out_count = 0;
}

static void frame_seal(logshard *ls)
{
    if (ls->out_sealed || ls->out_count == 0)
        return;
    wire_encode_header(ls->out, WIRE_APPEND, (uint32_t)(ls->out_used - WIRE_HEADER_SIZE));
    wire_put_u32(ls->out + WIRE_HEADER_SIZE, ls->out_count);
    ls->out_sealed = true;
    ls->out_sent = 0;
}

static void handle_welcome(logshard *ls, const unsigned char *payload, size_t len)
{
    struct wire_welcome w;

    if (ls->welcomed || wire_decode_welcome(payload, len, &w) < 0 ||
        w.version != WIRE_PROTOCOL_V1) {
        fail(ls, -EPROTO);
        return;
    }
    /* Limits that leave no room for a one-byte record cannot come from a
     * daemon; taking them would make every append fail with -EMSGSIZE. */
    if (w.max_record_bytes == 0 || w.max_frame_bytes > WIRE_MAX_FRAME_BYTES ||
        w.max_frame_bytes < WIRE_APPEND_FIXED + WIRE_RECORD_PREFIX + 1) {
        fail(ls, -EPROTO);
        return;
    }
    ls->max_record_bytes = w.max_record_bytes;
    ls->max_frame_bytes = w.max_frame_bytes;
    ls->fsync_policy = w.fsync_policy;
    ls->welcomed = true;
}

static void handle_ack(logshard *ls, const unsigned char *payload, size_t len)
{
    uint64_t acked;

    if (!ls->welcomed || wire_decode_ack(payload, len, &acked) < 0) {
        fail(ls, -EPROTO);
        return;
    }
    /* Cumulative: it never goes back and never covers what we did not send. */
    if (acked < ls->acked || acked > ls->sent) {
        fail(ls, -EPROTO);
        return;
    }
    ls->acked = acked;
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
    if (msg_len > WIRE_ERROR_MESSAGE_MAX)
        msg_len = WIRE_ERROR_MESSAGE_MAX;
    memcpy(ls->message, msg, msg_len);
    ls->message[msg_len] = '\0';
    ls->has_message = true;
    /* A code that is no errno is our finding about the peer, not its word. */
    if (code == 0 || code > MAX_ERRNO_CODE)
        fail(ls, -EPROTO);
    else
        fail_from(ls, -(int)code, LOGSHARD_ORIGIN_DAEMON);
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

    while (ls->error == 0 && ls->in_used - pos >= WIRE_HEADER_SIZE) {
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
    memmove(ls->in, ls->in + pos, ls->in_used - pos);
    ls->in_used -= pos;
}

/* Reads and handles everything the socket has now. The buffer always has
 * room here: frames are at most IN_BUFFER_BYTES (the header check above
 * enforces it) and parse_frames() consumed every complete one, so recv()
 * never gets a zero length that would look like end of file. */
static void do_read(logshard *ls)
{
    while (ls->error == 0) {
        ssize_t n = recv(ls->fd, ls->in + ls->in_used, IN_BUFFER_BYTES - ls->in_used,
                         MSG_DONTWAIT);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            /* A Unix socket reports ECONNRESET when the peer closed with our
             * data still unread; for the caller that is the same hang-up. */
            fail(ls, errno == ECONNRESET ? closed_error(ls) : -errno);
            return;
        }
        if (n == 0) {
            fail(ls, closed_error(ls));
            return;
        }
        ls->in_used += (size_t)n;
        parse_frames(ls);
    }
}

static void do_write(logshard *ls)
{
    while (ls->error == 0 && ls->out_sealed) {
        ssize_t n = send(ls->fd, ls->out + ls->out_sent, ls->out_used - ls->out_sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            if (errno == EPIPE || errno == ECONNRESET) {
                /* The daemon may have said why before it hung up; its
                 * ERROR is worth more to the caller than our EPIPE. */
                do_read(ls);
                fail(ls, closed_error(ls));
                return;
            }
            fail(ls, -errno);
            return;
        }
        ls->out_sent += (size_t)n;
        if (ls->out_sent == ls->out_used) {
            ls->sent += ls->out_count;
            frame_reset(ls);
        }
    }
}

static bool goal_met(const logshard *ls, enum goal goal, uint64_t target)
{
    switch (goal) {
    case GOAL_WELCOME:
        return ls->welcomed && !ls->out_sealed;
    case GOAL_SENT:
        return !ls->out_sealed;
    case GOAL_ACKED:
        return ls->acked >= target;
    }
    return false;
}

/* Drives the socket until the goal is met, the connection fails or the
 * deadline passes. The goal is checked before the sticky error on purpose:
 * records the daemon acknowledged before it hung up are safe, and saying so
 * is the truth. Polls at least once, so a zero timeout still makes progress.
 * Returns 0, the sticky error, -ETIMEDOUT, or a poll() failure (which does
 * not break the handle). */
static int io_run(logshard *ls, uint64_t deadline, enum goal goal, uint64_t target)
{
    for (bool first = true;; first = false) {
        struct pollfd pfd = { .fd = ls->fd, .events = POLLIN };
        int timeout;

        if (goal_met(ls, goal, target))
            return 0;
        if (ls->error)
            return ls->error;
        timeout = poll_timeout(deadline);
        if (timeout == 0 && !first)
            return -ETIMEDOUT;
        if (ls->out_sealed)
            pfd.events |= POLLOUT;
        if (poll(&pfd, 1, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (pfd.revents & POLLNVAL)
            return fail(ls, -EBADF);
        /* Read first: an ERROR or end of file explains a failing send. */
        if (pfd.revents & (POLLIN | POLLHUP | POLLERR))
            do_read(ls);
        if (pfd.revents & (POLLOUT | POLLERR))
            do_write(ls);
    }
}

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
    free(ls->out);
    free(ls);
}

static int open_socket(const char *path, int *ret_fd)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    size_t len = strlen(path);
    /* A listener with a full backlog makes a blocking connect() wait; for a
     * Unix socket SO_SNDTIMEO bounds that wait (it then fails with EAGAIN),
     * which keeps the promise of an answer within the handshake time. */
    struct timeval tv = { .tv_sec = HANDSHAKE_TIMEOUT_MS / 1000 };
    int fd, flags, r;

    if (len >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, len + 1);

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    /* Failing only loses the bound on connect(); the handshake keeps its own. */
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (connect(fd, (const struct sockaddr *)&sa,
                   (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1)) < 0) {
        if (errno == EINTR)
            continue; /* a Unix connect() interrupted while waiting did not connect */
        r = errno == EAGAIN ? -ETIMEDOUT : -errno;
        (void)close(fd);
        return r;
    }
    flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
        r = -errno;
        (void)close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* The batch buffer: what the caller asked for, but room for one largest
 * record, and never more than one frame the daemon accepts. */
static int buffer_setup(logshard *ls, size_t requested)
{
    size_t cap = requested ? requested : DEFAULT_BUFFER_BYTES;
    size_t min = FRAME_PREFIX + WIRE_RECORD_PREFIX + (size_t)ls->max_record_bytes;
    size_t max = WIRE_HEADER_SIZE + (size_t)ls->max_frame_bytes;
    unsigned char *buf;

    if (cap < min)
        cap = min;
    if (cap > max)
        cap = max;
    /* A daemon whose frame limit is below its record limit can still only
     * take records that fit a frame. */
    if (ls->max_record_bytes > cap - FRAME_PREFIX - WIRE_RECORD_PREFIX)
        ls->max_record_bytes = (uint32_t)(cap - FRAME_PREFIX - WIRE_RECORD_PREFIX);

    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    free(ls->out);
    ls->out = buf;
    ls->out_cap = cap;
    frame_reset(ls);
    return 0;
}

/* Copies the caller's logshard_opts of opts_size bytes into *ret_opts: the
 * members it covers, defaults (zeros) for the rest. Bytes past the
 * structure this library knows must be zero, or the caller asked for
 * something we cannot do; bytes between the first version's last member
 * and sizeof(logshard_opts) are padding and never looked at (the header's
 * rule keeps later members out of them). */
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
     * so that no padding byte is ever read. Every member so far belongs to
     * the first version, which every accepted size covers. */
    o.socket_path = opts->socket_path;
    o.producer = opts->producer;
    o.buffer_bytes = opts->buffer_bytes;
    o.flags = opts->flags;
    *ret_opts = o;
    return 0;
}

LOGSHARD_EXPORT int logshard_connect(logshard **out, const logshard_opts *opts)
{
    return logshard_connect_sized(out, opts, LOGSHARD_OPTS_SIZE_1);
}

LOGSHARD_EXPORT int logshard_connect_sized(logshard **out, const logshard_opts *opts,
                                           size_t opts_size)
{
    char name[WIRE_PRODUCER_NAME_MAX + 1];
    logshard_opts o;
    size_t name_len;
    const char *path;
    uint64_t deadline;
    logshard *ls;
    int r;

    if (!out)
        return -EINVAL;
    r = opts_copy(opts, opts_size, &o);
    if (r < 0)
        return r;
    if (o.flags & ~LOGSHARD_NONBLOCK)
        return -EINVAL;

    if (o.producer) {
        /* strnlen: a name longer than the limit is refused without reading
         * all of it. */
        name_len = strnlen(o.producer, WIRE_PRODUCER_NAME_MAX + 1);
        if (wire_check_hello_name(o.producer, name_len) < 0)
            return -EINVAL;
        memcpy(name, o.producer, name_len);
        name[name_len] = '\0';
    } else {
        name_len = default_producer(name);
    }

    path = o.socket_path;
    if (!path || !*path) {
        /* secure_getenv: a setuid producer must not be pointed elsewhere by
         * whoever runs it. */
        path = secure_getenv("LOGSHARD_SOCKET");
        if (!path || !*path)
            path = LOGSHARD_DEFAULT_SOCKET;
    }

    deadline = deadline_after(HANDSHAKE_TIMEOUT_MS);
    ls = calloc(1, sizeof(*ls));
    if (!ls)
        return -ENOMEM;
    ls->fd = -1;

    r = open_socket(path, &ls->fd);
    if (r < 0)
        goto err;

    /* The HELLO goes out through the same machinery as APPEND frames: a
     * sealed frame with no records in the batch buffer. */
    ls->out_cap = WIRE_HEADER_SIZE + WIRE_HELLO_FIXED + WIRE_PRODUCER_NAME_MAX;
    ls->out = malloc(ls->out_cap);
    if (!ls->out) {
        r = -ENOMEM;
        goto err;
    }
    r = wire_encode_hello(ls->out, name, name_len);
    if (r < 0)
        goto err;
    ls->out_used = (size_t)r;
    ls->out_sent = 0;
    ls->out_sealed = true;

    r = io_run(ls, deadline, GOAL_WELCOME, 0);
    if (r < 0)
        goto err;
    r = buffer_setup(ls, o.buffer_bytes);
    if (r < 0)
        goto err;
    ls->nonblock = (o.flags & LOGSHARD_NONBLOCK) != 0;

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

    /* A frame still in flight owns the buffer; so does a full one. */
    if (!ls->out_sealed &&
        (ls->out_cap - ls->out_used < WIRE_RECORD_PREFIX + len || ls->out_count == UINT32_MAX))
        frame_seal(ls);
    if (ls->out_sealed) {
        /* Non-blocking: one attempt to move the frame along, then give the
         * record back rather than wait. */
        r = io_run(ls, ls->nonblock ? now_ns() : NO_DEADLINE, GOAL_SENT, 0);
        if (r == -ETIMEDOUT && ls->nonblock)
            return -EAGAIN;
        if (r < 0)
            return r;
    }

    wire_put_u32(ls->out + ls->out_used, (uint32_t)len);
    memcpy(ls->out + ls->out_used + WIRE_RECORD_PREFIX, rec, len);
    ls->out_used += WIRE_RECORD_PREFIX + len;
    ls->appended++;
    now = now_ns();
    if (ls->out_count++ == 0)
        ls->oldest_ns = now;

    /* Linger: the frame goes now, but only as far as the socket takes it
     * without waiting; the next call finishes it. The record is in the
     * buffer and counted either way, so a failure here is left for the next
     * call to report rather than making the caller believe the record was
     * refused (and send it again). */
    if (now - ls->oldest_ns >= (uint64_t)LOGSHARD_LINGER_MS * NSEC_PER_MSEC) {
        frame_seal(ls);
        (void)io_run(ls, now, GOAL_SENT, 0);
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
    deadline = deadline_after(timeout_ms);
    frame_seal(ls);
    return io_run(ls, deadline, GOAL_ACKED, ls->appended);
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
    /* Records in an unsealed frame count as waiting too: the writable
     * socket wakes the loop, and logshard_process() seals and sends them. */
    return POLLIN | (ls->out_sealed || ls->out_count > 0 ? POLLOUT : 0);
}

/* One round of what io_run() does after poll(), without the poll(): both
 * directions go only as far as the socket allows now. Reading first, as
 * there: an ERROR or end of file explains a failing send. */
LOGSHARD_EXPORT int logshard_process(logshard *ls)
{
    if (!ls)
        return -EINVAL;
    if (ls->error)
        return ls->error;
    frame_seal(ls);
    do_read(ls);
    do_write(ls);
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
