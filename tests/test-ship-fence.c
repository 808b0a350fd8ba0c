/* logctl ship fenced or refused by the cluster. Kafka fences a
 * transactional producer when another one takes its transactional.id, and
 * also when the cluster itself ended a transaction left open past
 * transaction.timeout.ms (it bumps the producer's epoch), as after an
 * outage longer than that. The mock cluster does neither on its own, so
 * the fence is injected: the broker's answer to EndTxn or InitProducerId
 * is PRODUCER_FENCED, the answer either cause gives.
 *
 * Fenced once, the shipper goes on with a new producer, and nothing is
 * lost or shipped twice; fenced again within 10 minutes it takes the
 * transactional.id for another shipper's and stops with exit status 2
 * (logshard-ship.service does not restart on 2), and a later run ships the
 * rest, exactly once.
 *
 * A cluster that refuses the producer outright (the transactional.id not
 * authorized) is an error a one-shot run fails with, exit status 1, and one
 * a follower waits out, saying so in its log and status, until the cluster
 * takes it.
 *
 * LOGSHARD_TEST_FILTER=<test name> runs one test alone. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "logshard.h"
#include "ship-fixture.h"

static const char *const follow[] = { "--topic", "logs.{producer}", "--follow", NULL };

/* Starts the mock, the daemon and a follower that has shipped the first
 * producer's 1000 records. Returns the follower's pid. */
static pid_t start_caught_up(struct ship_test *t, char *status_path)
{
    struct harness_file_needle caught_up = { status_path, "\"lag_records\":0," };
    pid_t ship;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    produce(&t->h, "first", 1000);
    ship = ship_spawn(&t->h, &t->m, follow);
    assert_true(harness_wait_for(harness_file_has, &caught_up, 60000));
    return ship;
}

/* One fence: the follower makes a new producer, reads the progress back
 * and goes on shipping what comes after; nothing is lost or twice. */
static void test_ship_fenced_once(void **state)
{
    struct ship_test *t = *state;
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    char *log_path = harness_path(t->h.dir, "ship.log");
    struct harness_file_needle went_on = { log_path, "a new producer reads the progress back" };
    /* The third producer's records all come after the fence: only a
     * follower that went on ships them. */
    struct shipped_cond after = { status_path, 1000 + 2000 };
    pid_t ship = start_caught_up(t, status_path), pid;
    int status;
    char *log;

    kafka_mock_command(&t->m, "errors EndTxn 1 PRODUCER_FENCED");
    pid = spawn_producer(&t->h, "second", 5000);
    wait_producers(&pid, 1);
    if (!harness_wait_for(harness_file_has, &went_on, 60000)) {
        log = ship_log(t);
        fail_msg("no fence, or the follower did not go on after it: %s", log);
    }
    pid = spawn_producer(&t->h, "third", 2000);
    wait_producers(&pid, 1);
    if (!harness_wait_for(has_shipped, &after, 120000)) {
        log = ship_log(t);
        fail_msg("the follower did not ship the records after the fence within 120 s: %s",
                 log);
    }
    kill(ship, SIGTERM);
    status = ship_wait(ship, 60000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    log = ship_log(t);
    harness_expect_in(log, "fenced by a newer instance (_FENCED)",
                      "the broker's fence, as librdkafka reports it");
    if (strstr(log, "this one stops"))
        fail_msg("the shipper stopped after one fence: %s", log);
    free(log);
    /* The rest, whatever the follower had not committed, by a run after
     * the daemon sealed every shard. */
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    assert_int_equal(run_ship(t, logs_topic), 0);
    {
        char names[3][32] = { "first", "second", "third" };
        uint64_t counts[3] = { 1000, 5000, 2000 };

        for (int i = 0; i < 3; i++)
            expect_exactly_once(t, &names[i], 1, counts[i]);
    }
    free(log_path);
    free(status_path);
}

/* Fenced, and the new producer fenced at once too: another shipper has
 * the transactional.id. The follower stops with 2, committing nothing
 * more; a run after it ships the rest, exactly once. */
static void test_ship_fenced_twice(void **state)
{
    struct ship_test *t = *state;
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    pid_t ship = start_caught_up(t, status_path), pid;
    int status;
    char *log;

    kafka_mock_command(&t->m, "errors EndTxn 1 PRODUCER_FENCED");
    kafka_mock_command(&t->m, "errors InitProducerId 1 PRODUCER_FENCED");
    pid = spawn_producer(&t->h, "second", 3000);
    wait_producers(&pid, 1);
    status = ship_wait(ship, 120000);
    log = ship_log(t);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 2)
        fail_msg("fenced twice, the follower did not exit 2 (status %d): %s", status, log);
    harness_expect_in(log, "fenced again within 10 minutes: another shipper uses the "
                           "transactional.id",
                      "why the shipper stops");
    free(log);
    assert_int_equal(run_ship(t, logs_topic), 0);
    {
        char one[1][32] = { "first" }, two[1][32] = { "second" };

        expect_exactly_once(t, one, 1, 1000);
        expect_exactly_once(t, two, 1, 3000);
    }
    free(status_path);
}

/* How often needle is in the follower's log. */
static int log_count(struct ship_test *t, const char *needle)
{
    char *log = ship_log(t), *at = log;
    int n = 0;

    while ((at = strstr(at, needle)) != NULL) {
        n++;
        at++;
    }
    free(log);
    return n;
}

struct log_watch {
    struct ship_test *t;
    const char *needle;
    int count;
    pid_t ship;
    bool gone; /* the follower exited */
};

/* For harness_wait_for: needle is in the follower's log count times, or
 * the follower is gone. */
static bool logged_or_gone(void *arg)
{
    struct log_watch *w = arg;
    int status;

    if (log_count(w->t, w->needle) >= w->count)
        return true;
    if (waitpid(w->ship, &status, WNOHANG) == w->ship)
        w->gone = true;
    return w->gone;
}

static void wait_logged(struct ship_test *t, pid_t ship, const char *needle, int count)
{
    struct log_watch w = { t, needle, count, ship, false };

    if (!harness_wait_for(logged_or_gone, &w, 120000) || w.gone) {
        char *log = ship_log(t);

        fail_msg("'%s' not %d times in the follower's log, or the follower stopped: %s", needle,
                 count, log);
    }
}

/* A producer in this process, whose stream, and so whose topic and
 * partition, the follower knows already when the brokers go away. */
struct steady {
    logshard *ls;
    uint64_t sent;
};

static void steady_send(struct steady *p, uint64_t count)
{
    char rec[64];

    for (uint64_t end = p->sent + count; p->sent < end; p->sent++) {
        int len = snprintf(rec, sizeof(rec), "steady %012" PRIu64, p->sent);

        assert_int_equal(logshard_append(p->ls, rec, (size_t)len), 0);
    }
    assert_int_equal(logshard_flush(p->ls, 30000), 0);
}

/* Every broker away for longer than transaction.timeout.ms while the
 * follower has a transaction open, and back. The records' deliveries time
 * out meanwhile (transaction.timeout.ms bounds message.timeout.ms), the
 * follower aborts the transaction, and librdkafka bumps the producer's
 * epoch for that abort. The coordinator of a cluster that ended the
 * transaction itself may answer that with PRODUCER_FENCED (injected here:
 * the mock does not time transactions out). */
static void long_outage(struct ship_test *t, pid_t ship, struct steady *p, int round)
{
    kafka_mock_command(&t->m, "errors InitProducerId 1 PRODUCER_FENCED");
    for (int id = 1; id <= 3; id++)
        kafka_mock_command(&t->m, "down %d", id);
    steady_send(p, 2000);
    /* Once the follower aborts, its transaction is older than
     * transaction.timeout.ms: it began before the records timed out. */
    wait_logged(t, ship, "aborting the transaction", round);
    for (int id = 1; id <= 3; id++)
        kafka_mock_command(&t->m, "up %d", id);
    wait_logged(t, ship, "past transaction.timeout.ms", round);
}

/* Two outages longer than transaction.timeout.ms within minutes, each
 * ending in a fence: each is the cluster's own doing, so the follower goes
 * on after both, rather than take the second for another shipper's, and
 * ships everything once. transaction.timeout.ms is 2 s here. */
static void test_ship_fenced_after_outages(void **state)
{
    static const char *const short_txn[] = { "--topic", "logs.{producer}", "--follow", "--set",
                                             "transaction.timeout.ms=2000", NULL };
    struct ship_test *t = *state;
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct shipped_cond first = { status_path, 1000 }, second = { status_path, 3000 };
    struct shipped_cond all = { status_path, 5000 };
    char names[1][32] = { "steady" };
    struct steady p = { NULL, 0 };
    logshard_opts opts = { .producer = "steady" };
    pid_t ship;
    int status;
    char *log;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    opts.socket_path = t->h.sock;
    assert_int_equal(logshard_connect(&p.ls, &opts), 0);
    steady_send(&p, 1000);
    ship = ship_spawn(&t->h, &t->m, short_txn);
    assert_true(harness_wait_for(has_shipped, &first, 60000));
    long_outage(t, ship, &p, 1);
    /* The new producer's generation has shipped the first outage's
     * records, so it too knows the partition when the brokers go again. */
    assert_true(harness_wait_for(has_shipped, &second, 60000));
    long_outage(t, ship, &p, 2);
    if (!harness_wait_for(has_shipped, &all, 120000)) {
        log = ship_log(t);
        fail_msg("the follower did not ship everything after the outages: %s", log);
    }
    logshard_close(p.ls);
    kill(ship, SIGTERM);
    status = ship_wait(ship, 60000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    log = ship_log(t);
    if (strstr(log, "this one stops"))
        fail_msg("the follower took an outage's fence for a rival's: %s", log);
    free(log);
    expect_exactly_once(t, names, 1, 5000);
    free(status_path);
}

/* The transactional.id not authorized, as a cluster with ACLs answers
 * until an operator grants it: librdkafka takes it for a fatal error. */
static void test_ship_producer_refused(void **state)
{
    struct ship_test *t = *state;
    char *status_path = harness_path(t->h.spool, "ship/status.json");
    struct harness_file_needle waiting = { status_path, "\"state\":\"waiting for the brokers\"" };
    struct shipped_cond all = { status_path, 1000 };
    char names[1][32] = { "first" };
    pid_t ship;
    int status;
    char *log;

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    produce(&t->h, "first", 1000);
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));

    /* One-shot: exit 1, saying why, nothing shipped. */
    kafka_mock_command(&t->m, "errors InitProducerId 1 TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    assert_int_equal(run_ship(t, logs_topic), 1);
    log = ship_log(t);
    harness_expect_in(log, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "the cluster's refusal");
    free(log);

    /* Following: waits, says so, and ships once the cluster takes it. */
    kafka_mock_command(&t->m, "errors InitProducerId 3 TRANSACTIONAL_ID_AUTHORIZATION_FAILED");
    harness_start(&t->h, NULL);
    ship = ship_spawn(&t->h, &t->m, follow);
    if (!harness_wait_for(harness_file_has, &waiting, 60000)) {
        log = ship_log(t);
        fail_msg("the refused follower's status never said it waits: %s", log);
    }
    if (!harness_wait_for(has_shipped, &all, 120000)) {
        log = ship_log(t);
        fail_msg("the follower did not ship once the cluster took it: %s", log);
    }
    kill(ship, SIGTERM);
    status = ship_wait(ship, 60000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    log = ship_log(t);
    harness_expect_in(log, "waiting for the brokers", "the wait, in the log");
    harness_expect_in(log, "the brokers answer again", "the end of the wait");
    free(log);
    expect_exactly_once(t, names, 1, 1000);
    free(status_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ship_fenced_once, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_fenced_twice, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_fenced_after_outages, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_producer_refused, ship_test_setup,
                                        ship_test_teardown),
    };

    harness_seed_rng();
    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
