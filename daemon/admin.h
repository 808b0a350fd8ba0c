/* The admin socket: where logctl status, ls and rotate talk to the running
 * daemon (docs/PROTOCOL.md, "Admin protocol"). */
#pragma once

#include <stddef.h>

struct daemon;
struct admin;

/* The admin protocol's version: the "version" member of every request and
 * reply. */
#define ADMIN_PROTOCOL_VERSION 1

/* Binds d->config.admin_socket (mode 0600; a stale socket file left by a
 * dead daemon is replaced, a live one is an error) and starts serving it.
 * Subscribes to the shards' sealed events, which complete rotate requests.
 * On error why says what went wrong, naming the path. Returns 0 or a
 * negative errno; *ret is written only on success. */
int admin_start(struct daemon *d, struct admin **ret, char *why, size_t why_len);

/* The socket's path, for messages. */
const char *admin_path(const struct admin *a);

/* Stops serving: removes the socket file, closes every connection (a rotate
 * still waiting is told that the daemon is stopping; the drain seals its
 * shards anyway) and waits for work in flight on the thread pool. cb runs
 * once everything is closed and a is freed. */
void admin_stop(struct admin *a, void (*cb)(void *data), void *data);
