/* The shipper's figures as it runs: the records/s rate over the last ten
 * seconds, the lag, the state, and when they go out: at most once a second
 * (or at once when forced) to the files of ship-status.c and the sd_notify
 * STATUS= line. Kept apart from ship-status.c, which formats and writes the
 * files from struct ship_figures alone and never sees the shipper. */
#include "ship-run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "fileutil.h"
#include "ship_progress.h"

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

void ship_write_status(struct shipper *s, bool force)
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
        ship_say(s, SHIP_LOG_WARNING, "%s/%s/%s: cannot write: %s", s->spool, SHIP_DIR,
                 SHIP_STATUS_FILE, strerror(-r));
    if (s->c->ship_metrics_file) {
        r = ship_metrics_write(s->c->ship_metrics_file, &s->fig);
        if (r < 0)
            ship_say(s, SHIP_LOG_WARNING, "%s: cannot write the metrics: %s",
                     s->c->ship_metrics_file, strerror(-r));
    }
    snprintf(line, sizeof(line),
             "STATUS=%s: %" PRIu64 " records shipped, %.0f/s, lag %" PRIu64 " records (%.1f s), "
             "%" PRIu64 " transactions",
             s->fig.state, s->fig.records_shipped, s->fig.records_per_s, s->fig.lag_records,
             s->fig.lag_seconds, s->fig.transactions_committed);
    ship_notify(s, line);
}
