/* The real logctl cat over a spool of thousands of sealed shards, built by
 * hand: enough files that cat indexes them in several threads
 * (logctl/cat-order.c), each thread a run of the list. Every record comes
 * out once, each producer stream in position order whatever its files'
 * names say, a time window gives exactly its records, and a damaged shard
 * is reported when it is read and only then. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "harness.h"
#include "shard-bytes.h"
#include "shard_format.h"
#include "spool_names.h"

#define SECOND 1000000000ull
#define T0 (1796119200ull * SECOND) /* 2026-12-01T10:00:00Z */
/* Producer p: P_SHARDS shards of two records; q: Q_SHARDS of one. More
 * files in all than cat takes in one thread (1,024 a thread). */
#define P_SHARDS 2400u
#define Q_SHARDS 300u

/* Where the shard of position k of producer p is named: ids in an order
 * that is not the stream's, so that the stream's shards must trade places
 * across the threads' runs. */
static uint64_t p_id(unsigned k)
{
    return (uint64_t)((k * 1543u) % P_SHARDS) + 1u; /* 1543 is prime to 2400 */
}

static void write_shard(const char *done, const char *producer, uint64_t id, unsigned stream,
                        uint64_t first_position, unsigned records, uint64_t first_ts)
{
    struct shard_header h;
    struct bytebuf b = { 0 };
    char *name = NULL, *path;
    size_t start;
    int fd;

    memset(&h, 0, sizeof(h));
    h.version = SHARD_FORMAT_VERSION_STREAM;
    h.pid = 4100;
    h.shard_id = id;
    h.created_ns = first_ts - SECOND / 1000;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    memset(h.stream_id, (int)stream, sizeof(h.stream_id));
    h.first_position = first_position;
    start = shard_bytes_add_header(&b, &h);
    for (unsigned i = 0; i < records; i++) {
        char payload[64];
        int n = snprintf(payload, sizeof(payload), "%s %" PRIu64, producer, first_position + i);

        shard_bytes_add_record(&b, payload, (uint32_t)n, first_ts + i * SECOND, NULL);
    }
    shard_bytes_add_trailer(&b, start, records, first_ts + (records - 1) * SECOND);
    assert_int_equal(spool_name_new(SPOOL_SHARD, producer, strlen(producer), id, &name), 0);
    path = harness_path(done, name);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, b.p, b.len), (ssize_t)b.len);
    assert_int_equal(close(fd), 0);
    free(path);
    free(name);
    free(b.p);
}

/* The spool: p's record at position j received at T0 + j s, q's record k
 * at T0 + 8k s + 0.5 s, so the two interleave in time. */
static void make_spool(struct harness *h)
{
    char *done = harness_path(h->spool, "done");

    assert_true(mkdir(h->spool, 0750) == 0 || errno == EEXIST);
    assert_int_equal(mkdir(done, 0750), 0);
    for (unsigned k = 0; k < P_SHARDS; k++)
        write_shard(done, "p", p_id(k), 1, 2ull * k, 2, T0 + 2ull * k * SECOND);
    for (unsigned k = 0; k < Q_SHARDS; k++)
        write_shard(done, "q", k + 1u, 2, k, 1, T0 + 8ull * k * SECOND + SECOND / 2);
    free(done);
}

/* Checks that out is exactly the lines "p FROM" to "p TO" and then "q
 * QFROM" to "q QTO" (an empty range when from > to). */
static void expect_lines(const char *out, unsigned from, unsigned to, unsigned qfrom, unsigned qto)
{
    const char *at = out ? out : "";
    char want[64];

    for (unsigned j = from; j <= to && from <= to; j++) {
        size_t n = (size_t)snprintf(want, sizeof(want), "p %u\n", j);

        if (strncmp(at, want, n) != 0)
            fail_msg("expected 'p %u', got '%.40s'", j, at);
        at += n;
    }
    for (unsigned k = qfrom; k <= qto && qfrom <= qto; k++) {
        size_t n = (size_t)snprintf(want, sizeof(want), "q %u\n", k);

        if (strncmp(at, want, n) != 0)
            fail_msg("expected 'q %u', got '%.40s'", k, at);
        at += n;
    }
    if (*at)
        fail_msg("more than expected: '%.40s'", at);
}

static void test_every_record_in_stream_order(void **state)
{
    struct harness *h = *state;
    struct harness_run r;

    make_spool(h);
    r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
    harness_expect_code(&r, 0, "logctl cat of the whole spool");
    expect_lines(r.out, 0, 2 * P_SHARDS - 1, 0, Q_SHARDS - 1);
    harness_run_free(&r);
    r = harness_run_logctl(h, "cat", "--spool", h->spool, "--producer", "q", NULL);
    harness_expect_code(&r, 0, "logctl cat --producer q");
    expect_lines(r.out, 1, 0, 0, Q_SHARDS - 1);
    harness_run_free(&r);
}

/* A minute from T0 + 1000 s: p's positions 1000 to 1060, q's 125 to 132;
 * p's shards hold them in files of every run of the list (p_id), q's in
 * the last. */
static void test_window(void **state)
{
    struct harness *h = *state;
    char since[32], until[32];
    struct harness_run r;

    make_spool(h);
    snprintf(since, sizeof(since), "@%llu", (unsigned long long)(T0 / SECOND + 1000));
    snprintf(until, sizeof(until), "@%llu", (unsigned long long)(T0 / SECOND + 1060));
    r = harness_run_logctl(h, "cat", "--spool", h->spool, "--since", since, "--until", until,
                           NULL);
    harness_expect_code(&r, 0, "logctl cat of a minute");
    expect_lines(r.out, 1000, 1060, 125, 132);
    harness_run_free(&r);
}

/* A record of p's shard at position 20 damaged (its trailer intact): the
 * whole spool's cat says where and fails; a window that does not hold the
 * shard never reads it. */
static void test_damage_reported_when_read(void **state)
{
    struct harness *h = *state;
    char *name = NULL, *done = harness_path(h->spool, "done"), *path, *bytes, *at;
    char since[32];
    struct harness_run r;
    size_t len;
    int fd;

    make_spool(h);
    assert_int_equal(spool_name_new(SPOOL_SHARD, "p", 1, p_id(10), &name), 0);
    path = harness_path(done, name);
    bytes = harness_slurp(path, &len);
    at = memmem(bytes, len, "p 20", 4);
    assert_non_null(at);
    fd = open(path, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, at - bytes), 1);
    assert_int_equal(close(fd), 0);

    r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
    harness_expect_code(&r, 1, "logctl cat of a spool with a damaged record");
    assert_non_null(r.err);
    assert_non_null(strstr(r.err, name));
    harness_run_free(&r);

    snprintf(since, sizeof(since), "@%llu", (unsigned long long)(T0 / SECOND + 100));
    r = harness_run_logctl(h, "cat", "--spool", h->spool, "--since", since, NULL);
    harness_expect_code(&r, 0, "logctl cat --since past the damaged shard");
    assert_true(r.err == NULL || r.err[0] == '\0');
    expect_lines(r.out, 100, 2 * P_SHARDS - 1, 13, Q_SHARDS - 1);
    harness_run_free(&r);
    free(bytes);
    free(path);
    free(done);
    free(name);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_record_in_stream_order, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_window, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_damage_reported_when_read, harness_setup,
                                        harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
