/* The syslog producers (syslog-producers.h): who a datagram belongs to,
 * and that producer's shard.
 *
 * A datagram has no connection, so the producer is made up from what the
 * message claims and what the kernel vouches for: <identifier>.u<uid>
 * (syslog_producer_name, docs/FORMAT.md). A producer exists exactly while
 * it has an open shard: it is made by its first message, and forgotten
 * when its shard is retired, which happens when the shard is full
 * (max_shard_bytes), old (max_shard_age), idle ([syslog] idle_timeout),
 * the least recently used of more than [syslog] max_producers, failed, or
 * at the drain. The next message of the same name makes it again, with a
 * new shard. Keeping nothing beyond the shard means an idle cron job costs
 * nothing once its shard is sealed, and a flood of identifiers costs at
 * most max_producers open shards.
 *
 * Names come from senders, so the hash is keyed with random bytes (as the
 * stream table's): nobody can pick names that all land in one bucket on
 * purpose. The recency list is kept in order of the last message, so the
 * idle sweep and the eviction look only at its head. */
#include "syslog-producers.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "keyed_hash.h"
#include "list.h"
#include "log.h"
#include "shard.h"
#include "syslog_msg.h"

#define INITIAL_BUCKETS 64u

struct syslog_producer {
    struct syslog_producers *table;
    struct syslog_producer *hash_next;
    struct list_node lru_node; /* table->lru: least recently used first */
    struct shard *shard;       /* open; the producer goes with it */
    uint64_t last_mono_ns;     /* when its last message came */
    uint64_t hash;             /* of the name (hash_of), kept for growing */
    size_t name_len;
    char name[SYSLOG_PRODUCER_NAME_SIZE];
};

struct syslog_producers {
    struct daemon *d;
    struct syslog_producer **buckets;
    size_t n_buckets; /* a power of two */
    size_t count;
    struct keyed_hash hash_key;
    struct list_node lru;
    struct shard_subscriber on_shards;
};

static uint64_t hash_of(const struct syslog_producers *t, const char *name, size_t len)
{
    return keyed_hash_bytes(&t->hash_key, name, len);
}

static struct syslog_producer *find(struct syslog_producers *t, const char *name, size_t len)
{
    uint64_t h = hash_of(t, name, len);

    for (struct syslog_producer *p = t->buckets[h & (t->n_buckets - 1)]; p; p = p->hash_next)
        if (p->hash == h && p->name_len == len && memcmp(p->name, name, len) == 0)
            return p;
    return NULL;
}

/* Doubles the buckets when they are fewer than the producers; each
 * producer keeps its hash, so nothing is hashed again. A failed
 * allocation keeps the table as it is: longer chains, still correct. */
static void maybe_grow(struct syslog_producers *t)
{
    size_t n = t->n_buckets * 2;
    struct syslog_producer **nb;

    if (t->count <= t->n_buckets)
        return;
    nb = calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (size_t b = 0; b < t->n_buckets; b++) {
        struct syslog_producer *p = t->buckets[b];
        while (p) {
            struct syslog_producer *next = p->hash_next;
            size_t i = p->hash & (n - 1);

            p->hash_next = nb[i];
            nb[i] = p;
            p = next;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->n_buckets = n;
}

/* The producer's shard is retired (it seals once its writes are done,
 * on its own) and the producer forgotten. */
static void forget(struct syslog_producer *p)
{
    struct syslog_producers *t = p->table;
    struct syslog_producer **pp = &t->buckets[p->hash & (t->n_buckets - 1)];

    while (*pp != p)
        pp = &(*pp)->hash_next;
    *pp = p->hash_next;
    list_del(&p->lru_node);
    t->count--;
    if (p->shard) {
        shard_detach(p->shard);
        if (p->shard->state == SHARD_OPEN)
            shard_seal(p->shard);
    }
    free(p);
}

/* The producer's own shard failed (the subscriber below has counted and
 * logged what was lost): it takes no more records, so the producer goes,
 * and its next message opens a new shard. */
static void on_own_shard_failed(void *owner, struct shard *sh, int err)
{
    struct syslog_producer *p = owner;

    (void)err;
    assert(p->shard == sh);
    forget(p);
}

static const struct shard_events producer_shard_events = {
    .failed = on_own_shard_failed,
};

/* Any syslog shard failed, of a datagram producer or of a stream
 * connection (syslog-stream-conn.c), its current one or one retired before:
 * what it will not keep is counted, naming the producer. Nobody else is
 * affected: only this shard stops. */
static void on_any_shard_failed(void *data, struct shard *sh, int err)
{
    struct syslog_producers *t = data;
    uint64_t lost;

    if (!shard_source_is_syslog(sh->source))
        return;
    lost = sh->records_appended - shard_records_kept(sh);
    if (sh->source == SHARD_SOURCE_SYSLOG_STREAM)
        t->d->stats.syslog_stream_failed += lost;
    else
        t->d->stats.syslog_dropped_failed += lost;
    log_error("syslog producer %s (opened by pid %" PRIu32 ", uid %" PRIu32 "): active/%s "
              "failed: %s; %" PRIu64 " of its messages are lost, %" PRIu64 " kept; its next "
              "message opens a new shard",
              sh->producer, sh->pid, sh->uid, shard_display_name(sh), strerror(-err), lost,
              shard_records_kept(sh));
}

static const struct shard_events table_shard_events = {
    .failed = on_any_shard_failed,
};

int syslog_producers_new(struct daemon *d, struct syslog_producers **ret)
{
    struct syslog_producers *t = calloc(1, sizeof(*t));

    if (!t)
        return -ENOMEM;
    t->buckets = calloc(INITIAL_BUCKETS, sizeof(*t->buckets));
    if (!t->buckets) {
        free(t);
        return -ENOMEM;
    }
    t->n_buckets = INITIAL_BUCKETS;
    t->d = d;
    list_init(&t->lru);
    list_init(&t->on_shards.node);
    keyed_hash_init(&t->hash_key);
    shard_subscribe(d, &t->on_shards, &table_shard_events, t);
    *ret = t;
    return 0;
}

static int make_producer(struct syslog_producers *t, const char *name, size_t len,
                         const struct shard_creds *creds, struct syslog_producer **ret)
{
    struct daemon *d = t->d;
    struct syslog_producer *p;
    struct shard_ident ident = {
        .producer = name,
        .producer_len = len,
        .uid = creds->uid,
        .gid = creds->gid,
        .pid = creds->pid,
        .sync = shard_sync_for_policy(d, (unsigned)d->config.fsync_policy),
        .source = SHARD_SOURCE_SYSLOG_DATAGRAM,
    };
    int r;

    if (len >= sizeof(p->name))
        return -ENAMETOOLONG; /* syslog_producer_name never makes one */
    /* Beyond the bound, the producer idle longest makes room: its shard
     * is sealed now rather than at its idle time. */
    if (t->count >= d->config.syslog_max_producers && !list_empty(&t->lru))
        forget(list_entry(t->lru.next, struct syslog_producer, lru_node));
    p = calloc(1, sizeof(*p));
    if (!p)
        return -ENOMEM;
    p->table = t;
    memcpy(p->name, name, len);
    p->name[len] = '\0';
    p->name_len = len;
    r = shard_open(d, &ident, p, &producer_shard_events, &p->shard);
    if (r < 0) {
        free(p);
        return r;
    }
    p->hash = hash_of(t, name, len);
    p->hash_next = t->buckets[p->hash & (t->n_buckets - 1)];
    t->buckets[p->hash & (t->n_buckets - 1)] = p;
    list_add_tail(&t->lru, &p->lru_node);
    t->count++;
    maybe_grow(t);
    *ret = p;
    return 0;
}

int syslog_producers_append(struct daemon *d, const char *name, size_t name_len,
                            const struct shard_creds *creds, const void *rec, uint32_t len,
                            uint64_t now_ns, uint64_t now_mono_ns)
{
    struct syslog_producers *t = d->syslog_producers;
    struct syslog_producer *p = find(t, name, name_len);
    char why[512], key[SYSLOG_PRODUCER_NAME_SIZE];
    struct budget_producer *b;
    int r;

    /* A datagram cannot wait alone: over its producer's quota or the
     * spool's budget it is dropped, and counted by the caller. */
    if (name_len >= sizeof(key))
        return -ENAMETOOLONG;
    memcpy(key, name, name_len);
    key[name_len] = '\0';
    b = p ? p->shard->budget : budget_producer_get(d, key);
    r = budget_admit(d, b, why, sizeof(why));
    if (r < 0)
        budget_count_refused(d, b);
    if (!p)
        budget_producer_put(d, b);
    if (r < 0)
        return r;
    if (!p) {
        r = make_producer(t, name, name_len, creds, &p);
        if (r < 0)
            return r;
    }
    r = shard_append_creds(p->shard, rec, len, now_ns, creds);
    if (r < 0)
        return r;
    p->last_mono_ns = now_mono_ns;
    list_del(&p->lru_node);
    list_add_tail(&t->lru, &p->lru_node);
    if (p->shard->size_queued >= d->config.max_shard_bytes)
        forget(p); /* full: the next message opens the next shard */
    return 0;
}

void syslog_producers_sweep(struct daemon *d)
{
    struct syslog_producers *t = d->syslog_producers;
    uint64_t now = now_monotonic_ns();
    uint64_t idle_ns = d->config.syslog_idle_ms * 1000000ull;
    uint64_t max_age_ns = d->config.max_shard_age_ms * 1000000ull;
    struct list_node *n, *tmp;

    if (!t)
        return;
    list_for_each_safe(n, tmp, &t->lru) {
        struct syslog_producer *p = list_entry(n, struct syslog_producer, lru_node);

        if (now - p->last_mono_ns >= idle_ns) {
            log_debug("syslog producer %s idle for %" PRIu64 " ms: sealing active/%s",
                      p->name, (now - p->last_mono_ns) / 1000000u,
                      shard_display_name(p->shard));
            forget(p);
        } else if (now - p->shard->created_mono_ns >= max_age_ns) {
            forget(p);
        }
    }
}

size_t syslog_producers_rotate(struct daemon *d, const char *producer)
{
    struct syslog_producers *t = d->syslog_producers;
    struct list_node *n, *tmp;
    size_t sealed = 0;

    if (!t)
        return 0;
    list_for_each_safe(n, tmp, &t->lru) {
        struct syslog_producer *p = list_entry(n, struct syslog_producer, lru_node);

        if (producer && strcmp(p->name, producer) != 0)
            continue;
        forget(p);
        sealed++;
    }
    return sealed;
}

void syslog_producers_seal_all(struct daemon *d)
{
    struct syslog_producers *t = d->syslog_producers;

    if (!t)
        return;
    while (!list_empty(&t->lru))
        forget(list_entry(t->lru.next, struct syslog_producer, lru_node));
}

size_t syslog_producers_count(const struct daemon *d)
{
    return d->syslog_producers ? d->syslog_producers->count : 0;
}

void syslog_producers_free(struct daemon *d)
{
    struct syslog_producers *t = d->syslog_producers;

    if (!t)
        return;
    /* After the loop: the shards are sealed, or (a failed start) never
     * opened; only the bookkeeping is left. */
    while (!list_empty(&t->lru)) {
        struct syslog_producer *p = list_entry(t->lru.next, struct syslog_producer, lru_node);
        list_del(&p->lru_node);
        free(p);
    }
    shard_unsubscribe(&t->on_shards);
    free(t->buckets);
    free(t);
    d->syslog_producers = NULL;
}
