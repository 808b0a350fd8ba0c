/* The sockets systemd passed (socket activation), sorted by what each is
 * for: the producer socket (logshardd.socket), the syslog stream socket and
 * the syslog datagram socket (logshard-syslog.socket, or units of the
 * operator's own). Asked once at start, by main.c; each input then takes
 * its own descriptor from struct passed_sockets. */
#pragma once

#include <stddef.h>

struct passed_sockets {
    int producer;       /* a listening Unix stream socket; -1: none */
    int syslog_stream;  /* a listening Unix stream socket at [syslog] stream_socket; -1: none */
    int syslog_datagram; /* a Unix datagram socket; -1: none */
    /* Where the datagram socket is bound, as the kernel says ("" when it
     * has no path): the input's name in log lines when the configuration
     * names none. */
    char syslog_datagram_path[108];
};

/* Sorts the n_fds descriptors systemd passed (from SD_LISTEN_FDS_START):
 *  - a listening Unix stream socket bound at stream_path (when not NULL) is
 *    the syslog stream socket, any other the producer socket;
 *  - a Unix datagram socket is the syslog datagram socket. When dgram_path
 *    is not NULL it must be bound there: a unit and a configuration that
 *    disagree on where syslog messages arrive are an error rather than an
 *    input that silently reads nothing.
 * Two sockets for one input, or a socket of any other kind, are errors
 * too. Every descriptor taken is made close-on-exec and non-blocking.
 * Returns 0, or a negative errno with why (naming the descriptor and what
 * is wrong with it) and *ret untouched. */
int passed_sockets_sort(int n_fds, const char *stream_path, const char *dgram_path,
                        struct passed_sockets *ret, char *why, size_t why_len);
