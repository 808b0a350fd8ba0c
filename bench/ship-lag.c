/* ship-lag: how far behind the daemon a read_committed consumer sees the
 * records `logctl ship --follow` produces (bench/ship-bench.sh --lag,
 * docs/BENCHMARKS.md "Ship mode").
 *
 *   ship-lag --brokers LIST --topic T [--topic T]... --count N
 *            [--progress-topic P] [--timeout SECONDS]
 *
 * It assigns itself every partition of the data topics and of the progress
 * topic at their current ends, prints "ready" on standard output, and then
 * reads with isolation.level=read_committed. logctl ship gives each message
 * the record's receive time at the daemon as its timestamp (CreateTime, ms;
 * docs/SHIP.md), so for every message "now" (CLOCK_REALTIME) minus that
 * timestamp is how long the record took from the daemon to the consumer.
 * Two figures are kept per message:
 *
 *   visible    when the message itself reached this consumer;
 *   committed  the later of that and the moment the progress message that
 *              covers its position (key "stream <id> <txid>", value
 *              "next=<position after it> ...", produced last in the same
 *              transaction, just before the commit) reached it.
 *
 * Against a real cluster the two are the same: read_committed hides the
 * message until its transaction commits. librdkafka's mock cluster (2.0.2)
 * answers Fetch with the log's end as the last stable offset, so it shows
 * messages as soon as they are appended, before their commit; there
 * "visible" is the time to produce and "committed" is the figure a
 * consumer of a real cluster would see.
 *
 * When it has seen N data messages and each is committed, or at the
 * timeout, it prints one line of key=value pairs (counts, p50/p99/max in
 * ms, nearest rank) and exits: 0 when all N were seen and committed, 1
 * otherwise, 2 for a usage error. Never installed, never run by meson
 * test. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#define MAX_TOPICS 256
#define STREAM_HEX 32
#define HEADER_STREAM "logshard.stream"
#define HEADER_POSITION "logshard.position"
#define DEFAULT_PROGRESS_TOPIC "logshard-ship-progress"
#define METADATA_MS 5000
#define POLL_MS 100

struct opts {
    const char *brokers;
    const char *topics[MAX_TOPICS];
    size_t n_topics;
    const char *progress_topic;
    uint64_t count;
    unsigned timeout_s;
};

/* A message seen whose transaction is not yet known to be committed. */
struct pending {
    uint64_t position;
    int64_t timestamp_ms;
};

struct stream {
    char id[STREAM_HEX + 1];
    bool have_next;
    uint64_t next; /* the committed next position, from the progress */
    struct pending *q;
    size_t head, len, cap; /* q[head .. len) are waiting */
};

struct samples {
    double *v;
    size_t n, cap;
};

struct lag {
    struct stream *streams;
    size_t n_streams, cap_streams;
    struct samples visible, committed;
    uint64_t bad_messages; /* without our headers or a CreateTime */
    uint64_t progress_seen;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: ship-lag --brokers LIST --topic T [--topic T]... --count N [OPTIONS]\n"
            "\n"
            "Consumes the topics logctl ship --follow writes, with isolation.level=\n"
            "read_committed, from their ends, and reports how long records took from\n"
            "their receive time at the daemon (the message timestamp) to this consumer.\n"
            "\n"
            "  --brokers LIST        bootstrap servers\n"
            "  --topic T             a data topic (repeat for more, at most %d)\n"
            "  --progress-topic P    the shipper's progress topic (default %s)\n"
            "  --count N             stop after N data messages, each committed\n"
            "  --timeout SECONDS     stop then at the latest (default 120)\n"
            "  -h, --help            show this help\n"
            "\n"
            "Prints \"ready\" once it reads from the ends, then one line of key=value\n"
            "pairs. Exit status: 0 N messages seen and committed, 1 not (timeout or\n"
            "error), 2 usage error.\n",
            MAX_TOPICS, DEFAULT_PROGRESS_TOPIC);
}

static int parse_u64(const char *s, uint64_t *ret)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .progress_topic = DEFAULT_PROGRESS_TOPIC, .timeout_s = 120 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        uint64_t v;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "ship-lag: %s: missing value or unknown option\n", a);
            return -EINVAL;
        }
        val = argv[++i];
        if (!strcmp(a, "--brokers")) {
            o->brokers = val;
        } else if (!strcmp(a, "--topic")) {
            if (o->n_topics == MAX_TOPICS) {
                fprintf(stderr, "ship-lag: --topic %s: at most %d topics\n", val, MAX_TOPICS);
                return -EINVAL;
            }
            o->topics[o->n_topics++] = val;
        } else if (!strcmp(a, "--progress-topic")) {
            o->progress_topic = val;
        } else if (!strcmp(a, "--count") && parse_u64(val, &v) == 0 && v >= 1) {
            o->count = v;
        } else if (!strcmp(a, "--timeout") && parse_u64(val, &v) == 0 && v >= 1 && v <= 86400) {
            o->timeout_s = (unsigned)v;
        } else {
            fprintf(stderr, "ship-lag: %s %s: unknown option or value out of range\n", a, val);
            return -EINVAL;
        }
    }
    if (!o->brokers || o->n_topics == 0 || o->count == 0) {
        fprintf(stderr, "ship-lag: --brokers, --topic and --count are required\n");
        usage(stderr);
        return -EINVAL;
    }
    return 0;
}

/* Milliseconds since the epoch, with the microseconds as the fraction: the
 * clock the daemon stamps records with, on the same machine. */
static double now_realtime_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static uint64_t now_monotonic_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add_sample(struct samples *s, double v)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 65536;
        double *nv = realloc(s->v, cap * sizeof(*nv));

        if (!nv) {
            fprintf(stderr, "ship-lag: no memory for %zu lag samples\n", cap);
            exit(1);
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = v;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* Nearest rank, as logshard-bench reports its latencies. */
static double percentile(const struct samples *s, double p)
{
    size_t rank;

    if (s->n == 0)
        return 0.0;
    rank = (size_t)(p / 100.0 * (double)s->n + 0.999999);
    if (rank < 1)
        rank = 1;
    if (rank > s->n)
        rank = s->n;
    return s->v[rank - 1];
}

static struct stream *stream_get(struct lag *l, const char *id)
{
    struct stream *v;

    /* A handful of streams (one per producer connection): a list will do. */
    for (size_t i = 0; i < l->n_streams; i++)
        if (memcmp(l->streams[i].id, id, STREAM_HEX) == 0)
            return &l->streams[i];
    if (l->n_streams == l->cap_streams) {
        size_t cap = l->cap_streams ? l->cap_streams * 2 : 16;

        v = realloc(l->streams, cap * sizeof(*v));
        if (!v) {
            fprintf(stderr, "ship-lag: no memory for %zu streams\n", cap);
            exit(1);
        }
        l->streams = v;
        l->cap_streams = cap;
    }
    v = &l->streams[l->n_streams++];
    memset(v, 0, sizeof(*v));
    memcpy(v->id, id, STREAM_HEX);
    return v;
}

static void push_pending(struct stream *st, uint64_t position, int64_t ts_ms)
{
    if (st->len == st->cap) {
        struct pending *q;

        /* Reuse the room of what was resolved before growing. */
        if (st->head > 0) {
            memmove(st->q, st->q + st->head, (st->len - st->head) * sizeof(*st->q));
            st->len -= st->head;
            st->head = 0;
        }
        if (st->len == st->cap) {
            size_t cap = st->cap ? st->cap * 2 : 4096;

            q = realloc(st->q, cap * sizeof(*q));
            if (!q) {
                fprintf(stderr, "ship-lag: no memory for %zu messages of stream %s\n", cap,
                        st->id);
                exit(1);
            }
            st->q = q;
            st->cap = cap;
        }
    }
    st->q[st->len++] = (struct pending){ position, ts_ms };
}

/* Every waiting message of the stream below its committed next position
 * becomes committed at now_ms. Messages of one stream come from one
 * partition, in position order, so the waiting ones are sorted. */
static void resolve(struct lag *l, struct stream *st, double now_ms)
{
    while (st->head < st->len && st->q[st->head].position < st->next) {
        add_sample(&l->committed, now_ms - (double)st->q[st->head].timestamp_ms);
        st->head++;
    }
    if (st->head == st->len)
        st->head = st->len = 0;
}

static bool is_hex_id(const char *s, size_t len)
{
    if (len < STREAM_HEX)
        return false;
    for (size_t i = 0; i < STREAM_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* A progress message: key "stream <32 hex> <txid>", value "next=<n> ...".
 * Start markers ("start ...") say nothing about commits. */
static void on_progress(struct lag *l, const rd_kafka_message_t *m, double now_ms)
{
    const char *key = m->key, *val = m->payload;
    char num[24];
    size_t n = 0;
    uint64_t next;
    struct stream *st;

    if (!key || m->key_len < 7 + STREAM_HEX || memcmp(key, "stream ", 7) != 0 ||
        !is_hex_id(key + 7, m->key_len - 7))
        return;
    if (!val || m->len < 6 || memcmp(val, "next=", 5) != 0)
        return;
    while (5 + n < m->len && n + 1 < sizeof(num) && val[5 + n] >= '0' && val[5 + n] <= '9') {
        num[n] = val[5 + n];
        n++;
    }
    num[n] = '\0';
    if (n == 0 || parse_u64(num, &next) < 0)
        return;
    l->progress_seen++;
    st = stream_get(l, key + 7);
    if (!st->have_next || next > st->next) {
        st->have_next = true;
        st->next = next;
    }
    resolve(l, st, now_ms);
}

static void on_data(struct lag *l, const rd_kafka_message_t *m, double now_ms)
{
    rd_kafka_timestamp_type_t tstype;
    int64_t ts = rd_kafka_message_timestamp(m, &tstype);
    rd_kafka_headers_t *h = NULL;
    const void *sid = NULL, *spos = NULL;
    size_t sid_len = 0, spos_len = 0;
    char pos[24];
    uint64_t position;
    struct stream *st;

    if (tstype != RD_KAFKA_TIMESTAMP_CREATE_TIME || ts <= 0 ||
        rd_kafka_message_headers(m, &h) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, HEADER_STREAM, &sid, &sid_len) != RD_KAFKA_RESP_ERR_NO_ERROR ||
        rd_kafka_header_get_last(h, HEADER_POSITION, &spos, &spos_len) !=
            RD_KAFKA_RESP_ERR_NO_ERROR ||
        !sid || !is_hex_id(sid, sid_len) || !spos || spos_len == 0 || spos_len >= sizeof(pos)) {
        l->bad_messages++;
        return;
    }
    memcpy(pos, spos, spos_len);
    pos[spos_len] = '\0';
    if (parse_u64(pos, &position) < 0) {
        l->bad_messages++;
        return;
    }
    add_sample(&l->visible, now_ms - (double)ts);
    st = stream_get(l, sid);
    if (st->have_next && position < st->next)
        add_sample(&l->committed, now_ms - (double)ts); /* its commit was seen first */
    else
        push_pending(st, position, ts);
}

static int set(rd_kafka_conf_t *conf, const char *key, const char *value)
{
    char why[512];

    if (rd_kafka_conf_set(conf, key, value, why, sizeof(why)) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "ship-lag: librdkafka refuses %s = %s: %s\n", key, value, why);
        return -EINVAL;
    }
    return 0;
}

static rd_kafka_t *make_consumer(const char *brokers)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char why[512];
    rd_kafka_t *rk;

    /* group.id only because librdkafka's consumer wants one: partitions
     * are assigned by hand and no offset is ever committed. The short
     * fetch wait keeps the consumer's own share of the lag to a few ms. */
    if (set(conf, "bootstrap.servers", brokers) < 0 ||
        set(conf, "group.id", "logshard-ship-lag") < 0 ||
        set(conf, "enable.auto.commit", "false") < 0 ||
        set(conf, "enable.auto.offset.store", "false") < 0 ||
        set(conf, "isolation.level", "read_committed") < 0 ||
        set(conf, "fetch.wait.max.ms", "10") < 0 ||
        set(conf, "fetch.error.backoff.ms", "10") < 0) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, why, sizeof(why));
    if (!rk) {
        fprintf(stderr, "ship-lag: cannot make the Kafka consumer: %s\n", why);
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    rd_kafka_poll_set_consumer(rk);
    return rk;
}

/* The partition count of topic, waiting until the topic exists (the
 * shipper creates it on first use) or the deadline passes. */
static int partitions_of(rd_kafka_t *rk, const char *topic, uint64_t deadline_ns, int *ret)
{
    rd_kafka_resp_err_t last = RD_KAFKA_RESP_ERR_NO_ERROR;

    for (;;) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_resp_err_t e;
        int count = 0;

        if (!rkt) {
            fprintf(stderr, "ship-lag: topic %s: %s\n", topic,
                    rd_kafka_err2str(rd_kafka_last_error()));
            return -EINVAL;
        }
        e = rd_kafka_metadata(rk, 0, rkt, &md, METADATA_MS);
        if (!e) {
            if (md->topic_cnt == 1 && !md->topics[0].err)
                count = md->topics[0].partition_cnt;
            else if (md->topic_cnt == 1)
                e = md->topics[0].err;
            rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(rkt);
        if (count > 0) {
            *ret = count;
            return 0;
        }
        if (e)
            last = e;
        if (now_monotonic_ns() >= deadline_ns) {
            fprintf(stderr, "ship-lag: topic %s has no partitions after the timeout: %s\n", topic,
                    last ? rd_kafka_err2str(last) : "no partitions yet");
            return -ETIMEDOUT;
        }
        rd_kafka_poll(rk, POLL_MS);
    }
}

/* Adds every partition of topic at its current end (the high watermark,
 * which is also the last stable offset while no transaction is open). */
static int add_at_end(rd_kafka_t *rk, rd_kafka_topic_partition_list_t *list, const char *topic,
                      uint64_t deadline_ns)
{
    int count = 0, r = partitions_of(rk, topic, deadline_ns, &count);

    if (r < 0)
        return r;
    for (int p = 0; p < count; p++) {
        int64_t low = 0, high = 0;
        rd_kafka_resp_err_t e =
            rd_kafka_query_watermark_offsets(rk, topic, p, &low, &high, METADATA_MS);

        if (e) {
            fprintf(stderr, "ship-lag: %s [%d]: watermarks: %s\n", topic, p, rd_kafka_err2str(e));
            return -EIO;
        }
        rd_kafka_topic_partition_list_add(list, topic, p)->offset = high;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    struct lag l = { 0 };
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *list;
    rd_kafka_resp_err_t e;
    uint64_t start_ns, deadline_ns;
    double elapsed_s;
    uint64_t errors = 0;
    bool done = false;
    size_t waiting = 0;
    int r = 0;

    if (parse_args(argc, argv, &o) < 0)
        return 2;
    start_ns = now_monotonic_ns();
    deadline_ns = start_ns + (uint64_t)o.timeout_s * 1000000000u;
    rk = make_consumer(o.brokers);
    if (!rk)
        return 1;

    /* The progress topic's end first: then every data message read below
     * was produced after it, and so was the progress message that covers
     * it, which is therefore read too. */
    list = rd_kafka_topic_partition_list_new((int)o.n_topics * 4 + 4);
    r = add_at_end(rk, list, o.progress_topic, deadline_ns);
    for (size_t i = 0; r == 0 && i < o.n_topics; i++)
        r = add_at_end(rk, list, o.topics[i], deadline_ns);
    if (r == 0 && (e = rd_kafka_assign(rk, list)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
        fprintf(stderr, "ship-lag: assigning the partitions: %s\n", rd_kafka_err2str(e));
        r = -EIO;
    }
    rd_kafka_topic_partition_list_destroy(list);
    if (r < 0) {
        rd_kafka_destroy(rk);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);

    start_ns = now_monotonic_ns();
    while (!done && now_monotonic_ns() < deadline_ns) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, POLL_MS);
        double now_ms;

        if (!m)
            continue;
        now_ms = now_realtime_ms();
        if (m->err) {
            /* Reported, not fatal: the consumer retries by itself. */
            if (errors++ < 10)
                fprintf(stderr, "ship-lag: %s: %s\n",
                        m->rkt ? rd_kafka_topic_name(m->rkt) : "consumer",
                        rd_kafka_message_errstr(m));
        } else if (strcmp(rd_kafka_topic_name(m->rkt), o.progress_topic) == 0) {
            on_progress(&l, m, now_ms);
        } else {
            on_data(&l, m, now_ms);
        }
        rd_kafka_message_destroy(m);
        done = l.visible.n >= o.count && l.committed.n >= o.count;
    }
    elapsed_s = (double)(now_monotonic_ns() - start_ns) / 1e9;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);

    for (size_t i = 0; i < l.n_streams; i++)
        waiting += l.streams[i].len - l.streams[i].head;
    qsort(l.visible.v, l.visible.n, sizeof(double), cmp_double);
    qsort(l.committed.v, l.committed.n, sizeof(double), cmp_double);
    printf("messages=%zu visible_p50_ms=%.1f visible_p99_ms=%.1f visible_max_ms=%.1f "
           "committed=%zu committed_p50_ms=%.1f committed_p99_ms=%.1f committed_max_ms=%.1f "
           "not_committed=%zu progress_messages=%" PRIu64 " streams=%zu bad_messages=%" PRIu64
           " elapsed_s=%.3f\n",
           l.visible.n, percentile(&l.visible, 50), percentile(&l.visible, 99),
           l.visible.n ? l.visible.v[l.visible.n - 1] : 0.0, l.committed.n,
           percentile(&l.committed, 50), percentile(&l.committed, 99),
           l.committed.n ? l.committed.v[l.committed.n - 1] : 0.0, waiting, l.progress_seen,
           l.n_streams, l.bad_messages, elapsed_s);
    if (!done)
        fprintf(stderr,
                "ship-lag: timeout after %u s: %zu of %" PRIu64 " messages seen, %zu of them "
                "not yet committed\n",
                o.timeout_s, l.visible.n, o.count, waiting);
    for (size_t i = 0; i < l.n_streams; i++)
        free(l.streams[i].q);
    free(l.streams);
    free(l.visible.v);
    free(l.committed.v);
    return done ? 0 : 1;
}
