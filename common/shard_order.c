/* The stream order of shards (shard_order.h). Two sorts of the indices of
 * the shards with a stream, both grouping them by stream: one by place,
 * which lists each stream's places in the given order, one by position,
 * which lists its shards in the order they must be read. Matching the two
 * lists element by element puts the k-th shard by position at the stream's
 * k-th place. */
#include "shard_order.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct sort_entry {
    const struct shard_order_key *key;
    size_t index;
};

static int cmp_stream(const struct shard_order_key *x, const struct shard_order_key *y)
{
    int c = strcmp(x->producer, y->producer);

    return c ? c : memcmp(x->stream_id, y->stream_id, SHARD_STREAM_ID_SIZE);
}

static int cmp_place(const void *a, const void *b)
{
    const struct sort_entry *x = a, *y = b;
    int c = cmp_stream(x->key, y->key);

    if (c)
        return c;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_position(const void *a, const void *b)
{
    const struct sort_entry *x = a, *y = b;
    int c = cmp_stream(x->key, y->key);

    if (c)
        return c;
    if (x->key->first_position != y->key->first_position)
        return x->key->first_position < y->key->first_position ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

int shard_order_streams(const struct shard_order_key *keys, size_t n, size_t *ret_order)
{
    struct sort_entry *by_place, *by_position;
    size_t m = 0;

    for (size_t i = 0; i < n; i++) {
        ret_order[i] = i;
        m += keys[i].has_stream;
    }
    if (m < 2)
        return 0;
    by_place = calloc(m, sizeof(*by_place));
    by_position = calloc(m, sizeof(*by_position));
    if (!by_place || !by_position) {
        free(by_place);
        free(by_position);
        return -ENOMEM;
    }
    m = 0;
    for (size_t i = 0; i < n; i++)
        if (keys[i].has_stream)
            by_place[m++] = (struct sort_entry){ .key = &keys[i], .index = i };
    memcpy(by_position, by_place, m * sizeof(*by_place));
    qsort(by_place, m, sizeof(*by_place), cmp_place);
    qsort(by_position, m, sizeof(*by_position), cmp_position);
    /* Both lists hold each stream's shards as one run, the runs in the same
     * order, so element k of one and of the other are of the same stream. */
    for (size_t k = 0; k < m; k++)
        ret_order[by_place[k].index] = by_position[k].index;
    free(by_place);
    free(by_position);
    return 0;
}
