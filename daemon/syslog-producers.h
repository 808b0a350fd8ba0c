/* The syslog producers: senders without a connection (datagrams), each
 * named <identifier>.u<uid> (syslog_producer_name), each owning at most one
 * open shard of format version 4. See syslog-producers.c. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "shard_format.h"

struct daemon;
struct syslog_producers;

/* Creates the empty table and subscribes it to the shards' reports.
 * Returns 0 or -ENOMEM. */
int syslog_producers_new(struct daemon *d, struct syslog_producers **ret);

/* Appends one record for the producer name (name_len bytes, passing the
 * producer name rule) received at now_ns (CLOCK_REALTIME; now_mono_ns on CLOCK_MONOTONIC, for
 * the idle time) from the sender
 * creds: the producer is found or made (sealing the one idle longest when
 * [syslog] max_producers are open), its shard opened when it has none
 * (source, and header credentials, from this sender), rolled over past
 * max_shard_bytes. Returns 0, or a negative errno when the record was not
 * taken (-EMFILE: max_open_shards reached; -ENOMEM; an I/O error opening
 * the shard, or the shard's write error); the caller counts and logs it. */
int syslog_producers_append(struct daemon *d, const char *name, size_t name_len,
                            const struct shard_creds *creds, const void *rec, uint32_t len,
                            uint64_t now_ns, uint64_t now_mono_ns);

/* The periodic check: seals the shard of every producer idle for
 * [syslog] idle_timeout (and forgets the producer), and rolls over every
 * shard older than max_shard_age. */
void syslog_producers_sweep(struct daemon *d);

/* logctl rotate: seals the shard of the producer named producer (NULL:
 * of every producer) now, and forgets it. Returns how many were sealed. */
size_t syslog_producers_rotate(struct daemon *d, const char *producer);

/* The drain: seals every producer's shard and forgets every producer. */
void syslog_producers_seal_all(struct daemon *d);

/* How many producers have an open shard now. */
size_t syslog_producers_count(const struct daemon *d);

/* Frees the table (at exit, after the loop has ended). Takes NULL. */
void syslog_producers_free(struct daemon *d);
