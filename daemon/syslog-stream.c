/* The syslog stream socket (syslog-stream.h): the listener.
 *
 * It binds the socket (or takes systemd's), admits connections by the
 * rules a liblogshard connection meets, and hands each admitted one to
 * syslog-stream-conn.c, which reads, frames and stores it; it runs the
 * sweep, rotate and the drain over its connections, and frees itself once
 * the socket and the last connection are closed. What a connection
 * becomes, how it is framed and how it waits: syslog-stream-conn.c. */
#include "syslog-stream.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "list.h"
#include "log.h"
#include "shard-events.h"
#include "syslog-stream-internal.h"

#define STREAM_MODE 0666 /* anyone may log, as to /dev/log */
#define STREAM_BACKLOG 128
#define EMFILE_PAUSE_MS 100

/* Buffers came back: the connections paused first read again first, while
 * the daemon stays under three quarters of its limit. */
static void on_shard_released(void *data, struct shard *sh)
{
    (void)sh;
    stream_conns_resume(data);
}

static const struct shard_events stream_shard_events = {
    .released = on_shard_released,
};

/* ---- accepting ---- */

static size_t conns_of_uid(const struct syslog_stream *l, uint32_t uid)
{
    size_t n = 0;

    for (const struct list_node *p = l->conns.next; p != &l->conns; p = p->next)
        n += list_entry(p, struct conn, node)->creds.uid == uid;
    return n;
}

/* The rules a liblogshard connection meets (session-admit.c), for this
 * socket's connections: the access lists, then max_producers and
 * max_producers_per_uid counted among them. Syslog has no way to tell the
 * peer why, so the log does. Returns 0 when the peer may send. */
static int admit(struct syslog_stream *l, const struct ucred *uc)
{
    static struct log_ratelimit rl = LOG_RATELIMIT_INIT("refused syslog stream connections");
    struct daemon *d = l->d;
    const struct config *cfg = &d->config;
    char why[160];

    if ((cfg->allowed_uids.n || cfg->allowed_gids.n) &&
        !config_id_list_contains(&cfg->allowed_uids, uc->uid) &&
        !config_id_list_contains(&cfg->allowed_gids, uc->gid)) {
        d->stats.refused_access++;
        snprintf(why, sizeof(why), "not in allowed_uids or allowed_gids");
    } else if (l->n_conns >= cfg->max_producers) {
        d->stats.refused_limit++;
        snprintf(why, sizeof(why), "max_producers (%" PRIu64 ") connections are open",
                 cfg->max_producers);
    } else if (cfg->max_producers_per_uid &&
               conns_of_uid(l, (uint32_t)uc->uid) >= cfg->max_producers_per_uid) {
        d->stats.refused_limit++;
        snprintf(why, sizeof(why), "max_producers_per_uid (%" PRIu64 ") reached for its uid",
                 cfg->max_producers_per_uid);
    } else {
        return 0;
    }
    log_msg_ratelimited(&rl, d->loop, LOG_LEVEL_WARNING,
                        "%s: refused a connection of pid %d, uid %u, gid %u: %s", l->path,
                        (int)uc->pid, (unsigned)uc->uid, (unsigned)uc->gid, why);
    return -EACCES;
}

static void on_accepted(struct unixsock *u, int fd)
{
    struct syslog_stream *l = u->data;
    struct ucred uc;
    socklen_t sl = sizeof(uc);

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &sl) < 0 || admit(l, &uc) < 0) {
        (void)close(fd); /* no credentials or not admitted: nothing of it is read */
        return;
    }
    stream_conn_accept(l, fd, &uc);
}

static void on_trouble(struct unixsock *u, enum unixsock_trouble what, int err)
{
    struct syslog_stream *l = u->data;

    switch (what) {
    case UNIXSOCK_TROUBLE_WATCH:
        log_error("watching %s failed: %s", l->path, uv_strerror(err));
        break;
    case UNIXSOCK_TROUBLE_PAUSED:
        log_warning_ratelimited(l->d->loop, "pauses in accepting syslog stream connections",
                                "%s: cannot accept: %s; pausing, waiting connections stay "
                                "queued",
                                l->path, strerror(err));
        break;
    case UNIXSOCK_TROUBLE_ACCEPT:
        log_error("accepting on %s failed: %s", l->path, strerror(err));
        break;
    }
}

static const struct unixsock_ops stream_sock_ops = {
    .accepted = on_accepted,
    .trouble = on_trouble,
};

/* ---- start, sweep, stop ---- */

static int bind_socket(struct syslog_stream *l, char *why, size_t why_len)
{
    enum unixsock_step step;
    int r = unixsock_bind(&l->sock, l->path, STREAM_MODE, NULL, STREAM_BACKLOG, &step);

    if (r == 0)
        return 0;
    switch (step) {
    case UNIXSOCK_STEP_ADDRESS:
        snprintf(why, why_len, "[syslog] stream_socket %s: too long for a Unix socket address",
                 l->path);
        break;
    case UNIXSOCK_STEP_STALE:
        if (r == -EADDRINUSE)
            snprintf(why, why_len, "[syslog] stream_socket %s: another daemon is listening there",
                     l->path);
        else if (r == -EEXIST)
            snprintf(why, why_len, "[syslog] stream_socket %s: exists and is not a socket",
                     l->path);
        else
            snprintf(why, why_len, "[syslog] stream_socket %s: %s", l->path, strerror(-r));
        break;
    default:
        snprintf(why, why_len, "cannot listen on [syslog] stream_socket %s: %s", l->path,
                 strerror(-r));
        break;
    }
    return r;
}

int syslog_stream_start(struct daemon *d, struct syslog_stream **ret, char *why, size_t why_len)
{
    struct syslog_stream *l = calloc(1, sizeof(*l));
    int r;

    if (l)
        l->path = strdup(d->config.syslog_stream_socket);
    if (!l || !l->path) {
        if (l)
            free(l);
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    l->d = d;
    list_init(&l->conns);
    list_init(&l->paused);
    list_init(&l->on_shards.node);
    unixsock_init(&l->sock, d->loop, &stream_sock_ops, EMFILE_PAUSE_MS, l);
    if (d->passed.syslog_stream >= 0) {
        l->activated = true;
        r = unixsock_adopt(&l->sock, d->passed.syslog_stream);
        if (r < 0)
            snprintf(why, why_len, "[syslog] stream_socket %s (from systemd): cannot watch it: %s",
                     l->path, strerror(-r));
    } else {
        r = bind_socket(l, why, why_len);
    }
    if (r < 0) {
        free(l->path);
        free(l);
        return r;
    }
    shard_subscribe(d, &l->on_shards, &stream_shard_events, l);
    *ret = l;
    return 0;
}

const char *syslog_stream_path(const struct syslog_stream *l)
{
    return l->path;
}

bool syslog_stream_activated(const struct syslog_stream *l)
{
    return l->activated;
}

size_t syslog_stream_connections(const struct syslog_stream *l)
{
    return l ? l->n_conns : 0;
}

void syslog_stream_sweep(struct syslog_stream *l)
{
    uint64_t now = now_monotonic_ns();
    uint64_t idle_ns, max_age_ns;

    if (!l)
        return;
    idle_ns = l->d->config.syslog_idle_ms * 1000000ull;
    max_age_ns = l->d->config.max_shard_age_ms * 1000000ull;
    for (struct list_node *p = l->conns.next; p != &l->conns; p = p->next)
        stream_conn_sweep(list_entry(p, struct conn, node), now, idle_ns, max_age_ns);
    /* Paused connections that hold nothing but unfinished messages have
     * nothing in flight whose release would wake them. */
    stream_conns_resume(l);
}

size_t syslog_stream_rotate(struct syslog_stream *l, const char *producer)
{
    size_t sealed = 0;

    if (!l)
        return 0;
    for (struct list_node *p = l->conns.next; p != &l->conns; p = p->next)
        sealed += stream_conn_rotate(list_entry(p, struct conn, node), producer);
    return sealed;
}

void syslog_stream_conn_gone(struct syslog_stream *l)
{
    void (*cb)(void *) = l->stop_cb;
    void *data = l->stop_data;

    if (!l->stopping || !l->sock_closed || l->n_conns)
        return;
    free(l->path);
    free(l);
    if (cb)
        cb(data);
}

static void on_sock_closed(struct unixsock *u)
{
    struct syslog_stream *l = u->data;

    l->sock_closed = true;
    syslog_stream_conn_gone(l);
}

void syslog_stream_stop(struct syslog_stream *l, void (*cb)(void *data), void *data)
{
    struct list_node *p, *next;

    if (l->stopping)
        return;
    l->stopping = true;
    l->stop_cb = cb;
    l->stop_data = data;
    shard_unsubscribe(&l->on_shards);
    /* What each peer has written is in the kernel's buffer (or, for a
     * peer paused for memory, there and in ours): it is read now, memory
     * limit or not, so that the drain seals it rather than closing it
     * away. A last line without its line end is stored as it is. */
    for (p = l->conns.next; p != &l->conns; p = next) {
        next = p->next; /* the drain may close and free the connection */
        stream_conn_drain(list_entry(p, struct conn, node));
    }
    unixsock_close(&l->sock, on_sock_closed);
}
