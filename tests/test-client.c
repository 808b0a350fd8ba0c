/* Unit tests for client/logshard.c: connecting, HELLO and WELCOME, the
 * options and their defaults, the version calls and the sizes the ABI fixes,
 * against the scripted daemon of scripted-peer.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "scripted-peer.h"

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
    assert_int_equal(p->hello_version, WIRE_PROTOCOL_V2);
    assert_int_equal(p->hello_first_position, 0);
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
    p->welcome.version = WIRE_PROTOCOL_V2 + 1;
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
    PCHECK(peer_write_all(p->fd, http, sizeof(http) - 1, PEER_TIMEOUT_MS) == 0);
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
        /* No reconnecting: a hang-up is otherwise waited out (test-client-resume). */
        logshard_opts opts = { .producer = "denied", .flags = LOGSHARD_NO_RECONNECT };
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
           offsetof(logshard_opts, reconnect_timeout_ms) - LOGSHARD_OPTS_SIZE_1);
    memset((unsigned char *)&big.opts + LOGSHARD_OPTS_SIZE_2, 0xA5,
           sizeof(big.opts) - LOGSHARD_OPTS_SIZE_2);
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

/* net.core.wmem_max, the most a process may ask of SO_SNDBUF. */
static int wmem_max(void)
{
    FILE *f = fopen("/proc/sys/net/core/wmem_max", "r");
    int v = 0;

    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &v), 1);
    fclose(f);
    return v;
}

static int send_buffer(logshard *ls)
{
    int v = 0;
    socklen_t len = sizeof(v);

    assert_int_equal(getsockopt(logshard_fd(ls), SOL_SOCKET, SO_SNDBUF, &v, &len), 0);
    return v;
}

/* The connection's send buffer holds a whole frame (the kernel doubles
 * what is asked, and caps the request at net.core.wmem_max), so that the
 * daemon finds frames complete: the default (net.core.wmem_default, 208
 * KiB) is smaller than the default frame. */
static void test_send_buffer_fits_a_frame(void **state)
{
    static const size_t frames[] = { 0, 1024 * 1024 };
    struct peer *p = *state;
    int cap = 2 * wmem_max();

    for (size_t i = 0; i < sizeof(frames) / sizeof(frames[0]); i++) {
        /* 0: the default buffer, whose frames are 256 KiB. */
        size_t frame = frames[i] ? frames[i] : 256 * 1024;
        int want = (size_t)cap < 2 * frame ? cap : (int)(2 * frame);
        logshard *ls;

        peer_start(p, script_hello_then_eof, DEFAULT_MAX_RECORD, 2 * 1024 * 1024);
        ls = connect_ok(p, "sndbuf", frames[i]);
        assert_true(send_buffer(ls) >= want);
        logshard_close(ls);
        peer_join(p);
    }
}

/* Pages this process has in memory, from /proc/self/statm. */
static long resident_pages(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long size = 0, resident = 0;

    assert_non_null(f);
    assert_int_equal(fscanf(f, "%ld %ld", &size, &resident), 2);
    fclose(f);
    return resident;
}

static int script_one_record(struct peer *p)
{
    PCHECK(peer_handshake(p) == 0);
    PCHECK(peer_read_records(p, 1) == 0);
    PCHECK(peer_send_ack(p, 1) == 0);
    return peer_expect_eof(p);
}

/* The first record in a new frame buffer brings in the pages of the next
 * 32 KiB at once, rather than one trap per page as the records reach them,
 * but not the whole buffer (room for one largest record, a megabyte here),
 * which a program logging one line would pay for. The allocator is told
 * to map large blocks afresh, so that the buffer has no pages of its own
 * before the record. */
static void test_new_frame_prefaulted_in_chunks(void **state)
{
    struct peer *p = *state;
    long page = sysconf(_SC_PAGESIZE);
    long before, grown;
    logshard *ls;

    mallopt(M_MMAP_THRESHOLD, 64 * 1024); /* a sanitizer's allocator ignores it */
    peer_start(p, script_one_record, DEFAULT_MAX_RECORD, DEFAULT_MAX_FRAME);
    ls = connect_ok(p, "prefault", 0);
    before = resident_pages();
    assert_int_equal(logshard_append(ls, "one line", 8), 0);
    grown = resident_pages() - before;
    assert_true(grown >= 32 * 1024 / page - 1);
    /* the buffer holds one largest record; a sanitizer adds pages of its own */
    assert_true(grown < DEFAULT_MAX_RECORD / page / 4);
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
    /* A later member never lies in what was the first version's padding. */
    assert_true(offsetof(logshard_opts, reconnect_timeout_ms) >=
                sizeof(struct { const char *a, *b; size_t c; unsigned d; }));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        PEER_TEST(test_connect_ok),
        cmocka_unit_test(test_connect_bad_names),
        cmocka_unit_test(test_connect_socket_errors),
        PEER_TEST(test_connect_refused),
        PEER_TEST(test_default_name_and_env),
        cmocka_unit_test(test_strerror),
        cmocka_unit_test(test_null_handles),
        PEER_TEST(test_connect_sized),
        PEER_TEST(test_send_buffer_fits_a_frame),
        PEER_TEST(test_new_frame_prefaulted_in_chunks),
        PEER_TEST(test_connect_first_version_opts),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_null_handles_new_calls),
    };

    saved_program_name = program_invocation_short_name;
    unsetenv("LOGSHARD_SOCKET");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
