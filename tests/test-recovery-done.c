/* Unit tests of the checks of done/ at start-up (daemon/recovery-done.c) on
 * real files in a temporary spool: what cannot be a sealed shard moves to
 * quarantine/, the stamp that saves checking again, and a FIFO in active/. */
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

/* ---- done/: what must be a sealed shard ---- */

/* Entries of done/ that cannot be the sealed shard their name says move to
 * quarantine/ unchanged, each with a line saying why; whole shards (sealed,
 * sealed without a trailer, version 1), a shard with a damaged record,
 * directories, symbolic links and other names stay where they are. */
static void test_done_invalid_quarantined(void **state)
{
    struct fixture *f = *state;
    static const char garbage[] = "not a shard\n";
    struct shard_bytes s, merged, sealed, bare, v1, damaged;
    unsigned char trailer[1024];
    size_t trailer_len = trailer_only(trailer, sizeof(trailer), 1024);
    struct recovery_stats st;
    const char *kept;
    size_t crc_at, second_at;
    char line[256];
    int qfd;

    write_file(f->done_fd, "empty.0000000000000001.shard", "", 0);
    write_file(f->done_fd, "newp.0000000000000002.shard", trailer, trailer_len);
    build_shard(&s, "short", 3, 1);
    write_file(f->done_fd, "short.0000000000000003.shard", s.buf, 20);
    write_file(f->done_fd, "junk.0000000000000004.shard", garbage, sizeof(garbage) - 1);
    build_shard(&s, "web", 6, 2);
    seal_bytes(&s, 2);
    write_file(f->done_fd, "web.0000000000000005.shard", s.buf, s.len);
    build_shard(&merged, "m", 7, 1);
    seal_bytes(&merged, 1);
    build_shard(&s, "m", 8, 1);
    second_at = merged.len;
    memcpy(merged.buf + merged.len, s.buf, s.len);
    merged.len += s.len;
    write_file(f->done_fd, "m.0000000000000007.shard", merged.buf, merged.len);
    assert_int_equal(mkfifoat(f->done_fd, "fifo.0000000000000009.shard", 0600), 0);

    build_shard(&sealed, "ok", 0x10, 3);
    seal_bytes(&sealed, 3);
    write_file(f->done_fd, "ok.0000000000000010.shard", sealed.buf, sealed.len);
    build_shard(&bare, "bare", 0x11, 2); /* sealed without a trailer (a full disk) */
    write_file(f->done_fd, "bare.0000000000000011.shard", bare.buf, bare.len);
    build_shard(&v1, "old", 0x12, 2);
    crc_at = v1.record_offset[0] - 4;
    wire_put_u16(v1.buf + 8, 1);
    wire_put_u32(v1.buf + crc_at, crc32c(v1.buf, crc_at));
    write_file(f->done_fd, "old.0000000000000012.shard", v1.buf, v1.len);
    build_shard(&damaged, "dmg", 0x13, 3);
    damaged.buf[damaged.record_offset[1] + 17] ^= 0x20;
    write_file(f->done_fd, "dmg.0000000000000013.shard", damaged.buf, damaged.len);
    assert_int_equal(mkdirat(f->done_fd, "dir.0000000000000014.shard", 0700), 0);
    assert_int_equal(symlinkat("ok.0000000000000010.shard", f->done_fd,
                               "link.0000000000000015.shard"),
                     0);
    write_file(f->done_fd, "README", garbage, sizeof(garbage) - 1);

    alarm(30); /* a FIFO opened for reading would block here forever */
    run_recovery(f, &st);
    alarm(0);

    assert_stats(&st, 0, 0, 0, 0, 0, 0, 0);
    assert_int_equal(st.done_checked, 10);
    assert_int_equal(st.done_quarantined, 7);
    assert_int_equal(st.done_damaged, 1);
    assert_int_equal(st.done_failed, 0);
    assert_int_equal(st.done_ignored, 2);
    kept = "README\nbare.0000000000000011.shard\ndir.0000000000000014.shard\n"
           "dmg.0000000000000013.shard\nlink.0000000000000015.shard\n"
           "ok.0000000000000010.shard\nold.0000000000000012.shard\n";
    assert_dir_lists(f->done_fd, kept);
    assert_file_equals(f->done_fd, "ok.0000000000000010.shard", sealed.buf, sealed.len);
    assert_file_equals(f->done_fd, "bare.0000000000000011.shard", bare.buf, bare.len);
    assert_file_equals(f->done_fd, "old.0000000000000012.shard", v1.buf, v1.len);
    assert_file_equals(f->done_fd, "dmg.0000000000000013.shard", damaged.buf, damaged.len);

    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000001.shard\nfifo.0000000000000009.shard\n"
                          "junk.0000000000000004.shard\nm.0000000000000007.shard\n"
                          "newp.0000000000000002.shard\nshort.0000000000000003.shard\n"
                          "web.0000000000000005.shard\n");
    assert_file_equals(qfd, "newp.0000000000000002.shard", trailer, trailer_len);
    assert_file_equals(qfd, "m.0000000000000007.shard", merged.buf, merged.len);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/empty.0000000000000001.shard as "
                    "quarantine/empty.0000000000000001.shard: empty file (no shard header)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/newp.0000000000000002.shard as "
                    "quarantine/newp.0000000000000002.shard: a seal trailer without a shard "
                    "header (what older versions sealed when a full disk kept the header from "
                    "being written)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/short.0000000000000003.shard as "
                    "quarantine/short.0000000000000003.shard: file ends inside a shard header");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/junk.0000000000000004.shard as "
                    "quarantine/junk.0000000000000004.shard: no shard header (bad magic)");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/web.0000000000000005.shard as "
                    "quarantine/web.0000000000000005.shard: its header is for producer web, "
                    "shard 0000000000000006, not the one its name says");
    snprintf(line, sizeof(line),
             "quarantined done/m.0000000000000007.shard as quarantine/m.0000000000000007.shard: "
             "a second shard header at offset %zu (a merged file, not a shard)",
             second_at);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/fifo.0000000000000009.shard as "
                    "quarantine/fifo.0000000000000009.shard: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    snprintf(line, sizeof(line),
             "done/dmg.0000000000000013.shard: record CRC mismatch at offset %zu; left in "
             "done/: its header is valid, so only records are damaged, which logctl merge "
             "and verify report",
             damaged.record_offset[1]);
    assert_reported(f, RECOVERY_LOG_WARNING, line);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left done/dir.0000000000000014.shard alone: a directory, not a shard");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "left done/link.0000000000000015.shard alone: a symbolic link, not a shard");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "recovery: done/: 10 shards checked, 7 entries quarantined (no valid shard "
                    "of their name), 1 damaged shards left for merge, 0 entries could not be "
                    "checked");
    assert_int_equal(f->nlines, 11);

    /* The check is done once: the stamp says so, with its version and the
     * inode of done/. */
    {
        struct stat dst;
        char text[256];
        int len;

        assert_int_equal(fstat(f->done_fd, &dst), 0);
        len = snprintf(text, sizeof(text),
                       "logshardd checked every shard in done/ (inode %ju) at start-up "
                       "(check 1).\nDelete this file to have the next start check them all "
                       "again.\n",
                       (uintmax_t)dst.st_ino);
        assert_file_equals(f->spool_fd, STAMP, text, (size_t)len);
    }
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 0);
    assert_int_equal(st.done_ignored, 2); /* the directory and the link, reported again */
    assert_dir_lists(f->done_fd, kept);
    close(qfd);
}

/* With the stamp of a full check of done/, a start looks only at entries
 * that are not regular files: a FIFO planted since is still moved out of
 * the way, a regular file is not read (that is merge's to judge) until
 * the stamp is deleted, and then the next start checks everything. */
static void test_done_stamp(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    int qfd;

    build_shard(&s, "ok", 1, 2);
    seal_bytes(&s, 2);
    write_file(f->done_fd, "ok.0000000000000001.shard", s.buf, s.len);
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 1);
    assert_int_equal(f->nprogress, 2);
    assert_true(exists(f->spool_fd, STAMP));

    write_file(f->done_fd, "empty.0000000000000002.shard", "", 0);
    assert_int_equal(mkfifoat(f->done_fd, "fifo.0000000000000003.shard", 0600), 0);
    alarm(30);
    run_recovery(f, &st);
    alarm(0);
    assert_int_equal(st.done_checked, 0);
    assert_int_equal(st.done_quarantined, 1);
    assert_dir_lists(f->done_fd, "empty.0000000000000002.shard\nok.0000000000000001.shard\n");
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined done/fifo.0000000000000003.shard as "
                    "quarantine/fifo.0000000000000003.shard: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    assert_int_equal(f->nprogress, 2); /* the one odd entry */

    /* A stamp of another version of the check counts as none. */
    assert_int_equal(unlinkat(f->spool_fd, STAMP, 0), 0);
    write_file(f->spool_fd, STAMP, "logshardd checked (check 0)\n", 28);
    run_recovery(f, &st);
    assert_int_equal(st.done_checked, 2);
    assert_int_equal(st.done_quarantined, 1);
    assert_dir_lists(f->done_fd, "ok.0000000000000001.shard\n");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_dir_lists(qfd, "empty.0000000000000002.shard\nfifo.0000000000000003.shard\n");

    /* The stamp is for this done/: another directory in its place (put
     * back from a backup, say) is checked in full. */
    {
        int other = open_dir(f->spool_fd, "done2");

        write_file(other, "empty.0000000000000004.shard", "", 0);
        clear_log(f);
        assert_int_equal(recovery_run(f->spool_fd, f->active_fd, other, &f->ops, &st), 0);
        assert_int_equal(st.done_checked, 1);
        assert_int_equal(st.done_quarantined, 1);
        assert_dir_lists(other, "");
        close(other);
    }
    close(qfd);
}

/* A FIFO named like a temp shard in active/ is moved to quarantine/ without
 * being opened; the real temp shard beside it is recovered. */
static void test_active_fifo_quarantined(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;
    struct stat qst;
    int qfd;

    assert_int_equal(mkfifoat(f->active_fd, "pipe.0000000000000001.tmp", 0600), 0);
    build_shard(&s, "web", 2, 2);
    write_file(f->active_fd, "web.0000000000000002.tmp", s.buf, s.len);
    alarm(30); /* a FIFO opened for reading would block here forever */
    run_recovery(f, &st);
    alarm(0);

    assert_stats(&st, 1, 1, 1, 0, 0, 2, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0000000000000002.shard\n");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_int_equal(fstatat(qfd, "pipe.0000000000000001.tmp", &qst, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(qst.st_mode));
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/pipe.0000000000000001.tmp as "
                    "quarantine/pipe.0000000000000001.tmp: a FIFO, not a shard (the daemon "
                    "writes only regular files)");
    close(qfd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_done_invalid_quarantined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_active_fifo_quarantined, setup, teardown),
        cmocka_unit_test_setup_teardown(test_done_stamp, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
