/* Version 4 shard files built by hand, for the tests of the format and the
 * reader (test-shard-v4.c) and of logctl cat on such files
 * (test-shard-v4-cat.c): what they share (shard-v4-file.c). Record i of a
 * shard is "<tag> <i>", received at TS0 + i. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bytebuf.h"
#include "shard_format.h"

/* The stream of the test shards that have one, and its id as logctl
 * prints it. */
extern const uint8_t stream_s[SHARD_STREAM_ID_SIZE];
#define STREAM_S_HEX "5e11029344a506f70819aa3b0cdd0e9f"

#define TS0 1800000000000000000ull /* 2027-01-15T08:00:00Z */

/* A header of version (0 for the default), source and stream (NULL for
 * none), created a little before TS0 by uid 1000, gid 100, pid 4242. */
struct shard_header v4_make_header(const char *producer, uint64_t id, unsigned version,
                                   unsigned source, const uint8_t *stream,
                                   uint64_t first_position);
/* The sender of record i of the test files: pid 7000 + i, uid 1000 + i % 3
 * and gid 2000 + i % 3. */
struct shard_creds v4_creds_of(uint64_t i);
/* Appends record i ("<tag> <i>"), with the credentials of v4_creds_of(i)
 * when creds; returns its offset. */
size_t v4_add_record(struct bytebuf *b, const char *tag, uint64_t i, bool creds);
/* Appends the seal trailer of the shard that starts at shard_start and
 * holds records, the newest received at TS0 + 1000. */
void v4_add_trailer(struct bytebuf *b, size_t shard_start, uint64_t records);
/* Appends a shard of n records "<tag> <i>"; record i carries credentials
 * when bit i of creds_mask is set. Sealed unless seal is false. The offset
 * of record i goes to rec_off[i] (may be NULL). Returns the shard's
 * offset. */
size_t v4_add_shard(struct bytebuf *b, const struct shard_header *h, const char *tag,
                    unsigned n, uint32_t creds_mask, bool seal, size_t *rec_off);
