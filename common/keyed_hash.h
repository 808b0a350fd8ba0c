/* A hash keyed with random bytes, for tables whose keys come from outside
 * the daemon (stream ids, syslog identifiers): without the key nobody can
 * pick keys that all land in one bucket. Not a cryptographic MAC: only
 * the spread is promised. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct keyed_hash {
    uint64_t key[2];
};

/* Picks the key: random bytes from the kernel, or, when it has no entropy
 * yet (early boot), the clocks and the key's own address, a weaker key
 * under which tables stay correct. */
void keyed_hash_init(struct keyed_hash *k);

/* The hash of data[0..len) under k: eight bytes a step, each mixed with
 * the key through the splitmix64 finaliser, the length in the last. */
uint64_t keyed_hash_bytes(const struct keyed_hash *k, const void *data, size_t len);
