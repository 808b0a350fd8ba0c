/* logctl ship against librdkafka's mock cluster (the real Kafka protocol,
 * in a process of its own), read back by kcat with
 * isolation.level=read_committed: every record of the spool once, in order
 * per producer, with its key, timestamp and headers; a shipper killed with
 * SIGKILL at random moments and started again duplicates and loses
 * nothing; the brokers going away make it wait and say so; a second
 * shipper on the spool is refused (fencing by a shipper elsewhere with the
 * same transactional id is Kafka's: librdkafka 2.0.2's mock cluster gives
 * each producer a new id, so test-ship-fence.c injects the fence); merge
 * --delete removes only what is shipped, also while both run;
 * on_shipped = delete removes shipped shards
 * and records their streams' positions, and so does logctl prune by the
 * same rule; librdkafka's refusal of a setting names the setting.
 *
 * The kill moments come from harness_rng_next() (seed printed).
 * LOGSHARD_SHIP_ROUNDS (default 50) sets the number of kills;
 * LOGSHARD_TEST_FILTER=<test name> runs one test alone. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
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
#include "ship-fixture.h"
#include "logshard.h"

#define MAX_PRODUCERS 8u

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);

    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* ---- the tests ---- */

/* Sealed shards of three producers: shipped once, with every field; a
 * second run ships nothing more. */
static void test_ship_sealed(void **state)
{
    struct ship_test *t = *state;
    char names[3][32] = { "web", "db", "cron.daily" };
    char *log;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    for (unsigned p = 0; p < 3; p++)
        produce(&t->h, names[p], 3000);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, logs_topic), 0);
    expect_exactly_once(t, names, 3, 3000);
    assert_int_equal(run_ship(t, logs_topic), 0);
    expect_exactly_once(t, names, 3, 3000);
    log = ship_log(t);
    harness_expect_in(log, "shipped 9000 records", "the first run's summary");
    harness_expect_in(log, "shipped 0 records", "the second run's summary");
    free(log);
}

/* Records of the syslog inputs go out as any other, with what makes
 * them syslog: logshard.source, and for a datagram its own sender's uid
 * and pid, which differ within one shard (two processes, one identifier). */
static void test_ship_syslog(void **state)
{
    struct ship_test *t = *state;
    char *dsock = harness_path(t->h.dir, "dgram.sock");
    char *ssock = harness_path(t->h.dir, "stream.sock");
    const char *extra[] = { "--syslog-socket", dsock, "--syslog-stream-socket", ssock, NULL };
    const char *const topic[] = { "--topic", "logs.{producer}", NULL };
    char producer[64], buf[64];
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct kafka_msg *v;
    pid_t child;
    size_t got;
    int fd, status;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, extra);
    strcpy(sa.sun_path, dsock);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_true(sendto(fd, "<13>sl: from the parent", 23, 0, (struct sockaddr *)&sa,
                       sizeof(sa)) == 23);
    child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(sendto(fd, "<13>sl: from the child", 22, 0, (struct sockaddr *)&sa,
                     sizeof(sa)) == 22 ? 0 : 1);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
    strcpy(sa.sun_path, ssock);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_true(write(fd, "<13>st: over a stream\n", 22) == 22);
    close(fd);
    if (!harness_wait_log(&t->h, "sealed done/st.u", 10000))
        fail_msg("the stream connection's shard was not sealed");
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, topic), 0);

    snprintf(producer, sizeof(producer), "logs.sl.u%u", (unsigned)getuid());
    got = kafka_consume(&t->m, producer, &v);
    if (got != 2)
        fail_msg("%s: %zu messages, expected 2", producer, got);
    for (size_t i = 0; i < got; i++) {
        bool parent = strcmp(v[i].payload, "<13>sl: from the parent") == 0;

        if (!parent && strcmp(v[i].payload, "<13>sl: from the child") != 0)
            fail_msg("%s: unexpected payload '%s'", producer, v[i].payload);
        if (!kafka_header(&v[i], "logshard.source", buf, sizeof(buf)) ||
            strcmp(buf, "syslog-datagram") != 0)
            fail_msg("%s: logshard.source wrong: %s", producer, v[i].headers);
        if (!kafka_header(&v[i], "logshard.pid", buf, sizeof(buf)) ||
            strtol(buf, NULL, 10) != (parent ? (long)getpid() : (long)child))
            fail_msg("%s: logshard.pid is not the record's sender's: %s", producer,
                     v[i].headers);
        if (!kafka_header(&v[i], "logshard.uid", buf, sizeof(buf)) ||
            strtoul(buf, NULL, 10) != (unsigned long)getuid())
            fail_msg("%s: logshard.uid wrong: %s", producer, v[i].headers);
    }
    kafka_msgs_free(v, got);

    snprintf(producer, sizeof(producer), "logs.st.u%u", (unsigned)getuid());
    got = kafka_consume(&t->m, producer, &v);
    if (got != 1 || strcmp(v[0].payload, "<13>st: over a stream") != 0)
        fail_msg("%s: %zu messages, expected the one line", producer, got);
    if (!kafka_header(&v[0], "logshard.source", buf, sizeof(buf)) ||
        strcmp(buf, "syslog-stream") != 0 ||
        !kafka_header(&v[0], "logshard.pid", buf, sizeof(buf)) ||
        strtol(buf, NULL, 10) != (long)getpid())
        fail_msg("%s: headers wrong: %s", producer, v[0].headers);
    kafka_msgs_free(v, got);
    free(dsock);
    free(ssock);
}

/* The shipper killed at random moments while producers append and the
 * daemon runs; each time started again. Then the rest: exactly once. */
static void test_ship_kill_rounds(void **state)
{
    struct ship_test *t = *state;
    uint64_t rounds = env_u64("LOGSHARD_SHIP_ROUNDS", 50);
    uint64_t count = 30000;
    char names[4][32] = { "alpha", "beta", "gamma", "delta" };
    const char *follow[] = { "--topic", "logs.{producer}", "--follow", "--set",
                             "transaction_records=700", NULL };
    pid_t pids[4];

    /* Small shards: many roll-overs and seals while the shipper follows. */
    harness_write_config(&t->h, "[shard]\nmax_shard_bytes = 64K\n");
    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    for (unsigned p = 0; p < 4; p++)
        pids[p] = spawn_producer(&t->h, names[p], count);
    for (uint64_t r = 0; r < rounds; r++) {
        pid_t ship = ship_spawn(&t->h, &t->m, follow);
        uint64_t ms = 300 + harness_rng_next() % 1500;
        int status;

        usleep((useconds_t)ms * 1000u); /* the kill moment, not a wait */
        kill(ship, SIGKILL);
        status = ship_wait(ship, 30000);
        if (!WIFSIGNALED(status)) {
            char *log = ship_log(t);

            fail_msg("round %" PRIu64 ": logctl ship ended before the kill (status %d): %s", r,
                     status, log);
        }
    }
    wait_producers(pids, 4);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, logs_topic), 0);
    expect_exactly_once(t, names, 4, count);
}

/* A second shipper on the same spool is refused at once, naming the
 * first; nothing is duplicated. */
static void test_ship_second_refused(void **state)
{
    struct ship_test *t = *state;
    char names[1][32] = { "solo" };
    const char *follow[] = { "--topic", "logs.{producer}", "--follow", NULL };
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct harness_file_needle cond = { status_path, "\"lag_records\":0" };
    pid_t first;
    char *log;

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 1000);
    first = ship_spawn(&t->h, &t->m, follow);
    assert_true(harness_wait_for(harness_file_has, &cond, 60000));
    assert_int_equal(run_ship(t, logs_topic), 2);
    log = ship_log(t);
    harness_expect_in(log, "another logctl ship", "the second shipper's refusal");
    free(log);
    kill(first, SIGTERM);
    assert_true(WIFEXITED(ship_wait(first, 30000)));
    expect_exactly_once(t, names, 1, 1000);
    free(status_path);
}

/* A follower of many connected producers, each with an active shard,
 * started with the soft descriptor limit of a login shell (1024; 64
 * here): it takes its hard limit and ships every record. Under a hard
 * limit that small it stops with an error that says so, and does not
 * crash. */
static void test_ship_many_active_shards(void **state)
{
    enum { N = 200 };
    struct ship_test *t = *state;
    const char *follow[] = { "--topic", "many", "--follow", NULL };
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct shipped_cond cond = { status_path, N };
    bool seen[N] = { false };
    logshard *ls[N];
    struct kafka_msg *v = NULL;
    size_t got;
    int status;
    pid_t ship;
    char *log;

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    for (int i = 0; i < N; i++) {
        char name[32];
        logshard_opts o = { .socket_path = t->h.sock, .producer = name };

        snprintf(name, sizeof(name), "many-%d", i);
        ls[i] = NULL;
        assert_int_equal(logshard_connect(&ls[i], &o), 0);
        assert_int_equal(logshard_append(ls[i], name, strlen(name)), 0);
        assert_int_equal(logshard_flush(ls[i], 30000), 0);
    }

    ship = ship_spawn_nofile(&t->h, &t->m, follow, 64, 64);
    status = ship_wait(ship, 60000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    log = ship_log(t);
    harness_expect_in(log, "Too many open files (a follower holds a descriptor for each active "
                      "shard", "the follower's error under a hard limit of 64");
    free(log);

    ship = ship_spawn_nofile(&t->h, &t->m, follow, 64, 0);
    if (!harness_wait_for(has_shipped, &cond, 60000)) {
        log = ship_log(t);
        fail_msg("the follower did not ship the %d active shards' records: %s", N, log);
    }
    kill(ship, SIGTERM);
    status = ship_wait(ship, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    got = kafka_consume(&t->m, "many", &v);
    for (size_t i = 0; i < got; i++) {
        int k = atoi(v[i].payload + strlen("many-"));

        if (strncmp(v[i].payload, "many-", 5) != 0 || k < 0 || k >= N || seen[k])
            fail_msg("unexpected or repeated message '%s'", v[i].payload);
        seen[k] = true;
    }
    assert_int_equal(got, N);
    kafka_msgs_free(v, got);
    for (int i = 0; i < N; i++)
        logshard_close(ls[i]);
    free(status_path);
}

/* The brokers all go away while shipping: the shipper waits and says so
 * in its status, then ships everything once they are back. */
static void test_ship_broker_outage(void **state)
{
    struct ship_test *t = *state;
    char names[2][32] = { "north", "south" };
    const char *follow[] = { "--topic", "logs.{producer}", "--follow", NULL };
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct harness_file_needle waiting = { status_path, "waiting for the brokers" };
    struct harness_file_needle caught_up = { status_path, "\"lag_records\":0," };
    pid_t pid, ship;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 2000);
    ship = ship_spawn(&t->h, &t->m, follow);
    assert_true(harness_wait_for(harness_file_has, &caught_up, 60000));
    for (int b = 1; b <= 3; b++)
        kafka_mock_command(&t->m, "down %d", b);
    pid = spawn_producer(&t->h, names[1], 5000);
    if (!harness_wait_for(harness_file_has, &waiting, 90000)) {
        char *log = ship_log(t);

        fail_msg("the status never said it waits for the brokers: %s", log);
    }
    for (int b = 1; b <= 3; b++)
        kafka_mock_command(&t->m, "up %d", b);
    wait_producers(&pid, 1);
    {
        /* The follower itself gets going again and catches up. */
        struct shipped_cond all = { status_path, 7000 };

        if (!harness_wait_for(has_shipped, &all, 180000)) {
            char *log = ship_log(t);

            fail_msg("the follower did not ship all 7000 records within 180 s of the "
                     "brokers' return: %s",
                     log);
        }
    }
    kill(ship, SIGTERM);
    assert_true(WIFEXITED(ship_wait(ship, 120000)));
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, logs_topic), 0);
    {
        char one[1][32] = { "north" }, two[1][32] = { "south" };

        expect_exactly_once(t, one, 1, 2000);
        expect_exactly_once(t, two, 1, 5000);
    }
    {
        char *log = ship_log(t);

        harness_expect_in(log, "waiting for the brokers", "the log of the outage");
        harness_expect_in(log, "the brokers answer again", "the log of the return");
        free(log);
    }
    free(status_path);
}

/* Requests refused by the brokers while shipping, the kinds librdkafka
 * retries by itself and one that fails a record for good (the transaction
 * is aborted, read back and produced again): nothing lost, nothing twice. */
static void test_ship_request_errors(void **state)
{
    struct ship_test *t = *state;
    char names[2][32] = { "east", "west" };
    const char *follow[] = { "--topic", "logs.{producer}", "--follow", "--set",
                             "transaction_records=500", NULL };
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct harness_file_needle caught_up = { status_path, "\"lag_records\":0," };
    pid_t pids[2], ship;
    char *log;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 1000);
    ship = ship_spawn(&t->h, &t->m, follow);
    assert_true(harness_wait_for(harness_file_has, &caught_up, 60000));
    kafka_mock_command(&t->m, "errors Produce 10 NOT_LEADER_FOR_PARTITION");
    kafka_mock_command(&t->m, "errors AddPartitionsToTxn 3 CONCURRENT_TRANSACTIONS");
    kafka_mock_command(&t->m, "errors EndTxn 2 COORDINATOR_NOT_AVAILABLE");
    pids[0] = spawn_producer(&t->h, names[1], 20000);
    kafka_mock_command(&t->m, "errors Produce 2 INVALID_RECORD");
    pids[1] = spawn_producer(&t->h, "late", 3000);
    wait_producers(pids, 2);
    {
        /* The follower itself gets through the errors and catches up. */
        struct shipped_cond all = { status_path, 24000 };

        if (!harness_wait_for(has_shipped, &all, 120000)) {
            log = ship_log(t);
            fail_msg("the follower did not ship all 24000 records within 120 s: %s", log);
        }
    }
    kill(ship, SIGTERM);
    assert_true(WIFEXITED(ship_wait(ship, 120000)));
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, logs_topic), 0);
    {
        char one[1][32] = { "east" }, two[1][32] = { "west" }, three[1][32] = { "late" };

        expect_exactly_once(t, one, 1, 1000);
        expect_exactly_once(t, two, 1, 20000);
        expect_exactly_once(t, three, 1, 3000);
    }
    log = ship_log(t);
    harness_expect_in(log, "aborting the transaction", "the abort after a refused record");
    free(log);
    free(status_path);
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* logctl cat of every merged file of <spool>/merged/ and of what is left
 * in done/ (merged into one more file first). */
static char *cat_merged_and_done(struct harness *h, size_t *ret_len)
{
    char *merged_dir = harness_path(h->spool, "merged");
    char *out = harness_path(h->dir, "cat-all.out");
    const char *argv[256] = { harness_logctl(), "cat" };
    char *names[250];
    size_t n = 2, k = 0;
    struct harness_run r;
    struct dirent *de;
    DIR *d;
    char *text;
    int status;

    r = harness_run_logctl(h, "merge", "--spool", h->spool, NULL);
    harness_expect_code(&r, 0, "the last merge");
    harness_run_free(&r);
    d = opendir(merged_dir);
    assert_non_null(d);
    while ((de = readdir(d)) && k < 250) {
        size_t len = strlen(de->d_name);

        if (len > 4 && strcmp(de->d_name + len - 4, ".lsm") == 0)
            argv[n++] = names[k++] = harness_path(merged_dir, de->d_name);
    }
    closedir(d);
    argv[n] = NULL;
    status = harness_run(argv, out, NULL, 120000);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    text = harness_slurp(out, ret_len);
    for (size_t i = 0; i < k; i++)
        free(names[i]);
    free(out);
    free(merged_dir);
    return text;
}

/* A merge --delete while the first shipper of a spool still waits for the
 * cluster at its start: the spool already counts as shipped, so the merge
 * leaves the shard that is not shipped, and the shipper ships it whole
 * once the brokers are back. */
static void test_ship_merge_while_starting(void **state)
{
    struct ship_test *t = *state;
    char names[1][32] = { "early" };
    char *log_path = harness_path(t->h.dir, "ship.log");
    struct harness_file_needle waiting = { log_path, "waiting for the brokers" };
    struct harness_run r;
    pid_t ship;
    int status;

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 2000);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    kafka_mock_command(&t->m, "down -1");
    ship = ship_spawn(&t->h, &t->m, logs_topic);
    if (!harness_wait_for(harness_file_has, &waiting, 60000)) {
        char *log = ship_log(t);

        fail_msg("the shipper did not say it waits for the brokers: %s", log);
    }
    r = harness_run_logctl(&t->h, "merge", "--spool", t->h.spool, "--delete", NULL);
    harness_expect_code(&r, 0, "merge --delete while the shipper starts");
    harness_expect_in(r.out, "1 shard not yet shipped", "merge's note of what it left");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 1);
    kafka_mock_command(&t->m, "up -1");
    status = ship_wait(ship, 120000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    expect_exactly_once(t, names, 1, 2000);
    free(log_path);
}

/* merge --delete on a shipped spool merges only shipped shards, and says
 * how many it left; merge and ship racing delete nothing unshipped. */
static void test_ship_merge_delete(void **state)
{
    struct ship_test *t = *state;
    char names[2][32] = { "first", "second" };
    struct harness_run r;
    char *text;
    size_t len;

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 1000);
    r = harness_run_logctl(&t->h, "rotate", "--admin-socket", t->h.admin_sock, NULL);
    harness_run_free(&r);
    assert_int_equal(run_ship(t, logs_topic), 0);
    produce(&t->h, names[1], 1000);
    r = harness_run_logctl(&t->h, "rotate", "--admin-socket", t->h.admin_sock, NULL);
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 2);
    r = harness_run_logctl(&t->h, "merge", "--spool", t->h.spool, "--delete", NULL);
    harness_expect_code(&r, 0, "merge --delete");
    harness_expect_in(r.out, "1 shard not yet shipped", "merge's note of what it left");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 1);
    assert_int_equal(run_ship(t, logs_topic), 0);
    r = harness_run_logctl(&t->h, "merge", "--spool", t->h.spool, "--delete", NULL);
    harness_expect_code(&r, 0, "merge --delete after shipping");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 0);

    /* The race: a follower ships while merges delete, shard after shard. */
    {
        const char *follow[] = { "--topic", "logs.{producer}", "--follow", NULL };
        char more[1][32] = { "third" };
        pid_t ship = ship_spawn(&t->h, &t->m, follow);
        pid_t prod = spawn_producer(&t->h, more[0], 20000);

        for (int i = 0; i < 20; i++) {
            r = harness_run_logctl(&t->h, "rotate", "--admin-socket", t->h.admin_sock, NULL);
            harness_run_free(&r);
            r = harness_run_logctl(&t->h, "merge", "--spool", t->h.spool, "--delete", NULL);
            if (r.code != 0 && !strstr(r.err, "another merge"))
                harness_expect_code(&r, 0, "merge --delete racing the shipper");
            harness_run_free(&r);
        }
        wait_producers(&prod, 1);
        kill(ship, SIGTERM);
        assert_true(WIFEXITED(ship_wait(ship, 60000)));
        harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
        assert_int_equal(run_ship(t, logs_topic), 0);
        expect_exactly_once(t, more, 1, 20000);
    }
    /* And everything is in the spool's files once: merged ones and done/. */
    text = cat_merged_and_done(&t->h, &len);
    assert_int_equal(count_lines_with(text, "first "), 1000);
    assert_int_equal(count_lines_with(text, "second "), 1000);
    assert_int_equal(count_lines_with(text, "third "), 20000);
    free(text);
}

/* on_shipped = delete: shipped shards leave done/, their streams'
 * positions go to streams/ first. */
static void test_ship_on_shipped_delete(void **state)
{
    struct ship_test *t = *state;
    char names[1][32] = { "gone" };
    const char *extra[] = { "--topic", "logs.{producer}", "--set", "on_shipped=delete", NULL };

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 1500);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 1);
    assert_int_equal(run_ship(t, extra), 0);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 0);
    assert_true(harness_count_files(&t->h, "streams", ".pos") >= 1);
    expect_exactly_once(t, names, 1, 1500);
}

/* logctl prune on a spool the real shipper ships: the shard it committed
 * goes (its stream's position recorded first), the one it has not yet
 * shipped stays, and every record is still once in Kafka or the spool. */
static void test_ship_then_prune(void **state)
{
    struct ship_test *t = *state;
    char names[2][32] = { "shipped", "later" };
    struct harness_run r;

    kafka_mock_start(&t->m, 1);
    harness_start(&t->h, NULL);
    produce(&t->h, names[0], 1000);
    r = harness_run_logctl(&t->h, "rotate", "--admin-socket", t->h.admin_sock, NULL);
    harness_run_free(&r);
    assert_int_equal(run_ship(t, logs_topic), 0);
    produce(&t->h, names[1], 500);
    r = harness_run_logctl(&t->h, "rotate", "--admin-socket", t->h.admin_sock, NULL);
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 2);

    r = harness_run_logctl(&t->h, "prune", "--config", t->h.config, "--spool", t->h.spool,
                           "--shipped-max-bytes", "1", NULL);
    harness_expect_code(&r, 0, "logctl prune after logctl ship");
    harness_expect_in(r.out, "pruned 1 file", "the summary");
    harness_expect_in(r.out, "and 1 not yet shipped whole", "the shard not shipped");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&t->h, "done", ".shard"), 1);
    assert_int_equal(harness_count_files(&t->h, "streams", ".pos"), 1);
    r = harness_run_logctl(&t->h, "cat", "--spool", t->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl cat --spool after prune");
    assert_int_equal(count_lines_with(r.out, "shipped "), 0);
    assert_int_equal(count_lines_with(r.out, "later "), 500);
    harness_run_free(&r);
    expect_exactly_once(t, names, 1, 1000);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
}

/* Settings librdkafka refuses are named, with where they were set. */
static void test_ship_bad_settings(void **state)
{
    struct ship_test *t = *state;
    const char *bad_set[] = { "--set", "no.such.property=1", NULL };
    char *log;

    kafka_mock_start(&t->m, 1);
    assert_int_equal(mkdir(t->h.spool, 0750), 0);
    {
        char *done = harness_path(t->h.spool, "done");

        assert_int_equal(mkdir(done, 0750), 0);
        free(done);
    }
    assert_int_equal(run_ship(t, bad_set), 1);
    log = ship_log(t);
    harness_expect_in(log, "--set: no.such.property = 1: librdkafka refuses it",
                      "the refusal of --set");
    free(log);
    harness_write_config(&t->h, "[ship]\n# a comment\nlinger.ms = soon\n");
    {
        const char *with_config[] = { "--config", t->h.config, NULL };
        char where[512];

        assert_int_equal(run_ship(t, with_config), 1);
        log = ship_log(t);
        snprintf(where, sizeof(where), "%s:3: linger.ms = soon: librdkafka refuses it",
                 t->h.config);
        harness_expect_in(log, where, "the refusal of a config line");
        free(log);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ship_sealed, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_syslog, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_kill_rounds, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_second_refused, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_many_active_shards, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_broker_outage, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_request_errors, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_merge_delete, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_merge_while_starting, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_on_shipped_delete, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_then_prune, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_bad_settings, ship_test_setup,
                                        ship_test_teardown),
    };

    harness_seed_rng();
    /* LOGSHARD_TEST_FILTER=test_ship_kill_rounds runs that one alone. */
    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
