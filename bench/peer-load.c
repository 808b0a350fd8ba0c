/* peer-load: the load generator that bench/compare-peers.sh points at
 * rsyslog and syslog-ng, the counterpart of logshard-bench's producers.
 *
 * P producer processes each connect to one Unix stream socket, wait at a
 * start barrier until all have connected, then send N newline-terminated
 * syslog lines of exactly S bytes each (the newline included), batched into
 * writes of --buffer-bytes (256 KiB by default, liblogshard's default batch
 * buffer), and close the connection once the run is over (below). A line is
 *
 *   <13>Mmm dd hh:mm:ss pIIII: SSSSSSSSSS aaaa...\n
 *
 * as syslog(3) sends it to a local socket (no host name), where pIIII is the
 * producer (its syslog tag, so the daemon can template its output file name
 * by it: it cannot tell producers apart otherwise) and SSSSSSSSSS the
 * record's sequence number within the producer.
 *
 * With --out-dir DIR the run is measured end to end: after the producers are
 * done, DIR/pIIII.log is polled until it holds every record, and the time
 * from the release of the barrier until the last file was complete is the
 * elapsed time. With --line-bytes L (the length of one output line, which
 * the daemon's template decides) completion is file size == N * L, found
 * with stat() every millisecond, which costs the machine next to nothing;
 * with --line-bytes 0 the new bytes of every file are read and their
 * newlines counted instead (a calibration run: the report says L). Either
 * way, once the clock has stopped, every file is read again and checked:
 * exactly N lines, each with the producer's tag and a sequence number below
 * N, no number twice.
 *
 * With --datagram, each producer sends each line as one datagram on a
 * connected Unix datagram socket instead (no newline: the datagram is the
 * frame, as syslog(3) sends to /dev/log), one send() per record.
 *
 * With --admin-socket PATH (logshardd's syslog inputs, which write shards,
 * not one file per producer) completion is read from the daemon itself:
 * its status (docs/PROTOCOL.md, "Admin protocol") is asked every 2 ms until
 * the syslog input has stored every record and no byte waits to be
 * written (bytes_waiting 0), which is what "in the output file" means for
 * the peers. The check of the records is then the caller's (logctl cat).
 *
 * Producers stay connected and alive until the end: one that has sent
 * everything (or failed) says so on the sent pipe and waits on the finish
 * pipe, which the parent closes once the run is complete. So the timed
 * part holds the records and nothing else (no connection closed, no
 * process torn down while others still send), as logshard-bench's
 * producers do too.
 *
 * Prints one line of key=value pairs on standard output. Exit status 0: all
 * complete; 1: a failure or an incomplete output (said on standard error);
 * 2: usage error. Never run by meson test. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEADER_FMT "<13>%s p%04u: "
#define SEQ_DIGITS 10
#define MIN_SIZE 64
#define MAX_PRODUCERS 9999u
#define CONNECT_WAIT_NS (30 * 1000000000ull)

struct opts {
    const char *socket;
    const char *out_dir;
    const char *admin_socket;
    bool datagram;
    unsigned producers;
    uint64_t records;
    size_t size;
    size_t buffer_bytes;
    uint64_t line_bytes;
    unsigned timeout_s;
};

struct slot {
    int32_t state;    /* 0 started, 1 connected, 2 sent, -1 failed */
    int32_t err;      /* errno of the failing call */
    uint64_t t_sent;  /* CLOCK_MONOTONIC ns when the last byte was written */
    char what[64];    /* the failing call */
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
                           .tv_nsec = (long)(ns % 1000000000u) };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: peer-load --socket PATH [OPTIONS]\n"
            "\n"
            "Sends P x N newline-terminated syslog lines of S bytes from P processes,\n"
            "one Unix stream connection each, and (with --out-dir) waits until the\n"
            "daemon has written all of them to DIR/pIIII.log, one file per producer.\n"
            "\n"
            "  --socket PATH       the daemon's Unix stream socket\n"
            "  --producers P       producer processes (default 8, at most %u)\n"
            "  --records N         records per producer (default 10000)\n"
            "  --size S            bytes per record, newline included (default 128,\n"
            "                      at least %d; K suffix: 1024)\n"
            "  --buffer-bytes B    bytes per write (default 256K)\n"
            "  --datagram          one datagram per record, without its newline, on a\n"
            "                      Unix datagram socket\n"
            "  --out-dir DIR       wait for and check the output files in DIR\n"
            "  --admin-socket PATH wait until logshardd's syslog input has written every\n"
            "                      record, asking its admin socket (instead of --out-dir)\n"
            "  --line-bytes L      bytes per output line (0: count newlines; default 0)\n"
            "  --timeout SECONDS   limit for the whole run (default 600)\n"
            "  -h, --help          show this help\n",
            MAX_PRODUCERS, MIN_SIZE);
}

static int parse_u64(const char *s, uint64_t *ret, bool suffix)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-')
        return -EINVAL;
    if (suffix && (*end == 'K' || *end == 'k')) {
        if (v > UINT64_MAX / 1024)
            return -EINVAL;
        v *= 1024;
        end++;
    }
    if (*end)
        return -EINVAL;
    *ret = v;
    return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){ .producers = 8, .records = 10000, .size = 128,
                        .buffer_bytes = 256 * 1024, .timeout_s = 600 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t v = 0;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        }
        if (!strcmp(a, "--datagram")) {
            o->datagram = true;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "peer-load: %s: missing value or unknown option\n", a);
            return -EINVAL;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--socket")) {
            o->socket = val;
            continue;
        }
        if (!strcmp(a, "--out-dir")) {
            o->out_dir = val;
            continue;
        }
        if (!strcmp(a, "--admin-socket")) {
            o->admin_socket = val;
            continue;
        }
        if (parse_u64(val, &v, true) < 0) {
            fprintf(stderr, "peer-load: %s: bad number '%s'\n", a, val);
            return -EINVAL;
        }
        if (!strcmp(a, "--producers") && v >= 1 && v <= MAX_PRODUCERS)
            o->producers = (unsigned)v;
        else if (!strcmp(a, "--records") && v >= 1 && v < 10000000000ull)
            o->records = v;
        else if (!strcmp(a, "--size") && v >= MIN_SIZE && v <= 1024 * 1024)
            o->size = (size_t)v;
        else if (!strcmp(a, "--buffer-bytes") && v >= 1 && v <= 64 * 1024 * 1024)
            o->buffer_bytes = (size_t)v;
        else if (!strcmp(a, "--line-bytes") && v <= 16 * 1024 * 1024)
            o->line_bytes = v;
        else if (!strcmp(a, "--timeout") && v >= 1 && v <= 86400)
            o->timeout_s = (unsigned)v;
        else {
            fprintf(stderr, "peer-load: %s %s: unknown option or value out of range\n", a, val);
            return -EINVAL;
        }
    }
    if (!o->socket) {
        fprintf(stderr, "peer-load: --socket is required\n");
        return -EINVAL;
    }
    if (o->out_dir && o->admin_socket) {
        fprintf(stderr, "peer-load: --out-dir and --admin-socket exclude each other\n");
        return -EINVAL;
    }
    return 0;
}

static void fail(struct slot *s, const char *what, int err)
{
    s->err = err;
    snprintf(s->what, sizeof(s->what), "%s", what);
    s->state = -1;
}

/* One producer: connect, report, wait for the barrier, send, report, wait
 * for the end, close. */
static int producer(const struct opts *o, unsigned idx, const char *stamp, struct slot *s,
                    int ready_fd, int start_fd, int sent_fd, int finish_fd)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char head[64], c;
    size_t head_len, rec_len = o->size, fill = 0, per_buf;
    char *buf;
    int fd, r;

    head_len = (size_t)snprintf(head, sizeof(head), HEADER_FMT, stamp, idx);
    per_buf = o->buffer_bytes / rec_len ? o->buffer_bytes / rec_len : 1;
    buf = malloc(per_buf * rec_len);
    if (!buf) {
        fail(s, "malloc", ENOMEM);
        (void)write_all(ready_fd, "x", 1);
        return -1;
    }
    /* Every record in the buffer is laid out once; only the sequence
     * numbers change. */
    for (size_t k = 0; k < per_buf; k++) {
        char *rec = buf + k * rec_len;
        memcpy(rec, head, head_len);
        memset(rec + head_len, '0', SEQ_DIGITS);
        rec[head_len + SEQ_DIGITS] = ' ';
        for (size_t j = head_len + SEQ_DIGITS + 1; j < rec_len - 1; j++)
            rec[j] = (char)('a' + j % 26);
        rec[rec_len - 1] = '\n';
    }

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", o->socket);
    /* A daemon may create its socket file (bind) a moment before it
     * listens: ECONNREFUSED until then. Retried, with a new socket each
     * time, for up to CONNECT_WAIT_NS, before the barrier, so outside the
     * timed part. */
    for (uint64_t until = now_ns() + CONNECT_WAIT_NS;;) {
        fd = socket(AF_UNIX, (o->datagram ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            fail(s, "socket", errno);
            (void)write_all(ready_fd, "x", 1);
            return -1;
        }
        r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
        if (r == 0)
            break;
        r = errno;
        (void)close(fd);
        errno = r;
        r = -1;
        if ((errno != ECONNREFUSED && errno != ENOENT && errno != EAGAIN && errno != EINTR) ||
            now_ns() > until)
            break;
        sleep_ns(10000000);
    }
    if (r < 0) {
        fail(s, "connect", errno);
        (void)write_all(ready_fd, "x", 1);
        return -1;
    }
    s->state = 1;
    (void)write_all(ready_fd, "x", 1);
    (void)close(ready_fd);
    while (read(start_fd, &c, 1) < 0 && errno == EINTR)
        ;

    for (uint64_t i = 0; i < o->records; i++) {
        char *d = buf + fill * rec_len + head_len + SEQ_DIGITS;
        uint64_t v = i;

        for (int k = 0; k < SEQ_DIGITS; k++, v /= 10)
            *--d = (char)('0' + v % 10);
        if (o->datagram) {
            /* One record, one datagram; a full queue blocks the send. */
            while ((r = (int)send(fd, buf, rec_len - 1, 0)) < 0 && errno == EINTR)
                ;
            if (r < 0) {
                fail(s, "send", errno);
                (void)write_all(sent_fd, "x", 1);
                return -1;
            }
            continue;
        }
        if (++fill == per_buf || i + 1 == o->records) {
            r = write_all(fd, buf, fill * rec_len);
            if (r < 0) {
                fail(s, "write", -r);
                (void)write_all(sent_fd, "x", 1);
                return -1;
            }
            fill = 0;
        }
    }
    s->t_sent = now_ns();
    s->state = 2;
    (void)write_all(sent_fd, "x", 1);
    while (read(finish_fd, &c, 1) < 0 && errno == EINTR)
        ;
    (void)close(fd);
    return 0;
}

static void out_path(char *p, size_t len, const char *dir, unsigned idx)
{
    snprintf(p, len, "%s/p%04u.log", dir, idx);
}

/* Waits until every output file is complete (see the top); returns the
 * time it was, or 0 on timeout (what is missing is printed). */
static uint64_t wait_complete(const struct opts *o, uint64_t deadline)
{
    uint64_t want = o->line_bytes * o->records;
    uint64_t *lines = calloc(o->producers, sizeof(*lines));
    uint64_t *off = calloc(o->producers, sizeof(*off));
    bool *done = calloc(o->producers, sizeof(*done));
    int *fds = malloc(o->producers * sizeof(*fds));
    char path[PATH_MAX];
    char *rbuf = malloc(1 << 20);
    unsigned left = o->producers;
    uint64_t t = 0;

    if (!lines || !off || !done || !fds || !rbuf) {
        fprintf(stderr, "peer-load: out of memory\n");
        goto out;
    }
    for (unsigned i = 0; i < o->producers; i++)
        fds[i] = -1;
    for (;;) {
        for (unsigned i = 0; i < o->producers; i++) {
            if (done[i])
                continue;
            out_path(path, sizeof(path), o->out_dir, i);
            if (o->line_bytes) {
                struct stat st;
                if (stat(path, &st) < 0)
                    continue;
                if ((uint64_t)st.st_size > want) {
                    fprintf(stderr, "peer-load: %s: %jd bytes, more than the %" PRIu64
                                    " expected (--line-bytes wrong?)\n",
                            path, (intmax_t)st.st_size, want);
                    goto out;
                }
                if ((uint64_t)st.st_size == want) {
                    done[i] = true;
                    left--;
                }
                continue;
            }
            if (fds[i] < 0 && (fds[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
                continue;
            for (;;) {
                ssize_t n = pread(fds[i], rbuf, 1 << 20, (off_t)off[i]);
                if (n <= 0)
                    break;
                off[i] += (uint64_t)n;
                for (char *p = rbuf; (p = memchr(p, '\n', (size_t)(rbuf + n - p))); p++)
                    lines[i]++;
            }
            if (lines[i] >= o->records) {
                done[i] = true;
                left--;
            }
        }
        if (!left) {
            t = now_ns();
            break;
        }
        if (now_ns() > deadline) {
            fprintf(stderr, "peer-load: timed out waiting for the output; incomplete:");
            for (unsigned i = 0, shown = 0; i < o->producers && shown < 8; i++) {
                struct stat st;
                if (done[i])
                    continue;
                out_path(path, sizeof(path), o->out_dir, i);
                if (stat(path, &st) < 0)
                    fprintf(stderr, " p%04u (no file)", i);
                else
                    fprintf(stderr, " p%04u (%jd bytes)", i, (intmax_t)st.st_size);
                shown++;
            }
            fprintf(stderr, "\n");
            break;
        }
        sleep_ns(1000000);
    }
out:
    for (unsigned i = 0; fds && i < o->producers; i++)
        if (fds[i] >= 0)
            (void)close(fds[i]);
    free(lines);
    free(off);
    free(done);
    free(fds);
    free(rbuf);
    return t;
}

/* The number after "key": in text, or -1. */
static int64_t number_after(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;

    if (!p)
        return -1;
    p += strlen(key);
    return *p >= '0' && *p <= '9' ? (int64_t)strtoll(p, NULL, 10) : -1;
}

/* Waits until logshardd's syslog input (the stream or the datagram one)
 * has stored every record and none waits to be written; returns the time
 * it was, or 0 on timeout or error (said on stderr). */
static uint64_t wait_logshard(const struct opts *o, uint64_t deadline)
{
    static const char req[] = "{\"version\":1,\"command\":\"status\"}\n";
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int64_t want = (int64_t)(o->records * o->producers), got = -1, waiting = -1;
    size_t cap = 1 << 20, len;
    char *reply = malloc(cap);
    uint64_t t = 0;
    int fd;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", o->admin_socket);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (!reply || fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        fprintf(stderr, "peer-load: admin socket %s: %s\n", o->admin_socket, strerror(errno));
        goto out;
    }
    for (;;) {
        const char *sl;

        if (write_all(fd, req, sizeof(req) - 1) < 0)
            goto broken;
        for (len = 0; !len || reply[len - 1] != '\n';) {
            ssize_t n = read(fd, reply + len, cap - 1 - len);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0 || (len += (size_t)n) >= cap - 1)
                goto broken;
        }
        reply[len] = '\0';
        /* The datagram input's count is the first "records" of the syslog
         * object; the stream input's, the first of its "stream" object. */
        sl = strstr(reply, "\"syslog\":{");
        if (sl && !o->datagram)
            sl = strstr(sl, "\"stream\":{");
        got = number_after(sl, "\"records\":");
        waiting = number_after(reply, "\"bytes_waiting\":");
        if (got >= want && waiting == 0) {
            t = now_ns();
            break;
        }
        if (now_ns() > deadline) {
            fprintf(stderr, "peer-load: timed out: the daemon has %" PRId64 " of %" PRId64
                            " records, %" PRId64 " bytes waiting\n", got, want, waiting);
            break;
        }
        sleep_ns(2000000);
    }
    goto out;
broken:
    fprintf(stderr, "peer-load: admin socket %s: no status reply\n", o->admin_socket);
out:
    if (fd >= 0)
        (void)close(fd);
    free(reply);
    return t;
}

/* The check after the clock stopped. *line_len: the one length of every
 * output line of every file, or 0 when they differ. */
static int verify(const struct opts *o, uint64_t *line_len)
{
    size_t map_bytes = (size_t)((o->records + 7) / 8);
    uint8_t *seen = malloc(map_bytes ? map_bytes : 1);
    char path[PATH_MAX], tag[16];
    uint64_t len0 = UINT64_MAX;
    bool uniform = true;
    int bad = 0;

    if (!seen)
        return -ENOMEM;
    for (unsigned i = 0; i < o->producers; i++) {
        uint64_t lines = 0, dup = 0, foreign = 0, range = 0, missing = 0;
        struct stat st;
        const char *p, *end;
        char *map;
        int fd;

        memset(seen, 0, map_bytes);
        out_path(path, sizeof(path), o->out_dir, i);
        snprintf(tag, sizeof(tag), "p%04u: ", i);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0) {
            fprintf(stderr, "peer-load: %s: %s\n", path, strerror(errno));
            bad = 1;
            if (fd >= 0)
                (void)close(fd);
            continue;
        }
        map = st.st_size ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        (void)close(fd);
        if (map == MAP_FAILED) {
            fprintf(stderr, "peer-load: mmap %s: %s\n", path, strerror(errno));
            bad = 1;
            continue;
        }
        p = map;
        end = map ? map + st.st_size : map;
        while (p && p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            const char *t, *line_end = nl ? nl : end;
            uint64_t seq = 0, len = (uint64_t)(line_end - p) + 1;

            if (len0 == UINT64_MAX)
                len0 = len;
            else if (len != len0)
                uniform = false;
            lines++;
            t = memmem(p, (size_t)(line_end - p), tag, strlen(tag));
            if (!t || line_end - (t + strlen(tag)) < SEQ_DIGITS) {
                foreign++;
            } else {
                t += strlen(tag);
                for (int k = 0; k < SEQ_DIGITS; k++)
                    seq = seq * 10 + (uint64_t)(t[k] - '0');
                if (seq >= o->records)
                    range++;
                else if (seen[seq / 8] & (1u << (seq % 8)))
                    dup++;
                else
                    seen[seq / 8] |= (uint8_t)(1u << (seq % 8));
            }
            p = nl ? nl + 1 : end;
        }
        for (uint64_t s = 0; s < o->records; s++)
            missing += !(seen[s / 8] & (1u << (s % 8)));
        if (map)
            (void)munmap(map, (size_t)st.st_size);
        if (lines != o->records || dup || foreign || range || missing) {
            fprintf(stderr,
                    "peer-load: %s: %" PRIu64 " lines for %" PRIu64 " records: %" PRIu64
                    " missing, %" PRIu64 " twice, %" PRIu64 " without the tag, %" PRIu64
                    " out of range\n",
                    path, lines, o->records, missing, dup, foreign, range);
            bad = 1;
        }
    }
    free(seen);
    *line_len = uniform && len0 != UINT64_MAX ? len0 : 0;
    return bad ? -EIO : 0;
}

/* Waits until every producer said on the sent pipe that it sent everything
 * (or failed), or one died without saying so: -1 then. */
static int wait_sent(const pid_t *pids, const struct slot *slots, unsigned producers, int sent_fd)
{
    unsigned said = 0;

    while (said < producers) {
        struct pollfd p = { .fd = sent_fd, .events = POLLIN };
        char b[256];
        ssize_t n;

        if (poll(&p, 1, 100) == 0) {
            /* Quiet for a while: is anyone dead without a word? */
            for (unsigned i = 0; i < producers; i++) {
                int st;
                if (slots[i].state == 1 && waitpid(pids[i], &st, WNOHANG) == pids[i])
                    return -1;
            }
            continue;
        }
        n = read(sent_fd, b, sizeof(b));
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            return -1;
        said += (unsigned)n;
    }
    return 0;
}

/* The end: every producer may close its connection and exit, and is
 * reaped, so that nothing of this run overlaps the next. */
static void finish_producers(const pid_t *pids, unsigned producers, int finish_fd)
{
    (void)close(finish_fd);
    for (unsigned i = 0; i < producers; i++)
        while (waitpid(pids[i], NULL, 0) < 0 && errno == EINTR)
            ;
}

int main(int argc, char **argv)
{
    struct opts o;
    struct slot *slots;
    size_t map_len;
    pid_t *pids, self = getpid();
    int ready[2], start[2], sent[2], finish[2];
    unsigned got = 0, failed = 0;
    uint64_t t0, t_sent = 0, t_end, deadline, line_len = 0;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;

    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    if (o.line_bytes && o.line_bytes < o.size - 1) {
        fprintf(stderr, "peer-load: --line-bytes %" PRIu64 " is shorter than a record\n",
                o.line_bytes);
        return 2;
    }
    /* One time stamp for every record of the run: each line has the same
     * length, and so (with a fixed-width template) does each output line. */
    localtime_r(&now, &tm);
    strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", &tm);

    signal(SIGPIPE, SIG_IGN);
    deadline = now_ns() + (uint64_t)o.timeout_s * 1000000000u;
    map_len = o.producers * sizeof(*slots);
    slots = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pids = calloc(o.producers, sizeof(*pids));
    if (slots == MAP_FAILED || !pids || pipe2(ready, O_CLOEXEC) < 0 ||
        pipe2(start, O_CLOEXEC) < 0 || pipe2(sent, O_CLOEXEC) < 0 ||
        pipe2(finish, O_CLOEXEC) < 0) {
        fprintf(stderr, "peer-load: setup: %s\n", strerror(errno));
        return 1;
    }
    fflush(NULL);
    for (unsigned i = 0; i < o.producers; i++) {
        pid_t pid = fork();

        if (pid < 0) {
            fprintf(stderr, "peer-load: fork: %s\n", strerror(errno));
            return 1; /* children die with us (PR_SET_PDEATHSIG) */
        }
        if (pid == 0) {
            (void)close(start[1]);
            (void)close(ready[0]);
            (void)close(sent[0]);
            (void)close(finish[1]);
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != self)
                _exit(3);
            _exit(producer(&o, i, stamp, &slots[i], ready[1], start[0], sent[1], finish[0]) < 0
                      ? 1
                      : 0);
        }
        pids[i] = pid;
    }
    (void)close(ready[1]);
    (void)close(start[0]);
    (void)close(sent[1]);
    (void)close(finish[0]);
    while (got < o.producers) {
        char b[256];
        ssize_t n = read(ready[0], b, sizeof(b));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (unsigned)n;
    }
    for (unsigned i = 0; i < o.producers; i++) {
        if (slots[i].state != 1) {
            fprintf(stderr, "peer-load: producer %u: %s: %s\n", i,
                    slots[i].what[0] ? slots[i].what : "died", strerror(slots[i].err));
            for (unsigned k = 0; k < o.producers; k++)
                kill(pids[k], SIGKILL);
            return 1;
        }
    }

    /* The run: producers take off when the start pipe's write end closes.
     * The whole run is bounded by the timeout: SIGALRM's default action
     * ends us, and the producers with us. */
    alarm(o.timeout_s + 5);
    t0 = now_ns();
    (void)close(start[1]);
    if (wait_sent(pids, slots, o.producers, sent[0]) < 0)
        failed = 1;
    for (unsigned i = 0; i < o.producers; i++) {
        if (slots[i].state != 2) {
            if (failed++ == 0)
                fprintf(stderr, "peer-load: producer %u: %s: %s\n", i,
                        slots[i].what[0] ? slots[i].what : "died", strerror(slots[i].err));
            continue;
        }
        if (slots[i].t_sent > t_sent)
            t_sent = slots[i].t_sent;
    }
    if (failed)
        return 1; /* the producers die with us (PR_SET_PDEATHSIG) */
    /* Every producer stays until the output is complete: the finish pipe
     * closes when this process exits, whatever way it does. */
    if (o.admin_socket) {
        t_end = wait_logshard(&o, deadline);
        alarm(0);
        if (!t_end)
            return 1;
        finish_producers(pids, o.producers, finish[1]);
        printf("records=%" PRIu64 " elapsed_s=%.6f send_s=%.6f records_per_s=%.0f line_bytes=0"
               " complete=1\n",
               o.records * o.producers, (double)(t_end - t0) / 1e9, (double)(t_sent - t0) / 1e9,
               (double)(o.records * o.producers) / ((double)(t_end - t0) / 1e9));
        return 0;
    }
    if (!o.out_dir) {
        finish_producers(pids, o.producers, finish[1]);
        printf("records=%" PRIu64 " send_s=%.6f\n", o.records * o.producers,
               (double)(t_sent - t0) / 1e9);
        return 0;
    }
    t_end = wait_complete(&o, deadline);
    alarm(0);
    if (!t_end)
        return 1;
    finish_producers(pids, o.producers, finish[1]);
    if (verify(&o, &line_len) < 0)
        return 1;
    if (o.line_bytes && line_len != o.line_bytes) {
        fprintf(stderr, "peer-load: output lines are %" PRIu64 " bytes, not %" PRIu64 "\n",
                line_len, o.line_bytes);
        return 1;
    }
    printf("records=%" PRIu64 " elapsed_s=%.6f send_s=%.6f records_per_s=%.0f line_bytes=%" PRIu64
           " complete=1\n",
           o.records * o.producers, (double)(t_end - t0) / 1e9, (double)(t_sent - t0) / 1e9,
           (double)(o.records * o.producers) / ((double)(t_end - t0) / 1e9), line_len);
    return 0;
}
