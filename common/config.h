/* Daemon settings: embedded defaults, overridden by the INI file, overridden
 * by the command line. config/logshard.conf lists every key. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CONFIG_DEFAULT_SPOOL "/var/lib/logshard"
#define CONFIG_DEFAULT_SOCKET "/run/logshard/logshard.sock"
#define CONFIG_DEFAULT_ADMIN_SOCKET "/run/logshard/admin.sock"

/* Room for the origins of every key (config_key_at); config.c asserts that
 * its table fits. */
#define CONFIG_MAX_KEYS 64

/* The origin of a key set by config_set outside of a file: the daemon's
 * command line. */
#define CONFIG_ORIGIN_COMMAND_LINE UINT32_MAX

/* When a record counts as acknowledged (docs/PROTOCOL.md, DESIGN.md). The
 * values are also the WELCOME frame's fsync-policy byte. */
enum fsync_policy {
    FSYNC_NONE = 0,     /* ACK after the write; synced only when sealed */
    FSYNC_INTERVAL = 1, /* ACK after the write; synced within fsync_interval */
    FSYNC_BATCH = 2,    /* ACK after an fdatasync that covers it; shared */
    FSYNC_ALWAYS = 3,   /* ACK after an fdatasync of its own frame */
};

/* What logctl ship does with a sealed shard once every record of it is
 * committed to Kafka (docs/SHIP.md). */
enum ship_on_shipped {
    SHIP_KEEP = 0,  /* leave it for logctl merge (which then may delete it) */
    SHIP_DELETE = 1 /* delete it, its stream positions recorded first */
};

enum ship_compression {
    SHIP_COMPRESSION_NONE = 0,
    SHIP_COMPRESSION_GZIP = 1,
    SHIP_COMPRESSION_SNAPPY = 2,
    SHIP_COMPRESSION_LZ4 = 3,
    SHIP_COMPRESSION_ZSTD = 4,
};

/* One librdkafka property of [ship] ("linger.ms = 20"), passed through to
 * the producer as it is, and where it was set, for librdkafka's refusal. */
struct config_kafka_setting {
    char *key;
    char *value;
    uint32_t line; /* a line of origin_file, or CONFIG_ORIGIN_COMMAND_LINE */
};

/* What a producer over its quota gets ([limits] over_quota). */
enum over_quota {
    OVER_QUOTA_WAIT = 0,  /* its connection is not read until its share is freed */
    OVER_QUOTA_REFUSE = 1 /* its frames are refused with an ERROR naming the quota */
};

/* One line of [producer_quotas]: producer names matching pattern (fnmatch,
 * without flags) may hold bytes in the spool. The first matching line, in
 * file order, applies. */
struct config_quota {
    char *pattern;
    uint64_t bytes; /* 0: no quota for these names */
    uint32_t line;  /* a line of origin_file */
};

/* How fsync = batch makes the shards' written records durable ([sync]
 * sync_method). */
enum sync_method {
    SYNC_METHOD_AUTO = 0,      /* one-flush on ext4 and XFS, else syncfs when the spool
                                * is a file system of its own, else fdatasync */
    SYNC_METHOD_FDATASYNC = 1, /* one fdatasync per shard per write */
    SYNC_METHOD_SYNCFS = 2,    /* one syncfs of the spool's file system per loop tick,
                                * covering every shard that wrote in it */
    SYNC_METHOD_ONE_FLUSH = 3  /* space written with zeros and synced ahead of the
                                * records, each shard's new bytes written back with
                                * sync_file_range, then one fdatasync whose cache
                                * flush covers every shard that wrote */
};

enum io_backend {
    IO_BACKEND_AUTO = 0,   /* io_uring when the kernel allows it, else threads */
    IO_BACKEND_URING = 1,  /* io_uring or fail */
    IO_BACKEND_THREADS = 2 /* libuv's thread pool with plain syscalls */
};

struct config {
    char *spool;
    char *socket_path;
    uint64_t socket_mode;
    uint64_t max_record_bytes;
    uint64_t max_frame_bytes;
    uint64_t session_buffer_bytes;
    uint64_t max_shard_bytes;
    uint64_t max_shard_age_ms;
    uint64_t fsync_policy;      /* enum fsync_policy */
    uint64_t fsync_interval_ms;
    uint64_t sync_method;       /* enum sync_method */
    uint64_t io_backend;        /* enum io_backend */

    char *socket_group;          /* group of the bound socket; NULL: unchanged */
    uint64_t max_producers;      /* connections at once */
    uint64_t max_producers_per_uid; /* 0: no limit */
    uint64_t memory_limit_bytes; /* what all sessions may hold unwritten */
    uint64_t max_open_shards;
    uint64_t hello_timeout_ms;   /* from accept to HELLO */
    uint64_t idle_timeout_ms;    /* how long a frame may stay half received */

    /* Disk budget: what one producer name may hold in the spool (active and
     * sealed shards; 0: no quota) and what it gets over it; the bytes the
     * whole spool may hold and the free space its filesystem keeps (0: no
     * limit); per-name quotas from [producer_quotas]. */
    uint64_t producer_quota_bytes;
    uint64_t over_quota;         /* enum over_quota */
    uint64_t spool_budget_bytes;
    uint64_t spool_min_free_bytes;
    struct config_quota_list {
        struct config_quota *v;
        size_t n;
    } producer_quotas;

    /* [retention]: logctl prune. Where merged files are (NULL:
     * <spool>/merged), how old and how large in total they may grow, and
     * the same for sealed shards shipped whole to Kafka; 0: no limit. */
    char *retention_merged_dir;
    uint64_t retention_merged_max_age_ms;
    uint64_t retention_merged_max_bytes;
    uint64_t retention_shipped_max_age_ms;
    uint64_t retention_shipped_max_bytes;

    /* Streams (protocol version 2): how long the daemon remembers where a
     * stream stopped after its last connection ended (or, at start, after
     * its newest record), and how many such streams it keeps at most. */
    uint64_t resume_window_ms;
    uint64_t max_streams;

    /* [syslog]: the /dev/log-style datagram socket (NULL: off), how long a
     * syslog producer's shard stays open without a message before it is
     * sealed, and how many syslog producers have an open shard at once
     * (beyond it, the one idle longest is sealed). */
    char *syslog_datagram_socket;
    /* [syslog] stream_socket: the syslog stream socket (NULL: off), one
     * producer per connection. */
    char *syslog_stream_socket;
    uint64_t syslog_idle_ms;
    uint64_t syslog_max_producers;

    char *admin_socket;          /* the admin socket (logctl status, ls, rotate) */
    char *metrics_file;          /* Prometheus text file; NULL: no metrics */
    uint64_t metrics_interval_ms;

    /* Who may produce: a peer is accepted when its uid is in allowed_uids
     * or its gid in allowed_gids; with both lists empty, everyone is. */
    struct config_id_list {
        uint32_t *ids;
        size_t n;
    } allowed_uids, allowed_gids;

    /* [ship]: logctl ship (docs/SHIP.md). Strings are NULL when unset. */
    char *ship_brokers;             /* bootstrap servers, HOST:PORT[,...] */
    char *ship_topic;               /* topic template: {producer}, {host} */
    char *ship_progress_topic;      /* the progress topic (compacted) */
    char *ship_transactional_id;    /* NULL: made once, kept in <spool>/ship/id */
    char *ship_metrics_file;        /* the shipper's Prometheus file; NULL: none */
    uint64_t ship_transaction_records; /* a commit every this many records */
    uint64_t ship_transaction_interval_ms; /* or this long after the first */
    uint64_t ship_poll_interval_ms; /* --follow: how often the spool is looked at */
    uint64_t ship_compression;      /* enum ship_compression */
    uint64_t ship_linger_ms;        /* librdkafka's linger.ms */
    uint64_t ship_on_shipped;       /* enum ship_on_shipped */
    /* Every other key of [ship] with a dot in it is a librdkafka property. */
    struct config_kafka_list {
        struct config_kafka_setting *v;
        size_t n;
    } ship_kafka;

    /* Where each value came from, so that a message about several keys
     * (config_check) can point at the lines to edit. Indexed like
     * config_key_at: 0 for the embedded default, a line number in
     * origin_file, or CONFIG_ORIGIN_COMMAND_LINE. origin_file is the file
     * config_load read last (NULL: none). */
    char *origin_file;
    uint32_t origin_line[CONFIG_MAX_KEYS];
};

/* Whether id is in the list. */
int config_id_list_contains(const struct config_id_list *l, uint32_t id);

/* Names of enum values as the file spells them ("batch"), for messages. */
const char *config_fsync_policy_name(enum fsync_policy p);
const char *config_io_backend_name(enum io_backend b);
const char *config_sync_method_name(enum sync_method m);
const char *config_ship_compression_name(enum ship_compression c);
const char *config_over_quota_name(enum over_quota q);

/* The quota of producer name `name`: the first [producer_quotas] line
 * whose pattern matches it, else producer_quota_bytes; 0: none. */
uint64_t config_producer_quota(const struct config *c, const char *name);

/* Adds a [producer_quotas] line (pattern = size), as the file would, at
 * line `line`. -EINVAL (why says what) when the pattern could match no
 * producer name or the size is not one, -ENOMEM. */
int config_add_producer_quota(struct config *c, const char *pattern, const char *size,
                              uint32_t line, char *why, size_t why_len);

/* Adds (or, for a key already there, replaces) a librdkafka property of
 * [ship], as --set KEY=VALUE does; line as in struct config_kafka_setting.
 * Returns 0, -EINVAL for an empty key or a key without a dot (every
 * librdkafka property has one), or -ENOMEM. */
int config_set_kafka(struct config *c, const char *key, const char *value, uint32_t line);

/* Fills c with the embedded defaults. Returns 0 or -ENOMEM. */
int config_init(struct config *c);

/* Frees what c owns; c may be half-built. */
void config_free(struct config *c);

/* Makes dst a deep copy of src. Returns 0 or -ENOMEM (dst is then empty
 * and needs no freeing). */
int config_copy(struct config *dst, const struct config *src);

/* Sets section.key from its text value, as the file and the command line do
 * (the key's origin becomes CONFIG_ORIGIN_COMMAND_LINE).
 * Returns 0, -ENOENT for an unknown section or key, -EINVAL or -ERANGE for a
 * bad value, with a message in why[why_len]. c is untouched on failure. */
int config_set(struct config *c, const char *section, const char *key, const char *value,
               char *why, size_t why_len);

/* Reads the INI file at path into c. A key given twice in the file is an
 * error, like any other bad line: nothing in the file is ignored. Returns 0,
 * or a negative errno with "PATH:LINE: what is wrong" (or "PATH: why" when
 * it cannot be read) in err[err_len]. On failure c holds what it held
 * before. */
int config_load(struct config *c, const char *path, char *err, size_t err_len);

/* Checks that the settings make sense together (e.g. a frame can carry a
 * record of max_record_bytes and its framing, WIRE_APPEND_OVERHEAD). Returns 0 or -EINVAL with a message that
 * names each key involved with its value and origin ("line 7", "the
 * default", "the command line"), starting with "PATH:LINE: " for the last
 * of their lines in the file when one of them comes from the file. */
int config_check(const struct config *c, char *err, size_t err_len);

/* Walks the known keys: call with index 0, 1, ... until it returns -ENOENT.
 * Tests use it to check the example file lists every key. */
int config_key_at(size_t index, const char **ret_section, const char **ret_key);

/* Parsers shared with the command line. Each returns 0 or -EINVAL/-ERANGE and
 * writes *ret only on success.
 * Sizes: a number with an optional K, M, G or T suffix (powers of 1024, an
 * optional "iB" or "B" after it). Durations: a number with ms, s, m, h or d
 * (no suffix means seconds); the result is in milliseconds. */
int parse_size(const char *text, uint64_t *ret);
int parse_duration_ms(const char *text, uint64_t *ret);
int parse_uint(const char *text, int base, uint64_t *ret);

/* "0, 1000 www-data": user (groups false) or group ids, as numbers or
 * names separated by commas and blanks, names looked up now so that a typo
 * is an error at load time, not a producer refused later. On success
 * *ret is a new list (the caller frees ids); on failure why says what, in
 * the words of key. Returns 0, -EINVAL or -ENOMEM. */
int parse_id_list(const char *value, bool groups, struct config_id_list *ret, char *why,
                  size_t why_len, const char *key);
