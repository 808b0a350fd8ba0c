/* Sorting the sockets systemd passed (passed-sockets.h). */
#include "passed-sockets.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

/* The path fd is bound at, or "" (an abstract or unnamed socket). */
static void bound_path(int fd, char *buf, size_t len)
{
    struct sockaddr_un sa;
    socklen_t sa_len = sizeof(sa);
    size_t n;

    buf[0] = '\0';
    if (getsockname(fd, (struct sockaddr *)&sa, &sa_len) < 0 ||
        sa_len <= offsetof(struct sockaddr_un, sun_path) || !sa.sun_path[0])
        return;
    n = strnlen(sa.sun_path, sa_len - offsetof(struct sockaddr_un, sun_path));
    if (n >= len)
        n = len - 1;
    memcpy(buf, sa.sun_path, n);
    buf[n] = '\0';
}

static int claim(int *slot, int fd, const char *what, char *why, size_t why_len)
{
    if (*slot >= 0) {
        snprintf(why, why_len,
                 "systemd passed two sockets for the %s (fds %d and %d); logshardd takes one",
                 what, *slot, fd);
        return -EINVAL;
    }
    *slot = fd;
    return 0;
}

int passed_sockets_sort(int n_fds, const char *stream_path, const char *dgram_path,
                        struct passed_sockets *ret, char *why, size_t why_len)
{
    struct passed_sockets p = { .producer = -1, .syslog_stream = -1, .syslog_datagram = -1 };
    int r;

    for (int fd = SD_LISTEN_FDS_START; fd < SD_LISTEN_FDS_START + n_fds; fd++) {
        char path[sizeof(p.syslog_datagram_path)];

        if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) > 0) {
            bound_path(fd, path, sizeof(path));
            if (stream_path && strcmp(path, stream_path) == 0)
                r = claim(&p.syslog_stream, fd, "syslog stream input", why, why_len);
            else
                r = claim(&p.producer, fd, "producers (listening stream sockets)", why,
                          why_len);
        } else if (sd_is_socket_unix(fd, SOCK_DGRAM, -1, NULL, 0) > 0) {
            bound_path(fd, path, sizeof(path));
            if (dgram_path && strcmp(path, dgram_path) != 0) {
                snprintf(why, why_len,
                         "systemd passed a datagram socket at %s (fd %d), but [syslog] "
                         "datagram_socket is %s: make them agree, or leave datagram_socket "
                         "empty to read the socket the unit gives",
                         path[0] ? path : "(no path)", fd, dgram_path);
                return -EINVAL;
            }
            r = claim(&p.syslog_datagram, fd, "syslog datagram input", why, why_len);
            if (r == 0)
                memcpy(p.syslog_datagram_path, path, sizeof(path));
        } else {
            snprintf(why, why_len,
                     "the socket systemd passed (fd %d) is neither a listening Unix stream "
                     "socket nor a Unix datagram socket",
                     fd);
            return -EINVAL;
        }
        if (r < 0)
            return r;
        /* The descriptors are the daemon's now: no program it starts gets
         * them, and the loop never blocks on them. */
        (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
        if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
            r = -errno;
            snprintf(why, why_len, "cannot make the socket systemd passed (fd %d) "
                     "non-blocking: %s", fd, strerror(-r));
            return r;
        }
    }
    if (n_fds > 0 && p.producer < 0) {
        snprintf(why, why_len,
                 "of the %d socket%s systemd passed, none is a listening Unix stream "
                 "socket for producers",
                 n_fds, n_fds == 1 ? "" : "s");
        return -EINVAL;
    }
    *ret = p;
    return 0;
}
