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
 *  - over memory_limit_bytes a connection is not read: the sender blocks;
 *  - the drain stores what peers wrote, a last line without its end too;
 *  - socket activation with systemd-socket-activate (two stream sockets). */
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
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "syslog-fixture.h"

#define RUN_MS 30000
#define SOURCE "syslog-stream"

static char *stream_path(struct harness *h)
{
    return harness_path(h->dir, "stream.sock");
}

static void start_with_stream(struct harness *h, const char *config)
{
    char *path = stream_path(h);
    const char *extra[] = { "--syslog-stream-socket", path, NULL };

    harness_write_config(h, config ? config : "");
    harness_start(h, extra);
    free(path);
}

/* A connection from this process (the test is the peer). */
static int connect_stream(struct harness *h)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *path = stream_path(h);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_true(strlen(path) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        fail_msg("connect %s: %s", path, strerror(errno));
    free(path);
    return fd;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            fail_msg("write to the stream socket: %s", n < 0 ? strerror(errno) : "0 bytes");
        p += n;
        len -= (size_t)n;
    }
}

static void write_text(int fd, const char *text)
{
    write_all(fd, text, strlen(text));
}

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
    char *path = stream_path(h);
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
    start_with_stream(h, "[limits]\nmax_record_bytes = 4K\n");
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
    char *path = stream_path(h);
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
    start_with_stream(h, NULL);
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
    start_with_stream(h, "[limits]\nmax_record_bytes = 4K\n");

    fd = connect_stream(h);
    write_text(fd, "<13>framer: lf\n");
    write_text(fd, "<13>framer: crlf\r\n");
    write_all(fd, "<13>framer: nul\0", 16);
    write_text(fd, "\n\n"); /* empty lines: no message */
    write_text(fd, "<13>other: a second identifier\n");
    write_all(fd, longline, long_len + 1);
    write_text(fd, "<13>framer: after the long line\n");
    /* Split across writes, byte by byte. */
    for (const char *p = "<13>framer: dribbled\n"; *p; p++)
        write_all(fd, p, 1);
    close(fd);

    fd2 = connect_stream(h);
    snprintf(frame, sizeof(frame), "%zu ", sizeof(oct_msg) - 1);
    write_text(fd2, frame);
    write_all(fd2, oct_msg, sizeof(oct_msg) - 1);
    write_text(fd2, "5 <13>x"); /* two messages in one write: "<13>x" and "<13>oct: y" */
    write_text(fd2, "10 <13>oct: y");
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

    start_with_stream(h, "[limits]\nmax_record_bytes = 4K\n");
    g = connect_stream(h);
    write_text(g, "<13>good: one\n");

    b1 = connect_stream(h);
    try_write_text(b1, "9 <13>bad: 012 <13>bad: lost"); /* a leading zero */
    if (!harness_wait_for(peer_closed, &b1, 10000))
        fail_msg("the connection with a malformed octet count was not closed");
    close(b1);
    snprintf(needle, sizeof(needle), "(pid %d, uid %u, producer %s) sent a malformed octet count",
             (int)getpid(), (unsigned)getuid(), bad);
    if (!harness_wait_log(h, needle, 10000))
        fail_msg("the daemon's log never said: %s", needle);

    b2 = connect_stream(h);
    try_write_text(b2, "99999 <13>bad: too long");
    if (!harness_wait_for(peer_closed, &b2, 10000))
        fail_msg("the connection with an octet count over the limit was not closed");
    close(b2);
    if (!harness_wait_log(h, "sent an octet-counted message longer than max_record_bytes", 10000))
        fail_msg("the oversized octet count was not logged");

    b3 = connect_stream(h);
    write_text(b3, "30 <13>bad: cut short");
    close(b3);
    if (!harness_wait_log(h, "closed the connection inside an octet-counted message", 10000))
        fail_msg("the unfinished frame was not logged");

    write_text(g, "<13>good: two\n");
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

    start_with_stream(h, "[syslog]\nidle_timeout = 300ms\n");
    fa = connect_stream(h);
    fb = connect_stream(h);
    write_text(fa, "<13>twin: from a\n");
    write_text(fb, "<13>twin: from b\n");
    if (!syslog_wait_sealed(h, 2, 10000))
        fail_msg("the idle connections' shards were not sealed within 10 s");
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    assert_int_equal(syslog_status(h, "stream", "connections"), 2);
    write_text(fa, "<13>twin: a again\n");
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

    start_with_stream(h, "[syslog]\nidle_timeout = 1h\n");
    fd = connect_stream(h);
    write_text(fd, "<13>rot: before\n");
    assert_true(harness_wait_for(has_records, &w, 10000));
    run = harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, "--producer",
                             producer, NULL);
    harness_expect_code(&run, 0, "logctl rotate --producer");
    harness_run_free(&run);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    write_text(fd, "<13>rot: after\n");
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
    start_with_stream(h, config);
    fd = connect_stream(h);
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

    start_with_stream(h, "[limits]\nmax_producers_per_uid = 2\n");
    f1 = connect_stream(h);
    f2 = connect_stream(h);
    write_text(f1, "<13>one: in\n");
    write_text(f2, "<13>two: in\n");
    f3 = connect_stream(h);
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

/* Over memory_limit_bytes (writes stalled by fault injection, so the
 * shard's batch only grows) the connection is not read: its socket
 * buffers fill and a non-blocking writer gets EAGAIN, having handed over
 * about session_buffer_bytes. A daemon that kept reading would take it all. */
static void test_backpressure(void **state)
{
    struct harness *h = *state;
    size_t chunk = 64 * 1024, sent = 0, want = 64 * 1024 * 1024;
    char *buf = malloc(chunk);
    int fd;

    assert_non_null(buf);
    for (size_t i = 0; i < chunk; i++)
        buf[i] = (i % 100 == 99) ? '\n' : 'x';
    memcpy(buf, "<13>flood: ", 11);
    setenv("LOGSHARD_FAULTS", "stall_writes", 1);
    start_with_stream(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 128K\n"
                         "max_frame_bytes = 128K\nmax_record_bytes = 64K\n");
    unsetenv("LOGSHARD_FAULTS");
    fd = connect_stream(h);
    while (sent < want) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        ssize_t n;

        /* A reading daemon makes room within a second. */
        if (poll(&p, 1, 1000) == 0)
            break;
        n = send(fd, buf, chunk, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        assert_true(n > 0);
        sent += (size_t)n;
    }
    if (sent >= want)
        fail_msg("%zu bytes were taken against memory_limit_bytes 1M: the daemon never "
                 "stopped reading", sent);
    if (!harness_wait_log(h, "the sender waits", 10000))
        fail_msg("the pause was not logged");
    assert_true(syslog_status(h, "stream", "pauses") >= 1);
    harness_assert_running(h);
    close(fd);
    free(buf);
    /* The writes never complete: the teardown kills the daemon. */
}

/* Busy connections with the tick's read budget forced down to 16 KiB
 * (LOGSHARD_FAULTS=small_read_turns): they take turns, and every message
 * of every connection is stored once, in the order it was sent. */
static void test_turns(void **state)
{
    enum { CONNS = 6, LINES = 20000 };
    struct harness *h = *state;
    int fds[CONNS];
    struct syslog_recs r;
    size_t next[CONNS] = { 0 };

    setenv("LOGSHARD_FAULTS", "small_read_turns", 1);
    start_with_stream(h, NULL);
    unsetenv("LOGSHARD_FAULTS");
    for (int c = 0; c < CONNS; c++)
        fds[c] = connect_stream(h);
    /* Interleaved writes of 64 lines, so that every connection has more to
     * send while the others are read. */
    for (size_t i = 0; i < LINES; i += 64) {
        for (int c = 0; c < CONNS; c++) {
            char buf[64 * 48];
            size_t len = 0;

            for (size_t k = i; k < i + 64 && k < LINES; k++)
                len += (size_t)snprintf(buf + len, sizeof(buf) - len,
                                        "<13>turn%d: message %07zu\n", c, k);
            write_all(fds[c], buf, len);
        }
    }
    /* Megabytes went through socket buffers of a few hundred KiB, so the
     * daemon read while they were written, 16 KiB a tick. */
    assert_true(syslog_status(h, "", "read_turns") > 0);
    for (int c = 0; c < CONNS; c++)
        close(fds[c]);
    syslog_stop_clean(h);
    r = syslog_read_spool(h);
    assert_int_equal(r.n, CONNS * LINES);
    for (size_t i = 0; i < r.n; i++) {
        int c;
        size_t k;

        if (sscanf(r.v[i].payload, "<13>turn%d: message %zu", &c, &k) != 2 || c < 0 ||
            c >= CONNS)
            fail_msg("a record nobody sent: %.*s", (int)r.v[i].len, r.v[i].payload);
        if (k != next[c])
            fail_msg("connection %d: message %zu where %zu was due (lost, twice or out of "
                     "order)", c, k, next[c]);
        next[c]++;
    }
    syslog_recs_free(&r);
}

/* The count of lines holding needle in what logctl cat prints of every
 * merged file and of done/. */
static size_t count_everywhere(struct harness *h, const char *needle)
{
    char *merged_dir = harness_path(h->spool, "merged");
    struct dirent **names = NULL;
    int n = scandir(merged_dir, &names, NULL, alphasort);
    size_t count = 0;

    if (n < 0)
        n = 0; /* nothing merged yet: done/ alone */

    for (int i = 0; i <= n; i++) {
        struct harness_run r;
        char *path = NULL;

        if (i < n && names[i]->d_name[0] == '.') {
            free(names[i]);
            continue;
        }
        if (i < n)
            path = harness_path(merged_dir, names[i]->d_name);
        r = i < n ? harness_run_logctl(h, "cat", path, NULL)
                  : harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
        harness_expect_code(&r, 0, "logctl cat");
        for (const char *p = r.out; p && (p = strstr(p, needle)); p++)
            count++;
        harness_run_free(&r);
        free(path);
        if (i < n)
            free(names[i]);
    }
    free(names);
    free(merged_dir);
    return count;
}

/* Sends from *sent up to total bytes of buf without blocking, for as long
 * as the daemon takes them within a second of each other. */
static void send_while_taken(int fd, const char *buf, size_t total, size_t *sent)
{
    while (*sent < total) {
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        ssize_t n;

        if (poll(&p, 1, 1000) == 0)
            return;
        n = send(fd, buf + *sent, total - *sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        assert_true(n > 0);
        *sent += (size_t)n;
    }
}

struct stored_wait {
    struct harness *h;
    const char *needle;
    size_t want;
};

/* Whether want messages holding needle are sealed (rotate seals the active
 * shards first). */
static bool stored(void *arg)
{
    struct stored_wait *w = arg;
    struct harness_run r = harness_run_logctl(w->h, "rotate", "--admin-socket",
                                              w->h->admin_sock, NULL);

    harness_expect_code(&r, 0, "logctl rotate");
    harness_run_free(&r);
    return count_everywhere(w->h, w->needle) >= w->want;
}

/* Many connections each leave a message unfinished while the daemon is
 * over memory_limit_bytes. A paused connection keeps only the unfinished
 * message, not the receive buffer it was read into: 32 buffers of 64 KiB
 * would stay above the point where paused connections read again (three
 * quarters of the limit) for good, and the ends of the messages, sent
 * later, would never be read. */
static void test_unfinished_messages_over_memory_limit(void **state)
{
    enum { CONNS = 32 };
    struct harness *h = *state;
    struct stored_wait w = { h, ": second", CONNS };
    int fds[CONNS];

    start_with_stream(h, "[limits]\nmemory_limit_bytes = 1M\nsession_buffer_bytes = 128K\n"
                         "max_frame_bytes = 128K\nmax_record_bytes = 64K\n");
    for (int c = 0; c < CONNS; c++) {
        char text[96];

        fds[c] = connect_stream(h);
        snprintf(text, sizeof(text), "<13>unf%02d: first\n<13>unf%02d: sec", c, c);
        write_text(fds[c], text);
    }
    if (!harness_wait_log(h, "the sender waits", 10000))
        fail_msg("no connection paused: %d receive buffers of 64 KiB did not go over "
                 "memory_limit_bytes 1M", CONNS);
    for (int c = 0; c < CONNS; c++) {
        write_text(fds[c], "ond\n");
        /* Open: the drain at the end reads every connection, paused or not,
         * and would hide a connection that is never read again. */
    }
    if (!harness_wait_for(stored, &w, 20000))
        fail_msg("%zu of %d second messages stored within 20 s: paused connections were "
                 "never read again", count_everywhere(h, w.needle), CONNS);
    assert_int_equal(count_everywhere(h, ": first"), CONNS);
    harness_assert_running(h);
    for (int c = 0; c < CONNS; c++)
        close(fds[c]);
    syslog_stop_clean(h);
    assert_int_equal(count_everywhere(h, ": second"), CONNS);
}

/* A stream connection over its producer's quota (over_quota = wait) is
 * not read: the sender is held by its socket buffer, not dropped. Each
 * merge --delete frees room and it goes on; every message is stored once. */
static void test_quota_waits(void **state)
{
    struct harness *h = *state;
    const size_t messages = 100000;
    size_t len = 0, sent = 0;
    char *buf = malloc(messages * 40);
    int fd;

    assert_non_null(buf);
    for (size_t i = 0; i < messages; i++)
        len += (size_t)sprintf(buf + len, "<13>quotad: message %07zu\n", i);
    start_with_stream(h, "[shard]\nmax_shard_bytes = 64K\n"
                         "[producer_quotas]\nquotad.u* = 512K\n");
    fd = connect_stream(h);
    send_while_taken(fd, buf, len, &sent);
    if (sent >= len)
        fail_msg("all %zu bytes were taken against a quota of 512K", sent);
    if (!harness_wait_log(h, "is at its quota", 10000))
        fail_msg("the quota wait was not logged");
    {
        struct harness_run r = harness_run_logctl(h, "status", "--json", "--admin-socket",
                                                  h->admin_sock, NULL);
        harness_expect_code(&r, 0, "logctl status --json");
        harness_expect_in(r.out, "\"producers_waiting\":1", "status shows the wait");
        harness_run_free(&r);
    }
    for (int round = 0; round < 200 && sent < len; round++) {
        struct harness_run r = harness_run_logctl(h, "merge", "--spool", h->spool, "--delete",
                                                  NULL);
        harness_expect_code(&r, 0, "logctl merge --delete");
        harness_run_free(&r);
        send_while_taken(fd, buf, len, &sent);
    }
    assert_int_equal(sent, len);
    close(fd);
    syslog_stop_clean(h);
    assert_int_equal(count_everywhere(h, "quotad: message "), messages);
    free(buf);
}

/* SIGTERM while peers are connected: what they wrote is stored, a last
 * line without its line end too, and the shards are sealed. */
static void test_drain(void **state)
{
    struct harness *h = *state;
    char *producer = syslog_producer_of("drain");
    struct syslog_recs r;
    int fds[4];

    start_with_stream(h, NULL);
    for (int i = 0; i < 4; i++) {
        fds[i] = connect_stream(h);
        for (int j = 0; j < 100; j++) {
            char m[64];
            snprintf(m, sizeof(m), "<13>drain: connection %d message %d\n", i, j);
            write_text(fds[i], m);
        }
        write_text(fds[i], "<13>drain: no line end");
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
    char *path = stream_path(h);
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
        cmocka_unit_test_setup_teardown(test_backpressure, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_unfinished_messages_over_memory_limit, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_quota_waits, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_turns, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_drain, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_socket_activation, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
