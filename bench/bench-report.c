/* logshard-bench: the figures, their medians, and how they are printed.
 *
 * Every figure of a run is a double in one array, NAN when it is unknown
 * (an external daemon's CPU, a figure of a failed step); one table below
 * gives each its JSON key, its label and its precision, so the human table,
 * the JSON object and the medians cannot disagree about what exists. The
 * keys are documented in docs/BENCHMARKS.md; renaming one breaks scripts. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <logshard.h>

#include "bench.h"
#include "logshard-build.h"

struct fig_info {
    const char *key;
    const char *label;
    int decimals;
};

static const struct fig_info figs[FIG__MAX] = {
    [FIG_ELAPSED_S] = { "elapsed_s", "elapsed s", 3 },
    [FIG_TEARDOWN_S] = { "teardown_s", "producers' close+exit s", 3 },
    [FIG_RECORDS] = { "records", "records acknowledged", 0 },
    [FIG_RECORDS_PER_S] = { "records_per_s", "records/s", 0 },
    [FIG_MIB_PER_S] = { "payload_mib_per_s", "payload MiB/s", 2 },
    [FIG_FLUSHES] = { "flushes", "flushes timed", 0 },
    [FIG_ACK_P50_US] = { "ack_p50_us", "ack p50 us", 1 },
    [FIG_ACK_P99_US] = { "ack_p99_us", "ack p99 us", 1 },
    [FIG_ACK_P999_US] = { "ack_p999_us", "ack p99.9 us", 1 },
    [FIG_ACK_MAX_US] = { "ack_max_us", "ack max us", 1 },
    [FIG_CPU_TERM_S] = { "daemon_cpu_s", "daemon CPU s", 3 },
    [FIG_CPU_TOTAL_S] = { "daemon_cpu_total_s", "daemon CPU s incl. drain", 3 },
    [FIG_CPU_US_PER_RECORD] = { "daemon_cpu_us_per_record", "daemon CPU us/record", 2 },
    [FIG_PEAK_RSS_MIB] = { "daemon_peak_rss_mib", "daemon peak RSS MiB", 1 },
    [FIG_SYNCS] = { "syncs", "syncs", 0 },
    [FIG_SYNCS_PER_S] = { "syncs_per_s", "syncs/s", 0 },
    [FIG_RECORDS_PER_SYNC] = { "records_per_sync", "records/sync", 1 },
    [FIG_DAEMON_RECORDS] = { "daemon_records", "records (daemon count)", 0 },
    [FIG_DAEMON_SHARDS] = { "daemon_shards", "shards sealed", 0 },
    [FIG_FDS_P50_US] = { "fdatasync_p50_us", "fdatasync 4K p50 us", 1 },
    [FIG_FDS_P99_US] = { "fdatasync_p99_us", "fdatasync 4K p99 us", 1 },
    [FIG_ACK_OVER_FDS] = { "ack_p99_over_fdatasync_p99", "ack p99 / fdatasync p99", 2 },
    [FIG_FDS_CONC_P99_US] = { "fdatasync_concurrent_p99_us", "fdatasync xP p99 us", 1 },
    [FIG_ACK_OVER_FDS_CONC] = { "ack_p99_over_fdatasync_concurrent_p99",
                                "ack p99 / fdatasync xP p99", 2 },
    [FIG_MERGE_SHARDS] = { "shards", "shards merged", 0 },
    [FIG_MERGE_MIB] = { "shard_mib", "shard MiB", 2 },
    [FIG_LOGCTL_S] = { "logctl_s", "logctl merge s", 4 },
    [FIG_LOGCTL_MIB_PER_S] = { "logctl_mib_per_s", "logctl merge MiB/s", 1 },
    [FIG_LOGCTL_SHARDS_PER_S] = { "logctl_shards_per_s", "logctl merge shards/s", 0 },
    [FIG_CAT_S] = { "cat_s", "cat s", 4 },
    [FIG_CAT_MIB_PER_S] = { "cat_mib_per_s", "cat MiB/s", 1 },
    [FIG_COPY_S] = { "copy_s", "copy loop s", 4 },
    [FIG_COPY_MIB_PER_S] = { "copy_mib_per_s", "copy loop MiB/s", 1 },
    [FIG_CAT_SYNC_S] = { "cat_sync_s", "cat + fsync s", 4 },
    [FIG_LOGCTL_OVER_CAT] = { "logctl_over_cat", "logctl / cat speed", 2 },
    [FIG_LOGCTL_OVER_CAT_SYNC] = { "logctl_over_cat_sync", "logctl / cat+fsync speed", 2 },
    [FIG_LOGCTL_OVER_COPY] = { "logctl_over_copy", "logctl / copy speed", 2 },
};

#define LABEL_WIDTH 26
#define VALUE_WIDTH 12

void bench_run_init(struct bench_run *run)
{
    memset(run, 0, sizeof(*run));
    for (size_t i = 0; i < FIG__MAX; i++)
        run->fig[i] = NAN;
    run->policy = -1;
}

uint64_t bench_percentile(const uint64_t *sorted, size_t n, unsigned per_mille)
{
    size_t rank;

    if (n == 0)
        return 0;
    /* Nearest rank: the smallest value with at least per_mille/1000 of all
     * at or below it; in integers, since 0.99 * 200 is not 198 in doubles.
     * With fewer than 1000 samples, p99.9 is the maximum. */
    rank = (per_mille * n + 999) / 1000;
    if (rank < 1)
        rank = 1;
    if (rank > n)
        rank = n;
    return sorted[rank - 1];
}

const char *bench_policy_name(int policy)
{
    switch (policy) {
    case LOGSHARD_FSYNC_NONE: return "none";
    case LOGSHARD_FSYNC_INTERVAL: return "interval";
    case LOGSHARD_FSYNC_BATCH: return "batch";
    case LOGSHARD_FSYNC_ALWAYS: return "always";
    default: return NULL;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of the known values of one figure; NAN when none is known. */
static double median_of(const struct bench_series *s, enum bench_fig f)
{
    double *v = malloc((s->n_runs ? s->n_runs : 1) * sizeof(*v));
    double m = NAN;
    size_t n = 0;

    if (!v)
        return NAN; /* printed as unknown, which it then is */
    for (size_t i = 0; i < s->n_runs; i++)
        if (!isnan(s->runs[i].fig[f]))
            v[n++] = s->runs[i].fig[f];
    if (n) {
        qsort(v, n, sizeof(v[0]), cmp_double);
        m = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    }
    free(v);
    return m;
}

static void figure_range(const struct bench_report *r, enum bench_fig *ret_first,
                         enum bench_fig *ret_last)
{
    *ret_first = r->merge_mode ? FIG_MERGE_SHARDS : FIG_ELAPSED_S;
    *ret_last = r->merge_mode ? FIG_LOGCTL_OVER_COPY : FIG_ACK_OVER_FDS_CONC;
}

static void print_value(FILE *out, double v, int decimals)
{
    if (isnan(v))
        fprintf(out, " %*s", VALUE_WIDTH, "unknown");
    else
        fprintf(out, " %*.*f", VALUE_WIDTH, decimals, v);
}

static const char *series_in_force(const struct bench_series *s)
{
    const char *name = s->n_runs ? bench_policy_name(s->runs[0].policy) : NULL;
    return name ? name : "unknown";
}

static void print_series(FILE *out, const struct bench_report *r, const struct bench_series *s)
{
    const struct bench_run *first = s->n_runs ? &s->runs[0] : NULL;
    enum bench_fig lo, hi;

    figure_range(r, &lo, &hi);
    if (r->layout_shards)
        fprintf(out, "\nshards laid out");
    else
        fprintf(out, "\nfsync %s", s->policy ? s->policy : "as the daemon runs it");
    if (!r->merge_mode)
        fprintf(out, " (in force: %s)", series_in_force(s));
    if (first && first->io[0])
        fprintf(out, ", daemon I/O %s", first->io);
    if (first && first->fs_type[0])
        fprintf(out, ", %s on %s", r->external ? "probe dir" : "spool", first->fs_type);
    fprintf(out, "\n%-*s", LABEL_WIDTH, "figure");
    for (size_t i = 0; i < s->n_runs; i++) {
        char h[32];
        snprintf(h, sizeof(h), "run %zu", i + 1);
        fprintf(out, " %*s", VALUE_WIDTH, h);
    }
    if (s->n_runs > 1)
        fprintf(out, " %*s", VALUE_WIDTH, "median");
    fputc('\n', out);
    for (int f = (int)lo; f <= (int)hi; f++) {
        fprintf(out, "%-*s", LABEL_WIDTH, figs[f].label);
        for (size_t i = 0; i < s->n_runs; i++)
            print_value(out, s->runs[i].fig[f], figs[f].decimals);
        if (s->n_runs > 1)
            print_value(out, median_of(s, (enum bench_fig)f), figs[f].decimals);
        fputc('\n', out);
    }
    if (first && first->fs_volatile)
        fprintf(out, "warning: %s is on %s: fdatasync costs nothing there; the sync and ack "
                     "figures say nothing about a disk\n",
                r->external ? "the probe directory" : "the spool", first->fs_type);
}

/* Policies side by side: each one's median (or its only run). */
static void print_summary(FILE *out, const struct bench_report *r)
{
    enum bench_fig lo, hi;

    figure_range(r, &lo, &hi);
    fprintf(out, "\nsummary (%s)\n%-*s", r->repeat > 1 ? "medians" : "one run each", LABEL_WIDTH,
            "figure");
    for (size_t k = 0; k < r->n_series; k++)
        fprintf(out, " %*s", VALUE_WIDTH, r->series[k].policy ? r->series[k].policy : "?");
    fputc('\n', out);
    for (int f = (int)lo; f <= (int)hi; f++) {
        fprintf(out, "%-*s", LABEL_WIDTH, figs[f].label);
        for (size_t k = 0; k < r->n_series; k++)
            print_value(out, median_of(&r->series[k], (enum bench_fig)f), figs[f].decimals);
        fputc('\n', out);
    }
}

void bench_print_table(FILE *out, const struct bench_report *r)
{
    if (r->layout_shards) {
        fprintf(out,
                "logshard-bench %s: merge of %" PRIu64 " sealed shards of %" PRIu64
                " B (records of %zu B) laid out directly, %u run%s\n",
                LOGSHARD_VERSION, r->layout_shards, r->layout_shard_bytes, r->size, r->repeat,
                r->repeat == 1 ? "" : "s");
        fprintf(out, "logctl: %s\n", r->logctl_path);
        for (size_t k = 0; k < r->n_series; k++)
            print_series(out, r, &r->series[k]);
        goto kept;
    }
    fprintf(out, "logshard-bench %s: %u producer%s x %" PRIu64 " records x %zu B, flush every ",
            LOGSHARD_VERSION, r->producers, r->producers == 1 ? "" : "s", r->records, r->size);
    if (r->flush_every)
        fprintf(out, "%" PRIu64 " records", r->flush_every);
    else
        fprintf(out, "run (once, at the end)");
    fprintf(out, ", %u run%s per policy%s\n", r->repeat, r->repeat == 1 ? "" : "s",
            r->merge_mode ? ", merge mode" : "");
    if (r->external)
        fprintf(out, "daemon: already running at %s (its CPU, memory and syncs are unknown)\n",
                r->socket);
    else
        fprintf(out, "daemon: %s, started for each run with --config %s, in %s\n",
                r->daemon_path, r->daemon_config ? r->daemon_config : "/dev/null",
                r->shared_session ? "the bench's session (--shared-session)"
                                  : "a session of its own");
    if (r->merge_mode)
        fprintf(out, "logctl: %s\n", r->logctl_path);
    for (size_t k = 0; k < r->n_series; k++)
        print_series(out, r, &r->series[k]);
    if (r->n_series > 1)
        print_summary(out, r);
kept:
    if (r->keep) {
        fprintf(out, "\nkept:");
        for (size_t k = 0; k < r->n_series; k++)
            for (size_t i = 0; i < r->series[k].n_runs; i++)
                if (r->series[k].runs[i].dir)
                    fprintf(out, " %s", r->series[k].runs[i].dir);
        fputc('\n', out);
    }
}

static void json_string(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(out, "\\u%04x", *p);
        else
            fputc(*p, out);
    }
    fputc('"', out);
}

static void json_figures(FILE *out, const struct bench_report *r, const double *v)
{
    enum bench_fig lo, hi;
    bool first = true;

    figure_range(r, &lo, &hi);
    fputc('{', out);
    for (int f = (int)lo; f <= (int)hi; f++) {
        fprintf(out, "%s\"%s\":", first ? "" : ",", figs[f].key);
        first = false;
        if (isnan(v[f]))
            fputs("null", out);
        else
            /* Counts as integers; the rest with more digits than the table. */
            fprintf(out, "%.*f", figs[f].decimals ? 6 : 0, v[f]);
    }
    fputc('}', out);
}

void bench_print_json(FILE *out, const struct bench_report *r)
{
    fprintf(out, "{\"tool\":\"logshard-bench\",\"version\":");
    json_string(out, LOGSHARD_VERSION);
    fprintf(out, ",\"mode\":\"%s\",\"producers\":%u,\"records_per_producer\":%" PRIu64
                 ",\"record_bytes\":%zu,\"flush_every\":%" PRIu64 ",\"repeat\":%u,",
            r->merge_mode ? "merge" : "produce", r->producers, r->records, r->size,
            r->flush_every, r->repeat);
    if (r->layout_shards)
        fprintf(out, "\"layout_shards\":%" PRIu64 ",\"layout_shard_bytes\":%" PRIu64 ",",
                r->layout_shards, r->layout_shard_bytes);
    fprintf(out, "\"daemon\":");
    json_string(out, r->external ? "external" : "started");
    fprintf(out, ",\"daemon_path\":");
    if (r->external)
        fputs("null", out);
    else
        json_string(out, r->daemon_path);
    fprintf(out, ",\"daemon_session\":");
    if (r->external)
        fputs("null", out);
    else
        json_string(out, r->shared_session ? "shared" : "own");
    fprintf(out, ",\"socket\":");
    if (r->external)
        json_string(out, r->socket);
    else
        fputs("null", out);
    fprintf(out, ",\"results\":[");
    for (size_t k = 0; k < r->n_series; k++) {
        const struct bench_series *s = &r->series[k];
        const struct bench_run *first = s->n_runs ? &s->runs[0] : NULL;
        const char *in_force = first ? bench_policy_name(first->policy) : NULL;
        double med[FIG__MAX];

        fprintf(out, "%s{\"fsync\":", k ? "," : "");
        if (s->policy)
            json_string(out, s->policy);
        else
            fputs("null", out);
        fprintf(out, ",\"policy_in_force\":");
        if (in_force)
            json_string(out, in_force);
        else
            fputs("null", out);
        fprintf(out, ",\"io\":");
        if (first && first->io[0])
            json_string(out, first->io);
        else
            fputs("null", out);
        fprintf(out, ",\"fs_type\":");
        json_string(out, first ? first->fs_type : "");
        fprintf(out, ",\"fs_volatile\":%s,\"runs\":[", first && first->fs_volatile ? "true" : "false");
        for (size_t i = 0; i < s->n_runs; i++) {
            if (i)
                fputc(',', out);
            json_figures(out, r, s->runs[i].fig);
        }
        for (size_t f = 0; f < FIG__MAX; f++)
            med[f] = median_of(s, (enum bench_fig)f);
        fprintf(out, "],\"median\":");
        json_figures(out, r, med);
        fprintf(out, ",\"kept\":[");
        for (size_t i = 0, n = 0; r->keep && i < s->n_runs; i++) {
            if (!s->runs[i].dir)
                continue;
            if (n++)
                fputc(',', out);
            json_string(out, s->runs[i].dir);
        }
        fprintf(out, "]}");
    }
    fprintf(out, "]}\n");
}
