/* The daemon's lifecycle once it runs: the periodic work whose pace the
 * settings decide, a reload's new settings taking effect, and the drain at
 * shutdown until the last shard is sealed. main.c starts it and hands it
 * the signals' news; it hears of sealed shards through the shards' events
 * (shard-events.h) like every other listener. */
#pragma once

#include <stdbool.h>

struct config;
struct daemon;

/* Starts the periodic checks (session_sweep, and the interval syncs under
 * fsync = interval) and subscribes to the shards' reports, so the drain
 * can tell when the last shard is sealed. Once, after the I/O backend is
 * set up and before the loop runs. */
void lifecycle_start(struct daemon *d);

/* Puts settings read again (SIGHUP) in force: what can change while
 * running changes for new connections and new shards (fsync policy and
 * interval, limits, shard size and age); what cannot (paths, socket mode
 * and group, I/O backend) keeps its running value and the log says so.
 * Takes fresh over (it is freed or kept as d->config). */
void lifecycle_reload(struct daemon *d, struct config *fresh);

/* Starts draining: stop accepting, let every session finish, seal every
 * shard, then leave the loop. Safe to call more than once. */
void lifecycle_begin_drain(struct daemon *d, const char *why);

/* Whether the daemon still runs: false from the start of the drain on, when
 * a second SIGTERM or SIGINT exits at once and SIGHUP is ignored. */
bool lifecycle_running(const struct daemon *d);

/* Called whenever a session goes away (and, through the shards' sealed
 * event, a shard), so the drain can see when the last one is gone. */
void lifecycle_maybe_finish(struct daemon *d);
