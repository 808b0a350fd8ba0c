/* The keyed hash (keyed_hash.h). */
#include "keyed_hash.h"

#include <string.h>
#include <sys/random.h>

#include "fileutil.h"

/* The finaliser of splitmix64: every input bit moves every output bit. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return x;
}

void keyed_hash_init(struct keyed_hash *k)
{
    if (getrandom(k->key, sizeof(k->key), GRND_NONBLOCK) != sizeof(k->key)) {
        k->key[0] = now_realtime_ns();
        k->key[1] = now_monotonic_ns() ^ (uint64_t)(uintptr_t)k;
    }
}

uint64_t keyed_hash_bytes(const struct keyed_hash *k, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = k->key[0];
    size_t left = len;

    while (left >= 8) {
        uint64_t w;

        memcpy(&w, p, 8);
        h = mix(h ^ w ^ k->key[1]);
        p += 8;
        left -= 8;
    }
    {
        /* The tail, zero-padded, with the length beside it: "a" and
         * "a\0" differ. */
        uint64_t w = 0;

        memcpy(&w, p, left);
        h = mix(h ^ w ^ k->key[1]);
    }
    return mix(h ^ (uint64_t)len);
}
