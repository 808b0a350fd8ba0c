/* The producer socket: bound by the daemon, or handed over by systemd. */
#pragma once

#include <uv.h>

struct daemon;
struct listener;

/* Starts listening: on the socket systemd passed (sd_listen_fds), else on
 * d->config.socket_path, bound with d->config.socket_mode. A stale socket
 * file left by a dead daemon is replaced; a live one is an error. On error
 * *ret_why says what went wrong (static or in why_buf).
 * Returns 0 or a negative errno. */
int listener_start(struct daemon *d, struct listener **ret, char *why, size_t why_len);

/* Whether the socket came from systemd. */
int listener_activated(const struct listener *l);

/* The path producers connect to, for messages. */
const char *listener_path(const struct listener *l);

/* Stops accepting and closes the socket; removes the socket file when this
 * daemon created it. cb runs once the handle is closed. */
void listener_stop(struct listener *l, void (*cb)(void *data), void *data);
