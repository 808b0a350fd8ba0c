/* Unit tests of start-up recovery (daemon/recovery.c) on real files in a
 * temporary spool: valid prefixes are sealed into done/ with exactly the
 * torn or corrupt tail cut, the traces of an interrupted seal are cleaned
 * up without losing anything, other files are left alone, and a second
 * run changes nothing. Quarantine is in test-recovery-quarantine.c, the
 * checks of done/ in test-recovery-done.c, and the real daemon's recovery
 * in test-recovery-daemon.c. */
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

/* ---- sealing the valid prefix ---- */

/* A whole shard is sealed byte for byte; the stats, the report lines and
 * the progress calls are exactly these. */
static void test_clean_shard_sealed_intact(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;

    build_shard(&s, "web", UINT64_C(0x0123456789abcdef), 3);
    write_file(f->active_fd, "web.0123456789abcdef.tmp", s.buf, s.len);
    run_recovery(f, &st);

    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0123456789abcdef.shard\n");
    assert_sealed_equals(f->done_fd, "web.0123456789abcdef.shard", s.buf, s.len);
    assert_false(exists(f->spool_fd, "quarantine"));
    assert_stats(&st, 1, 1, 0, 0, 0, 3, 0);
    assert_int_equal(f->nlines, 2);
    assert_int_equal(f->levels[0], RECOVERY_LOG_INFO);
    assert_string_equal(f->lines[0],
                        "recovered active/web.0123456789abcdef.tmp into done/: 3 records, "
                        "nothing cut");
    assert_int_equal(f->levels[1], RECOVERY_LOG_INFO);
    assert_string_equal(f->lines[1],
                        "recovery: 1 temp shards in active/: 1 sealed into done/ (3 records "
                        "kept, 0 bytes cut), 0 quarantined, 0 duplicates and 0 empty files "
                        "removed, 0 failed");
    assert_int_equal(f->nprogress, 2);
    assert_int_equal(f->progress_done[0], 0);
    assert_int_equal(f->progress_total[0], 1);
    assert_int_equal(f->progress_done[1], 1);
    assert_int_equal(f->progress_total[1], 1);
}

/* A file cut at every byte inside its last record: the two records before
 * it are kept, exactly the partial bytes are cut, and the sealed file reads
 * cleanly. */
static void test_torn_tail_every_offset(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    size_t last;

    build_shard(&s, "web", 0, 3);
    last = s.record_offset[2];
    for (size_t k = 1; k < s.len - last; k++) {
        uint64_t id = UINT64_C(0x1000) + k;
        struct recovery_stats st;
        char tmp[64], done[64], line[256];

        build_shard(&s, "web", id, 3);
        snprintf(tmp, sizeof(tmp), "web.%016" PRIx64 ".tmp", id);
        snprintf(done, sizeof(done), "web.%016" PRIx64 ".shard", id);
        write_file(f->active_fd, tmp, s.buf, last + k);
        run_recovery(f, &st);

        assert_false(exists(f->active_fd, tmp));
        assert_sealed_equals(f->done_fd, done, s.buf, last);
        assert_reads_cleanly(f, done, "web", id, 2);
        assert_stats(&st, 1, 1, 0, 0, 0, 2, k);
        snprintf(line, sizeof(line),
                 "recovered active/%s into done/: 2 records kept, %zu bytes cut (%s at offset "
                 "%zu)",
                 tmp, k,
                 k < SHARD_RECORD_HEADER ? "file ends inside a record header"
                                         : "file ends inside a record",
                 last);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
}

/* A flipped byte in the middle record ends the valid prefix there: the
 * first record is kept, the middle and the last are cut. */
static void test_corrupt_middle_record(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t mid;
    char line[256];

    build_shard(&s, "api", 7, 3);
    mid = s.record_offset[1];
    s.buf[mid + SHARD_RECORD_HEADER + 3] ^= 0x20;
    write_file(f->active_fd, "api.0000000000000007.tmp", s.buf, s.len);
    run_recovery(f, &st);

    assert_false(exists(f->active_fd, "api.0000000000000007.tmp"));
    assert_sealed_equals(f->done_fd, "api.0000000000000007.shard", s.buf, mid);
    assert_reads_cleanly(f, "api.0000000000000007.shard", "api", 7, 1);
    assert_stats(&st, 1, 1, 0, 0, 0, 1, s.len - mid);
    snprintf(line, sizeof(line),
             "recovered active/api.0000000000000007.tmp into done/: 1 records kept, %zu bytes "
             "cut (record CRC mismatch at offset %zu)",
             s.len - mid, mid);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
}

/* A second shard header belongs in a merged file, never in one shard: the
 * shard ends where it starts. */
static void test_second_header_cut(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s, other;
    struct recovery_stats st;
    size_t first;

    build_shard(&s, "web", 8, 2);
    build_shard(&other, "web", 9, 2);
    first = s.len;
    memcpy(s.buf + s.len, other.buf, other.len);
    s.len += other.len;
    write_file(f->active_fd, "web.0000000000000008.tmp", s.buf, s.len);
    run_recovery(f, &st);
    assert_sealed_equals(f->done_fd, "web.0000000000000008.shard", s.buf, first);
    assert_reads_cleanly(f, "web.0000000000000008.shard", "web", 8, 2);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, other.len);
}

/* Sixteen zero bytes after the last record (a crash after the size was
 * updated but before the data reached the disk) are cut as well. */
static void test_zero_tail(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t whole;

    build_shard(&s, "zeros", 9, 2);
    whole = s.len;
    memset(s.buf + s.len, 0, 4000);
    write_file(f->active_fd, "zeros.0000000000000009.tmp", s.buf, whole + 4000);
    run_recovery(f, &st);
    assert_sealed_equals(f->done_fd, "zeros.0000000000000009.shard", s.buf, whole);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 4000);
    /* The daemon's own space written ahead: said, not warned about. */
    {
        char line[256];

        snprintf(line, sizeof(line),
                 "recovered active/zeros.0000000000000009.tmp into done/: 2 records kept, 4000 "
                 "bytes cut (unwritten space (zeros) after the last record at offset %zu)",
                 whole);
        assert_reported(f, RECOVERY_LOG_INFO, line);
    }
}

/* A header alone (a connection that had sent nothing: its file is made
 * when it is welcomed) holds no record: it is removed, not sealed, so no
 * empty shard reaches done/. So is one whose header is followed by zeros;
 * other bytes after it are warned about. */
static void test_header_only(void **state)
{
    struct fixture *f = *state;
    static const char warned[] = "removed active/quiet.app.000000000000002c.tmp: a header and "
                                 "no record, then bytes that are none (";
    struct shard_bytes s;
    struct recovery_stats st;
    unsigned char file[sizeof(s.buf) + 4096];
    int seen = 0;

    build_shard(&s, "quiet.app", 42, 0);
    write_file(f->active_fd, "quiet.app.000000000000002a.tmp", s.buf, s.len);
    build_shard(&s, "quiet.app", 43, 0);
    memcpy(file, s.buf, s.len);
    memset(file + s.len, 0, 4096);
    write_file(f->active_fd, "quiet.app.000000000000002b.tmp", file, s.len + 4096);
    build_shard(&s, "quiet.app", 44, 0);
    memcpy(file, s.buf, s.len);
    memcpy(file + s.len, "not a record at all, just text..", 32);
    write_file(f->active_fd, "quiet.app.000000000000002c.tmp", file, s.len + 32);
    run_recovery(f, &st);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "");
    assert_int_equal(faccessat(f->spool_fd, "quarantine", F_OK, 0), -1);
    assert_int_equal(st.empty_removed, 3);
    assert_stats(&st, 3, 0, 0, 0, 0, 0, 0);
    assert_reported(f, RECOVERY_LOG_INFO,
                    "removed active/quiet.app.000000000000002a.tmp: a header and no record (its "
                    "connection had sent none)");
    assert_reported(f, RECOVERY_LOG_INFO,
                    "removed active/quiet.app.000000000000002b.tmp: a header and no record (its "
                    "connection had sent none)");
    for (int i = 0; i < f->nlines; i++)
        if (strncmp(f->lines[i], warned, strlen(warned)) == 0) {
            assert_int_equal(f->levels[i], RECOVERY_LOG_WARNING);
            seen++;
        }
    assert_int_equal(seen, 1);
}

/* The daemon wrote the trailer and was stopped before the rename: the file
 * is sealed as it is, with no second trailer. A trailer torn anywhere is cut
 * and written again. */
static void test_trailer_written_before_crash(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    struct shard_trailer t = { .records = 2, .newest_ns = 1001 };
    unsigned char *full;
    size_t body, total;

    build_shard(&s, "web", 0x51, 2);
    body = s.len;
    t.shard_len = body;
    t.trailer_len = (uint32_t)shard_trailer_size(body, 512);
    total = body + t.trailer_len;
    full = malloc(total);
    assert_non_null(full);
    memcpy(full, s.buf, body);
    shard_encode_trailer(full + body, &t);

    write_file(f->active_fd, "web.0000000000000051.tmp", full, total);
    run_recovery(f, &st);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 0);
    assert_file_equals(f->done_fd, "web.0000000000000051.shard", full, total);

    static const size_t cuts[] = { 1, 3, 4, 8, 39, 40, 100 };
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        char tmp[64], done[64];
        uint64_t id = 0x60 + i;

        build_shard(&s, "web", id, 2);
        memcpy(full, s.buf, body);
        shard_encode_trailer(full + body, &t);
        snprintf(tmp, sizeof(tmp), "web.%016" PRIx64 ".tmp", id);
        snprintf(done, sizeof(done), "web.%016" PRIx64 ".shard", id);
        write_file(f->active_fd, tmp, full, body + cuts[i]);
        run_recovery(f, &st);
        assert_stats(&st, 1, 1, 0, 0, 0, 2, cuts[i]);
        assert_sealed_equals(f->done_fd, done, s.buf, body);
        assert_reads_cleanly(f, done, "web", id, 2);
    }
    free(full);
}

/* A version 1 shard (written before seal trailers existed) is recovered in
 * its own version: nothing is added. */
static void test_version1_gets_no_trailer(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    size_t crc_at;

    build_shard(&s, "old", 0x71, 2);
    crc_at = s.record_offset[0] - 4;
    wire_put_u16(s.buf + 8, 1);
    wire_put_u32(s.buf + crc_at, crc32c(s.buf, crc_at));
    write_file(f->active_fd, "old.0000000000000071.tmp", s.buf, s.len);
    run_recovery(f, &st);
    assert_stats(&st, 1, 1, 0, 0, 0, 2, 0);
    assert_file_equals(f->done_fd, "old.0000000000000071.shard", s.buf, s.len);
    assert_reads_cleanly(f, "old.0000000000000071.shard", "old", 0x71, 2);
}

/* ---- other files ---- */

/* Anything not named <producer>.<16 lowercase hex>.tmp, or not a regular
 * file, is left exactly as it is and reported once. Each holds a valid
 * shard, so touching one would show. */
static void test_foreign_names_left_alone(void **state)
{
    struct fixture *f = *state;
    static const char *const names[] = {
        ".0123456789abcdef.tmp",        ".hidden.0123456789abcdef.tmp",
        "bad name.0123456789abcdef.tmp", "notes.txt",
        "web.0123.tmp",                 "web.0123456789ABCDEF.tmp",
        "web.0123456789abcdef.shard",   "web.0123456789abcdef.tmp.bak",
        "web.0123456789abcdefa.tmp",    "web0123456789abcdef.tmp",
    };
    const size_t n = sizeof(names) / sizeof(names[0]);
    struct shard_bytes s;
    struct recovery_stats st;
    char *before;

    build_shard(&s, "web", UINT64_C(0x0123456789abcdef), 2);
    for (size_t i = 0; i < n; i++)
        write_file(f->active_fd, names[i], s.buf, s.len);
    assert_int_equal(mkdirat(f->active_fd, "dir.0123456789abcdef.tmp", 0700), 0);
    write_file(f->spool_fd, "target", s.buf, s.len);
    assert_int_equal(symlinkat("../target", f->active_fd, "link.0123456789abcdef.tmp"), 0);
    before = list_dir(f->active_fd);
    run_recovery(f, &st);

    assert_stats(&st, 0, 0, 0, 0, n + 2, 0, 0);
    assert_dir_lists(f->active_fd, before);
    assert_dir_lists(f->done_fd, "");
    assert_false(exists(f->spool_fd, "quarantine"));
    for (size_t i = 0; i < n; i++) {
        char line[256];

        assert_file_equals(f->active_fd, names[i], s.buf, s.len);
        snprintf(line, sizeof(line),
                 "left active/%s alone: not a shard temp file name (<producer>.<16 hex "
                 "digits>.tmp)",
                 names[i]);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
    assert_file_equals(f->spool_fd, "target", s.buf, s.len);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left active/dir.0123456789abcdef.tmp alone: not a regular file");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left active/link.0123456789abcdef.tmp alone: not a regular file");
    assert_int_equal(f->nlines, (int)n + 2); /* no summary: nothing was recovered */
    free(before);
}

/* After one recovery, a second one finds nothing to do and changes nothing
 * (it still mentions the foreign file). */
static void test_second_run_is_noop(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes a, b, c;
    struct recovery_stats st;
    char *active, *done, *quarantined;
    int qfd;

    build_shard(&a, "a", 1, 3);
    build_shard(&b, "b", 2, 3);
    build_shard(&c, "c", 4, 1);
    write_file(f->active_fd, "a.0000000000000001.tmp", a.buf, a.len);
    write_file(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len - 5);
    write_file(f->active_fd, "c.0000000000000003.tmp", "garbage", 7);
    write_file(f->done_fd, "c.0000000000000004.shard", c.buf, c.len);
    assert_int_equal(linkat(f->done_fd, "c.0000000000000004.shard", f->active_fd,
                            "c.0000000000000004.tmp", 0),
                     0);
    write_file(f->active_fd, "README", "x", 1);
    run_recovery(f, &st);
    assert_stats(&st, 4, 2, 1, 1, 1, 5, b.len - 5 - b.record_offset[2]);

    active = list_dir(f->active_fd);
    done = list_dir(f->done_fd);
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    quarantined = list_dir(qfd);
    assert_string_equal(active, "README\n");
    assert_string_equal(done, "a.0000000000000001.shard\nb.0000000000000002.shard\n"
                              "c.0000000000000004.shard\n");
    assert_string_equal(quarantined, "c.0000000000000003.tmp\n");

    run_recovery(f, &st);
    assert_stats(&st, 0, 0, 0, 0, 1, 0, 0);
    /* The first run checked done/ and left its stamp: no shard is read again. */
    assert_true(exists(f->spool_fd, STAMP));
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 0);
    assert_int_equal(f->nlines, 1);
    assert_int_equal(f->nprogress, 0);
    assert_dir_lists(f->active_fd, active);
    assert_dir_lists(f->done_fd, done);
    assert_dir_lists(qfd, quarantined);
    assert_sealed_equals(f->done_fd, "a.0000000000000001.shard", a.buf, a.len);
    assert_sealed_equals(f->done_fd, "b.0000000000000002.shard", b.buf, b.record_offset[2]);
    assert_file_equals(qfd, "c.0000000000000003.tmp", "garbage", 7);
    close(qfd);
    free(active);
    free(done);
    free(quarantined);
}

/* What a recovery run in a child process saw. */
struct child_result {
    int r;
    struct recovery_stats st;
    int nlines;
    int levels[4];
    char lines[4][256];
};

/* A file recovery cannot open is reported and left in active/ for the next
 * start; the others are still recovered. Permissions do not stop root, so
 * when the tests run as root, recovery runs in a child that has given up
 * root for an unprivileged user owning the spool. */
static void test_unopenable_file_left(void **state)
{
    struct fixture *f = *state;
    const uid_t nobody = 65534;
    struct shard_bytes a, b;
    struct child_result res;
    int fds[2], status;
    pid_t pid;

    build_shard(&a, "a", 1, 1);
    build_shard(&b, "b", 2, 2);
    write_file(f->active_fd, "a.0000000000000001.tmp", a.buf, a.len);
    write_file(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len);
    assert_int_equal(fchmodat(f->active_fd, "b.0000000000000002.tmp", 0400, 0), 0);
    if (geteuid() == 0) {
        assert_int_equal(fchown(f->spool_fd, nobody, nobody), 0);
        assert_int_equal(fchown(f->active_fd, nobody, nobody), 0);
        assert_int_equal(fchown(f->done_fd, nobody, nobody), 0);
        assert_int_equal(fchownat(f->active_fd, "a.0000000000000001.tmp", nobody, nobody, 0), 0);
        assert_int_equal(fchownat(f->active_fd, "b.0000000000000002.tmp", nobody, nobody, 0), 0);
    }
    assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
    clear_log(f);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        memset(&res, 0, sizeof(res));
        if (geteuid() == 0 && (setgid(nobody) < 0 || setuid(nobody) < 0))
            _exit(3);
        res.r = recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, &res.st);
        res.nlines = f->nlines;
        for (int i = 0; i < f->nlines && i < 4; i++) {
            res.levels[i] = f->levels[i];
            snprintf(res.lines[i], sizeof(res.lines[i]), "%s", f->lines[i]);
        }
        _exit(write_all(fds[1], &res, sizeof(res)) == 0 ? 0 : 4);
    }
    close(fds[1]);
    assert_int_equal(read_full(fds[0], &res, sizeof(res)), (ssize_t)sizeof(res));
    close(fds[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);

    assert_int_equal(res.r, 0);
    assert_int_equal(res.st.files_scanned, 2);
    assert_int_equal(res.st.files_sealed, 1);
    assert_int_equal(res.st.files_failed, 1);
    assert_int_equal(res.st.records_kept, 1);
    assert_int_equal(res.nlines, 3);
    assert_int_equal(res.levels[0], RECOVERY_LOG_INFO);
    assert_string_equal(res.lines[0], "recovered active/a.0000000000000001.tmp into done/: 1 "
                                      "records, nothing cut");
    assert_int_equal(res.levels[1], RECOVERY_LOG_ERROR);
    assert_string_equal(res.lines[1], "cannot recover active/b.0000000000000002.tmp: open: "
                                      "Permission denied; it stays in active/ for the next "
                                      "start");
    assert_int_equal(res.levels[2], RECOVERY_LOG_WARNING);
    assert_string_equal(res.lines[2],
                        "recovery: 2 temp shards in active/: 1 sealed into done/ (1 records "
                        "kept, 0 bytes cut), 0 quarantined, 0 duplicates and 0 empty files "
                        "removed, 1 failed");
    assert_sealed_equals(f->done_fd, "a.0000000000000001.shard", a.buf, a.len);
    assert_file_equals(f->active_fd, "b.0000000000000002.tmp", b.buf, b.len);
    assert_dir_lists(f->active_fd, "b.0000000000000002.tmp\n");
}

/* Without ops, recovery works silently, and ret_stats may be NULL. */
static void test_no_ops(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;

    build_shard(&s, "web", 1, 1);
    write_file(f->active_fd, "web.0000000000000001.tmp", s.buf, s.len);
    write_file(f->active_fd, "web.0000000000000002.tmp", "junk", 4);
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, NULL, NULL), 0);
    assert_dir_lists(f->active_fd, "");
    assert_sealed_equals(f->done_fd, "web.0000000000000001.shard", s.buf, s.len);
}
int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clean_shard_sealed_intact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_every_offset, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt_middle_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_header_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_tail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trailer_written_before_crash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_version1_gets_no_trailer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_header_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_names_left_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_run_is_noop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unopenable_file_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_ops, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
