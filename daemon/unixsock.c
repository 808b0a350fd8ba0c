/* Unix socket helper: binding a listening socket safely and accepting on it
 * without ever dropping a waiting peer. The producer socket and the admin
 * socket both go through here, so the rules below hold for both.
 *
 * Binding: a socket file left by a dead daemon is replaced, one a live
 * daemon answers on is not; the file is created under a umask matching the
 * mode asked for, so it never exists with looser permissions, not even
 * between bind() and chmod().
 *
 * Accepting: the socket is watched with a uv_poll_t and accepted with
 * accept4 here, rather than through uv_listen, for one reason: when the
 * daemon runs out of descriptors (EMFILE, ENFILE), libuv's accept path drops
 * the waiting connections to make progress. Here accepting instead stops
 * for a moment and leaves them in the backlog; they are served once
 * descriptors are free again, and the daemon itself keeps running. */
#include "unixsock.h"

#include <assert.h>
#include <errno.h>
#include <grp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sockutil.h"

static void on_readable(uv_poll_t *h, int status, int events);

/* The transitions that may happen; anything else is a bug in this file or
 * in its owner. */
static void set_state(struct unixsock *u, enum unixsock_state next)
{
    switch (u->state) {
    case UNIXSOCK_IDLE:
        assert(next == UNIXSOCK_ACCEPTING);
        break;
    case UNIXSOCK_ACCEPTING:
        assert(next == UNIXSOCK_PAUSED || next == UNIXSOCK_CLOSING);
        break;
    case UNIXSOCK_PAUSED:
        assert(next == UNIXSOCK_ACCEPTING || next == UNIXSOCK_CLOSING);
        break;
    case UNIXSOCK_CLOSING:
        assert(next == UNIXSOCK_CLOSED);
        break;
    case UNIXSOCK_CLOSED:
        assert(!"a closed socket changes state");
        break;
    }
    u->state = next;
}

void unixsock_init(struct unixsock *u, uv_loop_t *loop, const struct unixsock_ops *ops,
                   unsigned pause_ms, void *data)
{
    memset(u, 0, sizeof(*u));
    u->data = data;
    u->loop = loop;
    u->ops = ops;
    u->pause_ms = pause_ms;
    u->state = UNIXSOCK_IDLE;
    u->fd = -1;
}

/* A socket file is stale when nobody answers on it. */
int unixsock_remove_stale(const char *path)
{
    struct stat st;
    int fd, r;

    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    r = unix_connect(path, &fd);
    if (r == 0) {
        (void)close(fd); /* only asked whether anyone answers */
        return -EADDRINUSE;
    }
    if (r == -ENAMETOOLONG || r == -EMFILE || r == -ENFILE || r == -ENOMEM || r == -ENOBUFS)
        return r; /* nothing learned about the socket */
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

/* Watches u->fd and starts accepting. On failure u->fd is left to the
 * caller. */
static int start_accepting(struct unixsock *u)
{
    int r = uv_poll_init(u->loop, &u->poll, u->fd);

    if (r < 0)
        return r;
    u->poll.data = u;
    (void)uv_timer_init(u->loop, &u->pause); /* cannot fail */
    u->pause.data = u;
    u->handles_open = 2;
    set_state(u, UNIXSOCK_ACCEPTING);
    (void)uv_poll_start(&u->poll, UV_READABLE, on_readable); /* a valid fd: cannot fail */
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

int unixsock_bind(struct unixsock *u, const char *path, mode_t mode, const char *group,
                  int backlog, enum unixsock_step *ret_step)
{
    struct sockaddr_un sa;
    socklen_t sa_len;
    enum unixsock_step step;
    mode_t old_umask;
    int fd = -1, r;
    bool bound = false;

    assert(u->state == UNIXSOCK_IDLE);
    step = UNIXSOCK_STEP_ADDRESS;
    r = unix_address(path, &sa, &sa_len);
    if (r < 0)
        goto fail;
    step = UNIXSOCK_STEP_STALE;
    r = unixsock_remove_stale(path);
    if (r < 0)
        goto fail;
    step = UNIXSOCK_STEP_SOCKET;
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        r = -errno;
        goto fail;
    }
    step = UNIXSOCK_STEP_BIND;
    old_umask = umask(0777 & ~mode);
    r = bind(fd, (struct sockaddr *)&sa, sa_len) < 0 ? -errno : 0;
    umask(old_umask);
    if (r < 0)
        goto fail;
    bound = true;
    step = UNIXSOCK_STEP_MEMORY;
    u->bound_path = strdup(path);
    if (!u->bound_path) {
        r = -ENOMEM;
        goto fail;
    }
    if (group) {
        gid_t gid;

        step = UNIXSOCK_STEP_GROUP_NAME;
        r = lookup_group(group, &gid);
        if (r < 0)
            goto fail;
        step = UNIXSOCK_STEP_GROUP;
        if (chown(path, (uid_t)-1, gid) < 0) {
            r = -errno;
            goto fail;
        }
    }
    step = UNIXSOCK_STEP_MODE;
    if (chmod(path, mode) < 0) {
        r = -errno;
        goto fail;
    }
    step = UNIXSOCK_STEP_LISTEN;
    if (listen(fd, backlog) < 0) {
        r = -errno;
        goto fail;
    }
    step = UNIXSOCK_STEP_WATCH;
    u->fd = fd;
    r = start_accepting(u);
    if (r < 0)
        goto fail;
    return 0;

fail:
    if (bound)
        (void)unlink(path); /* ours, and useless now */
    if (fd >= 0)
        (void)close(fd); /* never listened on by anyone */
    free(u->bound_path);
    u->bound_path = NULL;
    u->fd = -1;
    *ret_step = step;
    return r;
}

int unixsock_adopt(struct unixsock *u, int fd)
{
    int r;

    assert(u->state == UNIXSOCK_IDLE);
    u->fd = fd;
    r = start_accepting(u);
    if (r < 0) {
        (void)close(fd); /* useless to us, and nobody else holds it for the daemon */
        u->fd = -1;
    }
    return r;
}

const char *unixsock_bound_path(const struct unixsock *u)
{
    return u->bound_path;
}

static void on_pause_over(uv_timer_t *t)
{
    struct unixsock *u = t->data;

    if (u->state != UNIXSOCK_PAUSED)
        return;
    set_state(u, UNIXSOCK_ACCEPTING);
    (void)uv_poll_start(&u->poll, UV_READABLE, on_readable);
}

/* Out of descriptors: the connections wait in the backlog while the daemon
 * serves the ones it has; it tries again shortly. */
static void pause_accepting(struct unixsock *u, int err)
{
    u->ops->trouble(u, UNIXSOCK_TROUBLE_PAUSED, err);
    set_state(u, UNIXSOCK_PAUSED);
    (void)uv_poll_stop(&u->poll);
    (void)uv_timer_start(&u->pause, on_pause_over, u->pause_ms, 0);
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct unixsock *u = h->data;

    (void)events;
    if (status < 0) {
        u->ops->trouble(u, UNIXSOCK_TROUBLE_WATCH, status);
        return;
    }
    /* The owner may close u from its accepted callback. */
    while (u->state == UNIXSOCK_ACCEPTING) {
        int fd = accept4(u->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0) {
            int err = errno;

            if (err == EINTR || err == ECONNABORTED)
                continue;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
                pause_accepting(u, err);
            else if (err != EAGAIN && err != EWOULDBLOCK)
                u->ops->trouble(u, UNIXSOCK_TROUBLE_ACCEPT, err);
            return;
        }
        u->ops->accepted(u, fd);
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    struct unixsock *u = h->data;

    if (--u->handles_open > 0)
        return;
    (void)close(u->fd); /* the listening socket: nothing pending on it matters now */
    u->fd = -1;
    free(u->bound_path);
    u->bound_path = NULL;
    set_state(u, UNIXSOCK_CLOSED);
    if (u->close_cb)
        u->close_cb(u);
}

void unixsock_close(struct unixsock *u, void (*cb)(struct unixsock *u))
{
    assert(u->state == UNIXSOCK_ACCEPTING || u->state == UNIXSOCK_PAUSED);
    set_state(u, UNIXSOCK_CLOSING);
    u->close_cb = cb;
    if (u->bound_path)
        (void)unlink(u->bound_path); /* gone already is fine */
    uv_close((uv_handle_t *)&u->poll, on_handle_closed);
    uv_close((uv_handle_t *)&u->pause, on_handle_closed);
}
