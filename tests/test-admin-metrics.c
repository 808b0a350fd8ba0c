/* Integration tests of the metrics file of the real logshardd in a
 * temporary directory, read by a real Prometheus parser, and of a FIFO
 * planted in its way.
 *
 * Records are sent from this process through the real liblogshard, so their
 * shards carry this process's uid and pid. Every wait has a deadline and
 * waits for an event (a reply, a line on a pipe, a process exit). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "json.h"
#include "logshard.h"
#include "shard_format.h"

#include "admin-fixture.h"

/* ---- metrics ---- */

/* A FIFO planted under the metrics file's temp name must not hold the
 * thread that writes it: the write fails with a line naming the file, and
 * the daemon still stops cleanly (a blocked pool thread would keep it from
 * exiting). */
static void test_metrics_fifo_in_the_way(void **state)
{
    struct harness *h = *state;
    char *dir = harness_path(h->dir, "metrics");
    char *file = harness_path(dir, "logshard.prom");
    char *conf, *fifo;

    assert_int_equal(mkdir(dir, 0755), 0);
    assert_true(asprintf(&conf, "[daemon]\nmetrics_file = %s\nmetrics_interval_s = 1\n", file) >
                0);
    harness_write_config(h, conf);
    harness_start(h, NULL);
    assert_true(asprintf(&fifo, "%s/.logshard.prom.%ld.tmp", dir, (long)h->daemon) > 0);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    if (!harness_wait_log(h, "a file that is not a regular file is in the way", 15000))
        fail_msg("no log line about the FIFO at %s", fifo);
    assert_true(harness_log_has(h, fifo));
    stop_daemon(h);
    free(fifo);
    free(conf);
    free(file);
    free(dir);
}

static bool valid_name(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
              (i > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return n > 0;
}

/* A strict reading of the text exposition format, for what promtool may not
 * be there to check: HELP and TYPE before every family's samples, valid
 * names, label syntax, numeric values, counters named _total, and
 * histograms whose buckets grow, end at +Inf and agree with _count. */
static void check_exposition(char *text)
{
    char family[128] = "", type[32] = "";
    bool helped = false;
    uint64_t last_bucket = 0, inf_bucket = UINT64_MAX;
    char *save = NULL;
    size_t samples = 0;

    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[128], *value, *end;
        size_t nl;

        if (strncmp(line, "# HELP ", 7) == 0) {
            char *sp = strchr(line + 7, ' ');
            assert_non_null(sp);
            assert_true(valid_name(line + 7, (size_t)(sp - line - 7)));
            snprintf(family, sizeof(family), "%.*s", (int)(sp - line - 7), line + 7);
            helped = true;
            type[0] = '\0';
            continue;
        }
        if (strncmp(line, "# TYPE ", 7) == 0) {
            size_t fl = strlen(family);
            assert_true(helped);
            assert_true(strncmp(line + 7, family, fl) == 0 && line[7 + fl] == ' ');
            snprintf(type, sizeof(type), "%s", line + 8 + fl);
            assert_true(strcmp(type, "counter") == 0 || strcmp(type, "gauge") == 0 ||
                        strcmp(type, "histogram") == 0);
            if (strcmp(type, "counter") == 0)
                assert_true(fl > 6 && strcmp(family + fl - 6, "_total") == 0);
            last_bucket = 0;
            inf_bucket = UINT64_MAX;
            continue;
        }
        assert_true(line[0] != '#');
        assert_true(type[0] != '\0');
        nl = strcspn(line, "{ ");
        assert_true(valid_name(line, nl));
        snprintf(name, sizeof(name), "%.*s", (int)nl, line);
        if (strcmp(type, "histogram") == 0) {
            size_t fl = strlen(family);
            assert_true(strncmp(name, family, fl) == 0);
            assert_true(strcmp(name + fl, "_bucket") == 0 || strcmp(name + fl, "_sum") == 0 ||
                        strcmp(name + fl, "_count") == 0);
        } else {
            assert_string_equal(name, family);
        }
        value = line + nl;
        if (*value == '{') {
            char *close = strchr(value, '}');
            assert_non_null(close);
            /* label="value"(,label="value")* */
            for (char *p = value + 1; p < close;) {
                size_t ln = strcspn(p, "=");
                assert_true(valid_name(p, ln));
                p += ln;
                assert_true(p[0] == '=' && p[1] == '"');
                p += 2;
                while (*p != '"') {
                    assert_true(*p != '\0' && *p != '\n');
                    p += *p == '\\' ? 2 : 1;
                }
                p++;
                assert_true(*p == ',' || *p == '}');
                if (*p == ',')
                    p++;
            }
            if (strstr(name, "_bucket")) {
                const char *le = strstr(value, "le=\"");
                uint64_t v;
                assert_non_null(le);
                v = strtoull(close + 2, NULL, 10);
                assert_true(v >= last_bucket);
                last_bucket = v;
                if (strncmp(le + 4, "+Inf\"", 5) == 0)
                    inf_bucket = v;
            }
            value = close + 1;
        }
        assert_true(*value == ' ');
        (void)strtod(value + 1, &end);
        assert_true(end != value + 1 && *end == '\0');
        if (strstr(name, "_count") && strcmp(type, "histogram") == 0)
            assert_true(inf_bucket == strtoull(value + 1, NULL, 10));
        samples++;
    }
    assert_true(samples > 20);
}

static void test_metrics_file(void **state)
{
    struct harness *h = *state;
    char *dir = harness_path(h->dir, "metrics");
    char *file = harness_path(dir, "logshard.prom");
    char *conf;
    struct harness_file_needle w = { .path = file, .needle = "logshard_records_received_total 7\n" };
    char *text;
    size_t len;
    logshard *ls;

    assert_int_equal(mkdir(dir, 0755), 0);
    assert_true(asprintf(&conf, "[daemon]\nmetrics_file = %s\nmetrics_interval_s = 1\n", file) >
                0);
    harness_write_config(h, conf);
    harness_start(h, NULL);
    ls = producer_open(h, "measured");
    for (int i = 0; i < 7; i++)
        producer_sendf(ls, "m %d", i);
    producer_flush(ls);
    if (!harness_wait_for(harness_file_has, &w, 15000))
        fail_msg("%s never showed 7 records received", file);
    logshard_close(ls);

    text = harness_slurp(file, &len);
    assert_non_null(strstr(text, "# TYPE logshard_fsync_duration_seconds histogram\n"));
    assert_non_null(strstr(text, "logshard_fsync_duration_seconds_bucket{le=\"+Inf\"}"));
    assert_non_null(strstr(text, "logshard_producers_connected "));
    assert_non_null(strstr(text, "logshard_bytes_received_total "));
    assert_non_null(strstr(text, "logshard_errors_total{kind=\"protocol\"} 0\n"));
    assert_non_null(strstr(text, "logshard_spool_bytes{dir=\"active\"}"));
    check_exposition(text);
    free(text);

    /* The real parser, when the prometheus package is installed. */
    if (access("/usr/bin/promtool", X_OK) == 0) {
        char *cmd, *out_path = harness_path(h->dir, "promtool.out");
        const char *argv[] = { "/bin/sh", "-c", NULL, NULL };
        size_t n;
        char *out;
        int status;

        assert_true(asprintf(&cmd, "/usr/bin/promtool check metrics < '%s' 2>&1", file) > 0);
        argv[2] = cmd;
        status = harness_run(argv, out_path, NULL, 60000);
        out = harness_slurp(out_path, &n);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || n != 0)
            fail_msg("promtool check metrics: status %d: %s", status, out);
        free(out);
        free(out_path);
        free(cmd);
    } else {
        fprintf(stderr, "promtool not installed (Debian package prometheus): only the strict "
                        "parser of this test checked the file\n");
    }

    /* Written by rename: once the daemon is gone (it finishes a write in
     * progress before it exits), no temp file stays next to it. */
    stop_daemon(h);
    {
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t files = 0;
        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
            if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                files++;
        closedir(d);
        assert_int_equal(files, 1);
    }
    free(conf);
    free(dir);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_file, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_fifo_in_the_way, harness_setup, teardown),
    };

    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
