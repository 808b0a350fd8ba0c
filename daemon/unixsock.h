/* A listening Unix stream socket that the daemon accepts on itself: the
 * producer socket (listener.c) and the admin socket (admin.c) are both one
 * of these. */
#pragma once

#include <sys/types.h>
#include <uv.h>

struct unixsock;

/* The steps of unixsock_bind(), so that the caller can say which one
 * failed in its own words. */
enum unixsock_step {
    UNIXSOCK_STEP_ADDRESS, /* the path does not fit a socket address */
    UNIXSOCK_STEP_STALE,   /* the file already there (see unixsock_remove_stale) */
    UNIXSOCK_STEP_SOCKET,  /* socket() */
    UNIXSOCK_STEP_BIND,
    UNIXSOCK_STEP_MEMORY,
    UNIXSOCK_STEP_GROUP_NAME, /* no such group (-ENOENT) */
    UNIXSOCK_STEP_GROUP,   /* chown() to the group asked for */
    UNIXSOCK_STEP_MODE,    /* chmod() to the mode asked for */
    UNIXSOCK_STEP_LISTEN,
    UNIXSOCK_STEP_WATCH,   /* uv_poll_init() */
};

/* What the accept loop reports besides a new connection. */
enum unixsock_trouble {
    UNIXSOCK_TROUBLE_WATCH,  /* the poll handle reported an error */
    UNIXSOCK_TROUBLE_PAUSED, /* out of descriptors or memory: accepting pauses */
    UNIXSOCK_TROUBLE_ACCEPT, /* any other accept4() error; accepting goes on */
};

struct unixsock_ops {
    /* A peer connected: fd is non-blocking, close-on-exec and the callee's. */
    void (*accepted)(struct unixsock *u, int fd);
    /* For the owner to log, naming its socket; err is a positive errno, or
     * a libuv error for UNIXSOCK_TROUBLE_WATCH. */
    void (*trouble)(struct unixsock *u, enum unixsock_trouble what, int err);
};

enum unixsock_state {
    UNIXSOCK_IDLE,      /* initialised; no socket */
    UNIXSOCK_ACCEPTING, /* watching the socket and accepting */
    UNIXSOCK_PAUSED,    /* out of descriptors: waiting for the pause timer */
    UNIXSOCK_CLOSING,   /* handles being closed */
    UNIXSOCK_CLOSED,    /* everything closed; the close callback has run */
};

/* Embedded in its owner; the fields are the helper's, except data. */
struct unixsock {
    void *data; /* the owner's */
    uv_loop_t *loop;
    const struct unixsock_ops *ops;
    unsigned pause_ms;
    enum unixsock_state state;
    int fd;
    char *bound_path; /* the file this daemon created, removed at close */
    uv_poll_t poll;
    uv_timer_t pause;
    unsigned handles_open;
    void (*close_cb)(struct unixsock *u);
};

/* Prepares u; nothing is opened yet. pause_ms is how long accepting pauses
 * when the daemon is out of descriptors. */
void unixsock_init(struct unixsock *u, uv_loop_t *loop, const struct unixsock_ops *ops,
                   unsigned pause_ms, void *data);

/* Binds path and starts accepting. The file is created under a umask that
 * never lets it exist with looser permissions than mode, given to group
 * (a name or a number; NULL: the daemon's group), then set to mode; a stale
 * socket file is replaced first, a live one is an error. Returns 0 or a
 * negative errno; on error *ret_step says which step failed and nothing is
 * left behind (no descriptor, no file). */
int unixsock_bind(struct unixsock *u, const char *path, mode_t mode, const char *group,
                  int backlog, enum unixsock_step *ret_step);

/* Starts accepting on fd, a listening socket someone else bound (systemd).
 * fd is u's from here on, also when this fails (it is then closed).
 * Returns 0 or a negative errno. */
int unixsock_adopt(struct unixsock *u, int fd);

/* The file unixsock_bind() created, or NULL. */
const char *unixsock_bound_path(const struct unixsock *u);

/* Stops accepting and removes the file unixsock_bind() created; cb runs once
 * the handles are closed, after the socket itself is closed. u must be
 * accepting or paused. */
void unixsock_close(struct unixsock *u, void (*cb)(struct unixsock *u));

/* Removes the socket file at path when nobody answers on it (a dead daemon
 * left it). Returns 0 (also when there is no file), -EADDRINUSE when someone
 * is listening there, -EEXIST when it is not a socket, or another negative
 * errno. */
int unixsock_remove_stale(const char *path);
