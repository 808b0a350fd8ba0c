/* Session admission: whether a connected peer may produce here at all.
 *
 * Checked once, as soon as the connection is accepted and before the
 * producer says anything, from its SO_PEERCRED credentials: the access
 * lists (allowed_uids, allowed_gids) first, then max_producers and
 * max_producers_per_uid against the sessions already admitted. A refused
 * peer gets an ERROR naming the rule and its value and is closed; it is
 * counted once, here, as refused_access or refused_limit. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>

#include "config.h"
#include "daemon.h"
#include "notify.h"
#include "session-internal.h"

static size_t sessions_of_uid(const struct daemon *d, uint32_t uid)
{
    size_t n = 0;

    for (const struct list_node *p = d->sessions.next; p != &d->sessions; p = p->next) {
        const struct session *o = list_entry(p, struct session, node);
        n += o->admission == ADMISSION_ADMITTED && o->cred.uid == uid;
    }
    return n;
}

static void refuse(struct session *s)
{
    s->admission = ADMISSION_REFUSED;
}

void session_admit(struct session *s)
{
    struct daemon *d = s->d;
    const struct config *c = &d->config;

    assert(s->admission == ADMISSION_PENDING);
    if ((c->allowed_uids.n || c->allowed_gids.n) &&
        !config_id_list_contains(&c->allowed_uids, s->cred.uid) &&
        !config_id_list_contains(&c->allowed_gids, s->cred.gid)) {
        d->stats.refused_access++;
        refuse(s);
        session_fail(s, EACCES,
                     "uid %u, gid %u may not produce here (not in allowed_uids or "
                     "allowed_gids)",
                     (unsigned)s->cred.uid, (unsigned)s->cred.gid);
        return;
    }
    if (d->stats.sessions_open >= c->max_producers) {
        d->stats.refused_limit++;
        refuse(s);
        session_fail(s, EUSERS, "max_producers (%" PRIu64 ") reached", c->max_producers);
        return;
    }
    if (c->max_producers_per_uid && sessions_of_uid(d, s->cred.uid) >= c->max_producers_per_uid) {
        d->stats.refused_limit++;
        refuse(s);
        session_fail(s, EUSERS, "max_producers_per_uid (%" PRIu64 ") reached for uid %u",
                     c->max_producers_per_uid, (unsigned)s->cred.uid);
        return;
    }
    s->admission = ADMISSION_ADMITTED;
    d->stats.sessions_open++;
    notify_changed(d);
}

void session_admit_release(struct session *s)
{
    if (s->admission != ADMISSION_ADMITTED)
        return;
    s->d->stats.sessions_open--;
    notify_changed(s->d);
}
