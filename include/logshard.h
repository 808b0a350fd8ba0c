/* liblogshard: send log records to logshardd and wait until they are safe.
 *
 * A producer connects once, appends records (opaque bytes, 1 byte up to the
 * daemon's max_record_bytes) and calls logshard_flush() when it needs to know
 * that everything appended so far has been acknowledged by the daemon. Every
 * record of one connection lands in that connection's own shard, in the order
 * it was appended.
 *
 * Records are batched: they are sent when the buffer fills, when
 * logshard_flush() or logshard_close() is called, or by the next
 * logshard_append() once the oldest buffered record has waited
 * LOGSHARD_LINGER_MS. logshard_append() never drops a record: when the daemon
 * cannot keep up it blocks until there is room.
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
 * 0.1.0, LOGSHARD_1.1 for those marked "Since LOGSHARD_1.1"), so a program
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

/* One producer connection. Opaque. */
typedef struct logshard logshard;

/* Options for logshard_connect(). Zero the whole structure before setting
 * members (an initializer such as { .producer = "billing" } does), so that
 * every member left alone has its default.
 *
 * The structure can grow: members are only ever added at its end, each at
 * an offset at or past the sizeof(logshard_opts) of the release before (so
 * bytes that were padding in an older header are never read as a member).
 * logshard_connect() reads only the four members below, the first version
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
                                 max_record_bytes, lowered to its max_frame_bytes. */
    unsigned flags;           /* 0, or LOGSHARD_NONBLOCK */
} logshard_opts;

/* logshard_opts.flags: logshard_append() returns -EAGAIN instead of
 * blocking while the daemon applies backpressure (the record is then not
 * taken; append it again after logshard_process() made room, which
 * logshard_fd() and logshard_events() tell when to call). Connecting and
 * flushing still wait. */
#define LOGSHARD_NONBLOCK 0x1u

/* The bytes of the first version of logshard_opts: what logshard_connect()
 * reads, and the smallest size logshard_connect_sized() accepts. */
#define LOGSHARD_OPTS_SIZE_1 (offsetof(logshard_opts, flags) + sizeof(unsigned))

/* Connects to the daemon, introduces the producer and waits for the daemon to
 * accept it (at most 30 seconds).
 * opts may be NULL for all defaults. On success *out is a new handle that the
 * caller releases with logshard_close(); on failure *out is untouched.
 * Returns 0, or:
 *   -EINVAL    the producer name breaks the rule (1 to 64 bytes of
 *              [A-Za-z0-9._-], not starting with '.' or '-'), or flags has a
 *              bit other than LOGSHARD_NONBLOCK;
 *   -ENAMETOOLONG  the socket path does not fit a Unix socket address;
 *   -ENOENT, -ECONNREFUSED, -EACCES  no daemon listening at the path, or no
 *              permission to use it (the errors of connect(2));
 *   -ETIMEDOUT the daemon did not answer in time;
 *   -EPROTO    the peer does not speak the logshard protocol;
 *   another negative errno the daemon sent in an ERROR frame when it
 *   refused the producer (its message is not available: there is no
 *   handle to ask), such as -EUSERS (max_producers reached) or -EACCES
 *   (not on the daemon's access lists);
 *   -ECONNRESET the daemon closed the connection without answering;
 *   -ENOMEM    out of memory.
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
 * records first when it is full (and blocking while the daemon applies
 * backpressure). The record is not acknowledged until a later
 * logshard_flush() returns 0.
 * Returns 0, or:
 *   -EINVAL    rec is NULL or len is 0;
 *   -EMSGSIZE  len is over the daemon's max_record_bytes (or over what fits
 *              one frame of its max_frame_bytes, when that is smaller);
 *   -EAGAIN    with LOGSHARD_NONBLOCK only: the daemon applies backpressure and
 *              the buffer is full; the record was not taken;
 *   -EPIPE     the daemon closed the connection;
 *   the error the daemon reported in an ERROR frame, once it has; the
 *   connection is then closed and every later call returns the same error
 *   (logshard_error() and logshard_error_origin() tell this case from the
 *   same errno returned for the reasons above).
 * A record for which this returns an error was not taken; one for which it
 * returns 0 is counted by logshard_unacked() until acknowledged. */
int logshard_append(logshard *ls, const void *rec, size_t len);

/* Sends every buffered record and waits until the daemon has acknowledged
 * every record appended before this call. timeout_ms -1 waits without limit.
 * Returns 0 when everything is acknowledged, or:
 *   -ETIMEDOUT the acknowledgements did not come in time (nothing is lost;
 *              call again to keep waiting) while logshard_error() is 0;
 *   -EPIPE     the daemon closed the connection before acknowledging all
 *              (logshard_unacked() tells how many were not);
 *   the error the daemon reported in an ERROR frame. The daemon may send
 *   ETIMEDOUT itself (a frame of ours stayed incomplete too long): then
 *   logshard_error() is -ETIMEDOUT too and logshard_error_origin() is
 *   LOGSHARD_ORIGIN_DAEMON, the connection is closed, and calling again
 *   returns the same error at once. */
int logshard_flush(logshard *ls, int timeout_ms);

/* Flushes without a time limit (unless the connection already failed),
 * closes the connection and frees the handle. NULL is fine. Use
 * logshard_flush() first to learn whether it succeeded. */
void logshard_close(logshard *ls);

/* Number of records appended on this handle that the daemon has not
 * acknowledged (yet). */
uint64_t logshard_unacked(const logshard *ls);

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
    LOGSHARD_ORIGIN_LOCAL = 1,  /* found here: the daemon hung up (-EPIPE), a
                                   peer that does not speak the protocol
                                   (-EPROTO), a socket error */
    LOGSHARD_ORIGIN_DAEMON = 2, /* the daemon sent it in an ERROR frame;
                                   logshard_error_message() says why */
};

/* Since LOGSHARD_1.1. 0 while the handle works; once it has failed for
 * good (the daemon sent ERROR or hung up, or spoke something other than
 * the protocol), the negative errno that every later call on it returns.
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
 * change its flags; it stays the same until logshard_close(), which closes
 * it (remove it from an epoll set or stop a uv_poll_t first). -EINVAL when
 * ls is NULL. */
int logshard_fd(const logshard *ls);

/* Since LOGSHARD_1.1. The poll(2) events to wait for on logshard_fd()
 * before the next logshard_process(): POLLIN always (ACK and ERROR frames,
 * a hang-up), and POLLOUT while appended records are waiting to be sent.
 * The values equal EPOLLIN and EPOLLOUT. 0 once the handle has failed
 * (there is nothing left to wait for), -EINVAL when ls is NULL. Ask again
 * after every logshard_append() and logshard_process(). */
int logshard_events(const logshard *ls);

/* Since LOGSHARD_1.1. Makes progress without ever blocking: sends every
 * record appended so far, as far as the socket takes it now, and reads
 * every ACK and ERROR that has arrived. Call it when logshard_fd() reports
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
