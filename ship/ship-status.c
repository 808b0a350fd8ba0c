/* The shipper's figures for operators: <spool>/ship/status.json, which
 * logctl ship --status prints, and the Prometheus text file. Both are
 * written whole under a temp name and renamed, so a reader never sees half
 * a file; neither is synced, since they are remade every second. */
#include "ship-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fileutil.h"
#include "json.h"
#include "ship_progress.h"

static int replace_file(int dir_fd, const char *name, const char *text, size_t len)
{
    char tmp[300];
    int fd, r = 0;

    snprintf(tmp, sizeof(tmp), ".%s.tmp", name);
    (void)unlinkat(dir_fd, tmp, 0);
    fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    r = write_all(fd, text, len);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dir_fd, tmp, dir_fd, name) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(dir_fd, tmp, 0);
    return r;
}

int ship_status_write(int spool_fd, const struct ship_figures *f)
{
    _cleanup_close_ int dir_fd = -1;
    _cleanup_free_ char *text = NULL;
    struct json_out o;
    size_t len;
    int r;

    dir_fd = openat(spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    json_out_init(&o);
    json_obj_begin(&o);
    json_member_str(&o, "state", f->state);
    json_member_str(&o, "transactional_id", f->txid);
    json_member_u64(&o, "pid", (uint64_t)getpid());
    json_member_u64(&o, "started_ns", f->started_ns);
    json_member_u64(&o, "updated_ns", now_realtime_ns());
    json_member_u64(&o, "records_shipped", f->records_shipped);
    json_member_u64(&o, "bytes_shipped", f->bytes_shipped);
    json_member_double(&o, "records_per_s", f->records_per_s);
    json_member_u64(&o, "lag_records", f->lag_records);
    json_member_double(&o, "lag_seconds", f->lag_seconds);
    json_member_u64(&o, "transactions_committed", f->transactions_committed);
    json_member_u64(&o, "transactions_aborted", f->transactions_aborted);
    json_member_u64(&o, "broker_errors", f->broker_errors);
    json_member_u64(&o, "streams", f->streams);
    json_member_u64(&o, "records_missing", f->records_missing);
    json_member_str(&o, "last_error", f->last_error[0] ? f->last_error : NULL);
    json_member_u64(&o, "last_error_ns", f->last_error_ns);
    json_obj_end(&o);
    r = json_out_finish(&o, &text, &len);
    if (r < 0)
        return r;
    return replace_file(dir_fd, SHIP_STATUS_FILE, text, len);
}

int ship_metrics_write(const char *path, const struct ship_figures *f)
{
    _cleanup_free_ char *dir = NULL;
    _cleanup_close_ int dir_fd = -1;
    const char *slash = strrchr(path, '/');
    char text[4096];
    int n;

    dir = slash ? strndup(path, (size_t)(slash - path + (slash == path))) : strdup(".");
    if (!dir)
        return -ENOMEM;
    dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    n = snprintf(text, sizeof(text),
                 "# HELP logshard_ship_records_total Records committed to Kafka by logctl ship "
                 "since it started.\n"
                 "# TYPE logshard_ship_records_total counter\n"
                 "logshard_ship_records_total %" PRIu64 "\n"
                 "# HELP logshard_ship_bytes_total Record payload bytes committed to Kafka.\n"
                 "# TYPE logshard_ship_bytes_total counter\n"
                 "logshard_ship_bytes_total %" PRIu64 "\n"
                 "# HELP logshard_ship_records_per_second Records committed per second over "
                 "the last 10 seconds.\n"
                 "# TYPE logshard_ship_records_per_second gauge\n"
                 "logshard_ship_records_per_second %.1f\n"
                 "# HELP logshard_ship_lag_records Acknowledged records in the spool not yet "
                 "committed to Kafka.\n"
                 "# TYPE logshard_ship_lag_records gauge\n"
                 "logshard_ship_lag_records %" PRIu64 "\n"
                 "# HELP logshard_ship_lag_seconds How far the oldest unshipped record is "
                 "behind the newest acknowledged one.\n"
                 "# TYPE logshard_ship_lag_seconds gauge\n"
                 "logshard_ship_lag_seconds %.3f\n"
                 "# HELP logshard_ship_transactions_total Transactions ended, by outcome.\n"
                 "# TYPE logshard_ship_transactions_total counter\n"
                 "logshard_ship_transactions_total{outcome=\"committed\"} %" PRIu64 "\n"
                 "logshard_ship_transactions_total{outcome=\"aborted\"} %" PRIu64 "\n"
                 "# HELP logshard_ship_broker_errors_total Errors librdkafka reported about "
                 "the brokers.\n"
                 "# TYPE logshard_ship_broker_errors_total counter\n"
                 "logshard_ship_broker_errors_total %" PRIu64 "\n"
                 "# HELP logshard_ship_waiting_for_brokers Whether the shipper is waiting for "
                 "the brokers.\n"
                 "# TYPE logshard_ship_waiting_for_brokers gauge\n"
                 "logshard_ship_waiting_for_brokers %d\n",
                 f->records_shipped, f->bytes_shipped, f->records_per_s, f->lag_records,
                 f->lag_seconds, f->transactions_committed, f->transactions_aborted,
                 f->broker_errors, strcmp(f->state, "waiting for the brokers") == 0);
    if (n < 0 || (size_t)n >= sizeof(text))
        return -ENOBUFS;
    return replace_file(dir_fd, slash ? slash + 1 : path, text, (size_t)n);
}
