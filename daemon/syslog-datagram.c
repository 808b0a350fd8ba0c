/* The syslog datagram socket (syslog-datagram.h): what /dev/log is.
 *
 * Every datagram is one message. Its sender is what the kernel says
 * (SO_PASSCRED, so every datagram comes with SCM_CREDENTIALS): the text's
 * tag and pid are the sender's claim, kept in the payload as received, and
 * only its identifier is read (syslog_msg_identifier), to name the producer
 * (syslog-producers.c). The record is the datagram less what senders
 * append (syslog_msg_strip_trailer), stored with the kernel's pid, uid and
 * gid in a version 4 shard.
 *
 * Datagrams have no acknowledgement, so there is no way to tell a sender
 * to wait but not to read: when the daemon holds memory_limit_bytes for
 * producers, the socket is not read until the shards give buffers back
 * (the released event) and the daemon is back under three quarters of the
 * limit (memory_daemon_may_resume). Meanwhile the kernel's queue fills and
 * senders block in send(), or get EAGAIN if they asked not to block, which
 * is what every syslog daemon does. A datagram that cannot become a record
 * (empty, too big, refused for a limit or an error) is counted by why and
 * logged with its sender, within a rate limit; none is dropped silently.
 *
 * Each wakeup reads at most DGRAM_BATCH datagrams, so that a flood on this
 * socket leaves the loop to the producer connections and the I/O
 * completions in between. They are read with one recvmmsg(2): besides the
 * syscalls, this saves wakeups. When the queue is full, senders sleep in
 * send(), and every datagram taken off the queue wakes one; read one at a
 * time, each read wakes a sender that sends one datagram and sleeps again,
 * a context switch per message. Taken off in a batch, every sleeper is
 * woken at most once per batch and sends many. */
#include "syslog-datagram.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "memory.h"
#include "shard-events.h"
#include "syslog-producers.h"
#include "syslog_msg.h"

#define DGRAM_BATCH 32u
/* What a slot keeps resident after a datagram longer than this: the rest
 * of its pages go back to the kernel, so that a burst of large datagrams
 * does not leave DGRAM_BATCH times max_record_bytes in use. */
#define DGRAM_SLOT_KEEP (64u * 1024u)
/* What the drain reads of the kernel's queue before it closes the socket:
 * far more than a default queue holds, and a bound against a sender that
 * keeps writing during the drain. */
#define DGRAM_DRAIN_MAX 100000u
#define DGRAM_MODE 0666 /* anyone may log, as to /dev/log */
/* Where the kernel's queue length of Unix datagram sockets is set, and the
 * length under which the start warns: 10 (the kernel's default) holds less
 * than journald forwards while the daemon restarts. */
#define DGRAM_QLEN_SYSCTL "/proc/sys/net/unix/max_dgram_qlen"
#define DGRAM_QLEN_ADVISED 128ul

enum dgram_state {
    DGRAM_READING, /* watching the socket */
    DGRAM_PAUSED,  /* over memory_limit_bytes: not reading until buffers come back */
    DGRAM_CLOSING, /* the poll handle is closing */
};

struct syslog_dgram {
    struct daemon *d;
    enum dgram_state state;
    int fd;
    char *path;       /* as configured */
    bool bound;       /* this daemon made the file: it removes it at stop */
    bool activated;   /* systemd passed the socket */
    uv_poll_t poll;
    /* DGRAM_BATCH slots of slot_size bytes, one datagram each: room for
     * buf_cap, max_record_bytes and a trailer. Mapped, not allocated, so
     * that only what datagrams touch is resident. */
    unsigned char *slots;
    size_t slot_size;
    size_t buf_cap;
    struct mmsghdr msgs[DGRAM_BATCH];
    struct iovec iovs[DGRAM_BATCH];
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(struct ucred))];
    } controls[DGRAM_BATCH];
    struct shard_subscriber on_shards;
    void (*stop_cb)(void *);
    void *stop_data;
};

/* ---- the drop counts and their log lines ---- */

enum drop_why {
    DROP_EMPTY,
    DROP_OVERSIZED,
    DROP_REFUSED,
};

static void count_drop(struct syslog_dgram *g, enum drop_why why, const struct shard_creds *c,
                       const char *detail)
{
    static struct log_ratelimit rl_empty = LOG_RATELIMIT_INIT("empty syslog datagrams");
    static struct log_ratelimit rl_big = LOG_RATELIMIT_INIT("oversized syslog datagrams");
    static struct log_ratelimit rl_refused = LOG_RATELIMIT_INIT("refused syslog datagrams");
    struct daemon *d = g->d;
    char who[64];

    if (c)
        snprintf(who, sizeof(who), "pid %" PRIu32 ", uid %" PRIu32, c->pid, c->uid);
    else
        snprintf(who, sizeof(who), "an unknown sender");
    switch (why) {
    case DROP_EMPTY:
        d->stats.syslog_dropped_empty++;
        log_msg_ratelimited(&rl_empty, d->loop, LOG_LEVEL_WARNING,
                            "%s: dropped an empty datagram from %s (a record needs a byte)",
                            g->path, who);
        break;
    case DROP_OVERSIZED:
        d->stats.syslog_dropped_oversized++;
        log_msg_ratelimited(&rl_big, d->loop, LOG_LEVEL_WARNING,
                            "%s: dropped a datagram from %s: %s", g->path, who, detail);
        break;
    case DROP_REFUSED:
        d->stats.syslog_dropped_refused++;
        log_msg_ratelimited(&rl_refused, d->loop, LOG_LEVEL_WARNING,
                            "%s: dropped a datagram from %s: %s", g->path, who, detail);
        break;
    }
}

/* ---- one datagram ---- */

static void take_datagram(struct syslog_dgram *g, const char *data, size_t len, bool truncated,
                          const struct shard_creds *creds, uint64_t now, uint64_t now_mono)
{
    struct daemon *d = g->d;
    size_t plen;
    struct syslog_slice ident;
    char name[SYSLOG_PRODUCER_NAME_SIZE];
    char detail[160];
    int r;

    d->stats.syslog_datagrams++;
    if (!creds) {
        /* SO_PASSCRED is on, so the kernel always sends them; without them
         * there is nobody to name the shard after. */
        count_drop(g, DROP_REFUSED, NULL, "it came without SCM_CREDENTIALS");
        return;
    }
    if (truncated) {
        snprintf(detail, sizeof(detail),
                 "%zu bytes or more, over max_record_bytes (%" PRIu64 ")", len,
                 d->config.max_record_bytes);
        count_drop(g, DROP_OVERSIZED, creds, detail);
        return;
    }
    plen = syslog_msg_strip_trailer(data, len);
    if (plen == 0) {
        count_drop(g, DROP_EMPTY, creds, NULL);
        return;
    }
    if (plen > d->config.max_record_bytes) {
        snprintf(detail, sizeof(detail), "%zu bytes, over max_record_bytes (%" PRIu64 ")",
                 plen, d->config.max_record_bytes);
        count_drop(g, DROP_OVERSIZED, creds, detail);
        return;
    }
    ident = syslog_msg_identifier(data, plen);
    r = syslog_producer_name(ident.ptr, ident.len, (uid_t)creds->uid, name, sizeof(name));
    if (r < 0) { /* the buffer is SYSLOG_PRODUCER_NAME_SIZE: never */
        count_drop(g, DROP_REFUSED, creds, "no producer name could be made for it");
        return;
    }
    r = syslog_producers_append(d, name, (size_t)r, creds, data, (uint32_t)plen, now, now_mono);
    if (r < 0) {
        if (r == -EMFILE && d->open_shards >= d->config.max_open_shards)
            snprintf(detail, sizeof(detail),
                     "max_open_shards (%" PRIu64 ") reached, no shard for producer %s",
                     d->config.max_open_shards, name);
        else if (r == -EDQUOT || r == -ENOSPC)
            snprintf(detail, sizeof(detail), "producer %s is refused by the disk budget (%s)",
                     name, r == -EDQUOT ? "its quota" : "the spool's budget");
        else
            snprintf(detail, sizeof(detail), "producer %s cannot take it: %s", name,
                     strerror(-r));
        count_drop(g, DROP_REFUSED, creds, detail);
        return;
    }
    d->stats.syslog_records++;
    d->stats.records_received++;
    d->stats.bytes_received += plen;
}

/* The sender's credentials in a received message's control data, closing
 * any descriptors that came along. Returns NULL without them. */
static const struct shard_creds *message_creds(struct msghdr *mh, struct shard_creds *creds)
{
    const struct shard_creds *found = NULL;

    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
            c->cmsg_len >= CMSG_LEN(sizeof(struct ucred))) {
            struct ucred uc;

            memcpy(&uc, CMSG_DATA(c), sizeof(uc));
            creds->pid = (uint32_t)uc.pid;
            creds->uid = (uint32_t)uc.uid;
            creds->gid = (uint32_t)uc.gid;
            found = creds;
        } else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            /* Descriptors nobody asked for: closed, never kept. */
            size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < nfd; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
                (void)close(fd);
            }
        }
    }
    return found;
}

/* Reads up to max datagrams (at most DGRAM_BATCH) with one recvmmsg and
 * takes them, received at now (CLOCK_REALTIME; now_mono on
 * CLOCK_MONOTONIC). Returns how many were taken (or dropped), 0 when the
 * queue is empty, or a negative errno. */
static int read_batch(struct syslog_dgram *g, unsigned max, uint64_t now, uint64_t now_mono)
{
    unsigned n = max < DGRAM_BATCH ? max : DGRAM_BATCH;
    int got;

    for (unsigned i = 0; i < n; i++) {
        g->iovs[i] = (struct iovec){ .iov_base = g->slots + i * g->slot_size,
                                     .iov_len = g->buf_cap };
        g->msgs[i].msg_hdr = (struct msghdr){
            .msg_iov = &g->iovs[i],
            .msg_iovlen = 1,
            .msg_control = g->controls[i].buf,
            .msg_controllen = sizeof(g->controls[i].buf),
        };
        g->msgs[i].msg_len = 0;
    }
    /* MSG_TRUNC: each datagram's real length, so an oversized one is told
     * apart from one that just fills its slot. A datagram queued before
     * SO_PASSCRED was on (a socket systemd bound without
     * PassCredentials=yes) comes with the kernel's "nobody": pid 0 and the
     * overflow uid and gid; it is kept under those, which is what the
     * kernel vouches for. */
    got = recvmmsg(g->fd, g->msgs, n, MSG_DONTWAIT | MSG_TRUNC | MSG_CMSG_CLOEXEC, NULL);
    if (got < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
    for (int i = 0; i < got; i++) {
        struct msghdr *mh = &g->msgs[i].msg_hdr;
        size_t len = g->msgs[i].msg_len;
        struct shard_creds creds;
        const struct shard_creds *cp = message_creds(mh, &creds);

        take_datagram(g, (const char *)g->iovs[i].iov_base, len,
                      len > g->buf_cap || (mh->msg_flags & MSG_TRUNC), cp, now, now_mono);
        /* Pages past the first DGRAM_SLOT_KEEP go back (see there). */
        if (len > DGRAM_SLOT_KEEP)
            (void)madvise((unsigned char *)g->iovs[i].iov_base + DGRAM_SLOT_KEEP,
                          g->slot_size - DGRAM_SLOT_KEEP, MADV_DONTNEED); /* advice only */
    }
    return got;
}

static bool over_memory(const struct syslog_dgram *g)
{
    return memory_used(g->d) > g->d->config.memory_limit_bytes;
}

/* How many datagrams the next batch may take: as many as fit under
 * memory_limit_bytes if each were as large as a record may be, plus one,
 * so that the daemon goes over its limit by one datagram at most, as when
 * they were read one at a time. */
static unsigned batch_room(const struct syslog_dgram *g)
{
    uint64_t used = memory_used(g->d), limit = g->d->config.memory_limit_bytes;
    uint64_t room = used < limit ? (limit - used) / g->buf_cap + 1 : 1;

    return room < DGRAM_BATCH ? (unsigned)room : DGRAM_BATCH;
}

static void on_readable(uv_poll_t *h, int status, int events);

static void set_state(struct syslog_dgram *g, enum dgram_state next)
{
    switch (next) {
    case DGRAM_READING:
        (void)uv_poll_start(&g->poll, UV_READABLE, on_readable); /* a valid fd: cannot fail */
        break;
    case DGRAM_PAUSED:
        (void)uv_poll_stop(&g->poll);
        g->d->stats.syslog_pauses++;
        log_warning_ratelimited(g->d->loop, "pauses of the syslog datagram socket",
                                "%s: not reading while producers hold %" PRIu64
                                " bytes (memory_limit_bytes %" PRIu64 "); senders wait "
                                "in the kernel's queue",
                                g->path, memory_used(g->d), g->d->config.memory_limit_bytes);
        break;
    case DGRAM_CLOSING:
        break;
    }
    g->state = next;
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct syslog_dgram *g = h->data;
    /* One clock read per wakeup: the datagrams it reads were all queued
     * by then, and a clock read per datagram costs as much as its parse. */
    uint64_t now = now_realtime_ns(), now_mono = now_monotonic_ns();
    int r;

    (void)events;
    if (status < 0) {
        log_warning_ratelimited(g->d->loop, "syslog socket errors", "%s: watching failed: %s",
                                g->path, uv_strerror(status));
        return;
    }
    r = read_batch(g, batch_room(g), now, now_mono);
    if (r < 0)
        log_warning_ratelimited(g->d->loop, "syslog socket errors", "%s: recvmmsg: %s", g->path,
                                strerror(-r));
    else if (r > 0 && over_memory(g))
        set_state(g, DGRAM_PAUSED);
}

/* Buffers came back: read again once the daemon is well under its limit. */
static void on_shard_released(void *data, struct shard *sh)
{
    struct syslog_dgram *g = data;

    (void)sh;
    if (g->state == DGRAM_PAUSED && memory_daemon_may_resume(g->d))
        set_state(g, DGRAM_READING);
}

static const struct shard_events dgram_shard_events = {
    .released = on_shard_released,
};

/* ---- the socket ---- */

static int make_address(const char *path, struct sockaddr_un *sa, socklen_t *ret_len)
{
    size_t len = strlen(path);

    if (len == 0 || len >= sizeof(sa->sun_path))
        return -ENAMETOOLONG;
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    memcpy(sa->sun_path, path, len);
    *ret_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + 1);
    return 0;
}

/* A socket file left by a daemon that died is removed; one that a live
 * receiver has bound is not (connecting a datagram socket to it works
 * only then). unixsock_remove_stale() asks with a stream socket, which a
 * datagram socket never answers, so it cannot tell. */
static int remove_stale(const char *path, const struct sockaddr_un *sa, socklen_t sa_len)
{
    struct stat st;
    int fd, r;

    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    r = connect(fd, (const struct sockaddr *)sa, sa_len) == 0 ? 0 : -errno;
    (void)close(fd); /* only asked whether anyone is there */
    if (r == 0)
        return -EADDRINUSE;
    if (r != -ECONNREFUSED && r != -ENOENT)
        return r; /* nothing learned about the file: it stays */
    if (unlink(path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static int bind_socket(struct syslog_dgram *g, char *why, size_t why_len)
{
    struct sockaddr_un sa;
    socklen_t sa_len;
    mode_t old_umask;
    int r;

    r = make_address(g->path, &sa, &sa_len);
    if (r < 0) {
        snprintf(why, why_len, "[syslog] datagram_socket %s: too long for a Unix socket address",
                 g->path);
        return r;
    }
    r = remove_stale(g->path, &sa, sa_len);
    if (r < 0) {
        if (r == -EADDRINUSE)
            snprintf(why, why_len,
                     "[syslog] datagram_socket %s: another daemon is receiving there", g->path);
        else if (r == -EEXIST)
            snprintf(why, why_len, "[syslog] datagram_socket %s: exists and is not a socket",
                     g->path);
        else
            snprintf(why, why_len, "[syslog] datagram_socket %s: %s", g->path, strerror(-r));
        return r;
    }
    g->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (g->fd < 0) {
        r = -errno;
        snprintf(why, why_len, "[syslog] datagram_socket %s: cannot create a socket: %s",
                 g->path, strerror(-r));
        return r;
    }
    /* The umask keeps the file from being looser than asked even for the
     * moment before chmod(); 0666 is what a /dev/log needs, whatever the
     * daemon's umask. */
    old_umask = umask(0777 & ~DGRAM_MODE);
    r = bind(g->fd, (struct sockaddr *)&sa, sa_len) < 0 ? -errno : 0;
    umask(old_umask);
    if (r < 0) {
        snprintf(why, why_len, "cannot bind [syslog] datagram_socket %s: %s", g->path,
                 strerror(-r));
        return r;
    }
    g->bound = true;
    if (chmod(g->path, DGRAM_MODE) < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot set mode %04o on [syslog] datagram_socket %s: %s",
                 DGRAM_MODE, g->path, strerror(-r));
        return r;
    }
    return 0;
}

static void free_dgram(struct syslog_dgram *g)
{
    if (g->fd >= 0)
        (void)close(g->fd); /* ours; nothing to flush on a socket we read */
    if (g->bound)
        (void)unlink(g->path); /* ours; a leftover file is replaced at the next start */
    if (g->slots)
        (void)munmap(g->slots, g->slot_size * DGRAM_BATCH); /* ours, mapped whole */
    free(g->path);
    free(g);
}

/* The system-wide queue length of Unix datagram sockets, or 0 when it
 * cannot be read. */
static unsigned long dgram_queue_length(void)
{
    FILE *f = fopen(DGRAM_QLEN_SYSCTL, "re");
    unsigned long qlen = 0;

    if (!f)
        return 0;
    if (fscanf(f, "%lu", &qlen) != 1)
        qlen = 0;
    (void)fclose(f); /* read only */
    return qlen;
}

/* A sender that does not wait, as journald, loses what finds the queue
 * full; a short queue is said at start, with what lengthens it. The value
 * is this network namespace's now, which a socket created earlier (passed
 * by systemd) took when it was created. */
static void warn_short_queue(const struct syslog_dgram *g)
{
    unsigned long qlen = dgram_queue_length();

    if (qlen == 0 || qlen >= DGRAM_QLEN_ADVISED)
        return;
    log_warning("[syslog] datagram_socket %s: net.unix.max_dgram_qlen is %lu: senders that do "
                "not wait (journald's forwarding) lose messages when more than %lu wait, as "
                "while logshardd restarts; the package's sysctl.d/50-logshard.conf sets 512 at "
                "boot (sysctl -w net.unix.max_dgram_qlen=512, then create the socket anew)",
                g->path, qlen, qlen);
}

int syslog_dgram_start(struct daemon *d, struct syslog_dgram **ret, char *why, size_t why_len)
{
    struct syslog_dgram *g = calloc(1, sizeof(*g));
    int one = 1, r;

    if (!g) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    g->d = d;
    g->fd = -1;
    list_init(&g->on_shards.node);
    /* The socket systemd passed is at the configured path (passed-sockets.c
     * checked), or names the input when none is configured. */
    g->path = strdup(d->config.syslog_datagram_socket ? d->config.syslog_datagram_socket
                                                      : d->passed.syslog_datagram_path);
    /* The largest record and what a sender may append after it ("\n" and
     * NULs); a longer datagram is seen as cut (MSG_TRUNC) and dropped. */
    g->buf_cap = (size_t)d->config.max_record_bytes + 64u;
    g->slot_size = (g->buf_cap + 4095u) & ~(size_t)4095u;
    g->slots = mmap(NULL, g->slot_size * DGRAM_BATCH, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (g->slots == MAP_FAILED)
        g->slots = NULL;
    if (!g->path || !g->slots) {
        snprintf(why, why_len, "out of memory");
        r = -ENOMEM;
        goto fail;
    }
    if (d->passed.syslog_datagram >= 0) {
        g->fd = d->passed.syslog_datagram;
        g->activated = true;
    } else {
        r = bind_socket(g, why, why_len);
        if (r < 0)
            goto fail;
    }
    if (setsockopt(g->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
        r = -errno;
        snprintf(why, why_len, "[syslog] datagram_socket %s: cannot set it up: %s", g->path,
                 strerror(-r));
        goto fail;
    }
    r = uv_poll_init(d->loop, &g->poll, g->fd);
    if (r < 0) {
        snprintf(why, why_len, "[syslog] datagram_socket %s: cannot watch it: %s", g->path,
                 uv_strerror(r));
        goto fail;
    }
    g->poll.data = g;
    shard_subscribe(d, &g->on_shards, &dgram_shard_events, g);
    set_state(g, DGRAM_READING);
    warn_short_queue(g);
    *ret = g;
    return 0;

fail:
    free_dgram(g);
    return r;
}

const char *syslog_dgram_path(const struct syslog_dgram *g)
{
    return g->path;
}

bool syslog_dgram_activated(const struct syslog_dgram *g)
{
    return g->activated;
}

static void on_closed(uv_handle_t *h)
{
    struct syslog_dgram *g = h->data;
    void (*cb)(void *) = g->stop_cb;
    void *data = g->stop_data;

    free_dgram(g);
    if (cb)
        cb(data);
}

void syslog_dgram_stop(struct syslog_dgram *g, void (*cb)(void *data), void *data)
{
    unsigned n = 0;

    if (g->state == DGRAM_CLOSING)
        return;
    /* What senders handed over before the stop is in the kernel's queue;
     * it is read now, memory limit or not, so that the drain seals it
     * instead of closing it away. */
    while (n < DGRAM_DRAIN_MAX) {
        int r = read_batch(g, DGRAM_DRAIN_MAX - n, now_realtime_ns(), now_monotonic_ns());

        if (r <= 0)
            break;
        n += (unsigned)r;
    }
    (void)uv_poll_stop(&g->poll);
    shard_unsubscribe(&g->on_shards);
    set_state(g, DGRAM_CLOSING);
    g->stop_cb = cb;
    g->stop_data = data;
    uv_close((uv_handle_t *)&g->poll, on_closed);
}
