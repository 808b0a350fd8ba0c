/* The configuration: one table describes every key (section, name, kind,
 * bounds), so the file parser, the command line and the tests agree on what
 * exists. Values are parsed strictly: a stray character is an error, never
 * silently ignored. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <ctype.h>
#include <fnmatch.h>
#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shard_format.h"
#include "wire.h"

enum key_kind {
    KEY_PATH,
    KEY_PATH_OR_OFF, /* a path, or empty for "off" (stored as NULL) */
    KEY_STRING, /* any non-empty text */
    KEY_SIZE,
    KEY_DURATION,
    KEY_DURATION_MS, /* a bare number means milliseconds */
    KEY_COUNT,
    KEY_MODE,
    KEY_ENUM,
    KEY_UID_LIST,
    KEY_GID_LIST,
};

struct key_spec {
    const char *section;
    const char *name;
    enum key_kind kind;
    size_t offset;
    uint64_t min, max;
    const char *const *choices; /* KEY_ENUM: the value is the index */
};

static const char *const fsync_policy_names[] = { "none", "interval", "batch", "always", NULL };
static const char *const io_backend_names[] = { "auto", "uring", "threads", NULL };
static const char *const sync_method_names[] = { "auto", "fdatasync", "syncfs", "one-flush",
                                                      NULL };
static const char *const ship_compression_names[] = { "none", "gzip", "snappy", "lz4", "zstd",
                                                      NULL };
static const char *const ship_on_shipped_names[] = { "keep", "delete", NULL };
static const char *const over_quota_names[] = { "wait", "refuse", NULL };

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

static const struct key_spec keys[] = {
    { "daemon", "spool", KEY_PATH, offsetof(struct config, spool), 0, 0, NULL },
    { "daemon", "socket", KEY_PATH, offsetof(struct config, socket_path), 0, 0, NULL },
    { "daemon", "socket_mode", KEY_MODE, offsetof(struct config, socket_mode), 0, 07777, NULL },
    { "daemon", "io_backend", KEY_ENUM, offsetof(struct config, io_backend), 0, 2,
      io_backend_names },
    { "daemon", "socket_group", KEY_STRING, offsetof(struct config, socket_group), 0, 0, NULL },
    { "daemon", "admin_socket", KEY_PATH, offsetof(struct config, admin_socket), 0, 0, NULL },
    { "daemon", "metrics_file", KEY_PATH, offsetof(struct config, metrics_file), 0, 0, NULL },
    { "daemon", "metrics_interval_s", KEY_DURATION, offsetof(struct config, metrics_interval_ms),
      1000, 3600ull * 1000, NULL },
    { "sync", "fsync", KEY_ENUM, offsetof(struct config, fsync_policy), 0, 3,
      fsync_policy_names },
    { "sync", "fsync_interval", KEY_DURATION, offsetof(struct config, fsync_interval_ms), 1,
      3600ull * 1000, NULL },
    { "sync", "sync_method", KEY_ENUM, offsetof(struct config, sync_method), 0, 3,
      sync_method_names },
    { "limits", "max_record_bytes", KEY_SIZE, offsetof(struct config, max_record_bytes), 1,
      WIRE_MAX_RECORD_BYTES, NULL },
    { "limits", "max_frame_bytes", KEY_SIZE, offsetof(struct config, max_frame_bytes),
      4 * KIB, WIRE_MAX_FRAME_BYTES, NULL },
    { "limits", "session_buffer_bytes", KEY_SIZE,
      offsetof(struct config, session_buffer_bytes), 64 * KIB, 64 * GIB, NULL },
    { "limits", "max_producers", KEY_COUNT, offsetof(struct config, max_producers), 1, 1000000,
      NULL },
    { "limits", "max_producers_per_uid", KEY_COUNT,
      offsetof(struct config, max_producers_per_uid), 0, 1000000, NULL },
    { "limits", "memory_limit_bytes", KEY_SIZE, offsetof(struct config, memory_limit_bytes),
      1 * MIB, 1024 * GIB, NULL },
    { "limits", "max_open_shards", KEY_COUNT, offsetof(struct config, max_open_shards), 1,
      1000000, NULL },
    { "limits", "hello_timeout_ms", KEY_DURATION_MS, offsetof(struct config, hello_timeout_ms),
      10, 3600ull * 1000, NULL },
    { "limits", "idle_timeout_ms", KEY_DURATION_MS, offsetof(struct config, idle_timeout_ms), 10,
      24ull * 3600 * 1000, NULL },
    { "limits", "producer_quota_bytes", KEY_SIZE,
      offsetof(struct config, producer_quota_bytes), 0, UINT64_MAX, NULL },
    { "limits", "over_quota", KEY_ENUM, offsetof(struct config, over_quota), 0, 1,
      over_quota_names },
    { "limits", "spool_budget_bytes", KEY_SIZE, offsetof(struct config, spool_budget_bytes), 0,
      UINT64_MAX, NULL },
    { "limits", "spool_min_free_bytes", KEY_SIZE,
      offsetof(struct config, spool_min_free_bytes), 0, UINT64_MAX, NULL },
    { "access", "allowed_uids", KEY_UID_LIST, offsetof(struct config, allowed_uids), 0, 0, NULL },
    { "access", "allowed_gids", KEY_GID_LIST, offsetof(struct config, allowed_gids), 0, 0, NULL },
    { "streams", "resume_window", KEY_DURATION, offsetof(struct config, resume_window_ms),
      1000, 365ull * 24 * 3600 * 1000, NULL },
    { "streams", "max_streams", KEY_COUNT, offsetof(struct config, max_streams), 16,
      100000000, NULL },
    { "shard", "max_shard_bytes", KEY_SIZE, offsetof(struct config, max_shard_bytes),
      4 * KIB, 1024 * GIB, NULL },
    { "shard", "max_shard_age", KEY_DURATION, offsetof(struct config, max_shard_age_ms), 1000,
      365ull * 24 * 3600 * 1000, NULL },
    { "syslog", "datagram_socket", KEY_PATH_OR_OFF,
      offsetof(struct config, syslog_datagram_socket), 0, 0, NULL },
    { "syslog", "stream_socket", KEY_PATH_OR_OFF, offsetof(struct config, syslog_stream_socket),
      0, 0, NULL },
    { "syslog", "idle_timeout", KEY_DURATION, offsetof(struct config, syslog_idle_ms), 100,
      24ull * 3600 * 1000, NULL },
    { "syslog", "max_producers", KEY_COUNT, offsetof(struct config, syslog_max_producers), 1,
      1000000, NULL },
    { "ship", "brokers", KEY_STRING, offsetof(struct config, ship_brokers), 0, 0, NULL },
    { "ship", "topic", KEY_STRING, offsetof(struct config, ship_topic), 0, 0, NULL },
    { "ship", "progress_topic", KEY_STRING, offsetof(struct config, ship_progress_topic), 0, 0,
      NULL },
    { "ship", "transactional_id", KEY_STRING, offsetof(struct config, ship_transactional_id), 0,
      0, NULL },
    { "ship", "metrics_file", KEY_PATH, offsetof(struct config, ship_metrics_file), 0, 0, NULL },
    { "ship", "transaction_records", KEY_COUNT,
      offsetof(struct config, ship_transaction_records), 1, 10000000, NULL },
    { "ship", "transaction_interval", KEY_DURATION_MS,
      offsetof(struct config, ship_transaction_interval_ms), 1, 600000, NULL },
    { "ship", "poll_interval", KEY_DURATION_MS, offsetof(struct config, ship_poll_interval_ms),
      1, 60000, NULL },
    { "ship", "compression", KEY_ENUM, offsetof(struct config, ship_compression), 0, 4,
      ship_compression_names },
    { "ship", "linger_ms", KEY_DURATION_MS, offsetof(struct config, ship_linger_ms), 0, 900000,
      NULL },
    { "ship", "on_shipped", KEY_ENUM, offsetof(struct config, ship_on_shipped), 0, 1,
      ship_on_shipped_names },
    { "retention", "merged_dir", KEY_PATH, offsetof(struct config, retention_merged_dir), 0, 0,
      NULL },
    { "retention", "merged_max_age", KEY_DURATION,
      offsetof(struct config, retention_merged_max_age_ms), 0, 100ull * 365 * 24 * 3600 * 1000,
      NULL },
    { "retention", "merged_max_bytes", KEY_SIZE,
      offsetof(struct config, retention_merged_max_bytes), 0, UINT64_MAX, NULL },
    { "retention", "shipped_max_age", KEY_DURATION,
      offsetof(struct config, retention_shipped_max_age_ms), 0, 100ull * 365 * 24 * 3600 * 1000,
      NULL },
    { "retention", "shipped_max_bytes", KEY_SIZE,
      offsetof(struct config, retention_shipped_max_bytes), 0, UINT64_MAX, NULL },
};

#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

_Static_assert(N_KEYS <= CONFIG_MAX_KEYS, "struct config has no room for every key's origin");
_Static_assert(WIRE_MAX_RECORD_BYTES == SHARD_RECORD_MAX,
               "a record the protocol lets in must fit a shard");

int config_init(struct config *c)
{
    memset(c, 0, sizeof(*c));
    c->spool = strdup(CONFIG_DEFAULT_SPOOL);
    c->socket_path = strdup(CONFIG_DEFAULT_SOCKET);
    c->admin_socket = strdup(CONFIG_DEFAULT_ADMIN_SOCKET);
    c->metrics_interval_ms = 15000;
    c->socket_mode = 0660;
    c->max_record_bytes = 1 * MIB;
    c->max_frame_bytes = 4 * MIB;
    c->session_buffer_bytes = 8 * MIB;
    c->max_shard_bytes = 64 * MIB;
    c->max_shard_age_ms = 3600ull * 1000;
    c->fsync_policy = FSYNC_BATCH;
    c->fsync_interval_ms = 1000;
    c->sync_method = SYNC_METHOD_AUTO;
    c->io_backend = IO_BACKEND_AUTO;
    c->max_producers = 4096;
    c->max_producers_per_uid = 0;
    c->memory_limit_bytes = 256 * MIB;
    c->max_open_shards = 4096;
    c->hello_timeout_ms = 10000;
    c->idle_timeout_ms = 60000;
    c->resume_window_ms = 3600ull * 1000;
    c->syslog_idle_ms = 60000;
    c->syslog_max_producers = 1024;
    c->max_streams = 100000;
    c->ship_topic = strdup("logshard");
    c->ship_progress_topic = strdup("logshard-ship-progress");
    c->ship_transaction_records = 100000;
    c->ship_transaction_interval_ms = 200;
    c->ship_poll_interval_ms = 100;
    c->ship_compression = SHIP_COMPRESSION_LZ4;
    c->ship_linger_ms = 5;
    c->ship_on_shipped = SHIP_KEEP;
    if (!c->spool || !c->socket_path || !c->admin_socket || !c->ship_topic ||
        !c->ship_progress_topic) {
        config_free(c);
        return -ENOMEM;
    }
    return 0;
}

void config_free(struct config *c)
{
    free(c->spool);
    free(c->socket_path);
    free(c->socket_group);
    free(c->admin_socket);
    free(c->metrics_file);
    free(c->syslog_datagram_socket);
    c->syslog_datagram_socket = NULL;
    free(c->syslog_stream_socket);
    c->syslog_stream_socket = NULL;
    free(c->allowed_uids.ids);
    free(c->allowed_gids.ids);
    free(c->origin_file);
    free(c->ship_brokers);
    free(c->ship_topic);
    free(c->ship_progress_topic);
    free(c->ship_transactional_id);
    free(c->ship_metrics_file);
    for (size_t i = 0; i < c->ship_kafka.n; i++) {
        free(c->ship_kafka.v[i].key);
        free(c->ship_kafka.v[i].value);
    }
    free(c->ship_kafka.v);
    c->ship_kafka = (struct config_kafka_list){ NULL, 0 };
    for (size_t i = 0; i < c->producer_quotas.n; i++)
        free(c->producer_quotas.v[i].pattern);
    free(c->producer_quotas.v);
    c->producer_quotas = (struct config_quota_list){ NULL, 0 };
    free(c->retention_merged_dir);
    c->retention_merged_dir = NULL;
    c->ship_brokers = c->ship_topic = c->ship_progress_topic = NULL;
    c->ship_transactional_id = c->ship_metrics_file = NULL;
    c->origin_file = NULL;
    c->socket_group = NULL;
    c->admin_socket = c->metrics_file = NULL;
    c->allowed_uids = (struct config_id_list){ NULL, 0 };
    c->allowed_gids = (struct config_id_list){ NULL, 0 };
    c->spool = c->socket_path = NULL;
}

static int dup_ids(struct config_id_list *dst, const struct config_id_list *src)
{
    dst->ids = NULL;
    dst->n = src->n;
    if (!src->n)
        return 0;
    dst->ids = malloc(src->n * sizeof(uint32_t));
    if (!dst->ids)
        return -ENOMEM;
    memcpy(dst->ids, src->ids, src->n * sizeof(uint32_t));
    return 0;
}

static int dup_string(char **dst, const char *src)
{
    *dst = NULL;
    if (!src)
        return 0;
    *dst = strdup(src);
    return *dst ? 0 : -ENOMEM;
}

static int dup_kafka(struct config_kafka_list *dst, const struct config_kafka_list *src)
{
    *dst = (struct config_kafka_list){ NULL, 0 };
    if (!src->n)
        return 0;
    dst->v = calloc(src->n, sizeof(*dst->v));
    if (!dst->v)
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->n++;
        dst->v[i].line = src->v[i].line;
        if (dup_string(&dst->v[i].key, src->v[i].key) < 0 ||
            dup_string(&dst->v[i].value, src->v[i].value) < 0)
            return -ENOMEM;
    }
    return 0;
}

static int dup_quotas(struct config_quota_list *dst, const struct config_quota_list *src)
{
    *dst = (struct config_quota_list){ NULL, 0 };
    if (!src->n)
        return 0;
    dst->v = calloc(src->n, sizeof(*dst->v));
    if (!dst->v)
        return -ENOMEM;
    for (size_t i = 0; i < src->n; i++) {
        dst->n++;
        dst->v[i] = src->v[i];
        if (dup_string(&dst->v[i].pattern, src->v[i].pattern) < 0)
            return -ENOMEM;
    }
    return 0;
}

int config_copy(struct config *dst, const struct config *src)
{
    *dst = *src;
    dst->ship_brokers = dst->ship_topic = dst->ship_progress_topic = NULL;
    dst->ship_transactional_id = dst->ship_metrics_file = NULL;
    dst->ship_kafka = (struct config_kafka_list){ NULL, 0 };
    dst->producer_quotas = (struct config_quota_list){ NULL, 0 };
    dst->retention_merged_dir = NULL;
    dst->spool = strdup(src->spool);
    dst->socket_path = strdup(src->socket_path);
    dst->socket_group = src->socket_group ? strdup(src->socket_group) : NULL;
    dst->admin_socket = src->admin_socket ? strdup(src->admin_socket) : NULL;
    dst->metrics_file = src->metrics_file ? strdup(src->metrics_file) : NULL;
    dst->syslog_datagram_socket = NULL;
    dst->syslog_stream_socket = NULL;
    dst->origin_file = src->origin_file ? strdup(src->origin_file) : NULL;
    dst->allowed_uids = (struct config_id_list){ NULL, 0 };
    dst->allowed_gids = (struct config_id_list){ NULL, 0 };
    if (!dst->spool || !dst->socket_path || (src->socket_group && !dst->socket_group) ||
        (src->admin_socket && !dst->admin_socket) || (src->metrics_file && !dst->metrics_file) ||
        (src->origin_file && !dst->origin_file) ||
        dup_ids(&dst->allowed_uids, &src->allowed_uids) < 0 ||
        dup_ids(&dst->allowed_gids, &src->allowed_gids) < 0 ||
        dup_string(&dst->syslog_datagram_socket, src->syslog_datagram_socket) < 0 ||
        dup_string(&dst->syslog_stream_socket, src->syslog_stream_socket) < 0 ||
        dup_string(&dst->ship_brokers, src->ship_brokers) < 0 ||
        dup_string(&dst->ship_topic, src->ship_topic) < 0 ||
        dup_string(&dst->ship_progress_topic, src->ship_progress_topic) < 0 ||
        dup_string(&dst->ship_transactional_id, src->ship_transactional_id) < 0 ||
        dup_string(&dst->ship_metrics_file, src->ship_metrics_file) < 0 ||
        dup_kafka(&dst->ship_kafka, &src->ship_kafka) < 0 ||
        dup_quotas(&dst->producer_quotas, &src->producer_quotas) < 0 ||
        dup_string(&dst->retention_merged_dir, src->retention_merged_dir) < 0) {
        config_free(dst);
        return -ENOMEM;
    }
    return 0;
}

int config_id_list_contains(const struct config_id_list *l, uint32_t id)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->ids[i] == id)
            return 1;
    return 0;
}

static const struct key_spec *find_key(const char *section, const char *key,
                                       bool *ret_section_known)
{
    *ret_section_known = false;
    for (size_t i = 0; i < N_KEYS; i++) {
        if (strcmp(keys[i].section, section) != 0)
            continue;
        *ret_section_known = true;
        if (strcmp(keys[i].name, key) == 0)
            return &keys[i];
    }
    return NULL;
}

/* Looks a key up, with the message config_set gives for an unknown one. */
static const struct key_spec *lookup_key(const char *section, const char *key, char *why,
                                         size_t why_len)
{
    bool section_known;
    const struct key_spec *k = find_key(section, key, &section_known);

    if (!k) {
        if (section_known)
            snprintf(why, why_len, "unknown key '%s' in section [%s]", key, section);
        else
            snprintf(why, why_len, "unknown section [%s]", section);
    }
    return k;
}

/* Parses value for key k and stores it in c; c is untouched on failure. */
static int set_value(struct config *c, const struct key_spec *k, const char *value, char *why,
                     size_t why_len)
{
    const char *key = k->name;
    uint64_t v = 0;
    int r;

    switch (k->kind) {
    case KEY_PATH_OR_OFF: {
        char **slot = (char **)((char *)c + k->offset);
        char *copy = NULL;

        /* Empty turns the input off, so that a file can say so plainly and
         * the command line can turn off what the file turned on. */
        if (*value) {
            copy = strdup(value);
            if (!copy) {
                snprintf(why, why_len, "out of memory");
                return -ENOMEM;
            }
        }
        free(*slot);
        *slot = copy;
        return 0;
    }
    case KEY_PATH:
    case KEY_STRING: {
        char **slot = (char **)((char *)c + k->offset);
        char *copy;

        if (!*value) {
            snprintf(why, why_len, "%s: empty %s", key, k->kind == KEY_PATH ? "path" : "value");
            return -EINVAL;
        }
        copy = strdup(value);
        if (!copy) {
            snprintf(why, why_len, "out of memory");
            return -ENOMEM;
        }
        free(*slot);
        *slot = copy;
        return 0;
    }
    case KEY_UID_LIST:
    case KEY_GID_LIST: {
        struct config_id_list *slot = (struct config_id_list *)((char *)c + k->offset);
        struct config_id_list l;

        r = parse_id_list(value, k->kind == KEY_GID_LIST, &l, why, why_len, key);
        if (r < 0)
            return r;
        free(slot->ids);
        *slot = l;
        return 0;
    }
    case KEY_COUNT:
        r = parse_uint(value, 10, &v);
        if (r < 0 || !isdigit((unsigned char)*value)) {
            snprintf(why, why_len, "%s: '%s' is not a whole number", key, value);
            return r < 0 ? r : -EINVAL;
        }
        break;
    case KEY_DURATION_MS:
        r = parse_uint(value, 10, &v);
        if (r < 0 || !isdigit((unsigned char)*value))
            r = parse_duration_ms(value, &v);
        if (r < 0) {
            snprintf(why, why_len,
                     "%s: '%s' is not a duration (milliseconds, or a number with ms, s, m, "
                     "h or d)",
                     key, value);
            return r;
        }
        break;
    case KEY_SIZE:
        r = parse_size(value, &v);
        if (r < 0) {
            snprintf(why, why_len,
                     "%s: '%s' is not a size (a number with an optional K, M, G or T suffix)",
                     key, value);
            return r;
        }
        break;
    case KEY_DURATION:
        r = parse_duration_ms(value, &v);
        if (r < 0) {
            snprintf(why, why_len,
                     "%s: '%s' is not a duration (a number with ms, s, m, h or d)", key,
                     value);
            return r;
        }
        break;
    case KEY_ENUM: {
        size_t n = 0;
        char list[128] = "";

        for (; k->choices[n]; n++)
            if (strcmp(value, k->choices[n]) == 0)
                break;
        if (!k->choices[n]) {
            for (size_t i = 0; k->choices[i]; i++) {
                strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
                strncat(list, k->choices[i], sizeof(list) - strlen(list) - 1);
            }
            snprintf(why, why_len, "%s: '%s' is not one of %s", key, value, list);
            return -EINVAL;
        }
        v = n;
        break;
    }
    case KEY_MODE:
        r = parse_uint(value, 8, &v);
        if (r < 0) {
            snprintf(why, why_len, "%s: '%s' is not an octal file mode", key, value);
            return r;
        }
        break;
    }
    if (v < k->min || v > k->max) {
        snprintf(why, why_len, "%s: %s is out of range (%llu to %llu%s)", key, value,
                 (unsigned long long)k->min, (unsigned long long)k->max,
                 k->kind == KEY_DURATION || k->kind == KEY_DURATION_MS ? " ms"
                 : k->kind == KEY_SIZE                                ? " bytes"
                                                                      : "");
        return -ERANGE;
    }
    *(uint64_t *)((char *)c + k->offset) = v;
    return 0;
}

int config_set(struct config *c, const char *section, const char *key, const char *value,
               char *why, size_t why_len)
{
    const struct key_spec *k = lookup_key(section, key, why, why_len);
    int r;

    if (!k)
        return -ENOENT;
    r = set_value(c, k, value, why, why_len);
    if (r == 0)
        c->origin_line[k - keys] = CONFIG_ORIGIN_COMMAND_LINE;
    return r;
}

struct load_ctx {
    struct config *c;
    FILE *file;
    int line;       /* lines handed to the parser so far */
    int error_line; /* where ctx.error was found */
    uint32_t seen_line[CONFIG_MAX_KEYS]; /* where each key was set in this file */
    char why[512];
    int error;
};

static void set_error(struct load_ctx *ctx, int error)
{
    ctx->error = error;
    ctx->error_line = ctx->line;
}

/* Feeds the parser one line at a time so that errors found by the handler
 * carry the right line number. It also keeps inih from guessing: leading
 * blanks are removed (inih would take an indented line as the continuation
 * of the previous value), a line too long for inih's buffer is an error
 * instead of being split in two, and a section header with no keys under it
 * is still checked. */
static char *read_config_line(char *buf, int size, void *stream)
{
    struct load_ctx *ctx = stream;
    char *s = buf;
    size_t len = 0, blanks;
    bool nul = false;
    int c = EOF;

    /* Read by hand rather than with fgets, which cannot tell a NUL byte in
     * the line from its end: a NUL would silently cut the value short. */
    while (len + 1 < (size_t)size && (c = getc(ctx->file)) != EOF) {
        if (c == '\0') {
            nul = true;
            c = ' ';
        }
        buf[len++] = (char)c;
        if (c == '\n')
            break;
    }
    buf[len] = '\0';
    if (len == 0 && c == EOF)
        return NULL;
    ctx->line++;
    if (nul && !ctx->error) {
        snprintf(ctx->why, sizeof(ctx->why), "NUL byte in the line");
        set_error(ctx, -EINVAL);
    }
    if (len == (size_t)size - 1 && s[len - 1] != '\n' && !feof(ctx->file)) {
        bool comment = s[strspn(s, " \t")] == '#' || s[strspn(s, " \t")] == ';';

        while ((c = getc(ctx->file)) != EOF && c != '\n')
            ;
        if (!comment && !ctx->error) {
            snprintf(ctx->why, sizeof(ctx->why), "line longer than %d bytes", size - 2);
            set_error(ctx, -EINVAL);
        }
        if (comment) { /* the part kept is still a comment */
            s[0] = '#';
            s[1] = '\0';
        }
    }
    blanks = strspn(s, " \t");
    if (blanks)
        memmove(s, s + blanks, strlen(s + blanks) + 1);
    if (*s == '[' && !ctx->error) {
        const char *close = strchr(s, ']');
        bool known = false;

        if (close) {
            size_t n = (size_t)(close - s - 1);
            for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                if (strlen(keys[i].section) == n && strncmp(keys[i].section, s + 1, n) == 0)
                    known = true;
            if (n == strlen("producer_quotas") && strncmp(s + 1, "producer_quotas", n) == 0)
                known = true; /* its keys are name patterns */
            if (!known) {
                snprintf(ctx->why, sizeof(ctx->why), "unknown section [%.*s]", (int)n, s + 1);
                set_error(ctx, -ENOENT);
            }
        }
    }
    return s;
}

static int handle_config_entry(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *ctx = user;
    const struct key_spec *k;
    int r;

    if (ctx->error)
        return 0;
    if (!name) /* a section header alone; read_config_line has checked it */
        return 1;
    if (!*section) {
        snprintf(ctx->why, sizeof(ctx->why), "key '%s' outside of any section", name);
        set_error(ctx, -EINVAL);
        return 0;
    }
    if (strcmp(section, "producer_quotas") == 0) {
        for (size_t i = 0; i < ctx->c->producer_quotas.n; i++)
            if (strcmp(ctx->c->producer_quotas.v[i].pattern, name) == 0 &&
                ctx->c->producer_quotas.v[i].line != 0) {
                snprintf(ctx->why, sizeof(ctx->why),
                         "pattern '%s' in [producer_quotas] already set on line %u", name,
                         (unsigned)ctx->c->producer_quotas.v[i].line);
                set_error(ctx, -EINVAL);
                return 0;
            }
        r = config_add_producer_quota(ctx->c, name, value ? value : "", (uint32_t)ctx->line,
                                      ctx->why, sizeof(ctx->why));
        if (r < 0) {
            set_error(ctx, r);
            return 0;
        }
        return 1;
    }
    k = lookup_key(section, name, ctx->why, sizeof(ctx->why));
    if (!k && strcmp(section, "ship") == 0 && strchr(name, '.')) {
        /* A librdkafka property: librdkafka itself judges it when the
         * shipper starts, and its refusal names this line. */
        for (size_t i = 0; i < ctx->c->ship_kafka.n; i++)
            if (strcmp(ctx->c->ship_kafka.v[i].key, name) == 0 &&
                ctx->c->ship_kafka.v[i].line != 0 &&
                ctx->c->ship_kafka.v[i].line != CONFIG_ORIGIN_COMMAND_LINE) {
                snprintf(ctx->why, sizeof(ctx->why), "key '%s' in [ship] already set on line %u",
                         name, (unsigned)ctx->c->ship_kafka.v[i].line);
                set_error(ctx, -EINVAL);
                return 0;
            }
        r = config_set_kafka(ctx->c, name, value ? value : "", (uint32_t)ctx->line);
        if (r < 0) {
            snprintf(ctx->why, sizeof(ctx->why), "out of memory");
            set_error(ctx, r);
            return 0;
        }
        return 1;
    }
    if (!k) {
        if (strcmp(section, "ship") == 0)
            snprintf(ctx->why, sizeof(ctx->why),
                     "unknown key '%s' in section [ship] (a librdkafka property has a dot in "
                     "its name, like linger.ms)",
                     name);
        set_error(ctx, -ENOENT);
        return 0;
    }
    /* Last-wins would let an earlier line be ignored without a word, and
     * an operator who edits that line would see no effect. */
    if (ctx->seen_line[k - keys]) {
        snprintf(ctx->why, sizeof(ctx->why), "key '%s' in [%s] already set on line %u", name,
                 section, (unsigned)ctx->seen_line[k - keys]);
        set_error(ctx, -EINVAL);
        return 0;
    }
    r = set_value(ctx->c, k, value ? value : "", ctx->why, sizeof(ctx->why));
    if (r < 0) {
        set_error(ctx, r);
        return 0;
    }
    ctx->seen_line[k - keys] = (uint32_t)ctx->line;
    ctx->c->origin_line[k - keys] = (uint32_t)ctx->line;
    return 1;
}

int config_load(struct config *c, const char *path, char *err, size_t err_len)
{
    struct config work;
    struct load_ctx ctx = { .c = &work };
    int line, read_errno = EIO;

    /* Parse into a copy so a bad file leaves the running settings alone. */
    if (config_copy(&work, c) < 0) {
        snprintf(err, err_len, "%s: out of memory", path);
        return -ENOMEM;
    }
    /* A librdkafka property set by an earlier file is not set by this one:
     * its line no longer counts when this file sets it too. */
    for (size_t i = 0; i < work.ship_kafka.n; i++)
        if (work.ship_kafka.v[i].line != CONFIG_ORIGIN_COMMAND_LINE)
            work.ship_kafka.v[i].line = 0;
    /* The quotas of a file replace those of the file read before it. */
    for (size_t i = 0; i < work.producer_quotas.n; i++)
        free(work.producer_quotas.v[i].pattern);
    free(work.producer_quotas.v);
    work.producer_quotas = (struct config_quota_list){ NULL, 0 };
    ctx.file = fopen(path, "re");
    if (!ctx.file) {
        int e = errno;
        config_free(&work);
        snprintf(err, err_len, "%s: %s", path, strerror(e));
        return -e;
    }
    line = ini_parse_stream(read_config_line, &ctx, handle_config_entry, &ctx);
    if (ferror(ctx.file) && line == 0) {
        read_errno = errno ? errno : EIO;
        line = -1; /* e.g. EISDIR: fgets failing looks like the end of the file */
    }
    fclose(ctx.file);
    if (line == 0 && !ctx.error) {
        char *file = strdup(path);

        if (!file) {
            snprintf(err, err_len, "%s: out of memory", path);
            config_free(&work);
            return -ENOMEM;
        }
        free(work.origin_file);
        work.origin_file = file;
    }
    if (line != 0 || ctx.error) {
        if (line < 0)
            snprintf(err, err_len, "%s: cannot read the file: %s", path, strerror(read_errno));
        else if (ctx.error && (line == 0 || line >= ctx.error_line))
            snprintf(err, err_len, "%s:%d: %s", path, ctx.error_line, ctx.why);
        else
            snprintf(err, err_len,
                     "%s:%d: syntax error (expected '[section]', 'key = value' or a comment)",
                     path, line);
        config_free(&work);
        if (line < 0)
            return -read_errno;
        return ctx.error && (line == 0 || line >= ctx.error_line) ? ctx.error : -EINVAL;
    }
    config_free(c);
    *c = work;
    return 0;
}

/* One key of a cross-key check: its value and where that came from. */
struct check_key {
    const char *name;
    uint64_t value;
    uint32_t line; /* 0, a line of origin_file, or CONFIG_ORIGIN_COMMAND_LINE */
};

static struct check_key check_key(const struct config *c, const char *name)
{
    bool section_known;
    const struct key_spec *k = find_key("limits", name, &section_known);

    assert(k && k->kind == KEY_SIZE);
    return (struct check_key){ name, *(const uint64_t *)((const char *)c + k->offset),
                               c->origin_line[k - keys] };
}

static const char *origin_text(const struct check_key *k, char *buf, size_t len)
{
    if (k->line == 0)
        return "the default";
    if (k->line == CONFIG_ORIGIN_COMMAND_LINE)
        return "the command line";
    snprintf(buf, len, "line %u", (unsigned)k->line);
    return buf;
}

/* "PATH:LINE: a (VALUE, ORIGIN) must TEXT b (VALUE, ORIGIN)TAIL": the
 * location is the later of the two keys' lines in the file, the one where
 * reading the file made the pair disagree. */
static void check_failed(const struct config *c, const struct check_key *a, const char *text,
                         const struct check_key *b, const char *tail, char *err, size_t err_len)
{
    uint32_t la = a->line == CONFIG_ORIGIN_COMMAND_LINE ? 0 : a->line;
    uint32_t lb = b->line == CONFIG_ORIGIN_COMMAND_LINE ? 0 : b->line;
    uint32_t at = la > lb ? la : lb;
    char oa[32], ob[32];
    int n = 0;

    if (at && c->origin_file)
        n = snprintf(err, err_len, "%s:%u: ", c->origin_file, (unsigned)at);
    if (n < 0 || (size_t)n >= err_len)
        return;
    snprintf(err + n, err_len - (size_t)n, "%s (%llu, %s) %s %s (%llu, %s)%s", a->name,
             (unsigned long long)a->value, origin_text(a, oa, sizeof(oa)), text, b->name,
             (unsigned long long)b->value, origin_text(b, ob, sizeof(ob)), tail);
}

int config_check(const struct config *c, char *err, size_t err_len)
{
    struct check_key record = check_key(c, "max_record_bytes");
    struct check_key frame = check_key(c, "max_frame_bytes");
    struct check_key session = check_key(c, "session_buffer_bytes");
    struct check_key memory = check_key(c, "memory_limit_bytes");
    char tail[96];

    if (frame.value < record.value + WIRE_APPEND_OVERHEAD) {
        snprintf(tail, sizeof(tail), " and its framing (%u bytes)", WIRE_APPEND_OVERHEAD);
        check_failed(c, &frame, "must leave room for one record of", &record, tail, err,
                     err_len);
        return -EINVAL;
    }
    if (session.value < frame.value) {
        check_failed(c, &session, "must be at least", &frame, "", err, err_len);
        return -EINVAL;
    }
    if (memory.value < session.value) {
        check_failed(c, &memory, "must be at least", &session, "", err, err_len);
        return -EINVAL;
    }
    return 0;
}

const char *config_fsync_policy_name(enum fsync_policy p)
{
    return (unsigned)p < 4 ? fsync_policy_names[p] : "unknown";
}

const char *config_ship_compression_name(enum ship_compression c)
{
    return c <= SHIP_COMPRESSION_ZSTD ? ship_compression_names[c] : "?";
}

int config_set_kafka(struct config *c, const char *key, const char *value, uint32_t line)
{
    struct config_kafka_setting *v;
    char *k, *val;

    if (!*key || !strchr(key, '.'))
        return -EINVAL;
    val = strdup(value);
    if (!val)
        return -ENOMEM;
    for (size_t i = 0; i < c->ship_kafka.n; i++)
        if (strcmp(c->ship_kafka.v[i].key, key) == 0) {
            free(c->ship_kafka.v[i].value);
            c->ship_kafka.v[i].value = val;
            c->ship_kafka.v[i].line = line;
            return 0;
        }
    k = strdup(key);
    v = realloc(c->ship_kafka.v, (c->ship_kafka.n + 1) * sizeof(*v));
    if (!k || !v) {
        free(k);
        free(val);
        if (v)
            c->ship_kafka.v = v;
        return -ENOMEM;
    }
    v[c->ship_kafka.n++] = (struct config_kafka_setting){ k, val, line };
    c->ship_kafka.v = v;
    return 0;
}

const char *config_over_quota_name(enum over_quota q)
{
    return (unsigned)q < 2 ? over_quota_names[q] : "unknown";
}

uint64_t config_producer_quota(const struct config *c, const char *name)
{
    for (size_t i = 0; i < c->producer_quotas.n; i++)
        if (fnmatch(c->producer_quotas.v[i].pattern, name, 0) == 0)
            return c->producer_quotas.v[i].bytes;
    return c->producer_quota_bytes;
}

int config_add_producer_quota(struct config *c, const char *pattern, const char *size,
                              uint32_t line, char *why, size_t why_len)
{
    struct config_quota *v;
    uint64_t bytes;
    char *p;

    /* Producer names are [A-Za-z0-9._-]; a pattern is those and the
     * wildcards * ? [ ] !, so that a typo such as a path is an error
     * rather than a line that silently never applies. */
    if (!*pattern || strlen(pattern) > 256 ||
        pattern[strspn(pattern, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789._-*?[]!")] != '\0') {
        snprintf(why, why_len,
                 "'%s' is not a producer name pattern (letters, digits, '.', '_', '-' and the "
                 "wildcards * ? [...])",
                 pattern);
        return -EINVAL;
    }
    if (parse_size(size, &bytes) < 0) {
        snprintf(why, why_len,
                 "%s: '%s' is not a size (a number with an optional K, M, G or T suffix)",
                 pattern, size);
        return -EINVAL;
    }
    p = strdup(pattern);
    v = realloc(c->producer_quotas.v, (c->producer_quotas.n + 1) * sizeof(*v));
    if (!p || !v) {
        free(p);
        if (v)
            c->producer_quotas.v = v;
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    v[c->producer_quotas.n++] = (struct config_quota){ p, bytes, line };
    c->producer_quotas.v = v;
    return 0;
}

const char *config_sync_method_name(enum sync_method m)
{
    return (unsigned)m < 4 ? sync_method_names[m] : "unknown";
}

const char *config_io_backend_name(enum io_backend b)
{
    return (unsigned)b < 3 ? io_backend_names[b] : "unknown";
}

int config_key_at(size_t index, const char **ret_section, const char **ret_key)
{
    if (index >= sizeof(keys) / sizeof(keys[0]))
        return -ENOENT;
    *ret_section = keys[index].section;
    *ret_key = keys[index].name;
    return 0;
}
