/* Unit tests for client/logshard.c against a scripted daemon in this file.
 *
 * Each test that needs a daemon binds a Unix socket in a fresh temporary
 * directory; a peer thread accepts one connection and follows a script,
 * speaking the protocol through common/wire.h, while the main thread drives
 * the public API. cmocka's asserts longjmp, so they belong to the main thread
 * only: a script returns the line where it failed and the main thread asserts
 * on that after joining. Every wait on either side has a deadline, and a
 * script that fails closes its end of the connection, which ends any call the
 * client is blocked in; a broken client fails a test, it does not hang it.
 *
 * Main and peer also talk over two pipes ("go" and "done") when a test needs
 * them in step. Closing a pipe's write end wakes the other side at once, so
 * a side that gives up never leaves the other waiting for its deadline. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "logshard.h"
#include "wire.h"

/* How long either side waits for the other before calling it a failure. */
#define PEER_TIMEOUT_MS 10000
/* How long the main thread waits for the peer thread to end. */
#define JOIN_TIMEOUT_S 30
/* The peer accepts at most this much before WELCOME; a HELLO is far less. */
#define HANDSHAKE_MAX_FRAME 4096u

#define DEFAULT_MAX_RECORD (1024u * 1024u)
#define DEFAULT_MAX_FRAME (8u * 1024u * 1024u)

#define PCHECK(cond)                                                                     \
    do {                                                                                 \
        if (!(cond))                                                                     \
            return __LINE__;                                                             \
    } while (0)

struct peer;
typedef int (*peer_script)(struct peer *p);

struct peer {
    char dir[64];
    char path[128];
    int listen_fd;
    int fd;       /* the accepted connection; the peer thread owns it */
    int go[2];    /* main -> peer */
    int done[2];  /* peer -> main */
    pthread_t thread;
    bool running;
    peer_script script;
    int failed_line;

    struct wire_welcome welcome; /* what the peer answers a HELLO with */

    /* What the peer saw. */
    char hello_name[WIRE_PRODUCER_NAME_MAX + 1];
    uint16_t hello_version;
    uint16_t hello_flags;
    unsigned char *got; /* records as on the wire: u32 len, bytes */
    size_t got_len;
    size_t got_cap;
    uint64_t nrecords;
    uint64_t nframes;
    atomic_bool welcome_sent;

    /* For the scripts that watch the main thread block. */
    uint64_t total;
    atomic_uint_fast64_t progress;
    uint64_t stalled_at;
};

static char *saved_program_name;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static int remaining_ms(uint64_t deadline)
{
    uint64_t now = now_ms();

    return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits for events on fd. Returns 0 when ready, -ETIMEDOUT, or -errno. */
static int wait_fd(int fd, short events, int timeout_ms)
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

static int write_all(int fd, const void *buf, size_t n, int timeout_ms)
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
static int signal_pipe(int fd)
{
    return write(fd, "x", 1) == 1 ? 0 : -errno;
}

/* Returns 0 for a signal, -EPIPE when the other side closed its end (it gave
 * up), -ETIMEDOUT. */
static int wait_pipe(int fd, int timeout_ms)
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

static int peer_read_hello(struct peer *p)
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
    }
    free(payload);
    PCHECK(r == 0);
    return 0;
}

static int peer_send_welcome(struct peer *p)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_WELCOME_SIZE];
    size_t n = wire_encode_welcome(buf, &p->welcome);

    p->welcome_sent = true;
    PCHECK(write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
    return 0;
}

static int peer_handshake(struct peer *p)
{
    int line = peer_read_hello(p);

    return line ? line : peer_send_welcome(p);
}

static int peer_send_ack(struct peer *p, uint64_t acked)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_ACK_SIZE];
    size_t n = wire_encode_ack(buf, acked);

    PCHECK(write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
    return 0;
}

static int peer_send_error(struct peer *p, uint32_t code, const char *msg)
{
    unsigned char buf[WIRE_HEADER_SIZE + WIRE_ERROR_FIXED + WIRE_ERROR_MESSAGE_MAX];
    size_t n = wire_encode_error(buf, code, msg);

    PCHECK(write_all(p->fd, buf, n, PEER_TIMEOUT_MS) == 0);
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
static int peer_read_append(struct peer *p)
{
    struct wire_header h;
    struct wire_append_iter it;
    unsigned char *payload;
    const unsigned char *rec;
    const char *why = NULL;
    uint32_t count = 0, index = 0, len;
    int r;

    PCHECK(peer_read_frame(p, &h, &payload) == 0);
    if (h.type != WIRE_APPEND) {
        free(payload);
        return __LINE__;
    }
    r = wire_append_validate(payload, h.length, p->welcome.max_record_bytes, &count, &index,
                             &why);
    if (r < 0) {
        free(payload);
        return __LINE__;
    }
    wire_append_iter_init(&it, payload, h.length);
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

static int peer_read_records(struct peer *p, uint64_t n)
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
static int peer_expect_eof(struct peer *p)
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
static int peer_wait_for_stall(struct peer *p)
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
        w = wait_pipe(p->go[0], 50);
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

static void *peer_main(void *arg)
{
    struct peer *p = arg;

    if (wait_fd(p->listen_fd, POLLIN, PEER_TIMEOUT_MS) < 0) {
        p->failed_line = __LINE__;
    } else {
        p->fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        p->failed_line = p->fd < 0 ? __LINE__ : p->script(p);
    }
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
static void peer_start_total(struct peer *p, peer_script script, uint32_t max_record,
                             uint32_t max_frame, uint64_t total)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };

    free(p->got);
    peer_init(p);
    p->script = script;
    p->total = total;
    p->welcome = (struct wire_welcome){ .version = WIRE_PROTOCOL_VERSION,
                                        .fsync_policy = 2,
                                        .max_record_bytes = max_record,
                                        .max_frame_bytes = max_frame };
    strcpy(p->dir, "/tmp/logshard-test-XXXXXX");
    assert_non_null(mkdtemp(p->dir));
    snprintf(p->path, sizeof(p->path), "%s/sock", p->dir);
    strcpy(sa.sun_path, p->path);
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(p->listen_fd >= 0);
    assert_int_equal(bind(p->listen_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(p->listen_fd, 4), 0);
    assert_int_equal(pipe2(p->go, O_CLOEXEC), 0);
    assert_int_equal(pipe2(p->done, O_CLOEXEC), 0);
    assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
    p->running = true;
}

static void peer_start(struct peer *p, peer_script script, uint32_t max_record,
                       uint32_t max_frame)
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
    if (p->listen_fd >= 0) {
        close(p->listen_fd);
        unlink(p->path);
        rmdir(p->dir);
    }
    p->listen_fd = -1;
    return 0;
}

static void peer_join(struct peer *p)
{
    assert_int_equal(peer_stop(p), 0);
    if (p->failed_line)
        fail_msg("peer script failed at test-client.c:%d", p->failed_line);
}

static void wait_for_peer(struct peer *p)
{
    int r = wait_pipe(p->done[0], PEER_TIMEOUT_MS + 5000);

    if (r < 0) {
        peer_join(p); /* reports where the script failed, if it did */
        fail_msg("the peer did not signal: %s", strerror(-r));
    }
}

static int setup_peer(void **state)
{
    struct peer *p = calloc(1, sizeof(*p));

    if (!p)
        return -1;
    peer_init(p);
    *state = p;
    return 0;
}

static int teardown_peer(void **state)
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
static size_t make_record(uint64_t i, size_t max_len, unsigned char *buf)
{
    size_t len = 1 + (size_t)((i * 7919u) % max_len);

    for (size_t k = 0; k < len; k++)
        buf[k] = (unsigned char)(i * 31u + k * 7u);
    return len;
}

static void fill_record(uint64_t i, size_t len, unsigned char *buf)
{
    for (size_t k = 0; k < len; k++)
        buf[k] = (unsigned char)(i * 31u + k * 7u);
}

/* Compares what the peer received with records first..first+n-1 of
 * make_record() (or of fill_record() at fixed_len, when that is not 0). */
static void check_records(const struct peer *p, uint64_t n, size_t max_len, size_t fixed_len)
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

static logshard *connect_ok(const struct peer *p, const char *producer, size_t buffer_bytes)
{
    logshard_opts opts = { .socket_path = p->path, .producer = producer,
                           .buffer_bytes = buffer_bytes };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_non_null(ls);
    return ls;
}

/* ---- connect ---- */

static int script_hello_then_eof(struct peer *p)
{
    int line = peer_handshake(p);

    return line ? line : peer_expect_eof(p);
}

static void test_connect_ok(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "unit-test_1.x", 0);
    /* connect returned only after the daemon accepted the producer. */
    assert_true(atomic_load(&p->welcome_sent));
    assert_int_equal(logshard_unacked(ls), 0);
    assert_null(logshard_error_message(ls));
    /* The peer's WELCOME announced policy 2. */
    assert_int_equal(logshard_fsync_policy(ls), LOGSHARD_FSYNC_BATCH);
    /* Nothing appended: nothing to wait for, and no empty frame either
     * (the peer fails on any frame before end of file). */
    assert_int_equal(logshard_flush(ls, 1000), 0);
    logshard_close(ls);
    peer_join(p);
    assert_string_equal(p->hello_name, "unit-test_1.x");
    assert_int_equal(p->hello_version, WIRE_PROTOCOL_VERSION);
    assert_int_equal(p->hello_flags, 0);
    assert_int_equal(p->nframes, 0);
}

static void test_connect_bad_names(void **state)
{
    /* No daemon at this path: a name that passes reaches connect() and gets
     * -ENOENT, so -EINVAL proves the name was refused before any socket. */
    static const char nowhere[] = "/nonexistent-logshard-test/sock";
    char long_name[WIRE_PRODUCER_NAME_MAX + 2];
    const char *bad[] = { "bad/name", ".hidden", "", "tab\tname", "caf\xc3\xa9", "a b",
                          long_name };
    logshard *const sentinel = (logshard *)&bad;
    logshard *ls;
    logshard_opts opts = { .socket_path = nowhere };

    (void)state;
    memset(long_name, 'a', WIRE_PRODUCER_NAME_MAX + 1);
    long_name[WIRE_PRODUCER_NAME_MAX + 1] = '\0';
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        opts.producer = bad[i];
        ls = sentinel;
        assert_int_equal(logshard_connect(&ls, &opts), -EINVAL);
        assert_ptr_equal(ls, sentinel);
    }
    /* 64 bytes is still allowed. */
    long_name[WIRE_PRODUCER_NAME_MAX] = '\0';
    opts.producer = long_name;
    ls = sentinel;
    assert_int_equal(logshard_connect(&ls, &opts), -ENOENT);
    assert_ptr_equal(ls, sentinel);

    opts.producer = "good";
    opts.flags = 0x80; /* a flag this library does not know */
    assert_int_equal(logshard_connect(&ls, &opts), -EINVAL);
    assert_ptr_equal(ls, sentinel);
    opts.flags = 0;
    assert_int_equal(logshard_connect(NULL, &opts), -EINVAL);
}

static void test_connect_socket_errors(void **state)
{
    char path[300];
    char dir[] = "/tmp/logshard-test-XXXXXX";
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    logshard_opts opts = { .producer = "p" };
    logshard *const sentinel = (logshard *)&opts;
    logshard *ls = sentinel;
    int fd;

    (void)state;
    memset(path, 'x', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    opts.socket_path = path;
    assert_int_equal(logshard_connect(&ls, &opts), -ENAMETOOLONG);
    /* Exactly one byte too long for sun_path (the terminator needs it). */
    path[sizeof(sa.sun_path)] = '\0';
    assert_int_equal(logshard_connect(&ls, &opts), -ENAMETOOLONG);

    /* A socket file nobody listens on. */
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/sock", dir);
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(logshard_connect(&ls, &opts), -ECONNREFUSED);
    close(fd);
    unlink(path);
    assert_int_equal(logshard_connect(&ls, &opts), -ENOENT);
    rmdir(dir);
    assert_ptr_equal(ls, sentinel);
}

static int script_refuse(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    return peer_send_error(p, EACCES, "producer \"denied\" is not allowed here");
}

static int script_refuse_code0(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    return peer_send_error(p, 0, "zero is not an error");
}

static int script_welcome_v2(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    p->welcome.version = WIRE_PROTOCOL_VERSION + 1;
    return peer_send_welcome(p);
}

static int script_welcome_no_room(struct peer *p)
{
    PCHECK(peer_read_hello(p) == 0);
    p->welcome.max_frame_bytes = 0;
    return peer_send_welcome(p);
}

static int script_garbage(struct peer *p)
{
    static const char http[] = "HTTP/1.1 400 Bad Request\r\n\r\n";

    PCHECK(peer_read_hello(p) == 0);
    PCHECK(write_all(p->fd, http, sizeof(http) - 1, PEER_TIMEOUT_MS) == 0);
    return 0;
}

static int script_hang_up(struct peer *p)
{
    return peer_read_hello(p);
}

static void test_connect_refused(void **state)
{
    static const struct {
        peer_script script;
        int want;
    } cases[] = {
        { script_refuse, -EACCES },
        { script_refuse_code0, -EPROTO }, /* 0 must never read as success */
        { script_welcome_v2, -EPROTO },
        { script_welcome_no_room, -EPROTO },
        { script_garbage, -EPROTO },
        { script_hang_up, -ECONNRESET },
    };
    struct peer *p = *state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        logshard_opts opts = { .producer = "denied" };
        logshard *const sentinel = (logshard *)&opts;
        logshard *ls = sentinel;

        peer_start(p, cases[i].script, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
        opts.socket_path = p->path;
        assert_int_equal(logshard_connect(&ls, &opts), cases[i].want);
        assert_ptr_equal(ls, sentinel);
        peer_join(p);
        assert_string_equal(p->hello_name, "denied");
    }
}

/* ---- append and flush ---- */

#define BATCH_RECORDS 100
#define BATCH_MAX_LEN 200

static int script_batch(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, BATCH_RECORDS) == 0);
    PCHECK(peer_send_ack(p, BATCH_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_append_batches(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    uint64_t t0, t1;
    logshard *ls;

    peer_start(p, script_batch, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "batch", 0);
    t0 = now_ms();
    for (uint64_t i = 0; i < BATCH_RECORDS; i++) {
        size_t len = make_record(i, BATCH_MAX_LEN, rec);

        assert_int_equal(logshard_append(ls, rec, len), 0);
    }
    t1 = now_ms();
    assert_int_equal(logshard_unacked(ls), BATCH_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, BATCH_RECORDS, BATCH_MAX_LEN, 0);
    /* One frame, unless this machine was so slow that the linger time
     * passed during the appends and rightly sent part of them early. */
    if (t1 - t0 < LOGSHARD_LINGER_MS)
        assert_int_equal(p->nframes, 1);
    else
        assert_true(p->nframes < BATCH_RECORDS / 2);
}

static int script_linger(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    /* One record appended: it must wait in the buffer past the linger time. */
    PCHECK(wait_fd(p->fd, POLLIN, 3 * LOGSHARD_LINGER_MS) == -ETIMEDOUT);
    PCHECK(signal_pipe(p->done[1]) == 0);
    /* The second append sends both, without a flush. */
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(p->nframes == 1);
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

static void test_append_linger(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_linger, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "linger", 0);
    assert_int_equal(logshard_append(ls, rec, make_record(0, BATCH_MAX_LEN, rec)), 0);
    wait_for_peer(p);
    assert_int_equal(logshard_append(ls, rec, make_record(1, BATCH_MAX_LEN, rec)), 0);
    wait_for_peer(p);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 2, BATCH_MAX_LEN, 0);
}

#define SMALL_MAX_RECORD 1000u
#define SMALL_MAX_FRAME 4096u
#define SMALL_RECORDS 20

static int script_small_limits(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    /* Every frame is checked against max_frame_bytes and every record
     * against max_record_bytes as it is read. */
    PCHECK(peer_read_records(p, SMALL_RECORDS) == 0);
    PCHECK(peer_send_ack(p, SMALL_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_append_limits(void **state)
{
    struct peer *p = *state;
    unsigned char rec[SMALL_MAX_RECORD + 1];
    logshard *ls;

    peer_start(p, script_small_limits, SMALL_MAX_RECORD, SMALL_MAX_FRAME);
    ls = connect_ok(p, "limits", 0);
    memset(rec, 0xEE, sizeof(rec));
    assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, rec, 0), -EINVAL);
    assert_int_equal(logshard_append(ls, NULL, 5), -EINVAL);
    assert_int_equal(logshard_unacked(ls), 0);
    for (uint64_t i = 0; i < SMALL_RECORDS; i++) {
        fill_record(i, SMALL_MAX_RECORD, rec);
        assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD), 0);
    }
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    /* The refused records never left: exactly the good ones arrived, four
     * to a 4 KiB frame. */
    check_records(p, SMALL_RECORDS, SMALL_MAX_RECORD, SMALL_MAX_RECORD);
    assert_int_equal(p->nframes, SMALL_RECORDS / 4);

    /* A buffer asked to be tiny is raised to hold one largest record. */
    peer_start(p, script_small_limits, SMALL_MAX_RECORD, SMALL_MAX_FRAME);
    ls = connect_ok(p, "tiny-buffer", 1);
    for (uint64_t i = 0; i < SMALL_RECORDS; i++) {
        fill_record(i, SMALL_MAX_RECORD, rec);
        assert_int_equal(logshard_append(ls, rec, SMALL_MAX_RECORD), 0);
    }
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, SMALL_RECORDS, SMALL_MAX_RECORD, SMALL_MAX_RECORD);
    assert_int_equal(p->nframes, SMALL_RECORDS);
}

/* A daemon whose frames are smaller than its records: what fits one frame
 * is the limit. */
#define NARROW_MAX_RECORD 8192u
#define NARROW_MAX_FRAME 2048u
#define NARROW_FITS (NARROW_MAX_FRAME - WIRE_APPEND_FIXED - WIRE_RECORD_PREFIX)

static int script_narrow(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 1) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_expect_eof(p);
}

static void test_append_frame_limit(void **state)
{
    struct peer *p = *state;
    unsigned char rec[NARROW_FITS + 1];
    logshard *ls;

    peer_start(p, script_narrow, NARROW_MAX_RECORD, NARROW_MAX_FRAME);
    ls = connect_ok(p, "narrow", 0);
    fill_record(0, sizeof(rec), rec);
    assert_int_equal(logshard_append(ls, rec, NARROW_FITS + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, rec, NARROW_FITS), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, 1, NARROW_FITS, NARROW_FITS);
}

#define PARTIAL_RECORDS 10

static int script_partial_ack(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, PARTIAL_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 4) == 0);
    PCHECK(signal_pipe(p->done[1]) == 0);
    PCHECK(wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    PCHECK(peer_send_ack(p, PARTIAL_RECORDS) == 0);
    return peer_expect_eof(p);
}

static void test_flush_waits_for_all_acks(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_partial_ack, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "partial", 0);
    for (uint64_t i = 0; i < PARTIAL_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    /* Sends the records; the peer acknowledges only four of them. */
    assert_int_equal(logshard_flush(ls, 200), -ETIMEDOUT);
    wait_for_peer(p);
    /* The partial ACK is in by now; still not enough. */
    assert_int_equal(logshard_flush(ls, 0), -ETIMEDOUT);
    assert_int_equal(logshard_unacked(ls), PARTIAL_RECORDS - 4);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PARTIAL_RECORDS, BATCH_MAX_LEN, 0);
}

/* ---- backpressure ---- */

#define PRESSURE_MAX_RECORD 1024u
#define PRESSURE_MAX_LEN 1000
#define PRESSURE_RECORDS 20000

/* Stops reading until the client is stuck on a full socket, then reads every
 * frame and answers each with an ACK, waiting for its ACK to be taken before
 * reading on. A client that does not read ACKs while it is sending fills
 * this side's socket with them, and the two block on each other until this
 * side's deadline ends the test. */
static int script_backpressure(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_wait_for_stall(p) == 0);
    while (p->nrecords < p->total) {
        int line = peer_read_append(p);

        if (line)
            return line;
        PCHECK(peer_send_ack(p, p->nrecords) == 0);
    }
    PCHECK(p->nrecords == p->total);
    return peer_expect_eof(p);
}

static void test_append_backpressure(void **state)
{
    struct peer *p = *state;
    unsigned char rec[PRESSURE_MAX_LEN];
    logshard *ls;

    peer_start_total(p, script_backpressure, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    /* One record per frame, so there is an ACK for nearly every record. */
    ls = connect_ok(p, "pressure", 1);
    for (uint64_t i = 0; i < PRESSURE_RECORDS; i++) {
        size_t len = make_record(i, PRESSURE_MAX_LEN, rec);

        assert_int_equal(logshard_append(ls, rec, len), 0);
        atomic_store(&p->progress, i + 1);
    }
    assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    logshard_close(ls);
    peer_join(p);
    assert_true(p->stalled_at < PRESSURE_RECORDS);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
    /* Small records may share a frame; most frames still hold one or two. */
    assert_true(p->nframes > PRESSURE_RECORDS / 4);
}

/* Reads nothing until told, then every record, acknowledging as it goes. */
static int script_stall_until_go(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(wait_pipe(p->go[0], PEER_TIMEOUT_MS) == 0);
    while (p->nrecords < p->total) {
        int line = peer_read_append(p);

        if (line)
            return line;
        PCHECK(peer_send_ack(p, p->nrecords) == 0);
    }
    return peer_expect_eof(p);
}

/* With LOGSHARD_NONBLOCK, an append that would wait returns -EAGAIN and does
 * not take the record; appending it again once the daemon reads succeeds,
 * and every record arrives once, in order. */
static void test_append_nonblock(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "nonblock", .buffer_bytes = 1, .flags = LOGSHARD_NONBLOCK };
    unsigned char rec[PRESSURE_MAX_LEN];
    logshard *ls = NULL;
    uint64_t taken = 0;
    int r = 0;

    peer_start_total(p, script_stall_until_go, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    /* The peer reads nothing: sooner or later the socket is full. */
    while (taken < PRESSURE_RECORDS) {
        r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
        if (r == -EAGAIN)
            break;
        assert_int_equal(r, 0);
        taken++;
    }
    assert_int_equal(r, -EAGAIN);
    assert_true(taken < PRESSURE_RECORDS);
    assert_int_equal(logshard_unacked(ls), taken); /* the refused one is not counted */
    assert_int_equal(signal_pipe(p->go[1]), 0);
    for (uint64_t deadline = now_ms() + PEER_TIMEOUT_MS; taken < PRESSURE_RECORDS;) {
        r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
        if (r == -EAGAIN) {
            assert_true(now_ms() < deadline);
            /* Let ACKs in; -ETIMEDOUT just means not all are in yet. */
            r = logshard_flush(ls, 10);
            assert_true(r == 0 || r == -ETIMEDOUT);
            continue;
        }
        assert_int_equal(r, 0);
        taken++;
    }
    assert_int_equal(logshard_flush(ls, 2 * PEER_TIMEOUT_MS), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
}

/* ---- the daemon going away ---- */

#define CLOSE_RECORDS 5

static int script_close_unacked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, CLOSE_RECORDS) == 0);
    return peer_send_ack(p, 2);
}

static void test_peer_closes_with_unacked(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_close_unacked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "closing", 0);
    for (uint64_t i = 0; i < CLOSE_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_unacked(ls), CLOSE_RECORDS - 2);
    /* Broken for good. */
    assert_int_equal(logshard_append(ls, rec, 1), -EPIPE);
    assert_int_equal(logshard_flush(ls, 0), -EPIPE);
    assert_int_equal(logshard_unacked(ls), CLOSE_RECORDS - 2);
    assert_null(logshard_error_message(ls));
    logshard_close(ls);
    peer_join(p);
}

static int script_close_while_blocked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    return peer_wait_for_stall(p);
}

static void test_peer_closes_while_client_blocked(void **state)
{
    struct peer *p = *state;
    unsigned char rec[PRESSURE_MAX_LEN];
    uint64_t i;
    logshard *ls;
    int r = 0;

    peer_start_total(p, script_close_while_blocked, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     1000000);
    ls = connect_ok(p, "blocked", 0);
    /* The peer hangs up while append waits for room: the append must fail
     * with -EPIPE (and no SIGPIPE, which would end this program). */
    for (i = 0; i < p->total; i++) {
        r = logshard_append(ls, rec, make_record(i, PRESSURE_MAX_LEN, rec));
        if (r < 0)
            break;
        atomic_store(&p->progress, i + 1);
    }
    assert_int_equal(r, -EPIPE);
    assert_true(i < p->total);
    /* Every record that append took is still counted, none acknowledged. */
    assert_int_equal(logshard_unacked(ls), i);
    assert_int_equal(logshard_flush(ls, 0), -EPIPE);
    logshard_close(ls);
    peer_join(p);
}

#define ERROR_RECORDS 3
static const char error_text[] = "no space left in /var/lib/logshard for producer \"err\"";

static int script_error_midstream(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, ERROR_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_send_error(p, ENOSPC, error_text);
}

static void test_error_midstream(void **state)
{
    struct peer *p = *state;
    unsigned char rec[BATCH_MAX_LEN];
    logshard *ls;

    peer_start(p, script_error_midstream, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "err", 0);
    for (uint64_t i = 0; i < ERROR_RECORDS; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ENOSPC);
    assert_non_null(logshard_error_message(ls));
    assert_string_equal(logshard_error_message(ls), error_text);
    assert_int_equal(logshard_unacked(ls), ERROR_RECORDS - 1);
    /* Every later call returns the daemon's error. */
    assert_int_equal(logshard_append(ls, rec, 1), -ENOSPC);
    assert_int_equal(logshard_flush(ls, 0), -ENOSPC);
    assert_int_equal(logshard_flush(ls, -1), -ENOSPC);
    logshard_close(ls);
    peer_join(p);
}

static int script_error_code0_midstream(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 1) == 0);
    return peer_send_error(p, 0, "zero is not an error");
}

static int script_ack_too_far(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 5) == 0);
    return peer_expect_eof(p);
}

static void test_ack_beyond_sent(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    peer_start(p, script_ack_too_far, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "liar", 0);
    assert_int_equal(logshard_append(ls, "a", 1), 0);
    assert_int_equal(logshard_append(ls, "b", 1), 0);
    /* Acknowledging records never sent is not the protocol. */
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPROTO);
    assert_int_equal(logshard_append(ls, "c", 1), -EPROTO);
    logshard_close(ls);
    peer_join(p);
}

/* ---- defaults ---- */

static void test_default_name_and_env(void **state)
{
    static const struct {
        const char *prog;
        const char *want;
    } cases[] = {
        { "my prog!.v2", "my_prog_.v2" },
        { ".hidden", "_hidden" },
        { "-foo", "_foo" },
        { "a-b", "a-b" },
        { "test-client", "test-client" },
        { "", "logshard" },
        { "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" },
    };
    struct peer *p = *state;
    char prog[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        logshard *ls = NULL;

        peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
        /* No path in the options: the environment says where. */
        assert_int_equal(setenv("LOGSHARD_SOCKET", p->path, 1), 0);
        snprintf(prog, sizeof(prog), "%s", cases[i].prog);
        program_invocation_short_name = prog;
        assert_int_equal(logshard_connect(&ls, NULL), 0);
        program_invocation_short_name = saved_program_name;
        logshard_close(ls);
        peer_join(p);
        assert_string_equal(p->hello_name, cases[i].want);
    }

    /* The options win over the environment. */
    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    assert_int_equal(setenv("LOGSHARD_SOCKET", "/nonexistent-logshard-test/sock", 1), 0);
    logshard_close(connect_ok(p, "explicit", 0));
    peer_join(p);
    assert_string_equal(p->hello_name, "explicit");

    /* And the environment is used when the options have no path. */
    {
        logshard_opts opts = { .producer = "from-env" };
        logshard *ls = NULL;

        assert_int_equal(logshard_connect(&ls, &opts), -ENOENT);
        assert_null(ls);
    }
}

/* ---- small things ---- */

static void test_strerror(void **state)
{
    static const int ours[] = { EINVAL, EMSGSIZE, EPIPE, ECONNRESET, ETIMEDOUT, EPROTO,
                                ENAMETOOLONG, ENOENT, ECONNREFUSED, EACCES, ENOMEM,
                                ENOSPC, EIO, EUSERS, EMFILE };

    (void)state;
    for (int e = -5000; e <= 5000; e++) {
        const char *s = logshard_strerror(e);

        assert_non_null(s);
        assert_true(s[0] != '\0');
    }
    assert_non_null(logshard_strerror(INT_MIN));
    assert_non_null(logshard_strerror(INT_MAX));
    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
        assert_string_not_equal(logshard_strerror(-ours[i]), "Unknown error");
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(logshard_strerror(-ours[i]),
                                    logshard_strerror(-ours[j]));
    }
}

static void test_null_handles(void **state)
{
    (void)state;
    logshard_close(NULL);
    assert_int_equal(logshard_unacked(NULL), 0);
    assert_null(logshard_error_message(NULL));
    assert_int_equal(logshard_fsync_policy(NULL), -EINVAL);
    assert_int_equal(logshard_append(NULL, "x", 1), -EINVAL);
    assert_int_equal(logshard_flush(NULL, 0), -EINVAL);
}

/* ---- growing options (logshard_connect_sized) ---- */

static void test_connect_sized(void **state)
{
    struct peer *p = *state;
    /* A program built against a later header: its logshard_opts has
     * members this library does not know, after the ones it does. */
    struct {
        logshard_opts opts;
        uint64_t later[2];
    } big;
    logshard *const sentinel = (logshard *)&big;
    logshard *ls = sentinel;

    memset(&big, 0, sizeof(big));
    big.opts.producer = "sized";
    big.opts.socket_path = "/nonexistent-logshard-test/sock";
    assert_int_equal(logshard_connect_sized(&ls, &big.opts, LOGSHARD_OPTS_SIZE_1 - 1), -EINVAL);
    assert_int_equal(logshard_connect_sized(&ls, &big.opts, 0), -EINVAL);
    /* A later member set: refused before anything else, the path included. */
    big.later[1] = 1;
    assert_int_equal(logshard_connect_sized(&ls, &big.opts, sizeof(big)), -E2BIG);
    /* Set but outside the size the caller gave: not looked at. */
    assert_int_equal(logshard_connect_sized(&ls, &big.opts, sizeof(big.opts)), -ENOENT);
    big.later[1] = 0;
    assert_ptr_equal(ls, sentinel);

    /* Later members left at zero are their defaults; the padding after the
     * first version's members is never read, whatever it holds. */
    memset((unsigned char *)&big.opts + LOGSHARD_OPTS_SIZE_1, 0xA5,
           sizeof(big.opts) - LOGSHARD_OPTS_SIZE_1);
    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    big.opts.socket_path = p->path;
    assert_int_equal(logshard_connect_sized(&ls, &big.opts, sizeof(big)), 0);
    assert_ptr_not_equal(ls, sentinel);
    logshard_close(ls);
    peer_join(p);
    assert_string_equal(p->hello_name, "sized");

    /* NULL options: all defaults, whatever the size says. */
    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    assert_int_equal(setenv("LOGSHARD_SOCKET", p->path, 1), 0);
    ls = NULL;
    assert_int_equal(logshard_connect_sized(&ls, NULL, 0), 0);
    logshard_close(ls);
    peer_join(p);
}

/* A program built against the first header passes an object of exactly
 * LOGSHARD_OPTS_SIZE_1 bytes (its sizeof may be larger only by padding).
 * It is allocated at that size here, so a library that read past it
 * would fail under the address sanitizer, and filled byte by byte at the
 * members' offsets, as the old layout has them. */
static void test_connect_first_version_opts(void **state)
{
    struct peer *p = *state;
    unsigned char *old = malloc(LOGSHARD_OPTS_SIZE_1);
    const char *producer = "first-version";
    const char *path;
    size_t buffer_bytes = 1;
    unsigned flags = LOGSHARD_NONBLOCK;
    logshard *ls = NULL;

    assert_non_null(old);
    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    path = p->path;
    /* The offsets of the first version, which no later header may move. */
    assert_int_equal(offsetof(logshard_opts, socket_path), 0);
    assert_int_equal(offsetof(logshard_opts, producer), sizeof(const char *));
    assert_int_equal(offsetof(logshard_opts, buffer_bytes), 2 * sizeof(const char *));
    assert_int_equal(offsetof(logshard_opts, flags), 2 * sizeof(const char *) + sizeof(size_t));
    memcpy(old + offsetof(logshard_opts, socket_path), &path, sizeof(path));
    memcpy(old + offsetof(logshard_opts, producer), &producer, sizeof(producer));
    memcpy(old + offsetof(logshard_opts, buffer_bytes), &buffer_bytes, sizeof(buffer_bytes));
    memcpy(old + offsetof(logshard_opts, flags), &flags, sizeof(flags));
    assert_int_equal(logshard_connect(&ls, (const logshard_opts *)(void *)old), 0);
    logshard_close(ls);
    peer_join(p);
    assert_string_equal(p->hello_name, "first-version");

    peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    path = p->path;
    memcpy(old + offsetof(logshard_opts, socket_path), &path, sizeof(path));
    assert_int_equal(logshard_connect_sized(&ls, (const logshard_opts *)(void *)old,
                                            LOGSHARD_OPTS_SIZE_1), 0);
    logshard_close(ls);
    peer_join(p);
    free(old);
}

/* ---- whose error ---- */

static int script_daemon_timeout(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, ERROR_RECORDS) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_send_error(p, ETIMEDOUT, "producer \"slow\": a frame stayed incomplete");
}

/* Appends records 0..n-1 of make_record(), each taken. */
static void append_records(logshard *ls, uint64_t n)
{
    unsigned char rec[BATCH_MAX_LEN];

    for (uint64_t i = 0; i < n; i++)
        assert_int_equal(logshard_append(ls, rec, make_record(i, BATCH_MAX_LEN, rec)), 0);
}

/* The daemon's ETIMEDOUT and flush's own: the same return value, told apart
 * by logshard_error() and logshard_error_origin(). */
static void test_error_origin(void **state)
{
    struct peer *p = *state;
    logshard *ls;

    /* Ours: the handle is fine, and calling again finishes the wait. */
    peer_start(p, script_partial_ack, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "patient", 0);
    append_records(ls, PARTIAL_RECORDS);
    assert_int_equal(logshard_flush(ls, 100), -ETIMEDOUT);
    assert_int_equal(logshard_error(ls), 0);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_NONE);
    wait_for_peer(p);
    assert_int_equal(signal_pipe(p->go[1]), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), 0);
    assert_int_equal(logshard_error(ls), 0);
    logshard_close(ls);
    peer_join(p);

    /* The daemon's: the handle is dead, and says who killed it. */
    peer_start(p, script_daemon_timeout, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "slow", 0);
    append_records(ls, ERROR_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -ETIMEDOUT);
    assert_int_equal(logshard_error(ls), -ETIMEDOUT);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_DAEMON);
    assert_non_null(logshard_error_message(ls));
    assert_int_equal(logshard_unacked(ls), ERROR_RECORDS - 1);
    assert_int_equal(logshard_events(ls), 0);
    assert_int_equal(logshard_process(ls), -ETIMEDOUT);
    logshard_close(ls);
    peer_join(p);

    /* Found here: the daemon hung up without a word. */
    peer_start(p, script_close_unacked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "hung-up", 0);
    append_records(ls, CLOSE_RECORDS);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPIPE);
    assert_int_equal(logshard_error(ls), -EPIPE);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    logshard_close(ls);
    peer_join(p);

    /* An ERROR whose code is no errno is our finding, not the daemon's. */
    peer_start(p, script_error_code0_midstream, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "odd", 0);
    assert_int_equal(logshard_append(ls, "x", 1), 0);
    assert_int_equal(logshard_flush(ls, PEER_TIMEOUT_MS), -EPROTO);
    assert_int_equal(logshard_error_origin(ls), LOGSHARD_ORIGIN_LOCAL);
    logshard_close(ls);
    peer_join(p);
}

/* ---- an event loop of the caller's own ---- */

/* With LOGSHARD_NONBLOCK and nothing but poll() on logshard_fd(): the peer
 * reads nothing at first, so the loop must see -EAGAIN and a descriptor
 * that is not ready; once the peer reads, the same loop sends every record
 * and collects every ACK, and no library call ever waits. */
static void test_event_loop(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "looper", .buffer_bytes = 1, .flags = LOGSHARD_NONBLOCK };
    unsigned char rec[PRESSURE_MAX_LEN];
    uint64_t taken = 0, deadline;
    bool pushed_back = false, released = false;
    logshard *ls = NULL;
    int r;

    peer_start_total(p, script_stall_until_go, PRESSURE_MAX_RECORD, DEFAULT_MAX_FRAME,
                     PRESSURE_RECORDS);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_true(logshard_fd(ls) >= 0);
    assert_int_equal(logshard_events(ls), POLLIN); /* nothing to send yet */
    assert_int_equal(logshard_process(ls), 0);

    deadline = now_ms() + 2 * PEER_TIMEOUT_MS;
    while (taken < PRESSURE_RECORDS || logshard_unacked(ls) > 0) {
        struct pollfd pfd = { .fd = logshard_fd(ls) };
        uint64_t t0;

        assert_true(now_ms() < deadline);
        while (taken < PRESSURE_RECORDS) {
            t0 = now_ms();
            r = logshard_append(ls, rec, make_record(taken, PRESSURE_MAX_LEN, rec));
            assert_true(now_ms() - t0 < 1000);
            if (r == -EAGAIN)
                break;
            assert_int_equal(r, 0);
            taken++;
        }
        pfd.events = (short)logshard_events(ls);
        assert_true(pfd.events & POLLIN);
        if (taken < PRESSURE_RECORDS) {
            /* Pushed back: a frame is waiting for the socket. */
            assert_true(pfd.events & POLLOUT);
            if (!pushed_back) {
                /* The peer reads nothing yet, so the socket stays full
                 * and the refused record is not counted. */
                pushed_back = true;
                assert_int_equal(poll(&pfd, 1, 100), 0);
                assert_int_equal(logshard_unacked(ls), taken);
                assert_int_equal(signal_pipe(p->go[1]), 0);
                released = true;
            }
        }
        r = poll(&pfd, 1, remaining_ms(deadline));
        assert_true(r >= 0 || errno == EINTR);
        t0 = now_ms();
        assert_int_equal(logshard_process(ls), 0);
        assert_true(now_ms() - t0 < 1000);
    }
    assert_true(pushed_back && released);
    assert_int_equal(logshard_events(ls), POLLIN);
    assert_int_equal(logshard_error(ls), 0);
    logshard_close(ls);
    peer_join(p);
    check_records(p, PRESSURE_RECORDS, PRESSURE_MAX_LEN, 0);
}

/* Records appended and then left alone are sent by logshard_process(), not
 * only by a later append or flush: an event loop has no linger timer. */
static int script_one_record_acked(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 2) == 0);
    PCHECK(peer_send_ack(p, 2) == 0);
    return peer_expect_eof(p);
}

static void test_process_sends_lingering(void **state)
{
    struct peer *p = *state;
    logshard_opts opts = { .producer = "lone", .flags = LOGSHARD_NONBLOCK };
    logshard *ls = NULL;
    uint64_t deadline = now_ms() + PEER_TIMEOUT_MS;

    peer_start(p, script_one_record_acked, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    opts.socket_path = p->path;
    assert_int_equal(logshard_connect_sized(&ls, &opts, sizeof(opts)), 0);
    assert_int_equal(logshard_append(ls, "one", 3), 0);
    assert_int_equal(logshard_append(ls, "two", 3), 0);
    assert_int_equal(logshard_events(ls), POLLIN | POLLOUT);
    while (logshard_unacked(ls) > 0) {
        struct pollfd pfd = { .fd = logshard_fd(ls), .events = (short)logshard_events(ls) };

        assert_true(now_ms() < deadline);
        assert_true(poll(&pfd, 1, remaining_ms(deadline)) >= 0 || errno == EINTR);
        assert_int_equal(logshard_process(ls), 0);
    }
    logshard_close(ls);
    peer_join(p);
    assert_int_equal(p->nframes, 1);
}

static void test_version(void **state)
{
    char want[32];

    (void)state;
    assert_int_equal(logshard_version(), LOGSHARD_VERSION_NUMBER);
    assert_int_equal(LOGSHARD_VERSION_NUMBER, (LOGSHARD_VERSION_MAJOR << 16) |
                                                  (LOGSHARD_VERSION_MINOR << 8) |
                                                  LOGSHARD_VERSION_PATCH);
    assert_string_equal(logshard_version_string(), LOGSHARD_VERSION_STRING);
    snprintf(want, sizeof(want), "%d.%d.%d", LOGSHARD_VERSION_MAJOR, LOGSHARD_VERSION_MINOR,
             LOGSHARD_VERSION_PATCH);
    assert_string_equal(logshard_version_string(), want);
    /* The one code only this library's own options can cause. */
    assert_string_not_equal(logshard_strerror(-E2BIG), logshard_strerror(-EINVAL));
    assert_non_null(strstr(logshard_strerror(-E2BIG), "library"));
}

static void test_null_handles_new_calls(void **state)
{
    (void)state;
    assert_int_equal(logshard_fd(NULL), -EINVAL);
    assert_int_equal(logshard_events(NULL), -EINVAL);
    assert_int_equal(logshard_process(NULL), -EINVAL);
    assert_int_equal(logshard_error(NULL), -EINVAL);
    assert_int_equal(logshard_error_origin(NULL), -EINVAL);
    assert_int_equal(logshard_connect_sized(NULL, NULL, 0), -EINVAL);
}

#define PEER_TEST(f) cmocka_unit_test_setup_teardown(f, setup_peer, teardown_peer)

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_connect_ok),
        cmocka_unit_test(test_connect_bad_names),
        cmocka_unit_test(test_connect_socket_errors),
        PEER_TEST(test_connect_refused),
        PEER_TEST(test_append_batches),
        PEER_TEST(test_append_linger),
        PEER_TEST(test_append_limits),
        PEER_TEST(test_append_frame_limit),
        PEER_TEST(test_flush_waits_for_all_acks),
        PEER_TEST(test_append_backpressure),
        PEER_TEST(test_append_nonblock),
        PEER_TEST(test_peer_closes_with_unacked),
        PEER_TEST(test_peer_closes_while_client_blocked),
        PEER_TEST(test_error_midstream),
        PEER_TEST(test_ack_beyond_sent),
        PEER_TEST(test_default_name_and_env),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_null_handles),
        PEER_TEST(test_connect_sized),
        PEER_TEST(test_connect_first_version_opts),
        PEER_TEST(test_error_origin),
        PEER_TEST(test_event_loop),
        PEER_TEST(test_process_sends_lingering),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_null_handles_new_calls),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
