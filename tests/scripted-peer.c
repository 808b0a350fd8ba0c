/* The scripted daemon of the client library's unit tests; see
 * scripted-peer.h for how a test, its peer thread and their pipes work
 * together. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "scripted-peer.h"

/* How long the main thread waits for the peer thread to end. */
#define JOIN_TIMEOUT_S 30
/* The peer accepts at most this much before WELCOME; a HELLO is far less. */
#define HANDSHAKE_MAX_FRAME 4096u

_Thread_local const char *peer_check_file;
char *saved_program_name;

uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int remaining_ms(uint64_t deadline)
{
    uint64_t now = now_ms();

    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits for events on fd. Returns 0 when ready, -ETIMEDOUT, or -errno. */
int wait_fd(int fd, short events, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

    for (;;) {
        struct pollfd pfd = { .fd = fd, .events = events };
        int r = poll(&pfd, 1, remaining_ms(deadline));

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
        return 0;
    }
}

/* Reads exactly n bytes. Returns 0, -ENODATA for end of file before the
 * first byte, -EPIPE for end of file in the middle, -ETIMEDOUT, or -errno. */
static int read_exact(int fd, void *buf, size_t n, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    size_t got = 0;

    while (got < n) {
        ssize_t r;
        int w = wait_fd(fd, POLLIN, remaining_ms(deadline));

        if (w < 0)
            return w;
        r = recv(fd, (char *)buf + got, n - got, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (r == 0)
            return got == 0 ? -ENODATA : -EPIPE;
        got += (size_t)r;
    }
    return 0;
}

int peer_write_all(int fd, const void *buf, size_t n, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    size_t done = 0;

    while (done < n) {
        ssize_t r;
        int w = wait_fd(fd, POLLOUT, remaining_ms(deadline));

        if (w < 0)
            return w;
        r = send(fd, (const char *)buf + done, n - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        done += (size_t)r;
    }
    return 0;
}

/* One byte over a pipe: "I got here". */
int signal_pipe(int fd)
{
    return write(fd, "x", 1) == 1 ? 0 : -errno;
}

/* Returns 0 for a signal, -EPIPE when the other side closed its end (it gave
 * up), -ETIMEDOUT. */
int peer_wait_pipe(int fd, int timeout_ms)
{
    char c;
    ssize_t r;
    int w = wait_fd(fd, POLLIN, timeout_ms);

    if (w < 0)
        return w;
    r = read(fd, &c, 1);
    if (r == 1)
        return 0;
    return r == 0 ? -EPIPE : -errno;
}

/* Reads one frame; *ret_payload is malloc'd (free it). Returns 0, -ENODATA
 * at a clean end of file, or another negative errno. */
static int peer_read_frame(struct peer *p, struct wire_header *ret_h, unsigned char **ret_payload)
{
    unsigned char hdr[WIRE_HEADER_SIZE];
    uint32_t max = p->welcome_sent ? p->welcome.max_frame_bytes : HANDSHAKE_MAX_FRAME;
    /* In version 2 the limit does not count an APPEND's position. */
    if (p->welcome_sent && p->welcome.version == WIRE_PROTOCOL_V2)
        max += WIRE_APPEND_POSITION;
    unsigned char *payload;
    int r;

    r = read_exact(p->fd, hdr, sizeof(hdr), PEER_TIMEOUT_MS);
    if (r < 0)
        return r;
    /* Checks the frame against the limit WELCOME announced. */
    r = wire_decode_header(hdr, max, ret_h);
    if (r < 0)
        return r;
    payload = malloc(ret_h->length ? ret_h->length : 1);
    if (!payload)
        return -ENOMEM;
    r = read_exact(p->fd, payload, ret_h->length, PEER_TIMEOUT_MS);
    if (r < 0) {
        free(payload);
        return r == -ENODATA ? -EPIPE : r;
    }
    *ret_payload = payload;
    return 0;
}

int peer_read_hello(struct peer *p)
{
    struct wire_header h;
    struct wire_hello hello;
    unsigned char *payload;
    int r;

    PCHECK(peer_read_frame(p, &h, &payload) == 0);
    PCHECK(h.type == WIRE_HELLO);
    /* Taken apart by hand, so a bad version or flags is seen, not refused. */
    if (h.length >= WIRE_HELLO_FIXED) {
        p->hello_version = wire_get_u16(payload);
        p->hello_flags = wire_get_u16(payload + 2);
    }
    r = wire_decode_hello(payload, h.length, &hello);
    if (r == 0) {
        memcpy(p->hello_name, hello.name, hello.name_len);
        p->hello_name[hello.name_len] = '\0';
        memcpy(p->hello_stream_id, hello.stream_id, sizeof(p->hello_stream_id));
        p->hello_first_position = hello.first_position;
        p->nhellos++;
    }
    free(payload);
    PCHECK(r == 0);
    return 0;
}

/* Forgets the records from position n on, as a daemon that comes back
 * with only n records of the stream stored. */
static int got_truncate(struct peer *p, uint64_t n)
{
    size_t pos = 0;

    /* A daemon may claim more than it got (the tests of a lying daemon). */
    if (n >= p->nrecords)
        return 0;
    for (uint64_t i = 0; i < n; i++)
        pos += WIRE_RECORD_PREFIX + wire_get_u32(p->got + pos);
    p->got_len = pos;
    p->nrecords = n;
    return 0;
}

int peer_send_welcome(struct peer *p)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE_V2];
    size_t n = wire_encode_welcome(buf, &p->welcome);

    if (p->welcome.version == WIRE_PROTOCOL_V2) {
        int line = got_truncate(p, p->welcome.next_position);

        if (line)
            return line;
        p->stream_next = p->welcome.next_position;
    }
    p->welcome_sent = true;
    PCHECK(peer_write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
    return 0;
}

int peer_handshake(struct peer *p)
{
    int line = peer_read_hello(p);

    return line ? line : peer_send_welcome(p);
}

int peer_send_ack(struct peer *p, uint64_t acked)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_ACK_SIZE];
    size_t n = wire_encode_ack(buf, acked);

    PCHECK(peer_write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
    return 0;
}

int peer_send_error(struct peer *p, uint32_t code, const char *msg)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX];
    size_t n = wire_encode_error(buf, code, msg);

    PCHECK(peer_write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
    return 0;
}

static int got_reserve(struct peer *p, size_t more)
{
    if (p->got_cap - p->got_len >= more)
        return 0;
    size_t cap = p->got_cap ? p->got_cap : 4096;
    while (cap - p->got_len < more)
        cap *= 2;
    unsigned char *g = realloc(p->got, cap);
    if (!g)
        return -ENOMEM;
    p->got = g;
    p->got_cap = cap;
    return 0;
}

/* Reads one APPEND frame, checks it the way the daemon will, and keeps its
 * records. */
int peer_read_append(struct peer *p)
{
    struct wire_header h;
    struct wire_append_iter it;
    unsigned char *payload;
    const unsigned char *rec;
    const char *why = NULL;
    uint32_t count = 0, index = 0, len;
    int r;

    const unsigned char *records;
    size_t records_len;

    PCHECK(peer_read_frame(p, &h, &payload) == 0);
    if (h.type != WIRE_APPEND) {
        free(payload);
        return __LINE__;
    }
    records = payload;
    records_len = h.length;
    if (p->welcome.version == WIRE_PROTOCOL_V2) {
        /* Strict: the library starts each frame at the stream's next
         * position, never below it (a duplicate) and never above (a gap). */
        if (h.length < WIRE_APPEND_POSITION || wire_get_u64(payload) != p->stream_next) {
            free(payload);
            return __LINE__;
        }
        records += WIRE_APPEND_POSITION;
        records_len -= WIRE_APPEND_POSITION;
    }
    r = wire_append_validate(records, records_len, p->welcome.max_record_bytes, &count,
                             &index, &why);
    if (r < 0) {
        free(payload);
        return __LINE__;
    }
    p->stream_next += count;
    wire_append_iter_init(&it, records, records_len);
    while (wire_append_iter_next(&it, &rec, &len)) {
        if (got_reserve(p, WIRE_RECORD_PREFIX + len) < 0) {
            free(payload);
            return __LINE__;
        }
        wire_put_u32(p->got + p->got_len, len);
        memcpy(p->got + p->got_len + WIRE_RECORD_PREFIX, rec, len);
        p->got_len += WIRE_RECORD_PREFIX + len;
        p->nrecords++;
    }
    free(payload);
    p->nframes++;
    return 0;
}

int peer_read_records(struct peer *p, uint64_t n)
{
    while (p->nrecords < n) {
        int line = peer_read_append(p);

        if (line)
            return line;
    }
    PCHECK(p->nrecords == n);
    return 0;
}

/* The client closes without sending anything more. */
int peer_expect_eof(struct peer *p)
{
    struct wire_header h;
    unsigned char *payload = NULL;
    int r = peer_read_frame(p, &h, &payload);

    free(payload);
    PCHECK(r == -ENODATA);
    return 0;
}

/* Waits until the main thread's append counter stops moving short of the
 * total: the client is blocked on a full socket. */
int peer_wait_for_stall(struct peer *p)
{
    uint64_t deadline = now_ms() + PEER_TIMEOUT_MS;
    uint64_t last = UINT64_MAX;
    int quiet_ms = 0;

    while (quiet_ms < 300) {
        uint64_t v = atomic_load(&p->progress);
        int w;

        PCHECK(v < p->total);             /* it never blocked */
        PCHECK(now_ms() < deadline);
        /* The go pipe stays quiet; it is only a clock that the main thread
         * can interrupt by giving up. */
        w = peer_wait_pipe(p->go[0], 50);
        PCHECK(w == -ETIMEDOUT);
        if (v == last)
            quiet_ms += 50;
        else
            quiet_ms = 0;
        last = v;
    }
    p->stalled_at = last;
    return 0;
}

/* Takes the next connection (the client reconnecting), giving up the one
 * before. */
int peer_accept(struct peer *p, int timeout_ms)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->welcome_sent = false;
    PCHECK(wait_fd(p->listen_fd, POLLIN, timeout_ms) == 0);
    p->fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    PCHECK(p->fd >= 0);
    return 0;
}

/* The daemon is gone: no connection, no listening socket, no socket file
 * (the client's connect() gets ENOENT). */
int peer_go_away(struct peer *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    p->welcome_sent = false;
    PCHECK(close(p->listen_fd) == 0);
    p->listen_fd = -1;
    PCHECK(unlink(p->path) == 0);
    return 0;
}

static int listen_at(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -errno;
    strcpy(sa.sun_path, path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
        int r = -errno;

        close(fd);
        return r;
    }
    return fd;
}

int peer_come_back(struct peer *p)
{
    PCHECK(p->listen_fd < 0);
    p->listen_fd = listen_at(p->path);
    PCHECK(p->listen_fd >= 0);
    return 0;
}

static void *peer_main(void *arg)
{
    struct peer *p = arg;

    if (wait_fd(p->listen_fd, POLLIN, PEER_TIMEOUT_MS) < 0) {
        p->failed_line = __LINE__;
    } else {
        p->fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        p->failed_line = p->fd < 0 ? __LINE__ : p->script(p);
    }
    /* A line returned without PCHECK is one of this file's. */
    if (p->failed_line)
        p->failed_file = peer_check_file ? peer_check_file : __FILE__;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    /* Wakes a main thread waiting for a signal that will not come. */
    close(p->done[1]);
    p->done[1] = -1;
    return NULL;
}

static void peer_init(struct peer *p)
{
    memset(p, 0, sizeof(*p));
    p->listen_fd = p->fd = -1;
    p->go[0] = p->go[1] = p->done[0] = p->done[1] = -1;
}

/* total is for scripts that watch the main thread block: how many records
 * it means to append. It is set before the thread starts so that the thread
 * never reads it half-written. */
void peer_start_policy(struct peer *p, peer_script script, uint32_t max_record,
                       uint32_t max_frame, uint64_t total, uint8_t fsync_policy)
{
    free(p->got);
    peer_init(p);
    p->script = script;
    p->total = total;
    p->welcome = (struct wire_welcome){ .version = WIRE_PROTOCOL_V2,
                                        .fsync_policy = fsync_policy,
                                        .max_record_bytes = max_record,
                                        .max_frame_bytes = max_frame };
    strcpy(p->dir, "/tmp/logshard-test-XXXXXX");
    assert_non_null(mkdtemp(p->dir));
    snprintf(p->path, sizeof(p->path), "%s/sock", p->dir);
    p->listen_fd = listen_at(p->path);
    assert_true(p->listen_fd >= 0);
    assert_int_equal(pipe2(p->go, O_CLOEXEC), 0);
    assert_int_equal(pipe2(p->done, O_CLOEXEC), 0);
    assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
    p->running = true;
}

void peer_start_total(struct peer *p, peer_script script, uint32_t max_record,
                      uint32_t max_frame, uint64_t total)
{
    peer_start_policy(p, script, max_record, max_frame, total, LOGSHARD_FSYNC_BATCH);
}

void peer_start(struct peer *p, peer_script script, uint32_t max_record, uint32_t max_frame)
{
    peer_start_total(p, script, max_record, max_frame, 0);
}

/* Ends the peer and removes its files. Returns -1 when the thread would not
 * end: it still uses p, so p must then be leaked, not freed. */
static int peer_stop(struct peer *p)
{
    if (p->running) {
        struct timespec ts;

        /* A script waiting for "go" gives up now instead of at its deadline. */
        if (p->go[1] >= 0)
            close(p->go[1]);
        p->go[1] = -1;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += JOIN_TIMEOUT_S;
        if (pthread_timedjoin_np(p->thread, NULL, &ts) != 0)
            return -1;
        p->running = false;
    }
    for (int *fd = &p->go[0]; fd <= &p->done[1]; fd++) {
        if (*fd >= 0)
            close(*fd);
        *fd = -1;
    }
    /* The script may have gone away and not come back. */
    if (p->listen_fd >= 0)
        close(p->listen_fd);
    if (p->dir[0]) {
        unlink(p->path);
        rmdir(p->dir);
        p->dir[0] = '\0';
    }
    p->listen_fd = -1;
    return 0;
}

void peer_join(struct peer *p)
{
    assert_int_equal(peer_stop(p), 0);
    if (p->failed_line)
        fail_msg("peer script failed at %s:%d", p->failed_file, p->failed_line);
}

void wait_for_peer(struct peer *p)
{
    int r = peer_wait_pipe(p->done[0], PEER_TIMEOUT_MS + 5000);

    if (r < 0) {
        peer_join(p); /* reports where the script failed, if it did */
        fail_msg("the peer did not signal: %s", strerror(-r));
    }
}

int setup_peer(void **state)
{
    struct peer *p = calloc(1, sizeof(*p));

    if (!p)
        return -1;
    peer_init(p);
    *state = p;
    return 0;
}

int teardown_peer(void **state)
{
    struct peer *p = *state;

    program_invocation_short_name = saved_program_name;
    unsetenv("LOGSHARD_SOCKET");
    if (peer_stop(p) < 0)
        return -1;
    free(p->got);
    free(p);
    return 0;
}

/* Record i of a test: its length depends on i (1 to max_len), its bytes on i
 * and their position, so a lost, doubled, reordered or torn record shows. */
size_t make_record(uint64_t i, size_t max_len, unsigned char *buf)
{
    size_t len = 1 + (size_t)((i * 7919u) % max_len);

    for (size_t k = 0; k < len; k++)
        buf[k] = (unsigned char)(i * 31u + k * 7u);
    return len;
}

void fill_record(uint64_t i, size_t len, unsigned char *buf)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (unsigned char)(i * 31u + k * 7u);
}

/* Compares what the peer received with records first..first+n-1 of
 * make_record() (or of fill_record() at fixed_len, when that is not 0). */
void check_records(const struct peer *p, uint64_t n, size_t max_len, size_t fixed_len)
{
    unsigned char *want = malloc(max_len > fixed_len ? max_len : fixed_len);
    size_t pos = 0;

    assert_non_null(want);
    assert_int_equal(p->nrecords, n);
    for (uint64_t i = 0; i < n; i++) {
        size_t len;
        uint32_t got_len;

        if (fixed_len) {
            len = fixed_len;
            fill_record(i, len, want);
        } else {
            len = make_record(i, max_len, want);
        }
        assert_true(p->got_len - pos >= WIRE_RECORD_PREFIX);
        got_len = wire_get_u32(p->got + pos);
        if (got_len != len || memcmp(p->got + pos + WIRE_RECORD_PREFIX, want, len) != 0)
            fail_msg("record %llu differs (length %u, want %zu)", (unsigned long long)i,
                     got_len, len);
        pos += WIRE_RECORD_PREFIX + len;
    }
    assert_int_equal(pos, p->got_len);
    free(want);
}

logshard *connect_ok(const struct peer *p, const char *producer, size_t buffer_bytes)
{
    logshard_opts opts = { .socket_path = p->path, .producer = producer,
                           .buffer_bytes = buffer_bytes };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_non_null(ls);
    return ls;
}

logshard *connect_flags(const struct peer *p, const char *producer, size_t buffer_bytes,
                        unsigned flags, int reconnect_timeout_ms)
{
    logshard_opts opts = { .socket_path = p->path, .producer = producer,
                           .buffer_bytes = buffer_bytes, .flags = flags,
                           .reconnect_timeout_ms = reconnect_timeout_ms };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_non_null(ls);
    return ls;
}

/* ---- scripts that tests in more than one program use ---- */

int script_partial_ack(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, PARTIAL_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 4) == 0);
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_send_ack(p, PARTIAL_RECORDS) == 0);
    return peer_expect_eof(p);
}


/* Reads nothing until told, then every record, acknowledging as it goes. */
int script_stall_until_go(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    while (p->nrecords < p->total) {
        int line = peer_read_append(p);

        if (line)
            return line;
        PCHECK(peer_send_ack(p, p->nrecords) == 0);
    }
    return peer_expect_eof(p);
}
