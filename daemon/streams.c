/* The stream table (streams.h): a hash table of the streams the daemon
 * knows, and the list of idle ones in the order they became idle.
 *
 * Stream ids come from producers, so the hash is keyed with random bytes
 * picked at start: a producer cannot choose ids that all land in one
 * bucket. The table doubles when it holds as many streams as buckets. */
#include "streams.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "keyed_hash.h"

#define INITIAL_BUCKETS 256u

static size_t bucket_of(const struct streams *t, const uint8_t *id)
{
    return (size_t)(keyed_hash_bytes(&t->hash_key, id, SHARD_STREAM_ID_SIZE) &
                    (t->n_buckets - 1));
}

static bool is_idle(const struct stream *st)
{
    return !st->owner && st->sessions == 0 && st->unsealed == 0;
}

/* Puts st at the end of the idle list when it has just become idle. */
static void update_idle(struct streams *t, struct stream *st)
{
    bool idle = is_idle(st);

    if (idle && !list_linked(&st->idle_node)) {
        st->idle_since_ns = now_realtime_ns();
        list_add_tail(&t->idle, &st->idle_node);
    } else if (!idle && list_linked(&st->idle_node)) {
        list_del(&st->idle_node);
    }
}

int streams_init(struct daemon *d)
{
    struct streams *t = &d->streams;

    memset(t, 0, sizeof(*t));
    list_init(&t->idle);
    t->buckets = calloc(INITIAL_BUCKETS, sizeof(*t->buckets));
    if (!t->buckets)
        return -ENOMEM;
    t->n_buckets = INITIAL_BUCKETS;
    /* Never blocks: before the pool is ready the key is merely weaker. */
    keyed_hash_init(&t->hash_key);
    return 0;
}

void streams_free(struct daemon *d)
{
    struct streams *t = &d->streams;

    for (size_t i = 0; i < t->n_buckets; i++) {
        struct stream *st = t->buckets[i];

        while (st) {
            struct stream *next = st->hash_next;
            free(st);
            st = next;
        }
    }
    free(t->buckets);
    t->buckets = NULL;
    t->n_buckets = t->count = 0;
    list_init(&t->idle);
}

struct stream *streams_find(struct daemon *d, const uint8_t *id)
{
    struct streams *t = &d->streams;

    if (t->n_buckets == 0)
        return NULL; /* not set up: a test that runs shards alone */
    for (struct stream *st = t->buckets[bucket_of(t, id)]; st; st = st->hash_next)
        if (memcmp(st->id, id, SHARD_STREAM_ID_SIZE) == 0)
            return st;
    return NULL;
}

static void forget(struct streams *t, struct stream *st)
{
    struct stream **pp = &t->buckets[bucket_of(t, st->id)];

    assert(is_idle(st));
    while (*pp != st)
        pp = &(*pp)->hash_next;
    *pp = st->hash_next;
    list_del(&st->idle_node);
    t->count--;
    t->forgotten++;
    free(st);
}

/* Doubles the buckets; a failure only leaves the chains longer. */
static void grow(struct streams *t)
{
    size_t n = t->n_buckets * 2;
    struct stream **nb = calloc(n, sizeof(*nb));
    struct stream **old = t->buckets;
    size_t old_n = t->n_buckets;

    if (!nb)
        return;
    t->buckets = nb;
    t->n_buckets = n;
    for (size_t i = 0; i < old_n; i++) {
        struct stream *st = old[i];

        while (st) {
            struct stream *next = st->hash_next;
            size_t b = bucket_of(t, st->id);

            st->hash_next = nb[b];
            nb[b] = st;
            st = next;
        }
    }
    free(old);
}

int streams_add(struct daemon *d, const uint8_t *id, const char *producer, uint32_t uid,
                struct stream **ret)
{
    struct streams *t = &d->streams;
    struct stream *st;
    size_t b;

    if (streams_find(d, id))
        return -EEXIST;
    /* Over the cap the stream idle longest goes; streams in use are never
     * forgotten, so the table may pass the cap while they are many. */
    while (t->count >= d->config.max_streams && !list_empty(&t->idle))
        forget(t, list_entry(t->idle.next, struct stream, idle_node));
    st = calloc(1, sizeof(*st));
    if (!st)
        return -ENOMEM;
    memcpy(st->id, id, SHARD_STREAM_ID_SIZE);
    st->uid = uid;
    snprintf(st->producer, sizeof(st->producer), "%s", producer);
    list_init(&st->idle_node);
    if (t->count >= t->n_buckets)
        grow(t);
    b = bucket_of(t, id);
    st->hash_next = t->buckets[b];
    t->buckets[b] = st;
    t->count++;
    *ret = st;
    return 0;
}

int streams_note_stored(struct daemon *d, const uint8_t *id, const char *producer,
                        uint32_t uid, uint64_t next, uint64_t newest_ns)
{
    struct stream *st = streams_find(d, id);
    int r;

    if (!st) {
        r = streams_add(d, id, producer, uid, &st);
        if (r < 0)
            return r;
        /* Not update_idle(): a stream learnt from the spool has been idle
         * since its newest record, not since now; streams_loaded() sorts
         * the list by that time once the scan is over. */
        list_add_tail(&d->streams.idle, &st->idle_node);
        st->idle_since_ns = newest_ns;
    }
    if (next > st->stored)
        st->stored = next;
    if (newest_ns > st->idle_since_ns)
        st->idle_since_ns = newest_ns;
    return 0;
}

static int cmp_idle_since(const void *a, const void *b)
{
    const struct stream *x = *(const struct stream *const *)a;
    const struct stream *y = *(const struct stream *const *)b;

    return (x->idle_since_ns > y->idle_since_ns) - (x->idle_since_ns < y->idle_since_ns);
}

void streams_loaded(struct daemon *d)
{
    struct streams *t = &d->streams;
    struct stream **v;
    size_t n = 0;

    v = malloc((t->count ? t->count : 1) * sizeof(*v));
    if (v) {
        /* Only the start-up scan has run, so every stream is idle. */
        for (struct list_node *p = t->idle.next; p != &t->idle; p = p->next)
            v[n++] = list_entry(p, struct stream, idle_node);
        qsort(v, n, sizeof(*v), cmp_idle_since);
        list_init(&t->idle);
        for (size_t i = 0; i < n; i++)
            list_add_tail(&t->idle, &v[i]->idle_node);
        free(v);
    }
    /* Without memory to sort, the expiry below still holds the window, a
     * little late for streams found out of order. */
    streams_expire(d);
}

void streams_claim(struct daemon *d, struct stream *st, void *owner)
{
    st->owner = owner;
    st->sessions++;
    update_idle(&d->streams, st);
}

void streams_release(struct daemon *d, struct stream *st, void *owner)
{
    assert(st->sessions > 0);
    st->sessions--;
    if (st->owner == owner)
        st->owner = NULL;
    update_idle(&d->streams, st);
}

bool streams_quiet(const struct stream *st, const void *owner)
{
    return st->owner == owner && st->sessions == 1 && st->unsealed == 0;
}

void streams_shard_opened(struct daemon *d, const uint8_t *id)
{
    struct stream *st = streams_find(d, id);

    if (!st)
        return;
    st->unsealed++;
    update_idle(&d->streams, st);
}

void streams_shard_sealed(struct daemon *d, const uint8_t *id, uint64_t first_position,
                          uint64_t records)
{
    struct stream *st = streams_find(d, id);

    if (!st)
        return;
    assert(st->unsealed > 0);
    st->unsealed--;
    if (records > 0 && first_position + records > st->stored)
        st->stored = first_position + records;
    update_idle(&d->streams, st);
}

void streams_expire(struct daemon *d)
{
    struct streams *t = &d->streams;
    uint64_t now = now_realtime_ns();
    uint64_t window = d->config.resume_window_ms * UINT64_C(1000000);

    while (!list_empty(&t->idle)) {
        struct stream *st = list_entry(t->idle.next, struct stream, idle_node);

        if (st->idle_since_ns + window > now)
            break;
        forget(t, st);
    }
}

const char *streams_id_hex(const uint8_t *id, char *buf)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < SHARD_STREAM_ID_SIZE; i++) {
        buf[2 * i] = hex[id[i] >> 4];
        buf[2 * i + 1] = hex[id[i] & 15];
    }
    buf[2 * SHARD_STREAM_ID_SIZE] = '\0';
    return buf;
}
