/* Unit tests for common/config.c: embedded defaults, config_set for every
 * kind of key, config_check, the key table, and the example
 * config/logshard.conf, which must load cleanly and list every key with its
 * default. config_load is in test-config-load.c, the parsers of sizes,
 * durations and integers in test-config-parse.c. */
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

static void test_key_at(void **state)
{
    static const char *const want[][2] = {
        { "daemon", "spool" }, { "daemon", "socket" }, { "daemon", "socket_mode" },
        { "daemon", "io_backend" }, { "daemon", "socket_group" },
        { "daemon", "admin_socket" }, { "daemon", "metrics_file" },
        { "daemon", "metrics_interval_s" }, { "sync", "fsync" },
        { "sync", "fsync_interval" }, { "sync", "sync_method" },
        { "limits", "max_record_bytes" }, { "limits", "max_frame_bytes" },
        { "limits", "session_buffer_bytes" }, { "limits", "max_producers" },
        { "limits", "max_producers_per_uid" }, { "limits", "memory_limit_bytes" },
        { "limits", "max_open_shards" }, { "limits", "hello_timeout_ms" },
        { "limits", "idle_timeout_ms" }, { "limits", "producer_quota_bytes" },
        { "limits", "over_quota" }, { "limits", "spool_budget_bytes" },
        { "limits", "spool_min_free_bytes" }, { "access", "allowed_uids" },
        { "access", "allowed_gids" }, { "streams", "resume_window" },
        { "streams", "max_streams" }, { "shard", "max_shard_bytes" },
        { "shard", "max_shard_age" }, { "syslog", "datagram_socket" },
        { "syslog", "stream_socket" }, { "syslog", "idle_timeout" }, { "syslog", "max_producers" },
        { "ship", "brokers" }, { "ship", "topic" },
        { "ship", "progress_topic" }, { "ship", "transactional_id" }, { "ship", "metrics_file" },
        { "ship", "transaction_records" }, { "ship", "transaction_interval" },
        { "ship", "poll_interval" }, { "ship", "compression" }, { "ship", "linger_ms" },
        { "ship", "on_shipped" }, { "retention", "merged_dir" },
        { "retention", "merged_max_age" }, { "retention", "merged_max_bytes" },
        { "retention", "shipped_max_age" }, { "retention", "shipped_max_bytes" },
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
    from_comments.ship_transaction_records = from_comments.ship_transaction_interval_ms = 1;
    from_comments.ship_poll_interval_ms = from_comments.ship_linger_ms = 1;
    from_comments.ship_compression = SHIP_COMPRESSION_NONE;
    from_comments.ship_on_shipped = SHIP_DELETE;
    free(from_comments.ship_topic);
    free(from_comments.ship_progress_topic);
    from_comments.ship_topic = strdup("unset");
    from_comments.ship_progress_topic = strdup("unset");
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
            if (strcmp(section, s) != 0) {
                /* The same name in another section (metrics_file): that
                 * one, if any, is this line's key. */
                bool elsewhere = false;

                for (size_t j = 0; j < nkeys; j++) {
                    const char *s2, *k2;

                    assert_int_equal(config_key_at(j, &s2, &k2), 0);
                    elsewhere |= strcmp(k2, k) == 0 && strcmp(s2, section) == 0;
                }
                if (elsewhere)
                    continue;
                fail_msg("%s: '%s =' under [%s], not [%s]", path, k, section, s);
            }
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
    /* [retention] merged_dir is unset by default, which means <spool>/merged;
     * the file shows that path for the default spool. */
    {
        char *merged = NULL;

        assert_true(asprintf(&merged, "%s/merged", defaults.spool) > 0);
        assert_non_null(from_comments.retention_merged_dir);
        assert_string_equal(from_comments.retention_merged_dir, merged);
        free(merged);
        free(from_comments.retention_merged_dir);
        from_comments.retention_merged_dir = NULL;
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
        cmocka_unit_test_setup_teardown(test_set_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_names_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admin_and_metrics_keys, setup, teardown),
        cmocka_unit_test(test_key_at),
        cmocka_unit_test_setup_teardown(test_example_file, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
