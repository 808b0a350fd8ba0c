/* The syslog stream socket (--syslog-stream-socket, [syslog] stream_socket)
 * with senders that are not ours: util-linux logger over a stream socket
 * (-T, newline framing, and --octet-count), Python's SysLogHandler with
 * socktype=SOCK_STREAM, and connections this test writes itself where a
 * sender must misbehave. The real logshardd, read back with the real
 * logctl cat --spool --json after SIGTERM:
 *  - each message is one record, byte for byte as sent less its framing
 *    and the trailer senders append, exactly once, in the shard of its
 *    connection: producer <identifier of the first message>.u<uid>, source
 *    syslog-stream, the peer's credentials;
 *  - LF, CR LF and NUL end messages, octet counting keeps newlines inside
 *    one; an over-long line is stored cut and counted; a bad octet count
 *    closes only that connection, keeping what it sent before; a
 *    connection that ends inside an octet-counted frame is counted;
 *  - an idle connection's shard is sealed while it stays connected;
 *  - the access lists and max_producers_per_uid refuse connections, logged;
 *  - the drain stores what peers wrote, a last line without its end too;
 *  - socket activation with systemd-socket-activate (two stream sockets).
 * Memory limits, read turns and quotas are test-syslog-stream-limits.c's. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "syslog-fixture.h"

#define RUN_MS 30000
#define SOURCE "syslog-stream"

/* For a connection the daemon may refuse at any moment: the write may
 * meet the close (EPIPE, ECONNRESET), which is the point. */
static void try_write_text(int fd, const char *text)
{
    (void)send(fd, text, strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Whether the daemon has closed fd: a read sees the end (or a reset). */
static bool peer_closed(void *arg)
{
    int fd = *(int *)arg;
    char c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* util-linux logger on a stream socket (-T); arguments NULL-terminated,
 * stdin from the file in_path when not NULL. */
static void run_logger(struct harness *h, const char *in_path, ...)
{
    const char *argv[24];
    char *path = syslog_stream_path(h);
    char *logger = syslog_need_program("logger");
    size_t n = 0;
    va_list ap;
    int status;
    pid_t pid;

    argv[n++] = logger;
    argv[n++] = "-u";
    argv[n++] = path;
    argv[n++] = "--socket-errors=on";
    argv[n++] = "-T"; /* a stream socket */
    va_start(ap, in_path);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && n < 23;)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    if (!in_path) {
        status = harness_run(argv, NULL, NULL, RUN_MS);
    } else {
        /* harness_run gives no stdin; this child gets the file. */
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            int fd = open(in_path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || dup2(fd, 0) < 0 || process_reset_signals() < 0)
                _exit(127);
            execv(argv[0], (char *const *)argv);
            _exit(127);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("logger exited with status %d", status);
    free(logger);
    free(path);
}

static const struct syslog_rec *find_producer(const struct syslog_recs *r, const char *producer)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i].producer, producer) == 0)
            return &r->v[i];
    fail_msg("no record of producer %s", producer);
    return NULL;
}

/* ---- tests ---- */

/* logger over the stream socket: newline framing (its default) in the
 * three formats, octet counting, and several lines of stdin over one
 * connection; a message at max_record_bytes is stored whole. */
static void test_logger(void **state)
{
    struct harness *h = *state;
    char *in = harness_path(h->dir, "lines.txt");
    char *big = malloc(4096);
    const char *tags[] = { "s-plain", "s3164", "s5424", "s-octet" };
    const char *msgs[] = { "plain over a stream", "bsd over a stream", "rfc5424 over a stream",
                           "octet\ncounted" };
    struct syslog_recs r;
    char *producer;
    FILE *f;
    size_t at_limit = 0;

    free(syslog_need_program("logger"));
    f = fopen(in, "w");
    assert_non_null(f);
    fputs("first line\nsecond line\nthird line\n", f);
    fclose(f);
    syslog_stream_start(h, "[limits]\nmax_record_bytes = 4K\n");
    run_logger(h, NULL, "-t", tags[0], msgs[0], NULL);
    run_logger(h, NULL, "--rfc3164", "-t", tags[1], msgs[1], NULL);
    run_logger(h, NULL, "--rfc5424", "--sd-id", "zoo@32473", "--sd-param", "tiger=\"hungry\"",
               "--msgid", "ID47", "-t", tags[2], msgs[2], NULL);
    /* One argument with a newline in it: octet counting keeps it inside
     * the message. */
    run_logger(h, NULL, "--octet-count", "-t", tags[3], msgs[3], NULL);
    run_logger(h, in, "-t", "s-stdin", NULL);
    /* A message of exactly max_record_bytes as logger frames it locally:
     * "<13>" (4), an RFC 3164 time (15), a space, "s-big: " (7), and the
     * text to fill 4 KiB. */
    memset(big, 'L', 4096);
    big[4096 - 27] = '\0';
    run_logger(h, NULL, "--octet-count", "--size", "8192", "-t", "s-big", big, NULL);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    for (size_t i = 0; i < 4; i++) {
        const struct syslog_rec *x;
        size_t ml = strlen(msgs[i]);

        producer = syslog_producer_of(tags[i]);
        x = find_producer(&r, producer);
        assert_string_equal(x->source, SOURCE);
        assert_false(x->b64);
        assert_true(x->len > ml + 4);
        assert_memory_equal(x->payload + x->len - ml, msgs[i], ml);
        assert_int_equal(x->payload[0], '<');
        assert_true(x->pid != (uint64_t)getpid() && x->pid != 0);
        assert_int_equal(x->pid, x->hdr_pid);
        assert_int_equal(x->uid, (uint64_t)getuid());
        assert_int_equal(x->gid, (uint64_t)getgid());
        if (i == 2) {
            assert_memory_equal(x->payload, "<13>1 ", 6);
            assert_non_null(strstr(x->payload, "[zoo@32473 tiger=\"hungry\"]"));
            assert_non_null(strstr(x->payload, " ID47 "));
        }
        free(producer);
    }
    /* stdin: one connection, three messages, one shard, in order. */
    producer = syslog_producer_of("s-stdin");
    {
        const char *lines[] = { "first line", "second line", "third line" };
        size_t seen = 0;
        const char *shard = NULL;

        for (size_t i = 0; i < r.n; i++) {
            const struct syslog_rec *x = &r.v[i];
            size_t ll;

            if (strcmp(x->producer, producer) != 0)
                continue;
            assert_true(seen < 3);
            ll = strlen(lines[seen]);
            assert_true(x->len > ll);
            assert_memory_equal(x->payload + x->len - ll, lines[seen], ll);
            if (shard)
                assert_string_equal(x->shard, shard);
            shard = x->shard;
            seen++;
        }
        assert_int_equal(seen, 3);
    }
    free(producer);
    producer = syslog_producer_of("s-big");
    {
        const struct syslog_rec *x = find_producer(&r, producer);
        at_limit = x->len;
        if (at_limit != 4096)
            fail_msg("logger's message at the limit was stored as %zu bytes: %.40s", at_limit,
                     x->payload);
        assert_memory_equal(x->payload + x->len - (4096 - 27), big, 4096 - 27);
    }
    free(producer);
    assert_int_equal(r.n, 4 + 3 + 1);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 6);
    syslog_recs_free(&r);
    free(big);
    free(in);
}

/* Python's SysLogHandler(address=PATH, socktype=SOCK_STREAM): each record
 * "<12>pyapp: text\0" over one connection; the NUL goes, the rest is kept
 * byte for byte, under the Python process's pid, in one shard. */
static void test_python_handler(void **state)
{
    struct harness *h = *state;
    char *path = syslog_stream_path(h);
    char *out = harness_path(h->dir, "python.out");
    char *script = NULL;
    char *producer = syslog_producer_of("pyapp");
    char *python = syslog_need_program("python3");
    struct syslog_recs r;
    uint64_t pypid;
    size_t len;
    char *text;
    int status;

    assert_true(asprintf(&script,
                         "import logging, logging.handlers, os, socket\n"
                         "h = logging.handlers.SysLogHandler(address='%s', "
                         "socktype=socket.SOCK_STREAM)\n"
                         "h.ident = 'pyapp: '\n"
                         "log = logging.getLogger('t')\n"
                         "log.addHandler(h)\n"
                         "for i in range(50):\n"
                         "    log.warning('python message %%d \\u00e9', i)\n"
                         "h.close()\n"
                         "print(os.getpid())\n",
                         path) > 0);
    syslog_stream_start(h, NULL);
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
    assert_int_equal(r.n, 50);
    for (int i = 0; i < 50; i++) {
        char want[64];
        const struct syslog_rec *x;

        snprintf(want, sizeof(want), "<12>pyapp: python message %d \xc3\xa9", i);
        x = syslog_expect_once(&r, SOURCE, producer, want, strlen(want));
        assert_int_equal(x->pid, pypid);
        assert_int_equal(x->hdr_pid, pypid);
        assert_int_equal(x->uid, (uint64_t)getuid());
        assert_string_equal(x->shard, r.v[0].shard);
    }
    syslog_recs_free(&r);
    free(text);
    free(producer);
    free(script);
    free(out);
    free(path);
    free(python);
}

/* Framing from the test itself: every line end senders use, a second
 * identifier on the same connection (still the first one's producer), a
 * line over the limit (stored cut, the rest dropped and counted, the
 * connection goes on), octet counting with newlines and NULs inside. */
static void test_framing(void **state)
{
    struct harness *h = *state;
    size_t long_len = 6000;
    char *longline = malloc(long_len + 1);
    char *producer = syslog_producer_of("framer");
    char *octp = syslog_producer_of("oct");
    const char oct_msg[] = "<13>oct: a\nb\0c";
    char frame[64];
    struct syslog_recs r;
    int fd, fd2;

    assert_non_null(longline);
    memcpy(longline, "<13>framer: ", 12);
    for (size_t i = 12; i < long_len; i++)
        longline[i] = (char)('a' + i % 26);
    longline[long_len] = '\n';
    syslog_stream_start(h, "[limits]\nmax_record_bytes = 4K\n");

    fd = syslog_stream_connect(h);
    syslog_send_text(fd, "<13>framer: lf\n");
    syslog_send_text(fd, "<13>framer: crlf\r\n");
    syslog_send_all(fd, "<13>framer: nul\0", 16);
    syslog_send_text(fd, "\n\n"); /* empty lines: no message */
    syslog_send_text(fd, "<13>other: a second identifier\n");
    syslog_send_all(fd, longline, long_len + 1);
    syslog_send_text(fd, "<13>framer: after the long line\n");
    /* Split across writes, byte by byte. */
    for (const char *p = "<13>framer: dribbled\n"; *p; p++)
        syslog_send_all(fd, p, 1);
    close(fd);

    fd2 = syslog_stream_connect(h);
    snprintf(frame, sizeof(frame), "%zu ", sizeof(oct_msg) - 1);
    syslog_send_text(fd2, frame);
    syslog_send_all(fd2, oct_msg, sizeof(oct_msg) - 1);
    syslog_send_text(fd2, "5 <13>x"); /* two messages in one write: "<13>x" and "<13>oct: y" */
    syslog_send_text(fd2, "10 <13>oct: y");
    close(fd2);

    if (!harness_wait_log(h, "is longer than max_record_bytes (4096)", 10000))
        fail_msg("the cut line was not logged");
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    syslog_expect_our_creds(syslog_expect_once(&r, SOURCE, producer, "<13>framer: lf", 14));
    syslog_expect_once(&r, SOURCE, producer, "<13>framer: crlf", 16);
    syslog_expect_once(&r, SOURCE, producer, "<13>framer: nul", 15);
    syslog_expect_once(&r, SOURCE, producer, "<13>other: a second identifier", 30);
    syslog_expect_once(&r, SOURCE, producer, longline, 4096);
    syslog_expect_once(&r, SOURCE, producer, "<13>framer: after the long line", 31);
    syslog_expect_once(&r, SOURCE, producer, "<13>framer: dribbled", 20);
    syslog_expect_our_creds(syslog_expect_once(&r, SOURCE, octp, oct_msg, sizeof(oct_msg) - 1));
    syslog_expect_once(&r, SOURCE, octp, "<13>x", 5);
    syslog_expect_once(&r, SOURCE, octp, "<13>oct: y", 10);
    assert_int_equal(r.n, 10);
    syslog_recs_free(&r);
    free(octp);
    free(producer);
    free(longline);
}

/* What cannot be framed: a malformed octet count closes that connection
 * (what came before it kept), an octet count over the limit too, and a
 * connection that ends inside a frame loses that frame's bytes; each is
 * counted and logged with the peer, and a good connection beside them
 * is untouched. */
static void test_bad_frames(void **state)
{
    struct harness *h = *state;
    char *bad = syslog_producer_of("bad");
    char *good = syslog_producer_of("good");
    char needle[128];
    struct syslog_recs r;
    int g, b1, b2, b3;

    syslog_stream_start(h, "[limits]\nmax_record_bytes = 4K\n");
    g = syslog_stream_connect(h);
    syslog_send_text(g, "<13>good: one\n");

    b1 = syslog_stream_connect(h);
    try_write_text(b1, "9 <13>bad: 012 <13>bad: lost"); /* a leading zero */
    if (!harness_wait_for(peer_closed, &b1, 10000))
        fail_msg("the connection with a malformed octet count was not closed");
    close(b1);
    snprintf(needle, sizeof(needle), "(pid %d, uid %u, producer %s) sent a malformed octet count",
             (int)getpid(), (unsigned)getuid(), bad);
    if (!harness_wait_log(h, needle, 10000))
        fail_msg("the daemon's log never said: %s", needle);

    b2 = syslog_stream_connect(h);
    try_write_text(b2, "99999 <13>bad: too long");
    if (!harness_wait_for(peer_closed, &b2, 10000))
        fail_msg("the connection with an octet count over the limit was not closed");
    close(b2);
    if (!harness_wait_log(h, "sent an octet-counted message longer than max_record_bytes", 10000))
        fail_msg("the oversized octet count was not logged");

    b3 = syslog_stream_connect(h);
    syslog_send_text(b3, "30 <13>bad: cut short");
    close(b3);
    if (!harness_wait_log(h, "closed the connection inside an octet-counted message", 10000))
        fail_msg("the unfinished frame was not logged");

    syslog_send_text(g, "<13>good: two\n");
    assert_int_equal(syslog_status(h, "stream", "framing_errors"), 2);
    /* What followed the bad counts, and the 18 bytes of the frame of 30
     * that came. */
    assert_true(syslog_status(h, "stream.dropped", "unfinished_bytes") > 0);
    assert_int_equal(syslog_status(h, "stream", "connections"), 1);
    close(g);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    syslog_expect_once(&r, SOURCE, bad, "<13>bad: ", 9);
    syslog_expect_once(&r, SOURCE, good, "<13>good: one", 13);
    syslog_expect_once(&r, SOURCE, good, "<13>good: two", 13);
    assert_int_equal(r.n, 3);
    syslog_recs_free(&r);
    free(bad);
    free(good);
}

/* Two connections of one program are two producers' shards under one
 * name; a connection that falls silent has its shard sealed after
 * idle_timeout while it stays connected, and its next message opens a
 * new shard. */
static void test_connections_and_idle(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("twin");
    struct syslog_recs r;
    const struct syslog_rec *a, *b, *a2;
    int fa, fb;

    syslog_stream_start(h, "[syslog]\nidle_timeout = 300ms\n");
    fa = syslog_stream_connect(h);
    fb = syslog_stream_connect(h);
    syslog_send_text(fa, "<13>twin: from a\n");
    syslog_send_text(fb, "<13>twin: from b\n");
    if (!syslog_wait_sealed(h, 2, 10000))
        fail_msg("the idle connections' shards were not sealed within 10 s");
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    assert_int_equal(syslog_status(h, "stream", "connections"), 2);
    syslog_send_text(fa, "<13>twin: a again\n");
    if (!syslog_wait_sealed(h, 3, 10000))
        fail_msg("the third shard was not sealed within 10 s");
    close(fa);
    close(fb);
    syslog_stop_clean(h);

    r = syslog_read_spool(h);
    assert_int_equal(r.n, 3);
    a = syslog_expect_once(&r, SOURCE, producer, "<13>twin: from a", 16);
    b = syslog_expect_once(&r, SOURCE, producer, "<13>twin: from b", 16);
    a2 = syslog_expect_once(&r, SOURCE, producer, "<13>twin: a again", 17);
    assert_string_not_equal(a->shard, b->shard);
    assert_string_not_equal(a->shard, a2->shard);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 3);
    syslog_recs_free(&r);
    free(producer);
}

struct records_wait {
    struct harness *h;
    uint64_t at_least;
};

static bool has_records(void *arg)
{
    struct records_wait *w = arg;
    uint64_t n = syslog_status(w->h, "stream", "records");

    return n != UINT64_MAX && n >= w->at_least;
}

/* logctl rotate seals a connection's shard while it stays connected, and
 * returns once the shard is in done/; the next message opens a new one. */
static void test_rotate(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("rot");
    struct harness_run run;
    struct records_wait w = { h, 1 };
    struct syslog_recs r;
    int fd;

    syslog_stream_start(h, "[syslog]\nidle_timeout = 1h\n");
    fd = syslog_stream_connect(h);
    syslog_send_text(fd, "<13>rot: before\n");
    assert_true(harness_wait_for(has_records, &w, 10000));
    run = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, "--producer",
                             producer, NULL);
    harness_expect_code(&run, 0, "logctl rotate --producer");
    harness_run_free(&run);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    syslog_send_text(fd, "<13>rot: after\n");
    w.at_least = 2;
    assert_true(harness_wait_for(has_records, &w, 10000));
    run = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&run, 0, "logctl rotate");
    harness_run_free(&run);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 2);
    assert_int_equal(syslog_status(h, "stream", "connections"), 1);
    close(fd);
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 2);
    assert_string_not_equal(
        syslog_expect_once(&r, SOURCE, producer, "<13>rot: before", 15)->shard,
        syslog_expect_once(&r, SOURCE, producer, "<13>rot: after", 14)->shard);
    syslog_recs_free(&r);
    free(producer);
}

/* The rules of the producer socket hold here: a uid outside the access
 * lists is refused, and so is a third connection of a uid limited to two;
 * each refusal is logged with the peer and counted. */
static void test_access_and_limits(void **state)
{
    struct harness *h = *state;
    char config[256], needle[160];
    int fd, f1, f2, f3;

    snprintf(config, sizeof(config), "[access]\nallowed_uids = %u\n",
             (unsigned)getuid() + 4242);
    syslog_stream_start(h, config);
    fd = syslog_stream_connect(h);
    try_write_text(fd, "<13>outsider: let me in\n");
    if (!harness_wait_for(peer_closed, &fd, 10000))
        fail_msg("a uid outside allowed_uids was not refused");
    close(fd);
    snprintf(needle, sizeof(needle), "refused a connection of pid %d, uid %u, gid %u: not in "
             "allowed_uids or allowed_gids", (int)getpid(), (unsigned)getuid(),
             (unsigned)getgid());
    if (!harness_wait_log(h, needle, 10000))
        fail_msg("the daemon's log never said: %s", needle);
    syslog_stop_clean(h);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 0);

    syslog_stream_start(h, "[limits]\nmax_producers_per_uid = 2\n");
    f1 = syslog_stream_connect(h);
    f2 = syslog_stream_connect(h);
    syslog_send_text(f1, "<13>one: in\n");
    syslog_send_text(f2, "<13>two: in\n");
    f3 = syslog_stream_connect(h);
    try_write_text(f3, "<13>three: refused\n");
    if (!harness_wait_for(peer_closed, &f3, 10000))
        fail_msg("a third connection of a uid limited to 2 was not refused");
    close(f3);
    if (!harness_wait_log(h, "max_producers_per_uid (2) reached for its uid", 10000))
        fail_msg("the limit was not logged");
    close(f1);
    close(f2);
    syslog_stop_clean(h);
    {
        struct syslog_recs r = syslog_read_spool(h);
        assert_int_equal(r.n, 2);
        syslog_recs_free(&r);
    }
}

/* SIGTERM while peers are connected: what they wrote is stored, a last
 * line without its line end too, and the shards are sealed. */
static void test_drain(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("drain");
    struct syslog_recs r;
    int fds[4];

    syslog_stream_start(h, NULL);
    for (int i = 0; i < 4; i++) {
        fds[i] = syslog_stream_connect(h);
        for (int j = 0; j < 100; j++) {
            char m[64];
            snprintf(m, sizeof(m), "<13>drain: connection %d message %d\n", i, j);
            syslog_send_text(fds[i], m);
        }
        syslog_send_text(fds[i], "<13>drain: no line end");
    }
    syslog_stop_clean(h);
    for (int i = 0; i < 4; i++)
        close(fds[i]);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 4 * 101);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 100; j++) {
            char m[64];
            snprintf(m, sizeof(m), "<13>drain: connection %d message %d", i, j);
            syslog_expect_once(&r, SOURCE, producer, m, strlen(m));
        }
    assert_int_equal(harness_count_files(h, "done", ".shard"), 4);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    syslog_recs_free(&r);
    free(producer);
}

static bool socket_exists(void *arg)
{
    struct stat st;

    return stat(arg, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* systemd-socket-activate with two stream sockets, as logshardd.socket and
 * a unit with ListenStream=PATH would pass them: the daemon tells them
 * apart by [syslog] stream_socket, starts on logger's connection, and
 * stores its messages. */
static void test_socket_activation(void **state)
{
    struct harness *h = *state;
    char *sa = syslog_find_program("systemd-socket-activate");
    char *path = syslog_stream_path(h);
    char *producer = syslog_producer_of("activated");
    char config[512], *l1 = NULL, *l2 = NULL;
    struct syslog_recs r;

    if (!sa) {
        print_message("systemd-socket-activate is not installed: skipped\n");
        free(path);
        free(producer);
        skip();
    }
    free(syslog_need_program("logger"));
    snprintf(config, sizeof(config), "[syslog]\nstream_socket = %s\n", path);
    harness_write_config(h, config);
    assert_true(asprintf(&l1, "--listen=%s", h->sock) > 0);
    assert_true(asprintf(&l2, "--listen=%s", path) > 0);
    {
        const char *argv[] = { sa, l1, l2, harness_logshardd(), "--config", h->config,
                               "--spool", h->spool, "--admin-socket", h->admin_sock, NULL };
        harness_spawn(h, argv);
    }
    assert_true(harness_wait_for(socket_exists, path, 10000));
    run_logger(h, NULL, "-t", "activated", "woke the daemon", NULL);
    if (!harness_wait_log(h, "(socket from systemd)", 20000))
        fail_msg("the daemon did not start on the passed sockets");
    if (!harness_wait_log(h, "syslog stream connections on", 20000))
        fail_msg("the daemon did not take the syslog stream socket");
    run_logger(h, NULL, "-t", "activated", "second message", NULL);
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, 2);
    assert_string_equal(find_producer(&r, producer)->source, SOURCE);
    syslog_recs_free(&r);
    free(l1);
    free(l2);
    free(producer);
    free(path);
    free(sa);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_logger, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_python_handler, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_framing, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_bad_frames, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_connections_and_idle, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_rotate, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_access_and_limits, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_drain, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
