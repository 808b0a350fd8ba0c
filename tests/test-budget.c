/* The disk budget against the real daemon and the real library:
 *  - a flooder over its quota (over_quota = wait) beside 8 good producers:
 *    the flooder's connection waits, the others finish their flushes, the
 *    status says who waits, a merge --delete frees the flooder's share and
 *    it goes on by itself; every record arrives once;
 *  - over_quota = refuse: the flooder's frame is refused with EDQUOT and a
 *    message naming its quota, the others go on;
 *  - a reload that lowers a quota makes the producer wait (nothing is
 *    deleted), one that raises it lets it go on;
 *  - spool_budget_bytes: frames are refused with ENOSPC and a message naming
 *    the budget, before the filesystem is full; shutdown still seals.
 *  - spool_min_free_bytes on a real small tmpfs (needs root; skipped
 *    otherwise): refused by policy while the filesystem still has room,
 *    and what was acknowledged is all there. */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"

#define RECORD_BYTES 128
#define GOOD_PRODUCERS 8
#define GOOD_RECORDS 2000

/* Connects producer name. The tests set max_frame_bytes to 16K: a quota is
 * checked before each frame, so that is what a producer may overshoot by. */
static logshard *connect_producer(struct harness *h, const char *name)
{
    logshard_opts o = { .socket_path = h->sock, .producer = name, .buffer_bytes = 16 * 1024 };
    logshard *ls = NULL;

    assert_int_equal(logshard_connect(&ls, &o), 0);
    return ls;
}

/* In a child process: sends n records as name and exits 0 once they are
 * all acknowledged; on an error prints it and exits with the errno. With
 * acked_path, it flushes every 256 records and writes there how many are
 * acknowledged so far (a decimal number, rewritten each time). */
static pid_t start_flooder_counted(struct harness *h, const char *name, uint64_t n,
                                   const char *acked_path)
{
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        logshard_opts o = { .socket_path = h->sock, .producer = name, .buffer_bytes = 16 * 1024 };
        logshard *ls = NULL;
        char rec[RECORD_BYTES + 64];
        int r = logshard_connect(&ls, &o);

        for (uint64_t i = 0; r == 0 && i < n; i++) {
            size_t len = harness_make_record(rec, sizeof(rec), name, i, RECORD_BYTES);
            r = logshard_append(ls, rec, len);
            if (r == 0 && acked_path && (i + 1) % 256 == 0) {
                r = logshard_flush(ls, 120000);
                if (r == 0) {
                    FILE *f = fopen(acked_path, "we");
                    if (f) {
                        fprintf(f, "%" PRIu64 "\n", i + 1);
                        fclose(f);
                    }
                }
            }
        }
        if (r == 0)
            r = logshard_flush(ls, 120000);
        if (r < 0)
            fprintf(stderr, "flooder %s: %s: %s\n", name, logshard_strerror(r),
                    ls && logshard_error_message(ls) ? logshard_error_message(ls) : "");
        _exit(r < 0 ? -r : 0);
    }
    return pid;
}

static pid_t start_flooder(struct harness *h, const char *name, uint64_t n)
{
    return start_flooder_counted(h, name, n, NULL);
}

/* Sends n records as name and flushes; returns the flush's result. */
static int send_good(struct harness *h, const char *name, uint64_t n, char *msg, size_t msg_len)
{
    logshard *ls = connect_producer(h, name);
    char rec[RECORD_BYTES + 64];
    int r = 0;

    for (uint64_t i = 0; r == 0 && i < n; i++) {
        size_t len = harness_make_record(rec, sizeof(rec), name, i, RECORD_BYTES);
        r = logshard_append(ls, rec, len);
    }
    if (r == 0)
        r = logshard_flush(ls, 30000);
    if (msg)
        snprintf(msg, msg_len, "%s", logshard_error_message(ls) ? logshard_error_message(ls) : "");
    logshard_close(ls);
    return r;
}

static struct harness_run status_json(struct harness *h)
{
    return harness_run_logctl(h, "status", "--json", "--admin-socket", h->admin_sock, NULL);
}

struct waiting_check {
    struct harness *h;
    const char *needle;
};

/* Whether logctl status --json holds the needle (e.g. a producer waiting). */
static bool status_has(void *arg)
{
    struct waiting_check *c = arg;
    struct harness_run r = status_json(c->h);
    bool has = r.code == 0 && r.out && strstr(r.out, c->needle);

    harness_run_free(&r);
    return has;
}

static void merge_delete(struct harness *h)
{
    struct harness_run r = harness_run_logctl(h, "merge", "--spool", h->spool, "--delete", NULL);

    harness_expect_code(&r, 0, "logctl merge --delete");
    harness_run_free(&r);
}

/* Every record of the spool's merged files and of done/, as text. */
static char *all_records(struct harness *h, size_t *ret_len)
{
    char *merged_dir = harness_path(h->spool, "merged");
    char *text = NULL, *rest;
    size_t len = 0, rest_len;
    struct dirent **names = NULL;
    int n = scandir(merged_dir, &names, NULL, alphasort);

    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            char *path = harness_path(merged_dir, names[i]->d_name);
            struct harness_run r = harness_run_logctl(h, "cat", path, NULL);

            harness_expect_code(&r, 0, "logctl cat of a merged file");
            text = realloc(text, len + r.out_len + 1);
            memcpy(text + len, r.out, r.out_len);
            len += r.out_len;
            text[len] = '\0';
            harness_run_free(&r);
            free(path);
        }
        free(names[i]);
    }
    free(names);
    free(merged_dir);
    rest = harness_merge_and_cat(h, "rest.lsm", &rest_len);
    text = realloc(text, len + rest_len + 1);
    memcpy(text + len, rest, rest_len);
    len += rest_len;
    text[len] = '\0';
    free(rest);
    *ret_len = len;
    return text;
}

/* Asserts that text holds records 0..n-1 of name exactly once each. */
static void expect_once(const char *text, const char *name, uint64_t n)
{
    char prefix[96];
    uint64_t seen = 0;
    unsigned char *hits = calloc(n, 1);
    size_t plen = (size_t)snprintf(prefix, sizeof(prefix), "%s ", name);

    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');

        if (strncmp(line, prefix, plen) == 0) {
            uint64_t seq = strtoull(line + plen, NULL, 10);
            if (seq >= n || hits[seq])
                fail_msg("%s: record %" PRIu64 " is %s", name, seq,
                         seq >= n ? "beyond what was sent" : "there twice");
            hits[seq] = 1;
            seen++;
        }
        line = end ? end + 1 : NULL;
    }
    if (seen != n)
        fail_msg("%s: %" PRIu64 " of %" PRIu64 " records in the spool", name, seen, n);
    free(hits);
}

static int flooder_status(pid_t pid, int timeout_ms)
{
    int status = 0;

    for (int waited = 0; waited < timeout_ms; waited += 10) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        usleep(10000);
    }
    return -1;
}

static void test_quota_wait_beside_good_producers(void **state)
{
    struct harness *h = *state;
    struct waiting_check waiting = { h, "\"waiting\":true" };
    const uint64_t flood_records = 6000; /* about 1 MiB on disk, 4 times its quota */
    char name[32];
    int status = -1;
    size_t len;
    char *text;
    pid_t flooder;

    harness_write_config(h, "[limits]\nmax_frame_bytes = 16K\nmax_record_bytes = 4K\n[shard]\nmax_shard_bytes = 32K\n"
                            "[producer_quotas]\nflood* = 256K\n");
    harness_start(h, NULL);
    flooder = start_flooder(h, "flood", flood_records);
    assert_true(harness_wait_for(status_has, &waiting, 20000));
    assert_true(harness_wait_log(h, "producer flood is at its quota", 5000));

    /* The good producers are not held up by the waiting flooder. */
    for (int i = 0; i < GOOD_PRODUCERS; i++) {
        snprintf(name, sizeof(name), "good-%d", i);
        assert_int_equal(send_good(h, name, GOOD_RECORDS, NULL, 0), 0);
    }
    {
        struct harness_run r = harness_run_logctl(h, "status", "--admin-socket", h->admin_sock,
                                                  NULL);
        harness_expect_code(&r, 0, "logctl status");
        harness_expect_in(r.out, "waiting:      flood holds", "status names the waiting producer");
        harness_run_free(&r);
    }
    assert_int_equal(waitpid(flooder, &status, WNOHANG), 0); /* still waiting */

    /* Each merge --delete frees the flooder's sealed shards; it goes on by
     * itself until it has sent everything. */
    for (int round = 0; round < 200; round++) {
        merge_delete(h);
        status = flooder_status(flooder, 200);
        if (status >= 0)
            break;
    }
    assert_true(status >= 0);
    harness_assert_clean_exit(status);
    assert_true(harness_log_has(h, "producer flood is under its quota again"));
    {
        /* What the merges removed from done/ was seen and counted. */
        struct harness_run r = status_json(h);
        harness_expect_code(&r, 0, "logctl status --json");
        assert_non_null(strstr(r.out, "\"freed_bytes\":"));
        assert_null(strstr(r.out, "\"freed_bytes\":0,"));
        harness_run_free(&r);
    }
    assert_int_equal(harness_stop(h, SIGTERM, 20000), 0);

    text = all_records(h, &len);
    expect_once(text, "flood", flood_records);
    for (int i = 0; i < GOOD_PRODUCERS; i++) {
        snprintf(name, sizeof(name), "good-%d", i);
        expect_once(text, name, GOOD_RECORDS);
    }
    free(text);
}

static void test_quota_refuse(void **state)
{
    struct harness *h = *state;
    char msg[512] = "";
    int status;
    pid_t flooder;

    harness_write_config(h, "[limits]\nproducer_quota_bytes = 128K\nover_quota = refuse\nmax_frame_bytes = 16K\nmax_record_bytes = 4K\n"
                            "[shard]\nmax_shard_bytes = 32K\n");
    harness_start(h, NULL);
    flooder = start_flooder(h, "flood", 6000);
    status = flooder_status(flooder, 30000);
    assert_true(status >= 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), EDQUOT);
    assert_true(harness_log_has(h, "producer flood holds"));
    assert_true(harness_log_has(h, "at its quota of 131072; the frame is refused"));
    /* Another producer, under the same quota, is served. */
    assert_int_equal(send_good(h, "good", 500, msg, sizeof(msg)), 0);
    harness_assert_running(h);
    assert_int_equal(harness_stop(h, SIGTERM, 20000), 0);
}

static void test_reload_lowers_and_raises(void **state)
{
    struct harness *h = *state;
    struct waiting_check waiting = { h, "\"waiting\":true" };
    size_t len;
    char *text;
    int status;
    pid_t flooder;

    harness_write_config(h, "[shard]\nmax_shard_bytes = 32K\n");
    harness_start(h, NULL);
    assert_int_equal(send_good(h, "flood", 1000, NULL, 0), 0);
    /* Lowered below what flood holds: its next connection waits; nothing
     * it holds is deleted. */
    harness_write_config(h, "[limits]\nmax_frame_bytes = 16K\nmax_record_bytes = 4K\n[shard]\nmax_shard_bytes = 32K\n"
                            "[producer_quotas]\nflood = 64K\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    assert_true(harness_wait_log(h, "reloaded the settings", 10000));
    flooder = start_flooder(h, "flood", 500);
    assert_true(harness_wait_for(status_has, &waiting, 20000));
    assert_true(harness_count_files(h, "done", ".shard") > 0);
    /* Raised: it goes on without a merge. */
    harness_write_config(h, "[shard]\nmax_shard_bytes = 32K\n[producer_quotas]\nflood = 10M\n");
    assert_int_equal(kill(h->daemon, SIGHUP), 0);
    status = flooder_status(flooder, 30000);
    assert_true(status >= 0);
    harness_assert_clean_exit(status);
    assert_int_equal(harness_stop(h, SIGTERM, 20000), 0);
    text = all_records(h, &len);
    /* The same producer name, two streams: 1000 + 500 records, the first
     * 500 sequence numbers twice. */
    {
        uint64_t lines = 0;
        for (const char *p = text; (p = strstr(p, "flood ")); p++)
            lines++;
        assert_int_equal(lines, 1500);
    }
    free(text);
}

static void test_spool_budget_refuses(void **state)
{
    struct harness *h = *state;
    char msg[512] = "";
    int status, r;
    pid_t flooder;

    harness_write_config(h, "[limits]\nspool_budget_bytes = 512K\nmax_frame_bytes = 16K\nmax_record_bytes = 4K\n[shard]\nmax_shard_bytes = 32K\n");
    harness_start(h, NULL);
    flooder = start_flooder(h, "flood", 20000);
    status = flooder_status(flooder, 30000);
    assert_true(status >= 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), ENOSPC);
    assert_true(harness_log_has(h, "at spool_budget_bytes (524288); the frame is refused"));
    /* The budget is the spool's: every producer is refused now, with the
     * same reason. */
    r = send_good(h, "good", 10, msg, sizeof(msg));
    assert_int_equal(r, -ENOSPC);
    harness_expect_in(msg, "spool_budget_bytes", "the error names the budget");
    {
        struct waiting_check c = { h, "\"refused_budget\":" };
        struct harness_run s = status_json(h);
        assert_true(status_has(&c));
        harness_expect_in(s.out, "\"spool_budget_bytes\":524288", "status shows the budget");
        harness_run_free(&s);
    }
    /* A merge --delete does not lower the spool's total (the merged file
     * stays in the spool), but removing merged files does. */
    harness_assert_running(h);
    assert_int_equal(harness_stop(h, SIGTERM, 20000), 0);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
}

/* ---- a real small filesystem ---- */

static void test_min_free_on_tmpfs(void **state)
{
    struct harness *h = *state;
    char *mnt = harness_path(h->dir, "small");
    struct statvfs sv;
    char *acked_path = NULL, *acked_text, *text;
    uint64_t acked = 0, seen = 0;
    size_t len;
    int status;
    pid_t flooder;

    if (geteuid() != 0) {
        skip();
        return;
    }
    assert_int_equal(mkdir(mnt, 0755), 0);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=8m") < 0) {
        free(mnt);
        skip();
        return;
    }
    free(h->spool);
    h->spool = harness_path(mnt, "spool");
    harness_write_config(h, "[limits]\nspool_min_free_bytes = 3M\nmax_frame_bytes = 16K\nmax_record_bytes = 4K\n[shard]\nmax_shard_bytes = 64K\n");
    harness_start(h, NULL);
    acked_path = harness_path(h->dir, "flood.acked");
    flooder = start_flooder_counted(h, "flood", 200000, acked_path); /* 30 MiB: far more than fits */
    status = flooder_status(flooder, 60000);
    assert_true(status >= 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), ENOSPC);
    assert_true(harness_log_has(h, "at spool_min_free_bytes (3145728); the frame is refused"));
    /* Refused by policy: the filesystem still has room. */
    assert_int_equal(statvfs(mnt, &sv), 0);
    assert_true((uint64_t)sv.f_bavail * sv.f_frsize >= 2u << 20);
    assert_false(harness_log_has(h, "No space left on device"));
    /* Shutdown seals what is open, and every record in done/ reads. */
    assert_int_equal(harness_stop(h, SIGTERM, 20000), 0);
    assert_int_equal(harness_count_files(h, "active", ".tmp"), 0);
    {
        struct harness_run r = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
        harness_expect_code(&r, 0, "logctl verify --spool");
        harness_run_free(&r);
    }
    /* Every record acknowledged before the refusal is in the spool, once,
     * and nothing was stored beyond what was sent. */
    acked_text = harness_slurp(acked_path, &len);
    acked = strtoull(acked_text, NULL, 10);
    assert_true(acked > 0);
    {
        struct harness_run r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
        unsigned char *hits = calloc(200000, 1);

        harness_expect_code(&r, 0, "logctl cat --spool");
        text = r.out;
        for (const char *line = text; line && *line;) {
            const char *end = strchr(line, '\n');
            if (strncmp(line, "flood ", 6) == 0) {
                uint64_t seq = strtoull(line + 6, NULL, 10);
                assert_true(seq < 200000);
                assert_false(hits[seq]);
                hits[seq] = 1;
                seen++;
            }
            line = end ? end + 1 : NULL;
        }
        for (uint64_t i = 0; i < acked; i++)
            if (!hits[i])
                fail_msg("record %" PRIu64 " was acknowledged but is not in the spool", i);
        free(hits);
        harness_run_free(&r);
    }
    assert_true(seen >= acked);
    free(acked_text);
    free(acked_path);
    free(h->spool);
    h->spool = harness_path(h->dir, "spool");
    (void)umount2(mnt, MNT_DETACH);
    free(mnt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_quota_wait_beside_good_producers, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_quota_refuse, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_reload_lowers_and_raises, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_spool_budget_refuses, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_min_free_on_tmpfs, harness_setup, harness_teardown),
    };

    /* LOGSHARD_TEST_FILTER=test_quota_refuse runs one test (a pattern). */
    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
