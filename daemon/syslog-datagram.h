/* The syslog datagram socket ([syslog] datagram_socket, --syslog-socket):
 * a /dev/log-style Unix datagram socket whose every datagram is one syslog
 * message. See syslog-datagram.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

struct daemon;
struct syslog_dgram;

/* Binds the configured path (a stale socket file replaced, a live one
 * refused; mode 0666, as /dev/log), or takes the Unix datagram socket
 * systemd passed at that path, and starts reading. Returns 0 or a negative
 * errno with a message naming the path in why. */
int syslog_dgram_start(struct daemon *d, struct syslog_dgram **ret, char *why, size_t why_len);

/* The path datagrams are read on, for log lines. */
const char *syslog_dgram_path(const struct syslog_dgram *g);

/* Whether the socket came from systemd. */
bool syslog_dgram_activated(const struct syslog_dgram *g);

/* Stops reading, removes the file it bound, closes the socket; cb(data)
 * runs once its handle is closed and g is freed. Datagrams still queued in
 * the kernel are not read (they are lost with the socket, unless it came
 * from systemd, which keeps it for the next daemon). */
void syslog_dgram_stop(struct syslog_dgram *g, void (*cb)(void *data), void *data);
