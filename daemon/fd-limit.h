/* The daemon's open-file limit: every producer holds a socket and a shard
 * file (two descriptors for the file under sync_method = one-flush), so the
 * daemon takes its hard RLIMIT_NOFILE at start and says so when even that
 * is below what its limits let producers take. */
#pragma once

#include <stdint.h>

struct config;

/* How many descriptors the limits of *c let the daemon hold at once: a
 * connection for each of max_producers (twice as many with a syslog stream
 * socket, which admits as many), two for each of max_open_shards, and a
 * margin for the spool's directories, the listeners, the admin socket's
 * clients and the I/O ring. */
uint64_t fd_limit_needed(const struct config *c);

/* At start: raises the soft RLIMIT_NOFILE to the hard limit, logs the
 * change, and warns, naming the keys, when the limit is below
 * fd_limit_needed(). */
void fd_limit_start(const struct config *c);

/* After a reload: warns as fd_limit_start() does when the new limits want
 * more descriptors than the process may open. */
void fd_limit_check(const struct config *c);
