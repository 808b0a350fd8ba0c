/* Reading back into the live tables, at the start of each producer
 * generation: what ship-readback.c finds of ours in the cluster
 * (read_committed: progress messages, start markers, then records) is put
 * into the stream table and the partitions, so that nothing a
 * read_committed consumer already sees is produced again; the read-back is
 * tried again while the cluster cannot be read, or for a while when it
 * answers with less than the spool's copy of the progress says is
 * committed, and what it found is then stored as that copy. */
#include "ship-run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "ship_progress.h"

#define READBACK_MS 30000

static void rb_stream(void *arg, const uint8_t id[SHARD_STREAM_ID_SIZE], uint64_t next,
                      const char *producer, const char *topic, int32_t partition, int64_t offset)
{
    struct shipper *s = arg;
    struct ship_stream *st = ship_streams_get(s->streams, id, true);
    struct ship_partition *p;

    if (!st)
        return;
    if (!st->producer[0])
        snprintf(st->producer, sizeof(st->producer), "%s", producer);
    st->in_kafka = true;
    if (next > st->committed)
        st->committed = st->next = next;
    if (strcmp(topic, "-") == 0)
        return;
    p = ship_streams_partition(s->streams, topic, partition);
    if (!p)
        return;
    p->known = true;
    if (offset > p->last_offset)
        p->last_offset = offset;
    if (offset > st->last_offset)
        st->last_offset = offset;
}

static void rb_start(void *arg, const char *topic, int32_t partition, int64_t offset)
{
    struct shipper *s = arg;
    struct ship_partition *p = ship_streams_partition(s->streams, topic, partition);

    if (!p)
        return;
    p->known = true;
    if (p->start < 0 || offset < p->start)
        p->start = offset;
}

static void rb_record(void *arg, const uint8_t id[SHARD_STREAM_ID_SIZE], uint64_t position,
                      const char *producer, const char *topic, int32_t partition, int64_t offset)
{
    struct shipper *s = arg;
    struct ship_stream *st = ship_streams_get(s->streams, id, true);
    struct ship_partition *p = ship_streams_partition(s->streams, topic, partition);

    if (!st || !p)
        return;
    if (!st->producer[0])
        snprintf(st->producer, sizeof(st->producer), "%s", producer);
    st->in_kafka = true;
    if (position + 1 > st->committed) {
        /* Visible to a read_committed consumer already: shipped, whatever
         * the progress says. Its progress is written with the next commit. */
        st->committed = st->next = position + 1;
        st->dirty = true;
    }
    if (offset > st->last_offset)
        st->last_offset = offset;
    if (offset > p->last_offset)
        p->last_offset = offset;
}

/* The spool's copy of the progress (written only after a commit, so never
 * ahead of Kafka) against what the read-back found: a stream the copy has
 * further than the read-back means the cluster's answer was incomplete,
 * and the records between would be produced twice, or that the cluster no
 * longer has them. Returns 0, or -ERANGE with err saying which stream. */
static int check_spool_copy(struct shipper *s, char *err, size_t err_len)
{
    struct positions_entry *v = NULL;
    const char *why = NULL;
    size_t n = 0;
    int r = ship_progress_load(s->spool_fd, &v, &n, &why);

    if (r < 0)
        return 0; /* none, or damaged: nothing to hold the read-back to */
    for (size_t i = 0; i < n && r == 0; i++) {
        struct ship_stream *st = ship_streams_get(s->streams, v[i].stream_id, false);
        uint64_t found = st ? st->committed : 0;
        char hex[33];

        if (found >= v[i].next_position)
            continue;
        ship_stream_id_format(hex, v[i].stream_id);
        snprintf(err, err_len,
                 "the cluster's progress has stream %s%s%s at position %" PRIu64
                 ", but %s/%s/%s, written after each commit, has it at %" PRIu64,
                 hex, st && st->producer[0] ? " of producer " : "", st ? st->producer : "", found,
                 s->spool, SHIP_DIR, SHIP_PROGRESS_FILE, v[i].next_position);
        r = -ERANGE;
    }
    free(v);
    return r;
}

/* One read-back: the progress topic, then each partition of ours from past
 * its last progress. Returns 0, -EAGAIN (err says why) or another negative
 * errno. */
static int read_back(struct shipper *s, struct ship_readback_sink *sink, char *err,
                     size_t err_len)
{
    struct ship_read_range *ranges = NULL;
    size_t n = 0, cap = 0;
    int r = ship_readback_progress(s->c, s->txid, sink, READBACK_MS, err, err_len);

    if (r < 0)
        return r;
    for (struct ship_partition *p = ship_streams_partitions(s->streams); p; p = p->next_in_list) {
        int64_t from = p->last_offset >= 0 ? p->last_offset + 1 : p->start;

        if (from < 0)
            continue;
        if (n == cap) {
            struct ship_read_range *v = realloc(ranges, (cap = cap ? cap * 2 : 16) * sizeof(*v));

            if (!v) {
                free(ranges);
                return -ENOMEM;
            }
            ranges = v;
        }
        snprintf(ranges[n].topic, sizeof(ranges[n].topic), "%s", p->topic);
        ranges[n].partition = p->partition;
        ranges[n].offset = from;
        n++;
    }
    r = ship_readback_ranges(s->c, s->txid, ranges, n, sink, READBACK_MS, err, err_len);
    free(ranges);
    return r;
}

int ship_restore(struct shipper *s)
{
    struct ship_readback_sink sink = { rb_stream, rb_start, rb_record, s };
    char err[512], why[600];
    uint64_t behind_since = 0;
    int backoff = SHIP_BACKOFF_MIN_MS, r;

    /* Again, with backoff, while the cluster cannot be read whole, or has
     * less than the spool's copy; each read-back only adds to what the
     * last one found. */
    for (;;) {
        r = read_back(s, &sink, err, sizeof(err));
        if (r == 0)
            r = check_spool_copy(s, err, sizeof(err));
        if (r == -ERANGE) {
            uint64_t now = now_monotonic_ns();

            if (!behind_since)
                behind_since = now;
            if (now - behind_since >= SHIP_BEHIND_SPOOL_NS) {
                /* Not a read-back that lags: the cluster has lost them,
                 * or the spool now ships elsewhere. Kafka is the truth. */
                ship_say(s, SHIP_LOG_WARNING,
                         "%s; the cluster has said so for %llu s: its answer is taken, and "
                         "what it lacks is shipped again",
                         err, SHIP_BEHIND_SPOOL_NS / 1000000000ull);
                r = 0;
                break;
            }
            snprintf(why, sizeof(why), "%s: read back again for up to %llu s", err,
                     SHIP_BEHIND_SPOOL_NS / 1000000000ull);
            if (ship_wait_to_retry(s, &backoff, why, false) < 0)
                return -ECANCELED;
            continue;
        }
        if (r != -EAGAIN)
            break;
        if (ship_wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    if (r < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
    ship_set_waiting(s, false, NULL);
    return ship_store_progress(s);
}
