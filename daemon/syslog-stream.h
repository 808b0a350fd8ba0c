/* The syslog stream socket ([syslog] stream_socket, --syslog-stream-socket):
 * a Unix stream socket whose connections send syslog messages, newline- or
 * NUL-terminated or octet-counted (RFC 6587). Each connection is one
 * producer with shards of its own. See syslog-stream.c (the socket) and
 * syslog-stream-conn.c (a connection). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct daemon;
struct syslog_stream;

/* Binds the configured path (mode 0666; a stale socket file replaced, a
 * live one refused), or takes the listening socket systemd passed at that
 * path, and starts accepting. Returns 0 or a negative errno with a message
 * naming the path in why. */
int syslog_stream_start(struct daemon *d, struct syslog_stream **ret, char *why, size_t why_len);

/* The path connections arrive on, for log lines. */
const char *syslog_stream_path(const struct syslog_stream *l);

/* Whether the socket came from systemd. */
bool syslog_stream_activated(const struct syslog_stream *l);

/* Connections open now. Takes NULL (the input is off: 0). */
size_t syslog_stream_connections(const struct syslog_stream *l);

/* The periodic check: seals the shard of every connection that has sent
 * nothing for [syslog] idle_timeout (the connection stays; its next message
 * opens a new shard) or whose shard is older than max_shard_age. */
void syslog_stream_sweep(struct syslog_stream *l);

/* logctl rotate: seals now the shard of every connection whose producer
 * is named producer (NULL: of every connection); their next messages open
 * new shards. Returns how many were sealed. Takes NULL (the input is off). */
size_t syslog_stream_rotate(struct syslog_stream *l, const char *producer);

/* The drain: stops accepting; reads what each connection has already sent
 * (what the kernel holds for it), stores every message in it, a last one
 * without its line end included, seals each shard and closes each
 * connection. cb(data) runs once everything is closed and l is freed. */
void syslog_stream_stop(struct syslog_stream *l, void (*cb)(void *data), void *data);
