/* Listener: owns the producer socket and accepts connections into sessions.
 * When accept fails for lack of descriptors the error is logged and the
 * connection stays in the backlog; the daemon itself carries on. */
#include "listener.h"

#include <errno.h>
#include <fcntl.h>
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
#include "log.h"
#include "session.h"

struct listener {
    struct daemon *d;
    uv_pipe_t pipe;
    bool activated;
    char *bound_path; /* the file we created, to remove at stop */
    char *shown_path; /* the socket's path as the kernel reports it, if any */
    void (*stop_cb)(void *);
    void *stop_data;
};

static void on_connection(uv_stream_t *server, int status)
{
    struct listener *l = server->data;
    int r;

    if (status < 0) {
        log_error("accepting on %s failed: %s", l->bound_path ? l->bound_path : "the socket",
                  uv_strerror(status));
        return;
    }
    if (l->d->draining)
        return;
    r = session_accept(l->d, server);
    if (r < 0)
        log_warning("a producer connection was dropped at accept: %s", strerror(-r));
}

/* A socket file is stale when nobody answers on it. */
static int remove_stale_socket(const char *path)
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

int listener_start(struct daemon *d, struct listener **ret, char *why, size_t why_len)
{
    struct listener *l = calloc(1, sizeof(*l));
    const char *path = d->config.socket_path;
    int n, r;

    if (!l)
        return -ENOMEM;
    l->d = d;
    (void)uv_pipe_init(d->loop, &l->pipe, 0);
    l->pipe.data = l;

    n = sd_listen_fds(1);
    if (n > 1) {
        snprintf(why, why_len, "systemd passed %d sockets; logshardd takes exactly one", n);
        r = -EINVAL;
        goto fail;
    }
    if (n == 1) {
        int fd = SD_LISTEN_FDS_START;

        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
            snprintf(why, why_len,
                     "the socket systemd passed (fd %d) is not a listening Unix stream socket",
                     fd);
            r = -EINVAL;
            goto fail;
        }
        r = uv_pipe_open(&l->pipe, fd);
        if (r < 0) {
            snprintf(why, why_len, "cannot use the socket systemd passed: %s", uv_strerror(r));
            goto fail;
        }
        l->activated = true;
        {
            char name[256];
            size_t len = sizeof(name);
            /* Log the path systemd bound, not the configured one. */
            if (uv_pipe_getsockname(&l->pipe, name, &len) == 0 && len > 0) {
                l->shown_path = strndup(name, len);
            }
        }
    } else {
        mode_t old_umask;

        r = remove_stale_socket(path);
        if (r == -EADDRINUSE) {
            snprintf(why, why_len, "%s: another daemon is already listening there", path);
            goto fail;
        }
        if (r == -EEXIST) {
            snprintf(why, why_len, "%s: exists and is not a socket", path);
            goto fail;
        }
        if (r < 0) {
            snprintf(why, why_len, "%s: %s", path, strerror(-r));
            goto fail;
        }
        /* Bind under a tight umask so the socket never exists with looser
         * permissions than configured, even for an instant. */
        old_umask = umask(0777 & ~(mode_t)d->config.socket_mode);
        r = uv_pipe_bind(&l->pipe, path);
        umask(old_umask);
        if (r < 0) {
            snprintf(why, why_len, "cannot bind %s: %s", path, uv_strerror(r));
            goto fail;
        }
        l->bound_path = strdup(path);
        if (!l->bound_path) {
            r = -ENOMEM;
            snprintf(why, why_len, "out of memory");
            goto fail;
        }
        if (chmod(path, (mode_t)d->config.socket_mode) < 0) {
            r = -errno;
            snprintf(why, why_len, "cannot set mode %04o on %s: %s",
                     (unsigned)d->config.socket_mode, path, strerror(errno));
            goto fail;
        }
    }
    r = uv_listen((uv_stream_t *)&l->pipe, 1024, on_connection);
    if (r < 0) {
        snprintf(why, why_len, "cannot listen on %s: %s", path, uv_strerror(r));
        goto fail;
    }
    *ret = l;
    return 0;

fail:
    listener_stop(l, NULL, NULL);
    return r;
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
    uv_close((uv_handle_t *)&l->pipe, on_listener_closed);
}
