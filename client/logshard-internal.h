/* What the files of liblogshard share: the handle, the retained frames and
 * the connection's state. Nothing here is exported: the build hides every
 * symbol, and the names shared between the library's files carry the
 * logshard__ prefix that marks them internal (localize-archive.sh makes
 * them local in the static archive too).
 *
 * logshard.c is the public API, retain.c the frames a handle keeps until
 * they are acknowledged, connection.c the socket: the handshake, reading
 * and writing, losing the connection and getting it back. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "logshard.h"
#include "wire.h"

/* The build hides every symbol; only the public API is let out (and the
 * version script keeps it that way for the shared library). */
#define LOGSHARD_EXPORT __attribute__((visibility("default")))

#define NSEC_PER_MSEC UINT64_C(1000000)
#define NO_DEADLINE UINT64_MAX
#define HANDSHAKE_TIMEOUT_MS 30000

/* A frame buffer reserves the version 2 prefix in front of its records:
 * header, first position, record count. A version 1 frame starts 8 bytes
 * later (no position), so both versions keep their records at the same
 * offset and a record is copied once, whichever version is spoken. */
#define FRAME_PREFIX_V1 (WIRE_HEADER_SIZE + WIRE_APPEND_FIXED)
#define FRAME_PREFIX_V2 (WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED)
#define FRAME_RECORDS FRAME_PREFIX_V2
/* The bytes in front of the records that max_frame_bytes does not count. */
#define FRAME_UNCOUNTED (FRAME_RECORDS - WIRE_APPEND_FIXED)

/* The memory a handle keeps for records appended and not acknowledged:
 * RETAIN_BUFFERS frame buffers, or as many as make RETAIN_MIN_BYTES when
 * the buffers are small (so that a tiny buffer_bytes does not also mean a
 * handful of records in flight). Half of that where the daemon's ACK does
 * not wait for the disk (retain.c says why). include/logshard.h documents
 * it. */
#define RETAIN_BUFFERS 4u
#define RETAIN_MIN_BYTES ((size_t)1024 * 1024)
#define RETAIN_BUFFERS_UNSYNCED 2u
#define RETAIN_MIN_BYTES_UNSYNCED ((size_t)512 * 1024)

/* The daemon sends us only WELCOME, ACK and ERROR; the largest is an ERROR
 * whose message the encoder cut at WIRE_ERROR_MESSAGE_MAX. */
#define IN_BUFFER_BYTES (WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX)

#define HELLO_BUFFER_BYTES (WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + WIRE_PRODUCER_NAME_MAX)

/* One APPEND frame and its buffer. Records sit from rec_start to used,
 * each as on the wire (u32 length, bytes); the prefix is written in front
 * of rec_start when the frame is sealed. Records below a resumed stream's
 * position are cut off the front by moving rec_start, with no copy. */
struct frame {
    struct frame *next;
    unsigned char *buf; /* struct retain's cap bytes */
    size_t rec_start;
    size_t used;
    size_t backed; /* bytes of buf from its start known to have pages */
    uint64_t first; /* position of the first record */
    uint32_t count;
};

/* Every frame a handle holds, oldest first: the sealed ones in a queue
 * (wholly sent and waiting for their ACK, then the one being sent, then
 * those waiting for the socket), the one being built, and empty ones kept
 * for reuse. nframes counts them all and never exceeds max_frames. */
struct retain {
    struct frame *head, *tail; /* sealed */
    struct frame *send;        /* first sealed frame not wholly sent, or NULL */
    size_t send_off;           /* bytes of *send the kernel took, from its prefix */
    struct frame *building;    /* NULL until a record needs it */
    struct frame *pool;
    size_t nframes;
    size_t max_frames;
    size_t cap;   /* bytes of every frame buffer */
    size_t limit; /* most bytes a frame may fill, prefix included (the daemon's frame limit) */
    size_t target; /* bytes a frame is sealed at, prefix included: buffer_bytes as asked,
                    * unless one record needs more (it then goes alone) */
};

/* The connection's life, one state at a time (every transition is in
 * connection.c). */
enum conn_state {
    CONN_HANDSHAKE, /* the first connect: HELLO out, WELCOME awaited */
    CONN_UP,        /* welcomed: APPEND out, ACK in */
    CONN_BACKOFF,   /* lost, waiting to try again at retry_ns; fd is a timerfd */
    CONN_RESUMING,  /* connected again: HELLO out, WELCOME awaited */
    CONN_FAILED,    /* for good; error says why */
};

struct logshard {
    int fd; /* the socket, or the backoff's timerfd; the number never changes */
    enum conn_state state;
    int error; /* 0, or the negative errno every call now returns */
    enum logshard_error_origin error_origin;
    bool has_message;
    bool retry_now; /* a resumed HELLO met a daemon that is stopping (ESHUTDOWN) */

    uint16_t version; /* the protocol spoken (WIRE_PROTOCOL_V1 or _V2) */
    bool nonblock;    /* LOGSHARD_NONBLOCK */
    bool reconnect;   /* not LOGSHARD_NO_RECONNECT */
    int reconnect_timeout_ms; /* -1: without limit */

    size_t buffer_request;     /* buffer_bytes, the default for 0 */
    uint32_t max_record_bytes; /* the daemon's, cut to what fits one frame */
    uint32_t max_frame_bytes;  /* APPEND payload bytes, as WELCOME says */
    uint8_t fsync_policy;

    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char name[WIRE_PRODUCER_NAME_MAX + 1];
    size_t name_len;
    uint8_t stream_id[WIRE_STREAM_ID_SIZE];

    unsigned char hello[HELLO_BUFFER_BYTES];
    size_t hello_len;
    size_t hello_sent;

    uint64_t handshake_deadline; /* CONN_RESUMING: give this connection up */
    uint64_t lost_deadline;      /* since the connection was lost: give up */
    uint64_t retry_ns;           /* CONN_BACKOFF: the next attempt */
    uint64_t backoff_ms;         /* the wait after the next failed attempt */
    uint64_t reconnects;

    struct retain r;
    uint64_t oldest_ns; /* when the building frame's first record came in (coarse clock) */

    /* Stream positions (in version 1 the same numbers count the records
     * of the one connection). */
    uint64_t appended; /* the next position logshard_append() gives */
    uint64_t sent;     /* every record below it is in a frame the kernel took whole */
    uint64_t acked;    /* every record below it is acknowledged */

    unsigned char in[IN_BUFFER_BYTES];
    size_t in_used;

    char message[WIRE_ERROR_MESSAGE_MAX + 1];
};

/* What io_run() waits for. */
enum goal {
    GOAL_WELCOME, /* the handshake of logshard_connect() is done */
    GOAL_SENT,    /* no sealed frame waits for the socket */
    GOAL_ROOM,    /* a frame buffer is free for the next records */
    GOAL_ACKED,   /* every position below the target is acknowledged */
};

uint64_t logshard__now_ns(void);
/* CLOCK_MONOTONIC as of the last timer tick (a few ms behind at most): a
 * fifth of the cost of logshard__now_ns(), read on every append for the
 * linger, where a few ms do not matter. Never compared with the other. */
uint64_t logshard__coarse_ns(void);
uint64_t logshard__deadline_after(int timeout_ms);

/* connection.c */
int logshard__fail(logshard *ls, int err, enum logshard_error_origin origin);
int logshard__handshake(logshard *ls, uint16_t version, uint64_t deadline);
int logshard__io_run(logshard *ls, uint64_t deadline, enum goal goal, uint64_t target);
void logshard__io_step(logshard *ls, short revents);
int logshard__events(const logshard *ls);

/* retain.c */
void logshard__retain_setup(logshard *ls, size_t requested);
/* The bytes at which a frame is sealed for a requested buffer size, before
 * the daemon's max_frame_bytes (which may lower it) is known. */
size_t logshard__retain_frame_target(size_t requested);
void logshard__retain_limits(logshard *ls);
bool logshard__retain_fits(const logshard *ls, size_t len);
bool logshard__retain_can_open(const logshard *ls);
int logshard__retain_open(logshard *ls);
void logshard__retain_put(logshard *ls, const void *rec, size_t len);
void logshard__retain_seal(logshard *ls);
void logshard__retain_ack(logshard *ls, uint64_t acked);
int logshard__retain_resume(logshard *ls, uint64_t next);
void logshard__retain_frame_bytes(const logshard *ls, const struct frame *f,
                                  const unsigned char **ret_bytes, size_t *ret_len);
void logshard__retain_free(logshard *ls);
