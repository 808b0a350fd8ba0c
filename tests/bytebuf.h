/* A growing byte buffer, for the tests that build shard and merged files
 * with the encoders. */
#pragma once

#include <stdlib.h>

struct bytebuf {
    unsigned char *p;
    size_t len, cap;
};

/* Appends n bytes of room to b and returns where they start; aborts when
 * memory runs out (a test cannot go on without it). free(b->p) at the end. */
static inline unsigned char *bytebuf_grow(struct bytebuf *b, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        unsigned char *p;

        while (cap < b->len + n)
            cap *= 2;
        p = realloc(b->p, cap);
        if (!p)
            abort();
        b->p = p;
        b->cap = cap;
    }
    b->len += n;
    return b->p + b->len - n;
}
