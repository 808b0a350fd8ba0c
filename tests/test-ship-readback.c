/* logctl ship's read-back at start, when the cluster answers it only in
 * part. What the read-back misses of ours in Kafka, the shipper would
 * produce again, so an incomplete answer must be read again, never taken
 * for the whole.
 *
 * - A broker that says a partition does not exist (Kafka's
 *   UNKNOWN_TOPIC_OR_PARTITION, as a broker with metadata behind the
 *   cluster's does for a while) is believed only when the cluster's
 *   metadata agrees; here the mock answers ListOffsets so, and the
 *   read-back is tried again until it is answered whole.
 * - The spool's copy of the progress (<spool>/ship/progress, written after
 *   each commit) holds the read-back to at least what it says for a
 *   minute: a shipper pointed at a progress topic that lacks it reads back
 *   again and says why, and only then takes the cluster's answer (it lost
 *   those records, or the spool ships elsewhere now) and ships them there.
 *
 * LOGSHARD_TEST_FILTER=<test name> runs one test alone. */
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "ship-fixture.h"

/* Every shard sealed: the daemon stopped, and started again. */
static void seal_all(struct ship_test *t)
{
    harness_assert_clean_exit(harness_stop(&t->h, SIGTERM, 30000));
    harness_start(&t->h, NULL);
}

/* Ships 1000 records of "first", sealed, and checks them. */
static void ship_first(struct ship_test *t)
{
    char one[1][32] = { "first" };

    kafka_mock_start(&t->m, 3);
    harness_start(&t->h, NULL);
    produce(&t->h, "first", 1000);
    seal_all(t);
    assert_int_equal(run_ship(t, logs_topic), 0);
    expect_exactly_once(t, one, 1, 1000);
}

/* The brokers say the progress topic's partitions do not exist when the
 * next shipper starts: it reads back again, and ships only what is new. */
static void test_ship_readback_unknown_partition(void **state)
{
    struct ship_test *t = *state;
    char *log;

    ship_first(t);
    kafka_mock_command(&t->m, "errors ListOffsets 5 UNKNOWN_TOPIC_OR_PART");
    produce(&t->h, "second", 10);
    seal_all(t);
    assert_int_equal(run_ship(t, logs_topic), 0);
    {
        char one[1][32] = { "first" }, two[1][32] = { "second" };

        expect_exactly_once(t, one, 1, 1000);
        expect_exactly_once(t, two, 1, 10);
    }
    log = ship_log(t);
    harness_expect_in(log, "Unknown topic or partition, though the cluster lists it",
                      "the read-back tried again");
    free(log);
}

/* Records 0 .. count - 1 of producer name in topic, once each, in order. */
static void expect_in_topic(struct ship_test *t, const char *topic, const char *name,
                            uint64_t count)
{
    struct kafka_msg *v;
    size_t got = kafka_consume(&t->m, topic, &v), nl = strlen(name);

    if (got != count)
        fail_msg("%s: %zu messages, expected %" PRIu64, topic, got, count);
    for (size_t i = 0; i < got; i++)
        if (strncmp(v[i].payload, name, nl) != 0 || v[i].payload[nl] != ' ' ||
            strtoull(v[i].payload + nl + 1, NULL, 10) != i)
            fail_msg("%s: message %zu is '%s'", topic, i, v[i].payload);
    kafka_msgs_free(v, got);
}

/* A shipper pointed at a progress topic (and data topics) that lack what
 * the spool's copy says is shipped, as when the spool is pointed at
 * another cluster: for a minute it reads back again, saying why, and
 * ships nothing; then it takes the cluster's answer, says so, and ships
 * those records there, once. */
static void test_ship_readback_behind_spool(void **state)
{
    struct ship_test *t = *state;
    const char *elsewhere[] = { "--topic", "other.{producer}", "--set",
                                "progress_topic=logshard-elsewhere", NULL };
    char *log_path = harness_path(t->h.dir, "ship.log");
    struct harness_file_needle waits = { log_path, "read back again for up to 60 s" };
    pid_t ship;
    int status;
    char *log;

    ship_first(t);
    ship = ship_spawn(&t->h, &t->m, elsewhere);
    if (!harness_wait_for(harness_file_has, &waits, 60000)) {
        log = ship_log(t);
        fail_msg("the shipper did not say that the read-back is behind the spool: %s", log);
    }
    expect_in_topic(t, "other.first", "first", 0);
    status = ship_wait(ship, 180000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    log = ship_log(t);
    harness_expect_in(log, "ship/progress, written after each commit, has it at 1000",
                      "which file and position the read-back was held to");
    harness_expect_in(log, "its answer is taken, and what it lacks is shipped again",
                      "the cluster's answer taken after a minute");
    free(log);
    expect_in_topic(t, "other.first", "first", 1000);
    expect_in_topic(t, "logs.first", "first", 1000);
    free(log_path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ship_readback_unknown_partition, ship_test_setup,
                                        ship_test_teardown),
        cmocka_unit_test_setup_teardown(test_ship_readback_behind_spool, ship_test_setup,
                                        ship_test_teardown),
    };

    harness_seed_rng();
    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
