/* ship/ship-message.c: the progress topic's keys and values are written
 * and read back the same; what the parser refuses, it refuses whole. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ship-message.h"

static const uint8_t ID[SHARD_STREAM_ID_SIZE] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                                  0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe };

static int parse(const char *key, const char *value, struct ship_progress_msg *m)
{
    return ship_progress_msg_parse(key, strlen(key), value, value ? strlen(value) : 0, "tx 1", m);
}

static void test_stream_round_trip(void **state)
{
    char k[256], v[512];
    struct ship_progress_msg m;

    (void)state;
    assert_true(ship_progress_key_stream(k, sizeof(k), "tx 1", ID) > 0);
    assert_string_equal(k, "stream 0123456789abcdef1032547698badcfe tx 1");
    assert_true(ship_progress_value_stream(v, sizeof(v), 42, "web.1", "logs.web", 3, 999) > 0);
    assert_string_equal(v, "next=42 producer=web.1 topic=logs.web partition=3 offset=999");
    assert_int_equal(parse(k, v, &m), 0);
    assert_int_equal(m.kind, SHIP_PROGRESS_STREAM);
    assert_memory_equal(m.id, ID, sizeof(ID));
    assert_true(m.next == 42);
    assert_string_equal(m.producer, "web.1");
    assert_string_equal(m.topic, "logs.web");
    assert_int_equal(m.partition, 3);
    assert_true(m.offset == 999);
}

static void test_start_round_trip(void **state)
{
    char k[256], v[64];
    struct ship_progress_msg m;

    (void)state;
    assert_true(ship_progress_key_start(k, sizeof(k), "tx 1", "logs.db", 7) > 0);
    assert_true(ship_progress_value_start(v, sizeof(v), 12345) > 0);
    assert_int_equal(parse(k, v, &m), 0);
    assert_int_equal(m.kind, SHIP_PROGRESS_START);
    assert_string_equal(m.topic, "logs.db");
    assert_int_equal(m.partition, 7);
    assert_true(m.offset == 12345);
}

static void test_others_and_refusals(void **state)
{
    static const char *const good_key = "stream 0123456789abcdef1032547698badcfe tx 1";
    struct ship_progress_msg m;

    (void)state;
    memset(&m, 0x5a, sizeof(m));
    /* another shipper's, or not a progress message at all */
    assert_int_equal(parse("stream 0123456789abcdef1032547698badcfe tx 2",
                           "next=1 producer=a topic=t partition=0 offset=0", &m),
                     -ENOENT);
    assert_int_equal(parse("hello tx 1", "x", &m), -ENOENT);
    assert_int_equal(parse("tx 1", NULL, &m), -ENOENT);
    /* ours, but not whole or not canonical */
    assert_int_equal(parse(good_key, NULL, &m), -EBADMSG);
    assert_int_equal(parse(good_key, "next=01 producer=a topic=t partition=0 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "next=9223372036854775808 producer=a topic=t partition=0 "
                                     "offset=0",
                           &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "next=1 producer=../a topic=t partition=0 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "next=1 producer=a topic=t/u partition=0 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "next=1 producer=a topic=t partition=-1 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "next=1 producer=a topic=t partition=0 offset=0 x=1", &m),
                     -EBADMSG);
    assert_int_equal(parse(good_key, "producer=a next=1 topic=t partition=0 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse("stream 0123456789ABCDEF1032547698badcfe tx 1",
                           "next=1 producer=a topic=t partition=0 offset=0", &m),
                     -EBADMSG);
    assert_int_equal(parse("start t 01 tx 1", "offset=1", &m), -EBADMSG);
    assert_int_equal(parse("start t 1 tx 1", "offset=", &m), -EBADMSG);
    /* a refusal leaves the result alone */
    assert_int_equal(((unsigned char *)&m)[0], 0x5a);
}

static void test_stream_id_parse(void **state)
{
    uint8_t id[SHARD_STREAM_ID_SIZE];
    char hex[33];

    (void)state;
    ship_stream_id_format(hex, ID);
    assert_int_equal(ship_stream_id_parse(hex, 32, id), 0);
    assert_memory_equal(id, ID, sizeof(ID));
    assert_int_equal(ship_stream_id_parse(hex, 31, id), -EINVAL);
    hex[5] = 'g';
    assert_int_equal(ship_stream_id_parse(hex, 32, id), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_round_trip),
        cmocka_unit_test(test_start_round_trip),
        cmocka_unit_test(test_others_and_refusals),
        cmocka_unit_test(test_stream_id_parse),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
