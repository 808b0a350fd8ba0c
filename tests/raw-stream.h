/* A producer connection of protocol version 2 spoken byte by byte, for
 * tests that need what the client library never sends: a HELLO that resumes
 * a stream at a position the test chooses, an APPEND that repeats or skips
 * positions, a connection dropped at a chosen point. Frames go out through
 * the wire codec; what comes back is decoded as it arrives. Every wait has
 * a deadline of RAW_STREAM_WAIT_MS and fails the test past it. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

#define RAW_STREAM_WAIT_MS 10000

struct raw_stream {
    int fd;
    unsigned char buf[65536];
    size_t have;
    struct wire_welcome welcome; /* version 0 until the WELCOME came */
    uint64_t acked;              /* the latest ACK's position */
    uint32_t error;              /* an ERROR frame's code, else 0 */
    char message[WIRE_ERROR_MESSAGE_MAX + 1]; /* and its message */
    bool eof;                    /* the daemon closed the connection */
};

/* Connects to sock and sends a version 2 HELLO for stream id, resuming at
 * position first. Does not wait for the WELCOME. */
void raw_stream_open(struct raw_stream *c, const char *sock, const char *name, const uint8_t *id,
                     uint64_t first);

/* Waits up to timeout_ms for bytes and handles every whole frame that came
 * (a frame the daemon never sends to a producer fails the test). Returns
 * false when nothing came in time. */
bool raw_stream_pump(struct raw_stream *c, int timeout_ms);

/* Waits for the WELCOME, an ERROR or the end of the connection. */
void raw_stream_wait_welcome(struct raw_stream *c);

/* Waits for an ACK of at least pos; an ERROR or the end first fails the
 * test with the daemon's message. */
void raw_stream_wait_acked(struct raw_stream *c, uint64_t pos);

/* Waits until the daemon closes the connection. */
void raw_stream_wait_end(struct raw_stream *c);

/* Sends records first .. first + n - 1 in one APPEND frame that starts at
 * position first; record i reads "<prefix><i>", i in six digits at least. */
void raw_stream_append(struct raw_stream *c, const char *prefix, uint64_t first, uint64_t n);

/* Closes the connection (without a word to the daemon). */
void raw_stream_close(struct raw_stream *c);
