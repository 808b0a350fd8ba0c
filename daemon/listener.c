/* Listener: owns the producer socket and accepts connections into sessions.
 *
 * The socket is watched with a uv_poll_t and accepted with accept4 here,
 * rather than through uv_listen, for one reason: when the daemon runs out
 * of descriptors (EMFILE, ENFILE), libuv's accept path drops the waiting
 * connections to make progress. Here the daemon instead stops accepting for
 * a moment and leaves them in the backlog; they are served once descriptors
 * are free again, and the daemon itself keeps running. */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "session.h"

#define LISTEN_BACKLOG 1024
#define EMFILE_PAUSE_MS 100

struct listener {
    struct daemon *d;
    int fd;
    uv_poll_t poll;
    uv_timer_t pause;
    bool activated;
    bool paused;
    char *bound_path; /* the file we created, to remove at stop */
    char *shown_path; /* the socket's path as the kernel reports it, if any */
    unsigned handles_open;
    void (*stop_cb)(void *);
    void *stop_data;
};

static void on_readable(uv_poll_t *h, int status, int events);

static void on_pause_over(uv_timer_t *t)
{
    struct listener *l = t->data;

    l->paused = false;
    if (!l->d->draining)
        (void)uv_poll_start(&l->poll, UV_READABLE, on_readable);
}

/* Out of descriptors: the connections wait in the backlog while the daemon
 * serves the ones it has; it tries again shortly. Logged once every ten
 * seconds, with a count of the pauses in between, since this can last and
 * every connection attempt meanwhile would add a line. */
static void pause_accepting(struct listener *l, int err)
{
    static struct log_ratelimit budget =
        LOG_RATELIMIT_INIT_BUDGET("pauses in accepting producers", 1, 10000);

    log_msg_ratelimited(&budget, l->d->loop, LOG_LEVEL_WARNING,
                        "cannot accept producers: %s; pausing accepting, waiting connections "
                        "stay queued",
                        strerror(err));
    l->paused = true;
    (void)uv_poll_stop(&l->poll);
    (void)uv_timer_start(&l->pause, on_pause_over, EMFILE_PAUSE_MS, 0);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct listener *l = h->data;

    (void)events;
    if (status < 0) {
        log_error("watching %s failed: %s", listener_path(l), uv_strerror(status));
        return;
    }
    while (!l->d->draining) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        int r;

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                pause_accepting(l, errno);
            else if (errno != EAGAIN && errno != EWOULDBLOCK)
                log_error("accepting on %s failed: %s", listener_path(l), strerror(errno));
            return;
        }
        r = session_accept(l->d, fd);
        if (r < 0)
            log_warning("a producer connection was dropped at accept: %s", strerror(-r));
    }
}

/* A socket file is stale when nobody answers on it. */
int listener_remove_stale_socket(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    struct stat st;
    int fd, r;

    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    (void)close(fd);
    if (r == 0)
        return -EADDRINUSE;
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static int lookup_group(const char *name, gid_t *ret)
{
    char buf[4096];
    struct group gr, *res = NULL;
    char *end;
    unsigned long v = strtoul(name, &end, 10);

    if (*name && !*end) {
        *ret = (gid_t)v;
        return 0;
    }
    if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
        return -ENOENT;
    *ret = res->gr_gid;
    return 0;
}

static int bind_socket(struct listener *l, char *why, size_t why_len)
{
    const struct config *c = &l->d->config;
    const char *path = c->socket_path;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    mode_t old_umask;
    int r;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(why, why_len, "%s: too long for a Unix socket address", path);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    r = listener_remove_stale_socket(path);
    if (r == -EADDRINUSE) {
        snprintf(why, why_len, "%s: another daemon is already listening there", path);
        return r;
    }
    if (r == -EEXIST) {
        snprintf(why, why_len, "%s: exists and is not a socket", path);
        return r;
    }
    if (r < 0) {
        snprintf(why, why_len, "%s: %s", path, strerror(-r));
        return r;
    }
    l->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (l->fd < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot create a socket: %s", strerror(errno));
        return r;
    }
    /* Bind under a tight umask so the socket never exists with looser
     * permissions than configured, even for an instant. */
    old_umask = umask(0777 & ~(mode_t)c->socket_mode);
    r = bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
    umask(old_umask);
    if (r < 0) {
        snprintf(why, why_len, "cannot bind %s: %s", path, strerror(-r));
        return r;
    }
    l->bound_path = strdup(path);
    if (!l->bound_path) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    if (c->socket_group) {
        gid_t gid;

        r = lookup_group(c->socket_group, &gid);
        if (r < 0) {
            snprintf(why, why_len, "socket_group: no group named '%s'", c->socket_group);
            return r;
        }
        if (chown(path, (uid_t)-1, gid) < 0) {
            r = -errno;
            snprintf(why, why_len, "cannot give %s to group %s: %s", path, c->socket_group,
                     strerror(errno));
            return r;
        }
    }
    if (chmod(path, (mode_t)c->socket_mode) < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot set mode %04o on %s: %s", (unsigned)c->socket_mode, path,
                 strerror(errno));
        return r;
    }
    if (listen(l->fd, LISTEN_BACKLOG) < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot listen on %s: %s", path, strerror(errno));
        return r;
    }
    return 0;
}

static int take_activated_socket(struct listener *l, char *why, size_t why_len)
{
    int fd = SD_LISTEN_FDS_START;
    struct sockaddr_un sa;
    socklen_t len = sizeof(sa);

    if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
        snprintf(why, why_len,
                 "the socket systemd passed (fd %d) is not a listening Unix stream socket", fd);
        return -EINVAL;
    }
    l->fd = fd;
    l->activated = true;
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
        snprintf(why, why_len, "cannot make the socket systemd passed non-blocking: %s",
                 strerror(errno));
        return -errno;
    }
    /* Log the path systemd bound, not the configured one. */
    if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
        len > offsetof(struct sockaddr_un, sun_path) && sa.sun_path[0])
        l->shown_path = strndup(sa.sun_path, len - offsetof(struct sockaddr_un, sun_path));
    return 0;
}

int listener_start(struct daemon *d, struct listener **ret, char *why, size_t why_len)
{
    struct listener *l = calloc(1, sizeof(*l));
    int n, r;

    if (!l)
        return -ENOMEM;
    l->d = d;
    l->fd = -1;

    n = sd_listen_fds(1);
    if (n > 1) {
        snprintf(why, why_len, "systemd passed %d sockets; logshardd takes exactly one", n);
        r = -EINVAL;
    } else if (n == 1) {
        r = take_activated_socket(l, why, why_len);
    } else {
        r = bind_socket(l, why, why_len);
    }
    if (r == 0)
        r = uv_poll_init(d->loop, &l->poll, l->fd);
    if (r < 0) {
        if (l->bound_path)
            (void)unlink(l->bound_path); /* ours, and useless now */
        if (l->fd >= 0)
            (void)close(l->fd);
        free(l->bound_path);
        free(l->shown_path);
        free(l);
        if (why[0] == '\0')
            snprintf(why, why_len, "cannot watch the socket: %s", strerror(-r));
        return r;
    }
    l->poll.data = l;
    (void)uv_timer_init(d->loop, &l->pause);
    l->pause.data = l;
    l->handles_open = 2;
    (void)uv_poll_start(&l->poll, UV_READABLE, on_readable);
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
    if (l->bound_path)
        return l->bound_path;
    return l->d->config.socket_path;
}

static void on_listener_closed(uv_handle_t *h)
{
    struct listener *l = h->data;

    if (--l->handles_open > 0)
        return;
    (void)close(l->fd); /* the listening socket: nothing pending on it matters now */
    if (l->stop_cb)
        l->stop_cb(l->stop_data);
    free(l->bound_path);
    free(l->shown_path);
    free(l);
}

void listener_stop(struct listener *l, void (*cb)(void *data), void *data)
{
    l->stop_cb = cb;
    l->stop_data = data;
    if (l->bound_path)
        (void)unlink(l->bound_path); /* gone already is fine */
    uv_close((uv_handle_t *)&l->poll, on_listener_closed);
    uv_close((uv_handle_t *)&l->pause, on_listener_closed);
}
