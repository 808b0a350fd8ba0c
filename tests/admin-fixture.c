/* The fixtures the operator-side integration tests share (tests/test-admin*.c):
 * logctl runs with both outputs captured, JSON replies, producers in this
 * process, rotations, files in the spool, and the teardown that ends a
 * child left running; admin-fixture.h says what each one does. */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"

#include "admin-fixture.h"

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- running logctl ---- */


struct json_value *parse_json(const char *text, size_t len)
{
    struct json_value *v = NULL;
    const char *why = NULL;
    size_t off = 0;

    if (json_parse(text, len, &v, &why, &off) < 0)
        fail_msg("not JSON (%s at %zu): %.*s", why ? why : "?", off, (int)len, text);
    return v;
}

/* Splits JSON lines (NDJSON) into parsed values. */
size_t parse_lines(const char *text, struct json_value **out, size_t max)
{
    size_t n = 0;

    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        assert_true(n < max);
        out[n++] = parse_json(p, (size_t)(nl - p));
        p = nl + 1;
    }
    return n;
}

void free_lines(struct json_value **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        json_value_free(v[i]);
}

struct json_value *status_json(struct harness *h)
{
    struct harness_run r = harness_run_logctl(h, "status", "--json", "--admin-socket", h->admin_sock, NULL);
    struct json_value *v;

    harness_expect_code(&r, 0, "logctl status --json");
    v = parse_json(r.out, r.out_len);
    harness_run_free(&r);
    return v;
}

/* ---- producers, in this process ---- */

logshard *producer_open(struct harness *h, const char *name)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = name };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &opts), 0);
    return ls;
}

void producer_send(logshard *ls, const void *rec, size_t len)
{
    assert_int_equal(logshard_append(ls, rec, len), 0);
}

void producer_sendf(logshard *ls, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    producer_send(ls, buf, (size_t)n);
}

void producer_flush(logshard *ls)
{
    assert_int_equal(logshard_flush(ls, 20000), 0);
}

void rotate(struct harness *h, const char *producer)
{
    struct harness_run r = producer
                       ? harness_run_logctl(h, "rotate", "--producer", producer, "--admin-socket",
                                    h->admin_sock, NULL)
                       : harness_run_logctl(h, "rotate", "--admin-socket", h->admin_sock, NULL);
    harness_expect_code(&r, 0, "logctl rotate");
    harness_run_free(&r);
}

/* Files in spool/sub whose names start with prefix. */
size_t count_prefix(struct harness *h, const char *sub, const char *prefix)
{
    char *path = harness_path(h->spool, sub);
    DIR *d = opendir(path);
    struct dirent *de;
    size_t n = 0;

    free(path);
    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* The path of the one file in spool/sub starting with prefix. */
char *find_file(struct harness *h, const char *sub, const char *prefix)
{
    char *path = harness_path(h->spool, sub);
    DIR *d = opendir(path);
    struct dirent *de;
    char *found = NULL;

    assert_non_null(d);
    while ((de = readdir(d)) != NULL)
        if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
            assert_null(found);
            found = harness_path(path, de->d_name);
        }
    closedir(d);
    free(path);
    assert_non_null(found);
    return found;
}

/* ---- fixtures ---- */

/* A child still running when a test fails (cat --follow) would keep the
 * test's output pipes open and the runner waiting; teardown ends it. */
pid_t live_child = -1;

int teardown(void **state)
{
    if (live_child > 0) {
        kill(live_child, SIGKILL);
        (void)waitpid(live_child, NULL, 0);
        live_child = -1;
    }
    return harness_teardown(state);
}

void stop_daemon(struct harness *h)
{
    int status = harness_stop(h, SIGTERM, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}
