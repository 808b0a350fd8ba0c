/* Unit tests for common/config.c: embedded defaults, config_set for every
 * kind of key, strict value parsing (sizes, durations, octal modes), the
 * exact "PATH:LINE: ..." messages of config_load, failed loads leaving the
 * settings alone, config_check, and the example config/logshard.conf, which
 * must load cleanly and list every key with its default. */
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

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

struct fixture {
    char dir[64];
    char path[128];
    struct config c;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-config.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/logshard.conf", f->dir);
    assert_int_equal(config_init(&f->c), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    config_free(&f->c);
    (void)unlink(f->path); /* may not have been written */
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

static void write_conf(const struct fixture *f, const char *text)
{
    FILE *fp = fopen(f->path, "we");

    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

/* Asserts that two configurations hold the same values. */
static void assert_config_equal(const struct config *a, const struct config *b)
{
    assert_string_equal(a->spool, b->spool);
    assert_string_equal(a->socket_path, b->socket_path);
    assert_true(a->socket_mode == b->socket_mode);
    assert_true(a->max_record_bytes == b->max_record_bytes);
    assert_true(a->max_frame_bytes == b->max_frame_bytes);
    assert_true(a->session_buffer_bytes == b->session_buffer_bytes);
    assert_true(a->max_shard_bytes == b->max_shard_bytes);
    assert_true(a->max_shard_age_ms == b->max_shard_age_ms);
    assert_true(a->fsync_policy == b->fsync_policy);
    assert_true(a->fsync_interval_ms == b->fsync_interval_ms);
    assert_true(a->io_backend == b->io_backend);
    assert_true(a->max_producers == b->max_producers);
    assert_true(a->max_producers_per_uid == b->max_producers_per_uid);
    assert_true(a->memory_limit_bytes == b->memory_limit_bytes);
    assert_true(a->max_open_shards == b->max_open_shards);
    assert_true(a->hello_timeout_ms == b->hello_timeout_ms);
    assert_true(a->idle_timeout_ms == b->idle_timeout_ms);
    assert_string_equal(a->admin_socket, b->admin_socket);
    assert_true(a->metrics_interval_ms == b->metrics_interval_ms);
}

static void assert_defaults(const struct config *c)
{
    assert_string_equal(c->spool, "/var/lib/logshard");
    assert_string_equal(c->socket_path, "/run/logshard/logshard.sock");
    assert_int_equal(c->socket_mode, 0660);
    assert_true(c->max_record_bytes == 1 * MIB);
    assert_true(c->max_frame_bytes == 4 * MIB);
    assert_true(c->session_buffer_bytes == 8 * MIB);
    assert_true(c->max_shard_bytes == 64 * MIB);
    assert_true(c->max_shard_age_ms == 3600000);
    assert_true(c->fsync_policy == FSYNC_BATCH);
    assert_true(c->fsync_interval_ms == 1000);
    assert_true(c->io_backend == IO_BACKEND_AUTO);
    assert_null(c->socket_group);
    assert_string_equal(c->admin_socket, "/run/logshard/admin.sock");
    assert_null(c->metrics_file);
    assert_true(c->metrics_interval_ms == 15000);
    assert_true(c->max_producers == 1024);
    assert_true(c->max_producers_per_uid == 0);
    assert_true(c->memory_limit_bytes == 256 * MIB);
    assert_true(c->max_open_shards == 4096);
    assert_true(c->hello_timeout_ms == 10000);
    assert_true(c->idle_timeout_ms == 60000);
    assert_int_equal(c->allowed_uids.n, 0);
    assert_int_equal(c->allowed_gids.n, 0);
}

static void test_defaults(void **state)
{
    struct fixture *f = *state;
    char err[256] = "";

    assert_defaults(&f->c);
    assert_string_equal(CONFIG_DEFAULT_SPOOL, "/var/lib/logshard");
    assert_string_equal(CONFIG_DEFAULT_SOCKET, "/run/logshard/logshard.sock");
    assert_int_equal(config_check(&f->c, err, sizeof(err)), 0);

    /* config_free twice, and on a zeroed struct, is harmless. */
    config_free(&f->c);
    config_free(&f->c);
    assert_null(f->c.spool);
    assert_int_equal(config_init(&f->c), 0);
    assert_defaults(&f->c);
}

/* Sets one key and returns the value it took (the uint64 keys). */
static uint64_t set_ok(struct config *c, const char *section, const char *key,
                       const char *value, const uint64_t *field)
{
    char why[256] = "";
    int rc = config_set(c, section, key, value, why, sizeof(why));

    if (rc != 0)
        fail_msg("[%s] %s = %s: %d (%s)", section, key, value, rc, why);
    return *field;
}

static void test_set_values(void **state)
{
    struct fixture *f = *state;
    struct config *c = &f->c;
    char why[256];

    /* Paths. */
    assert_int_equal(config_set(c, "daemon", "spool", "/srv/spool", why, sizeof(why)), 0);
    assert_string_equal(c->spool, "/srv/spool");
    assert_int_equal(config_set(c, "daemon", "socket", "/tmp/x.sock", why, sizeof(why)), 0);
    assert_string_equal(c->socket_path, "/tmp/x.sock");

    /* Sizes: plain, K/M/G/T, KiB/MiB/GiB, KB/MB, B, k. */
    uint64_t *rec = &c->max_record_bytes;
    assert_true(set_ok(c, "limits", "max_record_bytes", "1", rec) == 1);
    assert_true(set_ok(c, "limits", "max_record_bytes", "4096", rec) == 4096);
    assert_true(set_ok(c, "limits", "max_record_bytes", "4K", rec) == 4 * KIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "3KiB", rec) == 3 * KIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "5KB", rec) == 5 * KIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "6k", rec) == 6 * KIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "7B", rec) == 7);
    assert_true(set_ok(c, "limits", "max_record_bytes", "2M", rec) == 2 * MIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "5MiB", rec) == 5 * MIB);
    assert_true(set_ok(c, "limits", "max_record_bytes", "256M", rec) == 256 * MIB);
    assert_true(set_ok(c, "limits", "max_frame_bytes", "4K", &c->max_frame_bytes) == 4 * KIB);
    assert_true(set_ok(c, "limits", "max_frame_bytes", "256MiB", &c->max_frame_bytes) ==
                256 * MIB);
    assert_true(set_ok(c, "limits", "session_buffer_bytes", "64K",
                       &c->session_buffer_bytes) == 64 * KIB);
    assert_true(set_ok(c, "limits", "session_buffer_bytes", "2G",
                       &c->session_buffer_bytes) == 2 * GIB);
    assert_true(set_ok(c, "limits", "session_buffer_bytes", "64GiB",
                       &c->session_buffer_bytes) == 64 * GIB);
    assert_true(set_ok(c, "shard", "max_shard_bytes", "1GB", &c->max_shard_bytes) == GIB);
    assert_true(set_ok(c, "shard", "max_shard_bytes", "1T", &c->max_shard_bytes) == 1024 * GIB);

    /* Durations: ms, s, m, min, h, d, and no unit meaning seconds. */
    uint64_t *age = &c->max_shard_age_ms;
    assert_true(set_ok(c, "shard", "max_shard_age", "1500ms", age) == 1500);
    assert_true(set_ok(c, "shard", "max_shard_age", "1000ms", age) == 1000);
    assert_true(set_ok(c, "shard", "max_shard_age", "2s", age) == 2000);
    assert_true(set_ok(c, "shard", "max_shard_age", "3m", age) == 180000);
    assert_true(set_ok(c, "shard", "max_shard_age", "10min", age) == 600000);
    assert_true(set_ok(c, "shard", "max_shard_age", "4h", age) == 4 * 3600000ull);
    assert_true(set_ok(c, "shard", "max_shard_age", "5d", age) == 5 * 86400000ull);
    assert_true(set_ok(c, "shard", "max_shard_age", "365d", age) == 365 * 86400000ull);
    assert_true(set_ok(c, "shard", "max_shard_age", "60", age) == 60000);

    /* Octal modes. */
    uint64_t *mode = &c->socket_mode;
    assert_int_equal(set_ok(c, "daemon", "socket_mode", "0640", mode), 0640);
    assert_int_equal(set_ok(c, "daemon", "socket_mode", "755", mode), 0755);
    assert_int_equal(set_ok(c, "daemon", "socket_mode", "0", mode), 0);
    assert_int_equal(set_ok(c, "daemon", "socket_mode", "7777", mode), 07777);
    assert_int_equal(set_ok(c, "daemon", "socket_mode", "00600", mode), 0600);
}

/* Each bad value fails with the given error and message, and leaves c as it was. */
static void expect_set_fails(struct config *c, const char *section, const char *key,
                             const char *value, int want_rc, const char *want_why)
{
    struct config before;
    char why[256] = "";

    assert_int_equal(config_copy(&before, c), 0);
    if (config_set(c, section, key, value, why, sizeof(why)) != want_rc)
        fail_msg("[%s] %s = '%s': not %d", section, key, value, want_rc);
    assert_string_equal(why, want_why);
    assert_config_equal(c, &before);
    assert_memory_equal(c->origin_line, before.origin_line, sizeof(before.origin_line));
    config_free(&before);
}

static void test_set_refused(void **state)
{
    struct fixture *f = *state;
    struct config *c = &f->c;

    expect_set_fails(c, "daemon", "spool", "", -EINVAL, "spool: empty path");
    expect_set_fails(c, "daemon", "socket", "", -EINVAL, "socket: empty path");

    /* Sizes that do not parse. */
    static const char *const bad_sizes[] = { "", "-1", " 1", "1x", "10 M", "1 ", "M", "1.5M",
                                            "+1", "0x10", "1MM", "1Mi", "K1" };
    for (size_t i = 0; i < sizeof(bad_sizes) / sizeof(bad_sizes[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want),
                 "max_record_bytes: '%s' is not a size (a number with an optional K, M, G "
                 "or T suffix)",
                 bad_sizes[i]);
        expect_set_fails(c, "limits", "max_record_bytes", bad_sizes[i], -EINVAL, want);
    }
    /* Sizes that overflow 64 bits. */
    expect_set_fails(c, "limits", "max_record_bytes", "18446744073709551616", -ERANGE,
                     "max_record_bytes: '18446744073709551616' is not a size (a number with "
                     "an optional K, M, G or T suffix)");
    expect_set_fails(c, "shard", "max_shard_bytes", "17179869184G", -ERANGE,
                     "max_shard_bytes: '17179869184G' is not a size (a number with an "
                     "optional K, M, G or T suffix)");
    /* Sizes out of the key's range. */
    expect_set_fails(c, "limits", "max_record_bytes", "0", -ERANGE,
                     "max_record_bytes: 0 is out of range (1 to 268435456 bytes)");
    expect_set_fails(c, "limits", "max_record_bytes", "268435457", -ERANGE,
                     "max_record_bytes: 268435457 is out of range (1 to 268435456 bytes)");
    expect_set_fails(c, "limits", "max_record_bytes", "257M", -ERANGE,
                     "max_record_bytes: 257M is out of range (1 to 268435456 bytes)");
    expect_set_fails(c, "limits", "max_frame_bytes", "4095", -ERANGE,
                     "max_frame_bytes: 4095 is out of range (4096 to 268435464 bytes)");
    expect_set_fails(c, "limits", "session_buffer_bytes", "63K", -ERANGE,
                     "session_buffer_bytes: 63K is out of range (65536 to 68719476736 bytes)");
    expect_set_fails(c, "shard", "max_shard_bytes", "1025G", -ERANGE,
                     "max_shard_bytes: 1025G is out of range (4096 to 1099511627776 bytes)");

    /* Durations. */
    static const char *const bad_durations[] = { "", "-1", " 1", "1x", "10 s", "1sec", "s",
                                                "1.5s", "1S", "1H", "1ms " };
    for (size_t i = 0; i < sizeof(bad_durations) / sizeof(bad_durations[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want),
                 "max_shard_age: '%s' is not a duration (a number with ms, s, m, h or d)",
                 bad_durations[i]);
        expect_set_fails(c, "shard", "max_shard_age", bad_durations[i], -EINVAL, want);
    }
    expect_set_fails(c, "shard", "max_shard_age", "999ms", -ERANGE,
                     "max_shard_age: 999ms is out of range (1000 to 31536000000 ms)");
    expect_set_fails(c, "shard", "max_shard_age", "0", -ERANGE,
                     "max_shard_age: 0 is out of range (1000 to 31536000000 ms)");
    expect_set_fails(c, "shard", "max_shard_age", "366d", -ERANGE,
                     "max_shard_age: 366d is out of range (1000 to 31536000000 ms)");
    expect_set_fails(c, "shard", "max_shard_age", "18446744073709552s", -ERANGE,
                     "max_shard_age: '18446744073709552s' is not a duration (a number with "
                     "ms, s, m, h or d)");

    /* Modes. */
    static const char *const bad_modes[] = { "", "0888", "9", "-1", " 644", "0644 ", "0x1ff",
                                            "rw-r--r--", "+644" };
    for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
        char want[256];
        snprintf(want, sizeof(want), "socket_mode: '%s' is not an octal file mode",
                 bad_modes[i]);
        expect_set_fails(c, "daemon", "socket_mode", bad_modes[i], -EINVAL, want);
    }
    expect_set_fails(c, "daemon", "socket_mode", "10000", -ERANGE,
                     "socket_mode: 10000 is out of range (0 to 4095)");

    /* Unknown keys and sections. */
    expect_set_fails(c, "daemon", "bogus", "1", -ENOENT, "unknown key 'bogus' in section [daemon]");
    expect_set_fails(c, "limits", "spool", "/x", -ENOENT,
                     "unknown key 'spool' in section [limits]");
    expect_set_fails(c, "shard", "max_record_bytes", "1", -ENOENT,
                     "unknown key 'max_record_bytes' in section [shard]");
    expect_set_fails(c, "nope", "spool", "/x", -ENOENT, "unknown section [nope]");
    expect_set_fails(c, "", "spool", "/x", -ENOENT, "unknown section []");
    expect_set_fails(c, "Daemon", "spool", "/x", -ENOENT, "unknown section [Daemon]");

    assert_defaults(c);
}

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

static void set_or_fail(struct config *c, const char *section, const char *key,
                        const char *value)
{
    char why[256] = "";

    if (config_set(c, section, key, value, why, sizeof(why)) != 0)
        fail_msg("[%s] %s = %s: %s", section, key, value, why);
}

static void test_check(void **state)
{
    struct fixture *f = *state;
    struct config *c = &f->c;
    char err[512] = "";

    /* A frame must carry one largest record: its count and length prefix
     * come on top, 8 bytes. */
    set_or_fail(c, "limits", "max_record_bytes", "1M");
    set_or_fail(c, "limits", "max_frame_bytes", "1048584");
    assert_int_equal(config_check(c, err, sizeof(err)), 0);
    set_or_fail(c, "limits", "max_frame_bytes", "1048583");
    assert_int_equal(config_check(c, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "max_frame_bytes (1048583, the command line) must leave room for "
                             "one record of max_record_bytes (1048576, the command line) and "
                             "its framing (8 bytes)");
    set_or_fail(c, "limits", "max_frame_bytes", "1M");
    assert_int_equal(config_check(c, err, sizeof(err)), -EINVAL);

    /* The largest record the documentation allows can be set, with a frame
     * limit 8 bytes above it and buffers to hold such a frame. */
    set_or_fail(c, "limits", "max_record_bytes", "256M");
    set_or_fail(c, "limits", "max_frame_bytes", "268435464");
    set_or_fail(c, "limits", "session_buffer_bytes", "268435464");
    set_or_fail(c, "limits", "memory_limit_bytes", "1G");
    assert_int_equal(config_check(c, err, sizeof(err)), 0);
    set_or_fail(c, "limits", "max_frame_bytes", "256M");
    assert_int_equal(config_check(c, err, sizeof(err)), -EINVAL);

    /* The session buffer must hold one whole frame; an untouched key says
     * it is the default. */
    config_free(c);
    assert_int_equal(config_init(c), 0);
    set_or_fail(c, "limits", "session_buffer_bytes", "4194303");
    assert_int_equal(config_check(c, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, "session_buffer_bytes (4194303, the command line) must be at least "
                             "max_frame_bytes (4194304, the default)");
    set_or_fail(c, "limits", "session_buffer_bytes", "4M");
    assert_int_equal(config_check(c, err, sizeof(err)), 0);
}

/* With keys from the file, the message starts with the file and the later
 * of their lines, and names each key's line or other origin. */
static void test_check_names_lines(void **state)
{
    struct fixture *f = *state;
    char err[1024] = "";
    char want[1024];

    write_conf(f, "[limits]\n"
                  "max_record_bytes = 256M\n"
                  "# the frame limit\n"
                  "max_frame_bytes = 256M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_int_equal(config_check(&f->c, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want),
             "%s:4: max_frame_bytes (268435456, line 4) must leave room for one record of "
             "max_record_bytes (268435456, line 2) and its framing (8 bytes)",
             f->path);
    assert_string_equal(err, want);

    /* One key from the file, one default. */
    config_free(&f->c);
    assert_int_equal(config_init(&f->c), 0);
    write_conf(f, "[limits]\nmax_record_bytes = 4M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    assert_int_equal(config_check(&f->c, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want),
             "%s:2: max_frame_bytes (4194304, the default) must leave room for one record of "
             "max_record_bytes (4194304, line 2) and its framing (8 bytes)",
             f->path);
    assert_string_equal(err, want);

    /* One key from the file, one from the command line. */
    config_free(&f->c);
    assert_int_equal(config_init(&f->c), 0);
    write_conf(f, "[daemon]\nspool = /x\n[limits]\nmemory_limit_bytes = 5M\n");
    assert_int_equal(config_load(&f->c, f->path, err, sizeof(err)), 0);
    set_or_fail(&f->c, "limits", "session_buffer_bytes", "6M");
    assert_int_equal(config_check(&f->c, err, sizeof(err)), -EINVAL);
    snprintf(want, sizeof(want),
             "%s:4: memory_limit_bytes (5242880, line 4) must be at least session_buffer_bytes "
             "(6291456, the command line)",
             f->path);
    assert_string_equal(err, want);
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

static void test_parse_size(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; uint64_t want; } good[] = {
        { "0", 0 }, { "1", 1 }, { "0001", 1 }, { "1B", 1 }, { "1K", KIB }, { "1k", KIB },
        { "1KB", KIB }, { "1KiB", KIB }, { "10M", 10 * MIB }, { "10MB", 10 * MIB },
        { "10MiB", 10 * MIB }, { "3G", 3 * GIB }, { "3GB", 3 * GIB }, { "3GiB", 3 * GIB },
        { "2T", 2048 * GIB }, { "2TB", 2048 * GIB }, { "2TiB", 2048 * GIB },
        { "18446744073709551615", UINT64_MAX },
        { "17179869183G", 17179869183ull * GIB },
        { "16777215T", 16777215ull * 1024 * GIB },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_size(good[i].text, &v) != 0 || v != good[i].want)
            fail_msg("parse_size(\"%s\") = %llu", good[i].text, (unsigned long long)v);
    }

    static const struct { const char *text; int rc; } bad[] = {
        { "", -EINVAL }, { "-1", -EINVAL }, { " 1", -EINVAL }, { "1x", -EINVAL },
        { "10 M", -EINVAL }, { "1 ", -EINVAL }, { "M", -EINVAL }, { "+1", -EINVAL },
        { "1.0", -EINVAL }, { "0x10", -EINVAL }, { "\t1", -EINVAL }, { "1\n", -EINVAL },
        { "1iB", -EINVAL }, { "1KiBB", -EINVAL },
        { "18446744073709551616", -ERANGE }, { "99999999999999999999999", -ERANGE },
        { "17179869184G", -ERANGE }, { "16777216T", -ERANGE }, { "18014398509481984K", -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_size(bad[i].text, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_size(\"%s\"): %d, want %d", bad[i].text, rc, bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_size(NULL, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

static void test_parse_duration(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; uint64_t want; } good[] = {
        { "0", 0 }, { "1", 1000 }, { "0ms", 0 }, { "1ms", 1 }, { "1s", 1000 }, { "1m", 60000 },
        { "1min", 60000 }, { "1h", 3600000 }, { "1d", 86400000 }, { "90s", 90000 },
        { "18446744073709551615ms", UINT64_MAX },
        { "18446744073709551s", 18446744073709551000ull },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_duration_ms(good[i].text, &v) != 0 || v != good[i].want)
            fail_msg("parse_duration_ms(\"%s\") = %llu", good[i].text, (unsigned long long)v);
    }

    static const struct { const char *text; int rc; } bad[] = {
        { "", -EINVAL }, { "-1", -EINVAL }, { " 1", -EINVAL }, { "1x", -EINVAL },
        { "10 s", -EINVAL }, { "1 ", -EINVAL }, { "s", -EINVAL }, { "1sec", -EINVAL },
        { "1.5s", -EINVAL }, { "1M", -EINVAL }, { "1ms1", -EINVAL }, { "+1s", -EINVAL },
        { "18446744073709552s", -ERANGE }, { "18446744073709551616ms", -ERANGE },
        { "213503982334602d", -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_duration_ms(bad[i].text, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_duration_ms(\"%s\"): %d, want %d", bad[i].text, rc, bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_duration_ms(NULL, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

static void test_parse_uint(void **state)
{
    uint64_t v;
    (void)state;

    static const struct { const char *text; int base; uint64_t want; } good[] = {
        { "0", 10, 0 }, { "42", 10, 42 }, { "007", 10, 7 },
        { "18446744073709551615", 10, UINT64_MAX }, { "0777", 8, 0777 }, { "17", 8, 017 },
        { "ff", 16, 0xff }, { "FFFFFFFFFFFFFFFF", 16, UINT64_MAX },
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        v = 12345;
        if (parse_uint(good[i].text, good[i].base, &v) != 0 || v != good[i].want)
            fail_msg("parse_uint(\"%s\", %d) = %llu", good[i].text, good[i].base,
                     (unsigned long long)v);
    }

    static const struct { const char *text; int base; int rc; } bad[] = {
        { "", 10, -EINVAL }, { "-1", 10, -EINVAL }, { " 1", 10, -EINVAL }, { "1x", 10, -EINVAL },
        { "1 ", 10, -EINVAL }, { "+1", 10, -EINVAL }, { "10 M", 10, -EINVAL },
        { "8", 8, -EINVAL }, { "1.0", 10, -EINVAL }, { "x", 16, -EINVAL },
        { "18446744073709551616", 10, -ERANGE }, { "10000000000000000", 16, -ERANGE },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc;
        v = 12345;
        rc = parse_uint(bad[i].text, bad[i].base, &v);
        if (rc != bad[i].rc || v != 12345)
            fail_msg("parse_uint(\"%s\", %d): %d, want %d", bad[i].text, bad[i].base, rc,
                     bad[i].rc);
    }
    v = 12345;
    assert_int_equal(parse_uint(NULL, 10, &v), -EINVAL);
    assert_int_equal(v, 12345);
}

/* Leading white space other than ' ' must be refused like ' ' is: strtoull
 * skips it, and then also accepts the sign it was meant to refuse. */
static void test_parse_uint_other_whitespace(void **state)
{
    static const struct { const char *text, *shown; } bad[] = {
        { "\t1", "\\t1" }, { "\n1", "\\n1" }, { "\t-1", "\\t-1" }, { "\n-1", "\\n-1" },
        { "\v+1", "\\v+1" }, { "\f1", "\\f1" }, { "\r1", "\\r1" },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 12345;
        int rc = parse_uint(bad[i].text, 10, &v);

        if (rc != -EINVAL || v != 12345)
            fail_msg("parse_uint(\"%s\", 10): %d, value %llu; want -EINVAL", bad[i].shown, rc,
                     (unsigned long long)v);
    }
}

/* Keys with a fixed set of words: each word gives its index, anything else
 * (including a different case) is refused with the list of choices. */
static void test_enum_keys(void **state)
{
    struct fixture *f = *state;
    static const char *const policies[] = { "none", "interval", "batch", "always" };
    char why[256] = "";

    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(config_set(&f->c, "sync", "fsync", policies[i], why, sizeof(why)), 0);
        assert_true(f->c.fsync_policy == i);
        assert_string_equal(config_fsync_policy_name((enum fsync_policy)i), policies[i]);
    }
    assert_int_equal(config_set(&f->c, "sync", "fsync", "Batch", why, sizeof(why)), -EINVAL);
    assert_string_equal(why, "fsync: 'Batch' is not one of none, interval, batch, always");
    assert_true(f->c.fsync_policy == FSYNC_ALWAYS);
    assert_int_equal(config_set(&f->c, "daemon", "io_backend", "threads", why, sizeof(why)), 0);
    assert_true(f->c.io_backend == IO_BACKEND_THREADS);
    assert_int_equal(config_set(&f->c, "daemon", "io_backend", "", why, sizeof(why)), -EINVAL);
    assert_string_equal(config_io_backend_name(IO_BACKEND_URING), "uring");
}

/* Counts, millisecond durations and id lists, and the copy that reloads
 * and config_load rely on. */
static void test_limit_and_access_keys(void **state)
{
    struct fixture *f = *state;
    struct config copy;
    char why[256] = "";

    assert_int_equal(config_set(&f->c, "limits", "max_producers", "256", why, sizeof(why)), 0);
    assert_true(f->c.max_producers == 256);
    assert_int_equal(config_set(&f->c, "limits", "max_producers", "0", why, sizeof(why)), -ERANGE);
    assert_int_equal(config_set(&f->c, "limits", "max_producers", "1K", why, sizeof(why)),
                     -EINVAL);
    assert_int_equal(config_set(&f->c, "limits", "idle_timeout_ms", "250", why, sizeof(why)), 0);
    assert_true(f->c.idle_timeout_ms == 250);
    assert_int_equal(config_set(&f->c, "limits", "idle_timeout_ms", "2s", why, sizeof(why)), 0);
    assert_true(f->c.idle_timeout_ms == 2000);
    assert_int_equal(config_set(&f->c, "access", "allowed_uids", "0, 65534 root", why,
                                sizeof(why)),
                     0);
    assert_int_equal(f->c.allowed_uids.n, 3);
    assert_true(config_id_list_contains(&f->c.allowed_uids, 65534));
    assert_true(config_id_list_contains(&f->c.allowed_uids, 0));
    assert_false(config_id_list_contains(&f->c.allowed_uids, 1));
    assert_int_equal(config_set(&f->c, "access", "allowed_uids", "no-such-user-here", why,
                                sizeof(why)),
                     -EINVAL);
    assert_string_equal(why, "allowed_uids: no user named 'no-such-user-here'");
    assert_int_equal(f->c.allowed_uids.n, 3); /* untouched */
    assert_int_equal(config_set(&f->c, "access", "allowed_gids", "root", why, sizeof(why)), 0);
    assert_int_equal(config_set(&f->c, "daemon", "socket_group", "adm", why, sizeof(why)), 0);

    assert_int_equal(config_copy(&copy, &f->c), 0);
    assert_int_equal(copy.allowed_uids.n, 3);
    assert_true(copy.allowed_uids.ids != f->c.allowed_uids.ids);
    assert_string_equal(copy.socket_group, "adm");
    config_free(&copy);

    assert_int_equal(config_set(&f->c, "limits", "memory_limit_bytes", "1M", why, sizeof(why)),
                     0);
    assert_int_equal(config_check(&f->c, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "memory_limit_bytes"));
}

/* The operator keys: where the admin socket is, and the metrics file. */
static void test_admin_and_metrics_keys(void **state)
{
    struct fixture *f = *state;
    char why[256];

    assert_int_equal(config_set(&f->c, "daemon", "admin_socket", "/tmp/a.sock", why,
                                sizeof(why)),
                     0);
    assert_string_equal(f->c.admin_socket, "/tmp/a.sock");
    assert_int_equal(config_set(&f->c, "daemon", "admin_socket", "", why, sizeof(why)), -EINVAL);
    assert_string_equal(f->c.admin_socket, "/tmp/a.sock");
    assert_int_equal(config_set(&f->c, "daemon", "metrics_file", "/tmp/m.prom", why,
                                sizeof(why)),
                     0);
    assert_string_equal(f->c.metrics_file, "/tmp/m.prom");
    assert_int_equal(config_set(&f->c, "daemon", "metrics_interval_s", "30", why, sizeof(why)),
                     0);
    assert_true(f->c.metrics_interval_ms == 30000);
    assert_int_equal(config_set(&f->c, "daemon", "metrics_interval_s", "1h", why, sizeof(why)),
                     0);
    assert_true(f->c.metrics_interval_ms == 3600000);
    assert_int_equal(config_set(&f->c, "daemon", "metrics_interval_s", "500ms", why,
                                sizeof(why)),
                     -ERANGE);
    assert_string_equal(why, "metrics_interval_s: 500ms is out of range (1000 to 3600000 ms)");
    assert_int_equal(config_set(&f->c, "daemon", "metrics_interval_s", "2h", why, sizeof(why)),
                     -ERANGE);
    assert_true(f->c.metrics_interval_ms == 3600000);
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

static void test_key_at(void **state)
{
    static const char *const want[][2] = {
        { "daemon", "spool" }, { "daemon", "socket" }, { "daemon", "socket_mode" },
        { "daemon", "io_backend" }, { "daemon", "socket_group" },
        { "daemon", "admin_socket" }, { "daemon", "metrics_file" },
        { "daemon", "metrics_interval_s" }, { "sync", "fsync" },
        { "sync", "fsync_interval" },
        { "limits", "max_record_bytes" }, { "limits", "max_frame_bytes" },
        { "limits", "session_buffer_bytes" }, { "limits", "max_producers" },
        { "limits", "max_producers_per_uid" }, { "limits", "memory_limit_bytes" },
        { "limits", "max_open_shards" }, { "limits", "hello_timeout_ms" },
        { "limits", "idle_timeout_ms" }, { "access", "allowed_uids" },
        { "access", "allowed_gids" }, { "shard", "max_shard_bytes" },
        { "shard", "max_shard_age" },
    };
    const char *section = "x", *key = "y";
    size_t n = sizeof(want) / sizeof(want[0]);
    (void)state;

    for (size_t i = 0; i < n; i++) {
        assert_int_equal(config_key_at(i, &section, &key), 0);
        assert_string_equal(section, want[i][0]);
        assert_string_equal(key, want[i][1]);
    }
    section = key = NULL;
    assert_int_equal(config_key_at(n, &section, &key), -ENOENT);
    assert_int_equal(config_key_at((size_t)-1, &section, &key), -ENOENT);
    assert_null(section);
    assert_null(key);
}

/* The example file: loads cleanly, names every key in its own section, and
 * each commented-out value is the embedded default. */
static void test_example_file(void **state)
{
    const char *path = SOURCE_ROOT "/config/logshard.conf";
    struct fixture *f = *state;
    struct config defaults, from_comments;
    char err[512] = "";
    char line[512];
    char section[512] = "";
    size_t nkeys = 0;
    bool seen[64] = { false };
    FILE *fp;

    assert_int_equal(config_load(&f->c, path, err, sizeof(err)), 0);
    assert_int_equal(config_init(&defaults), 0);
    assert_config_equal(&f->c, &defaults);
    assert_int_equal(config_check(&f->c, err, sizeof(err)), 0);

    for (const char *s, *k; config_key_at(nkeys, &s, &k) == 0;)
        nkeys++;
    assert_true(nkeys > 0 && nkeys <= 64);

    /* Start from values nothing would choose, then apply every commented
     * value: the result must be the defaults. */
    assert_int_equal(config_init(&from_comments), 0);
    free(from_comments.spool);
    free(from_comments.socket_path);
    from_comments.spool = strdup("/unset");
    from_comments.socket_path = strdup("/unset");
    from_comments.socket_mode = from_comments.max_record_bytes = 1;
    from_comments.max_frame_bytes = from_comments.session_buffer_bytes = 1;
    from_comments.max_shard_bytes = from_comments.max_shard_age_ms = 1;
    from_comments.metrics_interval_ms = 1;
    free(from_comments.admin_socket);
    from_comments.admin_socket = strdup("/unset");

    fp = fopen(path, "re");
    assert_non_null(fp);
    while (fgets(line, sizeof(line), fp)) {
        char *p = line, *eq, *name_end, *value;

        assert_non_null(strchr(line, '\n'));
        p[strcspn(p, "\n")] = '\0';
        if (*p == '[') {
            char *close = strchr(p, ']');
            assert_non_null(close);
            *close = '\0';
            snprintf(section, sizeof(section), "%s", p + 1);
            continue;
        }
        if (*p == '#' || *p == ';')
            p++;
        p += strspn(p, " ");
        for (size_t i = 0; i < nkeys; i++) {
            const char *s, *k;
            size_t kl;

            assert_int_equal(config_key_at(i, &s, &k), 0);
            kl = strlen(k);
            if (strncmp(p, k, kl) != 0)
                continue;
            name_end = p + kl;
            eq = name_end + strspn(name_end, " ");
            if (*eq != '=')
                continue;
            if (strcmp(section, s) != 0)
                fail_msg("%s: '%s =' under [%s], not [%s]", path, k, section, s);
            if (seen[i])
                fail_msg("%s: '%s =' listed twice", path, k);
            seen[i] = true;
            value = eq + 1 + strspn(eq + 1, " ");
            if (config_set(&from_comments, s, k, value, err, sizeof(err)) != 0)
                fail_msg("%s: %s = %s: %s", path, k, value, err);
        }
    }
    assert_int_equal(fclose(fp), 0);
    for (size_t i = 0; i < nkeys; i++) {
        const char *s, *k;
        assert_int_equal(config_key_at(i, &s, &k), 0);
        if (!seen[i])
            fail_msg("%s does not mention [%s] %s", path, s, k);
    }
    assert_config_equal(&from_comments, &defaults);
    config_free(&from_comments);
    config_free(&defaults);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_enum_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limit_and_access_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_nul_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_failure_keeps_settings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_missing_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_unreadable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_indented_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_long_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_long_comment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_names_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_duplicate_key, setup, teardown),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_uint),
        cmocka_unit_test(test_parse_uint_other_whitespace),
        cmocka_unit_test_setup_teardown(test_admin_and_metrics_keys, setup, teardown),
        cmocka_unit_test(test_key_at),
        cmocka_unit_test_setup_teardown(test_example_file, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
