/* Unit tests for version 4 of the shard format (common/shard_format.c,
 * common/shard_reader.c): the header's source, byte by byte, for every
 * source; that versions 1 to 3 read as the client source and that a client's
 * header is still written as before; the records that carry their sender's
 * credentials (the flag in the length field, the block after the
 * timestamp, under the CRC) next to records that do not, their payloads
 * without the credentials and their positions; a flipped credential byte
 * (salvage loses that record alone) and bogus length fields; a merged file
 * of versions 1 to 4 read back whole; a growing version 4 shard followed
 * with shard_reader_continue. The shards are built by hand
 * (shard-v4-file.c); logctl cat on them is test-shard-v4-cat.c. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "shard-bytes.h"
#include "shard-v4-file.h"
#include "crc32c.h"
#include "shard_format.h"

/* ---- helpers ---- */

static void expect_header(struct shard_reader *r, uint64_t offset, unsigned version,
                          unsigned source)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_HEADER);
    assert_true(it.offset == offset);
    assert_int_equal(it.header->version, version);
    assert_int_equal(it.header->source, source);
    assert_false(it.has_creds);
}

/* The next item is record i of a shard written by v4_add_shard with tag: the
 * payload exactly "<tag> <i>" (no credential bytes), the credentials of
 * v4_creds_of(i) when creds, else none, and position. */
static void expect_record(struct shard_reader *r, uint64_t offset, const char *tag, uint64_t i,
                          bool creds, uint64_t position)
{
    struct shard_item it;
    char text[64];
    int n = snprintf(text, sizeof(text), "%s %" PRIu64, tag, i);

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_RECORD);
    assert_true(it.offset == offset);
    assert_int_equal(it.len, n);
    assert_memory_equal(it.payload, text, (size_t)n);
    assert_true(it.timestamp_ns == TS0 + i);
    assert_true(it.position == position);
    assert_int_equal(it.has_creds, creds);
    if (creds) {
        struct shard_creds c = v4_creds_of(i);

        assert_int_equal(it.creds.pid, c.pid);
        assert_int_equal(it.creds.uid, c.uid);
        assert_int_equal(it.creds.gid, c.gid);
    } else {
        assert_int_equal(it.creds.pid, 0);
        assert_int_equal(it.creds.uid, 0);
        assert_int_equal(it.creds.gid, 0);
    }
}

static void expect_trailer(struct shard_reader *r, uint64_t records, uint64_t shard_len)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_false(it.has_creds);
    assert_true(it.trailer->records == records);
    assert_true(it.trailer->shard_len == shard_len);
}

/* ---- the header ---- */

/* Each source round-trips, at the offsets FORMAT.md gives: source and
 * flags after the stream fields, the name after them, the CRC last over
 * everything before it. Sources this build does not name are valid too. */
static void test_v4_header_round_trip(void **state)
{
    static const unsigned sources[] = {
        SHARD_SOURCE_SYSLOG_DATAGRAM, SHARD_SOURCE_SYSLOG_STREAM, 3, 0x1234, 0xFFFF,
    };
    (void)state;

    for (size_t i = 0; i < sizeof(sources) / sizeof(sources[0]); i++) {
        for (int with_stream = 0; with_stream <= 1; with_stream++) {
            struct shard_header h = v4_make_header("sshd.u0", 7, 0, sources[i],
                                                   with_stream ? stream_s : NULL,
                                                   with_stream ? 99 : 0);
            struct shard_header got;
            unsigned char b[SHARD_HEADER_MAX], again[SHARD_HEADER_MAX];
            const char *why = NULL;
            size_t size = shard_encode_header(b, &h);

            assert_int_equal(shard_header_write_version(&h), 4);
            assert_int_equal(size, 74 + 7);
            assert_int_equal(shard_header_size_v(4, 7), 81);
            assert_int_equal(wire_get_u16(b + 8), 4);
            assert_int_equal(wire_get_u16(b + 10), 81);
            assert_true(wire_get_u64(b + 58) == (with_stream ? 99u : 0u));
            assert_int_equal(wire_get_u16(b + 66), sources[i]);
            assert_int_equal(wire_get_u16(b + 68), 0);
            assert_memory_equal(b + 70, "sshd.u0", 7);
            assert_int_equal(wire_get_u32(b + 77), crc32c(b, 77));

            memset(&got, 0x5A, sizeof(got));
            assert_int_equal(shard_decode_header(b, size, &got, &why), 0);
            assert_int_equal(got.version, 4);
            assert_int_equal(got.header_len, 81);
            assert_int_equal(got.source, sources[i]);
            assert_int_equal(got.uid, 1000);
            assert_int_equal(got.gid, 100);
            assert_int_equal(got.pid, 4242);
            assert_string_equal(got.producer, "sshd.u0");
            assert_int_equal(shard_header_has_stream(&got), with_stream);
            assert_true(got.first_position == (with_stream ? 99u : 0u));
            assert_int_equal(shard_encode_header(again, &got), size);
            assert_memory_equal(again, b, size);
        }
    }
    assert_string_equal(shard_source_name(SHARD_SOURCE_CLIENT), "client");
    assert_string_equal(shard_source_name(SHARD_SOURCE_SYSLOG_DATAGRAM), "syslog-datagram");
    assert_string_equal(shard_source_name(SHARD_SOURCE_SYSLOG_STREAM), "syslog-stream");
    assert_null(shard_source_name(3));
    assert_false(shard_source_is_syslog(SHARD_SOURCE_CLIENT));
    assert_true(shard_source_is_syslog(SHARD_SOURCE_SYSLOG_DATAGRAM));
    assert_true(shard_source_is_syslog(SHARD_SOURCE_SYSLOG_STREAM));
    assert_false(shard_source_is_syslog(3));

    /* The largest header of all: version 4 with a 64-byte name. */
    {
        struct shard_header h, got;
        unsigned char b[SHARD_HEADER_MAX];
        const char *why = NULL;
        char name[65];

        memset(name, 'p', 64);
        name[64] = '\0';
        h = v4_make_header(name, UINT64_MAX, 0, SHARD_SOURCE_SYSLOG_DATAGRAM, stream_s,
                           SHARD_POSITION_LIMIT - 1);
        assert_int_equal(SHARD_HEADER_MAX, 138);
        assert_int_equal(shard_encode_header(b, &h), SHARD_HEADER_MAX);
        assert_int_equal(shard_decode_header(b, SHARD_HEADER_MAX, &got, &why), 0);
        assert_string_equal(got.producer, name);
        assert_int_equal(got.source, SHARD_SOURCE_SYSLOG_DATAGRAM);
    }
}

/* A client's header is written as it was before version 4: version 3 when
 * asked for, else version 2, whatever else the version says; any other
 * source writes version 4 whatever the version says. */
static void test_client_writes_as_before(void **state)
{
    static const unsigned versions[] = { 0, 1, 2, 3, 4, 5, 0xFFFF };
    (void)state;

    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        struct shard_header client = v4_make_header("app", 9, versions[i], 0, stream_s, 5);
        struct shard_header syslog = v4_make_header("app", 9, versions[i], 1, stream_s, 5);
        unsigned char b[SHARD_HEADER_MAX];
        unsigned want = versions[i] == 3 ? 3 : 2;

        assert_int_equal(shard_header_write_version(&client), want);
        assert_int_equal(shard_encode_header(b, &client), shard_header_size_v(want, 3));
        assert_int_equal(wire_get_u16(b + 8), want);
        assert_int_equal(wire_get_u16(b + 10), want == 3 ? 73 : 49);
        assert_int_equal(shard_header_write_version(&syslog), 4);
        assert_int_equal(shard_encode_header(b, &syslog), 77);
        assert_int_equal(wire_get_u16(b + 8), 4);
    }
    /* Version 3's bytes are exactly version 3's layout: the name right
     * after the stream fields, no source. */
    {
        struct shard_header h = v4_make_header("app", 9, 3, 0, stream_s, 5);
        unsigned char b[SHARD_HEADER_MAX];

        assert_int_equal(shard_encode_header(b, &h), 73);
        assert_memory_equal(b + 66, "app", 3);
        assert_int_equal(wire_get_u32(b + 69), crc32c(b, 69));
    }
}

/* Versions 1 to 3 read as the client source, whatever the struct held. */
static void test_old_versions_read_as_client(void **state)
{
    (void)state;

    for (unsigned v = 1; v <= 3; v++) {
        struct shard_header h = v4_make_header("old.prod", 3, v == 3 ? 3 : 2, 0,
                                               v == 3 ? stream_s : NULL, v == 3 ? 8 : 0);
        struct shard_header got;
        unsigned char b[SHARD_HEADER_MAX];
        const char *why = NULL;
        size_t size = shard_encode_header(b, &h);

        wire_put_u16(b + 8, (uint16_t)v);
        shard_bytes_fix_crc(b, size);
        memset(&got, 0x5A, sizeof(got));
        assert_int_equal(shard_decode_header(b, size, &got, &why), 0);
        assert_int_equal(got.version, v);
        assert_int_equal(got.source, SHARD_SOURCE_CLIENT);
    }
}

static void test_v4_header_refused(void **state)
{
    struct shard_header h = v4_make_header("cron.u0", 7, 0, 1, stream_s, 10);
    unsigned char good[SHARD_HEADER_MAX], b[SHARD_HEADER_MAX];
    size_t size = shard_encode_header(good, &h);
    (void)state;

    /* Every flag bit is unknown. */
    for (unsigned bit = 0; bit < 16; bit++) {
        shard_bytes_refuse_u16(good, size, 68, (uint16_t)(1u << bit),
                               "unknown flags in shard header");
    }
    /* A client's shard is never version 4. */
    shard_bytes_refuse_u16(good, size, 66, 0,
                           "client source in a version 4 shard header");

    /* The version and the length must agree both ways. */
    shard_bytes_refuse_u16(good, size, 8, 3,
                           "shard header length does not match its producer name");
    shard_bytes_refuse_u16(good, size, 10, (uint16_t)(size - SHARD_HEADER_SOURCE),
                           "shard header length does not match its producer name");

    /* Version 5 is nobody's yet. */
    shard_bytes_refuse_u16(good, size, 8, 5,
                           "unsupported shard format version");

    /* The stream rules hold in version 4 as in version 3. */
    shard_bytes_refuse_u64(good, size, 58, SHARD_POSITION_LIMIT,
                           "first position out of range in shard header");
    memcpy(b, good, size);
    memset(b + 42, 0, 16);
    shard_bytes_fix_crc(b, size);
    shard_bytes_expect_bad_header(b, size, "first position without a stream in shard header");

    /* The CRC covers the source and the flags, every bit. */
    for (size_t i = 66; i < 70; i++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            memcpy(b, good, size);
            b[i] ^= (unsigned char)(1u << bit);
            shard_bytes_expect_bad_header(b, size, "shard header CRC mismatch");
        }
    }

    /* Every truncation needs more bytes, in the decoder and the reader. */
    for (size_t n = 0; n < size; n++) {
        struct shard_header got;
        struct shard_reader *r = NULL;
        struct shard_item it;
        const char *why = NULL;
        int fd;

        assert_int_equal(shard_decode_header(good, n, &got, &why), -EAGAIN);
        fd = shard_bytes_memfd(good, n);
        assert_int_equal(shard_reader_new(&r, fd), 0);
        assert_int_equal(shard_reader_next(r, &it), -ENODATA);
        shard_reader_free(r);
        close(fd);
    }
}

/* ---- records ---- */

/* The length field: the credentials flag only in version 4, the reserved
 * bits never, lengths 1 to SHARD_RECORD_MAX; nothing written on failure. */
static void test_record_length_field(void **state)
{
    static const struct {
        uint32_t field;
        unsigned version;
        int rc;
        uint32_t len;
        bool creds;
    } cases[] = {
        { 1, 1, 0, 1, false },
        { 5, 3, 0, 5, false },
        { 5, 4, 0, 5, false },
        { SHARD_RECORD_MAX, 2, 0, SHARD_RECORD_MAX, false },
        { SHARD_RECORD_MAX, 4, 0, SHARD_RECORD_MAX, false },
        { 5 | SHARD_RECORD_FLAG_CREDS, 4, 0, 5, true },
        { SHARD_RECORD_MAX | SHARD_RECORD_FLAG_CREDS, 4, 0, SHARD_RECORD_MAX, true },
        { 0, 4, -EBADMSG, 0, false },
        { SHARD_RECORD_MAX + 1, 4, -EBADMSG, 0, false },
        { SHARD_RECORD_FLAG_CREDS, 4, -EBADMSG, 0, false },
        { (SHARD_RECORD_MAX + 1) | SHARD_RECORD_FLAG_CREDS, 4, -EBADMSG, 0, false },
        { 5 | SHARD_RECORD_FLAG_CREDS, 3, -EBADMSG, 0, false },
        { 5 | SHARD_RECORD_FLAG_CREDS, 2, -EBADMSG, 0, false },
        { 5 | SHARD_RECORD_FLAG_CREDS, 1, -EBADMSG, 0, false },
        { 5 | 0x40000000u, 4, -EBADMSG, 0, false },
        { 5 | 0x20000000u, 4, -EBADMSG, 0, false },
        { 5 | 0x20000000u, 3, -EBADMSG, 0, false },
        { 5 | 0xC0000000u, 4, -EBADMSG, 0, false },
        { 5 | 0xA0000000u, 4, -EBADMSG, 0, false },
        { 0xFFFFFFFFu, 4, -EBADMSG, 0, false },
        { 0x53474F4Cu, 4, -EBADMSG, 0, false }, /* "LOGS" */
        { SHARD_TRAILER_MARKER, 4, -EBADMSG, 0, false },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint32_t len = 0xdeadbeef;
        bool creds = true;
        int rc = shard_record_length(cases[i].field, cases[i].version, &len, &creds);

        assert_int_equal(rc, cases[i].rc);
        if (rc == 0) {
            assert_int_equal(len, cases[i].len);
            assert_int_equal(creds, cases[i].creds);
        } else {
            assert_int_equal(len, 0xdeadbeef);
            assert_true(creds);
        }
    }
}

/* A record with credentials, byte by byte: the flag in the length field,
 * the block after the timestamp, the payload after it, and the CRC over
 * every byte but its own, in file order. */
static void test_record_creds_layout(void **state)
{
    static const char payload[] = "<13>cron[55]: tick";
    uint32_t len = (uint32_t)strlen(payload);
    struct shard_creds c = { .pid = 0x01020304, .uid = 0x0a0b0c0d, .gid = 0xfffffffe };
    unsigned char b[128], plain[128], joined[128];
    size_t n = shard_encode_record_creds(b, payload, len, 0x1122334455667788ull, &c);
    (void)state;

    assert_int_equal(n, 28 + len);
    assert_int_equal(shard_record_size(len, true), 28 + len);
    assert_int_equal(shard_record_size(len, false), 16 + len);
    assert_int_equal(wire_get_u32(b), 0x80000000u | len);
    assert_true(wire_get_u64(b + 8) == 0x1122334455667788ull);
    assert_int_equal(wire_get_u32(b + 16), 0x01020304);
    assert_int_equal(wire_get_u32(b + 20), 0x0a0b0c0d);
    assert_int_equal(wire_get_u32(b + 24), 0xfffffffe);
    assert_memory_equal(b + 28, payload, len);
    /* The CRC of bytes 0-3 then 8 to the end, computed here in one piece. */
    memcpy(joined, b, 4);
    memcpy(joined + 4, b + 8, n - 8);
    assert_int_equal(wire_get_u32(b + 4), crc32c(joined, n - 4));
    assert_int_equal(shard_record_crc(b, b + 28, len), wire_get_u32(b + 4));

    /* Without credentials nothing changed: 16 bytes, no flag. */
    assert_int_equal(shard_encode_record(plain, payload, len, 0x1122334455667788ull), 16 + len);
    assert_int_equal(wire_get_u32(plain), len);
    memcpy(joined, plain, 4);
    memcpy(joined + 4, plain + 8, 8 + len);
    assert_int_equal(wire_get_u32(plain + 4), crc32c(joined, 12 + len));
}

/* A version 4 shard mixing records with and without credentials reads back
 * record by record: payloads without the credential bytes, the credentials
 * of those that carry them, positions counting every record, the trailer's
 * length and count right. */
static void test_records_round_trip(void **state)
{
    struct shard_header dgram = v4_make_header("cron.u0", 1, 0, 1, NULL, 0);
    struct shard_header strm = v4_make_header("logger", 2, 0, 2, stream_s, 300);
    const uint32_t mask = 0x2D; /* 0, 2, 3, 5 carry credentials */
    size_t r1[7], r2[7];
    struct bytebuf b = { 0 };
    struct shard_reader *r = NULL;
    struct shard_item it;
    size_t s1 = v4_add_shard(&b, &dgram, "dgram", 7, mask, true, r1);
    size_t end1, s2;
    int fd;
    (void)state;

    end1 = b.len;
    s2 = v4_add_shard(&b, &strm, "strm", 7, ~mask, true, r2);
    fd = shard_bytes_memfd(b.p, b.len);
    assert_int_equal(shard_reader_new(&r, fd), 0);

    expect_header(r, s1, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
    for (unsigned i = 0; i < 7; i++) {
        bool creds = (mask >> i) & 1u;

        expect_record(r, r1[i], "dgram", i, creds, 0);
        /* Each record takes its exact size: the next starts right after. */
        if (i + 1 < 7)
            assert_int_equal(r1[i + 1] - r1[i],
                             shard_record_size((uint32_t)strlen("dgram 0"), creds));
    }
    expect_trailer(r, 7, r1[6] + shard_record_size(7, (mask >> 6) & 1u) - s1);

    expect_header(r, s2, 4, SHARD_SOURCE_SYSLOG_STREAM);
    for (unsigned i = 0; i < 7; i++)
        expect_record(r, r2[i], "strm", i, (~mask >> i) & 1u, 300 + i);
    expect_trailer(r, 7, r2[6] + shard_record_size(6, (~mask >> 6) & 1u) - s2);
    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_true(shard_reader_records(r) == 14);
    assert_true(shard_reader_valid_end(r) == b.len);
    shard_reader_free(r);

    /* The second shard alone, found from its trailer, as cat and merge find
     * the shards of a merged file. */
    {
        struct shard_header h;
        struct shard_trailer t;
        uint64_t start;

        assert_int_equal(shard_locate_before(fd, b.len, &start, &h, &t), 0);
        assert_true(start == s2 && start == end1);
        assert_int_equal(h.source, SHARD_SOURCE_SYSLOG_STREAM);
        assert_int_equal(shard_reader_new_range(&r, fd, start, b.len - start), 0);
        expect_header(r, s2, 4, SHARD_SOURCE_SYSLOG_STREAM);
        for (unsigned i = 0; i < 7; i++)
            expect_record(r, r2[i], "strm", i, (~mask >> i) & 1u, 300 + i);
        expect_trailer(r, 7, t.shard_len);
        assert_int_equal(shard_reader_next(r, &it), 0);
        shard_reader_free(r);
    }
    close(fd);
    free(b.p);
}

/* A flipped byte anywhere in a credential block is a CRC mismatch, and
 * salvage skips that record alone: its framing holds, the records after it
 * keep their positions, the trailer counts it. */
static void test_flipped_credential_byte(void **state)
{
    struct shard_header h = v4_make_header("cron.u0", 1, 0, 1, stream_s, 50);
    struct shard_header next = v4_make_header("next.u0", 2, 0, 1, NULL, 0);
    size_t rec[4], rn[2];
    struct bytebuf b = { 0 };
    size_t s1 = v4_add_shard(&b, &h, "dgram", 4, 0xF, true, rec);
    size_t s2 = v4_add_shard(&b, &next, "next", 2, 0x1, true, rn);
    (void)state;

    for (unsigned victim = 0; victim < 4; victim++) {
        for (size_t at = 16; at < 28; at++) {
            struct shard_reader *r = NULL;
            struct shard_item it;
            struct shard_skip skip;
            uint64_t off;
            const char *why;
            int fd;

            b.p[rec[victim] + at] ^= 0x10;
            fd = shard_bytes_memfd(b.p, b.len);
            b.p[rec[victim] + at] ^= 0x10;
            assert_int_equal(shard_reader_new(&r, fd), 0);
            expect_header(r, s1, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
            for (unsigned i = 0; i < victim; i++)
                expect_record(r, rec[i], "dgram", i, true, 50 + i);
            assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
            shard_reader_error(r, &off, &why);
            assert_true(off == rec[victim]);
            assert_string_equal(why, "record CRC mismatch");
            assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
            assert_true(skip.offset == rec[victim]);
            assert_true(skip.bytes == shard_record_size(7, true));
            assert_true(skip.records == 1 && !skip.resync && skip.in_shard);
            assert_true(skip.position == 50 + victim);
            for (unsigned i = victim + 1; i < 4; i++)
                expect_record(r, rec[i], "dgram", i, true, 50 + i);
            assert_int_equal(shard_reader_next(r, &it), 1);
            assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
            expect_header(r, s2, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
            expect_record(r, rn[0], "next", 0, true, 0);
            expect_record(r, rn[1], "next", 1, false, 0);
            assert_int_equal(shard_reader_next(r, &it), 1);
            assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
            assert_int_equal(shard_reader_next(r, &it), 0);
            shard_reader_free(r);
            close(fd);
        }
    }
    free(b.p);
}

/* Reads file (the bytes of b with the record at rec[1] broken) and expects
 * the first shard's record 0, then an error at rec[1] for why, then a
 * resync to the second shard (at s2), read whole. */
static void expect_resync(const struct bytebuf *b, const size_t *rec, size_t s2,
                          const size_t *rn, int err, const char *want_why)
{
    struct shard_reader *r = NULL;
    struct shard_item it;
    struct shard_skip skip;
    uint64_t off;
    const char *why;
    int fd = shard_bytes_memfd(b->p, b->len);

    assert_int_equal(shard_reader_new(&r, fd), 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    expect_record(r, rec[0], "dgram", 0, true, 0);
    assert_int_equal(shard_reader_next(r, &it), err);
    shard_reader_error(r, &off, &why);
    assert_true(off == rec[1]);
    assert_string_equal(why, want_why);
    assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
    assert_true(skip.resync && skip.records == 0);
    assert_true(skip.offset + skip.bytes == s2);
    expect_header(r, s2, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
    expect_record(r, rn[0], "next", 0, true, 0);
    expect_record(r, rn[1], "next", 1, false, 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(shard_reader_next(r, &it), 0);
    shard_reader_free(r);
    close(fd);
}

/* Bogus length fields: a reserved bit, the flag on a length of 0 or over
 * the maximum, the flag in a version 3 shard, and the flag flipped on or
 * off (the claimed end moves by 12 bytes: the framing is lost, the reader
 * resynchronises at the next shard). */
static void test_bogus_length_fields(void **state)
{
    struct shard_header h = v4_make_header("cron.u0", 1, 0, 1, NULL, 0);
    struct shard_header next = v4_make_header("next.u0", 2, 0, 1, NULL, 0);
    static const uint32_t fields[] = {
        7u | 0x40000000u,
        7u | 0x20000000u,
        7u | 0xC0000000u,
        SHARD_RECORD_FLAG_CREDS,
        (SHARD_RECORD_MAX + 1u) | SHARD_RECORD_FLAG_CREDS,
        0xFFFFFFFFu,
    };
    size_t rec[3], rn[2];
    struct bytebuf b = { 0 };
    size_t s2;
    uint32_t saved;
    (void)state;

    v4_add_shard(&b, &h, "dgram", 3, 0x3, true, rec); /* 0 and 1 with, 2 without */
    s2 = v4_add_shard(&b, &next, "next", 2, 0x1, true, rn);

    saved = wire_get_u32(b.p + rec[1]);
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        wire_put_u32(b.p + rec[1], fields[i]);
        expect_resync(&b, rec, s2, rn, -EBADMSG, "impossible record length");
    }
    /* The flag cleared on a record that has credentials. */
    wire_put_u32(b.p + rec[1], saved & ~SHARD_RECORD_FLAG_CREDS);
    expect_resync(&b, rec, s2, rn, -EBADMSG, "record CRC mismatch");
    wire_put_u32(b.p + rec[1], saved);

    /* The flag set on a record without (record 2, after a good record 1):
     * its claimed end runs 12 bytes into the trailer. */
    {
        struct shard_reader *r = NULL;
        struct shard_item it;
        struct shard_skip skip;
        int fd;

        wire_put_u32(b.p + rec[2], wire_get_u32(b.p + rec[2]) | SHARD_RECORD_FLAG_CREDS);
        fd = shard_bytes_memfd(b.p, b.len);
        wire_put_u32(b.p + rec[2], wire_get_u32(b.p + rec[2]) & ~SHARD_RECORD_FLAG_CREDS);
        assert_int_equal(shard_reader_new(&r, fd), 0);
        assert_int_equal(shard_reader_next(r, &it), 1);
        expect_record(r, rec[0], "dgram", 0, true, 0);
        expect_record(r, rec[1], "dgram", 1, true, 0);
        assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
        assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
        assert_true(skip.resync && skip.offset == rec[2] && skip.offset + skip.bytes == s2);
        expect_header(r, s2, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
        shard_reader_free(r);
        close(fd);
    }
    free(b.p);

    /* In a version 3 shard a record with credentials is impossible, even
     * with a matching CRC. */
    {
        struct shard_header v3 = v4_make_header("app", 3, 3, 0, stream_s, 0);
        struct shard_header after = v4_make_header("next.u0", 4, 0, 1, NULL, 0);
        struct bytebuf c = { 0 };
        struct shard_reader *r = NULL;
        struct shard_item it;
        struct shard_skip skip;
        uint64_t off;
        const char *why;
        size_t start = shard_bytes_add_header(&c, &v3), bad, s;
        int fd;

        v4_add_record(&c, "app", 0, false);
        bad = v4_add_record(&c, "app", 1, true);
        v4_add_trailer(&c, start, 2);
        s = v4_add_shard(&c, &after, "next", 2, 0x1, true, rn);
        fd = shard_bytes_memfd(c.p, c.len);
        assert_int_equal(shard_reader_new(&r, fd), 0);
        expect_header(r, start, 3, SHARD_SOURCE_CLIENT);
        assert_int_equal(shard_reader_next(r, &it), 1);
        assert_false(it.has_creds);
        assert_int_equal(shard_reader_next(r, &it), -EBADMSG);
        shard_reader_error(r, &off, &why);
        assert_true(off == bad);
        assert_string_equal(why, "impossible record length");
        assert_int_equal(shard_reader_skip_damage(r, 0, &skip), 1);
        assert_true(skip.resync && skip.offset + skip.bytes == s);
        expect_header(r, s, 4, SHARD_SOURCE_SYSLOG_DATAGRAM);
        shard_reader_free(r);
        close(fd);
        free(c.p);
    }
}

/* A merged file of versions 1 to 4 (version 1 last: it has no trailer)
 * reads back whole, every shard with its version, source, positions and
 * credentials. */
static void test_merged_versions(void **state)
{
    struct shard_header v2 = v4_make_header("alpha", 1, 2, 0, NULL, 0);
    struct shard_header v3 = v4_make_header("beta", 2, 3, 0, stream_s, 20);
    struct shard_header v4d = v4_make_header("cron.u0", 3, 0, 1, NULL, 0);
    struct shard_header v4s = v4_make_header("gamma", 4, 0, 2, stream_s, 23);
    struct shard_header v4x = v4_make_header("later.u0", 5, 0, 9, NULL, 0);
    struct shard_header v1 = v4_make_header("delta", 6, 0, 0, NULL, 0);
    size_t ra[2], rb[3], rc[4], rd[2], rx[1], re[2];
    struct bytebuf b = { 0 };
    struct shard_reader *r = NULL;
    struct shard_item it;
    size_t sa = v4_add_shard(&b, &v2, "a", 2, 0, true, ra);
    size_t sb = v4_add_shard(&b, &v3, "b", 3, 0, true, rb);
    size_t sc = v4_add_shard(&b, &v4d, "c", 4, 0x5, true, rc);
    size_t sd = v4_add_shard(&b, &v4s, "d", 2, 0x2, true, rd);
    size_t sx = v4_add_shard(&b, &v4x, "x", 1, 0x1, true, rx);
    size_t se = v4_add_shard(&b, &v1, "e", 2, 0, false, re);
    int fd;
    (void)state;

    wire_put_u16(b.p + se + 8, 1); /* the version 2 header as version 1 */
    shard_bytes_fix_crc(b.p + se, shard_header_size(5));
    fd = shard_bytes_memfd(b.p, b.len);
    assert_int_equal(shard_reader_new(&r, fd), 0);

    expect_header(r, sa, 2, 0);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, ra[i], "a", i, false, 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    expect_header(r, sb, 3, 0);
    for (unsigned i = 0; i < 3; i++)
        expect_record(r, rb[i], "b", i, false, 20 + i);
    assert_int_equal(shard_reader_next(r, &it), 1);
    expect_header(r, sc, 4, 1);
    for (unsigned i = 0; i < 4; i++)
        expect_record(r, rc[i], "c", i, (0x5u >> i) & 1u, 0);
    expect_trailer(r, 4, sd - sc - (sd - rc[3] - shard_record_size(3, false)));
    expect_header(r, sd, 4, 2);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, rd[i], "d", i, (0x2u >> i) & 1u, 23 + i);
    assert_int_equal(shard_reader_next(r, &it), 1);
    expect_header(r, sx, 4, 9);
    expect_record(r, rx[0], "x", 0, true, 0);
    assert_int_equal(shard_reader_next(r, &it), 1);
    expect_header(r, se, 1, 0);
    for (unsigned i = 0; i < 2; i++)
        expect_record(r, re[i], "e", i, false, 0);
    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_true(shard_reader_records(r) == 14);
    assert_true(shard_reader_valid_end(r) == b.len);
    shard_reader_free(r);
    close(fd);
    free(b.p);
}

/* Appends len bytes at p to fd (at its end; the reader's offset is its
 * own business since it reads with read(2) from where it stopped). */
static void append_bytes(int fd, const unsigned char *p, size_t len)
{
    assert_int_equal(pwrite(fd, p, len, lseek(fd, 0, SEEK_END)), (ssize_t)len);
}

/* A version 4 shard followed while it is written, a byte at a time: every
 * torn state is -ENODATA (never damage, never a record early), salvage in
 * growing mode waits (-EAGAIN), shard_reader_continue reads on, and every
 * record comes out once, whole, with its credentials. */
static void test_follow_v4(void **state)
{
    struct shard_header h = v4_make_header("cron.u0", 1, 0, 1, stream_s, 70);
    size_t rec[5];
    struct bytebuf b = { 0 };
    struct shard_reader *r = NULL;
    size_t start = v4_add_shard(&b, &h, "dgram", 5, 0x1B, true, rec);
    int fd = memfd_create("shard-v4-follow", MFD_CLOEXEC);
    unsigned got_records = 0, got_headers = 0, got_trailers = 0;
    (void)state;

    assert_true(fd >= 0);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    for (size_t n = 0; n < b.len; n++) {
        struct shard_item it;
        int rc;

        append_bytes(fd, b.p + n, 1);
        while ((rc = shard_reader_next(r, &it)) == 1) {
            if (it.kind == SHARD_ITEM_HEADER) {
                assert_true(it.offset == start && it.header->source == 1);
                got_headers++;
            } else if (it.kind == SHARD_ITEM_RECORD) {
                char text[32];
                unsigned i = got_records++;
                bool creds = (0x1Bu >> i) & 1u;

                snprintf(text, sizeof(text), "dgram %u", i);
                /* Only once its last byte is there. */
                assert_true(it.offset == rec[i]);
                assert_true(n + 1 == rec[i] + shard_record_size((uint32_t)strlen(text), creds));
                assert_int_equal(it.len, strlen(text));
                assert_memory_equal(it.payload, text, it.len);
                assert_int_equal(it.has_creds, creds);
                assert_int_equal(it.creds.pid, creds ? v4_creds_of(i).pid : 0);
                assert_true(it.position == 70 + i);
            } else {
                assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
                assert_true(n + 1 == b.len);
                got_trailers++;
            }
        }
        if (rc == -ENODATA) {
            struct shard_skip skip;

            assert_int_equal(shard_reader_skip_damage(r, SHARD_SKIP_GROWING, &skip), -EAGAIN);
        } else {
            assert_int_equal(rc, 0);
        }
        assert_int_equal(shard_reader_continue(r), 0);
    }
    assert_int_equal(got_headers, 1);
    assert_int_equal(got_records, 5);
    assert_int_equal(got_trailers, 1);
    shard_reader_free(r);
    close(fd);
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v4_header_round_trip),
        cmocka_unit_test(test_client_writes_as_before),
        cmocka_unit_test(test_old_versions_read_as_client),
        cmocka_unit_test(test_v4_header_refused),
        cmocka_unit_test(test_record_length_field),
        cmocka_unit_test(test_record_creds_layout),
        cmocka_unit_test(test_records_round_trip),
        cmocka_unit_test(test_flipped_credential_byte),
        cmocka_unit_test(test_bogus_length_fields),
        cmocka_unit_test(test_merged_versions),
        cmocka_unit_test(test_follow_v4),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
