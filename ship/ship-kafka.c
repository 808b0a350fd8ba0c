/* The transactional producer: its settings, the transaction calls with
 * what each failure means for the caller (enum ship_outcome), producing one
 * record, and the cluster's metadata the shipper needs. */
#include "ship-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A topic's handle, kept for the producer's life: naming the topic in
 * every rd_kafka_producev() makes librdkafka look it up under the write
 * side of its handle-wide lock, which its broker threads read-lock all the
 * time; a profile of shipping 2 million records found the producing thread
 * asleep on that lock more often than anywhere else. */
struct topic_handle {
    char *name; /* NULL: a free slot */
    uint64_t hash;
    rd_kafka_topic_t *rkt;
};

struct ship_kafka {
    rd_kafka_t *rk;
    ship_delivered_fn delivered;
    ship_kafka_log_fn log;
    void *arg;
    uint64_t broker_errors;
    char last_broker_error[512];
    struct topic_handle *topics; /* open addressing, a power of two */
    size_t n_topics, topics_cap;
    struct topic_handle *last;   /* most records go to the topic of the one before */
};

static uint64_t topic_hash(const char *name)
{
    uint64_t h = 14695981039346656037u; /* FNV-1a */

    for (; *name; name++)
        h = (h ^ (unsigned char)*name) * 1099511628211u;
    return h;
}

static struct topic_handle *topic_slot(struct topic_handle *v, size_t cap, const char *name,
                                       uint64_t hash)
{
    for (size_t i = hash & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!v[i].name || (v[i].hash == hash && strcmp(v[i].name, name) == 0))
            return &v[i];
}

/* The handle of topic, made on first use. NULL when out of memory or when
 * librdkafka refuses the name (the produce call then names the topic
 * itself and reports librdkafka's error). */
static rd_kafka_topic_t *topic_handle(struct ship_kafka *k, const char *name)
{
    uint64_t hash;
    struct topic_handle *t;

    if (k->last && strcmp(k->last->name, name) == 0)
        return k->last->rkt;
    hash = topic_hash(name);
    if (k->topics_cap) {
        t = topic_slot(k->topics, k->topics_cap, name, hash);
        if (t->name) {
            k->last = t;
            return t->rkt;
        }
    }
    if (2 * (k->n_topics + 1) > k->topics_cap) {
        size_t cap = k->topics_cap ? 2 * k->topics_cap : 16;
        struct topic_handle *v = calloc(cap, sizeof(*v));

        if (!v)
            return NULL;
        for (size_t i = 0; i < k->topics_cap; i++)
            if (k->topics[i].name)
                *topic_slot(v, cap, k->topics[i].name, k->topics[i].hash) = k->topics[i];
        free(k->topics);
        k->topics = v;
        k->topics_cap = cap;
        k->last = NULL; /* it pointed into the old table */
    }
    t = topic_slot(k->topics, k->topics_cap, name, hash);
    t->rkt = rd_kafka_topic_new(k->rk, name, NULL);
    if (!t->rkt)
        return NULL;
    t->name = strdup(name);
    if (!t->name) {
        rd_kafka_topic_destroy(t->rkt);
        t->rkt = NULL;
        return NULL;
    }
    t->hash = hash;
    k->n_topics++;
    k->last = t;
    return t->rkt;
}

static void topic_handles_free(struct ship_kafka *k)
{
    for (size_t i = 0; i < k->topics_cap; i++) {
        if (k->topics[i].name) {
            rd_kafka_topic_destroy(k->topics[i].rkt);
            free(k->topics[i].name);
        }
    }
    free(k->topics);
    k->topics = NULL;
    k->last = NULL;
    k->n_topics = k->topics_cap = 0;
}

static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct ship_kafka *k = opaque;

    (void)rk;
    if (k->delivered)
        k->delivered(m->_private, m->partition, m->err ? -1 : m->offset, m->err, k->arg);
}

static void on_log(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
    struct ship_kafka *k = rd_kafka_opaque(rk);

    if (k && k->log)
        k->log(level, fac, buf, k->arg);
}

static void on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    struct ship_kafka *k = opaque;

    (void)rk;
    k->broker_errors++;
    snprintf(k->last_broker_error, sizeof(k->last_broker_error), "%s: %s",
             rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static int set(rd_kafka_conf_t *conf, const char *key, const char *value, const char *origin,
               char *err, size_t err_len)
{
    char why[512];

    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) != RD_KAFKA_CONF_OK) {
        snprintf(err, err_len, "%s: %s = %s: librdkafka refuses it: %s", origin, key, value, why);
        return -EINVAL;
    }
    return 0;
}

int ship_kafka_conf(const struct config *c, bool producer, const char *txid, rd_kafka_conf_t *conf,
                    char *err, size_t err_len)
{
    char num[32];
    int r;

    if (!c->ship_brokers) {
        snprintf(err, err_len, "no brokers: give --brokers HOST:PORT or [ship] brokers");
        return -EINVAL;
    }
    r = set(conf, "bootstrap.servers", c->ship_brokers, "[ship] brokers", err, err_len);
    if (r == 0 && producer) {
        snprintf(num, sizeof(num), "%llu", (unsigned long long)c->ship_linger_ms);
        r = set(conf, "transactional.id", txid, "[ship] transactional_id", err, err_len);
        if (r == 0)
            r = set(conf, "enable.idempotence", "true", "logctl ship", err, err_len);
        if (r == 0)
            r = set(conf, "compression.codec",
                    config_ship_compression_name((enum ship_compression)c->ship_compression),
                    "[ship] compression", err, err_len);
        if (r == 0)
            r = set(conf, "linger.ms", num, "[ship] linger_ms", err, err_len);
        /* Bigger batches than librdkafka's default: records are small and
         * the transaction, not the batch, is what bounds the lag. */
        if (r == 0)
            r = set(conf, "batch.num.messages", "100000", "logctl ship", err, err_len);
        if (r == 0)
            r = set(conf, "queue.buffering.max.messages", "1000000", "logctl ship", err, err_len);
    }
    for (size_t i = 0; r == 0 && i < c->ship_kafka.n; i++) {
        const struct config_kafka_setting *s = &c->ship_kafka.v[i];
        char origin[512];

        if (s->line == CONFIG_ORIGIN_COMMAND_LINE)
            snprintf(origin, sizeof(origin), "--set");
        else
            snprintf(origin, sizeof(origin), "%s:%u", c->origin_file ? c->origin_file : "config",
                     (unsigned)s->line);
        if (producer) {
            r = set(conf, s->key, s->value, origin, err, err_len);
        } else {
            char why[256];

            /* The producer has judged every property already; a consumer
             * takes only those that apply to it (security, timeouts). */
            (void)rd_kafka_conf_set(conf, s->key, s->value, why, sizeof(why));
        }
    }
    return r;
}

int ship_check_settings(const struct config *config, char *err, size_t err_len)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int r = ship_kafka_conf(config, true, "check", conf, err, err_len);

    rd_kafka_conf_destroy(conf);
    return r;
}

int ship_kafka_new(struct ship_kafka **ret, const struct config *c, const char *txid,
                   ship_delivered_fn delivered, ship_kafka_log_fn log, void *arg, char *err,
                   size_t err_len)
{
    struct ship_kafka *k = calloc(1, sizeof(*k));
    rd_kafka_conf_t *conf;
    char why[512];
    int r;

    if (!k)
        return -ENOMEM;
    conf = rd_kafka_conf_new();
    r = ship_kafka_conf(c, true, txid, conf, err, err_len);
    if (r < 0) {
        rd_kafka_conf_destroy(conf);
        free(k);
        return r;
    }
    k->delivered = delivered;
    k->log = log;
    k->arg = arg;
    rd_kafka_conf_set_opaque(conf, k);
    rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
    rd_kafka_conf_set_error_cb(conf, on_error);
    rd_kafka_conf_set_log_cb(conf, on_log);
    k->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, why, sizeof(why));
    if (!k->rk) {
        rd_kafka_conf_destroy(conf);
        snprintf(err, err_len, "cannot make the Kafka producer: %s", why);
        free(k);
        return -EINVAL;
    }
    *ret = k;
    return 0;
}

uint64_t ship_kafka_transaction_timeout_ms(const struct ship_kafka *k)
{
    char value[32];
    size_t size = sizeof(value);
    uint64_t ms;

    if (rd_kafka_conf_get(rd_kafka_conf(k->rk), "transaction.timeout.ms", value, &size) !=
            RD_KAFKA_CONF_OK ||
        parse_uint(value, 10, &ms) < 0)
        return 60000; /* librdkafka's default; it has always answered, though */
    return ms;
}

void ship_kafka_free(struct ship_kafka *k)
{
    if (!k)
        return;
    /* Whatever is still queued belongs to a transaction that is not
     * committed; the next shipper's init_transactions aborts it. */
    rd_kafka_purge(k->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    topic_handles_free(k);
    rd_kafka_destroy_flags(k->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
    free(k);
}

/* What a failed transaction call asks of the caller. */
static enum ship_outcome judge(rd_kafka_error_t *e, const char *what, char *err, size_t err_len)
{
    enum ship_outcome o;

    if (!e)
        return SHIP_OK;
    snprintf(err, err_len, "%s: %s (%s)", what, rd_kafka_error_string(e), rd_kafka_error_name(e));
    if (rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__FENCED ||
        rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
        rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH)
        o = SHIP_FENCED;
    else if (rd_kafka_error_is_fatal(e))
        o = SHIP_FATAL;
    else if (rd_kafka_error_txn_requires_abort(e))
        o = SHIP_ABORT;
    else if (rd_kafka_error_is_retriable(e) ||
             rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__TIMED_OUT)
        o = SHIP_RETRY;
    else
        o = SHIP_FATAL; /* an error without a remedy: start over with a new producer */
    rd_kafka_error_destroy(e);
    return o;
}

/* The same for a produce or flush error code: the producer's own fatal
 * error when it has one, else an abortable one. */
static enum ship_outcome judge_code(struct ship_kafka *k, rd_kafka_resp_err_t code,
                                    const char *what, char *err, size_t err_len)
{
    char why[512];
    rd_kafka_resp_err_t fatal = rd_kafka_fatal_error(k->rk, why, sizeof(why));

    if (fatal) {
        snprintf(err, err_len, "%s: %s (%s)", what, why, rd_kafka_err2name(fatal));
        return fatal == RD_KAFKA_RESP_ERR__FENCED || fatal == RD_KAFKA_RESP_ERR_PRODUCER_FENCED
                   ? SHIP_FENCED
                   : SHIP_FATAL;
    }
    snprintf(err, err_len, "%s: %s (%s)", what, rd_kafka_err2str(code), rd_kafka_err2name(code));
    return SHIP_ABORT;
}

enum ship_outcome ship_kafka_init_transactions(struct ship_kafka *k, int timeout_ms, char *err,
                                               size_t err_len)
{
    return judge(rd_kafka_init_transactions(k->rk, timeout_ms), "init_transactions", err,
                 err_len);
}

enum ship_outcome ship_kafka_begin(struct ship_kafka *k, char *err, size_t err_len)
{
    return judge(rd_kafka_begin_transaction(k->rk), "begin_transaction", err, err_len);
}

enum ship_outcome ship_kafka_flush(struct ship_kafka *k, int timeout_ms, char *err,
                                   size_t err_len)
{
    rd_kafka_resp_err_t e = rd_kafka_flush(k->rk, timeout_ms);

    if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
        return SHIP_OK;
    if (e == RD_KAFKA_RESP_ERR__TIMED_OUT) {
        snprintf(err, err_len, "flush: %d messages not delivered after %d ms",
                 rd_kafka_outq_len(k->rk), timeout_ms);
        return SHIP_RETRY;
    }
    return judge_code(k, e, "flush", err, err_len);
}

enum ship_outcome ship_kafka_commit(struct ship_kafka *k, int timeout_ms, char *err,
                                    size_t err_len)
{
    return judge(rd_kafka_commit_transaction(k->rk, timeout_ms), "commit_transaction", err,
                 err_len);
}

enum ship_outcome ship_kafka_abort(struct ship_kafka *k, int timeout_ms, char *err,
                                   size_t err_len)
{
    return judge(rd_kafka_abort_transaction(k->rk, timeout_ms), "abort_transaction", err,
                 err_len);
}

enum ship_outcome ship_kafka_produce(struct ship_kafka *k, const char *topic, int32_t partition,
                                     const void *key, size_t key_len, const void *value,
                                     size_t len, int64_t timestamp_ms, rd_kafka_headers_t *hdrs,
                                     void *opaque, char *err, size_t err_len)
{
    rd_kafka_topic_t *rkt = topic_handle(k, topic);

    for (;;) {
        rd_kafka_resp_err_t e =
            rkt ? rd_kafka_producev(k->rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(partition),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                    RD_KAFKA_V_KEY(key, key_len),
                                    RD_KAFKA_V_VALUE((void *)value, len),
                                    RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
                                    RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END)
                : rd_kafka_producev(k->rk, RD_KAFKA_V_TOPIC(topic),
                                    RD_KAFKA_V_PARTITION(partition),
                                    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                    RD_KAFKA_V_KEY(key, key_len),
                                    RD_KAFKA_V_VALUE((void *)value, len),
                                    RD_KAFKA_V_TIMESTAMP(timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
                                    RD_KAFKA_V_OPAQUE(opaque), RD_KAFKA_V_END);

        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            return SHIP_OK;
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(k->rk, 10); /* delivery reports make room */
            continue;
        }
        if (hdrs)
            rd_kafka_headers_destroy(hdrs);
        return judge_code(k, e, topic, err, err_len);
    }
}

void ship_kafka_poll(struct ship_kafka *k, int timeout_ms)
{
    rd_kafka_poll(k->rk, timeout_ms);
}

int ship_kafka_partitions(struct ship_kafka *k, const char *topic, int timeout_ms, int *ret_count,
                          char *err, size_t err_len)
{
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(k->rk, topic, NULL);
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e;
    int r = 0;

    if (!rkt) {
        snprintf(err, err_len, "topic %s: %s", topic, rd_kafka_err2str(rd_kafka_last_error()));
        return -EINVAL;
    }
    e = rd_kafka_metadata(k->rk, 0, rkt, &md, timeout_ms);
    if (e) {
        snprintf(err, err_len, "topic %s: metadata: %s", topic, rd_kafka_err2str(e));
        r = -EAGAIN;
    } else if (md->topic_cnt != 1 || md->topics[0].err ||
               md->topics[0].partition_cnt <= 0) {
        e = md->topic_cnt == 1 ? md->topics[0].err : RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
        snprintf(err, err_len, "topic %s: %s", topic,
                 e ? rd_kafka_err2str(e) : "no partitions yet");
        r = e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ? -ENOENT : -EAGAIN;
    } else {
        *ret_count = md->topics[0].partition_cnt;
    }
    if (md)
        rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(rkt);
    return r;
}

int ship_kafka_high_watermark(struct ship_kafka *k, const char *topic, int32_t partition,
                              int timeout_ms, int64_t *ret, char *err, size_t err_len)
{
    int64_t low = 0, high = 0;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(k->rk, topic, partition, &low, &high, timeout_ms);

    if (e) {
        snprintf(err, err_len, "%s [%d]: watermarks: %s", topic, (int)partition,
                 rd_kafka_err2str(e));
        return e == RD_KAFKA_RESP_ERR__TIMED_OUT || e == RD_KAFKA_RESP_ERR__TRANSPORT ? -EAGAIN
                                                                                      : -EIO;
    }
    *ret = high;
    return 0;
}

uint64_t ship_kafka_broker_errors(const struct ship_kafka *k)
{
    return k->broker_errors;
}

const char *ship_kafka_last_broker_error(const struct ship_kafka *k)
{
    return k->last_broker_error;
}
