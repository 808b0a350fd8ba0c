/* Listener: owns the producer socket and accepts connections into sessions.
 *
 * The socket is the configured path, bound here (with socket_mode and
 * socket_group), or the one systemd passed. Binding and accepting are
 * unixsock.c's, shared with the admin socket: running out of descriptors
 * pauses accepting instead of dropping the producers that wait. */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"
#include "session.h"
#include "unixsock.h"

#define LISTEN_BACKLOG 1024
#define EMFILE_PAUSE_MS 100

struct listener {
    struct daemon *d;
    struct unixsock sock;
    bool activated;
    char *shown_path; /* the socket's path as the kernel reports it, if any */
    void (*stop_cb)(void *);
    void *stop_data;
};

static void on_accepted(struct unixsock *u, int fd)
{
    struct listener *l = u->data;
    int r = session_accept(l->d, fd);

    if (r < 0)
        log_warning("a producer connection was dropped at accept: %s", strerror(-r));
}

/* Out of descriptors: logged once every ten seconds, with a count of the
 * pauses in between, since this can last and every connection attempt
 * meanwhile would add a line. */
static void on_trouble(struct unixsock *u, enum unixsock_trouble what, int err)
{
    static struct log_ratelimit budget =
        LOG_RATELIMIT_INIT_BUDGET("pauses in accepting producers", 1, 10000);
    struct listener *l = u->data;

    switch (what) {
    case UNIXSOCK_TROUBLE_WATCH:
        log_error("watching %s failed: %s", listener_path(l), uv_strerror(err));
        break;
    case UNIXSOCK_TROUBLE_PAUSED:
        log_msg_ratelimited(&budget, l->d->loop, LOG_LEVEL_WARNING,
                            "cannot accept producers: %s; pausing accepting, waiting "
                            "connections stay queued",
                            strerror(err));
        break;
    case UNIXSOCK_TROUBLE_ACCEPT:
        log_error("accepting on %s failed: %s", listener_path(l), strerror(err));
        break;
    }
}

static const struct unixsock_ops listener_ops = {
    .accepted = on_accepted,
    .trouble = on_trouble,
};

static int bind_socket(struct listener *l, char *why, size_t why_len)
{
    const struct config *c = &l->d->config;
    const char *path = c->socket_path;
    enum unixsock_step step;
    int r;

    r = unixsock_bind(&l->sock, path, (mode_t)c->socket_mode, c->socket_group, LISTEN_BACKLOG,
                      &step);
    if (r == 0)
        return 0;
    switch (step) {
    case UNIXSOCK_STEP_ADDRESS:
        snprintf(why, why_len, "%s: too long for a Unix socket address", path);
        break;
    case UNIXSOCK_STEP_STALE:
        if (r == -EADDRINUSE)
            snprintf(why, why_len, "%s: another daemon is already listening there", path);
        else if (r == -EEXIST)
            snprintf(why, why_len, "%s: exists and is not a socket", path);
        else
            snprintf(why, why_len, "%s: %s", path, strerror(-r));
        break;
    case UNIXSOCK_STEP_SOCKET:
        snprintf(why, why_len, "cannot create a socket: %s", strerror(-r));
        break;
    case UNIXSOCK_STEP_BIND:
        snprintf(why, why_len, "cannot bind %s: %s", path, strerror(-r));
        break;
    case UNIXSOCK_STEP_MEMORY:
        snprintf(why, why_len, "out of memory");
        break;
    case UNIXSOCK_STEP_GROUP_NAME:
        snprintf(why, why_len, "socket_group: no group named '%s'", c->socket_group);
        break;
    case UNIXSOCK_STEP_GROUP:
        snprintf(why, why_len, "cannot give %s to group %s: %s", path, c->socket_group,
                 strerror(-r));
        break;
    case UNIXSOCK_STEP_MODE:
        snprintf(why, why_len, "cannot set mode %04o on %s: %s", (unsigned)c->socket_mode, path,
                 strerror(-r));
        break;
    case UNIXSOCK_STEP_LISTEN:
        snprintf(why, why_len, "cannot listen on %s: %s", path, strerror(-r));
        break;
    case UNIXSOCK_STEP_WATCH:
        snprintf(why, why_len, "cannot watch the socket: %s", strerror(-r));
        break;
    }
    return r;
}

/* The producer socket systemd passed (passed-sockets.c found it and made
 * it close-on-exec and non-blocking). */
static int take_activated_socket(struct listener *l, char *why, size_t why_len)
{
    int fd = l->d->passed.producer;
    struct sockaddr_un sa;
    socklen_t len = sizeof(sa);
    int r;

    l->activated = true;
    /* Log the path systemd bound, not the configured one. */
    if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
        len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0])
        l->shown_path = strndup(sa.sun_path, len - offsetof(struct sockaddr_un, sun_path));
    r = unixsock_adopt(&l->sock, fd);
    if (r < 0)
        snprintf(why, why_len, "cannot watch the socket: %s", strerror(-r));
    return r;
}

int listener_start(struct daemon *d, struct listener **ret, char *why, size_t why_len)
{
    struct listener *l = calloc(1, sizeof(*l));
    int r;

    if (!l)
        return -ENOMEM;
    l->d = d;
    unixsock_init(&l->sock, d->loop, &listener_ops, EMFILE_PAUSE_MS, l);

    if (d->passed.producer >= 0)
        r = take_activated_socket(l, why, why_len);
    else
        r = bind_socket(l, why, why_len);
    if (r < 0) {
        free(l->shown_path);
        free(l);
        return r;
    }
    *ret = l;
    return 0;
}

int listener_activated(const struct listener *l)
{
    return l->activated;
}

const char *listener_path(const struct listener *l)
{
    if (l->shown_path)
        return l->shown_path;
    if (unixsock_bound_path(&l->sock))
        return unixsock_bound_path(&l->sock);
    return l->d->config.socket_path;
}

static void on_socket_closed(struct unixsock *u)
{
    struct listener *l = u->data;

    if (l->stop_cb)
        l->stop_cb(l->stop_data);
    free(l->shown_path);
    free(l);
}

void listener_stop(struct listener *l, void (*cb)(void *data), void *data)
{
    l->stop_cb = cb;
    l->stop_data = data;
    unixsock_close(&l->sock, on_socket_closed);
}
