/* liblogshard: send log records to logshardd and wait until they are safe.
 *
 * A producer connects once, appends records (opaque bytes, 1 byte up to the
 * daemon's max_record_bytes) and calls logshard_flush() when it needs to know
 * that everything appended so far has been acknowledged by the daemon. Every
 * record of one handle lands in that handle's own shards, in the order it
 * was appended.
 *
 * A handle is a stream that outlives its connection: when the daemon
 * restarts or the connection drops, the library keeps every record not yet
 * acknowledged, connects again by itself (backoff from 10 ms doubling to
 * 1 s) and sends the daemon what it does not have, so that nothing is lost
 * and nothing is written twice. Calls go on working meanwhile (append takes
 * records until the retained memory is full, flush waits); they fail only
 * when the daemon stays away longer than reconnect_timeout_ms (-ENOTCONN)
 * or refuses the stream with an ERROR. A daemon that speaks only protocol
 * version 1 gets a handle that cannot resume: a drop fails it (-EPIPE), as
 * does any drop with LOGSHARD_NO_RECONNECT.
 *
 * Records are batched: they are sent when the buffer fills, when
 * logshard_flush() or logshard_close() is called, or by the next
 * logshard_append() once the oldest buffered record has waited
 * LOGSHARD_LINGER_MS. logshard_append() never drops a record: when the daemon
 * cannot keep up (or is away) it blocks until there is room.
 *
 * Memory: a handle holds the records appended and not yet acknowledged in
 * frame buffers of buffer_bytes (as adjusted, see logshard_opts); at most
 * 4 of them, or as many as make 1 MiB when they are smaller than 256 KiB.
 * With the default buffer that is 1 MiB of records waiting for their ACK.
 * Where the daemon's policy acknowledges records once written, not synced
 * (LOGSHARD_FSYNC_NONE and LOGSHARD_FSYNC_INTERVAL, as its first WELCOME
 * said), half of that: 2 buffers, or as many as make 512 KiB.
 *
 * Every int-returning call returns 0 on success or a negative errno value.
 * A handle is not safe to use from two threads at once; use one per thread
 * or a lock of your own. The library never prints and never raises SIGPIPE.
 *
 * An event loop drives a handle opened with LOGSHARD_NONBLOCK through
 * logshard_fd(), logshard_events() and logshard_process(); nothing then
 * blocks but logshard_connect() and logshard_flush(). logshard(3) has a
 * complete poll(2) example.
 *
 * ABI: liblogshard.so.0 versions every symbol (LOGSHARD_1 for the calls of
 * 0.1.0, LOGSHARD_1.1 and LOGSHARD_1.2 for those marked "Since ..."), so a program
 * keeps working with any later liblogshard.so.0, and one that uses a newer
 * call refuses to start, with a message naming the version, on an older
 * library. Structures the caller fills can grow; see logshard_opts. */
#ifndef LOGSHARD_H
#define LOGSHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. logshard_version() tells the version of the
 * library the program runs with, which may be newer. */
#define LOGSHARD_VERSION_MAJOR 0
#define LOGSHARD_VERSION_MINOR 1
#define LOGSHARD_VERSION_PATCH 0
#define LOGSHARD_VERSION_STRING "0.1.0"
/* One number that grows with every release, for comparisons:
 * (major << 16) | (minor << 8) | patch. */
#define LOGSHARD_VERSION_NUMBER \
    ((LOGSHARD_VERSION_MAJOR << 16) | (LOGSHARD_VERSION_MINOR << 8) | LOGSHARD_VERSION_PATCH)

/* Where producers connect when neither the options nor $LOGSHARD_SOCKET say. */
#define LOGSHARD_DEFAULT_SOCKET "/run/logshard/logshard.sock"

/* How long buffered records may wait for a following append to send them. */
#define LOGSHARD_LINGER_MS 50

/* One producer stream (and its connection to the daemon). Opaque. */
typedef struct logshard logshard;

/* Options for logshard_connect(). Zero the whole structure before setting
 * members (an initializer such as { .producer = "billing" } does), so that
 * every member left alone has its default.
 *
 * The structure can grow: members are only ever added at its end, each at
 * an offset at or past the sizeof(logshard_opts) of the release before (so
 * bytes that were padding in an older header are never read as a member).
 * logshard_connect() reads only the first four members, the first version
 * of the structure; a program that sets a member added later passes its
 * sizeof(logshard_opts) to logshard_connect_sized(), which reads the members
 * that size covers, and refuses (-E2BIG) a set member that the library
 * running the program does not know. A binary built against an older
 * header therefore keeps working with a newer library, and a newer binary
 * fails loudly, not silently, with an older one. */
typedef struct logshard_opts {
    const char *socket_path;  /* NULL or "": $LOGSHARD_SOCKET (when set and not
                                 empty), else LOGSHARD_DEFAULT_SOCKET */
    const char *producer;     /* shard name; NULL: the program's name, cut to 64
                                 bytes, with characters outside [A-Za-z0-9._-]
                                 and a leading '.' or '-' replaced by '_'
                                 ("logshard" when the program has no name) */
    size_t buffer_bytes;      /* client batch buffer; 0: library default (256 KiB).
                                 Raised to hold one record of the daemon's
                                 max_record_bytes, lowered to its max_frame_bytes;
                                 frames are still sent at buffer_bytes (at least
                                 256 KiB), larger only for one large record.
                                 The connection's send buffer (SO_SNDBUF) is
                                 raised to hold one such frame, as far as
                                 net.core.wmem_max allows. */
    unsigned flags;           /* 0, or LOGSHARD_NONBLOCK and LOGSHARD_NO_RECONNECT */
    /* Since LOGSHARD_1.2 (read by logshard_connect_sized() when opts_size
     * is at least LOGSHARD_OPTS_SIZE_2). */
    unsigned reserved_1;      /* never read: on 64-bit systems these are the
                                 first version's trailing padding bytes,
                                 which no member may use */
    int reconnect_timeout_ms; /* how long after the connection is lost the
                                 library keeps trying to get it back before
                                 calls fail with -ENOTCONN; 0: the default,
                                 60000; -1: forever; below -1: -EINVAL */
} logshard_opts;

/* logshard_opts.flags: logshard_append() returns -EAGAIN instead of
 * blocking while the daemon applies backpressure (the record is then not
 * taken; append it again after logshard_process() made room, which
 * logshard_fd() and logshard_events() tell when to call). Connecting and
 * flushing still wait. */
#define LOGSHARD_NONBLOCK 0x1u

/* logshard_opts.flags, since LOGSHARD_1.2: no reconnecting; when the
 * daemon hangs up the handle fails with -EPIPE, as in LOGSHARD_1 and 1.1
 * (a library older than 1.2 refuses the flag with -EINVAL). */
#define LOGSHARD_NO_RECONNECT 0x2u

/* The bytes of the first version of logshard_opts: what logshard_connect()
 * reads, and the smallest size logshard_connect_sized() accepts. */
#define LOGSHARD_OPTS_SIZE_1 (offsetof(logshard_opts, flags) + sizeof(unsigned))
/* The bytes of the second version (LOGSHARD_1.2): reconnect_timeout_ms. */
#define LOGSHARD_OPTS_SIZE_2 (offsetof(logshard_opts, reconnect_timeout_ms) + sizeof(int))

/* Connects to the daemon, introduces the producer and waits for the daemon to
 * accept it (at most 30 seconds). The handle is a new stream with a random
 * id (protocol version 2); a daemon that answers EPROTONOSUPPORT (it speaks
 * only version 1) is asked again in version 1, and the handle then cannot
 * resume. A daemon that goes away while it takes this first connection (it
 * says it is stopping, or it dies and hangs up) is waited for within the
 * 30 seconds, connecting again with a backoff; every other failure of this
 * first connection is returned at once.
 * opts may be NULL for all defaults. On success *out is a new handle that the
 * caller releases with logshard_close(); on failure *out is untouched.
 * Returns 0, or:
 *   -EINVAL    the producer name breaks the rule (1 to 64 bytes of
 *              [A-Za-z0-9._-], not starting with '.' or '-'), flags has a
 *              bit other than LOGSHARD_NONBLOCK and LOGSHARD_NO_RECONNECT,
 *              or reconnect_timeout_ms is below -1;
 *   -ENAMETOOLONG  the socket path does not fit a Unix socket address;
 *   -ENOENT, -ECONNREFUSED, -EACCES  no daemon listening at the path, or no
 *              permission to use it (the errors of connect(2));
 *   -ETIMEDOUT the daemon did not answer in time;
 *   -EPROTO    the peer does not speak the logshard protocol;
 *   another negative errno the daemon sent in an ERROR frame when it
 *   refused the producer (its message is not available: there is no
 *   handle to ask), such as -EUSERS (max_producers reached) or -EACCES
 *   (not on the daemon's access lists);
 *   -ECONNRESET the daemon closed the connection without answering (with
 *              LOGSHARD_NO_RECONNECT at once; otherwise when no daemon
 *              took the producer within the 30 seconds);
 *   -ESHUTDOWN the daemon was stopping when it took the connection (a
 *              restart) and none took its place within the 30 seconds;
 *              until then the library connects again by itself, so a
 *              producer that starts during a restart under a socket unit
 *              just waits;
 *   -ENOMEM    out of memory; or what getrandom(2) failed with.
 * A refusal the daemon sent and the same errno found locally (-EACCES,
 * -ETIMEDOUT) cannot be told apart here, and need not be: either way there
 * is no connection to keep using.
 * Reads the first version of logshard_opts (LOGSHARD_OPTS_SIZE_1 bytes):
 * it is logshard_connect_sized(out, opts, LOGSHARD_OPTS_SIZE_1). */
int logshard_connect(logshard **out, const logshard_opts *opts);

/* Since LOGSHARD_1.1. As logshard_connect(), for a logshard_opts of
 * opts_size bytes; pass sizeof(logshard_opts) (or sizeof(*opts)). Members
 * that lie past opts_size take their defaults; bytes past the structure
 * this library knows must be zero. opts may be NULL (opts_size is then not
 * looked at). Returns what logshard_connect() returns, or also:
 *   -EINVAL    opts_size is below LOGSHARD_OPTS_SIZE_1;
 *   -E2BIG     opts sets a member this library does not know (it is older
 *              than the header the program was built with). */
int logshard_connect_sized(logshard **out, const logshard_opts *opts, size_t opts_size);

/* Copies one record of len bytes into the batch buffer, sending earlier
 * records first when it is full, and gives it the stream's next position.
 * It blocks (without LOGSHARD_NONBLOCK) while the retained memory (see the
 * top of this file) is full of records not yet acknowledged, whether the
 * daemon applies backpressure or is away and being reconnected to. The
 * record is not acknowledged until a later logshard_flush() returns 0; it
 * is kept and sent again after a reconnect until then.
 * Returns 0, or:
 *   -EINVAL    rec is NULL or len is 0;
 *   -EMSGSIZE  len is over the daemon's max_record_bytes (or over what fits
 *              one frame of its max_frame_bytes, when that is smaller);
 *   -EAGAIN    with LOGSHARD_NONBLOCK only: the daemon applies backpressure and
 *              the buffer is full; the record was not taken;
 *   -EPIPE     the daemon closed the connection, and the handle does not
 *              reconnect (LOGSHARD_NO_RECONNECT, or a version 1 daemon);
 *   -ENOTCONN  the daemon stayed away longer than reconnect_timeout_ms;
 *   the error the daemon reported in an ERROR frame, once it has (when it
 *   refuses a resumed stream: -ESTALE, it forgot the stream; -EACCES or
 *   -EINVAL, another uid or producer name owns it); the
 *   connection is then closed and every later call returns the same error
 *   (logshard_error() and logshard_error_origin() tell this case from the
 *   same errno returned for the reasons above).
 * A record for which this returns an error was not taken; one for which it
 * returns 0 is counted by logshard_unacked() until acknowledged. */
int logshard_append(logshard *ls, const void *rec, size_t len);

/* Sends every buffered record and waits until the daemon has acknowledged
 * every record appended before this call. timeout_ms -1 waits without limit.
 * The wait goes on across reconnects: records the old daemon did not
 * acknowledge are sent to the new one, and its ACKs count.
 * Returns 0 when everything is acknowledged, or:
 *   -ETIMEDOUT the acknowledgements did not come in time (nothing is lost;
 *              call again to keep waiting) while logshard_error() is 0; the
 *              daemon may be away and the handle still reconnecting;
 *   -EPIPE     the daemon closed the connection before acknowledging all
 *              (logshard_unacked() tells how many were not) and the handle
 *              does not reconnect;
 *   -ENOTCONN  the daemon stayed away longer than reconnect_timeout_ms;
 *   the error the daemon reported in an ERROR frame. The daemon may send
 *   ETIMEDOUT itself (a frame of ours stayed incomplete too long): then
 *   logshard_error() is -ETIMEDOUT too and logshard_error_origin() is
 *   LOGSHARD_ORIGIN_DAEMON, the connection is closed, and calling again
 *   returns the same error at once. */
int logshard_flush(logshard *ls, int timeout_ms);

/* Flushes without a time limit (unless the connection already failed),
 * closes the connection and frees the handle. NULL is fine. While the
 * daemon is away this waits for it, up to reconnect_timeout_ms (forever
 * with -1). Use logshard_flush() first to learn whether it succeeded, or
 * to bound the wait. */
void logshard_close(logshard *ls);

/* Number of records appended on this handle that the daemon has not
 * acknowledged (yet), across reconnects. */
uint64_t logshard_unacked(const logshard *ls);

/* Since LOGSHARD_1.2. How many times the handle got a lost connection back
 * (a daemon accepted the resumed stream); 0 for NULL. An event loop that
 * registered logshard_fd() with epoll or libuv must register it again when
 * this grows (see logshard_fd()). */
uint64_t logshard_reconnects(const logshard *ls);

/* The message of the daemon's last ERROR frame on this connection, or NULL
 * when there was none. Valid until the handle is closed. */
const char *logshard_error_message(const logshard *ls);

/* What an acknowledgement promises on this connection: the daemon's fsync
 * policy, announced when it accepted the producer.
 *   LOGSHARD_FSYNC_NONE      the record is written to its shard file; it is
 *                            synced to disk when the shard is sealed.
 *   LOGSHARD_FSYNC_INTERVAL  as NONE, and the daemon syncs written data
 *                            within its fsync_interval.
 *   LOGSHARD_FSYNC_BATCH     an fdatasync that covers the record has completed
 *                            (one sync may cover many records).
 *   LOGSHARD_FSYNC_ALWAYS    as BATCH, with one fdatasync per APPEND frame.
 * A daemon newer than this library may announce a value not listed here. */
enum logshard_fsync_policy {
    LOGSHARD_FSYNC_NONE = 0,
    LOGSHARD_FSYNC_INTERVAL = 1,
    LOGSHARD_FSYNC_BATCH = 2,
    LOGSHARD_FSYNC_ALWAYS = 3,
};

/* The fsync policy in force for this connection (enum logshard_fsync_policy),
 * or -EINVAL when ls is NULL. */
int logshard_fsync_policy(const logshard *ls);

/* A static English description of a value returned by this library. */
const char *logshard_strerror(int err);

/* Since LOGSHARD_1.1. Where the error of a failed handle came from. */
enum logshard_error_origin {
    LOGSHARD_ORIGIN_NONE = 0,   /* the handle has not failed */
    LOGSHARD_ORIGIN_LOCAL = 1,  /* found here: the daemon hung up (-EPIPE), or
                                   stayed away too long (-ENOTCONN), a peer
                                   that does not speak the protocol
                                   (-EPROTO), a socket error */
    LOGSHARD_ORIGIN_DAEMON = 2, /* the daemon sent it in an ERROR frame;
                                   logshard_error_message() says why */
};

/* Since LOGSHARD_1.1. 0 while the handle works; once it has failed for
 * good (the daemon sent ERROR, hung up on a handle that does not
 * reconnect, stayed away past reconnect_timeout_ms, or spoke something
 * other than the protocol), the negative errno that every later call on it
 * returns. A lost connection being got back is no failure: this stays 0.
 * A call that returns an error while this stays 0 left the handle usable:
 * -ETIMEDOUT from logshard_flush(), -EAGAIN, -EINVAL or -EMSGSIZE from
 * logshard_append(). -EINVAL when ls is NULL. */
int logshard_error(const logshard *ls);

/* Since LOGSHARD_1.1. Who found the error of logshard_error(): an enum
 * logshard_error_origin value, or -EINVAL when ls is NULL. */
int logshard_error_origin(const logshard *ls);

/* Since LOGSHARD_1.1. The handle's socket, for an event loop to wait on
 * (poll, epoll, libuv's uv_poll_t...) with the events logshard_events()
 * names. The descriptor is the library's: do not read, write, close it or
 * change its flags; its number stays the same until logshard_close(), which
 * closes it (remove it from an epoll set or stop a uv_poll_t first).
 * While a lost connection is being got back the number is reused: during
 * the backoff it is a timer that becomes readable (POLLIN) when the next
 * attempt is due, then the new socket. poll(2) needs nothing more; epoll
 * (and so libuv) drops a registration when the file behind it is closed,
 * so an epoll user must register the descriptor again after every
 * logshard_process() that changed it: when logshard_reconnects() grew, or
 * simply after every call (EPOLL_CTL_DEL then _ADD, ignoring ENOENT).
 * Known limit: a daemon that accepts a resumed connection and never
 * answers is noticed (after 30 s) only when logshard_process() or
 * logshard_flush() is called; an event loop that calls process() only on
 * events should also call it now and then. -EINVAL when ls is NULL. */
int logshard_fd(const logshard *ls);

/* Since LOGSHARD_1.1. The poll(2) events to wait for on logshard_fd()
 * before the next logshard_process(): POLLIN always (ACK and ERROR frames,
 * a hang-up, the end of a reconnect backoff), and POLLOUT while appended
 * records (or a reconnect's HELLO) are waiting to be sent.
 * The values equal EPOLLIN and EPOLLOUT. 0 once the handle has failed
 * (there is nothing left to wait for), -EINVAL when ls is NULL. Ask again
 * after every logshard_append() and logshard_process(). */
int logshard_events(const logshard *ls);

/* Since LOGSHARD_1.1. Makes progress without ever blocking: sends every
 * record appended so far, as far as the socket takes it now, and reads
 * every ACK and ERROR that has arrived, and when a reconnect backoff is
 * over, tries once to connect (which never waits). Call it when logshard_fd() reports
 * one of the events of logshard_events() (or whenever you like; it is
 * cheap when there is nothing to do). logshard_unacked() reaching 0 means
 * every record appended is acknowledged. Returns 0, or the error that
 * failed the handle (as logshard_error()): stop waiting on the descriptor
 * and close the handle. -EINVAL when ls is NULL. */
int logshard_process(logshard *ls);

/* Since LOGSHARD_1.1. The version of the library the program runs with, as
 * LOGSHARD_VERSION_NUMBER and LOGSHARD_VERSION_STRING are for the header. */
unsigned logshard_version(void);
const char *logshard_version_string(void);

#ifdef __cplusplus
}
#endif

#endif
