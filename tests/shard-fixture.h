/* The fixture the tests of common/shard_format.c and shard_reader.c share
 * (tests/test-shard-format.c, test-shard-reader.c, test-shard-trailer.c): the shard header
 * both build their shards and checks from. */
#pragma once

#include <stdint.h>

#include "shard_format.h"

/* A version 2 header for producer whose every numeric field is derived from
 * id, so that headers built with different ids differ in all of them. */
struct shard_header make_header(const char *producer, uint64_t id);
