/* Fuzz target for common/config.c: the INI file reader (config_load over
 * inih, with the line handling in read_config_line) and the value parsers
 * the command line shares.
 *
 * Input: the whole file. It is written to a memfd and loaded through
 * /proc/self/fd/N, so config_load opens and reads it like any other path.
 * The first line, without its newline, also goes to parse_size,
 * parse_duration_ms and parse_uint (in bases 8, 10 and 0), each in a heap
 * block of exactly its length so a read past the terminator is an ASan
 * report. Beyond "no crash", the contracts are checked: on failure the
 * settings are untouched and the message names the file; on success every
 * value is within its key's range; a parser writes its result only on
 * success. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

static void check_parsers(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    size_t n = nl ? (size_t)(nl - data) : size;
    static const int bases[] = { 0, 8, 10 }; /* 8 is socket_mode's; 0, 10 the rest */
    char *text = malloc(n + 1);
    uint64_t v, plain = 0;
    int r, rp;

    FUZZ_CHECK(text);
    memcpy(text, data, n);
    text[n] = '\0';

    v = 0xdeadbeef;
    rp = parse_uint(text, 10, &plain);
    r = parse_size(text, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0)
        FUZZ_CHECK(v == 0xdeadbeef);
    /* A plain decimal number is a size in bytes, the same number. */
    if (rp == 0 && text[0] >= '0' && text[0] <= '9')
        FUZZ_CHECK(r == 0 && v == plain);

    v = 0xdeadbeef;
    r = parse_duration_ms(text, &v);
    FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
    if (r < 0)
        FUZZ_CHECK(v == 0xdeadbeef);
    /* A number alone means seconds. */
    if (rp == 0 && text[0] >= '0' && text[0] <= '9' && plain <= UINT64_MAX / 1000)
        FUZZ_CHECK(r == 0 && v == plain * 1000);

    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        v = 0xdeadbeef;
        r = parse_uint(text, bases[i], &v);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r < 0)
            FUZZ_CHECK(v == 0xdeadbeef);
    }
    free(text);
}

/* (uid_t)-1 means "no change" to chown(2) and friends, so it is never an
 * id a list may hold. */
static void check_id_list(const struct config_id_list *l)
{
    FUZZ_CHECK((l->n == 0) == (l->ids == NULL));
    for (size_t i = 0; i < l->n; i++)
        FUZZ_CHECK(l->ids[i] != UINT32_MAX);
}

static void check_ranges(const struct config *c)
{
    /* The bounds of the key table in config.c, which the daemon relies on
     * when it sizes buffers from these values. */
    FUZZ_CHECK(c->spool && *c->spool && c->socket_path && *c->socket_path);
    FUZZ_CHECK(c->socket_mode <= 07777);
    FUZZ_CHECK(c->max_record_bytes >= 1 && c->max_record_bytes <= 256 * MIB);
    FUZZ_CHECK(c->max_frame_bytes >= 4 * KIB && c->max_frame_bytes <= 256 * MIB);
    FUZZ_CHECK(c->session_buffer_bytes >= 64 * KIB && c->session_buffer_bytes <= 64 * GIB);
    FUZZ_CHECK(c->max_shard_bytes >= 4 * KIB && c->max_shard_bytes <= 1024 * GIB);
    FUZZ_CHECK(c->max_shard_age_ms >= 1000 &&
               c->max_shard_age_ms <= 365ull * 24 * 3600 * 1000);
    FUZZ_CHECK(c->fsync_policy <= FSYNC_ALWAYS);
    FUZZ_CHECK(c->fsync_interval_ms >= 1 && c->fsync_interval_ms <= 3600ull * 1000);
    FUZZ_CHECK(c->io_backend <= IO_BACKEND_THREADS);
    FUZZ_CHECK(!c->socket_group || *c->socket_group);
    FUZZ_CHECK(c->max_producers >= 1 && c->max_producers <= 1000000);
    FUZZ_CHECK(c->max_producers_per_uid <= 1000000);
    FUZZ_CHECK(c->memory_limit_bytes >= 1 * MIB && c->memory_limit_bytes <= 1024 * GIB);
    FUZZ_CHECK(c->max_open_shards >= 1 && c->max_open_shards <= 1000000);
    FUZZ_CHECK(c->hello_timeout_ms >= 10 && c->hello_timeout_ms <= 3600ull * 1000);
    FUZZ_CHECK(c->idle_timeout_ms >= 10 && c->idle_timeout_ms <= 24ull * 3600 * 1000);
    check_id_list(&c->allowed_uids);
    check_id_list(&c->allowed_gids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c, before;
    char path[64], err[1024], why[256];
    int fd = fuzz_memfd_with(data, size);
    int r;

    check_parsers(data, size);

    FUZZ_CHECK(config_init(&c) == 0);
    before = c;
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    memset(err, 0, sizeof(err));
    r = config_load(&c, path, err, sizeof(err));
    if (r < 0) {
        /* A bad file leaves the running settings alone, down to the
         * pointers, and the message starts with the path. */
        FUZZ_CHECK(memcmp(&c, &before, sizeof(c)) == 0);
        FUZZ_CHECK(strncmp(err, path, strlen(path)) == 0);
        FUZZ_CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        FUZZ_CHECK(r == -EINVAL || r == -ERANGE || r == -ENOENT || r == -ENOMEM);
    } else {
        FUZZ_CHECK(r == 0);
        check_ranges(&c);
        /* The cross-key check runs on whatever a file can produce. */
        r = config_check(&c, why, sizeof(why));
        FUZZ_CHECK(r == 0 || r == -EINVAL);
    }
    config_free(&c);
    return 0;
}
