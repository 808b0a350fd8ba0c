/* What the tests of the shard reader share (shard-reader-fixture.c). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "bytebuf.h"
#include "shard_format.h"

struct fixture {
    char dir[64];
    char path[128];
};

struct open_reader {
    int fd;
    struct shard_reader *r;
};

/* Payload byte j of record i of shard s, and that record's timestamp:
 * recognisable anywhere. */
unsigned char payload_byte(unsigned s, uint64_t i, size_t j);
uint64_t record_ts(unsigned s, uint64_t i);
/* Appends an encoded header, a record of len bytes, or a seal trailer for
 * the shard that starts at shard_start; each returns where it begins. */
size_t add_header(struct bytebuf *b, const struct shard_header *h);
size_t add_record(struct bytebuf *b, unsigned s, uint64_t i, uint32_t len);
/* cmocka fixtures: a struct fixture with a fresh temporary directory. */
int setup_dir(void **state);
int teardown_dir(void **state);
/* Writes the file whole, replacing what was there. */
void write_file(const char *path, const void *data, size_t len);
/* A reader on the file at path, and its end. */
struct open_reader reader_open(const char *path);
void reader_close(struct open_reader *o);
/* The next item is that header, record or trailer, or the reader ends
 * cleanly at size, or stops with that error, offset and reason. */
void expect_header_item(struct shard_reader *r, uint64_t offset, const struct shard_header *want);
void expect_record_item(struct shard_reader *r, uint64_t offset, unsigned s, uint64_t i,
                        uint32_t len, const char *producer);
void expect_end(struct shard_reader *r, uint64_t size);
void expect_error(struct shard_reader *r, int err, uint64_t offset, const char *want_why);
size_t add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records, size_t align);
void expect_trailer_item(struct shard_reader *r, uint64_t offset, uint32_t len,
                         uint64_t shard_len, uint64_t records);
