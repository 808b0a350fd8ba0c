/* Fuzz target for common/spool_names.c: the parser that decides which
 * directory entries of a spool are shards, and the formatters whose names
 * it must read back.
 *
 * Input: one byte that picks what is driven, then its bytes.
 *  0: a directory entry name (up to its first NUL, as readdir gives it),
 *     parsed as either kind of shard name. Whatever is accepted must be
 *     exactly the name the formatter writes for the producer and id found
 *     (names are canonical: one name per shard), the producer must pass
 *     the on-disk rule, the other kind and every quarantine name of it must
 *     be refused, and a refused name leaves the out-parameter untouched.
 *  1: a kind, an id (8 bytes) and any producer bytes, NUL included: the
 *     formatter refuses exactly what the producer rule refuses, and what it
 *     writes parses back to the same producer and id.
 *  2: a time and an attempt number for the default merged output name: it
 *     fits SPOOL_MERGED_NAME_SIZE, keeps the shape docs/MERGE.md gives, and
 *     is never taken for a shard name. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "spool_names.h"

/* Longer than any name a directory can hold (NAME_MAX is 255). */
#define NAME_CAP 1024u

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void check_parsed(const char *name, enum spool_kind kind, const struct spool_name *n)
{
    enum spool_kind other = kind == SPOOL_TMP ? SPOOL_SHARD : SPOOL_TMP;
    char buf[SPOOL_NAME_SIZE];
    struct spool_name again;
    char *q = NULL;

    FUZZ_CHECK(n->producer_len == strlen(n->producer));
    FUZZ_CHECK(wire_check_producer_name(n->producer, n->producer_len) == 0);
    FUZZ_CHECK(spool_name_format(kind, n->producer, n->producer_len, n->id, buf,
                                 sizeof(buf)) == 0);
    FUZZ_CHECK(strcmp(buf, name) == 0);
    FUZZ_CHECK(spool_name_parse(name, other, &again) == -EINVAL);

    if (kind == SPOOL_TMP) {
        FUZZ_CHECK(spool_name_sealed(name, buf, sizeof(buf)) == 0);
        FUZZ_CHECK(spool_name_parse(buf, SPOOL_SHARD, &again) == 0);
        FUZZ_CHECK(again.id == n->id && strcmp(again.producer, n->producer) == 0);
    } else {
        FUZZ_CHECK(spool_name_sealed(name, buf, sizeof(buf)) == -EINVAL);
    }

    /* A file set aside under a suffixed name is never read as a shard. */
    FUZZ_CHECK(spool_quarantine_name(name, 1 + (unsigned)(n->id % SPOOL_QUARANTINE_MAX_SUFFIX),
                                     &q) == 0);
    FUZZ_CHECK(spool_name_parse(q, SPOOL_SHARD, &again) == -EINVAL);
    FUZZ_CHECK(spool_name_parse(q, SPOOL_TMP, &again) == -EINVAL);
    free(q);
}

static void drive_parse(const uint8_t *data, size_t size)
{
    size_t len = strnlen((const char *)data, size < NAME_CAP ? size : NAME_CAP);
    char *name = malloc(len + 1); /* exactly the string: a read past it is a report */
    static const enum spool_kind kinds[] = { SPOOL_TMP, SPOOL_SHARD };

    FUZZ_CHECK(name);
    memcpy(name, data, len);
    name[len] = '\0';
    for (size_t i = 0; i < 2; i++) {
        struct spool_name n, before;
        int r;

        memset(&n, 0xa5, sizeof(n));
        before = n;
        r = spool_name_parse(name, kinds[i], &n);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r == 0)
            check_parsed(name, kinds[i], &n);
        else
            FUZZ_CHECK(memcmp(&n, &before, sizeof(n)) == 0);
    }
    free(name);
}

static void drive_format(const uint8_t *data, size_t size)
{
    enum spool_kind kind;
    const char *producer;
    size_t producer_len;
    char buf[SPOOL_NAME_SIZE];
    struct spool_name n;
    uint64_t id;
    int r;

    if (size < 9)
        return;
    kind = data[0] & 1 ? SPOOL_SHARD : SPOOL_TMP;
    id = get_u64(data + 1);
    producer = (const char *)data + 9;
    producer_len = size - 9;
    r = spool_name_format(kind, producer, producer_len, id, buf, sizeof(buf));
    if (wire_check_producer_name(producer, producer_len) < 0) {
        FUZZ_CHECK(r == -EINVAL);
        return;
    }
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(spool_name_parse(buf, kind, &n) == 0);
    FUZZ_CHECK(n.id == id && n.producer_len == producer_len);
    FUZZ_CHECK(memcmp(n.producer, producer, producer_len) == 0);
    check_parsed(buf, kind, &n);
}

static void drive_merged(const uint8_t *data, size_t size)
{
    char buf[SPOOL_MERGED_NAME_SIZE];
    struct spool_name n;
    struct timespec ts;
    unsigned attempt;
    size_t len;
    int r;

    if (size < 14)
        return;
    ts.tv_sec = (time_t)get_u64(data);
    ts.tv_nsec = (long)((uint32_t)data[8] | (uint32_t)data[9] << 8 | (uint32_t)data[10] << 16 |
                        (uint32_t)data[11] << 24);
    attempt = ((unsigned)data[12] | (unsigned)data[13] << 8) % 1100u;
    r = spool_merged_name(&ts, attempt, buf, sizeof(buf));
    if (attempt > SPOOL_MERGED_MAX_SUFFIX) {
        FUZZ_CHECK(r == -ERANGE);
        return;
    }
    if (ts.tv_nsec < 0 || ts.tv_nsec > 999999999L) {
        FUZZ_CHECK(r == -EINVAL);
        return;
    }
    FUZZ_CHECK(r == 0 || r == -EOVERFLOW);
    if (r < 0)
        return;
    len = strlen(buf);
    FUZZ_CHECK(len < sizeof(buf));
    FUZZ_CHECK(strncmp(buf, "merged-", 7) == 0);
    FUZZ_CHECK(len > 4 && strcmp(buf + len - 4, SPOOL_MERGED_SUFFIX) == 0);
    FUZZ_CHECK(strchr(buf, '/') == NULL);
    FUZZ_CHECK(spool_name_parse(buf, SPOOL_SHARD, &n) == -EINVAL);
    FUZZ_CHECK(spool_name_parse(buf, SPOOL_TMP, &n) == -EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    switch (data[0] % 3) {
    case 0: drive_parse(data + 1, size - 1); break;
    case 1: drive_format(data + 1, size - 1); break;
    case 2: drive_merged(data + 1, size - 1); break;
    }
    return 0;
}
