/* Admin socket: a second Unix socket, for operators, separate from the
 * producers' one so that its access rule can be strict without touching
 * theirs. It owns the listening socket, the admin connections and the
 * requests in progress.
 *
 * Access: the socket file is created with mode 0600, and every peer's
 * credentials are checked at accept (SO_PEERCRED): only root and the uid the
 * daemon runs as are served. The mode alone is not trusted, because a
 * directory or file mode can be loosened by mistake, and the check costs
 * one system call per connection.
 *
 * The protocol is one JSON object per line each way (docs/PROTOCOL.md):
 * a request, then its reply; a connection may ask again after the reply.
 * Requests are answered in order, one at a time per connection. This file
 * reads and checks them and dispatches each command to admin-commands.c,
 * which answers it.
 *
 * Limits: at most ADMIN_MAX_CLIENTS connections, requests of at most
 * ADMIN_LINE_MAX bytes, and ADMIN_REQUEST_TIMEOUT_MS for a request to
 * arrive; a rotate has no time limit of its own (the client has one). Like
 * the producer socket, it is bound and accepted by unixsock.c, so that
 * running out of descriptors pauses accepting instead of dropping peers. */
#include "admin.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admin-internal.h"
#include "daemon.h"
#include "fileutil.h"
#include "json.h"
#include "log.h"

#define ADMIN_REQUEST_TIMEOUT_MS 10000u
#define ADMIN_BACKLOG 16
#define ADMIN_EMFILE_PAUSE_MS 100u
#define REFUSED_LOG_PERIOD_NS 10000000000ull

static void client_process(struct client *c);
static void client_start_reading(struct client *c);

static const char *errno_name(int e)
{
    switch (e) {
    case EINVAL: return "EINVAL";
    case EACCES: return "EACCES";
    case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
    case EMSGSIZE: return "EMSGSIZE";
    case EBADMSG: return "EBADMSG";
    case EUSERS: return "EUSERS";
    case ENOMEM: return "ENOMEM";
    case ESHUTDOWN: return "ESHUTDOWN";
    case ETIMEDOUT: return "ETIMEDOUT";
    case EBUSY: return "EBUSY";
    case EIO: return "EIO";
    default: return "EUNKNOWN";
    }
}

/* A complete error reply, newline included, or NULL when out of memory. */
static char *error_reply(int code, const char *message)
{
    struct json_out o;
    char *text = NULL;
    size_t len;

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_u64(&o, "version", ADMIN_PROTOCOL_VERSION);
    json_member_bool(&o, "ok", false);
    json_key(&o, "error");
    json_obj_begin(&o);
    json_member_i64(&o, "code", code);
    json_member_str(&o, "name", errno_name(code));
    json_member_str(&o, "message", message);
    json_obj_end(&o);
    json_obj_end(&o);
    json_raw(&o, "\n", 1);
    if (json_out_finish(&o, &text, &len) < 0)
        return NULL;
    return text;
}

/* ---- states ---- */

static void set_state(struct client *c, enum client_state next)
{
    switch (c->state) {
    case CLIENT_READING_REQUEST:
        /* A line too long to read is answered, and the connection ends,
         * without ever being taken. */
        assert(next == CLIENT_WORKING || next == CLIENT_WRITING_LAST_REPLY ||
               next == CLIENT_CLOSING);
        break;
    case CLIENT_WORKING:
        assert(next == CLIENT_WRITING_REPLY || next == CLIENT_WRITING_LAST_REPLY ||
               next == CLIENT_CLOSING);
        /* A reply is written only once nothing is awaited any more. */
        assert(next == CLIENT_CLOSING || c->work == CLIENT_WORK_NONE);
        break;
    case CLIENT_WRITING_REPLY:
        assert(next == CLIENT_READING_REQUEST || next == CLIENT_CLOSING);
        break;
    case CLIENT_WRITING_LAST_REPLY:
        assert(next == CLIENT_CLOSING);
        break;
    case CLIENT_CLOSING:
        assert(!"a closing admin connection changes state");
        break;
    }
    /* Only a request being answered waits for anything. */
    assert(next == CLIENT_WORKING || next == CLIENT_CLOSING || c->work == CLIENT_WORK_NONE);
    c->state = next;
}

void admin_client_set_work(struct client *c, enum client_work next)
{
    switch (c->work) {
    case CLIENT_WORK_NONE:
        /* Work starts only for the request being answered. */
        assert(next != CLIENT_WORK_NONE && c->state == CLIENT_WORKING);
        break;
    case CLIENT_WORK_STATUS:
    case CLIENT_WORK_ROTATE:
        assert(next == CLIENT_WORK_NONE);
        break;
    }
    c->work = next;
}

static void set_input(struct client *c, enum client_input next)
{
    switch (c->input) {
    case CLIENT_INPUT_PAUSED:
        assert(next == CLIENT_INPUT_READING);
        break;
    case CLIENT_INPUT_READING:
        assert(next == CLIENT_INPUT_PAUSED || next == CLIENT_INPUT_ENDED);
        break;
    case CLIENT_INPUT_ENDED:
        assert(!"an admin connection reads again after the end of its input");
        break;
    }
    c->input = next;
}

/* ---- connections ---- */

static void admin_maybe_done(struct admin *a)
{
    if (!a->stopping || !a->sock_closed || a->n_clients > 0)
        return;
    if (a->stop_cb)
        a->stop_cb(a->stop_data);
    free(a);
}

void admin_client_maybe_free(struct client *c)
{
    struct admin *a = c->a;

    assert(c->state == CLIENT_CLOSING);
    if (c->handles_open > 0 || c->work == CLIENT_WORK_STATUS || c->out)
        return;
    admin_rotate_reset(c);
    free(c->out);
    list_del(&c->node);
    a->n_clients--;
    free(c);
    admin_maybe_done(a);
}

static void on_client_closed(uv_handle_t *h)
{
    struct client *c = h->data;

    c->handles_open--;
    admin_client_maybe_free(c);
}

void admin_client_close(struct client *c)
{
    if (c->state == CLIENT_CLOSING)
        return;
    set_state(c, CLIENT_CLOSING);
    if (c->a->collecting == c)
        c->a->collecting = NULL;
    if (c->input == CLIENT_INPUT_READING) {
        (void)uv_read_stop((uv_stream_t *)&c->pipe);
        set_input(c, CLIENT_INPUT_PAUSED);
    }
    uv_close((uv_handle_t *)&c->pipe, on_client_closed);
    uv_close((uv_handle_t *)&c->timer, on_client_closed);
}

static void on_request_timeout(uv_timer_t *t)
{
    admin_client_close(t->data);
}

static void on_reply_written(uv_write_t *req, int status)
{
    struct client *c = req->data;

    free(c->out);
    c->out = NULL;
    switch (c->state) {
    case CLIENT_CLOSING:
        admin_client_maybe_free(c);
        return;
    case CLIENT_WRITING_LAST_REPLY:
        admin_client_close(c);
        return;
    case CLIENT_WRITING_REPLY:
        if (status < 0) {
            admin_client_close(c);
            return;
        }
        set_state(c, CLIENT_READING_REQUEST);
        (void)uv_timer_start(&c->timer, on_request_timeout, ADMIN_REQUEST_TIMEOUT_MS, 0);
        client_process(c); /* a request that came while this one was answered */
        return;
    case CLIENT_READING_REQUEST:
    case CLIENT_WORKING:
        break;
    }
    assert(!"a reply was written while none was being written");
}

/* Sends text (a complete reply with its newline, owned from here on);
 * then_close: the connection ends once it is written. */
static void send_reply(struct client *c, char *text, bool then_close)
{
    uv_buf_t b;
    int r;

    if (!text) {
        admin_client_close(c); /* out of memory: the peer sees the connection end */
        return;
    }
    if (c->state == CLIENT_CLOSING) {
        free(text);
        return;
    }
    c->out = text;
    b = uv_buf_init(text, (unsigned)strlen(text));
    c->wreq.data = c;
    r = uv_write(&c->wreq, (uv_stream_t *)&c->pipe, &b, 1, on_reply_written);
    if (r < 0) {
        free(c->out);
        c->out = NULL;
        admin_client_close(c);
        return;
    }
    set_state(c, then_close ? CLIENT_WRITING_LAST_REPLY : CLIENT_WRITING_REPLY);
}

void admin_send_error(struct client *c, int code, bool then_close, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    send_reply(c, error_reply(code, msg), then_close);
}

/* The start of every successful reply. */
void admin_reply_begin(struct json_out *o, const char *command)
{
    json_out_init(o);
    json_obj_begin(o);
    json_member_u64(o, "version", ADMIN_PROTOCOL_VERSION);
    json_member_bool(o, "ok", true);
    json_member_str(o, "command", command);
}

void admin_reply_end(struct client *c, struct json_out *o, bool then_close)
{
    char *text = NULL;
    size_t len;

    json_obj_end(o);
    json_raw(o, "\n", 1);
    if (json_out_finish(o, &text, &len) < 0)
        text = NULL;
    send_reply(c, text, then_close);
}

/* ---- requests ---- */

static void handle_request(struct client *c, const char *line, size_t len)
{
    struct json_value *req = NULL;
    const struct json_value *v, *cmd, *prod;
    const char *why = NULL;
    size_t off = 0;

    if (json_parse(line, len, &req, &why, &off) < 0) {
        admin_send_error(c, EBADMSG, true, "request is not JSON: %s at byte %zu",
                   why ? why : "out of memory", off);
        return;
    }
    v = json_get(req, "version");
    if (req->type != JSON_OBJECT || !v || v->type != JSON_NUMBER) {
        admin_send_error(c, EBADMSG, true, "a request is a JSON object with a \"version\" member");
        goto out;
    }
    if (!v->is_u64 || v->u64 != ADMIN_PROTOCOL_VERSION) {
        admin_send_error(c, EPROTONOSUPPORT, true,
                   "admin protocol version %g is not supported (this daemon speaks %d)",
                   v->number, ADMIN_PROTOCOL_VERSION);
        goto out;
    }
    cmd = json_get(req, "command");
    prod = json_get(req, "producer");
    if (!cmd || cmd->type != JSON_STRING) {
        admin_send_error(c, EINVAL, false, "the request has no \"command\"");
        goto out;
    }
    if (prod && prod->type != JSON_STRING && prod->type != JSON_NULL) {
        admin_send_error(c, EINVAL, false, "\"producer\" must be a string or null");
        goto out;
    }
    if (strcmp(cmd->string, "status") == 0)
        admin_status(c);
    else if (strcmp(cmd->string, "ls") == 0)
        admin_ls(c, prod && prod->type == JSON_STRING ? prod->string : NULL);
    else if (strcmp(cmd->string, "rotate") == 0)
        admin_rotate(c, prod && prod->type == JSON_STRING ? prod->string : NULL);
    else
        admin_send_error(c, EINVAL, false, "unknown command '%.64s' (status, ls, rotate)",
                   cmd->string);
out:
    json_value_free(req);
}

/* Takes the next complete line, if any, and answers it. */
static void client_process(struct client *c)
{
    char line[ADMIN_LINE_MAX];
    char *nl;
    size_t len;

    if (c->state != CLIENT_READING_REQUEST)
        return; /* one request at a time: the next waits in rx */
    nl = memchr(c->rx, '\n', c->rx_len);
    if (!nl) {
        if (c->rx_len >= sizeof(c->rx)) {
            admin_send_error(c, EMSGSIZE, true, "request longer than %u bytes", ADMIN_LINE_MAX);
            return;
        }
        switch (c->input) {
        case CLIENT_INPUT_PAUSED:
            client_start_reading(c);
            break;
        case CLIENT_INPUT_READING:
            break; /* the rest of the line is on its way */
        case CLIENT_INPUT_ENDED:
            admin_client_close(c); /* nothing more will come, nothing is left to answer */
            break;
        }
        return;
    }
    len = (size_t)(nl - c->rx);
    memcpy(line, c->rx, len);
    c->rx_len -= len + 1;
    memmove(c->rx, nl + 1, c->rx_len);
    set_state(c, CLIENT_WORKING);
    (void)uv_timer_stop(&c->timer);
    handle_request(c, line, len);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void client_start_reading(struct client *c)
{
    if (uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read) < 0) {
        admin_client_close(c);
        return;
    }
    set_input(c, CLIENT_INPUT_READING);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct client *c = h->data;

    (void)suggested;
    *buf = uv_buf_init(c->rx + c->rx_len, (unsigned)(sizeof(c->rx) - c->rx_len));
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct client *c = stream->data;

    (void)buf;
    if (nread == 0)
        return;
    if (nread == UV_ENOBUFS) {
        /* Lines wait unanswered behind the one being answered; reading
         * resumes once there is room (client_process). */
        (void)uv_read_stop(stream);
        set_input(c, CLIENT_INPUT_PAUSED);
        return;
    }
    if (nread < 0) {
        /* End of input: the requests already here are still answered (a
         * peer may shut down its writing side and wait for the reply);
         * then the connection closes. */
        (void)uv_read_stop(stream);
        set_input(c, CLIENT_INPUT_ENDED);
        client_process(c);
        return;
    }
    c->rx_len += (size_t)nread;
    client_process(c);
}

/* Refuses a peer before any client state exists: one error reply, sent
 * without waiting (it fits in an empty socket buffer), then close. */
static void refuse(int fd, int code, const char *message)
{
    char *text = error_reply(code, message);

    if (text)
        (void)send(fd, text, strlen(text), MSG_DONTWAIT | MSG_NOSIGNAL); /* best effort */
    free(text);
    (void)close(fd); /* a refused peer: nothing more to say */
}

static void accept_one(struct admin *a, int fd)
{
    struct client *c;
    struct ucred cred;
    socklen_t sl = sizeof(cred);
    char msg[256];

    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &sl) < 0) {
        (void)close(fd); /* no credentials, no service */
        return;
    }
    if (cred.uid != 0 && cred.uid != a->self_uid) {
        static struct log_ratelimit budget = LOG_RATELIMIT_INIT_BUDGET(
            "admin socket refusals", 1, REFUSED_LOG_PERIOD_NS / 1000000u);

        a->d->stats.refused_admin++;
        snprintf(msg, sizeof(msg),
                 "uid %u may not use the admin socket: only root and the daemon's uid %u may",
                 (unsigned)cred.uid, (unsigned)a->self_uid);
        log_msg_ratelimited(&budget, a->d->loop, LOG_LEVEL_WARNING,
                            "admin socket %s: refused pid %d, uid %u (only root and uid %u may "
                            "use it)",
                            admin_path(a), (int)cred.pid, (unsigned)cred.uid,
                            (unsigned)a->self_uid);
        refuse(fd, EACCES, msg);
        return;
    }
    if (a->n_clients >= ADMIN_MAX_CLIENTS) {
        snprintf(msg, sizeof(msg), "too many admin connections (%u); try again",
                 ADMIN_MAX_CLIENTS);
        refuse(fd, EUSERS, msg);
        return;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        refuse(fd, ENOMEM, "out of memory");
        return;
    }
    c->a = a;
    c->cred = cred;
    c->state = CLIENT_READING_REQUEST;
    c->work = CLIENT_WORK_NONE;
    c->input = CLIENT_INPUT_PAUSED;
    (void)uv_pipe_init(a->d->loop, &c->pipe, 0); /* cannot fail */
    c->pipe.data = c;
    (void)uv_timer_init(a->d->loop, &c->timer);
    c->timer.data = c;
    c->handles_open = 2;
    list_add_tail(&a->clients, &c->node);
    a->n_clients++;
    if (uv_pipe_open(&c->pipe, fd) < 0) {
        (void)close(fd); /* never served */
        admin_client_close(c);
        return;
    }
    (void)uv_timer_start(&c->timer, on_request_timeout, ADMIN_REQUEST_TIMEOUT_MS, 0);
    client_start_reading(c);
}

/* ---- the listening socket ---- */

static void on_accepted(struct unixsock *u, int fd)
{
    accept_one(u->data, fd);
}

static void on_trouble(struct unixsock *u, enum unixsock_trouble what, int err)
{
    struct admin *a = u->data;
    uint64_t now;

    switch (what) {
    case UNIXSOCK_TROUBLE_WATCH:
        log_error("admin socket %s: watching it failed: %s", admin_path(a), uv_strerror(err));
        break;
    case UNIXSOCK_TROUBLE_PAUSED:
        now = now_monotonic_ns();
        if (!a->emfile_logged_ns || now - a->emfile_logged_ns >= REFUSED_LOG_PERIOD_NS) {
            log_warning("admin socket %s: cannot accept: %s; pausing", admin_path(a),
                        strerror(err));
            a->emfile_logged_ns = now;
        }
        break;
    case UNIXSOCK_TROUBLE_ACCEPT:
        log_error("admin socket %s: accept failed: %s", admin_path(a), strerror(err));
        break;
    }
}

static const struct unixsock_ops admin_sock_ops = {
    .accepted = on_accepted,
    .trouble = on_trouble,
};

/* Binds the socket, never looser than 0600, not even between bind and
 * chmod. */
static int bind_admin(struct admin *a, const char *path, char *why, size_t why_len)
{
    enum unixsock_step step;
    int r = unixsock_bind(&a->sock, path, 0600, NULL, ADMIN_BACKLOG, &step);

    if (r == 0)
        return 0;
    switch (step) {
    case UNIXSOCK_STEP_ADDRESS:
        snprintf(why, why_len, "admin socket %s: too long for a Unix socket address", path);
        break;
    case UNIXSOCK_STEP_STALE:
        if (r == -EADDRINUSE)
            snprintf(why, why_len, "admin socket %s: another daemon is already listening there",
                     path);
        else if (r == -EEXIST)
            snprintf(why, why_len, "admin socket %s: exists and is not a socket", path);
        else
            snprintf(why, why_len, "admin socket %s: %s", path, strerror(-r));
        break;
    case UNIXSOCK_STEP_SOCKET:
        snprintf(why, why_len, "admin socket %s: cannot create a socket: %s", path,
                 strerror(-r));
        break;
    case UNIXSOCK_STEP_BIND:
        snprintf(why, why_len, "admin socket %s: cannot bind: %s", path, strerror(-r));
        break;
    case UNIXSOCK_STEP_MEMORY:
        snprintf(why, why_len, "out of memory");
        break;
    case UNIXSOCK_STEP_WATCH:
        snprintf(why, why_len, "admin socket %s: cannot watch it: %s", path, uv_strerror(r));
        break;
    case UNIXSOCK_STEP_GROUP_NAME:
    case UNIXSOCK_STEP_GROUP:
    case UNIXSOCK_STEP_MODE:
    case UNIXSOCK_STEP_LISTEN:
        snprintf(why, why_len, "admin socket %s: %s", path, strerror(-r));
        break;
    }
    return r;
}

static const struct shard_events admin_shard_events = {
    .sealed = admin_on_shard_sealed,
};

int admin_start(struct daemon *d, struct admin **ret, char *why, size_t why_len)
{
    struct admin *a = calloc(1, sizeof(*a));
    int r;

    if (!a) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    a->d = d;
    a->self_uid = geteuid();
    list_init(&a->clients);
    list_init(&a->on_shards.node);
    unixsock_init(&a->sock, d->loop, &admin_sock_ops, ADMIN_EMFILE_PAUSE_MS, a);
    r = bind_admin(a, d->config.admin_socket, why, why_len);
    if (r < 0) {
        free(a);
        return r;
    }
    shard_subscribe(d, &a->on_shards, &admin_shard_events, a);
    *ret = a;
    return 0;
}

const char *admin_path(const struct admin *a)
{
    return unixsock_bound_path(&a->sock);
}

static void on_socket_closed(struct unixsock *u)
{
    struct admin *a = u->data;

    a->sock_closed = true;
    admin_maybe_done(a);
}

void admin_stop(struct admin *a, void (*cb)(void *data), void *data)
{
    struct list_node *n, *tmp;

    a->stopping = true;
    a->stop_cb = cb;
    a->stop_data = data;
    shard_unsubscribe(&a->on_shards);
    list_for_each_safe(n, tmp, &a->clients) {
        struct client *c = list_entry(n, struct client, node);

        if (c->state == CLIENT_WORKING && c->work == CLIENT_WORK_ROTATE) {
            /* Said without waiting: the drain must not depend on a peer
             * that does not read. The drain seals the shards anyway. */
            char *text = error_reply(ESHUTDOWN, "logshardd is stopping; the drain seals "
                                                "every shard");
            if (text) {
                uv_buf_t b = uv_buf_init(text, (unsigned)strlen(text));
                (void)uv_try_write((uv_stream_t *)&c->pipe, &b, 1); /* best effort */
                free(text);
            }
        }
        admin_client_close(c);
    }
    unixsock_close(&a->sock, on_socket_closed);
}
