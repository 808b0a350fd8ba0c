/* Reading back into the live tables, at the start of each producer
 * generation: what ship-readback.c finds of ours in the cluster
 * (read_committed: progress messages, start markers, then records) is put
 * into the stream table and the partitions, so that nothing a
 * read_committed consumer already sees is produced again; the read-back is
 * tried again while the cluster cannot be read, and what it found is then
 * stored as the spool's copy of the progress. */
#include "ship-run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int ship_restore(struct shipper *s)
{
    struct ship_readback_sink sink = { rb_stream, rb_start, rb_record, s };
    struct ship_read_range *ranges = NULL;
    size_t n = 0, cap = 0;
    char err[512];
    int backoff = SHIP_BACKOFF_MIN_MS, r;

    for (;;) {
        r = ship_readback_progress(s->c, s->txid, &sink, READBACK_MS, err, sizeof(err));
        if (r != -EAGAIN)
            break;
        if (ship_wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    if (r < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
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
    backoff = SHIP_BACKOFF_MIN_MS;
    for (;;) {
        r = ship_readback_ranges(s->c, s->txid, ranges, n, &sink, READBACK_MS, err, sizeof(err));
        if (r != -EAGAIN)
            break;
        if (ship_wait_to_retry(s, &backoff, err, false) < 0) {
            free(ranges);
            return -ECANCELED;
        }
    }
    free(ranges);
    if (r < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
    ship_set_waiting(s, false, NULL);
    return ship_store_progress(s);
}
