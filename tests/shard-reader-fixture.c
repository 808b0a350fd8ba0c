/* What the tests of the shard reader share (tests/test-shard-reader.c,
 * tests/test-shard-trailer.c): recognisable records, files written whole,
 * a reader opened on them, and checks of the items it returns. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "shard-reader-fixture.h"


/* Payload byte j of record i of shard s: recognisable anywhere. */
unsigned char payload_byte(unsigned s, uint64_t i, size_t j)
{
    return (unsigned char)(s * 31u + i * 7u + j * 13u + (j >> 8));
}

uint64_t record_ts(unsigned s, uint64_t i)
{
    return 1800000000000000000ull + s * 1000000ull + i;
}

/* Appends a shard header; returns its offset. */
size_t add_header(struct bytebuf *b, const struct shard_header *h)
{
    size_t off = b->len;
    unsigned char *p = bytebuf_grow(b, shard_header_size(h->producer_len));

    assert_int_equal(shard_encode_header(p, h), shard_header_size(h->producer_len));
    return off;
}

/* Appends record i of shard s with len bytes; returns its offset. */
size_t add_record(struct bytebuf *b, unsigned s, uint64_t i, uint32_t len)
{
    size_t off = b->len;
    unsigned char *payload = malloc(len);
    unsigned char *p;

    assert_non_null(payload);
    for (size_t j = 0; j < len; j++)
        payload[j] = payload_byte(s, i, j);
    p = bytebuf_grow(b, SHARD_RECORD_HEADER + len);
    assert_int_equal(shard_encode_record(p, payload, len, record_ts(s, i)),
                     SHARD_RECORD_HEADER + len);
    free(payload);
    return off;
}



int setup_dir(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-shard-reader.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/file.shard", f->dir);
    *state = f;
    return 0;
}

int teardown_dir(void **state)
{
    struct fixture *f = *state;

    (void)unlink(f->path); /* may not exist; nothing else to do */
    assert_int_equal(rmdir(f->dir), 0);
    free(f);
    return 0;
}

void write_file(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const unsigned char *p = data;

    assert_true(fd >= 0);
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        assert_true(n > 0);
        p += n;
        len -= (size_t)n;
    }
    assert_int_equal(close(fd), 0);
}



struct open_reader reader_open(const char *path)
{
    struct open_reader o;

    o.fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(o.fd >= 0);
    assert_int_equal(shard_reader_new(&o.r, o.fd), 0);
    assert_non_null(o.r);
    return o;
}

void reader_close(struct open_reader *o)
{
    shard_reader_free(o->r);
    assert_int_equal(close(o->fd), 0);
}

void expect_header_item(struct shard_reader *r, uint64_t offset, const struct shard_header *want)
{
    struct shard_item it;

    memset(&it, 0, sizeof(it));
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_HEADER);
    assert_int_equal(it.offset, offset);
    assert_non_null(it.header);
    assert_int_equal(it.header->version, SHARD_FORMAT_VERSION);
    assert_int_equal(it.header->header_len, shard_header_size(want->producer_len));
    assert_int_equal(it.header->uid, want->uid);
    assert_int_equal(it.header->gid, want->gid);
    assert_int_equal(it.header->pid, want->pid);
    assert_true(it.header->shard_id == want->shard_id);
    assert_true(it.header->created_ns == want->created_ns);
    assert_int_equal(it.header->producer_len, want->producer_len);
    assert_string_equal(it.header->producer, want->producer);
    assert_null(it.payload);
    assert_int_equal(it.len, 0);
    assert_int_equal(shard_reader_valid_end(r), offset + it.header->header_len);
}

void expect_record_item(struct shard_reader *r, uint64_t offset, unsigned s, uint64_t i,
                        uint32_t len, const char *producer)
{
    struct shard_item it;

    memset(&it, 0, sizeof(it));
    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_RECORD);
    assert_int_equal(it.offset, offset);
    assert_int_equal(it.len, len);
    assert_true(it.timestamp_ns == record_ts(s, i));
    assert_non_null(it.header);
    assert_string_equal(it.header->producer, producer);
    assert_non_null(it.payload);
    for (size_t j = 0; j < len; j++)
        if (it.payload[j] != payload_byte(s, i, j))
            fail_msg("shard %u record %llu byte %zu: 0x%02x, want 0x%02x", s,
                     (unsigned long long)i, j, it.payload[j], payload_byte(s, i, j));
    assert_int_equal(shard_reader_valid_end(r), offset + SHARD_RECORD_HEADER + len);
}

void expect_end(struct shard_reader *r, uint64_t size)
{
    struct shard_item it;
    uint64_t off = 1;
    const char *why = "x";

    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_int_equal(shard_reader_next(r, &it), 0);
    assert_int_equal(shard_reader_valid_end(r), size);
    shard_reader_error(r, &off, &why);
    assert_int_equal(off, size);
    assert_null(why);
}

void expect_error(struct shard_reader *r, int err, uint64_t offset, const char *want_why)
{
    struct shard_item it;
    uint64_t off = 0;
    const char *why = NULL;

    assert_int_equal(shard_reader_next(r, &it), err);
    /* Later calls repeat the error. */
    assert_int_equal(shard_reader_next(r, &it), err);
    assert_int_equal(shard_reader_valid_end(r), offset);
    shard_reader_error(r, &off, &why);
    assert_int_equal(off, offset);
    assert_non_null(why);
    assert_string_equal(why, want_why);
}

/* ---- reader ---- */

/* ---- seal trailer ---- */

/* Appends a seal trailer for the shard that starts at shard_start. */
size_t add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records, size_t align)
{
    size_t off = b->len;
    struct shard_trailer t = {
        .shard_len = off - shard_start,
        .records = records,
        .newest_ns = 1900000000000000000ull + records,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, align);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
    return off;
}

void expect_trailer_item(struct shard_reader *r, uint64_t offset, uint32_t len,
                         uint64_t shard_len, uint64_t records)
{
    struct shard_item it;

    assert_int_equal(shard_reader_next(r, &it), 1);
    assert_int_equal(it.kind, SHARD_ITEM_TRAILER);
    assert_int_equal(it.offset, offset);
    assert_int_equal(it.len, len);
    assert_non_null(it.trailer);
    assert_int_equal(it.trailer->trailer_len, len);
    assert_int_equal(it.trailer->shard_len, shard_len);
    assert_int_equal(it.trailer->records, records);
    assert_true(it.trailer->newest_ns == 1900000000000000000ull + records);
}

