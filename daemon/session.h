/* A producer connection: reads frames, checks them, hands records to the
 * connection's shard and sends ACKs as the shard's writes complete. */
#pragma once

#include <uv.h>

struct daemon;

/* Accepts one pending connection from server into a new session.
 * Returns 0 or a negative errno (the connection is then dropped). */
int session_accept(struct daemon *d, uv_stream_t *server);

/* Stops reading new frames on every session; each finishes what it
 * accepted, sends its last ACK, closes and seals its shards. */
void session_drain_all(struct daemon *d);

/* Retires every session's current shard that is older than max_shard_age
 * and holds records. Called from a periodic timer. */
void session_roll_aged(struct daemon *d);
