/* Session ACK ledger: which of a session's records are acknowledged, and
 * the shards the session holds for it.
 *
 * ACKs are cumulative over the connection. A record counts as acknowledged
 * once every record before it, in this shard and in older shards of the
 * session that are still being written, is written too (and synced, where
 * the fsync policy asks: the shard says what it counts as acknowledged,
 * shard_records_acked). A shard that fails caps the ledger for good: the
 * records after the last one it acknowledged are never acknowledged, even if
 * a later shard has them written.
 *
 * A full or old shard is retired (handed over to sealing) while its writes
 * may still be in flight; it stays on the session's retiring list, and counts
 * here, until they are done. Under fsync = always the next APPEND frame
 * waits until every record before it is synced (session_gate_closed), so
 * that no sync is shared. */
#include <string.h>

#include "config.h"
#include "daemon.h"
#include "session-internal.h"
#include "shard.h"

static uint64_t acked_through_shards(const struct session *s)
{
    for (unsigned i = 0; i < s->n_retiring; i++) {
        const struct retired *r = &s->retiring[i];
        uint64_t acked = shard_records_acked(r->shard);
        if (r->shard->error || acked < r->shard->records_queued)
            return r->base + acked;
    }
    if (s->current)
        return s->current_base + shard_records_acked(s->current);
    return s->received;
}

uint64_t session_acked_through(const struct session *s)
{
    uint64_t a = acked_through_shards(s);
    return a < s->ack_limit ? a : s->ack_limit;
}

bool session_all_settled(const struct session *s)
{
    if (s->n_retiring > 0)
        return false;
    return !s->current || shard_settled(s->current) || s->current->error;
}

/* The capacity of the session's shards' batch buffers, not only the bytes
 * in them, since capacity is what the daemon's RSS pays for.
 * session_buffer_bytes bounds this (with the receive buffer, see
 * session-recv.c). */
uint64_t session_buffered_bytes(const struct session *s)
{
    uint64_t n = s->current ? shard_buffer_bytes(s->current) : 0;

    for (unsigned i = 0; i < s->n_retiring; i++)
        n += shard_buffer_bytes(s->retiring[i].shard);
    return n;
}

bool session_gate_closed(const struct session *s)
{
    if (s->resume_wait)
        return true; /* no APPEND before WELCOME has said where the stream is */
    return s->fsync_policy == FSYNC_ALWAYS && !session_all_settled(s);
}

static void drop_retired(struct session *s, unsigned i)
{
    memmove(&s->retiring[i], &s->retiring[i + 1],
            (s->n_retiring - i - 1) * sizeof(s->retiring[0]));
    s->n_retiring--;
}

/* Callers check this before session_retire_current(), except when the
 * session ends and ACKs no longer matter. */
bool session_can_retire(const struct session *s)
{
    return s->n_retiring < SESSION_MAX_RETIRING;
}

/* Hands the current shard over to sealing. Its writes may still be in
 * flight; it then stays on the retiring list (and counts for ACKs) until
 * they are done. */
void session_retire_current(struct session *s)
{
    struct shard *sh = s->current;

    if (!sh)
        return;
    s->current = NULL;
    if (shard_settled(sh) || sh->error || !session_can_retire(s)) {
        shard_detach(sh);
    } else {
        s->retiring[s->n_retiring].shard = sh;
        s->retiring[s->n_retiring].base = s->current_base;
        s->n_retiring++;
    }
    shard_seal(sh);
}

void session_release_settled(struct session *s)
{
    for (unsigned i = 0; i < s->n_retiring;) {
        struct shard *sh = s->retiring[i].shard;

        if (shard_settled(sh) || sh->error) {
            shard_detach(sh);
            drop_retired(s, i);
        } else {
            i++;
        }
    }
}

void session_ack_cap(struct session *s, const struct shard *sh)
{
    uint64_t base = s->current_base;

    for (unsigned i = 0; i < s->n_retiring; i++)
        if (s->retiring[i].shard == sh)
            base = s->retiring[i].base;
    if (base + shard_records_acked(sh) < s->ack_limit)
        s->ack_limit = base + shard_records_acked(sh);
}

void session_release_shards(struct session *s)
{
    session_retire_current(s);
    for (unsigned i = 0; i < s->n_retiring; i++)
        shard_detach(s->retiring[i].shard);
    s->n_retiring = 0;
}
