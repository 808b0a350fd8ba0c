/* Ending a transaction (docs/SHIP.md): every delivery report waited for,
 * so that every record is in the cluster before the progress that claims
 * it, one progress message per stream that moved, the commit; then the
 * spool's copy of the progress (<spool>/ship/progress), and only after it
 * the deletion of shipped shards. A commit that fails aborts, and every
 * stream goes back to its committed position, to be produced again after
 * a read-back. */
#include "ship-run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "stream_positions.h"

/* Rewinds every stream to its committed position (after an abort). */
void ship_rewind_streams(struct shipper *s)
{
    for (size_t i = 0; i < ship_streams_count(s->streams); i++) {
        struct ship_stream *st = ship_streams_at(s->streams, i);

        st->next = st->committed;
        st->next_ns = st->committed_ns;
        st->dirty = false;
    }
    ship_sources_drop_readers(s->sources);
    s->in_txn = false;
    s->txn_records = s->txn_bytes = 0;
}

int ship_store_progress(struct shipper *s)
{
    size_t n = ship_streams_count(s->streams), m = 0;
    _cleanup_free_ struct positions_entry *v = calloc(n ? n : 1, sizeof(*v));
    int r;

    if (!v)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct ship_stream *st = ship_streams_at(s->streams, i);

        if (st->committed == 0 || !st->producer[0])
            continue;
        memcpy(v[m].stream_id, st->id, SHARD_STREAM_ID_SIZE);
        v[m].next_position = st->committed;
        v[m].newest_ns = st->committed_ns;
        v[m].uid = st->uid;
        snprintf(v[m].producer, sizeof(v[m].producer), "%s", st->producer);
        m++;
    }
    r = ship_progress_store(s->spool_fd, v, m);
    if (r < 0)
        ship_say(s, SHIP_LOG_ERROR,
                 "%s/%s/%s: cannot record what is shipped: %s; nothing is deleted until it can be",
                 s->spool, SHIP_DIR, SHIP_PROGRESS_FILE, strerror(-r));
    return r;
}

/* Ends the open transaction: deliveries, progress, commit. Returns 0,
 * SHIP_RESTART, or a negative errno (-EPERM: fenced; -ECANCELED: stopping
 * with the brokers away, the transaction left to the next shipper to
 * abort). */
int ship_commit(struct shipper *s)
{
    char err[512], key[700], value[800];
    enum ship_outcome o = SHIP_OK;
    int backoff = SHIP_BACKOFF_MIN_MS;
    uint64_t records = s->txn_records, bytes = s->txn_bytes;

    if (!s->in_txn)
        return 0;
    /* Every record in the cluster before the progress that claims it. */
    for (;;) {
        o = ship_kafka_flush(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err));
        if (o != SHIP_RETRY)
            break;
        if (ship_wait_to_retry(s, &backoff, err, true) < 0)
            return -ECANCELED;
    }
    if (o == SHIP_OK && s->delivery_failed) {
        snprintf(err, sizeof(err), "a record was not delivered: %s", s->delivery_error);
        o = SHIP_ABORT;
    }
    for (size_t i = 0; o == SHIP_OK && i < ship_streams_count(s->streams); i++) {
        struct ship_stream *st = ship_streams_at(s->streams, i);

        if (!st->dirty)
            continue;
        ship_progress_key_stream(key, sizeof(key), s->txid, st->id);
        ship_progress_value_stream(value, sizeof(value), st->next, st->producer,
                                   st->part ? st->part->topic : "-",
                                   st->part ? st->part->partition : 0,
                                   st->last_offset < 0 ? 0 : st->last_offset);
        o = ship_kafka_produce(s->k, s->c->ship_progress_topic, RD_KAFKA_PARTITION_UA, key,
                               strlen(key), value, strlen(value), 0, NULL, NULL, err,
                               sizeof(err));
    }
    if (s->opts->at_step && o == SHIP_OK)
        s->opts->at_step(1, s->hooks->arg); /* progress produced, not committed */
    backoff = SHIP_BACKOFF_MIN_MS;
    while (o == SHIP_OK || o == SHIP_RETRY) {
        o = ship_kafka_commit(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err));
        if (o != SHIP_RETRY)
            break;
        if (ship_wait_to_retry(s, &backoff, err, true) < 0)
            return -ECANCELED;
    }
    if (o == SHIP_OK) {
        ship_set_waiting(s, false, NULL);
        for (size_t i = 0; i < ship_streams_count(s->streams); i++) {
            struct ship_stream *st = ship_streams_at(s->streams, i);

            if (!st->dirty)
                continue;
            st->committed = st->next;
            st->committed_ns = st->next_ns;
            st->in_kafka = true;
            st->dirty = false;
        }
        s->in_txn = false;
        s->txn_begun_ns = 0;
        s->txn_records = s->txn_bytes = 0;
        s->fig.records_shipped += records;
        s->fig.bytes_shipped += bytes;
        s->fig.transactions_committed++;
        if (s->opts->at_step)
            s->opts->at_step(2, s->hooks->arg); /* committed, not yet stored */
        if (ship_store_progress(s) == 0 && s->c->ship_on_shipped == SHIP_DELETE)
            ship_delete_shipped(s);
        return 0;
    }
    if (o == SHIP_FENCED) {
        ship_say(s, SHIP_LOG_ERROR, "%s; the transaction is not committed", err);
        return -EPERM;
    }
    if (o == SHIP_ABORT) {
        enum ship_outcome a;

        ship_say(s, SHIP_LOG_WARNING,
                 "%s; aborting the transaction of %" PRIu64
                 " records, which are produced again after a read-back",
                 err, records);
        backoff = SHIP_BACKOFF_MIN_MS;
        while ((a = ship_kafka_abort(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err))) == SHIP_RETRY) {
            if (ship_wait_to_retry(s, &backoff, err, true) < 0)
                return -ECANCELED;
        }
        s->fig.transactions_aborted++;
        ship_rewind_streams(s);
        /* Read back before producing again: a cluster that shows aborted
         * records to read_committed consumers (librdkafka's mock does)
         * already has some of them, and they must not appear twice. */
        if (a == SHIP_OK)
            return SHIP_RESTART;
        o = a;
    }
    ship_say(s, SHIP_LOG_WARNING, "%s; the producer is made anew and the progress read back", err);
    s->fig.transactions_aborted++;
    ship_rewind_streams(s);
    return o == SHIP_FENCED ? -EPERM : SHIP_RESTART;
}
