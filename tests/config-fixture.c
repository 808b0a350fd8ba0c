/* The fixtures of the tests of common/config.c (tests/test-config*.c), in
 * one place so that every program writes, loads and checks configurations
 * the same way; config-fixture.h says what each one does. */
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

int setup(void **state)
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

int teardown(void **state)
{
    struct fixture *f = *state;

    config_free(&f->c);
    (void)unlink(f->path); /* may not have been written */
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

void write_conf(const struct fixture *f, const char *text)
{
    FILE *fp = fopen(f->path, "we");

    assert_non_null(fp);
    assert_int_equal(fputs(text, fp) >= 0, 1);
    assert_int_equal(fclose(fp), 0);
}

/* Asserts that two configurations hold the same values. */
void assert_config_equal(const struct config *a, const struct config *b)
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
    assert_string_equal(a->ship_topic, b->ship_topic);
    assert_string_equal(a->ship_progress_topic, b->ship_progress_topic);
    assert_true(a->ship_transaction_records == b->ship_transaction_records);
    assert_true(a->ship_transaction_interval_ms == b->ship_transaction_interval_ms);
    assert_true(a->ship_poll_interval_ms == b->ship_poll_interval_ms);
    assert_true(a->ship_compression == b->ship_compression);
    assert_true(a->ship_linger_ms == b->ship_linger_ms);
    assert_true(a->ship_on_shipped == b->ship_on_shipped);
    assert_true(a->producer_quota_bytes == b->producer_quota_bytes);
    assert_true(a->over_quota == b->over_quota);
    assert_true(a->spool_budget_bytes == b->spool_budget_bytes);
    assert_true(a->spool_min_free_bytes == b->spool_min_free_bytes);
    assert_int_equal(a->producer_quotas.n, b->producer_quotas.n);
    for (size_t i = 0; i < a->producer_quotas.n; i++) {
        assert_string_equal(a->producer_quotas.v[i].pattern, b->producer_quotas.v[i].pattern);
        assert_true(a->producer_quotas.v[i].bytes == b->producer_quotas.v[i].bytes);
    }
    assert_true(a->retention_merged_max_age_ms == b->retention_merged_max_age_ms);
    assert_true(a->retention_merged_max_bytes == b->retention_merged_max_bytes);
    assert_true(a->retention_shipped_max_age_ms == b->retention_shipped_max_age_ms);
    assert_true(a->retention_shipped_max_bytes == b->retention_shipped_max_bytes);
}

void assert_defaults(const struct config *c)
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
    assert_true(c->max_producers == 4096);
    assert_true(c->max_producers_per_uid == 0);
    assert_true(c->memory_limit_bytes == 256 * MIB);
    assert_true(c->max_open_shards == 4096);
    assert_true(c->hello_timeout_ms == 10000);
    assert_true(c->idle_timeout_ms == 60000);
    assert_int_equal(c->allowed_uids.n, 0);
    assert_int_equal(c->allowed_gids.n, 0);
}

void set_or_fail(struct config *c, const char *section, const char *key,
                 const char *value)
{
    char why[256] = "";

    if (config_set(c, section, key, value, why, sizeof(why)) != 0)
        fail_msg("[%s] %s = %s: %s", section, key, value, why);
}
