/* The status figures in the Prometheus text exposition format (stats.h):
 * what the metrics file (metrics.c) holds. stats.c gathers the figures and
 * writes them as JSON; this file only formats them for Prometheus. */
#include "stats.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A label value: backslash, double quote and newline escaped. */
static void put_label_value(FILE *out, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\')
            fputs("\\\\", out);
        else if (*v == '"')
            fputs("\\\"", out);
        else if (*v == '\n')
            fputs("\\n", out);
        else
            fputc(*v, out);
    }
}

static void family(FILE *out, const char *name, const char *type, const char *help)
{
    fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void metric_u64(FILE *out, const char *name, const char *type, const char *help,
                       uint64_t v)
{
    family(out, name, type, help);
    fprintf(out, "%s %" PRIu64 "\n", name, v);
}

/* Seconds with up to 9 decimals and no trailing zeros: "0.00005", "10". */
static void put_seconds(FILE *out, uint64_t ns)
{
    char buf[48];
    size_t n = (size_t)snprintf(buf, sizeof(buf), "%" PRIu64 ".%09" PRIu64, ns / 1000000000u,
                                ns % 1000000000u);

    while (n > 0 && buf[n - 1] == '0')
        buf[--n] = '\0';
    if (n > 0 && buf[n - 1] == '.')
        buf[--n] = '\0';
    fputs(buf, out);
}

int stats_format_prometheus(const struct stats_figures *f, char **ret, size_t *ret_len)
{
    char *text = NULL;
    size_t len = 0;
    uint64_t cum = 0;
    FILE *out = open_memstream(&text, &len);

    if (!out)
        return -ENOMEM;

    family(out, "logshard_build_info", "gauge",
           "Always 1; the labels say which logshardd runs, with which fsync policy and I/O "
           "backend.");
    fputs("logshard_build_info{version=\"", out);
    put_label_value(out, f->version);
    fprintf(out, "\",fsync_policy=\"%s\",io_backend=\"%s\"} 1\n", f->fsync_policy,
            f->io_backend);
    family(out, "logshard_start_time_seconds", "gauge",
           "When logshardd started, in seconds since the Unix epoch.");
    fputs("logshard_start_time_seconds ", out);
    put_seconds(out, f->start_real_ns);
    fputc('\n', out);

    metric_u64(out, "logshard_producers_connected", "gauge",
               "Producer connections admitted and open now.", f->producers_connected);
    metric_u64(out, "logshard_connections_accepted_total", "counter",
               "Producer connections accepted since start, admitted or not.",
               f->connections_accepted);
    metric_u64(out, "logshard_shards_active", "gauge",
               "Shards not yet sealed: being written, or being sealed.", f->active_shards);
    metric_u64(out, "logshard_shards_opened_total", "counter", "Shards created since start.",
               f->shards_opened);
    metric_u64(out, "logshard_shards_sealed_total", "counter",
               "Shards sealed into done/ since start.", f->shards_sealed);
    metric_u64(out, "logshard_records_received_total", "counter",
               "Records received from producers since start.", f->records_received);
    metric_u64(out, "logshard_bytes_received_total", "counter",
               "Payload bytes of the records received since start.", f->bytes_received);
    metric_u64(out, "logshard_records_acknowledged_total", "counter",
               "Records acknowledged to producers since start.", f->records_acked);
    metric_u64(out, "logshard_records_pending_ack", "gauge",
               "Records of open connections received but not yet acknowledged.",
               f->acks_pending);
    metric_u64(out, "logshard_bytes_waiting", "gauge",
               "Bytes accepted into shards but not yet written to their files.",
               f->bytes_waiting);
    metric_u64(out, "logshard_memory_bytes", "gauge",
               "Receive and batch buffers held for producers (see memory_limit_bytes).",
               f->memory_bytes);
    metric_u64(out, "logshard_io_requests_pending", "gauge",
               "File I/O requests queued or in flight.", f->io_pending);
    metric_u64(out, "logshard_read_turns_total", "counter",
               "Times a producer connection with more to send waited for its turn, the "
               "loop tick's read budget being spent.",
               f->read_turns);
    metric_u64(out, "logshard_read_holds_total", "counter",
               "Loop ticks in which no producer connection was read, as many shards waiting "
               "for the disk (a write, or the create of their file) as the daemon allows.",
               f->read_holds);
    metric_u64(out, "logshard_streams_known", "gauge",
               "Producer streams the daemon remembers, for resuming them.", f->streams_known);
    metric_u64(out, "logshard_streams_forgotten_total", "counter",
               "Streams forgotten since start: past resume_window, or over max_streams.",
               f->streams_forgotten);
    metric_u64(out, "logshard_streams_resumed_total", "counter",
               "Connections since start that resumed a stream the daemon knew.",
               f->streams_resumed);
    metric_u64(out, "logshard_streams_refused_total", "counter",
               "Resumes refused since start: an unknown stream with acknowledged records, "
               "or another uid or producer name.",
               f->streams_refused);
    metric_u64(out, "logshard_records_duplicate_total", "counter",
               "Records received below their stream's position: acknowledged, not written "
               "again.",
               f->records_duplicate);
    metric_u64(out, "logshard_syslog_datagrams_total", "counter",
               "Datagrams read from the syslog datagram socket since start.",
               f->syslog_datagrams);
    metric_u64(out, "logshard_syslog_records_total", "counter",
               "Syslog datagrams that became records since start.", f->syslog_records);
    family(out, "logshard_syslog_dropped_total", "counter",
           "Syslog datagrams since start that became no record (empty, oversized, refused: "
           "no shard or memory for it, failed: lost in a failed write or sync).");
    fprintf(out,
            "logshard_syslog_dropped_total{why=\"empty\"} %" PRIu64 "\n"
            "logshard_syslog_dropped_total{why=\"oversized\"} %" PRIu64 "\n"
            "logshard_syslog_dropped_total{why=\"refused\"} %" PRIu64 "\n"
            "logshard_syslog_dropped_total{why=\"failed\"} %" PRIu64 "\n",
            f->syslog_dropped_empty, f->syslog_dropped_oversized, f->syslog_dropped_refused,
            f->syslog_dropped_failed);
    metric_u64(out, "logshard_syslog_pauses_total", "counter",
               "Times the syslog datagram socket stopped being read for memory_limit_bytes.",
               f->syslog_pauses);
    metric_u64(out, "logshard_syslog_stream_connections", "gauge",
               "Connections open on the syslog stream socket.", f->syslog_stream_open);
    metric_u64(out, "logshard_syslog_stream_connections_total", "counter",
               "Connections accepted on the syslog stream socket since start.",
               f->syslog_stream_connections);
    metric_u64(out, "logshard_syslog_stream_records_total", "counter",
               "Syslog stream messages that became records since start (cut ones too).",
               f->syslog_stream_records);
    metric_u64(out, "logshard_syslog_stream_cut_total", "counter",
               "Syslog stream lines over max_record_bytes since start, stored cut.",
               f->syslog_stream_cut);
    metric_u64(out, "logshard_syslog_stream_framing_errors_total", "counter",
               "Syslog stream connections closed since start for a malformed or oversized "
               "octet count.",
               f->syslog_stream_framing_errors);
    family(out, "logshard_syslog_stream_dropped_total", "counter",
           "Syslog stream messages since start that became no record (refused: no shard or "
           "memory for it, failed: lost in a failed write or sync).");
    fprintf(out,
            "logshard_syslog_stream_dropped_total{why=\"refused\"} %" PRIu64 "\n"
            "logshard_syslog_stream_dropped_total{why=\"failed\"} %" PRIu64 "\n",
            f->syslog_stream_refused, f->syslog_stream_failed);
    family(out, "logshard_syslog_stream_dropped_bytes_total", "counter",
           "Syslog stream bytes since start that became no record (discarded: the rest of a "
           "cut line, unfinished: an octet-counted message its connection never finished).");
    fprintf(out,
            "logshard_syslog_stream_dropped_bytes_total{why=\"discarded\"} %" PRIu64 "\n"
            "logshard_syslog_stream_dropped_bytes_total{why=\"unfinished\"} %" PRIu64 "\n",
            f->syslog_stream_discarded_bytes, f->syslog_stream_unfinished_bytes);
    metric_u64(out, "logshard_syslog_stream_pauses_total", "counter",
               "Times a syslog stream connection stopped being read for session_buffer_bytes "
               "or memory_limit_bytes.",
               f->syslog_stream_pauses);
    metric_u64(out, "logshard_budget_spool_bytes", "gauge",
               "Bytes the spool holds as the disk budget counts them: open shards' taken "
               "bytes, done/, merged/ and quarantine/.",
               f->budget.spool_bytes);
    metric_u64(out, "logshard_spool_budget_bytes", "gauge",
               "spool_budget_bytes (0: no budget).", f->budget.budget_bytes);
    metric_u64(out, "logshard_spool_free_bytes", "gauge",
               "Free bytes of the spool's filesystem (statvfs, less what was taken since).",
               f->budget.free_bytes);
    metric_u64(out, "logshard_spool_min_free_bytes", "gauge",
               "spool_min_free_bytes (0: none kept).", f->budget.min_free_bytes);
    metric_u64(out, "logshard_budget_refused_total", "counter",
               "Frames and syslog messages refused since start because the spool was at "
               "spool_budget_bytes or its filesystem at spool_min_free_bytes.",
               f->budget.refused_budget);
    metric_u64(out, "logshard_budget_freed_bytes_total", "counter",
               "Bytes of files that left done/, merged/ and quarantine/ since start (logctl "
               "merge --delete, the shipper, logctl prune).",
               f->budget.freed_bytes);
    metric_u64(out, "logshard_quota_pauses_total", "counter",
               "Times since start a producer's connections began to wait for its quota.",
               f->budget.quota_pauses);
    metric_u64(out, "logshard_producers_waiting_for_quota", "gauge",
               "Producers whose connections wait for their quota now.",
               f->budget.producers_waiting);
    if (f->n_producers) {
        static const struct {
            const char *name, *type, *help;
        } fam[] = {
            { "logshard_producer_spool_bytes", "gauge",
              "Bytes a producer name holds in the spool (open and sealed shards)." },
            { "logshard_producer_quota_bytes", "gauge",
              "A producer name's quota (0: none)." },
            { "logshard_producer_quota_waiting", "gauge",
              "1 while the producer's connections wait for its quota." },
            { "logshard_producer_quota_wait_seconds_total", "counter",
              "Time the producer's connections have waited for its quota." },
            { "logshard_producer_quota_refused_total", "counter",
              "Frames or syslog messages of the producer refused over its quota." },
        };
        for (size_t k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
            family(out, fam[k].name, fam[k].type, fam[k].help);
            for (size_t i = 0; i < f->n_producers; i++) {
                const struct stats_producer_budget *p = &f->producers[i];

                fprintf(out, "%s{producer=\"", fam[k].name);
                put_label_value(out, p->name);
                fputs("\"} ", out);
                switch (k) {
                case 0: fprintf(out, "%" PRIu64 "\n", p->bytes); break;
                case 1: fprintf(out, "%" PRIu64 "\n", p->quota); break;
                case 2: fprintf(out, "%d\n", p->waiting ? 1 : 0); break;
                case 3: put_seconds(out, p->wait_ns); fputc('\n', out); break;
                default: fprintf(out, "%" PRIu64 "\n", p->refused); break;
                }
            }
        }
    }
    metric_u64(out, "logshard_syncs_total", "counter",
               "fdatasync, fsync and syncfs calls completed since start (shard data, seals, "
               "directories).",
               f->syncs);
    metric_u64(out, "logshard_syncfs_total", "counter",
               "Shared syncs (fsync = batch): syncfs of the spool's file system, or "
               "one-flush's shared fdatasync.",
               f->syncfs);
    metric_u64(out, "logshard_syncfs_shards_total", "counter",
               "Shards the shared syncs covered, summed over the syncs.", f->syncfs_shards);

    family(out, "logshard_fsync_duration_seconds", "histogram",
           "Time from queueing an fdatasync of shard data to its completion; under the batch "
           "and always policies the write linked before it is included.");
    for (unsigned i = 0; i < STATS_FSYNC_BUCKETS; i++) {
        cum += f->fsync_buckets[i];
        fputs("logshard_fsync_duration_seconds_bucket{le=\"", out);
        if (i == STATS_FSYNC_BUCKETS - 1)
            fputs("+Inf", out);
        else
            put_seconds(out, stats_fsync_bound_ns(i));
        fprintf(out, "\"} %" PRIu64 "\n", cum);
    }
    fputs("logshard_fsync_duration_seconds_sum ", out);
    put_seconds(out, f->fsync_sum_ns);
    fprintf(out, "\nlogshard_fsync_duration_seconds_count %" PRIu64 "\n", f->fsync_count);

    family(out, "logshard_errors_total", "counter",
           "Errors since start, by kind: protocol (malformed frames), io (failed writes, "
           "syncs, seals), refused_access (allowed_uids/gids), refused_limit (producer and "
           "shard limits), timeout (hello or idle timeouts), refused_admin (admin socket "
           "peers of another uid).");
    fprintf(out,
            "logshard_errors_total{kind=\"protocol\"} %" PRIu64 "\n"
            "logshard_errors_total{kind=\"io\"} %" PRIu64 "\n"
            "logshard_errors_total{kind=\"refused_access\"} %" PRIu64 "\n"
            "logshard_errors_total{kind=\"refused_limit\"} %" PRIu64 "\n"
            "logshard_errors_total{kind=\"timeout\"} %" PRIu64 "\n"
            "logshard_errors_total{kind=\"refused_admin\"} %" PRIu64 "\n",
            f->errors_protocol, f->errors_io, f->refused_access, f->refused_limit, f->timeouts,
            f->refused_admin);

    if (f->spool_error == 0) {
        family(out, "logshard_spool_files", "gauge",
               "Files in the spool's directories: active (being written), done (sealed), "
               "quarantine.");
        fprintf(out,
                "logshard_spool_files{dir=\"active\"} %" PRIu64 "\n"
                "logshard_spool_files{dir=\"done\"} %" PRIu64 "\n"
                "logshard_spool_files{dir=\"quarantine\"} %" PRIu64 "\n",
                f->active_files, f->done_files, f->quarantine_files);
        family(out, "logshard_spool_bytes", "gauge",
               "Sizes of the files in the spool's directories.");
        fprintf(out,
                "logshard_spool_bytes{dir=\"active\"} %" PRIu64 "\n"
                "logshard_spool_bytes{dir=\"done\"} %" PRIu64 "\n"
                "logshard_spool_bytes{dir=\"quarantine\"} %" PRIu64 "\n",
                f->active_bytes, f->done_bytes, f->quarantine_bytes);
        metric_u64(out, "logshard_spool_filesystem_avail_bytes", "gauge",
                   "Space the spool's file system has for unprivileged users.",
                   f->fs_avail_bytes);
        metric_u64(out, "logshard_spool_filesystem_size_bytes", "gauge",
                   "Size of the spool's file system.", f->fs_size_bytes);
    }

    if (fclose(out) != 0 || !text) {
        free(text);
        return -ENOMEM;
    }
    *ret = text;
    *ret_len = len;
    return 0;
}
