/* The shipper's loop (docs/SHIP.md): the producer's generations, and the
 * passes over the spool that fill transactions.
 *
 * One transaction: records of any streams, each stream's in position
 * order, then a wait for every delivery report (so the offsets are known
 * and every record is in the cluster before the progress that claims it),
 * then one progress message per stream that moved, then the commit. Only
 * after the commit does the spool's copy of the progress
 * (<spool>/ship/progress) move, and only after that may a shipped shard be
 * deleted. A failure on the way:
 *   retriable (a broker away, a timeout): the same call again, with
 *     backoff, saying so in the log and the status;
 *   abortable: the transaction is aborted and every stream goes back to
 *     its committed position: what follows is produced again, in a new
 *     transaction;
 *   fatal: the producer is destroyed, a new one made (init_transactions
 *     aborts whatever the old one left open), and the progress read back;
 *     a cluster that refuses a new producer fails a one-shot run, and is
 *     waited for, with backoff, by a follower;
 *   fenced: the cluster no longer takes this producer's transactions.
 *     Either it ended them itself (a transaction open longer than
 *     transaction.timeout.ms, say while the cluster was out of reach), and
 *     a new producer goes on, or another shipper took the transactional.id
 *     over: fenced again within SHIP_FENCE_WINDOW_NS, and not after a
 *     transaction open that long, this one stops with an error and
 *     produces nothing more.
 *
 * What the loop hands on, acting on the same struct shipper (ship-run.h):
 * taking the spool's lock to ship-lock.c, judging a fence to ship-fence.c,
 * ending a transaction to ship-commit.c, reading back at the start of a
 * generation to ship-restore.c, deleting shipped shards to ship-delete.c,
 * the figures to ship-figures.c. */
#include "ship-run.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"
#include "text.h"

void ship_say(struct shipper *s, enum ship_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (level <= SHIP_LOG_WARNING) {
        snprintf(s->fig.last_error, sizeof(s->fig.last_error), "%s", msg);
        s->fig.last_error_ns = now_realtime_ns();
    }
    if (s->hooks->log)
        s->hooks->log(s->hooks->arg, level, msg);
}

static bool stopping(struct shipper *s)
{
    return s->hooks->should_stop && s->hooks->should_stop(s->hooks->arg);
}

void ship_notify(struct shipper *s, const char *state)
{
    if (s->hooks->notify)
        s->hooks->notify(s->hooks->arg, state);
}

/* ---- waiting ---- */

/* Sleeps ms serving librdkafka's callbacks, keeping the watchdog fed. */
static void pause_ms(struct shipper *s, int ms)
{
    while (ms > 0 && !stopping(s)) {
        int step = ms > 200 ? 200 : ms;

        if (s->k)
            ship_kafka_poll(s->k, step);
        else
            (void)usleep((useconds_t)step * 1000u);
        ms -= step;
        ship_notify(s, "WATCHDOG=1");
    }
}

static int next_backoff(int ms)
{
    ms *= 2;
    return ms > SHIP_BACKOFF_MAX_MS ? SHIP_BACKOFF_MAX_MS : ms;
}

void ship_set_waiting(struct shipper *s, bool waiting, const char *why)
{
    if (waiting && !s->waiting)
        ship_say(s, SHIP_LOG_WARNING, "waiting for the brokers (%s): %s; trying again with backoff",
                 s->c->ship_brokers, why);
    else if (!waiting && s->waiting)
        ship_say(s, SHIP_LOG_NOTICE, "the brokers answer again; shipping goes on");
    s->waiting = waiting;
    if (waiting)
        ship_write_status(s, false);
}

int ship_wait_to_retry(struct shipper *s, int *backoff, const char *err, bool patient)
{
    ship_set_waiting(s, true, err);
    if (stopping(s) && (!patient || *backoff >= SHIP_BACKOFF_MAX_MS))
        return -ECANCELED;
    pause_ms(s, *backoff);
    *backoff = next_backoff(*backoff);
    return 0;
}

/* ---- where a stream's records go ---- */

static void topic_for(struct shipper *s, const char *producer, char *out, size_t size)
{
    const char *t = s->c->ship_topic;
    size_t n = 0;

    while (*t && n + 1 < size) {
        const char *sub = NULL;

        if (strncmp(t, "{producer}", 10) == 0) {
            sub = producer;
            t += 10;
        } else if (strncmp(t, "{host}", 6) == 0) {
            sub = s->host;
            t += 6;
        }
        if (sub) {
            for (; *sub && n + 1 < size; sub++)
                out[n++] = *sub;
        } else {
            out[n++] = *t++;
        }
    }
    out[n] = '\0';
    /* Kafka takes [A-Za-z0-9._-] in a topic name, at most 249 of them. */
    for (size_t i = 0; i < n; i++) {
        char ch = out[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-'))
            out[i] = '_';
    }
    if (n > SHIP_TOPIC_MAX)
        out[SHIP_TOPIC_MAX] = '\0';
}

/* The partition count of topic, asked once per producer generation. */
static int partitions_of(struct shipper *s, const char *topic, int *ret)
{
    char err[512];
    struct topic_count *v;
    int backoff = SHIP_BACKOFF_MIN_MS, r;

    for (size_t i = 0; i < s->n_topics; i++)
        if (strcmp(s->topics[i].topic, topic) == 0) {
            *ret = s->topics[i].partitions;
            return 0;
        }
    for (;;) {
        r = ship_kafka_partitions(s->k, topic, SHIP_KAFKA_CALL_MS, ret, err, sizeof(err));
        if (r == 0)
            break;
        if (r == -ENOENT)
            ship_say(s, SHIP_LOG_ERROR,
                     "%s; create it, or let the cluster create topics on use (see docs/SHIP.md)",
                     err);
        if (ship_wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    ship_set_waiting(s, false, NULL);
    v = realloc(s->topics, (s->n_topics + 1) * sizeof(*v));
    if (!v)
        return -ENOMEM;
    s->topics = v;
    snprintf(v[s->n_topics].topic, sizeof(v->topic), "%s", topic);
    v[s->n_topics++].partitions = *ret;
    return 0;
}

/* Gives the stream its partition (murmur2 of the producer name, as Java's
 * default partitioner picks), first telling the cluster, inside the
 * transaction, where our records in a partition not yet known start. */
static int place_stream(struct shipper *s, struct ship_stream *st, bool *marked);
static int deliver_markers(struct shipper *s);

/* ---- the transaction ---- */

static enum ship_outcome begin_if_needed(struct shipper *s, char *err, size_t err_len)
{
    enum ship_outcome o;

    if (s->in_txn)
        return SHIP_OK;
    o = ship_kafka_begin(s->k, err, err_len);
    if (o == SHIP_OK) {
        s->in_txn = true;
        s->txn_records = s->txn_bytes = 0;
        s->txn_started_ns = s->txn_begun_ns = now_monotonic_ns();
        s->delivery_failed = false;
    }
    return o;
}

static void on_delivered(void *msg_opaque, int32_t partition, int64_t offset,
                         rd_kafka_resp_err_t err, void *arg)
{
    struct shipper *s = arg;
    struct ship_stream *st = msg_opaque;

    (void)partition;
    if (err) {
        if (!s->delivery_failed)
            snprintf(s->delivery_error, sizeof(s->delivery_error), "%s", rd_kafka_err2str(err));
        s->delivery_failed = true;
        return;
    }
    if (st && offset > st->last_offset)
        st->last_offset = offset;
    if (st && st->part && offset > st->part->last_offset)
        st->part->last_offset = offset;
}

/* A start marker, produced when the partition is not known yet, sets
 * *marked: deliver_markers() must then run before any record goes there. */
static int place_stream(struct shipper *s, struct ship_stream *st, bool *marked)
{
    char topic[SHIP_TOPIC_MAX + 1], key[700], value[64], err[512];
    struct ship_partition *p;
    int count = 0, r, backoff = SHIP_BACKOFF_MIN_MS;
    int32_t partition;
    int64_t high = 0;
    enum ship_outcome o;

    if (st->part)
        return 0;
    topic_for(s, st->producer, topic, sizeof(topic));
    r = partitions_of(s, topic, &count);
    if (r < 0)
        return r;
    partition = rd_kafka_msg_partitioner_murmur2(NULL, st->producer, strlen(st->producer), count,
                                                 NULL, NULL);
    p = ship_streams_partition(s->streams, topic, partition);
    if (!p)
        return -ENOMEM;
    if (!p->known) {
        /* Before the first record of ours goes there: a marker saying
         * that nothing of ours comes before the partition's end now, so a
         * read-back after a crash knows where to look even for records
         * whose transaction never committed. Delivered before any record. */
        for (;;) {
            r = ship_kafka_high_watermark(s->k, topic, partition, SHIP_KAFKA_CALL_MS, &high, err,
                                          sizeof(err));
            if (r == 0)
                break;
            if (ship_wait_to_retry(s, &backoff, err, false) < 0)
                return -ECANCELED;
        }
        o = begin_if_needed(s, err, sizeof(err));
        if (o == SHIP_OK) {
            ship_progress_key_start(key, sizeof(key), s->txid, topic, partition);
            ship_progress_value_start(value, sizeof(value), high);
            o = ship_kafka_produce(s->k, s->c->ship_progress_topic, RD_KAFKA_PARTITION_UA, key,
                                   strlen(key), value, strlen(value), 0, NULL, NULL, err,
                                   sizeof(err));
        }
        if (o != SHIP_OK) {
            ship_say(s, SHIP_LOG_WARNING, "%s", err);
            return -(int)o - 1000; /* an outcome, for ship_pass */
        }
        /* Known from now on; should the delivery fail, the generation
         * ends and its tables with it. */
        p->start = high;
        p->known = true;
        *marked = true;
    }
    st->part = p;
    return 0;
}

/* Waits until the start markers produced are delivered (and with them
 * whatever else is queued). */
static int deliver_markers(struct shipper *s)
{
    char err[512];
    enum ship_outcome o;

    for (;;) {
        o = ship_kafka_flush(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err));
        if (o != SHIP_RETRY)
            break;
        ship_set_waiting(s, true, err);
        if (stopping(s))
            return -ECANCELED;
    }
    if (o != SHIP_OK) {
        ship_say(s, SHIP_LOG_WARNING, "%s", err);
        return -(int)o - 1000;
    }
    if (s->delivery_failed) {
        ship_say(s, SHIP_LOG_WARNING, "a start marker was not delivered: %s", s->delivery_error);
        return -(int)SHIP_ABORT - 1000;
    }
    ship_set_waiting(s, false, NULL);
    if (s->txn_records == 0)
        s->txn_started_ns = now_monotonic_ns(); /* the wait is not the batch's time */
    return 0;
}

/* Places, before a pass produces any record, every stream with records
 * left to ship that has no partition yet. Their start markers go out
 * together and one flush waits for them all: one flush per stream, between
 * the records of the others, made the first transaction wait for every
 * record produced before each marker. */
static int place_streams(struct shipper *s, struct ship_source **v, size_t n)
{
    bool marked = false;
    int r;

    for (size_t i = 0; i < n && !stopping(s); i++) {
        struct ship_stream *st = v[i]->st;

        if (st->part || v[i]->broken || st->next >= v[i]->first + v[i]->records)
            continue;
        r = place_stream(s, st, &marked);
        if (r < 0)
            return r;
    }
    return marked ? deliver_markers(s) : 0;
}

/* The headers of one record (docs/SHIP.md). The uid and pid are the
 * record's own sender's when it carries them (a syslog datagram shard:
 * its producer is many processes), else the shard header's; a record of
 * a syslog input also says which one (logshard.source). */
static rd_kafka_headers_t *record_headers(struct shipper *s, struct ship_source *src,
                                          uint64_t position, const struct shard_item *it)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(8);
    char pos[24], uid[24], pid[24];
    size_t pos_len = decimal_format_u64(pos, position);

    /* Formatted once a shard: at hundreds of thousands of records a
     * second, the snprintf()s of every record were a cost of their own. */
    if (!src->headers_ready) {
        ship_stream_id_format(src->hdr_stream, src->st->id);
        src->hdr_uid_len = (uint8_t)decimal_format_u64(src->hdr_uid, src->h.uid);
        src->hdr_pid_len = (uint8_t)decimal_format_u64(src->hdr_pid, src->h.pid);
        snprintf(src->hdr_shard, sizeof(src->hdr_shard), "%016" PRIx64, src->h.shard_id);
        src->headers_ready = true;
    }
    /* Every length given: librdkafka would otherwise strlen() each name
     * and value of every record. */
#define NAME(n) n, (ssize_t)(sizeof(n) - 1)
    rd_kafka_header_add(h, NAME(SHIP_HEADER_STREAM), src->hdr_stream, 32);
    rd_kafka_header_add(h, NAME(SHIP_HEADER_POSITION), pos, (ssize_t)pos_len);
    rd_kafka_header_add(h, NAME(SHIP_HEADER_PRODUCER), src->h.producer,
                        (ssize_t)src->h.producer_len);
    if (it->has_creds) {
        rd_kafka_header_add(h, NAME(SHIP_HEADER_UID), uid,
                            (ssize_t)decimal_format_u64(uid, it->creds.uid));
        rd_kafka_header_add(h, NAME(SHIP_HEADER_PID), pid,
                            (ssize_t)decimal_format_u64(pid, it->creds.pid));
    } else {
        rd_kafka_header_add(h, NAME(SHIP_HEADER_UID), src->hdr_uid, src->hdr_uid_len);
        rd_kafka_header_add(h, NAME(SHIP_HEADER_PID), src->hdr_pid, src->hdr_pid_len);
    }
    if (src->h.source != SHARD_SOURCE_CLIENT) {
        const char *name = shard_source_name(src->h.source);
        char num[24];

        if (!name) { /* a source this build does not know: its number */
            decimal_format_u64(num, src->h.source);
            name = num;
        }
        rd_kafka_header_add(h, NAME(SHIP_HEADER_SOURCE), name, (ssize_t)strlen(name));
    }
    rd_kafka_header_add(h, NAME(SHIP_HEADER_SHARD), src->hdr_shard, 16);
    rd_kafka_header_add(h, NAME(SHIP_HEADER_SHIPPER), s->txid, (ssize_t)s->txid_len);
#undef NAME
    return h;
}

static bool txn_full(struct shipper *s)
{
    if (!s->in_txn)
        return false;
    if (s->txn_records >= s->c->ship_transaction_records)
        return true;
    /* The clock every 64 records only: it is asked for each one. */
    if (s->txn_records % 64 != 0)
        return false;
    return now_monotonic_ns() - s->txn_started_ns >= s->c->ship_transaction_interval_ms * 1000000u;
}

/* Produces what one source holds at its stream's position, until the
 * transaction is full or budget records are produced. Returns records
 * produced, or a negative value: an errno, or -1000 - outcome. */
static int64_t ship_source(struct shipper *s, struct ship_source *src, uint64_t budget)
{
    struct ship_stream *st = src->st;
    int64_t produced = 0;
    char err[512];
    int r;

    while ((uint64_t)produced < budget && !txn_full(s) && !stopping(s)) {
        struct shard_item it;
        enum ship_outcome o;

        r = ship_source_read(src, s->spool_fd, &it);
        if (r == 0)
            break;
        if (r < 0) {
            uint64_t at = 0;
            const char *why = strerror(-r);

            if (src->r)
                shard_reader_error(src->r, &at, &why);
            ship_say(s, SHIP_LOG_ERROR,
                     "%s/%s/%s: position %" PRIu64 " of stream %s cannot be read (offset %" PRIu64
                     ": %s); the stream waits here: logctl verify and logctl merge tell more",
                     s->spool, src->active ? SPOOL_ACTIVE_DIR : SPOOL_DONE_DIR, src->name, st->next,
                     st->producer, at, why);
            src->broken = true;
            break;
        }
        if (!st->part) { /* place_streams() placed it, unless it stopped early */
            bool marked = false;

            r = place_stream(s, st, &marked);
            if (r == 0 && marked)
                r = deliver_markers(s);
            if (r < 0)
                return r;
        }
        o = begin_if_needed(s, err, sizeof(err));
        if (o == SHIP_OK)
            o = ship_kafka_produce(s->k, st->part->topic, st->part->partition, st->producer,
                                   strlen(st->producer), it.payload, it.len,
                                   (int64_t)(it.timestamp_ns / 1000000u),
                                   record_headers(s, src, st->next, &it), st, err, sizeof(err));
        if (o != SHIP_OK) {
            ship_say(s, SHIP_LOG_WARNING, "%s", err);
            return -1000 - (int)o;
        }
        st->next++;
        st->next_ns = it.timestamp_ns;
        st->dirty = true;
        s->txn_records++;
        /* Delivery reports as they come, not all at the commit's flush:
         * their memory goes back steadily, and the flush has less to wait
         * for. */
        if (s->txn_records % 1024 == 0)
            ship_kafka_poll(s->k, 0);
        s->txn_bytes += it.len;
        produced++;
    }
    return produced;
}

/* One look at every stream: produces from the source that holds each
 * stream's next position. Returns records produced or a negative value as
 * ship_source. */
static int64_t ship_pass(struct shipper *s)
{
    size_t n;
    struct ship_source **v = ship_sources_sorted(s->sources, &n);
    int64_t total = 0;
    /* A share of the transaction per stream and pass, so that one stream
     * with a long backlog does not hold back the others' records (their
     * lag) until it is through. */
    uint64_t share = s->c->ship_transaction_records / 8;

    if (share < 1000)
        share = 1000;
    {
        int r = place_streams(s, v, n);

        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < n && !txn_full(s) && !stopping(s);) {
        struct ship_stream *st = v[i]->st;
        size_t j = i;
        uint64_t lowest = v[i]->first;
        bool holds = false;

        while (j < n && v[j]->st == st) {
            if (st->next >= v[j]->first && st->next < v[j]->first + v[j]->records)
                holds = true;
            j++;
        }
        if (!holds && st->next < lowest && !v[i]->broken &&
            !ship_stream_in_active(s->spool_fd, st->id)) {
            /* The records before lowest are not in the spool: never there
             * when shipping began, or merged, deleted or quarantined
             * before they were shipped. Said once, counted, skipped. */
            if (st->in_kafka || st->next > 0) {
                char hex[33];

                ship_stream_id_format(hex, st->id);
                ship_say(s, SHIP_LOG_WARNING,
                         "producer %s, stream %s: positions %" PRIu64 " to %" PRIu64
                         " are not in the spool (removed before they were shipped); shipping goes "
                         "on from %" PRIu64 " in %s/%s/%s",
                         st->producer, hex, st->next, lowest - 1, lowest, s->spool,
                         v[i]->active ? SPOOL_ACTIVE_DIR : SPOOL_DONE_DIR, v[i]->name);
                s->fig.records_missing += lowest - st->next;
            }
            st->next = lowest;
            st->dirty = true;
            holds = true;
        }
        for (size_t k = i, left = share; holds && k < j && left > 0 && !txn_full(s); k++) {
            int64_t got;

            if (v[k]->broken || st->next < v[k]->first ||
                st->next >= v[k]->first + v[k]->records)
                continue;
            got = ship_source(s, v[k], left);
            if (got < 0)
                return got;
            total += got;
            left -= (uint64_t)got;
        }
        i = j;
    }
    return total;
}

/* ---- one producer's life ---- */

static void on_kafka_log(int level, const char *facility, const char *message, void *arg)
{
    struct shipper *s = arg;
    enum ship_log_level l = level <= 3 ? SHIP_LOG_ERROR
                            : level == 4 ? SHIP_LOG_WARNING
                            : level == 5 ? SHIP_LOG_NOTICE
                                         : SHIP_LOG_INFO;

    /* Not through ship_say(): librdkafka's lines are not the shipper's last
     * error, its own judgement of each failure is. */
    if (s->hooks->log) {
        char line[1024];

        snprintf(line, sizeof(line), "librdkafka: %s: %s", facility, message);
        s->hooks->log(s->hooks->arg, l, line);
    }
}

static int init_producer(struct shipper *s)
{
    char err[512];
    int backoff = SHIP_BACKOFF_MIN_MS, r;
    enum ship_outcome o;

    r = ship_kafka_new(&s->k, s->c, s->txid, on_delivered, on_kafka_log, s, err, sizeof(err));
    if (r < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
    s->txn_timeout_ns = ship_kafka_transaction_timeout_ms(s->k) * 1000000u;
    for (;;) {
        o = ship_kafka_init_transactions(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err));
        if (o == SHIP_OK)
            break;
        /* A cluster that refuses the producer itself (the transactional
         * id not authorized, transactions not supported): a follower, which
         * runs as a service, waits for it to be set right and tries again
         * with a new producer, saying so; a one-shot run fails. */
        if (o == SHIP_FATAL && s->opts->follow) {
            ship_set_waiting(s, true, err);
            return SHIP_RESTART;
        }
        if (o == SHIP_FENCED || o == SHIP_FATAL) {
            ship_say(s, SHIP_LOG_ERROR, "%s", err);
            return o == SHIP_FENCED ? -EPERM : -EIO;
        }
        if (ship_wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    ship_set_waiting(s, false, NULL);
    return 0;
}

static void reset_state(struct shipper *s)
{
    ship_sources_free(s->sources);
    ship_streams_free(s->streams);
    s->sources = NULL;
    s->streams = NULL;
    free(s->topics);
    s->topics = NULL;
    s->n_topics = 0;
    s->in_txn = false;
    s->txn_begun_ns = 0;
}

static int generation(struct shipper *s)
{
    uint64_t shipped_at_start;
    int r;

    reset_state(s);
    r = ship_streams_new(&s->streams);
    if (r == 0)
        r = ship_sources_new(&s->sources);
    if (r < 0)
        return r;
    r = init_producer(s);
    if (r != 0)
        return r;
    r = ship_restore(s);
    if (r < 0)
        return r;
    {
        /* The progress topic's metadata now, not at the first start
         * marker, whose delivery would otherwise wait for librdkafka's
         * next look at topics it does not know yet. */
        int count;

        r = partitions_of(s, s->c->ship_progress_topic, &count);
        if (r < 0)
            return r;
    }
    if (!s->ready_sent) {
        ship_notify(s, "READY=1");
        s->ready_sent = true;
        ship_say(s, SHIP_LOG_INFO, "shipping %s%s to %s as %s (progress in %s, %zu streams known)",
                 s->spool, s->opts->follow ? " (following)" : "", s->c->ship_brokers, s->txid,
                 s->c->ship_progress_topic, ship_streams_count(s->streams));
    }
    shipped_at_start = s->fig.records_shipped;
    for (;;) {
        struct ship_active_shard *act = NULL;
        size_t n_act = 0;
        int64_t got;

        if (stopping(s))
            break;
        if (s->opts->follow && s->hooks->list_active &&
            s->hooks->list_active(s->hooks->arg, &act, &n_act) < 0) {
            act = NULL;
            n_act = 0;
        }
        r = ship_sources_scan(s->sources, s->spool_fd, s->spool, s->streams, act, n_act,
                              s->hooks);
        free(act);
        if (r < 0) {
            ship_say(s, SHIP_LOG_ERROR, "%s/%s: cannot be read: %s%s", s->spool, SPOOL_DONE_DIR,
                     strerror(-r),
                     r == -EMFILE ? " (a follower holds a descriptor for each active shard, "
                                    "one per connected producer: raise the hard open-file "
                                    "limit, LimitNOFILE= or ulimit -Hn)"
                                  : "");
            return r;
        }
        got = ship_pass(s);
        if (got <= -1000) {
            enum ship_outcome o = (enum ship_outcome)(-got - 1000);

            if (o == SHIP_FENCED)
                return -EPERM;
            if (o == SHIP_ABORT && s->in_txn) {
                char err[512];

                ship_say(s, SHIP_LOG_WARNING,
                         "aborting the transaction of %" PRIu64 " records, which are produced "
                         "again after a read-back",
                         s->txn_records);

                /* As in ship_commit(): aborted, then read back by a new
                 * generation before anything is produced again. */
                if (ship_kafka_abort(s->k, SHIP_KAFKA_CALL_MS, err, sizeof(err)) == SHIP_OK)
                    s->fig.transactions_aborted++;
            }
            ship_rewind_streams(s);
            return SHIP_RESTART;
        }
        if (got < 0)
            return (int)got;
        /* Any dirty stream without records (a gap skipped) also needs a
         * commit to record its new position. */
        if (!s->in_txn) {
            for (size_t i = 0; i < ship_streams_count(s->streams); i++)
                if (ship_streams_at(s->streams, i)->dirty) {
                    char err[512];

                    if (begin_if_needed(s, err, sizeof(err)) != SHIP_OK) {
                        ship_say(s, SHIP_LOG_WARNING, "%s", err);
                        return SHIP_RESTART;
                    }
                    break;
                }
        }
        if (s->in_txn && (txn_full(s) || got == 0)) {
            r = ship_commit(s);
            if (r != 0)
                return r;
            ship_write_status(s, false);
            continue;
        }
        ship_write_status(s, false);
        if (got == 0) {
            if (!s->opts->follow)
                break;
            pause_ms(s, (int)s->c->ship_poll_interval_ms);
        }
    }
    r = ship_commit(s);
    if (r == 0 && !s->opts->follow)
        ship_say(s, SHIP_LOG_INFO, "shipped %" PRIu64 " records; every sealed record is committed",
                 s->fig.records_shipped - shipped_at_start);
    return r == SHIP_RESTART ? SHIP_RESTART : r;
}

/* ---- the generations ---- */

int ship_run(const struct ship_opts *opts, const struct ship_hooks *hooks)
{
    struct shipper s = { .opts = opts, .hooks = hooks, .c = opts->config, .spool = opts->spool };
    _cleanup_close_ int lock_fd = -1;
    int r, restarts = 0;

    s.spool_fd = open(opts->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.spool_fd < 0) {
        r = -errno;
        ship_say(&s, SHIP_LOG_ERROR, "%s: %s", opts->spool, strerror(-r));
        return r;
    }
    if (faccessat(s.spool_fd, SPOOL_DONE_DIR, F_OK, 0) < 0) {
        r = -errno;
        ship_say(&s, SHIP_LOG_ERROR, "%s/%s: %s (is %s a spool?)", opts->spool, SPOOL_DONE_DIR,
                 strerror(-r), opts->spool);
        (void)close(s.spool_fd);
        return r;
    }
    r = ship_lock_spool(&s, &lock_fd);
    if (r == 0) {
        r = ship_transactional_id(s.c, opts->spool, true, &s.txid);
        if (r < 0)
            ship_say(&s, SHIP_LOG_ERROR, "%s/%s/%s: cannot read or make the transactional.id: %s",
                     opts->spool, SHIP_DIR, SHIP_ID_FILE, strerror(-r));
    }
    if (r == 0)
        r = ship_mark_spool_shipped(&s);
    if (r < 0) {
        free(s.txid);
        (void)close(s.spool_fd);
        return r;
    }
    (void)gethostname(s.host, sizeof(s.host) - 1);
    s.fig.txid = s.txid;
    s.txid_len = strlen(s.txid);
    s.fig.started_ns = now_realtime_ns();
    s.fig.state = "starting";
    s.rate_at_ns = now_monotonic_ns();
    for (;;) {
        uint64_t committed = s.fig.transactions_committed;

        r = generation(&s);
        ship_kafka_free(s.k);
        s.k = NULL;
        if (r == -EPERM && ship_go_on_after_fence(&s))
            r = SHIP_RESTART;
        if (r != SHIP_RESTART)
            break;
        /* Again at once after a generation that got something done; with
         * backoff when they keep failing. */
        restarts = s.fig.transactions_committed != committed ? 1 : restarts + 1;
        pause_ms(&s, restarts > 1 ? SHIP_BACKOFF_MAX_MS : SHIP_BACKOFF_MIN_MS);
    }
    if (r == -ECANCELED)
        r = 0; /* stopped while waiting: nothing was lost, the next run goes on */
    ship_notify(&s, "STOPPING=1");
    ship_write_status(&s, true);
    reset_state(&s);
    free(s.txid);
    (void)close(s.spool_fd);
    return r;
}
