/* The raw version 2 producer connection of raw-stream.h. */
#include "raw-stream.h"

#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void raw_stream_open(struct raw_stream *c, const char *sock, const char *name, const uint8_t *id,
                     uint64_t first)
{
    unsigned char frame[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + WIRE_PRODUCER_NAME_MAX];
    int n;

    memset(c, 0, sizeof(*c));
    c->fd = harness_raw_connect(sock);
    n = wire_encode_hello_v2(frame, name, strlen(name), id, first);
    assert_true(n > 0);
    harness_raw_send(c->fd, frame, (size_t)n);
}

bool raw_stream_pump(struct raw_stream *c, int timeout_ms)
{
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    ssize_t n;

    if (poll(&p, 1, timeout_ms) <= 0)
        return false;
    n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
    if (n <= 0) {
        c->eof = true;
        return true;
    }
    c->have += (size_t)n;
    while (c->have >= WIRE_HEADER_SIZE) {
        struct wire_header h;
        const unsigned char *pl = c->buf + WIRE_HEADER_SIZE;

        assert_int_equal(wire_decode_header(c->buf, sizeof(c->buf), &h), 0);
        if (c->have < WIRE_HEADER_SIZE + h.length)
            break;
        if (h.type == WIRE_WELCOME) {
            assert_int_equal(wire_decode_welcome(pl, h.length, &c->welcome), 0);
        } else if (h.type == WIRE_ACK) {
            assert_int_equal(wire_decode_ack(pl, h.length, &c->acked), 0);
        } else if (h.type == WIRE_ERROR) {
            const char *m;
            size_t ml;

            assert_int_equal(wire_decode_error(pl, h.length, &c->error, &m, &ml), 0);
            memcpy(c->message, m, ml);
            c->message[ml] = '\0';
        } else {
            fail_msg("unexpected frame type %u from the daemon", h.type);
        }
        memmove(c->buf, c->buf + WIRE_HEADER_SIZE + h.length,
                c->have - WIRE_HEADER_SIZE - h.length);
        c->have -= WIRE_HEADER_SIZE + h.length;
    }
    return true;
}

void raw_stream_wait_welcome(struct raw_stream *c)
{
    uint64_t end = now_ms() + RAW_STREAM_WAIT_MS;

    while (c->welcome.version == 0 && !c->error && !c->eof) {
        if (now_ms() >= end)
            fail_msg("no WELCOME within %d ms", RAW_STREAM_WAIT_MS);
        raw_stream_pump(c, 100);
    }
}

void raw_stream_wait_acked(struct raw_stream *c, uint64_t pos)
{
    uint64_t end = now_ms() + RAW_STREAM_WAIT_MS;

    while (c->acked < pos) {
        if (c->error || c->eof)
            fail_msg("connection ended (error %u: %s) at ACK %" PRIu64 ", waiting for %" PRIu64,
                     c->error, c->message, c->acked, pos);
        if (now_ms() >= end)
            fail_msg("ACK %" PRIu64 " after %d ms, waiting for %" PRIu64, c->acked,
                     RAW_STREAM_WAIT_MS, pos);
        raw_stream_pump(c, 100);
    }
}

void raw_stream_wait_end(struct raw_stream *c)
{
    uint64_t end = now_ms() + RAW_STREAM_WAIT_MS;

    while (!c->eof) {
        if (now_ms() >= end)
            fail_msg("the connection stayed open for %d ms", RAW_STREAM_WAIT_MS);
        raw_stream_pump(c, 100);
    }
}

void raw_stream_append(struct raw_stream *c, const char *prefix, uint64_t first, uint64_t n)
{
    size_t head = WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED;
    size_t cap = head + n * (4 + strlen(prefix) + 21);
    size_t pos = head;
    unsigned char *f = malloc(cap);

    assert_non_null(f);
    wire_put_u64(f + WIRE_HEADER_SIZE, first);
    wire_put_u32(f + WIRE_HEADER_SIZE + WIRE_APPEND_POSITION, (uint32_t)n);
    for (uint64_t i = 0; i < n; i++) {
        int len = snprintf((char *)f + pos + 4, cap - pos - 4, "%s%06" PRIu64, prefix, first + i);

        assert_true(len > 0 && (size_t)len < cap - pos - 4);
        wire_put_u32(f + pos, (uint32_t)len);
        pos += 4 + (size_t)len;
    }
    wire_encode_header(f, WIRE_APPEND, (uint32_t)(pos - WIRE_HEADER_SIZE));
    harness_raw_send(c->fd, f, pos);
    free(f);
}

void raw_stream_close(struct raw_stream *c)
{
    close(c->fd);
    c->fd = -1;
}
