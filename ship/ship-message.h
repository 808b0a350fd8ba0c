/* The progress topic's messages (docs/SHIP.md, "Exactly once, and why"):
 * their keys, and the parser of what is read back, which takes bytes from
 * the cluster and so trusts nothing in them. No librdkafka here, so that
 * the fuzz target (ship/fuzz/) links this file alone. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"
#include "wire.h"

#define SHIP_TOPIC_MAX 249 /* Kafka's limit on a topic name */

/* The 32 lowercase hex digits of a stream id, and back. The parser takes
 * exactly 32 of [0-9a-f]; returns 0 or -EINVAL. */
void ship_stream_id_format(char out[33], const uint8_t id[SHARD_STREAM_ID_SIZE]);
int ship_stream_id_parse(const char *s, size_t len, uint8_t ret[SHARD_STREAM_ID_SIZE]);

/* Keys: "stream <32 hex> <txid>" and "start <topic> <partition> <txid>".
 * Return the length written (NUL not counted) or -ENOBUFS. */
int ship_progress_key_stream(char *buf, size_t size, const char *txid,
                             const uint8_t id[SHARD_STREAM_ID_SIZE]);
int ship_progress_key_start(char *buf, size_t size, const char *txid, const char *topic,
                            int32_t partition);

/* Values: "next=N producer=P topic=T partition=N offset=N" (topic "-"
 * for a stream with no record yet) and "offset=N". Same returns. */
int ship_progress_value_stream(char *buf, size_t size, uint64_t next, const char *producer,
                               const char *topic, int32_t partition, int64_t offset);
int ship_progress_value_start(char *buf, size_t size, int64_t offset);

enum ship_progress_kind {
    SHIP_PROGRESS_STREAM = 1, /* how far a stream is committed, where its last record is */
    SHIP_PROGRESS_START = 2,  /* nothing of ours in topic/partition before offset */
};

struct ship_progress_msg {
    enum ship_progress_kind kind;
    uint8_t id[SHARD_STREAM_ID_SIZE];          /* STREAM */
    uint64_t next;                             /* STREAM: below SHARD_POSITION_LIMIT */
    char producer[WIRE_PRODUCER_NAME_MAX + 1]; /* STREAM: passes wire_check_producer_name */
    char topic[SHIP_TOPIC_MAX + 1];            /* "-" for a stream with no record yet */
    int32_t partition;                         /* 0 to INT32_MAX */
    int64_t offset;                            /* 0 to INT64_MAX */
};

/* Parses one progress message (key, value: any bytes, NULL when absent).
 * Returns 0 with *ret filled when it is a whole message of the shipper
 * txid; -ENOENT when it is another shipper's (or no progress message at
 * all); -EBADMSG when it is ours but a field is missing, out of order,
 * out of range or not a plain decimal, or there is more than the fields.
 * What it accepts is exactly what the key and value functions above
 * write. */
int ship_progress_msg_parse(const void *key, size_t key_len, const void *value, size_t value_len,
                            const char *txid, struct ship_progress_msg *ret);
