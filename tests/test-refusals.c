/* What the real daemon says when it refuses something: a configuration
 * key given twice (at start and on SIGHUP), settings that contradict each
 * other (the message names the lines), a producer name starting with '-'
 * (HELLO, the library, logctl send, and a program whose own name starts
 * with '-'), and a flood of refused connections, which must leave a
 * bounded number of log lines that still account for every refusal. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "wire.h"

/* Starts the daemon on h's files and expects it to refuse to start with
 * exit status 2 and want (a format taking the config path) in its log. */
static void expect_start_refused(struct harness *h, const char *want_fmt)
{
    const char *argv[] = { harness_logshardd(), "--config", h->config, "--spool", h->spool,
                           "--socket", h->sock, "--admin-socket", h->admin_sock, NULL };
    char *want, *log;
    size_t len;
    int status;

    harness_spawn(h, argv);
    status = harness_wait_exit(h, 10000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_true(asprintf(&want, want_fmt, h->config) > 0);
    log = harness_slurp(h->log, &len);
    if (!strstr(log, want))
        fail_msg("log lacks '%s':\n%s", want, log);
    free(log);
    free(want);
}

static void test_duplicate_key_at_start(void **state)
{
    struct harness *h = *state;

    harness_write_config(h, "[sync]\nfsync = none\n[limits]\nmax_producers = 5\n"
                            "[sync]\nfsync = always\n");
    expect_start_refused(h, "%s:6: key 'fsync' in [sync] already set on line 2");
}

/* The cross-key check names the file, the line of the key that was set and
 * says the other is the default. */
static void test_contradicting_keys_name_lines(void **state)
{
    struct harness *h = *state;

    harness_write_config(h, "# records of the largest size\n[limits]\nmax_record_bytes = 256M\n");
    expect_start_refused(h, "%s:3: max_frame_bytes (4194304, the default) must leave room for "
                            "one record of max_record_bytes (268435456, line 3) and its "
                            "framing (8 bytes)");
}

static int connect_policy(const struct harness *h)
{
    logshard_opts o = { .socket_path = h->sock, .producer = "reload" };
    logshard *ls = NULL;
    int policy;

    assert_int_equal(logshard_connect(&ls, &o), 0);
    policy = logshard_fsync_policy(ls);
    logshard_close(ls);
    return policy;
}

/* A reload meeting a repeated key keeps the running settings, as for any
 * other bad line, and logs the file and line. */
static void test_duplicate_key_on_reload(void **state)
{
    struct harness *h = *state;
    size_t at, len;
    char *log, *want;

    harness_write_config(h, "[sync]\nfsync = none\n");
    harness_start(h, NULL);
    assert_int_equal(connect_policy(h), LOGSHARD_FSYNC_NONE);

    harness_write_config(h, "[sync]\nfsync = always\nfsync = always\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    at = harness_notify_wait(h, 0, "RELOADING=1", 5000);
    assert_true(at > 0);
    at = harness_notify_wait(h, at, "READY=1", 5000);
    assert_true(at > 0);
    assert_int_equal(connect_policy(h), LOGSHARD_FSYNC_NONE);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_true(asprintf(&want,
                         "reload refused, the running settings stay: %s:3: key 'fsync' in "
                         "[sync] already set on line 2",
                         h->config) > 0);
    log = harness_slurp(h->log, &len);
    if (!strstr(log, want))
        fail_msg("log lacks '%s':\n%s", want, log);
    free(log);
    free(want);
}

static bool done_has_dash_name(const struct harness *h)
{
    char *path = harness_path(h->spool, "done");
    DIR *d = opendir(path);
    struct dirent *de;
    bool found = false;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        found |= de->d_name[0] == '-';
    closedir(d);
    free(path);
    return found;
}

/* A name starting with '-' is refused in HELLO with the rule; the library
 * and logctl send refuse it before connecting; a program whose own name
 * starts with '-' still connects, under '_' instead. */
static void test_dash_names(void **state)
{
    struct harness *h = *state;
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    char *err_path = harness_path(h->dir, "send.err");
    char *saved_name = program_invocation_short_name;
    char *text;
    size_t len;
    int status;

    harness_start(h, NULL);
    {
        static const char *const names[] = { "-rf", "-", "--help" };
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
            size_t n = strlen(names[i]);
            unsigned char frame[64];
            int fd = harness_raw_connect(h->sock);

            /* wire_encode_hello refuses these names, so build it by hand. */
            wire_encode_header(frame, WIRE_HELLO, (uint32_t)(WIRE_HELLO_FIXED + n));
            wire_put_u16(frame + WIRE_HEADER_SIZE, WIRE_PROTOCOL_V1);
            wire_put_u16(frame + WIRE_HEADER_SIZE + 2, 0);
            memcpy(frame + WIRE_HEADER_SIZE + WIRE_HELLO_FIXED, names[i], n);
            harness_raw_send(fd, frame, WIRE_HEADER_SIZE + WIRE_HELLO_FIXED + n);
            assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), NULL), EINVAL);
            if (!strstr(msg, "not starting with '.' or '-'"))
                fail_msg("'%s' refused with: %s", names[i], msg);
            close(fd);
        }
    }
    {
        logshard_opts o = { .socket_path = h->sock, .producer = "-rf" };
        logshard *ls = NULL;
        assert_int_equal(logshard_connect(&ls, &o), -EINVAL);
    }
    {
        const char *argv[] = { harness_logctl(), "send", "--socket", h->sock, "--producer", "-rf",
                               NULL };
        status = harness_run(argv, NULL, err_path, 10000);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 2);
        text = harness_slurp(err_path, &len);
        if (!strstr(text, "bad producer name '-rf'") ||
            !strstr(text, "not starting with '.' or '-'"))
            fail_msg("logctl send --producer -rf said: %s", text);
        free(text);
    }
    {
        logshard_opts o = { .socket_path = h->sock };
        logshard *ls = NULL;

        program_invocation_short_name = (char *)"-foo";
        assert_int_equal(logshard_connect(&ls, &o), 0);
        program_invocation_short_name = saved_name;
        assert_int_equal(logshard_append(ls, "from -foo", 9), 0);
        assert_int_equal(logshard_flush(ls, 10000), 0);
        logshard_close(ls);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    assert_false(done_has_dash_name(h));
    {
        char *path = harness_path(h->spool, "done");
        DIR *d = opendir(path);
        struct dirent *de;
        bool found = false;

        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
            found |= strncmp(de->d_name, "_foo.", 5) == 0;
        closedir(d);
        free(path);
        assert_true(found);
    }
    free(err_path);
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* 2,500 connections refused at max_producers = 1: the log holds at most ten
 * refusal lines per five seconds, the first one whole, and "N more
 * suppressed" lines whose counts with the lines written add up to every
 * refusal. */
static void test_refusal_flood_is_rate_limited(void **state)
{
    enum { N = 2500 };
    struct harness *h = *state;
    logshard_opts o = { .socket_path = h->sock, .producer = "holder" };
    logshard *holder = NULL;
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    uint64_t start, elapsed_ms, suppressed = 0, windows;
    size_t len, written = 0, summaries = 0;
    char *log, *line, *save;

    harness_write_config(h, "[limits]\nmax_producers = 1\n");
    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&holder, &o), 0);
    start = now_ms();
    for (int i = 0; i < N; i++) {
        int fd = harness_raw_connect(h->sock);
        assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), NULL), EUSERS);
        close(fd);
    }
    elapsed_ms = now_ms() - start;
    /* The count comes when the interval ends, with no further refusal. */
    assert_true(harness_wait_log(h, "more suppressed", 15000));
    logshard_close(holder);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    log = harness_slurp(h->log, &len);
    for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *p;

        if (strstr(line, "max_producers (1) reached; closing the connection")) {
            written++;
        } else if ((p = strstr(line, "producers refused at a limit: ")) &&
                   strstr(line, "more suppressed")) {
            suppressed += strtoull(p + strlen("producers refused at a limit: "), NULL, 10);
            summaries++;
        }
    }
    /* Each interval of 5 s lets ten through; the flood and the wait for the
     * count span at most this many of them. */
    windows = (elapsed_ms + 5000) / 5000 + 1;
    if (written < 10 || written > 10 * windows || summaries < 1 || summaries > windows ||
        written + suppressed != N)
        fail_msg("%zu refusal lines, %zu summaries counting %" PRIu64 " more, over %" PRIu64
                 " ms; want every one of %d accounted for",
                 written, summaries, suppressed, elapsed_ms, N);
    free(log);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_duplicate_key_at_start, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_contradicting_keys_name_lines, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_key_on_reload, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_dash_names, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_refusal_flood_is_rate_limited, harness_setup,
                                        harness_teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
