/* Version 4 shard files built by hand: see shard-v4-file.h. */
#include "shard-v4-file.h"

#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "shard-bytes.h"

const uint8_t stream_s[SHARD_STREAM_ID_SIZE] = {
    0x5e, 0x11, 0x02, 0x93, 0x44, 0xa5, 0x06, 0xf7, 0x08, 0x19, 0xaa, 0x3b, 0x0c, 0xdd, 0x0e, 0x9f,
};

struct shard_header v4_make_header(const char *producer, uint64_t id, unsigned version,
                                   unsigned source, const uint8_t *stream,
                                   uint64_t first_position)
{
    struct shard_header h;

    memset(&h, 0, sizeof(h));
    h.version = (uint16_t)version;
    h.source = (uint16_t)source;
    h.uid = 1000;
    h.gid = 100;
    h.pid = 4242;
    h.shard_id = id;
    h.created_ns = TS0 - 1000 + id;
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    if (stream)
        memcpy(h.stream_id, stream, SHARD_STREAM_ID_SIZE);
    h.first_position = first_position;
    return h;
}

struct shard_creds v4_creds_of(uint64_t i)
{
    struct shard_creds c = {
        .pid = (uint32_t)(7000 + i),
        .uid = (uint32_t)(1000 + i % 3),
        .gid = (uint32_t)(2000 + i % 3),
    };

    return c;
}

size_t v4_add_record(struct bytebuf *b, const char *tag, uint64_t i, bool creds)
{
    char text[64];
    size_t off = b->len;
    int n = snprintf(text, sizeof(text), "%s %" PRIu64, tag, i);

    if (creds) {
        struct shard_creds c = v4_creds_of(i);

        assert_int_equal(shard_encode_record_creds(
                             bytebuf_grow(b, shard_record_size((uint32_t)n, true)), text,
                             (uint32_t)n, TS0 + i, &c),
                         shard_record_size((uint32_t)n, true));
    } else {
        shard_encode_record(bytebuf_grow(b, SHARD_RECORD_HEADER + (size_t)n), text, (uint32_t)n,
                            TS0 + i);
    }
    return off;
}

void v4_add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records)
{
    struct shard_trailer t = {
        .shard_len = b->len - shard_start,
        .records = records,
        .newest_ns = TS0 + 1000,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

size_t v4_add_shard(struct bytebuf *b, const struct shard_header *h, const char *tag,
                    unsigned n, uint32_t creds_mask, bool seal, size_t *rec_off)
{
    size_t start = shard_bytes_add_header(b, h);

    for (unsigned i = 0; i < n; i++) {
        size_t off = v4_add_record(b, tag, i, (creds_mask >> i) & 1u);

        if (rec_off)
            rec_off[i] = off;
    }
    if (seal)
        v4_add_trailer(b, start, n);
    return start;
}
