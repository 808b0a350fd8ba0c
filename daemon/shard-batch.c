/* A shard's batch buffers (shard-internal.h): their memory, which memory.c
 * maps and counts, and the CRCs of the records encoded into them, filled
 * three records at a time. */
#include "shard.h"

#include "memory.h"
#include "shard-internal.h"
#include "shard_format.h"

#define SHARD_BATCH_INITIAL (64u * 1024u)
/* Up to here a batch buffer doubles; past it, it grows by a quarter, so that
 * what it holds beyond its bytes (which the session's budget pays for) stays
 * small. Both keep the copying of realloc linear in the bytes. */
#define SHARD_BATCH_DOUBLE_MAX (1024u * 1024u)

/* Batch buffers count towards the daemon's memory_limit_bytes and their
 * session's session_buffer_bytes; memory.c maps them and keeps the count. */
int shard__batch_reserve(struct daemon *d, struct shard_batch *b, size_t more)
{
    size_t cap = b->cap ? b->cap : SHARD_BATCH_INITIAL;

    if (b->len + more <= b->cap)
        return 0;
    while (cap < b->len + more)
        cap += cap < SHARD_BATCH_DOUBLE_MAX ? cap : (cap / 4 + 0xffffu) & ~(size_t)0xffffu;
    return memory_map_grow(d, &b->buf, &b->cap, b->len + more, cap);
}

/* An empty batch gives its memory back: an idle producer's shard holds no
 * buffer, and a burst's buffer does not stay allocated after it. */
void shard__batch_release(struct daemon *d, struct shard_batch *b)
{
    memory_map_release(d, &b->buf, &b->cap);
    b->head = 0;
    b->len = 0;
    b->records = 0;
    b->n_unsummed = 0;
}

/* Each crc32 instruction waits for the one before it in its chain, and a
 * record is short: three records' chains side by side cost about what one
 * does. The records are summed while they are still in the cache. */
void shard__batch_unsummed(struct shard_batch *b, size_t offset)
{
    b->unsummed[b->n_unsummed++] = offset;
    if (b->n_unsummed == 3)
        shard__batch_sum(b);
}

void shard__batch_sum(struct shard_batch *b)
{
    unsigned char *rec[3];

    for (unsigned i = 0; i < b->n_unsummed; i++)
        rec[i] = b->buf + b->head + b->unsummed[i];
    shard_records_sum(rec, b->n_unsummed);
    b->n_unsummed = 0;
}
