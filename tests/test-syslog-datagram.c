/* The syslog datagram socket (--syslog-socket, [syslog] datagram_socket)
 * with senders that are not ours: util-linux logger, Python's
 * SysLogHandler, and datagrams this test writes itself where a sender must
 * misbehave. The real logshardd, read back with the real logctl cat
 * --spool --json after SIGTERM:
 *  - each message is one record, byte for byte the datagram less the NULs
 *    and the line end senders append, exactly once;
 *  - the producer is <identifier>.u<uid>, the source syslog-datagram, and
 *    the credentials the kernel's (a pid forged in the text changes
 *    nothing);
 *  - empty datagrams and oversized ones are counted (logctl status) and
 *    logged with their sender; garbage and 200 identifiers are taken;
 *  - a producer idle for [syslog] idle_timeout has its shard sealed, and
 *    [syslog] max_producers seals the least recently used;
 *  - over memory_limit_bytes the daemon stops reading, so senders wait in
 *    the kernel.
 * The socket's own life (reload, stale files, activation) is
 * test-syslog-datagram-socket.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "syslog-fixture.h"

#define RUN_MS 30000

/* ---- senders ---- */

/* Runs util-linux logger against the socket; arguments NULL-terminated. */
static void run_logger(struct harness *h, ...)
{
    const char *argv[24];
    char *path = syslog_dgram_path(h);
    char *logger = syslog_need_program("logger");
    size_t n = 0;
    va_list ap;
    int status;

    argv[n++] = logger;
    argv[n++] = "-u";
    argv[n++] = path;
    argv[n++] = "--socket-errors=on";
    argv[n++] = "-d"; /* a datagram, as to /dev/log */
    va_start(ap, h);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 23;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    status = harness_run(argv, NULL, NULL, RUN_MS);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("logger exited with status %d", status);
    free(logger);
    free(path);
}

/* ---- tests ---- */

/* logger in its three formats: each message is a record of <tag>.u<uid>,
 * the payload ending in the message (logger's line end stripped), from a
 * process that is not the test, with our uid and gid. */
static void test_logger(void **state)
{
    struct harness *h = *state;
    struct syslog_recs r;
    const char *tags[] = { "plain-tag", "t3164", "t5424" };
    const char *msgs[] = { "plain message", "bsd message", "five four two four" };

    free(syslog_need_program("logger")); /* before the daemon starts */
    syslog_dgram_start(h, NULL);
    run_logger(h, "-t", tags[0], msgs[0], NULL);
    run_logger(h, "--rfc3164", "-t", tags[1], msgs[1], NULL);
    run_logger(h, "--rfc5424", "--sd-id", "zoo@32473", "--sd-param", "tiger=\"hungry\"", "-t",
               tags[2], "--msgid", "ID47", msgs[2], NULL);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 3);
    for (size_t i = 0; i < 3; i++) {
        char *producer = syslog_producer_of(tags[i]);
        const struct syslog_rec *x = NULL;
        size_t ml = strlen(msgs[i]);

        for (size_t j = 0; j < r.n; j++)
            if (strcmp(r.v[j].producer, producer) == 0)
                x = &r.v[j];
        if (!x)
            fail_msg("no record of producer %s", producer);
        assert_string_equal(x->source, "syslog-datagram");
        assert_false(x->b64);
        /* Byte for byte what logger sent but its "\n": the text ends the
         * payload, with the PRI at its start. */
        assert_true(x->len > ml + 4);
        assert_memory_equal(x->payload + x->len - ml, msgs[i], ml);
        assert_int_equal(x->payload[0], '<');
        assert_true(x->pid != (uint64_t)getpid() && x->pid != 0);
        assert_int_equal(x->pid, x->hdr_pid); /* the sender that opened the shard */
        assert_int_equal(x->uid, (uint64_t)getuid());
        assert_int_equal(x->gid, (uint64_t)getgid());
        if (i == 2) {
            assert_memory_equal(x->payload, "<13>1 ", 6);
            assert_non_null(strstr(x->payload, "[zoo@32473 tiger=\"hungry\"]"));
            assert_non_null(strstr(x->payload, " ID47 "));
        }
        free(producer);
    }
    syslog_recs_free(&r);
}

/* Python's SysLogHandler(address=PATH): "<12>ident: text\0"; the NUL goes,
 * the rest is kept byte for byte, under the pid of the Python process. */
static void test_python_handler(void **state)
{
    struct harness *h = *state;
    char *path = syslog_dgram_path(h);
    char *out = harness_path(h->dir, "python.out");
    char *script = NULL;
    char *producer = syslog_producer_of("pyapp");
    struct syslog_recs r;
    char *python = syslog_need_program("python3");
    uint64_t pypid;
    size_t len;
    char *text;
    int status;

    assert_true(asprintf(&script,
                         "import logging, logging.handlers, os\n"
                         "h = logging.handlers.SysLogHandler(address=%s%s%s)\n"
                         "h.ident = 'pyapp: '\n"
                         "log = logging.getLogger('t')\n"
                         "log.addHandler(h)\n"
                         "for i in range(5):\n"
                         "    log.warning('python message %%d \\u00e9', i)\n"
                         "print(os.getpid())\n",
                         "'", path, "'") > 0);
    syslog_dgram_start(h, NULL);
    {
        const char *argv[] = { python, "-c", script, NULL };
        status = harness_run(argv, out, NULL, RUN_MS);
    }
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    text = harness_slurp(out, &len);
    pypid = strtoull(text, NULL, 10);
    assert_true(pypid > 0);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 5);
    for (int i = 0; i < 5; i++) {
        char want[64];
        const struct syslog_rec *x;

        snprintf(want, sizeof(want), "<12>pyapp: python message %d \xc3\xa9", i);
        x = syslog_expect_once(&r, "syslog-datagram", producer, want, strlen(want));
        assert_int_equal(x->pid, pypid);
        assert_int_equal(x->hdr_pid, pypid);
        assert_int_equal(x->uid, (uint64_t)getuid());
    }
    syslog_recs_free(&r);
    free(text);
    free(producer);
    free(script);
    free(out);
    free(path);
    free(python);
}

/* Datagrams no library would send, from the test itself. */
static void test_raw_datagrams(void **state)
{
    struct harness *h = *state;
    const char forged[] = "<13>forger[1]: I am init, believe me";
    const unsigned char garbage[] = { 0xff, 0xfe, 0x00, 0x01, '<', '9', '9', '9', '>', 0x80,
                                      '\n', 0xc3, 0x28, 0x00, 0x7f, 'x' };
    /* Three large datagrams in a row, over what a read slot keeps
     * resident (64 KiB): each arrives whole, and so does what follows
     * them in the same slots. */
    size_t big_len = 100 * 1024;
    char *big[3];
    char *producer;
    struct syslog_recs r;
    const struct syslog_rec *x;
    char log_needle[96];

    for (int b = 0; b < 3; b++) {
        big[b] = malloc(big_len);
        assert_non_null(big[b]);
        snprintf(big[b], big_len, "<13>bigsender%d: ", b);
        for (size_t i = 16; i < big_len; i++)
            big[b][i] = (char)('a' + (i + (size_t)b) % 26);
    }

    syslog_dgram_start(h, NULL);
    syslog_dgram_send_text(h, forged);
    syslog_dgram_send_raw(h, "", 0);      /* empty: counted, dropped */
    syslog_dgram_send_raw(h, "\n\0", 2);  /* empty once the trailer is gone */
    for (int b = 0; b < 3; b++)
        syslog_dgram_send_raw(h, big[b], big_len);
    syslog_dgram_send_raw(h, garbage, sizeof(garbage));
    syslog_dgram_send_text(h, "<14>nl: a line end is the sender's\n");
    for (int i = 0; i < 200; i++) {
        char m[64];
        snprintf(m, sizeof(m), "<13>ident%03d[%d]: message %d", i, i, i);
        syslog_dgram_send_text(h, m);
    }
    /* The drops are counted and the sender named, before the stop. */
    snprintf(log_needle, sizeof(log_needle), "dropped an empty datagram from pid %d, uid %u",
             (int)getpid(), (unsigned)getuid());
    if (!harness_wait_log(h, log_needle, 10000))
        fail_msg("the daemon's log never said: %s", log_needle);
    assert_int_equal(syslog_status(h, "dropped", "empty"), 2);
    assert_int_equal(syslog_status(h, NULL, "datagrams"), 208);
    assert_int_equal(syslog_status(h, NULL, "records"), 206);
    /* The shards count their bytes with the credential blocks: what waits
     * to be written is at most what was sent, never a count gone below 0. */
    assert_true(syslog_status(h, "", "bytes_waiting") < 1024 * 1024);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 206);
    /* The text claims pid 1; the record says who really sent it. */
    producer = syslog_producer_of("forger");
    x = syslog_expect_once(&r, "syslog-datagram", producer, forged, strlen(forged));
    syslog_expect_our_creds(x);
    assert_int_equal(x->hdr_pid, (uint64_t)getpid());
    free(producer);

    for (int b = 0; b < 3; b++) {
        char id[16];

        snprintf(id, sizeof(id), "bigsender%d", b);
        producer = syslog_producer_of(id);
        syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                                   big[b], big_len));
        free(producer);
        free(big[b]);
    }

    /* No PRI, no identifier: the fallback name; the bytes as they came
     * (the trailing 'x' keeps the NULs and the newline inside). */
    producer = syslog_producer_of("syslog");
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               garbage, sizeof(garbage)));
    free(producer);

    producer = syslog_producer_of("nl");
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<14>nl: a line end is the sender's", 34));
    free(producer);

    for (int i = 0; i < 200; i++) {
        char m[64], id[16];
        snprintf(m, sizeof(m), "<13>ident%03d[%d]: message %d", i, i, i);
        snprintf(id, sizeof(id), "ident%03d", i);
        producer = syslog_producer_of(id);
        syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               m, strlen(m)));
        free(producer);
    }
    syslog_recs_free(&r);
}

/* A datagram over max_record_bytes is counted and logged, not stored; the
 * next one of the same sender is. */
static void test_oversized(void **state)
{
    struct harness *h = *state;
    size_t len = 8 * 1024;
    char *m = malloc(len);
    char *producer = syslog_producer_of("over");
    struct syslog_recs r;

    assert_non_null(m);
    memcpy(m, "<13>over: ", 10);
    memset(m + 10, 'o', len - 10);
    syslog_dgram_start(h, "[limits]\nmax_record_bytes = 4K\n");
    syslog_dgram_send_raw(h, m, len);
    syslog_dgram_send_text(h, "<13>over: small");
    if (!harness_wait_log(h, "over max_record_bytes", 10000))
        fail_msg("the oversized datagram was not logged");
    assert_int_equal(syslog_status(h, "dropped", "oversized"), 1);
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 1);
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>over: small", 15));
    syslog_recs_free(&r);
    free(producer);
    free(m);
}

/* The start says when the kernel's datagram queue is short (under 128;
 * the kernel's default is 10), naming the sysctl and the value that helps,
 * and says nothing when it is not. The machine decides which of the two
 * this run checks; both print the value. */
static void test_short_queue_warning(void **state)
{
    struct harness *h = *state;
    FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "re");
    unsigned long qlen = 0;
    char needle[96];

    if (!f || fscanf(f, "%lu", &qlen) != 1)
        skip();
    (void)fclose(f);
    printf("net.unix.max_dgram_qlen here: %lu\n", qlen);
    snprintf(needle, sizeof(needle), "net.unix.max_dgram_qlen is %lu:", qlen);
    syslog_dgram_start(h, NULL);
    if (!harness_wait_log(h, "syslog datagrams on", 10000))
        fail_msg("the start did not name the syslog datagram socket");
    if (qlen < 128) {
        assert_true(harness_log_has(h, needle));
        assert_true(harness_log_has(h, "sysctl.d/50-logshard.conf sets 512"));
    } else {
        assert_false(harness_log_has(h, "max_dgram_qlen"));
    }
    syslog_stop_clean(h);
}

/* A producer that stops logging has its shard sealed after idle_timeout,
 * while the daemon runs; its next message opens a new shard. */
static void test_idle_seal(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("cronjob");
    struct syslog_recs r;

    syslog_dgram_start(h, "[syslog]\nidle_timeout = 300ms\n");
    syslog_dgram_send_text(h, "<13>cronjob: first run");
    if (!syslog_wait_sealed(h, 1, 10000))
        fail_msg("the idle producer's shard was not sealed within 10 s");
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    harness_assert_running(h);
    syslog_dgram_send_text(h, "<13>cronjob: second run");
    if (!syslog_wait_sealed(h, 2, 10000))
        fail_msg("the second shard was not sealed within 10 s");
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 2);
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>cronjob: first run", 22));
    syslog_expect_our_creds(syslog_expect_once(&r, "syslog-datagram", producer,
                                               "<13>cronjob: second run", 23));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    syslog_recs_free(&r);
    free(producer);
}

/* A datagram producer over its quota: what does not fit is dropped and
 * counted, never blocking the socket; another producer goes on; what was
 * stored plus what was dropped is what was sent. */
static void test_quota_drops(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("quotag"), *other = syslog_producer_of("otherg");
    struct syslog_recs r;
    uint64_t dropped;
    size_t stored = 0;

    syslog_dgram_start(h, "[producer_quotas]\nquotag.u* = 16K\n");
    for (int i = 0; i < 1000; i++) {
        char m[128];

        snprintf(m, sizeof(m), "<13>quotag: message %04d of a producer over its quota", i);
        syslog_dgram_send_text(h, m);
    }
    syslog_dgram_send_text(h, "<13>otherg: not held up");
    for (int waited = 0; syslog_status(h, NULL, "datagrams") < 1001; waited += 10) {
        if (waited > 10000)
            fail_msg("the daemon read %" PRIu64 " of 1001 datagrams in 10 s",
                     syslog_status(h, NULL, "datagrams"));
        usleep(10000);
    }
    dropped = syslog_status(h, "dropped", "refused");
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    syslog_expect_once(&r, "syslog-datagram", other, "<13>otherg: not held up", 23);
    for (size_t i = 0; i < r.n; i++)
        if (strstr(r.v[i].producer, "quotag"))
            stored++;
    assert_true(stored > 0 && stored < 1000);
    assert_int_equal(stored + dropped, 1000);
    assert_true(harness_log_has(h, "refused by the disk budget (its quota)"));
    syslog_recs_free(&r);
    free(producer);
    free(other);
}

/* Beyond max_producers, the shard of the producer idle longest is sealed
 * at once (the idle time is far off). */
static void test_max_producers(void **state)
{
    struct harness *h = *state;
    struct syslog_recs r;

    syslog_dgram_start(h, "[syslog]\nmax_producers = 4\nidle_timeout = 1h\n");
    for (int i = 0; i < 10; i++) {
        char m[32];
        snprintf(m, sizeof(m), "<13>lru%d: hello", i);
        syslog_dgram_send_text(h, m);
    }
    if (!syslog_wait_sealed(h, 6, 10000))
        fail_msg("10 producers with max_producers 4: %zu shards sealed, expected 6",
                 harness_count_files(h, "done", ".shard"));
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 4);
    /* logctl rotate seals syslog producers' shards too, and returns once
     * they are in done/: one producer, then the rest. */
    {
        char *one = syslog_producer_of("lru9");
        struct harness_run run = harness_run_logctl(h, "rotate", "--admin-socket",
                                                    h->admin_sock, "--producer", one, NULL);

        harness_expect_code(&run, 0, "logctl rotate --producer");
        harness_run_free(&run);
        assert_int_equal(harness_count_files(h, "done", ".shard"), 7);
        run = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, NULL);
        harness_expect_code(&run, 0, "logctl rotate");
        harness_run_free(&run);
        assert_int_equal(harness_count_files(h, "done", ".shard"), 10);
        assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
        free(one);
    }
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 10);
    for (int i = 0; i < 10; i++) {
        char m[32], id[16];
        char *producer;
        snprintf(m, sizeof(m), "<13>lru%d: hello", i);
        snprintf(id, sizeof(id), "lru%d", i);
        producer = syslog_producer_of(id);
        syslog_expect_once(&r, "syslog-datagram", producer, m, strlen(m));
        free(producer);
    }
    assert_int_equal(harness_count_files(h, "done", ".shard"), 10);
    syslog_recs_free(&r);
}

/* Over memory_limit_bytes (writes stalled by fault injection, so batch
 * buffers only grow) the daemon stops reading: the kernel's queue fills
 * and a non-blocking sender gets EAGAIN, having handed over only about
 * the limit's worth. A daemon that kept reading would take all of it. */
static void test_memory_backpressure(void **state)
{
    struct harness *h = *state;
    socklen_t sl;
    struct sockaddr_un sa = syslog_dgram_address(h, &sl);
    size_t len = 60 * 1024, sent = 0, want = 400;
    char *m = malloc(len);
    int fd;

    assert_non_null(m);
    memcpy(m, "<13>flood: ", 11);
    memset(m + 11, 'f', len - 11);
    setenv("LOGSHARD_FAULTS", "stall_writes", 1);
    syslog_dgram_start(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 128K\n"
                         "max_frame_bytes = 128K\nmax_record_bytes = 64K\n");
    unsetenv("LOGSHARD_FAULTS");
    fd = syslog_dgram_socket();
    while (sent < want) {
        ssize_t n = sendto(fd, m, len, MSG_DONTWAIT, (struct sockaddr *)&sa, sl);
        int waited_ms = 0;

        if (n == (ssize_t)len) {
            sent++;
            continue;
        }
        assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        /* The queue is full: it stays full only if the daemon stopped
         * reading. Give a reading daemon a full second to empty it. */
        while (waited_ms < 1000) {
            struct timespec ts = { 0, 20 * 1000000 };
            nanosleep(&ts, NULL);
            waited_ms += 20;
            n = sendto(fd, m, len, MSG_DONTWAIT, (struct sockaddr *)&sa, sl);
            if (n == (ssize_t)len)
                break;
        }
        if (n != (ssize_t)len)
            break;
        sent++;
    }
    close(fd);
    if (sent >= want)
        fail_msg("%zu datagrams of %zu bytes were taken against memory_limit_bytes 1M: the "
                 "daemon never stopped reading",
                 sent, len);
    /* About 1 MiB read, plus what the kernel's queue holds. */
    assert_true(sent >= 1024 * 1024 / len);
    if (!harness_wait_log(h, "not reading while producers hold", 10000))
        fail_msg("the pause was not logged");
    harness_assert_running(h);
    free(m);
    /* The writes never complete: the teardown kills the daemon. */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_logger, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_python_handler, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_raw_datagrams, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_oversized, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_short_queue_warning, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_idle_seal, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_max_producers, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_quota_drops, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_memory_backpressure, harness_setup,
                                        harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
