/* What the files of the ship module share (ship.h lists them). */
#pragma once

#include <librdkafka/rdkafka.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "shard_format.h"
#include "ship-message.h"
#include "ship.h"
#include "wire.h"

/* Message headers of every shipped record (docs/SHIP.md). */
#define SHIP_HEADER_STREAM "logshard.stream"
#define SHIP_HEADER_POSITION "logshard.position"
#define SHIP_HEADER_PRODUCER "logshard.producer"
#define SHIP_HEADER_UID "logshard.uid"
#define SHIP_HEADER_PID "logshard.pid"
#define SHIP_HEADER_SHARD "logshard.shard"
#define SHIP_HEADER_SHIPPER "logshard.shipper" /* the transactional.id */
#define SHIP_HEADER_SOURCE "logshard.source"   /* a syslog input's records only */

/* ---- how a librdkafka call ended (ship-kafka.c) ---- */

enum ship_outcome {
    SHIP_OK = 0,
    SHIP_RETRY,  /* try the same call again later (a broker away, a timeout) */
    SHIP_ABORT,  /* abort the transaction, go back to what is committed */
    SHIP_FATAL,  /* the producer is unusable: make a new one */
    SHIP_FENCED, /* another shipper with our transactional.id took over */
};

/* ---- the producer (ship-kafka.c) ---- */

struct ship_kafka;

/* Called from ship_kafka_poll() and the flushes for every message produced
 * with ship_kafka_produce(): its opaque, where it landed (offset -1 and
 * err set when it failed). */
typedef void (*ship_delivered_fn)(void *msg_opaque, int32_t partition, int64_t offset,
                                  rd_kafka_resp_err_t err, void *arg);

/* The settings librdkafka gets from [ship]: brokers, compression, linger,
 * every pass-through property; for the producer also the transactional
 * id and idempotence. A refused property is named with its config line in
 * err. Returns 0 or -EINVAL. */
int ship_kafka_conf(const struct config *c, bool producer, const char *txid, rd_kafka_conf_t *conf,
                    char *err, size_t err_len);

/* librdkafka's own log lines (syslog levels), for the shipper's log. */
typedef void (*ship_kafka_log_fn)(int level, const char *facility, const char *message,
                                  void *arg);

int ship_kafka_new(struct ship_kafka **ret, const struct config *c, const char *txid,
                   ship_delivered_fn delivered, ship_kafka_log_fn log, void *arg, char *err,
                   size_t err_len);
void ship_kafka_free(struct ship_kafka *k);
/* The producer's transaction.timeout.ms, as librdkafka took it (the
 * default or a pass-through setting): how long the cluster lets one of its
 * transactions stay open before it ends it. */
uint64_t ship_kafka_transaction_timeout_ms(const struct ship_kafka *k);

enum ship_outcome ship_kafka_init_transactions(struct ship_kafka *k, int timeout_ms, char *err,
                                               size_t err_len);
enum ship_outcome ship_kafka_begin(struct ship_kafka *k, char *err, size_t err_len);
/* Waits up to timeout_ms for every produced message's delivery report. */
enum ship_outcome ship_kafka_flush(struct ship_kafka *k, int timeout_ms, char *err,
                                   size_t err_len);
enum ship_outcome ship_kafka_commit(struct ship_kafka *k, int timeout_ms, char *err,
                                    size_t err_len);
enum ship_outcome ship_kafka_abort(struct ship_kafka *k, int timeout_ms, char *err,
                                   size_t err_len);
/* Produces one message (copied) inside the open transaction; waits while
 * librdkafka's queue is full. hdrs (may be NULL) is taken over on
 * SHIP_OK and freed otherwise. */
enum ship_outcome ship_kafka_produce(struct ship_kafka *k, const char *topic, int32_t partition,
                                     const void *key, size_t key_len, const void *value,
                                     size_t len, int64_t timestamp_ms, rd_kafka_headers_t *hdrs,
                                     void *opaque, char *err, size_t err_len);
/* Serves delivery reports and errors for up to timeout_ms. */
void ship_kafka_poll(struct ship_kafka *k, int timeout_ms);
/* The partition count of topic (the topic is created where the cluster
 * creates topics on use). Returns 0, -ENOENT when the cluster has no such
 * topic, -EAGAIN when it could not be asked in time; err says why. */
int ship_kafka_partitions(struct ship_kafka *k, const char *topic, int timeout_ms, int *ret_count,
                          char *err, size_t err_len);
/* The partition's high watermark. Returns 0, -EAGAIN or -EIO. */
int ship_kafka_high_watermark(struct ship_kafka *k, const char *topic, int32_t partition,
                              int timeout_ms, int64_t *ret, char *err, size_t err_len);
/* Broker errors seen (error callback) and the last one's text. */
uint64_t ship_kafka_broker_errors(const struct ship_kafka *k);
const char *ship_kafka_last_broker_error(const struct ship_kafka *k);

/* ---- reading back (ship-readback.c) ---- */

/* The partition a consumer reads from an offset on. */
struct ship_read_range {
    char topic[SHIP_TOPIC_MAX + 1];
    int32_t partition;
    int64_t offset;
};

struct ship_readback_sink {
    /* A progress message of ours: a stream, how far it is committed and
     * where its last record is. */
    void (*stream)(void *arg, const uint8_t id[SHARD_STREAM_ID_SIZE], uint64_t next,
                   const char *producer, const char *topic, int32_t partition, int64_t offset);
    /* A start marker of ours: nothing of ours in topic/partition before offset. */
    void (*start)(void *arg, const char *topic, int32_t partition, int64_t offset);
    /* A record of ours seen in a data partition. */
    void (*record)(void *arg, const uint8_t id[SHARD_STREAM_ID_SIZE], uint64_t position,
                   const char *producer, const char *topic, int32_t partition, int64_t offset);
    void *arg;
};

/* Reads with isolation.level=read_committed every message of the progress
 * topic, then every message of the ranges (each up to its partition's
 * end), handing what is ours (txid) to sink. Returns 0, -EAGAIN when the
 * cluster could not be read in time (err says why), or -EINVAL. */
int ship_readback_progress(const struct config *c, const char *txid,
                           const struct ship_readback_sink *sink, int timeout_ms, char *err,
                           size_t err_len);
int ship_readback_ranges(const struct config *c, const char *txid, const struct ship_read_range *v,
                         size_t n, const struct ship_readback_sink *sink, int timeout_ms,
                         char *err, size_t err_len);

/* ---- the figures (ship-status.c) ---- */

struct ship_figures {
    const char *state;        /* "starting", "shipping", "idle", "waiting for the brokers" */
    const char *txid;
    uint64_t started_ns;
    uint64_t records_shipped;  /* committed, this run */
    uint64_t bytes_shipped;
    uint64_t transactions_committed;
    uint64_t transactions_aborted;
    uint64_t broker_errors;
    uint64_t lag_records;      /* acknowledged in the spool, not yet committed */
    double lag_seconds;        /* newest acknowledged record's time minus the
                                  oldest unshipped one's */
    double records_per_s;      /* over the last 10 s */
    uint64_t streams;
    uint64_t records_missing;  /* positions not in the spool, skipped */
    char last_error[1024];
    uint64_t last_error_ns;
};

/* Writes <spool>/ship/status.json (temp and rename), and the Prometheus
 * file when path is not NULL. Returns 0 or a negative errno. */
int ship_status_write(int spool_fd, const struct ship_figures *f);
int ship_metrics_write(const char *path, const struct ship_figures *f);

/* ---- streams and the spool's shards (ship-spool.c) ---- */

/* Where a topic's partition stands for us: where our records in it start
 * being unknown to the progress topic (for the read-back), and whether a
 * start marker or a progress entry has told the cluster that. */
struct ship_partition {
    char topic[SHIP_TOPIC_MAX + 1];
    int32_t partition;
    int64_t last_offset; /* the highest offset of a record of ours known; -1 none */
    int64_t start;       /* a start marker's offset; -1 none */
    bool known;          /* progress or a marker names it: no marker needed */
    struct ship_partition *next_in_list;
};

struct ship_stream {
    uint8_t id[SHARD_STREAM_ID_SIZE];
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint32_t uid;
    uint64_t committed;   /* next position, committed in Kafka */
    uint64_t next;        /* next position to produce (in the open transaction) */
    uint64_t committed_ns; /* receive time of the last committed record */
    uint64_t next_ns;     /* of the last produced one */
    int64_t last_offset;  /* the highest offset of its records delivered; -1 none */
    struct ship_partition *part; /* where its records go; NULL until known */
    bool dirty;           /* its progress is to be written in this transaction */
    bool in_kafka;        /* the cluster has a progress entry or records of it */
};

struct ship_streams;
int ship_streams_new(struct ship_streams **ret);
void ship_streams_free(struct ship_streams *t);
/* The stream of id, made (zeroed, positions 0) when create and missing.
 * NULL when missing (or out of memory). Pointers stay valid until free. */
struct ship_stream *ship_streams_get(struct ship_streams *t, const uint8_t id[SHARD_STREAM_ID_SIZE],
                                     bool create);
size_t ship_streams_count(const struct ship_streams *t);
struct ship_stream *ship_streams_at(struct ship_streams *t, size_t i);
/* The partition record, made when missing. */
struct ship_partition *ship_streams_partition(struct ship_streams *t, const char *topic,
                                              int32_t partition);
struct ship_partition *ship_streams_partitions(struct ship_streams *t);

/* A shard of the spool, sealed or active, with a reader kept open while
 * it has records to ship. */
struct ship_source {
    uint64_t shard_id;
    bool active;
    char name[300];        /* in done/ or active/ */
    struct shard_header h;
    uint64_t first;        /* ship_first_position(&h) */
    uint64_t records;      /* sealed: all of them; active: acknowledged */
    uint64_t newest_ns;
    uint64_t bytes;        /* the file's size when seen */
    struct ship_stream *st;
    int fd;
    struct shard_reader *r;
    uint64_t r_pos;        /* the position the reader returns next */
    bool seen;
    bool broken;           /* cannot be read: reported once, left alone */
    /* The header values every record of the shard shares, formatted once. */
    bool headers_ready;
    char hdr_stream[33], hdr_uid[21], hdr_pid[21], hdr_shard[17];
    uint8_t hdr_uid_len, hdr_pid_len;
};

struct ship_sources;
int ship_sources_new(struct ship_sources **ret);
void ship_sources_free(struct ship_sources *s);
/* Looks at the spool again: the active shards given (from the daemon),
 * then done/. Sources gone are dropped, new ones read (header, trailer).
 * Afterwards ship_sources_sorted() lists them by stream, then position;
 * after a scan that failed, and while one runs, it lists none.
 * log reports a shard that cannot be read (once). Returns 0 or a negative
 * errno when done/ cannot be read. */
int ship_sources_scan(struct ship_sources *s, int spool_fd, const char *spool,
                      struct ship_streams *streams, const struct ship_active_shard *act,
                      size_t n_act, const struct ship_hooks *hooks);
struct ship_source **ship_sources_sorted(struct ship_sources *s, size_t *ret_n);
/* Closes every reader (after an abort, positions go back). */
void ship_sources_drop_readers(struct ship_sources *s);
/* Closes the reader of one source and forgets the source (deleted). */
void ship_sources_forget(struct ship_sources *s, struct ship_source *src);
/* The record at the stream's position src->st->next: returns 1 with it,
 * 0 when the source holds no more records for now, or a negative errno
 * (-EBADMSG: damaged; logged by the caller). */
int ship_source_read(struct ship_source *src, int spool_fd, struct shard_item *ret);
/* Whether a shard of active/ belongs to the stream id (read from the
 * headers): a gap in the stream may then still be filled. */
bool ship_stream_in_active(int spool_fd, const uint8_t id[SHARD_STREAM_ID_SIZE]);
