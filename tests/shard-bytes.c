/* What the tests of the shard format versions share: see shard-bytes.h. */
#include "shard-bytes.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "wire.h"

size_t shard_bytes_add_header(struct bytebuf *b, const struct shard_header *h)
{
    size_t size = shard_header_size_v(shard_header_write_version(h), h->producer_len);
    size_t off = b->len;

    assert_int_equal(shard_encode_header(bytebuf_grow(b, size), h), size);
    return off;
}

size_t shard_bytes_add_record(struct bytebuf *b, const void *payload, uint32_t len, uint64_t ts,
                              const struct shard_creds *creds)
{
    size_t size = shard_record_size(len, creds != NULL);
    size_t off = b->len;

    if (creds)
        assert_int_equal(shard_encode_record_creds(bytebuf_grow(b, size), payload, len, ts, creds),
                         size);
    else
        assert_int_equal(shard_encode_record(bytebuf_grow(b, size), payload, len, ts), size);
    return off;
}

void shard_bytes_add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records,
                             uint64_t newest_ns)
{
    struct shard_trailer t = {
        .shard_len = b->len - shard_start,
        .records = records,
        .newest_ns = newest_ns,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, 4096);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

int shard_bytes_memfd(const void *p, size_t len)
{
    int fd = memfd_create("shard-bytes", MFD_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, len), (ssize_t)len);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    return fd;
}

void shard_bytes_fix_crc(unsigned char *b, size_t size)
{
    wire_put_u32(b + size - 4, crc32c(b, size - 4));
}

void shard_bytes_expect_bad_header(const unsigned char *b, size_t avail, const char *want_why)
{
    struct shard_header got;
    const char *why = NULL;

    assert_int_equal(shard_decode_header(b, avail, &got, &why), -EBADMSG);
    assert_non_null(why);
    assert_string_equal(why, want_why);
}

void shard_bytes_refuse_u16(const unsigned char *good, size_t size, size_t offset, uint16_t value,
                            const char *want_why)
{
    unsigned char b[SHARD_HEADER_MAX];

    assert_true(size <= sizeof(b) && offset + 2 <= size - 4);
    memcpy(b, good, size);
    wire_put_u16(b + offset, value);
    shard_bytes_fix_crc(b, size);
    shard_bytes_expect_bad_header(b, size, want_why);
}

void shard_bytes_refuse_u64(const unsigned char *good, size_t size, size_t offset, uint64_t value,
                            const char *want_why)
{
    unsigned char b[SHARD_HEADER_MAX];

    assert_true(size <= sizeof(b) && offset + 8 <= size - 4);
    memcpy(b, good, size);
    wire_put_u64(b + offset, value);
    shard_bytes_fix_crc(b, size);
    shard_bytes_expect_bad_header(b, size, want_why);
}
