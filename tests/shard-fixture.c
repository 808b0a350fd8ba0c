/* The fixture the tests of common/shard_format.c share; shard-fixture.h
 * says what it does. */
#include <stdint.h>
#include <string.h>

#include "shard-fixture.h"

struct shard_header make_header(const char *producer, uint64_t id)
{
    struct shard_header h;

    memset(&h, 0, sizeof(h));
    h.uid = 1000 + (uint32_t)id;
    h.gid = 100 + (uint32_t)id;
    h.pid = 4242 + (uint32_t)id;
    h.shard_id = 0x0123456789ABCDEFull + id;
    h.created_ns = 1700000000123456789ull + id;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    return h;
}
