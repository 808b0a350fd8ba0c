/* Reading back what the cluster holds of ours, with
 * isolation.level=read_committed: the progress topic (how far each stream
 * is committed, where its last record is, the start markers), then the
 * data partitions from there to their ends, so that a record a
 * read_committed consumer can already see is never produced again, even on
 * a cluster that shows more than the last committed progress says (see
 * docs/SHIP.md, "Reading back"). */
#include "ship-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fileutil.h"

/* A progress message: handed to the sink when it is ours and whole;
 * anything else (another shipper's, a foreign or damaged message) is
 * passed over. */
static void progress_message(const rd_kafka_message_t *m, const char *txid,
                             const struct ship_readback_sink *sink)
{
    struct ship_progress_msg p;

    if (ship_progress_msg_parse(m->key, m->key_len, m->payload, m->len, txid, &p) < 0)
        return;
    if (p.kind == SHIP_PROGRESS_STREAM && sink->stream)
        sink->stream(sink->arg, p.id, p.next, p.producer, p.topic, p.partition, p.offset);
    else if (p.kind == SHIP_PROGRESS_START && sink->start)
        sink->start(sink->arg, p.topic, p.partition, p.offset);
}

/* A header's value as a string, when it is there and fits. */
static bool header(rd_kafka_headers_t *h, const char *name, char *out, size_t size)
{
    const void *v;
    size_t len;

    if (rd_kafka_header_get_last(h, name, &v, &len) != RD_KAFKA_RESP_ERR_NO_ERROR || !v ||
        len + 1 > size)
        return false;
    memcpy(out, v, len);
    out[len] = '\0';
    return true;
}

static void data_message(rd_kafka_message_t *m, const char *txid,
                         const struct ship_readback_sink *sink)
{
    rd_kafka_headers_t *h = NULL;
    char shipper[512], stream[40], pos[32], producer[WIRE_PRODUCER_NAME_MAX + 1], *end;
    uint8_t id[SHARD_STREAM_ID_SIZE];
    uint64_t position;

    if (rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR)
        return;
    if (!header(h, SHIP_HEADER_SHIPPER, shipper, sizeof(shipper)) || strcmp(shipper, txid) != 0 ||
        !header(h, SHIP_HEADER_STREAM, stream, sizeof(stream)) ||
        ship_stream_id_parse(stream, strlen(stream), id) < 0 ||
        !header(h, SHIP_HEADER_POSITION, pos, sizeof(pos)) ||
        !header(h, SHIP_HEADER_PRODUCER, producer, sizeof(producer)))
        return;
    errno = 0;
    position = strtoull(pos, &end, 10);
    if (errno || *end || end == pos || position >= SHARD_POSITION_LIMIT)
        return;
    if (sink->record)
        sink->record(sink->arg, id, position, producer, rd_kafka_topic_name(m->rkt), m->partition,
                     m->offset);
}

static rd_kafka_t *new_consumer(const struct config *c, const char *txid, char *err,
                                size_t err_len)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char group[600], why[512];
    rd_kafka_t *rk;

    if (ship_kafka_conf(c, false, txid, conf, err, err_len) < 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    /* A group id only because librdkafka's assign() wants one: nothing
     * joins the group and no offset is ever committed. */
    snprintf(group, sizeof(group), "%s.readback", txid);
    if (rd_kafka_conf_set(conf, "group.id", group, why, sizeof(why)) ||
        rd_kafka_conf_set(conf, "isolation.level", "read_committed", why, sizeof(why)) ||
        rd_kafka_conf_set(conf, "enable.partition.eof", "true", why, sizeof(why)) ||
        rd_kafka_conf_set(conf, "enable.auto.commit", "false", why, sizeof(why)) ||
        rd_kafka_conf_set(conf, "enable.auto.offset.store", "false", why, sizeof(why)) ||
        rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", why, sizeof(why)) ||
        /* An empty fetch at a partition's end returns at once rather than
         * after librdkafka's default 500 ms: the read-back waits for the
         * end of every partition. */
        rd_kafka_conf_set(conf, "fetch.wait.max.ms", "10", why, sizeof(why))) {
        snprintf(err, err_len, "the read-back consumer: %s", why);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (!rk) {
        snprintf(err, err_len, "cannot make the read-back consumer: %s", why);
        rd_kafka_conf_destroy(conf);
    }
    return rk;
}

/* Whether the cluster lists partition of topic now: 1 yes, 0 no (the topic
 * or the partition is not there), -EAGAIN when it cannot tell. */
static int partition_listed(rd_kafka_t *rk, const char *topic, int32_t partition, int timeout_ms)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    int r = -EAGAIN;

    if (!rkt)
        return -EAGAIN;
    if (rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR &&
        md->topic_cnt == 1) {
        const struct rd_kafka_metadata_topic *t = &md->topics[0];

        if (t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
            r = 0;
        else if (t->err == RD_KAFKA_RESP_ERR_NO_ERROR)
            for (int i = r = 0; i < t->partition_cnt; i++)
                if (t->partitions[i].id == partition)
                    r = 1;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return r;
}

/* Reads every partition of list from its offset to its end; progress
 * tells which handler gets the messages. A partition ends at its end
 * (read_committed: the last stable offset), or when the cluster says it
 * does not exist; a broker may say so for a while of a partition that
 * does (its metadata behind), so that is believed only once the
 * cluster's metadata agrees, and otherwise the read-back is tried again:
 * taken for an end, it would leave records of ours unseen, and they would
 * be produced twice. */
static int read_to_end(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list, bool progress,
                       const char *txid, const struct ship_readback_sink *sink, int timeout_ms,
                       char *err, size_t err_len)
{
    uint64_t deadline = now_monotonic_ns() + (uint64_t)timeout_ms * 1000000u;
    int left = list->cnt, r = 0;
    bool *ended;
    rd_kafka_resp_err_t e;

    if (list->cnt == 0)
        return 0;
    ended = calloc((size_t)list->cnt, sizeof(*ended));
    if (!ended)
        return -ENOMEM;
    e = rd_kafka_assign(rk, list);
    if (e) {
        snprintf(err, err_len, "assign: %s", rd_kafka_err2str(e));
        free(ended);
        return -EAGAIN;
    }
    while (left > 0) {
        rd_kafka_message_t *m;

        if (now_monotonic_ns() > deadline) {
            snprintf(err, err_len,
                     "reading back %s: %d of %d partitions not read to their end within %d ms",
                     progress ? "the progress topic" : "the records", left, list->cnt,
                     timeout_ms);
            r = -EAGAIN;
            break;
        }
        m = rd_kafka_consumer_poll(rk, 100);
        if (!m)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF ||
            m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            m->err == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION) {
            const char *topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;

            if (topic && m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF &&
                partition_listed(rk, topic, m->partition, 5000) != 0) {
                snprintf(err, err_len,
                         "reading back %s [%" PRId32 "]: %s, though the cluster lists it",
                         topic, m->partition, rd_kafka_err2str(m->err));
                rd_kafka_message_destroy(m);
                r = -EAGAIN;
                break;
            }
            for (int i = 0; topic && i < list->cnt; i++)
                if (!ended[i] && list->elems[i].partition == m->partition &&
                    strcmp(list->elems[i].topic, topic) == 0) {
                    ended[i] = true;
                    left--;
                }
        } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
            if (progress)
                progress_message(m, txid, sink);
            else
                data_message(m, txid, sink);
        } else {
            snprintf(err, err_len, "reading back: %s", rd_kafka_message_errstr(m));
        }
        rd_kafka_message_destroy(m);
    }
    (void)rd_kafka_assign(rk, NULL);
    free(ended);
    return r;
}

int ship_readback_progress(const struct config *c, const char *txid,
                           const struct ship_readback_sink *sink, int timeout_ms, char *err,
                           size_t err_len)
{
    rd_kafka_t *rk = new_consumer(c, txid, err, err_len);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_topic_t *rkt;
    rd_kafka_resp_err_t e;
    int r = 0;

    if (!rk)
        return -EINVAL;
    rkt = rd_kafka_topic_new(rk, c->ship_progress_topic, NULL);
    e = rkt ? rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms) : rd_kafka_last_error();
    if (e) {
        snprintf(err, err_len, "progress topic %s: metadata: %s", c->ship_progress_topic,
                 rd_kafka_err2str(e));
        r = -EAGAIN;
    } else if (md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        list = rd_kafka_topic_partition_list_new(md->topics[0].partition_cnt);
        for (int i = 0; i < md->topics[0].partition_cnt; i++)
            rd_kafka_topic_partition_list_add(list, c->ship_progress_topic,
                                              md->topics[0].partitions[i].id)
                ->offset = RD_KAFKA_OFFSET_BEGINNING;
        r = read_to_end(rk, list, true, txid, sink, timeout_ms, err, err_len);
        rd_kafka_topic_partition_list_destroy(list);
    } else if (md->topic_cnt == 1 &&
               md->topics[0].err != RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) {
        snprintf(err, err_len, "progress topic %s: %s", c->ship_progress_topic,
                 rd_kafka_err2str(md->topics[0].err));
        r = -EAGAIN;
    } /* else no such topic yet: nothing was ever committed */
    if (md)
        rd_kafka_metadata_destroy(md);
    if (rkt)
        rd_kafka_topic_destroy(rkt);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return r;
}

int ship_readback_ranges(const struct config *c, const char *txid, const struct ship_read_range *v,
                         size_t n, const struct ship_readback_sink *sink, int timeout_ms,
                         char *err, size_t err_len)
{
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *list;
    int r;

    if (n == 0)
        return 0;
    rk = new_consumer(c, txid, err, err_len);
    if (!rk)
        return -EINVAL;
    list = rd_kafka_topic_partition_list_new((int)n);
    for (size_t i = 0; i < n; i++)
        rd_kafka_topic_partition_list_add(list, v[i].topic, v[i].partition)->offset =
            v[i].offset;
    r = read_to_end(rk, list, false, txid, sink, timeout_ms, err, err_len);
    rd_kafka_topic_partition_list_destroy(list);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return r;
}
