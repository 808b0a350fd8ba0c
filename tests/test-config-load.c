/* Unit tests of config_load (common/config.c): the exact "PATH:LINE: ..."
 * messages, failed loads leaving the settings alone, files that are missing
 * or unreadable, indented keys, long lines and comments, keys given twice
 * and NUL bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

#include "config-fixture.h"

static void test_load_good(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";

    write_conf(f, "; every key set\n"
                  "[daemon]\n"
                  "spool = /srv/logshard\n"
                  "socket=/tmp/ls.sock\n"
                  "socket_mode   =   0600  \n"
                  "\n"
                  "[limits]\n"
                  "max_record_bytes = 64K\n"
                  "max_frame_bytes = 1M\n"
                  "session_buffer_bytes = 16M\n"
                  "# a comment between keys\n"
                  "[shard]\n"
                  "max_shard_bytes = 2G\n"
                  "max_shard_age = 30m\n"
                  "[daemon]\n"
                  "admin_socket = /srv/admin.sock\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_string_equal(f->c.spool, "/srv/logshard");
    assert_string_equal(f->c.admin_socket, "/srv/admin.sock");
    assert_string_equal(f->c.socket_path, "/tmp/ls.sock");
    assert_int_equal(f->c.socket_mode, 0600);
    assert_true(f->c.max_record_bytes == 64 * KIB);
    assert_true(f->c.max_frame_bytes == MIB);
    assert_true(f->c.session_buffer_bytes == 16 * MIB);
    assert_true(f->c.max_shard_bytes == 2 * GIB);
    assert_true(f->c.max_shard_age_ms == 1800000);

    /* An empty file and a file of comments change nothing. */
    config_free(&f->c);
    assert_int_equal(config_init(&f->c), 0);
    write_conf(f, "");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_defaults(&f->c);
    write_conf(f, "# nothing\n; here\n\n[daemon]\n[limits]\n[shard]\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_defaults(&f->c);
}

/* Loads text and expects it to fail with want_rc and "PATH:" + want_tail. The
 * configuration must keep what it held before. */
static void expect_load_fails(struct fixture *f, const char *text, int want_rc,
                              const char *want_tail)
{
    struct config before;
    char err[1024] = "";
    char want[1024];
    int rc;

    assert_int_equal(config_copy(&before, &f->c), 0);
    write_conf(f, text);
    rc = config_load(&f->c, f->path, err, sizeof(err));
    snprintf(want, sizeof(want), "%s:%s", f->path, want_tail);
    if (rc != want_rc || strcmp(err, want) != 0)
        fail_msg("got %d \"%s\"\nwant %d \"%s\"", rc, err, want_rc, want);
    assert_config_equal(&f->c, &before);
    assert_memory_equal(f->c.origin_line, before.origin_line, sizeof(before.origin_line));
    config_free(&before);
}

/* [producer_quotas]: patterns in file order, the first match wins, names
 * no line matches get producer_quota_bytes; a reload replaces the lines. */
static void test_load_producer_quotas(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";

    write_conf(f, "[limits]\n"
                  "producer_quota_bytes = 1G\n"
                  "over_quota = refuse\n"
                  "spool_budget_bytes = 10G\n"
                  "spool_min_free_bytes = 512M\n"
                  "[producer_quotas]\n"
                  "nginx-* = 2G\n"
                  "nginx-debug = 10M\n"
                  "audit = 0\n"
                  "job-[0-9]? = 64K\n"
                  "[retention]\n"
                  "merged_max_age = 30d\n"
                  "shipped_max_bytes = 5G\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_true(f->c.producer_quota_bytes == GIB);
    assert_int_equal(f->c.over_quota, OVER_QUOTA_REFUSE);
    assert_true(f->c.spool_budget_bytes == 10 * GIB);
    assert_true(f->c.spool_min_free_bytes == 512 * MIB);
    assert_int_equal(f->c.producer_quotas.n, 4);
    assert_int_equal(f->c.producer_quotas.v[3].line, 10);
    assert_true(config_producer_quota(&f->c, "nginx-main") == 2 * GIB);
    assert_true(config_producer_quota(&f->c, "nginx-debug") == 2 * GIB); /* first match */
    assert_true(config_producer_quota(&f->c, "audit") == 0);
    assert_true(config_producer_quota(&f->c, "job-42") == 64 * KIB);
    assert_true(config_producer_quota(&f->c, "job-4") == GIB);
    assert_true(config_producer_quota(&f->c, "other") == GIB);
    assert_true(f->c.retention_merged_max_age_ms == 30ull * 24 * 3600 * 1000);
    assert_true(f->c.retention_shipped_max_bytes == 5 * GIB);

    /* The next file's lines replace these. */
    write_conf(f, "[producer_quotas]\nother = 1M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_int_equal(f->c.producer_quotas.n, 1);
    assert_true(config_producer_quota(&f->c, "nginx-main") == GIB);
    assert_true(config_producer_quota(&f->c, "other") == MIB);

    /* Refused, naming the line: a path, a size that is none, a pattern twice. */
    write_conf(f, "[producer_quotas]\n/var/log = 1M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, ":2:"));
    assert_non_null(strstr(err, "not a producer name pattern"));
    write_conf(f, "[producer_quotas]\nweb = lots\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "'lots' is not a size"));
    write_conf(f, "[producer_quotas]\nweb = 1M\n\nweb = 2M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "already set on line 2"));
    write_conf(f, "[limits]\nover_quota = drop\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "over_quota"));
    /* The failed loads kept the settings of the last good one. */
    assert_true(config_producer_quota(&f->c, "other") == MIB);
}

static void test_load_errors(void **state)
{
    struct fixture *f = *state;

    /* A bad value on line 7, after comments and blank lines. */
    expect_load_fails(f,
                      "# logshard test configuration\n" /* 1 */
                      "\n"                                /* 2 */
                      "[daemon]\n"                        /* 3 */
                      "; the spool\n"                     /* 4 */
                      "spool = /tmp/elsewhere\n"          /* 5 */
                      "\n"                                /* 6 */
                      "socket_mode = 0999\n"              /* 7 */
                      "[limits]\n"                        /* 8 */
                      "max_record_bytes = 2M\n",          /* 9 */
                      -EINVAL, "7: socket_mode: '0999' is not an octal file mode");

    /* Out of range. */
    expect_load_fails(f, "[limits]\nmax_record_bytes = 0\n", -ERANGE,
                      "2: max_record_bytes: 0 is out of range (1 to 268435456 bytes)");

    /* An unknown key in a known section. */
    expect_load_fails(f, "[daemon]\nspool = /a\n\n[limits]\nmax_records = 5\n", -ENOENT,
                      "5: unknown key 'max_records' in section [limits]");

    /* An unknown section with keys under it. */
    expect_load_fails(f, "[daemon]\nspool = /a\n[bogus]\nx = 1\n", -ENOENT,
                      "3: unknown section [bogus]");

    /* An unknown section with no keys at all, last in the file or not. */
    expect_load_fails(f, "[daemon]\nspool = /a\n# c\n[bogus]\n", -ENOENT,
                      "4: unknown section [bogus]");
    expect_load_fails(f, "[bogus]\n\n[shard]\nmax_shard_bytes = 1M\n", -ENOENT,
                      "1: unknown section [bogus]");
    expect_load_fails(f, "[daemon]\n  [bogus]  \n", -ENOENT, "2: unknown section [bogus]");

    /* A line that is none of section, key = value or comment. */
    expect_load_fails(f, "[daemon]\nspool = /a\ngarbage line with no equals\n", -EINVAL,
                      "3: syntax error (expected '[section]', 'key = value' or a comment)");
    expect_load_fails(f, "[daemon\nspool = /a\n", -EINVAL,
                      "1: syntax error (expected '[section]', 'key = value' or a comment)");

    /* The first error wins, whichever kind it is. */
    expect_load_fails(f, "[daemon]\nspool = /a\nno equals here\n[limits]\nbogus = 1\n", -EINVAL,
                      "3: syntax error (expected '[section]', 'key = value' or a comment)");
    expect_load_fails(f, "[daemon]\nbogus = 1\n[limits]\nno equals here\n", -ENOENT,
                      "2: unknown key 'bogus' in section [daemon]");

    /* A key before any section. */
    expect_load_fails(f, "# top\nspool = /a\n[daemon]\n", -EINVAL,
                      "2: key 'spool' outside of any section");

    /* An empty path. */
    expect_load_fails(f, "[daemon]\n\n\nspool =\n", -EINVAL, "4: spool: empty path");

    assert_defaults(&f->c);
}

static void test_load_failure_keeps_settings(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";

    write_conf(f, "[daemon]\nspool = /first\n[limits]\nmax_record_bytes = 2M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_string_equal(f->c.spool, "/first");
    assert_true(f->c.max_record_bytes == 2 * MIB);

    /* Sets three keys, then fails: none of the three may stick. */
    expect_load_fails(f,
                      "[daemon]\nspool = /second\nsocket = /second.sock\n"
                      "[limits]\nmax_record_bytes = 3M\nmax_frame_bytes = lots\n",
                      -EINVAL,
                      "6: max_frame_bytes: 'lots' is not a size (a number with an optional K, "
                      "M, G or T suffix)");
    assert_string_equal(f->c.spool, "/first");
    assert_string_equal(f->c.socket_path, "/run/logshard/logshard.sock");
    assert_true(f->c.max_record_bytes == 2 * MIB);
}

static void test_load_missing_file(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";
    char want[512];

    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), -ENOENT);
    snprintf(want, sizeof(want), "%s: No such file or directory", f->path);
    assert_string_equal(err, want);
    assert_defaults(&f->c);
}

/* A path that opens but cannot be read (a directory: fopen succeeds, reading
 * fails with EISDIR) is an error, not an empty configuration. */
static void test_load_unreadable(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";
    char want[512];
    int rc;

    rc = config_load(&f->c, f->dir, err, sizeof(err));
    if (rc >= 0)
        fail_msg("config_load(\"%s\") on a directory returned %d", f->dir, rc);
    snprintf(want, sizeof(want), "%s: ", f->dir);
    assert_true(strncmp(err, want, strlen(want)) == 0);
    assert_defaults(&f->c);
}

/* An indented "key = value" line must set that key (or be refused at its
 * line), not be glued to the previous key's value as a continuation. */
static void test_load_indented_key(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";
    int rc;

    write_conf(f, "[daemon]\n"
                  "socket = /tmp/a.sock\n"
                  "  socket_mode = 0600\n");
    rc = config_load(&f->c, f->path, err, sizeof(err));
    if (rc == 0) {
        assert_string_equal(f->c.socket_path, "/tmp/a.sock");
        assert_int_equal(f->c.socket_mode, 0600);
    } else {
        char want[256];
        snprintf(want, sizeof(want), "%s:3: ", f->path);
        if (strncmp(err, want, strlen(want)) != 0)
            fail_msg("indented line 3 refused as \"%s\"", err);
        assert_defaults(&f->c);
    }
}

/* A path longer than inih's default line buffer (200 bytes) must either be
 * taken whole or be refused with the line it is on; never cut silently and
 * never blamed on another line. */
static void test_load_long_line(void **state)
{
    struct fixture *f = *state;
    char text[1024], path[301], err[1024] = "";
    int rc;

    path[0] = '/';
    memset(path + 1, 'p', 299);
    path[300] = '\0';
    snprintf(text, sizeof(text), "[daemon]\nspool = %s\n[limits]\nmax_record_bytes = 2M\n",
             path);
    write_conf(f, text);
    rc = config_load(&f->c, f->path, err, sizeof(err));
    if (rc == 0) {
        assert_string_equal(f->c.spool, path);
        assert_true(f->c.max_record_bytes == 2 * MIB);
    } else {
        char want[256];
        snprintf(want, sizeof(want), "%s:2: ", f->path);
        if (strncmp(err, want, strlen(want)) != 0)
            fail_msg("long line 2 refused as \"%s\"", err);
        assert_defaults(&f->c);
    }
}

/* A long comment line is a comment to its end: no part of it may be read as
 * a setting. The tail of this one, read alone, is "max_record_bytes = 2M". */
static void test_load_long_comment(void **state)
{
    struct fixture *f = *state;
    char text[1024], err[1024] = "";
    int rc;

    snprintf(text, sizeof(text), "[limits]\n#%-198s%s\n", "",
             "max_record_bytes = 2M");
    write_conf(f, text);
    rc = config_load(&f->c, f->path, err, sizeof(err));
    if (rc == 0) {
        if (f->c.max_record_bytes != MIB)
            fail_msg("a commented-out setting took effect: max_record_bytes = %llu",
                     (unsigned long long)f->c.max_record_bytes);
    } else {
        char want[256];
        snprintf(want, sizeof(want), "%s:2: ", f->path);
        if (strncmp(err, want, strlen(want)) != 0)
            fail_msg("long comment on line 2 refused as \"%s\"", err);
    }
    assert_defaults(&f->c);
}

/* A key given twice is an error on its second line, wherever the first
 * was, even with the same value: last-wins would ignore a line silently. */
static void test_load_duplicate_key(void **state)
{
    struct fixture *f = *state;
    char err[512] = "";

    expect_load_fails(f,
                      "[daemon]\n"               /* 1 */
                      "spool = /a\n"             /* 2 */
                      "\n"                       /* 3 */
                      "[limits]\n"               /* 4 */
                      "max_record_bytes = 2M\n"  /* 5 */
                      "[daemon]\n"               /* 6 */
                      "spool = /b\n",            /* 7 */
                      -EINVAL, "7: key 'spool' in [daemon] already set on line 2");
    expect_load_fails(f, "[limits]\nmax_frame_bytes = 4M\nmax_frame_bytes = 4M\n", -EINVAL,
                      "3: key 'max_frame_bytes' in [limits] already set on line 2");
    /* The repeat is the error even when its value is bad too. */
    expect_load_fails(f, "[sync]\nfsync = none\nfsync = sometimes\n", -EINVAL,
                      "3: key 'fsync' in [sync] already set on line 2");
    /* The same name in two sections is two keys; a repeated section header
     * is fine. */
    write_conf(f, "[daemon]\nspool = /a\n[sync]\nfsync = none\n[daemon]\nsocket = /s\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_string_equal(f->c.spool, "/a");
    assert_string_equal(f->c.socket_path, "/s");
    /* Loading the file again (a reload) and the command line after the file
     * are not repeats. */
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    set_or_fail(&f->c, "daemon", "spool", "/from-the-command-line");
    assert_string_equal(f->c.spool, "/from-the-command-line");
}

/* A NUL byte must not silently end a value: the line is refused. */
static void test_load_nul_byte(void **state)
{
    struct fixture *f = *state;
    char path[] = "/tmp/test-config-nul.XXXXXX";
    static const char text[] = "[daemon]\nspool = /tmp\0junk\n";
    char err[512] = "";
    int fd = mkstemp(path);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, sizeof(text) - 1), (ssize_t)(sizeof(text) - 1));
    close(fd);
    assert_int_equal(config_load(&f->c, path, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, ":2: NUL byte in the line"));
    assert_string_equal(f->c.spool, "/var/lib/logshard");
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_nul_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_producer_quotas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_failure_keeps_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_unreadable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_indented_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_long_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_long_comment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_duplicate_key, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
