/* Shard bytes built by hand, for the tests of the shard format versions
 * (test-shard-v3.c, shard-v4-file.c) and of what logctl cat shows
 * (test-cat-syslog.c): what they share (shard-bytes.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "bytebuf.h"
#include "shard_format.h"

/* Appends h encoded in the version it is written in; returns its offset. */
size_t shard_bytes_add_header(struct bytebuf *b, const struct shard_header *h);
/* Appends a record of len bytes received at ts, with the sender's
 * credentials when creds is not NULL (format version 4 only); returns its
 * offset. */
size_t shard_bytes_add_record(struct bytebuf *b, const void *payload, uint32_t len, uint64_t ts,
                              const struct shard_creds *creds);
/* Appends the seal trailer of the shard that starts at shard_start and
 * holds records, the newest received at newest_ns. */
void shard_bytes_add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records,
                             uint64_t newest_ns);
/* A memfd holding the len bytes at p, its offset at 0. */
int shard_bytes_memfd(const void *p, size_t len);
/* Sets the CRC of the size-byte header at b to match its other bytes, so
 * that a test's change to a field is what the decoder judges. */
void shard_bytes_fix_crc(unsigned char *b, size_t size);
/* The decoder refuses the header at b (avail bytes) for want_why. */
void shard_bytes_expect_bad_header(const unsigned char *b, size_t avail, const char *want_why);
/* The decoder refuses the good header of size bytes with the field at
 * offset set to value and its CRC made right again, for want_why. */
void shard_bytes_refuse_u16(const unsigned char *good, size_t size, size_t offset, uint16_t value,
                            const char *want_why);
void shard_bytes_refuse_u64(const unsigned char *good, size_t size, size_t offset, uint64_t value,
                            const char *want_why);
