/* A producer connection: reads frames, checks them, hands records to the
 * connection's shard and sends ACKs as the shard's writes complete. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct daemon;

/* Starts a session on an accepted connection (fd, non-blocking, owned by
 * the session from here on). A peer that a limit or the access lists refuse
 * gets an ERROR frame naming the limit and is closed. Returns 0 or a
 * negative errno (fd is then closed). */
int session_accept(struct daemon *d, int fd);

/* Stops reading new frames on every session; each finishes what it
 * accepted, sends its last ACK, closes and seals its shards. */
void session_drain_all(struct daemon *d);

/* The periodic checks: drops sessions that sent no HELLO within
 * hello_timeout_ms or left a frame incomplete longer than idle_timeout_ms
 * (their complete records are kept), and retires every current shard older
 * than max_shard_age. */
void session_sweep(struct daemon *d);

/* Subscribes the sessions to the shards' reports they share: a shard that
 * gives memory back lets sessions paused for the daemon's memory limit read
 * again. Once, before the first connection. */
void session_init(struct daemon *d);

/* Retires the current shard of every open session of producer (NULL: of
 * every producer) now, as a full shard would be: it is sealed once its
 * writes are done, and the session's next record opens a new shard. Used by
 * the admin socket's rotate. Returns how many shards were retired;
 * *ret_busy (may be NULL) gets how many sessions could not retire theirs
 * now because too many of their older shards are still being written. */
size_t session_rotate(struct daemon *d, const char *producer, size_t *ret_busy);

/* Records received on open connections and not yet acknowledged. */
uint64_t session_acks_pending(const struct daemon *d);
