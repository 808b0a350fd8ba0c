/* logctl send: turns the lines of standard input into records, through the
 * client library like any producer, so scripts can log without linking
 * liblogshard (the logshard counterpart of logger(1)).
 *
 * Success means acknowledged: the command returns 0 only after
 * logshard_flush() has confirmed every record. When input pauses (a pipe
 * from a long-running program), what was read so far is flushed before
 * waiting for more, so records do not sit in the client buffer until the
 * next line happens to arrive. Lines may be of any length here; the daemon's max_record_bytes is the limit,
 * reported by logshard_append() as -EMSGSIZE. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <logshard.h>

#include "logctl.h"
#include "wire.h"

static void send_help(void)
{
    printf("Usage: logctl send [--socket PATH] --producer NAME [--verbose]\n"
           "\n"
           "Send each line of standard input to logshardd as one record of producer\n"
           "NAME, and wait until the daemon has acknowledged all of them.\n"
           "\n"
           "A record is the line without its '\\n'; a last line without '\\n' is a\n"
           "record too. Empty lines are skipped, because a record is 1 byte or more.\n"
           "Bytes are sent as they are (a '\\r' before the '\\n' stays in the record).\n"
           "A line longer than the daemon's maximum record size is reported, nothing\n"
           "after it is sent, and the command fails once the lines before it are\n"
           "acknowledged. When input pauses, what was read is sent and acknowledged\n"
           "before waiting for more.\n"
           "\n"
           "Options:\n"
           "  -s, --socket PATH     the daemon's socket; default $LOGSHARD_SOCKET, else\n"
           "                        " LOGSHARD_DEFAULT_SOCKET "\n"
           "  -p, --producer NAME   the producer (shard) name: %s (required)\n"
           "  -v, --verbose         print the number of records sent\n"
           "  -h, --help            show this help\n"
           "\n"
           "Prints nothing on success unless --verbose.\n"
           "Exit status: 0 every record acknowledged, 1 failed, 2 usage error.\n",
           wire_producer_name_rule);
}

static const char *socket_shown(const char *socket_path)
{
    const char *env;

    if (socket_path)
        return socket_path;
    env = getenv("LOGSHARD_SOCKET");
    return env && *env ? env : LOGSHARD_DEFAULT_SOCKET;
}

static void report(logshard *ls, const char *what, const char *where, int err)
{
    const char *msg = ls ? logshard_error_message(ls) : NULL;

    fprintf(stderr, "logctl: send: %s %s: %s%s%s\n", what, where, logshard_strerror(err),
            msg ? ": " : "", msg ? msg : "");
}

/* Standard input, split into lines by hand rather than with stdio, so that
 * the command knows when nothing more is waiting: then is the time to flush.
 * A line is returned without its '\n' and stays valid until the next call. */
struct line_reader {
    int fd;
    char *buf;
    size_t cap, start, end;
    bool eof;
};

/* Returns 1 with a line, 0 at end of input, or a negative errno. */
static int next_line(struct line_reader *lr, const char **ret_line, size_t *ret_len)
{
    for (;;) {
        /* Nothing buffered yet: no buffer either, and memchr must not see NULL. */
        char *nl = lr->end > lr->start ? memchr(lr->buf + lr->start, '\n', lr->end - lr->start)
                                       : NULL;
        ssize_t n;

        if (nl || (lr->eof && lr->end > lr->start)) {
            size_t len = nl ? (size_t)(nl - (lr->buf + lr->start)) : lr->end - lr->start;
            *ret_line = lr->buf + lr->start;
            *ret_len = len;
            lr->start += len + (nl ? 1 : 0);
            return 1;
        }
        if (lr->eof)
            return 0;
        if (lr->start > 0) {
            memmove(lr->buf, lr->buf + lr->start, lr->end - lr->start);
            lr->end -= lr->start;
            lr->start = 0;
        }
        if (lr->end == lr->cap) {
            size_t cap = lr->cap ? lr->cap * 2 : 65536;
            char *nb = realloc(lr->buf, cap);
            if (!nb)
                return -ENOMEM;
            lr->buf = nb;
            lr->cap = cap;
        }
        n = read(lr->fd, lr->buf + lr->end, lr->cap - lr->end);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            lr->eof = true;
        lr->end += (size_t)n;
    }
}

/* True when no complete line is buffered and the descriptor has nothing
 * waiting either. */
static bool input_idle(const struct line_reader *lr)
{
    struct pollfd p = { .fd = lr->fd, .events = POLLIN };

    if (memchr(lr->buf + lr->start, '\n', lr->end - lr->start))
        return false;
    return !lr->eof && poll(&p, 1, 0) == 0;
}

int logctl_send(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "socket", required_argument, NULL, 's' },
        { "producer", required_argument, NULL, 'p' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    logshard_opts opts = { 0 };
    logshard *ls = NULL;
    const char *where;
    bool verbose = false, failed = false, healthy = true, streaming;
    struct line_reader in = { .fd = STDIN_FILENO };
    const char *line = NULL;
    size_t len = 0;
    uint64_t lineno = 0, sent = 0;
    struct stat st;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":s:p:vh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            opts.socket_path = optarg;
            break;
        case 'p':
            opts.producer = optarg;
            break;
        case 'v':
            verbose = true;
            break;
        case 'h':
            send_help();
            return LOGCTL_EXIT_OK;
        default:
            return logctl_option_error("send", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("send", "unexpected argument '%s'", argv[optind]);
    if (!opts.producer)
        return logctl_usage_error("send", "--producer NAME is required");
    if (wire_check_hello_name(opts.producer, strlen(opts.producer)) < 0)
        return logctl_usage_error("send", "bad producer name '%s': it must be %s", opts.producer,
                                  wire_producer_name_rule);
    if (opts.socket_path && !*opts.socket_path)
        return logctl_usage_error("send", "--socket needs a path");

    where = socket_shown(opts.socket_path);
    r = logshard_connect(&ls, &opts);
    if (r < 0) {
        report(NULL, "cannot connect to", where, r);
        return LOGCTL_EXIT_FAILURE;
    }
    /* A regular file never pauses; asking poll() per line would be waste. */
    streaming = fstat(STDIN_FILENO, &st) < 0 || !S_ISREG(st.st_mode);

    for (;;) {
        r = next_line(&in, &line, &len);
        if (r < 0) {
            fprintf(stderr, "logctl: send: reading standard input: %s\n", strerror(-r));
            failed = true;
            break;
        }
        if (r == 0)
            break;
        lineno++;
        if (len == 0)
            continue;
        r = logshard_append(ls, line, len);
        if (r == -EMSGSIZE) {
            fprintf(stderr,
                    "logctl: send: standard input line %" PRIu64 ": %zu bytes is over the "
                    "daemon's maximum record size; it and the lines after it were not sent\n",
                    lineno, len);
            failed = true;
            break;
        }
        if (r < 0) {
            report(ls, "sending to", where, r);
            failed = true;
            healthy = false;
            break;
        }
        sent++;
        if (streaming && input_idle(&in)) {
            r = logshard_flush(ls, -1);
            if (r < 0) {
                report(ls, "waiting for acknowledgements from", where, r);
                failed = true;
                healthy = false;
                break;
            }
        }
    }
    free(in.buf);

    /* Even after a failure, what was appended before it deserves its
     * acknowledgement; only a broken connection makes that pointless. */
    if (healthy) {
        r = logshard_flush(ls, -1);
        if (r < 0) {
            report(ls, "waiting for acknowledgements from", where, r);
            failed = true;
        }
    }
    if (failed && sent > 0) {
        uint64_t unacked = logshard_unacked(ls);

        fprintf(stderr, "logctl: send: %" PRIu64 " of %" PRIu64 " records acknowledged\n",
                sent - unacked, sent);
    } else if (verbose) {
        printf("%" PRIu64 " record%s sent to %s\n", sent, sent == 1 ? "" : "s", where);
    }
    logshard_close(ls);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: send: write error on standard output: %s\n", strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    return failed ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
