/* The shipper's loop (docs/SHIP.md): the spool's lock, the producer's
 * generations, reading back what is committed, and the passes over the
 * spool that fill transactions.
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
 *   fenced: another shipper took the transactional.id over; this one
 *     stops with an error and produces nothing more. */
#include "ship-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"
#include "stream_positions.h"

#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define KAFKA_CALL_MS 10000   /* one transaction call, before it is tried again */
#define READBACK_MS 30000
#define RESTART 1             /* ship_generation: make a new producer */

struct topic_count {
    char topic[SHIP_TOPIC_MAX + 1];
    int partitions;
};

struct shipper {
    const struct ship_opts *opts;
    const struct ship_hooks *hooks;
    const struct config *c;
    const char *spool;
    int spool_fd;
    char *txid;
    char host[256];
    struct ship_kafka *k;
    struct ship_streams *streams;
    struct ship_sources *sources;
    struct topic_count *topics;
    size_t n_topics;
    /* the open transaction */
    bool in_txn;
    uint64_t txn_records;
    uint64_t txn_bytes;
    uint64_t txn_started_ns;
    bool delivery_failed;
    char delivery_error[256];
    /* figures */
    struct ship_figures fig;
    uint64_t rate_ring[11];
    uint64_t rate_at_ns;
    unsigned rate_i;
    uint64_t status_at_ns;
    bool waiting;
    bool ready_sent;
};

static void say(struct shipper *s, enum ship_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(struct shipper *s, enum ship_log_level level, const char *fmt, ...)
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

static void notify(struct shipper *s, const char *state)
{
    if (s->hooks->notify)
        s->hooks->notify(s->hooks->arg, state);
}

/* ---- the transactional.id ---- */

int ship_transactional_id(const struct config *config, const char *spool, bool create,
                          char **ret)
{
    _cleanup_close_ int spool_fd = -1;
    _cleanup_close_ int dir_fd = -1;
    _cleanup_close_ int fd = -1;
    char buf[512], host[256] = "localhost", tmp[] = ".id.tmp";
    uint64_t nonce = 0;
    ssize_t got;
    int n, r;

    if (config->ship_transactional_id) {
        *ret = strdup(config->ship_transactional_id);
        return *ret ? 0 : -ENOMEM;
    }
    spool_fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (spool_fd < 0)
        return -errno;
    dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd >= 0 && open_regular_at(dir_fd, SHIP_ID_FILE, O_NOFOLLOW, &fd, NULL) == 0) {
        got = read_full(fd, buf, sizeof(buf) - 1);
        if (got < 0)
            return (int)got;
        while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == ' '))
            got--;
        buf[got] = '\0';
        if (got == 0 || strchr(buf, '\n'))
            return -EBADMSG;
        *ret = strdup(buf);
        return *ret ? 0 : -ENOMEM;
    }
    if (!create)
        return -ENOENT;
    if (dir_fd < 0) {
        if (mkdirat(spool_fd, SHIP_DIR, 0750) < 0 && errno != EEXIST)
            return -errno;
        if (fsync(spool_fd) < 0)
            return -errno;
        dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir_fd < 0)
            return -errno;
    }
    (void)gethostname(host, sizeof(host) - 1);
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce))
        return -EIO;
    n = snprintf(buf, sizeof(buf), "logshard-%s-%08x", host, (unsigned)(nonce & 0xffffffffu));
    if (n < 0 || (size_t)n >= sizeof(buf) - 1)
        return -ENAMETOOLONG;
    buf[n] = '\n';
    (void)unlinkat(dir_fd, tmp, 0);
    fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0)
        return -errno;
    r = write_all(fd, buf, (size_t)n + 1);
    if (r == 0 && fdatasync(fd) < 0)
        r = -errno;
    /* Never replaces an id another shipper made meanwhile: that one wins. */
    if (r == 0)
        r = spool_rename_noreplace(dir_fd, tmp, dir_fd, SHIP_ID_FILE, 0, NULL);
    (void)unlinkat(dir_fd, tmp, 0);
    if (r == -EEXIST)
        return ship_transactional_id(config, spool, false, ret);
    if (r < 0)
        return r;
    r = fsync_dir_fd(dir_fd);
    if (r < 0)
        return r;
    buf[n] = '\0';
    *ret = strdup(buf);
    return *ret ? 0 : -ENOMEM;
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
        notify(s, "WATCHDOG=1");
    }
}

static int next_backoff(int ms)
{
    ms *= 2;
    return ms > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : ms;
}

static void write_status(struct shipper *s, bool force);

static void set_waiting(struct shipper *s, bool waiting, const char *why)
{
    if (waiting && !s->waiting)
        say(s, SHIP_LOG_WARNING, "waiting for the brokers (%s): %s; trying again with backoff",
            s->c->ship_brokers, why);
    else if (!waiting && s->waiting)
        say(s, SHIP_LOG_NOTICE, "the brokers answer again; shipping goes on");
    s->waiting = waiting;
    if (waiting)
        write_status(s, false);
}

/* After a call that may be tried again failed with err: says that the
 * shipper waits for the brokers, sleeps the backoff and doubles it.
 * Returns 0 to try again, or -ECANCELED when the shipper is to stop; with
 * patient only once the backoff has reached its maximum, so that a commit
 * under way at SIGTERM gets a few more tries. */
static int wait_to_retry(struct shipper *s, int *backoff, const char *err, bool patient)
{
    set_waiting(s, true, err);
    if (stopping(s) && (!patient || *backoff >= BACKOFF_MAX_MS))
        return -ECANCELED;
    pause_ms(s, *backoff);
    *backoff = next_backoff(*backoff);
    return 0;
}

/* ---- figures ---- */

static void compute_lag(struct shipper *s)
{
    size_t n;
    struct ship_source **v = ship_sources_sorted(s->sources, &n);
    uint64_t lag = 0, newest = 0, oldest = UINT64_MAX;

    for (size_t i = 0; i < n; i++) {
        struct ship_source *src = v[i];
        uint64_t end = src->first + src->records;
        uint64_t from = src->st->committed > src->first ? src->st->committed : src->first;

        if (src->broken)
            continue;
        if (src->newest_ns > newest)
            newest = src->newest_ns;
        if (end > from) {
            uint64_t since = src->st->committed_ns ? src->st->committed_ns : src->h.created_ns;

            lag += end - from;
            if (since < oldest)
                oldest = since;
        }
    }
    s->fig.lag_records = lag;
    s->fig.lag_seconds = lag && newest > oldest ? (double)(newest - oldest) / 1e9 : 0.0;
    s->fig.streams = ship_streams_count(s->streams);
}

static void write_status(struct shipper *s, bool force)
{
    uint64_t now = now_monotonic_ns();
    char line[300];
    int r;

    if (!force && now - s->status_at_ns < 1000000000u)
        return;
    s->status_at_ns = now;
    /* records/s: one sample a second, over the last ten */
    while (now - s->rate_at_ns >= 1000000000u) {
        s->rate_i = (s->rate_i + 1) % 11;
        s->rate_ring[s->rate_i] = s->fig.records_shipped;
        s->rate_at_ns += 1000000000u;
        if (now - s->rate_at_ns > 20000000000u)
            s->rate_at_ns = now;
    }
    s->fig.records_per_s =
        (double)(s->rate_ring[s->rate_i] - s->rate_ring[(s->rate_i + 1) % 11]) / 10.0;
    s->fig.state = s->waiting ? "waiting for the brokers"
                   : s->in_txn ? "shipping"
                               : "idle";
    if (s->k)
        s->fig.broker_errors = ship_kafka_broker_errors(s->k);
    compute_lag(s);
    r = ship_status_write(s->spool_fd, &s->fig);
    if (r < 0 && r != -ENOENT)
        say(s, SHIP_LOG_WARNING, "%s/%s/%s: cannot write: %s", s->spool, SHIP_DIR,
            SHIP_STATUS_FILE, strerror(-r));
    if (s->c->ship_metrics_file) {
        r = ship_metrics_write(s->c->ship_metrics_file, &s->fig);
        if (r < 0)
            say(s, SHIP_LOG_WARNING, "%s: cannot write the metrics: %s", s->c->ship_metrics_file,
                strerror(-r));
    }
    snprintf(line, sizeof(line),
             "STATUS=%s: %" PRIu64 " records shipped, %.0f/s, lag %" PRIu64 " records (%.1f s), "
             "%" PRIu64 " transactions",
             s->fig.state, s->fig.records_shipped, s->fig.records_per_s, s->fig.lag_records,
             s->fig.lag_seconds, s->fig.transactions_committed);
    notify(s, line);
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
    int backoff = BACKOFF_MIN_MS, r;

    for (size_t i = 0; i < s->n_topics; i++)
        if (strcmp(s->topics[i].topic, topic) == 0) {
            *ret = s->topics[i].partitions;
            return 0;
        }
    for (;;) {
        r = ship_kafka_partitions(s->k, topic, KAFKA_CALL_MS, ret, err, sizeof(err));
        if (r == 0)
            break;
        if (r == -ENOENT)
            say(s, SHIP_LOG_ERROR,
                "%s; create it, or let the cluster create topics on use (see docs/SHIP.md)", err);
        if (wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    set_waiting(s, false, NULL);
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
static int place_stream(struct shipper *s, struct ship_stream *st);

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
        s->txn_started_ns = now_monotonic_ns();
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

static int place_stream(struct shipper *s, struct ship_stream *st)
{
    char topic[SHIP_TOPIC_MAX + 1], key[700], value[64], err[512];
    struct ship_partition *p;
    int count = 0, r, backoff = BACKOFF_MIN_MS;
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
            r = ship_kafka_high_watermark(s->k, topic, partition, KAFKA_CALL_MS, &high, err,
                                          sizeof(err));
            if (r == 0)
                break;
            if (wait_to_retry(s, &backoff, err, false) < 0)
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
        while (o == SHIP_OK || o == SHIP_RETRY) {
            o = ship_kafka_flush(s->k, KAFKA_CALL_MS, err, sizeof(err));
            if (o == SHIP_OK)
                break;
            set_waiting(s, true, err);
            if (stopping(s))
                return -ECANCELED;
        }
        if (o != SHIP_OK) {
            say(s, SHIP_LOG_WARNING, "%s", err);
            return -(int)o - 1000; /* an outcome, for ship_pass */
        }
        if (s->delivery_failed) {
            say(s, SHIP_LOG_WARNING, "the start marker of %s [%d] was not delivered: %s", topic,
                (int)partition, s->delivery_error);
            return -(int)SHIP_ABORT - 1000;
        }
        set_waiting(s, false, NULL);
        p->start = high;
        p->known = true;
        if (s->txn_records == 0)
            s->txn_started_ns = now_monotonic_ns(); /* the wait is not the batch's time */
    }
    st->part = p;
    return 0;
}

/* The decimal digits of v into out (at least 21 bytes); returns their count. */
static size_t format_u64(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

static rd_kafka_headers_t *record_headers(struct shipper *s, struct ship_source *src,
                                          uint64_t position)
{
    rd_kafka_headers_t *h = rd_kafka_headers_new(7);
    char pos[24];
    size_t pos_len = format_u64(pos, position);

    /* Formatted once a shard: at hundreds of thousands of records a
     * second, the snprintf()s of every record were a cost of their own. */
    if (!src->headers_ready) {
        ship_stream_id_format(src->hdr_stream, src->st->id);
        snprintf(src->hdr_uid, sizeof(src->hdr_uid), "%" PRIu32, src->h.uid);
        snprintf(src->hdr_pid, sizeof(src->hdr_pid), "%" PRIu32, src->h.pid);
        snprintf(src->hdr_shard, sizeof(src->hdr_shard), "%016" PRIx64, src->h.shard_id);
        src->headers_ready = true;
    }
    rd_kafka_header_add(h, SHIP_HEADER_STREAM, -1, src->hdr_stream, 32);
    rd_kafka_header_add(h, SHIP_HEADER_POSITION, -1, pos, (ssize_t)pos_len);
    rd_kafka_header_add(h, SHIP_HEADER_PRODUCER, -1, src->h.producer, -1);
    rd_kafka_header_add(h, SHIP_HEADER_UID, -1, src->hdr_uid, -1);
    rd_kafka_header_add(h, SHIP_HEADER_PID, -1, src->hdr_pid, -1);
    rd_kafka_header_add(h, SHIP_HEADER_SHARD, -1, src->hdr_shard, 16);
    rd_kafka_header_add(h, SHIP_HEADER_SHIPPER, -1, s->txid, -1);
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
            say(s, SHIP_LOG_ERROR,
                "%s/%s/%s: position %" PRIu64 " of stream %s cannot be read (offset %" PRIu64
                ": %s); the stream waits here: logctl verify and logctl merge tell more",
                s->spool, src->active ? SPOOL_ACTIVE_DIR : SPOOL_DONE_DIR, src->name, st->next,
                st->producer, at, why);
            src->broken = true;
            break;
        }
        r = place_stream(s, st);
        if (r < 0)
            return r;
        o = begin_if_needed(s, err, sizeof(err));
        if (o == SHIP_OK)
            o = ship_kafka_produce(s->k, st->part->topic, st->part->partition, st->producer,
                                   strlen(st->producer), it.payload, it.len,
                                   (int64_t)(it.timestamp_ns / 1000000u),
                                   record_headers(s, src, st->next), st, err, sizeof(err));
        if (o != SHIP_OK) {
            say(s, SHIP_LOG_WARNING, "%s", err);
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
                say(s, SHIP_LOG_WARNING,
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

/* Rewinds every stream to its committed position (after an abort). */
static void rewind_streams(struct shipper *s)
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

static int store_progress(struct shipper *s)
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
        say(s, SHIP_LOG_ERROR,
            "%s/%s/%s: cannot record what is shipped: %s; nothing is deleted until it can be",
            s->spool, SHIP_DIR, SHIP_PROGRESS_FILE, strerror(-r));
    return r;
}

static void delete_shipped(struct shipper *s);

/* Ends the open transaction: deliveries, progress, commit. Returns 0,
 * RESTART, or a negative errno (-EPERM: fenced; -ECANCELED: stopping with
 * the brokers away, the transaction left to the next shipper to abort). */
static int commit(struct shipper *s)
{
    char err[512], key[700], value[800];
    enum ship_outcome o = SHIP_OK;
    int backoff = BACKOFF_MIN_MS;
    uint64_t records = s->txn_records, bytes = s->txn_bytes;

    if (!s->in_txn)
        return 0;
    /* Every record in the cluster before the progress that claims it. */
    for (;;) {
        o = ship_kafka_flush(s->k, KAFKA_CALL_MS, err, sizeof(err));
        if (o != SHIP_RETRY)
            break;
        if (wait_to_retry(s, &backoff, err, true) < 0)
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
    backoff = BACKOFF_MIN_MS;
    while (o == SHIP_OK || o == SHIP_RETRY) {
        o = ship_kafka_commit(s->k, KAFKA_CALL_MS, err, sizeof(err));
        if (o != SHIP_RETRY)
            break;
        if (wait_to_retry(s, &backoff, err, true) < 0)
            return -ECANCELED;
    }
    if (o == SHIP_OK) {
        set_waiting(s, false, NULL);
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
        s->txn_records = s->txn_bytes = 0;
        s->fig.records_shipped += records;
        s->fig.bytes_shipped += bytes;
        s->fig.transactions_committed++;
        if (s->opts->at_step)
            s->opts->at_step(2, s->hooks->arg); /* committed, not yet stored */
        if (store_progress(s) == 0 && s->c->ship_on_shipped == SHIP_DELETE)
            delete_shipped(s);
        return 0;
    }
    if (o == SHIP_FENCED) {
        say(s, SHIP_LOG_ERROR,
            "%s; another shipper uses the transactional.id %s: this one stops, having "
            "committed nothing more",
            err, s->txid);
        return -EPERM;
    }
    if (o == SHIP_ABORT) {
        enum ship_outcome a;

        say(s, SHIP_LOG_WARNING,
            "%s; aborting the transaction of %" PRIu64
            " records, which are produced again after a read-back",
            err, records);
        backoff = BACKOFF_MIN_MS;
        while ((a = ship_kafka_abort(s->k, KAFKA_CALL_MS, err, sizeof(err))) == SHIP_RETRY) {
            if (wait_to_retry(s, &backoff, err, true) < 0)
                return -ECANCELED;
        }
        s->fig.transactions_aborted++;
        rewind_streams(s);
        /* Read back before producing again: a cluster that shows aborted
         * records to read_committed consumers (librdkafka's mock does)
         * already has some of them, and they must not appear twice. */
        if (a == SHIP_OK)
            return RESTART;
        o = a;
    }
    say(s, SHIP_LOG_WARNING, "%s; the producer is made anew and the progress read back", err);
    s->fig.transactions_aborted++;
    rewind_streams(s);
    return o == SHIP_FENCED ? -EPERM : RESTART;
}

/* ---- deleting what is shipped (on_shipped = delete) ---- */

static void delete_shipped(struct shipper *s)
{
    size_t n;
    struct ship_source **v = ship_sources_sorted(s->sources, &n);
    _cleanup_close_ int lock_fd = -1;
    _cleanup_close_ int done_fd = -1;
    _cleanup_free_ struct positions_entry *e = NULL;
    _cleanup_free_ struct ship_source **gone = NULL;
    size_t m = 0;
    int r;

    e = calloc(n ? n : 1, sizeof(*e));
    gone = calloc(n ? n : 1, sizeof(*gone));
    if (!e || !gone)
        return;
    for (size_t i = 0; i < n; i++) {
        struct ship_source *src = v[i];

        if (src->active || src->broken || src->st->committed < src->first + src->records)
            continue;
        gone[m] = src;
        if (shard_header_has_stream(&src->h)) {
            memcpy(e[m].stream_id, src->h.stream_id, SHARD_STREAM_ID_SIZE);
            e[m].next_position = src->first + src->records;
            e[m].newest_ns = src->newest_ns;
            e[m].uid = src->h.uid;
            snprintf(e[m].producer, sizeof(e[m].producer), "%s", src->h.producer);
        }
        m++;
    }
    if (m == 0)
        return;
    /* merge.lock: a merge reading these shards finishes first; the next
     * commit tries again. */
    lock_fd = openat(s->spool_fd, SPOOL_MERGE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                     0640);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0)
        return;
    /* The daemon learns where each stream continues from done/: before a
     * shard of a stream leaves, its position goes to streams/, as merge
     * --delete does. */
    {
        size_t k = 0;

        for (size_t i = 0; i < m; i++)
            if (e[i].producer[0])
                e[k++] = e[i];
        if (k > 0) {
            r = positions_write(s->spool_fd, "ship", e, k, NULL);
            if (r < 0) {
                say(s, SHIP_LOG_ERROR,
                    "%s/%s: cannot record the stream positions of shipped shards: %s; none is "
                    "deleted",
                    s->spool, SPOOL_STREAMS_DIR, strerror(-r));
                return;
            }
        }
    }
    done_fd = openat(s->spool_fd, SPOOL_DONE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0)
        return;
    for (size_t i = 0; i < m; i++) {
        if (unlinkat(done_fd, gone[i]->name, 0) < 0 && errno != ENOENT) {
            say(s, SHIP_LOG_WARNING, "%s/%s/%s: shipped, but cannot be deleted: %s", s->spool,
                SPOOL_DONE_DIR, gone[i]->name, strerror(errno));
            continue;
        }
        ship_sources_forget(s->sources, gone[i]);
    }
    r = fsync_dir_fd(done_fd);
    if (r < 0)
        say(s, SHIP_LOG_WARNING, "%s/%s: fsync: %s", s->spool, SPOOL_DONE_DIR, strerror(-r));
}

/* ---- reading back ---- */

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

static int read_back(struct shipper *s)
{
    struct ship_readback_sink sink = { rb_stream, rb_start, rb_record, s };
    struct ship_read_range *ranges = NULL;
    size_t n = 0, cap = 0;
    char err[512];
    int backoff = BACKOFF_MIN_MS, r;

    for (;;) {
        r = ship_readback_progress(s->c, s->txid, &sink, READBACK_MS, err, sizeof(err));
        if (r != -EAGAIN)
            break;
        if (wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    if (r < 0) {
        say(s, SHIP_LOG_ERROR, "%s", err);
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
    backoff = BACKOFF_MIN_MS;
    for (;;) {
        r = ship_readback_ranges(s->c, s->txid, ranges, n, &sink, READBACK_MS, err, sizeof(err));
        if (r != -EAGAIN)
            break;
        if (wait_to_retry(s, &backoff, err, false) < 0) {
            free(ranges);
            return -ECANCELED;
        }
    }
    free(ranges);
    if (r < 0) {
        say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
    set_waiting(s, false, NULL);
    return store_progress(s);
}

/* ---- one producer's life ---- */

static void on_kafka_log(int level, const char *facility, const char *message, void *arg)
{
    struct shipper *s = arg;
    enum ship_log_level l = level <= 3 ? SHIP_LOG_ERROR
                            : level == 4 ? SHIP_LOG_WARNING
                            : level == 5 ? SHIP_LOG_NOTICE
                                         : SHIP_LOG_INFO;

    /* Not through say(): librdkafka's lines are not the shipper's last
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
    int backoff = BACKOFF_MIN_MS, r;
    enum ship_outcome o;

    r = ship_kafka_new(&s->k, s->c, s->txid, on_delivered, on_kafka_log, s, err, sizeof(err));
    if (r < 0) {
        say(s, SHIP_LOG_ERROR, "%s", err);
        return r;
    }
    for (;;) {
        o = ship_kafka_init_transactions(s->k, KAFKA_CALL_MS, err, sizeof(err));
        if (o == SHIP_OK)
            break;
        if (o == SHIP_FENCED || o == SHIP_FATAL) {
            say(s, SHIP_LOG_ERROR, "%s", err);
            return o == SHIP_FENCED ? -EPERM : -EIO;
        }
        if (wait_to_retry(s, &backoff, err, false) < 0)
            return -ECANCELED;
    }
    set_waiting(s, false, NULL);
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
    if (r < 0)
        return r;
    r = read_back(s);
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
        notify(s, "READY=1");
        s->ready_sent = true;
        say(s, SHIP_LOG_INFO, "shipping %s%s to %s as %s (progress in %s, %zu streams known)",
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
            say(s, SHIP_LOG_ERROR, "%s/%s: cannot be read: %s", s->spool, SPOOL_DONE_DIR,
                strerror(-r));
            return r;
        }
        got = ship_pass(s);
        if (got <= -1000) {
            enum ship_outcome o = (enum ship_outcome)(-got - 1000);

            if (o == SHIP_FENCED) {
                say(s, SHIP_LOG_ERROR, "fenced: another shipper uses the transactional.id %s",
                    s->txid);
                return -EPERM;
            }
            if (o == SHIP_ABORT && s->in_txn) {
                char err[512];

                say(s, SHIP_LOG_WARNING,
                    "aborting the transaction of %" PRIu64 " records, which are produced again "
                    "after a read-back",
                    s->txn_records);

                /* As in commit(): aborted, then read back by a new
                 * generation before anything is produced again. */
                if (ship_kafka_abort(s->k, KAFKA_CALL_MS, err, sizeof(err)) == SHIP_OK)
                    s->fig.transactions_aborted++;
            }
            rewind_streams(s);
            return RESTART;
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
                        say(s, SHIP_LOG_WARNING, "%s", err);
                        return RESTART;
                    }
                    break;
                }
        }
        if (s->in_txn && (txn_full(s) || got == 0)) {
            r = commit(s);
            if (r != 0)
                return r;
            write_status(s, false);
            continue;
        }
        write_status(s, false);
        if (got == 0) {
            if (!s->opts->follow)
                break;
            pause_ms(s, (int)s->c->ship_poll_interval_ms);
        }
    }
    r = commit(s);
    if (r == 0 && !s->opts->follow)
        say(s, SHIP_LOG_INFO, "shipped %" PRIu64 " records; every sealed record is committed",
            s->fig.records_shipped - shipped_at_start);
    return r == RESTART ? RESTART : r;
}

/* ---- the lock and the generations ---- */

static int lock_spool(struct shipper *s, int *ret_fd)
{
    _cleanup_close_ int dir_fd = -1;
    char pid[32];
    int fd, n;

    if (mkdirat(s->spool_fd, SHIP_DIR, 0750) == 0)
        (void)fsync(s->spool_fd);
    dir_fd = openat(s->spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
        say(s, SHIP_LOG_ERROR, "%s/%s: %s", s->spool, SHIP_DIR, strerror(errno));
        return -errno;
    }
    fd = openat(dir_fd, SHIP_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0) {
        say(s, SHIP_LOG_ERROR, "%s/%s/%s: %s", s->spool, SHIP_DIR, SHIP_LOCK_FILE,
            strerror(errno));
        return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char other[32] = "";
        ssize_t got = pread(fd, other, sizeof(other) - 1, 0);

        if (got > 0)
            other[got] = '\0';
        other[strcspn(other, "\n")] = '\0';
        (void)close(fd);
        if (e == EWOULDBLOCK) {
            say(s, SHIP_LOG_ERROR,
                "%s: another logctl ship%s%s is shipping this spool (%s/%s/%s is locked); "
                "one shipper per spool",
                s->spool, other[0] ? " (pid " : "", other[0] ? other : "", s->spool, SHIP_DIR,
                SHIP_LOCK_FILE);
            return -EBUSY;
        }
        say(s, SHIP_LOG_ERROR, "%s/%s/%s: flock: %s", s->spool, SHIP_DIR, SHIP_LOCK_FILE,
            strerror(e));
        return -e;
    }
    n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0)
        (void)!pwrite(fd, pid, (size_t)n, 0); /* only a hint for the message above */
    *ret_fd = fd;
    return 0;
}

int ship_run(const struct ship_opts *opts, const struct ship_hooks *hooks)
{
    struct shipper s = { .opts = opts, .hooks = hooks, .c = opts->config, .spool = opts->spool };
    _cleanup_close_ int lock_fd = -1;
    int r, restarts = 0;

    s.spool_fd = open(opts->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.spool_fd < 0) {
        r = -errno;
        say(&s, SHIP_LOG_ERROR, "%s: %s", opts->spool, strerror(-r));
        return r;
    }
    if (faccessat(s.spool_fd, SPOOL_DONE_DIR, F_OK, 0) < 0) {
        r = -errno;
        say(&s, SHIP_LOG_ERROR, "%s/%s: %s (is %s a spool?)", opts->spool, SPOOL_DONE_DIR,
            strerror(-r), opts->spool);
        (void)close(s.spool_fd);
        return r;
    }
    r = lock_spool(&s, &lock_fd);
    if (r == 0) {
        r = ship_transactional_id(s.c, opts->spool, true, &s.txid);
        if (r < 0)
            say(&s, SHIP_LOG_ERROR, "%s/%s/%s: cannot read or make the transactional.id: %s",
                opts->spool, SHIP_DIR, SHIP_ID_FILE, strerror(-r));
    }
    if (r < 0) {
        (void)close(s.spool_fd);
        return r;
    }
    (void)gethostname(s.host, sizeof(s.host) - 1);
    s.fig.txid = s.txid;
    s.fig.started_ns = now_realtime_ns();
    s.fig.state = "starting";
    s.rate_at_ns = now_monotonic_ns();
    for (;;) {
        uint64_t committed = s.fig.transactions_committed;

        r = generation(&s);
        ship_kafka_free(s.k);
        s.k = NULL;
        if (r != RESTART)
            break;
        /* Again at once after a generation that got something done; with
         * backoff when they keep failing. */
        restarts = s.fig.transactions_committed != committed ? 1 : restarts + 1;
        pause_ms(&s, restarts > 1 ? BACKOFF_MAX_MS : BACKOFF_MIN_MS);
    }
    if (r == -ECANCELED)
        r = 0; /* stopped while waiting: nothing was lost, the next run goes on */
    notify(&s, "STOPPING=1");
    write_status(&s, true);
    reset_state(&s);
    free(s.txid);
    (void)close(s.spool_fd);
    return r;
}
