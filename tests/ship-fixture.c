/* What the shipping tests share: a mock cluster and a daemon per test,
 * producers written against <logshard.h>, and what a read_committed
 * consumer (kcat) sees checked record by record. */
#include "ship-fixture.h"

#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "logshard.h"

int ship_test_setup(void **state)
{
    struct ship_test *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    harness_init(&t->h);
    *state = t;
    return 0;
}

int ship_test_teardown(void **state)
{
    struct ship_test *t = *state;

    kafka_mock_stop(&t->m);
    if (t->h.daemon > 0)
        (void)harness_stop(&t->h, SIGKILL, 10000);
    harness_cleanup(&t->h);
    free(t);
    return 0;
}

/* ---- producers: applications written against <logshard.h> ---- */

static void producer_main(const char *sock, const char *name, uint64_t count)
{
    logshard_opts opts = { .socket_path = sock, .producer = name };
    logshard *ls = NULL;
    char rec[64];
    int r = logshard_connect(&ls, &opts);

    for (uint64_t i = 0; r == 0 && i < count; i++) {
        int len = snprintf(rec, sizeof(rec), "%s %012" PRIu64, name, i);

        r = logshard_append(ls, rec, (size_t)len);
        if (r == 0 && (i + 1) % 256 == 0)
            r = logshard_flush(ls, -1);
    }
    if (r == 0)
        r = logshard_flush(ls, -1);
    if (ls)
        logshard_close(ls);
    _exit(r == 0 ? 0 : 1);
}

pid_t spawn_producer(struct harness *h, const char *name, uint64_t count)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        if (process_reset_signals() < 0)
            _exit(4);
        producer_main(h->sock, name, count);
    }
    return pid;
}

void wait_producers(const pid_t *pids, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int status;

        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail_msg("producer %u failed (status %d)", i, status);
    }
}

void produce(struct harness *h, const char *name, uint64_t count)
{
    pid_t pid = spawn_producer(h, name, count);

    wait_producers(&pid, 1);
}

/* ---- what a read_committed consumer sees ---- */

/* Checks topic logs.<name> for each producer: records 0 .. count - 1 of
 * it, once each, in order, with key, headers and timestamp as
 * documented. */
void expect_exactly_once(struct ship_test *t, char names[][32], unsigned n,
                                uint64_t count)
{
    for (unsigned p = 0; p < n; p++) {
        char topic[160], buf[128];
        struct kafka_msg *v;
        size_t got;
        uint64_t next = 0, dup = 0, gaps = 0;

        snprintf(topic, sizeof(topic), "logs.%s", names[p]);
        got = kafka_consume(&t->m, topic, &v);
        for (size_t i = 0; i < got; i++) {
            size_t nl = strlen(names[p]);
            uint64_t seq, pos;

            if (strncmp(v[i].payload, names[p], nl) != 0 || v[i].payload[nl] != ' ')
                fail_msg("%s: a record not of %s: '%s'", topic, names[p], v[i].payload);
            seq = strtoull(v[i].payload + nl + 1, NULL, 10);
            if (strcmp(v[i].key, names[p]) != 0)
                fail_msg("%s: key '%s', expected the producer name", topic, v[i].key);
            if (!kafka_header(&v[i], "logshard.position", buf, sizeof(buf)))
                fail_msg("%s: no logshard.position header: %s", topic, v[i].headers);
            pos = strtoull(buf, NULL, 10);
            if (pos != seq)
                fail_msg("%s: record %" PRIu64 " has position %" PRIu64, topic, seq, pos);
            if (!kafka_header(&v[i], "logshard.producer", buf, sizeof(buf)) ||
                strcmp(buf, names[p]) != 0 ||
                !kafka_header(&v[i], "logshard.stream", buf, sizeof(buf)) || strlen(buf) != 32 ||
                !kafka_header(&v[i], "logshard.uid", buf, sizeof(buf)) ||
                !kafka_header(&v[i], "logshard.pid", buf, sizeof(buf)) ||
                !kafka_header(&v[i], "logshard.shard", buf, sizeof(buf)))
                fail_msg("%s: headers missing or wrong: %s", topic, v[i].headers);
            if (v[i].timestamp_ms < 1700000000000ll)
                fail_msg("%s: timestamp %" PRId64 " is not the receive time", topic,
                         v[i].timestamp_ms);
            if (seq < next)
                dup++;
            else if (seq > next)
                gaps++;
            if (seq >= next)
                next = seq + 1;
        }
        kafka_msgs_free(v, got);
        print_message("%s: %zu messages, next %" PRIu64 ", %" PRIu64 " duplicates, %" PRIu64
                      " gaps\n",
                      topic, got, next, dup, gaps);
        if (dup || gaps || next != count || got != count)
            fail_msg("%s: %zu messages for %" PRIu64 " records: %" PRIu64
                     " duplicated, %" PRIu64 " gaps, ends at %" PRIu64,
                     topic, got, count, dup, gaps, next);
    }
}

char *ship_log(struct ship_test *t)
{
    char *path = harness_path(t->h.dir, "ship.log");
    size_t len;
    char *text;

    if (access(path, F_OK) != 0) {
        free(path);
        return strdup("");
    }
    text = harness_slurp(path, &len);
    free(path);
    return text;
}

int run_ship(struct ship_test *t, const char *const *extra)
{
    int status = ship_wait(ship_spawn(&t->h, &t->m, extra), 120000);

    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

const char *const logs_topic[] = { "--topic", "logs.{producer}", NULL };

/* A figure of the running shipper's status file; -1 when it has none. */
int64_t status_figure(const char *path, const char *key)
{
    char buf[8192], needle[64];
    const char *at;
    ssize_t n;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    snprintf(needle, sizeof(needle), "\"%s\":", key);
    at = strstr(buf, needle);
    return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

/* The follower has committed at least that many records and has no lag. */
bool has_shipped(void *arg)
{
    struct shipped_cond *c = arg;

    return status_figure(c->path, "records_shipped") >= c->records &&
           status_figure(c->path, "lag_records") == 0;
}
