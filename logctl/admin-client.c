/* logctl's side of the admin socket (docs/PROTOCOL.md, "Admin protocol"),
 * and where logctl finds the daemon's paths: the command line, then the
 * environment, then the daemon's own config file read with the daemon's
 * loader (common/config.c), then the built-in defaults. Reading the same
 * file with the same code is what keeps logctl and logshardd agreeing on
 * where the socket and the spool are. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "logshard-build.h"
#include "sockutil.h"

#define ADMIN_VERSION 1
#define REPLY_MAX (64u * 1024u * 1024u)

int logctl_exit_for_errno(int err)
{
    if (err < 0)
        err = -err;
    return err == EACCES || err == EPERM ? LOGCTL_EXIT_USAGE : LOGCTL_EXIT_FAILURE;
}

/* The daemon's settings as its config file has them. An explicit --config
 * must load; the default file is read only when it exists, and one that
 * cannot be read is reported and the built-in defaults are used. */
int logctl_load_config(const char *command, const char *path, struct config *ret)
{
    const char *file = path ? path : LOGSHARD_DEFAULT_CONFIG;
    char err[1024];
    int r;

    r = config_init(ret);
    if (r < 0) {
        fprintf(stderr, "logctl: %s: out of memory\n", command);
        return LOGCTL_EXIT_FAILURE;
    }
    if (!path && access(file, F_OK) != 0)
        return 0;
    r = config_load(ret, file, err, sizeof(err));
    if (r < 0) {
        if (path) {
            fprintf(stderr, "logctl: %s: %s\n", command, err);
            config_free(ret);
            return LOGCTL_EXIT_USAGE;
        }
        fprintf(stderr, "logctl: %s: %s; using the built-in defaults\n", command, err);
    }
    return 0;
}

enum configured_path { CONFIGURED_ADMIN_SOCKET, CONFIGURED_SPOOL };

/* A path given on the command line (or in the environment) as chosen, else
 * the one the config file (or the built-in default) names. */
static int chosen_or_configured(const char *command, const char *chosen, const char *config,
                                enum configured_path which, char **ret)
{
    struct config c;
    char **in_config;
    int r;

    if (chosen) {
        *ret = strdup(chosen);
        if (!*ret) {
            fprintf(stderr, "logctl: %s: out of memory\n", command);
            return LOGCTL_EXIT_FAILURE;
        }
        return 0;
    }
    r = logctl_load_config(command, config, &c);
    if (r != 0)
        return r;
    in_config = which == CONFIGURED_SPOOL ? &c.spool : &c.admin_socket;
    *ret = *in_config;
    *in_config = NULL; /* now the caller's */
    config_free(&c);
    return 0;
}

int logctl_admin_socket(const char *command, const char *option, const char *config,
                        char **ret)
{
    const char *env = getenv("LOGSHARD_ADMIN_SOCKET");

    return chosen_or_configured(command, option ? option : (env && *env ? env : NULL), config,
                                CONFIGURED_ADMIN_SOCKET, ret);
}

int logctl_spool(const char *command, const char *option, const char *config, char **ret)
{
    return chosen_or_configured(command, option, config, CONFIGURED_SPOOL, ret);
}

static int64_t now_ms(void)
{
    return (int64_t)(now_monotonic_ns() / 1000000u);
}

/* Waits for fd to be ready for events until deadline_ms; -ETIMEDOUT when it
 * is not. */
static int wait_fd(int fd, short events, int64_t deadline_ms)
{
    for (;;) {
        struct pollfd p = { .fd = fd, .events = events };
        int64_t left = deadline_ms - now_ms();
        int r;

        if (left <= 0)
            return -ETIMEDOUT;
        r = poll(&p, 1, left > 1000000 ? 1000000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r > 0)
            return 0;
    }
}

/* Reads one line (the reply) into a new buffer, without its newline. */
static int read_line(int fd, int64_t deadline_ms, char **ret, size_t *ret_len)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);

    if (!buf)
        return -ENOMEM;
    for (;;) {
        char *nl;
        ssize_t n;
        int r;

        if (len == cap) {
            char *nb;

            if (cap >= REPLY_MAX) {
                free(buf);
                return -EMSGSIZE;
            }
            nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        r = wait_fd(fd, POLLIN, deadline_ms);
        if (r < 0) {
            free(buf);
            return r;
        }
        n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            free(buf);
            return r;
        }
        if (n == 0) {
            free(buf);
            return -ECONNRESET;
        }
        nl = memchr(buf + len, '\n', (size_t)n);
        len += (size_t)n;
        if (nl) {
            *nl = '\0';
            *ret = buf;
            *ret_len = (size_t)(nl - buf);
            return 0;
        }
    }
}

int logctl_admin_request(const char *command, const char *socket_path, const char *request,
                         const char *producer, int timeout_ms, struct json_value **ret)
{
    int64_t deadline = now_ms() + timeout_ms;
    _cleanup_close_ int fd = -1;
    _cleanup_free_ char *req = NULL;
    _cleanup_free_ char *line = NULL;
    struct json_value *reply = NULL;
    const struct json_value *err;
    struct json_out o;
    size_t req_len, line_len = 0, off = 0;
    const char *why = NULL;
    int r;

    r = unix_connect(socket_path, &fd);
    if (r < 0) {
        if (r == -EACCES || r == -EPERM) {
            fprintf(stderr,
                    "logctl: %s: %s: %s (the admin socket is for root and the daemon's user)\n",
                    command, socket_path, strerror(-r));
            return LOGCTL_EXIT_USAGE;
        }
        fprintf(stderr,
                "logctl: %s: cannot reach logshardd at %s: %s (is it running? "
                "--admin-socket, $LOGSHARD_ADMIN_SOCKET or [daemon] admin_socket say where "
                "it listens)\n",
                command, socket_path, strerror(-r));
        return LOGCTL_EXIT_FAILURE;
    }

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_u64(&o, "version", ADMIN_VERSION);
    json_member_str(&o, "command", request);
    if (producer) {
        json_member_str(&o, "producer", producer);
    }
    json_obj_end(&o);
    json_raw(&o, "\n", 1);
    if (json_out_finish(&o, &req, &req_len) < 0) {
        fprintf(stderr, "logctl: %s: out of memory\n", command);
        return LOGCTL_EXIT_FAILURE;
    }
    for (size_t done = 0; done < req_len;) {
        ssize_t n = send(fd, req + done, req_len - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "logctl: %s: %s: sending the request: %s\n", command, socket_path,
                    strerror(errno));
            return LOGCTL_EXIT_FAILURE;
        }
        done += (size_t)n;
    }

    r = read_line(fd, deadline, &line, &line_len);
    if (r == -ETIMEDOUT) {
        fprintf(stderr, "logctl: %s: %s: no reply within %d.%03d s\n", command, socket_path,
                timeout_ms / 1000, timeout_ms % 1000);
        return LOGCTL_EXIT_FAILURE;
    }
    if (r < 0) {
        fprintf(stderr, "logctl: %s: %s: reading the reply: %s\n", command, socket_path,
                strerror(-r));
        return LOGCTL_EXIT_FAILURE;
    }
    r = json_parse(line, line_len, &reply, &why, &off);
    if (r < 0) {
        fprintf(stderr, "logctl: %s: %s: the reply is not JSON: %s at byte %zu\n", command,
                socket_path, why ? why : strerror(-r), off);
        return LOGCTL_EXIT_FAILURE;
    }
    if (json_get_u64(reply, "version", 0) != ADMIN_VERSION) {
        fprintf(stderr, "logctl: %s: %s: the daemon speaks another admin protocol version\n",
                command, socket_path);
        json_value_free(reply);
        return LOGCTL_EXIT_FAILURE;
    }
    if (!json_get_bool(reply, "ok", false)) {
        int code;

        err = json_get(reply, "error");
        code = (int)json_get_u64(err, "code", EIO);
        fprintf(stderr, "logctl: %s: logshardd at %s refused: %s\n", command, socket_path,
                json_get_str(err, "message", "(no message)"));
        json_value_free(reply);
        return code == EACCES ? LOGCTL_EXIT_USAGE : LOGCTL_EXIT_FAILURE;
    }
    *ret = reply;
    return 0;
}
