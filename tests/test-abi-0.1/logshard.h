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
 * or a lock of your own. The library never prints and never raises SIGPIPE. */
#ifndef LOGSHARD_H
#define LOGSHARD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LOGSHARD_VERSION_MAJOR 0
#define LOGSHARD_VERSION_MINOR 1

/* Where producers connect when neither the options nor $LOGSHARD_SOCKET say. */
#define LOGSHARD_DEFAULT_SOCKET "/run/logshard/logshard.sock"

/* How long buffered records may wait for a following append to send them. */
#define LOGSHARD_LINGER_MS 50

/* One producer connection. Opaque. */
typedef struct logshard logshard;

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
 * taken; append it again later). Connecting and flushing still wait. */
#define LOGSHARD_NONBLOCK 0x1u

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
 *   -ENOMEM    out of memory. */
int logshard_connect(logshard **out, const logshard_opts *opts);

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
 *   connection is then closed and every later call returns the same error.
 * A record for which this returns an error was not taken; one for which it
 * returns 0 is counted by logshard_unacked() until acknowledged. */
int logshard_append(logshard *ls, const void *rec, size_t len);

/* Sends every buffered record and waits until the daemon has acknowledged
 * every record appended before this call. timeout_ms -1 waits without limit.
 * Returns 0 when everything is acknowledged, or:
 *   -ETIMEDOUT the acknowledgements did not come in time (nothing is lost;
 *              call again to keep waiting);
 *   -EPIPE     the daemon closed the connection before acknowledging all
 *              (logshard_unacked() tells how many were not);
 *   the error the daemon reported in an ERROR frame. */
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

#ifdef __cplusplus
}
#endif

#endif
