/* Fuzz target for the parser of the progress topic's messages
 * (ship/ship-message.c), which reads bytes from the Kafka cluster and
 * decides from them where each stream's shipping resumes.
 *
 * Input: the message's key, a newline, its value (no newline: the whole
 * input is the key and there is no value). The shipper is "tx-1", so keys
 * must end with " tx-1" to be taken as ours.
 *
 * Contracts beyond "no crash": the result is 0, -ENOENT or -EBADMSG; what
 * is accepted has a known kind, a position below SHARD_POSITION_LIMIT, a
 * producer that passes the name rule, a topic of Kafka's characters (or
 * "-"), a partition and offset that are not negative; and it is exactly
 * what the writers produce: formatting the result gives back the input's
 * key and value byte for byte. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "ship-message.h"

#define TXID "tx-1"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t klen = nl ? (size_t)(nl - data) : size;
    size_t vlen = nl ? size - klen - 1 : 0;
    uint8_t *key = malloc(klen ? klen : 1), *value = nl ? malloc(vlen ? vlen : 1) : NULL;
    struct ship_progress_msg m;
    char k2[1024], v2[1024];
    int r, kn, vn;

    FUZZ_CHECK(key && (!nl || value));
    memcpy(key, data, klen);
    if (nl)
        memcpy(value, nl + 1, vlen);
    r = ship_progress_msg_parse(key, klen, value, vlen, TXID, &m);
    FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EBADMSG);
    if (r == 0) {
        FUZZ_CHECK(m.kind == SHIP_PROGRESS_STREAM || m.kind == SHIP_PROGRESS_START);
        FUZZ_CHECK(m.partition >= 0 && m.offset >= 0);
        FUZZ_CHECK(m.topic[0]);
        if (m.kind == SHIP_PROGRESS_STREAM) {
            FUZZ_CHECK(m.next < SHARD_POSITION_LIMIT);
            FUZZ_CHECK(wire_check_producer_name(m.producer, strlen(m.producer)) == 0);
            kn = ship_progress_key_stream(k2, sizeof(k2), TXID, m.id);
            vn = ship_progress_value_stream(v2, sizeof(v2), m.next, m.producer, m.topic,
                                            m.partition, m.offset);
        } else {
            kn = ship_progress_key_start(k2, sizeof(k2), TXID, m.topic, m.partition);
            vn = ship_progress_value_start(v2, sizeof(v2), m.offset);
        }
        FUZZ_CHECK(kn > 0 && vn > 0);
        FUZZ_CHECK((size_t)kn == klen && memcmp(k2, key, klen) == 0);
        FUZZ_CHECK((size_t)vn == vlen && memcmp(v2, value, vlen) == 0);
    }
    free(key);
    free(value);
    return 0;
}
