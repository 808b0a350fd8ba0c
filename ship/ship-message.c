/* The progress topic's keys and values: see ship-message.h. */
#include "ship-message.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "text.h"

void ship_stream_id_format(char out[33], const uint8_t id[SHARD_STREAM_ID_SIZE])
{
    static const char digits[] = "0123456789abcdef";

    for (unsigned i = 0; i < SHARD_STREAM_ID_SIZE; i++) {
        out[2 * i] = digits[id[i] >> 4];
        out[2 * i + 1] = digits[id[i] & 15];
    }
    out[32] = '\0';
}

int ship_stream_id_parse(const char *s, size_t len, uint8_t ret[SHARD_STREAM_ID_SIZE])
{
    uint8_t id[SHARD_STREAM_ID_SIZE];

    if (len != 32)
        return -EINVAL;
    for (unsigned i = 0; i < 32; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

        if (v < 0)
            return -EINVAL;
        if (i % 2 == 0)
            id[i / 2] = (uint8_t)(v << 4);
        else
            id[i / 2] |= (uint8_t)v;
    }
    memcpy(ret, id, sizeof(id));
    return 0;
}

int ship_progress_key_stream(char *buf, size_t size, const char *txid,
                             const uint8_t id[SHARD_STREAM_ID_SIZE])
{
    char hex[33];
    int n;

    ship_stream_id_format(hex, id);
    n = snprintf(buf, size, "stream %s %s", hex, txid);
    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

int ship_progress_key_start(char *buf, size_t size, const char *txid, const char *topic,
                            int32_t partition)
{
    int n = snprintf(buf, size, "start %s %" PRId32 " %s", topic, partition, txid);

    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

int ship_progress_value_stream(char *buf, size_t size, uint64_t next, const char *producer,
                               const char *topic, int32_t partition, int64_t offset)
{
    int n = snprintf(buf, size, "next=%" PRIu64 " producer=%s topic=%s partition=%" PRId32
                                " offset=%" PRId64,
                     next, producer, topic, partition, offset);

    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

int ship_progress_value_start(char *buf, size_t size, int64_t offset)
{
    int n = snprintf(buf, size, "offset=%" PRId64, offset);

    return n < 0 || (size_t)n >= size ? -ENOBUFS : n;
}

/* A plain decimal (no sign, no leading zero but "0") of len bytes, at
 * most max. */
static int decimal(const char *s, size_t len, uint64_t max, uint64_t *ret)
{
    uint64_t v;

    if (decimal_parse_u64(s, len, true, &v) < 0 || v > max)
        return -EBADMSG;
    *ret = v;
    return 0;
}

static bool topic_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

static int copy_topic(const char *s, size_t len, char out[SHIP_TOPIC_MAX + 1])
{
    if (len == 0 || len > SHIP_TOPIC_MAX)
        return -EBADMSG;
    for (size_t i = 0; i < len; i++)
        if (!topic_char(s[i]))
            return -EBADMSG;
    memcpy(out, s, len);
    out[len] = '\0';
    return 0;
}

/* The value of a stream: exactly "next=N producer=P topic=T partition=N
 * offset=N", in that order, one space between. */
static int parse_stream_value(const char *v, size_t len, struct ship_progress_msg *m)
{
    static const char *const names[] = { "next=", "producer=", "topic=", "partition=",
                                         "offset=" };
    size_t at = 0;

    for (unsigned f = 0; f < 5; f++) {
        size_t nl = strlen(names[f]), end;
        uint64_t num = 0;
        int r = 0;

        if (f > 0) {
            if (at >= len || v[at] != ' ')
                return -EBADMSG;
            at++;
        }
        if (len - at < nl || memcmp(v + at, names[f], nl) != 0)
            return -EBADMSG;
        at += nl;
        for (end = at; end < len && v[end] != ' '; end++)
            ;
        switch (f) {
        case 0:
            r = decimal(v + at, end - at, SHARD_POSITION_LIMIT - 1, &num);
            m->next = num;
            break;
        case 1:
            if (end - at > WIRE_PRODUCER_NAME_MAX ||
                wire_check_producer_name(v + at, end - at) < 0)
                return -EBADMSG;
            memcpy(m->producer, v + at, end - at);
            m->producer[end - at] = '\0';
            break;
        case 2:
            if (end - at == 1 && v[at] == '-') {
                strcpy(m->topic, "-");
                break;
            }
            r = copy_topic(v + at, end - at, m->topic);
            break;
        case 3:
            r = decimal(v + at, end - at, INT32_MAX, &num);
            m->partition = (int32_t)num;
            break;
        case 4:
            r = decimal(v + at, end - at, INT64_MAX, &num);
            m->offset = (int64_t)num;
            break;
        }
        if (r < 0)
            return r;
        at = end;
    }
    return at == len ? 0 : -EBADMSG;
}

int ship_progress_msg_parse(const void *key_bytes, size_t klen, const void *value_bytes,
                            size_t vlen, const char *txid, struct ship_progress_msg *ret)
{
    const char *key = key_bytes, *val = value_bytes;
    size_t tlen = strlen(txid);
    struct ship_progress_msg m;
    uint64_t num = 0;
    int r;

    if (!key || klen <= tlen + 1 || memcmp(key + klen - tlen, txid, tlen) != 0 ||
        key[klen - tlen - 1] != ' ')
        return -ENOENT;
    klen -= tlen + 1;
    memset(&m, 0, sizeof(m));
    if (klen >= 7 && memcmp(key, "stream ", 7) == 0) {
        m.kind = SHIP_PROGRESS_STREAM;
        if (ship_stream_id_parse(key + 7, klen - 7, m.id) < 0 || !val)
            return -EBADMSG;
        r = parse_stream_value(val, vlen, &m);
    } else if (klen >= 6 && memcmp(key, "start ", 6) == 0) {
        const char *sp = memchr(key + 6, ' ', klen - 6);

        m.kind = SHIP_PROGRESS_START;
        if (!sp || !val || vlen < 7 || memcmp(val, "offset=", 7) != 0)
            return -EBADMSG;
        r = copy_topic(key + 6, (size_t)(sp - key - 6), m.topic);
        if (r == 0)
            r = decimal(sp + 1, (size_t)(key + klen - sp - 1), INT32_MAX, &num);
        m.partition = (int32_t)num;
        if (r == 0)
            r = decimal(val + 7, vlen - 7, INT64_MAX, &num);
        m.offset = (int64_t)num;
    } else {
        return -ENOENT;
    }
    if (r < 0)
        return -EBADMSG;
    *ret = m;
    return 0;
}
