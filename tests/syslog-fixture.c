/* What the syslog input tests share (test-syslog-datagram.c,
 * test-syslog-stream.c, test-syslog-stream-limits.c): senders from $PATH,
 * connections to the stream socket, and the spool read back through the
 * real logctl. */
#include "syslog-fixture.h"

#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "json.h"

#define STOP_MS 30000

/* The program's path from $PATH (harness_run does not search it), or
 * NULL. */
char *syslog_find_program(const char *name)
{
    const char *path = getenv("PATH");
    char *copy = strdup(path && *path ? path : "/usr/bin:/bin"), *save = NULL;

    assert_non_null(copy);
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char *full = harness_path(dir, name);
        if (access(full, X_OK) == 0) {
            free(copy);
            return full;
        }
        free(full);
    }
    free(copy);
    return NULL;
}

/* A sender someone else wrote, or the test is skipped (exit 77 style). */
char *syslog_need_program(const char *name)
{
    char *p = syslog_find_program(name);

    if (!p) {
        print_message("%s is not installed: skipped\n", name);
        skip();
    }
    return p;
}

/* ---- reading the spool back ---- */

void syslog_recs_free(struct syslog_recs *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i].payload);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* Every record of the spool, as logctl cat --spool --json shows it, once
 * logctl verify has found every shard sound (its seal trailer's length
 * included, which counts the records' credential blocks). */
struct syslog_recs syslog_read_spool(struct harness *h)
{
    struct harness_run run = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
    struct syslog_recs r = { NULL, 0 };
    size_t cap = 0;
    char *line, *nl;

    harness_expect_code(&run, 0, "logctl verify --spool");
    harness_run_free(&run);
    run = harness_run_logctl(h, "cat", "--spool", h->spool, "--json", NULL);

    harness_expect_code(&run, 0, "logctl cat --spool --json");
    for (line = run.out; (nl = memchr(line, '\n', run.out_len - (size_t)(line - run.out)));
         line = nl + 1) {
        struct json_value *v = NULL;
        const struct json_value *cred, *pl;
        const char *why = NULL;
        struct syslog_rec *x;

        if (json_parse(line, (size_t)(nl - line), &v, &why, NULL) != 0)
            fail_msg("logctl cat --json printed a line that is not JSON (%s): %.*s", why,
                     (int)(nl - line), line);
        if (r.n == cap) { /* doubling: a spool may hold 100,000s of records */
            cap = cap ? cap * 2 : 64;
            r.v = realloc(r.v, cap * sizeof(*r.v));
            assert_non_null(r.v);
        }
        x = &r.v[r.n++];
        memset(x, 0, sizeof(*x));
        snprintf(x->producer, sizeof(x->producer), "%s", json_get_str(v, "producer", "?"));
        snprintf(x->source, sizeof(x->source), "%s", json_get_str(v, "source", "?"));
        snprintf(x->shard, sizeof(x->shard), "%s", json_get_str(v, "shard", "?"));
        x->hdr_pid = json_get_u64(v, "pid", UINT64_MAX);
        x->hdr_uid = json_get_u64(v, "uid", UINT64_MAX);
        x->hdr_gid = json_get_u64(v, "gid", UINT64_MAX);
        cred = json_get(v, "credentials");
        if (!cred)
            fail_msg("a record without credentials: %.*s", (int)(nl - line), line);
        x->pid = json_get_u64(cred, "pid", UINT64_MAX);
        x->uid = json_get_u64(cred, "uid", UINT64_MAX);
        x->gid = json_get_u64(cred, "gid", UINT64_MAX);
        pl = json_get(v, "payload");
        if (!pl) {
            pl = json_get(v, "payload_base64");
            x->b64 = true;
        }
        assert_non_null(pl);
        assert_int_equal(pl->type, JSON_STRING);
        x->payload = malloc(pl->string_len + 1);
        assert_non_null(x->payload);
        memcpy(x->payload, pl->string, pl->string_len + 1);
        x->len = pl->string_len;
        json_value_free(v);
    }
    harness_run_free(&run);
    return r;
}

/* The one record of producer with exactly these payload bytes; fails the
 * test unless there is exactly one. */
const struct syslog_rec *syslog_expect_once(const struct syslog_recs *r, const char *source,
                                           const char *producer, const void *payload,
                                           size_t len)
{
    const struct syslog_rec *found = NULL;
    size_t hits = 0;
    char *b64 = malloc(base64_encoded_len(len) + 1);

    assert_non_null(b64);
    base64_encode(payload, len, b64);
    for (size_t i = 0; i < r->n; i++) {
        const struct syslog_rec *x = &r->v[i];
        bool same = x->b64 ? strcmp(x->payload, b64) == 0
                           : x->len == len && memcmp(x->payload, payload, len) == 0;

        if (same && strcmp(x->producer, producer) == 0) {
            found = x;
            hits++;
        }
    }
    if (hits != 1) {
        for (size_t i = 0; i < r->n; i++)
            fprintf(stderr, "  record %zu: %s %s %.*s\n", i, r->v[i].producer,
                    r->v[i].b64 ? "(base64)" : "", (int)(r->v[i].len > 120 ? 120 : r->v[i].len),
                    r->v[i].payload);
        fail_msg("producer %s: %zu records of the %zu-byte payload %.60s, expected 1", producer,
                 hits, len, b64);
    }
    free(b64);
    assert_string_equal(found->source, source);
    return found;
}

/* The record must name this process as its sender, in its credentials
 * and (it opened the shard) the header. */
void syslog_expect_our_creds(const struct syslog_rec *x)
{
    assert_int_equal(x->pid, (uint64_t)getpid());
    assert_int_equal(x->uid, (uint64_t)getuid());
    assert_int_equal(x->gid, (uint64_t)getgid());
    assert_int_equal(x->hdr_uid, (uint64_t)getuid());
}

char *syslog_producer_of(const char *ident)
{
    char *s = NULL;

    assert_true(asprintf(&s, "%s.u%u", ident, (unsigned)getuid()) > 0);
    return s;
}

void syslog_stop_clean(struct harness *h)
{
    harness_assert_clean_exit(harness_stop(h, SIGTERM, STOP_MS));
}

uint64_t syslog_status(struct harness *h, const char *group, const char *key)
{
    struct harness_run run =
        harness_run_logctl(h, "status", "--json", "--admin-socket", h->admin_sock, NULL);
    struct json_value *v = NULL;
    const struct json_value *o;
    uint64_t n;

    harness_expect_code(&run, 0, "logctl status --json");
    assert_int_equal(json_parse(run.out, run.out_len, &v, NULL, NULL), 0);
    o = group && !*group ? v : json_get(v, "syslog");
    if (!o)
        fail_msg("logctl status --json has no syslog object: %s", run.out);
    if (group && *group) {
        char *path = strdup(group), *save = NULL;

        assert_non_null(path);
        for (char *part = strtok_r(path, ".", &save); part; part = strtok_r(NULL, ".", &save))
            o = json_get(o, part);
        free(path);
    }
    n = json_get_u64(o, key, UINT64_MAX);
    json_value_free(v);
    harness_run_free(&run);
    return n;
}


struct sealed_count {
    struct harness *h;
    size_t at_least;
};

static bool sealed_has(void *arg)
{
    struct sealed_count *c = arg;

    return harness_count_files(c->h, "done", ".shard") >= c->at_least;
}

bool syslog_wait_sealed(struct harness *h, size_t n, int timeout_ms)
{
    struct sealed_count c = { h, n };

    return harness_wait_for(sealed_has, &c, timeout_ms);
}

/* ---- the stream socket ---- */

char *syslog_stream_path(struct harness *h)
{
    return harness_path(h->dir, "stream.sock");
}

void syslog_stream_start(struct harness *h, const char *config)
{
    char *path = syslog_stream_path(h);
    const char *extra[] = { "--syslog-stream-socket", path, NULL };

    harness_write_config(h, config ? config : "");
    harness_start(h, extra);
    free(path);
}

int syslog_stream_connect(struct harness *h)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *path = syslog_stream_path(h);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_true(strlen(path) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        fail_msg("connect %s: %s", path, strerror(errno));
    free(path);
    return fd;
}

void syslog_send_all(int fd, const void *buf, size_t len)
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

void syslog_send_text(int fd, const char *text)
{
    syslog_send_all(fd, text, strlen(text));
}

/* ---- the datagram socket ---- */

char *syslog_dgram_path(struct harness *h)
{
    return harness_path(h->dir, "log.sock");
}

void syslog_dgram_start(struct harness *h, const char *config)
{
    char *path = syslog_dgram_path(h);
    const char *extra[] = { "--syslog-socket", path, NULL };

    harness_write_config(h, config ? config : "");
    harness_start(h, extra);
    free(path);
}

/* A raw datagram from this process: the test is the sender, so the
 * credentials must be its own. */
int syslog_dgram_socket(void)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    int size = 256 * 1024;

    assert_true(fd >= 0);
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)); /* best effort */
    return fd;
}

struct sockaddr_un syslog_dgram_address(struct harness *h, socklen_t *ret_len)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *path = syslog_dgram_path(h);

    assert_true(strlen(path) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1);
    free(path);
    return sa;
}

void syslog_dgram_send_raw(struct harness *h, const void *buf, size_t len)
{
    socklen_t sl;
    struct sockaddr_un sa = syslog_dgram_address(h, &sl);
    int fd = syslog_dgram_socket();
    ssize_t n = sendto(fd, buf, len, 0, (struct sockaddr *)&sa, sl);

    if (n < 0 || (size_t)n != len)
        fail_msg("sendto %s (%zu bytes): %s", sa.sun_path, len, n < 0 ? strerror(errno) : "short");
    close(fd);
}

void syslog_dgram_send_text(struct harness *h, const char *text)
{
    syslog_dgram_send_raw(h, text, strlen(text));
}
