/* Start-up recovery in the real daemon: logshardd started on a spool with
 * a torn temp shard, and on one with what older versions left behind,
 * recovers before READY=1, and the real logctl reads the result back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "fileutil.h"
#include "harness.h"
#include "recovery.h"
#include "shard_format.h"

#include "recovery-fixture.h"

/* ---- the real daemon ---- */

static bool contains(const char *text, const char *needle)
{
    return strstr(text, needle) != NULL;
}

/* logshardd started on a spool with a torn temp shard seals its valid
 * prefix before READY=1, says so in its log, and logctl cat prints the
 * records that were kept. */
static void test_daemon_recovers_at_start(void **state)
{
    struct harness *h = *state;
    struct shard_bytes s;
    char *active, *log, *done_file, *out_path, *text, *expect_line;
    int fd, status;
    size_t len;

    assert_int_equal(mkdir(h->spool, 0750), 0);
    active = harness_path(h->spool, "active");
    assert_int_equal(mkdir(active, 0750), 0);
    fd = open(active, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    free(active);
    build_shard(&s, "e2e", UINT64_C(0x00000000deadbeef), 4);
    write_file(fd, "e2e.00000000deadbeef.tmp", s.buf, s.record_offset[3] + 7);
    close(fd);

    harness_start(h, NULL);
    status = harness_stop(h, SIGTERM, 30000);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_int_equal(harness_count_files(h, "active", ""), 0);
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    log = harness_slurp(h->log, &len);
    assert_true(asprintf(&expect_line,
                         "recovered active/e2e.00000000deadbeef.tmp into done/: 3 records kept, "
                         "7 bytes cut (file ends inside a record header at offset %zu)",
                         s.record_offset[3]) > 0);
    if (!contains(log, expect_line))
        fail_msg("daemon log lacks \"%s\":\n%s", expect_line, log);
    free(expect_line);
    free(log);

    done_file = harness_path(h->spool, "done/e2e.00000000deadbeef.shard");
    out_path = harness_path(h->dir, "cat.out");
    {
        const char *argv[] = { harness_logctl(), "cat", done_file, NULL };

        status = harness_run(argv, out_path, NULL, 30000);
    }
    free(done_file);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    text = harness_slurp(out_path, &len);
    free(out_path);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
}

/* What older versions left in done/ on a full disk (an empty file, a seal
 * trailer without a header), a FIFO in done/ and one in active/: the daemon
 * starts all the same (READY=1), moves each to quarantine/ with a line
 * naming it and why, and logctl merge and cat --spool then work on the
 * valid shard beside them. */
static void test_daemon_quarantines_leftovers(void **state)
{
    struct harness *h = *state;
    unsigned char trailer[4096];
    size_t trailer_len;
    struct shard_bytes s;
    char *log, *text, *out_path;
    int spool_fd, active_fd, done_fd, qfd, status;
    size_t len;
    static const char *const lines[] = {
        "quarantined done/empty.0000000000000001.shard as quarantine/empty.0000000000000001.shard: "
        "empty file (no shard header)",
        "quarantined done/newp.0000000000000002.shard as quarantine/newp.0000000000000002.shard: "
        "a seal trailer without a shard header",
        "quarantined done/pipe.0000000000000003.shard as quarantine/pipe.0000000000000003.shard: "
        "a FIFO, not a shard",
        "quarantined active/pipe.0000000000000004.tmp as quarantine/pipe.0000000000000004.tmp: "
        "a FIFO, not a shard",
    };

    assert_int_equal(mkdir(h->spool, 0750), 0);
    spool_fd = open(h->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(spool_fd >= 0);
    active_fd = open_dir(spool_fd, "active");
    done_fd = open_dir(spool_fd, "done");
    write_file(done_fd, "empty.0000000000000001.shard", "", 0);
    trailer_len = trailer_only(trailer, sizeof(trailer), 4096);
    write_file(done_fd, "newp.0000000000000002.shard", trailer, trailer_len);
    assert_int_equal(mkfifoat(done_fd, "pipe.0000000000000003.shard", 0600), 0);
    assert_int_equal(mkfifoat(active_fd, "pipe.0000000000000004.tmp", 0600), 0);
    build_shard(&s, "good", 5, 3);
    seal_bytes(&s, 3);
    write_file(done_fd, "good.0000000000000005.shard", s.buf, s.len);

    harness_start(h, NULL); /* fails the test unless READY=1 comes */
    log = harness_slurp(h->log, &len);
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        if (!contains(log, lines[i]))
            fail_msg("daemon log lacks \"%s\":\n%s", lines[i], log);
    free(log);
    assert_dir_lists(done_fd, "good.0000000000000005.shard\n");
    assert_dir_lists(active_fd, "");
    qfd = openat(spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000001.shard\nnewp.0000000000000002.shard\n"
                          "pipe.0000000000000003.shard\npipe.0000000000000004.tmp\n");
    close(qfd);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    out_path = harness_path(h->dir, "cat-spool.out");
    {
        const char *argv[] = { harness_logctl(), "cat", "--spool", h->spool, NULL };

        status = harness_run(argv, out_path, NULL, 30000);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    text = harness_slurp(out_path, &len);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
    free(out_path);
    text = harness_merge_and_cat(h, "leftovers.lsm", &len);
    assert_string_equal(text, "record 0\nrecord 1\nrecord 2\n");
    free(text);
    close(active_fd);
    close(done_fd);
    close(spool_fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_daemon_recovers_at_start, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_daemon_quarantines_leftovers, harness_setup,
                                        harness_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
