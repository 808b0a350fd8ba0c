/* Figures for operators, derived from the daemon's counters only when asked
 * for (logctl status, the metrics file), so that receiving a record costs
 * nothing beyond the counters it bumps.
 *
 * Rates over the last 10 seconds come from a sample of the counters taken
 * every second by an unreferenced timer; the fsync latency quantiles from a
 * fixed-bucket histogram (the buckets the metrics file exports), so p50 and
 * p99 are estimates within their bucket, like Prometheus' own
 * histogram_quantile(). Spool usage is read from the directories, which may
 * take a while on a big spool, so stats_measure_spool only touches its
 * snapshot and the callers run it on libuv's thread pool. */
#include "stats.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "config.h"
#include "fileutil.h"
#include "io.h"
#include "json.h"
#include "logshard-build.h"
#include "memory.h"
#include "session.h"
#include "shard.h"
#include "syslog-producers.h"
#include "syslog-stream.h"

#define RATE_PERIOD_MS 1000u

static void take_sample(struct daemon *d)
{
    struct stats_rate_sample *s = &d->rate_samples[d->rate_next];

    s->mono_ns = now_monotonic_ns();
    s->records = d->stats.records_received;
    s->bytes = d->stats.bytes_received;
    d->rate_next = (d->rate_next + 1) % STATS_RATE_SAMPLES;
    if (d->rate_count < STATS_RATE_SAMPLES)
        d->rate_count++;
}

static void on_rate_timer(uv_timer_t *t)
{
    take_sample(t->data);
}

void stats_start(struct daemon *d)
{
    (void)uv_timer_init(d->loop, &d->rate_timer);
    d->rate_timer.data = d;
    d->rate_running = true;
    take_sample(d);
    (void)uv_timer_start(&d->rate_timer, on_rate_timer, RATE_PERIOD_MS, RATE_PERIOD_MS);
    uv_unref((uv_handle_t *)&d->rate_timer);
}

void stats_stop(struct daemon *d)
{
    if (!d->rate_running)
        return;
    d->rate_running = false;
    if (!uv_is_closing((uv_handle_t *)&d->rate_timer))
        uv_close((uv_handle_t *)&d->rate_timer, NULL);
}

double stats_fsync_quantile(const uint64_t *buckets, uint64_t count, double q)
{
    double rank = q * (double)count;
    uint64_t cum = 0;

    if (count == 0)
        return NAN;
    for (unsigned i = 0; i < STATS_FSYNC_BUCKETS; i++) {
        double lower = i ? (double)stats_fsync_bound_ns(i - 1) / 1e9 : 0.0;

        if ((double)(cum + buckets[i]) >= rank && buckets[i] > 0) {
            double upper;

            if (i == STATS_FSYNC_BUCKETS - 1)
                return lower; /* +Inf: the best we can say is "above the last bound" */
            upper = (double)stats_fsync_bound_ns(i) / 1e9;
            return lower + (upper - lower) * (rank - (double)cum) / (double)buckets[i];
        }
        cum += buckets[i];
    }
    return (double)stats_fsync_bound_ns(STATS_FSYNC_BUCKETS - 2) / 1e9;
}

static char *dup_or_null(const char *s, bool *failed)
{
    char *c;

    if (!s)
        return NULL;
    c = strdup(s);
    if (!c)
        *failed = true;
    return c;
}

static int count_producer(void *data, const struct budget_producer_figures *p)
{
    struct stats_figures *f = data;

    (void)p;
    f->n_producers++;
    return 0;
}

static int copy_producer(void *data, const struct budget_producer_figures *p)
{
    struct stats_figures *f = data;
    struct stats_producer_budget *o = &f->producers[f->n_producers];

    o->name = strdup(p->name);
    if (!o->name)
        return -ENOMEM;
    f->n_producers++;
    o->bytes = p->bytes;
    o->active_bytes = p->active_bytes;
    o->sealed_bytes = p->sealed_bytes;
    o->sealed_files = p->sealed_files;
    o->quota = p->quota;
    o->waiting = p->waiting;
    o->wait_ns = p->wait_ns;
    o->pauses = p->pauses;
    o->refused = p->refused;
    return 0;
}

int stats_collect(struct daemon *d, struct stats_figures *f)
{
    const struct daemon_stats *st = &d->stats;
    uint64_t now = now_monotonic_ns();
    bool failed = false;
    double since_start;

    memset(f, 0, sizeof(*f));
    f->version = dup_or_null(LOGSHARD_VERSION, &failed);
    f->spool = dup_or_null(d->config.spool, &failed);
    f->admin_socket = dup_or_null(d->config.admin_socket, &failed);
    f->metrics_file = dup_or_null(d->config.metrics_file, &failed);
    if (failed) {
        stats_figures_free(f);
        return -ENOMEM;
    }
    f->fsync_policy = config_fsync_policy_name((enum fsync_policy)d->config.fsync_policy);
    f->io_backend = !d->io ? "none"
                    : io_backend_in_use(d->io) == IO_BACKEND_URING ? "io_uring"
                                                                   : "threads";
    f->pid = (int)getpid();
    f->start_real_ns = d->start_real_ns;
    f->uptime_ns = now - d->start_mono_ns;

    f->producers_connected = st->sessions_open;
    f->connections_accepted = st->connections_accepted;
    f->shards_opened = st->shards_opened;
    f->shards_sealed = st->shards_sealed;
    f->records_received = st->records_received;
    f->bytes_received = st->bytes_received;
    f->records_acked = st->records_acked;
    for (const struct list_node *p = d->shards.next; p != &d->shards; p = p->next) {
        const struct shard *s = list_entry(p, struct shard, node);
        f->active_shards++;
        f->bytes_waiting += shard_unwritten_bytes(s);
    }

    since_start = (double)f->uptime_ns / 1e9;
    if (since_start > 0) {
        f->records_per_s_total = (double)st->records_received / since_start;
        f->bytes_per_s_total = (double)st->bytes_received / since_start;
    }
    if (d->rate_count > 0) {
        const struct stats_rate_sample *old =
            &d->rate_samples[(d->rate_next + STATS_RATE_SAMPLES - d->rate_count) %
                             STATS_RATE_SAMPLES];
        double window = (double)(now - old->mono_ns) / 1e9;

        f->rate_window_s = window;
        if (window > 0.001) {
            f->records_per_s_10s = (double)(st->records_received - old->records) / window;
            f->bytes_per_s_10s = (double)(st->bytes_received - old->bytes) / window;
        }
    }

    f->syncs = d->io ? io_syncs_done(d->io) : st->syncs;
    f->sync_method = config_sync_method_name(d->batch_sync);
    f->syncfs = d->group_sync.syncs;
    f->syncfs_shards = d->group_sync.members;
    memcpy(f->fsync_buckets, st->fsync_buckets, sizeof(f->fsync_buckets));
    f->fsync_count = st->fsync_count;
    f->fsync_sum_ns = st->fsync_sum_ns;
    f->fsync_p50_s = stats_fsync_quantile(st->fsync_buckets, st->fsync_count, 0.5);
    f->fsync_p99_s = stats_fsync_quantile(st->fsync_buckets, st->fsync_count, 0.99);

    f->acks_pending = session_acks_pending(d);
    f->memory_bytes = memory_used(d);
    f->io_pending = d->io ? io_pending(d->io) : 0;
    f->read_turns = st->read_turns;
    f->read_holds = st->read_holds;

    f->errors_protocol = st->protocol_errors;
    f->errors_io = st->io_errors;
    f->refused_access = st->refused_access;
    f->refused_limit = st->refused_limit;
    f->timeouts = st->timeouts;
    f->refused_admin = st->refused_admin;
    f->streams_known = d->streams.count;
    f->streams_forgotten = d->streams.forgotten;
    f->streams_resumed = st->streams_resumed;
    f->streams_refused = st->streams_refused;
    f->records_duplicate = st->records_duplicate;

    f->syslog_on = d->syslog_dgram != NULL;
    f->syslog_producers = syslog_producers_count(d);
    f->syslog_datagrams = st->syslog_datagrams;
    f->syslog_records = st->syslog_records;
    f->syslog_dropped_empty = st->syslog_dropped_empty;
    f->syslog_dropped_oversized = st->syslog_dropped_oversized;
    f->syslog_dropped_refused = st->syslog_dropped_refused;
    f->syslog_dropped_failed = st->syslog_dropped_failed;
    f->syslog_pauses = st->syslog_pauses;
    f->syslog_stream_on = d->syslog_stream != NULL;
    f->syslog_stream_open = syslog_stream_connections(d->syslog_stream);
    f->syslog_stream_connections = st->syslog_stream_connections;
    f->syslog_stream_records = st->syslog_stream_records;
    f->syslog_stream_cut = st->syslog_stream_cut;
    f->syslog_stream_discarded_bytes = st->syslog_stream_discarded_bytes;
    f->syslog_stream_framing_errors = st->syslog_stream_framing_errors;
    f->syslog_stream_unfinished_bytes = st->syslog_stream_unfinished_bytes;
    f->syslog_stream_refused = st->syslog_stream_refused;
    f->syslog_stream_failed = st->syslog_stream_failed;
    f->syslog_stream_pauses = st->syslog_stream_pauses;

    budget_figures(d, &f->budget);
    if (budget_each_producer(d, count_producer, f) < 0 ||
        (f->n_producers && !(f->producers = calloc(f->n_producers, sizeof(*f->producers))))) {
        stats_figures_free(f);
        return -ENOMEM;
    }
    f->n_producers = 0;
    if (budget_each_producer(d, copy_producer, f) < 0) {
        stats_figures_free(f);
        return -ENOMEM;
    }

    f->active_fd = d->active_fd;
    f->done_fd = d->done_fd;
    f->spool_fd = d->spool_fd;
    f->spool_error = -ENODATA; /* until measured */
    return 0;
}

void stats_figures_free(struct stats_figures *f)
{
    free(f->version);
    free(f->spool);
    free(f->admin_socket);
    free(f->metrics_file);
    f->version = f->spool = f->admin_socket = f->metrics_file = NULL;
    for (size_t i = 0; i < f->n_producers; i++)
        free(f->producers[i].name);
    free(f->producers);
    f->producers = NULL;
    f->n_producers = 0;
}

/* Regular files directly in the directory parent (or its subdirectory name
 * when not NULL; a missing one counts as empty): how many, and their sizes. */
static int measure_dir(int parent, const char *name, uint64_t *ret_files, uint64_t *ret_bytes)
{
    uint64_t files = 0, bytes = 0;
    struct dirent *de;
    DIR *dir;
    int fd, r = 0;

    fd = openat(parent, name ? name : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && name) {
            *ret_files = *ret_bytes = 0;
            return 0;
        }
        return -errno;
    }
    dir = fdopendir(fd);
    if (!dir) {
        r = -errno;
        (void)close(fd); /* read-only directory */
        return r;
    }
    for (;;) {
        struct stat st;

        errno = 0;
        de = readdir(dir);
        if (!de) {
            if (errno)
                r = -errno;
            break;
        }
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
            continue;
        if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue; /* gone since readdir (sealed, merged): not there any more */
        if (!S_ISREG(st.st_mode))
            continue;
        files++;
        bytes += (uint64_t)st.st_size;
    }
    (void)closedir(dir); /* read-only directory stream */
    if (r < 0)
        return r;
    *ret_files = files;
    *ret_bytes = bytes;
    return 0;
}

int stats_measure_spool(struct stats_figures *f)
{
    struct statvfs vfs;
    int r;

    r = measure_dir(f->active_fd, NULL, &f->active_files, &f->active_bytes);
    if (r == 0)
        r = measure_dir(f->done_fd, NULL, &f->done_files, &f->done_bytes);
    if (r == 0)
        r = measure_dir(f->spool_fd, "quarantine", &f->quarantine_files, &f->quarantine_bytes);
    if (r == 0 && fstatvfs(f->spool_fd, &vfs) < 0)
        r = -errno;
    if (r == 0) {
        f->fs_avail_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
        f->fs_free_bytes = (uint64_t)vfs.f_bfree * vfs.f_frsize;
        f->fs_size_bytes = (uint64_t)vfs.f_blocks * vfs.f_frsize;
    }
    f->spool_error = r;
    return r;
}

/* ---- JSON ---- */

static void json_time(struct json_out *o, uint64_t ns)
{
    char buf[64];

    if (rfc3339_format(ns, 0, buf, sizeof(buf)) < 0)
        json_null(o);
    else
        json_cstr(o, buf);
}

void stats_write_json(struct json_out *o, const struct stats_figures *f)
{
    json_obj_begin(o);
    json_member_str(o, "version", f->version);
    json_member_i64(o, "pid", f->pid);
    json_key(o, "started");
    json_time(o, f->start_real_ns);
    json_member_double(o, "uptime_s", (double)f->uptime_ns / 1e9);
    json_member_str(o, "fsync_policy", f->fsync_policy);
    json_member_str(o, "io_backend", f->io_backend);
    json_member_str(o, "spool", f->spool);
    json_member_str(o, "admin_socket", f->admin_socket);
    json_member_str(o, "metrics_file", f->metrics_file);

    json_member_u64(o, "producers_connected", f->producers_connected);
    json_member_u64(o, "connections_accepted", f->connections_accepted);
    json_member_u64(o, "active_shards", f->active_shards);
    json_member_u64(o, "shards_opened", f->shards_opened);
    json_member_u64(o, "shards_sealed", f->shards_sealed);

    json_key(o, "records");
    json_obj_begin(o);
    json_member_u64(o, "received", f->records_received);
    json_member_u64(o, "acknowledged", f->records_acked);
    json_member_double(o, "per_s_10s", f->records_per_s_10s);
    json_member_double(o, "per_s_since_start", f->records_per_s_total);
    json_obj_end(o);

    json_key(o, "bytes");
    json_obj_begin(o);
    json_member_u64(o, "received", f->bytes_received);
    json_member_double(o, "per_s_10s", f->bytes_per_s_10s);
    json_member_double(o, "per_s_since_start", f->bytes_per_s_total);
    json_obj_end(o);
    json_member_double(o, "rate_window_s", f->rate_window_s);

    json_key(o, "fsync");
    json_obj_begin(o);
    json_member_u64(o, "syncs", f->syncs);
    json_member_str(o, "batch_method", f->sync_method);
    json_member_u64(o, "syncfs", f->syncfs);
    json_member_u64(o, "syncfs_shards", f->syncfs_shards);
    json_member_u64(o, "count", f->fsync_count);
    json_member_double(o, "sum_s", (double)f->fsync_sum_ns / 1e9);
    json_member_double(o, "p50_s", f->fsync_p50_s);
    json_member_double(o, "p99_s", f->fsync_p99_s);
    json_obj_end(o);

    json_member_u64(o, "acks_pending", f->acks_pending);
    json_member_u64(o, "bytes_waiting", f->bytes_waiting);
    json_member_u64(o, "memory_bytes", f->memory_bytes);
    json_member_u64(o, "io_pending", f->io_pending);
    json_member_u64(o, "read_turns", f->read_turns);
    json_member_u64(o, "read_holds", f->read_holds);

    json_key(o, "errors");
    json_obj_begin(o);
    json_member_u64(o, "protocol", f->errors_protocol);
    json_member_u64(o, "io", f->errors_io);
    json_member_u64(o, "refused_access", f->refused_access);
    json_member_u64(o, "refused_limit", f->refused_limit);
    json_member_u64(o, "timeout", f->timeouts);
    json_member_u64(o, "refused_admin", f->refused_admin);
    json_obj_end(o);

    json_key(o, "streams");
    json_obj_begin(o);
    json_member_u64(o, "known", f->streams_known);
    json_member_u64(o, "forgotten", f->streams_forgotten);
    json_member_u64(o, "resumed", f->streams_resumed);
    json_member_u64(o, "refused", f->streams_refused);
    json_member_u64(o, "records_duplicate", f->records_duplicate);
    json_obj_end(o);

    json_key(o, "syslog");
    json_obj_begin(o);
    json_member_bool(o, "datagram_socket", f->syslog_on);
    json_member_u64(o, "producers", f->syslog_producers);
    json_member_u64(o, "datagrams", f->syslog_datagrams);
    json_member_u64(o, "records", f->syslog_records);
    json_key(o, "dropped");
    json_obj_begin(o);
    json_member_u64(o, "empty", f->syslog_dropped_empty);
    json_member_u64(o, "oversized", f->syslog_dropped_oversized);
    json_member_u64(o, "refused", f->syslog_dropped_refused);
    json_member_u64(o, "failed", f->syslog_dropped_failed);
    json_obj_end(o);
    json_member_u64(o, "pauses", f->syslog_pauses);
    json_key(o, "stream");
    json_obj_begin(o);
    json_member_bool(o, "stream_socket", f->syslog_stream_on);
    json_member_u64(o, "connections", f->syslog_stream_open);
    json_member_u64(o, "connections_accepted", f->syslog_stream_connections);
    json_member_u64(o, "records", f->syslog_stream_records);
    json_member_u64(o, "cut", f->syslog_stream_cut);
    json_member_u64(o, "framing_errors", f->syslog_stream_framing_errors);
    json_key(o, "dropped");
    json_obj_begin(o);
    json_member_u64(o, "refused", f->syslog_stream_refused);
    json_member_u64(o, "failed", f->syslog_stream_failed);
    json_member_u64(o, "discarded_bytes", f->syslog_stream_discarded_bytes);
    json_member_u64(o, "unfinished_bytes", f->syslog_stream_unfinished_bytes);
    json_obj_end(o);
    json_member_u64(o, "pauses", f->syslog_stream_pauses);
    json_obj_end(o);
    json_obj_end(o);

    json_key(o, "budget");
    json_obj_begin(o);
    json_member_u64(o, "spool_bytes", f->budget.spool_bytes);
    json_member_u64(o, "spool_budget_bytes", f->budget.budget_bytes);
    json_member_u64(o, "free_bytes", f->budget.free_bytes);
    json_member_u64(o, "spool_min_free_bytes", f->budget.min_free_bytes);
    json_member_u64(o, "active_bytes", f->budget.active_bytes);
    json_member_u64(o, "done_bytes", f->budget.done_bytes);
    json_member_u64(o, "merged_bytes", f->budget.merged_bytes);
    json_member_u64(o, "quarantine_bytes", f->budget.quarantine_bytes);
    json_member_u64(o, "refused_budget", f->budget.refused_budget);
    json_member_u64(o, "producers_waiting", f->budget.producers_waiting);
    json_member_u64(o, "quota_pauses", f->budget.quota_pauses);
    json_member_u64(o, "freed_bytes", f->budget.freed_bytes);
    json_key(o, "producers");
    json_arr_begin(o);
    for (size_t i = 0; i < f->n_producers; i++) {
        const struct stats_producer_budget *p = &f->producers[i];

        json_obj_begin(o);
        json_member_str(o, "name", p->name);
        json_member_u64(o, "bytes", p->bytes);
        json_member_u64(o, "active_bytes", p->active_bytes);
        json_member_u64(o, "sealed_bytes", p->sealed_bytes);
        json_member_u64(o, "sealed_shards", p->sealed_files);
        json_member_u64(o, "quota_bytes", p->quota);
        json_member_bool(o, "waiting", p->waiting);
        json_member_u64(o, "waited_ms", p->wait_ns / 1000000u);
        json_member_u64(o, "pauses", p->pauses);
        json_member_u64(o, "refused", p->refused);
        json_obj_end(o);
    }
    json_arr_end(o);
    json_obj_end(o);

    json_key(o, "disk");
    json_obj_begin(o);
    if (f->spool_error) {
        json_member_str(o, "error", strerror(-f->spool_error));
    } else {
        json_member_u64(o, "active_files", f->active_files);
        json_member_u64(o, "active_bytes", f->active_bytes);
        json_member_u64(o, "done_files", f->done_files);
        json_member_u64(o, "done_bytes", f->done_bytes);
        json_member_u64(o, "quarantine_files", f->quarantine_files);
        json_member_u64(o, "quarantine_bytes", f->quarantine_bytes);
        json_member_u64(o, "fs_avail_bytes", f->fs_avail_bytes);
        json_member_u64(o, "fs_free_bytes", f->fs_free_bytes);
        json_member_u64(o, "fs_size_bytes", f->fs_size_bytes);
    }
    json_obj_end(o);
    json_obj_end(o);
}
