/* Unit tests of start-up recovery (daemon/recovery.c) on real files in a
 * temporary spool: files that cannot be the shard their name says go to
 * quarantine/ unchanged, an interrupted quarantine is finished, and names
 * already taken in done/ are resolved without losing a sealed shard. */
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

/* ---- quarantine ---- */

struct bad_file {
    const char *name;
    unsigned char buf[512];
    size_t len;
    const char *why;
};

/* An empty temp file (the daemon stopped between creating a shard and
 * writing its header) held no record: it is removed, not quarantined. */
static void test_empty_file_removed(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;

    write_file(f->active_fd, "empty.0000000000000001.tmp", "", 0);
    run_recovery(f, &st);
    assert_int_equal(st.empty_removed, 1);
    assert_int_equal(st.files_quarantined, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "");
    assert_int_equal(faccessat(f->spool_fd, "quarantine", F_OK, 0), -1);
}

/* Files that are no shard of their name move to quarantine/ unchanged;
 * nothing is sealed or deleted. */
static void test_quarantine_bad_files(void **state)
{
    struct fixture *f = *state;
    static const char garbage[] = "this is not a shard at all, just some text\n";
    struct bad_file bad[7];
    struct shard_bytes s;
    struct recovery_stats st;
    int qfd;

    memset(bad, 0, sizeof(bad));
    bad[0].name = "onebyte.0000000000000001.tmp";
    bad[0].buf[0] = 'L'; /* the first byte of the magic, and nothing else */
    bad[0].len = 1;
    bad[0].why = "file ends inside a shard header";

    bad[1].name = "short.0000000000000002.tmp";
    build_shard(&s, "short", 2, 1);
    memcpy(bad[1].buf, s.buf, 10);
    bad[1].len = 10;
    bad[1].why = "file ends inside a shard header";

    bad[2].name = "garbage.0000000000000003.tmp";
    memcpy(bad[2].buf, garbage, sizeof(garbage) - 1);
    bad[2].len = sizeof(garbage) - 1;
    bad[2].why = "no shard header (bad magic)";

    bad[3].name = "crc.0000000000000004.tmp";
    build_shard(&s, "crc", 4, 2);
    s.buf[20] ^= 0x01; /* the pid: only the header CRC can tell */
    memcpy(bad[3].buf, s.buf, s.len);
    bad[3].len = s.len;
    bad[3].why = "shard header CRC mismatch";

    bad[4].name = "other.0000000000000005.tmp";
    build_shard(&s, "web", 5, 2);
    memcpy(bad[4].buf, s.buf, s.len);
    bad[4].len = s.len;
    bad[4].why = "its header is for producer web, shard 0000000000000005, not the one its "
                 "name says";

    bad[5].name = "web.0000000000000007.tmp";
    build_shard(&s, "web", 6, 2);
    memcpy(bad[5].buf, s.buf, s.len);
    bad[5].len = s.len;
    bad[5].why = "its header is for producer web, shard 0000000000000006, not the one its "
                 "name says";

    bad[6].name = "web.000000000000000a.tmp";
    build_shard(&s, "web2", 10, 1); /* the file name's producer is a prefix of it */
    memcpy(bad[6].buf, s.buf, s.len);
    bad[6].len = s.len;
    bad[6].why = "its header is for producer web2, shard 000000000000000a, not the one its "
                 "name says";

    for (size_t i = 0; i < 7; i++)
        write_file(f->active_fd, bad[i].name, bad[i].buf, bad[i].len);
    run_recovery(f, &st);

    assert_stats(&st, 7, 0, 7, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "");
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    for (size_t i = 0; i < 7; i++) {
        char line[257];

        assert_file_equals(qfd, bad[i].name, bad[i].buf, bad[i].len);
        snprintf(line, sizeof(line), "quarantined active/%s as quarantine/%s: %s", bad[i].name,
                 bad[i].name, bad[i].why);
        assert_reported(f, RECOVERY_LOG_WARNING, line);
    }
    close(qfd);
}

/* A name already taken in quarantine/ by another file gets a suffix; the
 * file there is not overwritten. */
static void test_quarantine_name_clash(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;
    int qfd = open_dir(f->spool_fd, "quarantine");

    write_file(qfd, "junk.0000000000000001.tmp", "older", 5);
    write_file(qfd, "junk.0000000000000001.tmp.1", "old", 3);
    write_file(f->active_fd, "junk.0000000000000001.tmp", "newer junk", 10);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(qfd, "junk.0000000000000001.tmp\njunk.0000000000000001.tmp.1\n"
                          "junk.0000000000000001.tmp.2\n");
    assert_file_equals(qfd, "junk.0000000000000001.tmp", "older", 5);
    assert_file_equals(qfd, "junk.0000000000000001.tmp.1", "old", 3);
    assert_file_equals(qfd, "junk.0000000000000001.tmp.2", "newer junk", 10);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/junk.0000000000000001.tmp as "
                    "quarantine/junk.0000000000000001.tmp.2: no shard header (bad magic)");
    close(qfd);
}

/* A recovery stopped after moving a file to quarantine/ but before syncing
 * active/ can leave it under both names: the temp name goes, and no second
 * copy is made in quarantine/. */
static void test_interrupted_quarantine(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;
    int qfd = open_dir(f->spool_fd, "quarantine");

    write_file(qfd, "junk.0000000000000001.tmp", "junk", 4);
    assert_int_equal(linkat(qfd, "junk.0000000000000001.tmp", f->active_fd,
                            "junk.0000000000000001.tmp", 0),
                     0);
    run_recovery(f, &st);
    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(qfd, "junk.0000000000000001.tmp\n");
    assert_file_equals(qfd, "junk.0000000000000001.tmp", "junk", 4);
    close(qfd);
}

/* quarantine/ cannot be made (a file is in the way): recovery fails, and
 * the file that needed it is still in active/, unchanged. */
static void test_quarantine_unavailable(void **state)
{
    struct fixture *f = *state;
    struct recovery_stats st;

    write_file(f->spool_fd, "quarantine", "in the way", 10);
    write_file(f->active_fd, "junk.0000000000000001.tmp", "junk", 4);
    clear_log(f);
    memset(&st, 0x5a, sizeof(st));
    assert_int_equal(recovery_run(f->spool_fd, f->active_fd, f->done_fd, &f->ops, &st),
                     -ENOTDIR);
    assert_int_equal(st.files_scanned, UINT64_C(0x5a5a5a5a5a5a5a5a)); /* untouched */
    assert_file_equals(f->active_fd, "junk.0000000000000001.tmp", "junk", 4);
    assert_file_equals(f->spool_fd, "quarantine", "in the way", 10);
    assert_reported(f, RECOVERY_LOG_ERROR, "cannot open quarantine/: Not a directory");
}

/* ---- names already taken in done/ ---- */

/* A seal interrupted between its rename and the sync of active/ can leave
 * one file under both names: the temp name is removed, the sealed file is
 * untouched. */
static void test_same_inode_duplicate(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes s;
    struct recovery_stats st;

    build_shard(&s, "web", 0xabc, 2);
    write_file(f->done_fd, "web.0000000000000abc.shard", s.buf, s.len);
    assert_int_equal(linkat(f->done_fd, "web.0000000000000abc.shard", f->active_fd,
                            "web.0000000000000abc.tmp", 0),
                     0);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 0, 1, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_dir_lists(f->done_fd, "web.0000000000000abc.shard\n");
    assert_file_equals(f->done_fd, "web.0000000000000abc.shard", s.buf, s.len);
    assert_false(exists(f->spool_fd, "quarantine"));
    assert_reported(f, RECOVERY_LOG_INFO,
                    "removed active/web.0000000000000abc.tmp: it is a second name of "
                    "done/web.0000000000000abc.shard (a seal was interrupted after its rename)");
}

/* The done/ name belongs to a different file: the sealed one is kept as it
 * is and the temp file goes to quarantine/. */
static void test_different_inode_clash(void **state)
{
    struct fixture *f = *state;
    struct shard_bytes sealed, tmp;
    struct recovery_stats st;
    int qfd;

    build_shard(&sealed, "web", 0xabc, 2);
    build_shard(&tmp, "web", 0xabc, 3);
    write_file(f->done_fd, "web.0000000000000abc.shard", sealed.buf, sealed.len);
    write_file(f->active_fd, "web.0000000000000abc.tmp", tmp.buf, tmp.len);
    run_recovery(f, &st);

    assert_stats(&st, 1, 0, 1, 0, 0, 0, 0);
    assert_dir_lists(f->active_fd, "");
    assert_file_equals(f->done_fd, "web.0000000000000abc.shard", sealed.buf, sealed.len);
    qfd = openat(f->spool_fd, "quarantine", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(qfd >= 0);
    assert_file_equals(qfd, "web.0000000000000abc.tmp", tmp.buf, tmp.len);
    close(qfd);
    assert_reported(f, RECOVERY_LOG_WARNING,
                    "quarantined active/web.0000000000000abc.tmp as "
                    "quarantine/web.0000000000000abc.tmp: done/web.0000000000000abc.shard "
                    "already exists and is a different file (the sealed one is kept)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_empty_file_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_bad_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_name_clash, setup, teardown),
        cmocka_unit_test_setup_teardown(test_interrupted_quarantine, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quarantine_unavailable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_same_inode_duplicate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_different_inode_clash, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
