/* logshard-bench: the producers, and the machine's own fdatasync cost.
 *
 * Each producer is a forked process using the real liblogshard, as a user's
 * program would: one connection named bench-<i>, records appended one by
 * one, logshard_flush(ls, -1) every flush_every records and once at the
 * end. Processes, not threads, so that the producers do not share a
 * malloc, a scheduler queue position or a lock with each other or with the
 * bench, and a crash in one shows up as its exit status.
 *
 * Start barrier: every producer connects first, then writes one byte to the
 * ready pipe and blocks reading the start pipe. Once all have reported, the
 * bench takes the start time and closes the start pipe's write end; every
 * producer sees end of file at once. A producer that fails to connect still
 * reports (its slot says why), and the bench then releases the barrier with
 * the abort flag set, so nobody waits for a run that will not happen.
 *
 * Results come back through one MAP_SHARED anonymous mapping made before
 * the forks: a control block, then one slot per producer with its outcome
 * and one latency per flush. Nothing needs to be read while the producers
 * run, and a producer that dies leaves whatever it had recorded. Flush
 * times are CLOCK_MONOTONIC, which every process shares, so the end of the
 * run is the latest final flush of any producer, compared to the bench's
 * own start time.
 *
 * End barrier: a producer that is done (its final flush returned, or it
 * failed) says so on the done pipe and, if it succeeded, stays connected and
 * alive, blocked reading the finish pipe, until every producer is done. So
 * the timed part holds the producers' records and nothing else: no producer
 * closes its connection (which has the daemon seal its shard) or exits
 * (tearing down its memory) while others are still sending, as no producer
 * of a long-running program would. What closing and exiting cost comes
 * after, timed on its own (teardown_s). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <logshard.h>

#include "bench.h"
#include "fileutil.h"
#include "text.h"

/* How long producers may take to connect: the library gives up after 30 s. */
#define CONNECT_WAIT_NS (60 * 1000000000ull)
/* How long aborted producers may take to close and exit. */
#define ABORT_WAIT_NS (30 * 1000000000ull)

enum stage {
    STAGE_FORKED,
    STAGE_CONNECT,
    STAGE_CONNECTED,
    STAGE_APPEND,
    STAGE_FLUSH,
    STAGE_DONE,
    STAGE_ABORTED,
};

static const char *const stage_names[] = {
    [STAGE_FORKED] = "start-up",  [STAGE_CONNECT] = "logshard_connect",
    [STAGE_CONNECTED] = "barrier", [STAGE_APPEND] = "logshard_append",
    [STAGE_FLUSH] = "logshard_flush", [STAGE_DONE] = "done",
    [STAGE_ABORTED] = "aborted",
};

struct control {
    int abort_run; /* read by producers after the barrier */
};

struct slot {
    int32_t stage;       /* enum stage: how far the producer got */
    int32_t err;         /* negative errno of the call that failed */
    int32_t policy;      /* logshard_fsync_policy() */
    uint32_t finished;   /* set just before the byte on the done pipe */
    uint64_t acked;      /* records acknowledged */
    uint64_t n_lat;      /* flush latencies recorded in lat[] */
    uint64_t t_end_ns;   /* when the final flush returned */
    char msg[200];       /* the daemon's ERROR message, if any */
    uint64_t lat[];      /* ns per flush */
};

#define CONTROL_BYTES 64u

struct shared {
    void *base;
    size_t bytes;
    size_t stride;
};

static struct control *shared_control(const struct shared *sh)
{
    return sh->base;
}

static struct slot *shared_slot(const struct shared *sh, unsigned i)
{
    return (struct slot *)((char *)sh->base + CONTROL_BYTES + (size_t)i * sh->stride);
}

static int shared_map(struct shared *sh, unsigned producers, uint64_t max_flushes)
{
    size_t lat_bytes, stride, total;

    if (__builtin_mul_overflow(max_flushes, sizeof(uint64_t), &lat_bytes) ||
        __builtin_add_overflow(lat_bytes, sizeof(struct slot) + 63, &stride))
        return -ENOMEM;
    stride &= ~(size_t)63; /* slots on their own cache lines */
    if (__builtin_mul_overflow(stride, (size_t)producers, &total) ||
        __builtin_add_overflow(total, CONTROL_BYTES, &total))
        return -ENOMEM;
    sh->base = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh->base == MAP_FAILED) {
        sh->base = NULL;
        return -errno;
    }
    sh->bytes = total;
    sh->stride = stride;
    return 0;
}

/* Each record starts with its producer and sequence number, so a shard's
 * contents can be checked by eye with logctl cat; the rest is filler.
 * Written digit by digit: snprintf took about a tenth of the producers'
 * CPU, which the peers' load generator (peer-load.c, which lays its lines
 * out once) does not spend. */
static void stamp_record(unsigned char *rec, size_t size, unsigned idx, uint64_t seq)
{
    char head[48];
    size_t n = decimal_format_u64(head, idx);

    head[n++] = ':';
    n += decimal_format_u64(head + n, seq);
    head[n++] = ' ';
    memcpy(rec, head, n < size ? n : size);
}

/* Reports on the done pipe that this producer is done, once. */
static void say_done(struct slot *s, int done_fd)
{
    __atomic_store_n(&s->finished, 1, __ATOMIC_RELEASE);
    (void)write_all(done_fd, "x", 1);
}

/* The end barrier: end of file when the bench closes the write end. */
static void wait_finish(int finish_fd)
{
    char c;

    while (read(finish_fd, &c, 1) < 0 && errno == EINTR)
        ;
}

static int producer_run(const struct bench_load_params *p, unsigned idx, struct slot *s,
                        const struct control *ctl, int ready_fd, int start_fd, int done_fd,
                        int finish_fd)
{
    char name[32];
    logshard_opts opts = { .socket_path = p->socket, .producer = name,
                           .buffer_bytes = p->buffer_bytes };
    _cleanup_free_ unsigned char *rec = malloc(p->size);
    logshard *ls = NULL;
    uint64_t appended = 0, n_lat = 0;
    const char *msg;
    char c;
    int r;

    snprintf(name, sizeof(name), "bench-%u", idx);
    if (!rec) {
        s->err = -ENOMEM;
        (void)write_all(ready_fd, "x", 1);
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->size; i++)
        rec[i] = (unsigned char)('a' + i % 26);

    s->stage = STAGE_CONNECT;
    r = logshard_connect(&ls, &opts);
    if (r == 0) {
        s->policy = logshard_fsync_policy(ls);
        s->stage = STAGE_CONNECTED;
    } else {
        s->err = r;
    }
    /* Report either way: the bench counts one byte per producer. */
    if (write_all(ready_fd, "x", 1) < 0 && r == 0)
        r = -EPIPE;
    (void)close(ready_fd);
    if (r < 0) {
        logshard_close(ls);
        return r;
    }
    /* The barrier: end of file when the bench closes the write end. */
    while (read(start_fd, &c, 1) < 0 && errno == EINTR)
        ;
    if (__atomic_load_n(&ctl->abort_run, __ATOMIC_ACQUIRE)) {
        s->stage = STAGE_ABORTED;
        say_done(s, done_fd);
        logshard_close(ls);
        return -ECANCELED;
    }

    for (uint64_t i = 0; i < p->records; i++) {
        stamp_record(rec, p->size, idx, i);
        s->stage = STAGE_APPEND;
        r = logshard_append(ls, rec, p->size);
        if (r < 0)
            goto fail;
        appended++;
        if ((p->flush_every && (i + 1) % p->flush_every == 0) || i + 1 == p->records) {
            uint64_t t0 = now_monotonic_ns();

            s->stage = STAGE_FLUSH;
            r = logshard_flush(ls, -1);
            s->lat[n_lat++] = now_monotonic_ns() - t0;
            s->n_lat = n_lat;
            if (r < 0)
                goto fail;
        }
    }
    s->t_end_ns = now_monotonic_ns();
    s->acked = appended;
    s->stage = STAGE_DONE;
    say_done(s, done_fd);
    wait_finish(finish_fd);
    logshard_close(ls);
    return 0;

fail:
    s->err = r;
    s->acked = appended - logshard_unacked(ls);
    msg = logshard_error_message(ls);
    if (msg)
        snprintf(s->msg, sizeof(s->msg), "%s", msg);
    say_done(s, done_fd);
    logshard_close(ls);
    return r;
}

struct children {
    unsigned n;
    pid_t *pids;  /* -1: reaped */
    int *pidfds;  /* -1: none */
    int *status;  /* wait status once reaped */
};

static int children_alloc(struct children *c, unsigned n)
{
    c->n = n;
    c->pids = calloc(n, sizeof(*c->pids));
    c->pidfds = calloc(n, sizeof(*c->pidfds));
    c->status = calloc(n, sizeof(*c->status));
    if (!c->pids || !c->pidfds || !c->status)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        c->pids[i] = -1;
        c->pidfds[i] = -1;
    }
    return 0;
}

static void children_free(struct children *c)
{
    for (unsigned i = 0; c->pids && i < c->n; i++) {
        if (c->pids[i] > 0)
            bench_kill_and_reap(c->pids[i], c->pidfds[i]);
        if (c->pidfds[i] >= 0)
            (void)close(c->pidfds[i]);
    }
    free(c->pids);
    free(c->pidfds);
    free(c->status);
}

static unsigned children_running(const struct children *c)
{
    unsigned n = 0;
    for (unsigned i = 0; i < c->n; i++)
        n += c->pids[i] > 0;
    return n;
}

/* Reaps every child whose pidfd is readable in p (built by poll_set). */
static void reap_ready(struct children *c, const struct pollfd *p, const unsigned *which,
                       nfds_t n)
{
    for (nfds_t k = 0; k < n; k++) {
        unsigned i = which[k];
        if (!p[k].revents)
            continue;
        if (waitpid(c->pids[i], &c->status[i], 0) == c->pids[i])
            c->pids[i] = -1;
    }
}

/* pollfds for the pidfds of the children still running, after extra. */
static nfds_t poll_set(const struct children *c, struct pollfd *p, unsigned *which, nfds_t extra)
{
    nfds_t n = extra;
    for (unsigned i = 0; i < c->n; i++) {
        if (c->pids[i] <= 0)
            continue;
        p[n] = (struct pollfd){ .fd = c->pidfds[i], .events = POLLIN };
        which[n - extra] = i;
        n++;
    }
    return n;
}

/* Waits until every child has exited or the deadline passes. */
static int wait_all(struct children *c, struct pollfd *p, unsigned *which, uint64_t deadline_ns)
{
    while (children_running(c)) {
        nfds_t n = poll_set(c, p, which, 0);
        int r = bench_poll(p, n, deadline_ns);
        if (r < 0)
            return r;
        reap_ready(c, p, which, n);
    }
    return 0;
}

/* The end barrier, the bench's side: waits until every producer said it is
 * done or died without saying so, or the deadline passes. The done pipe's
 * end of file means that no producer is left at all. */
static int wait_done(struct children *c, const struct shared *sh, int done_fd, struct pollfd *p,
                     unsigned *which, uint64_t deadline_ns)
{
    unsigned said = 0;

    for (;;) {
        unsigned silent = 0;
        nfds_t n;
        int r;

        for (unsigned i = 0; i < c->n; i++)
            silent += c->pids[i] == -1 &&
                      !__atomic_load_n(&shared_slot(sh, i)->finished, __ATOMIC_ACQUIRE);
        if (said + silent >= c->n)
            return 0;
        p[0] = (struct pollfd){ .fd = done_fd, .events = POLLIN };
        n = poll_set(c, p, which, 1);
        r = bench_poll(p, n, deadline_ns);
        if (r < 0)
            return r;
        if (p[0].revents) {
            char buf[256];
            ssize_t len = read(done_fd, buf, sizeof(buf));

            if (len == 0)
                return 0;
            if (len > 0)
                said += (unsigned)len;
            else if (errno != EINTR && errno != EAGAIN)
                return -errno;
        }
        reap_ready(c, p + 1, which, n - 1);
    }
}

static void describe_failure(const struct shared *sh, const struct children *c, unsigned i,
                             char *buf, size_t len)
{
    const struct slot *s = shared_slot(sh, i);
    const char *stage = s->stage >= 0 && s->stage <= STAGE_ABORTED ? stage_names[s->stage] : "?";
    char st[96];

    if (s->err < 0) {
        snprintf(buf, len, "producer bench-%u: %s: %s%s%s%s (%" PRIu64 " records acknowledged)",
                 i, stage, logshard_strerror(s->err), s->msg[0] ? " (daemon: " : "", s->msg,
                 s->msg[0] ? ")" : "", s->acked);
        return;
    }
    if (c->pids[i] > 0)
        snprintf(st, sizeof(st), "still running");
    else
        bench_describe_status(c->status[i], st, sizeof(st));
    snprintf(buf, len, "producer bench-%u ended during %s: %s", i, stage, st);
}

static bool producer_ok(const struct shared *sh, const struct children *c, unsigned i)
{
    return c->pids[i] == -1 && WIFEXITED(c->status[i]) && WEXITSTATUS(c->status[i]) == 0 &&
           shared_slot(sh, i)->stage == STAGE_DONE;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int collect(const struct shared *sh, unsigned producers, uint64_t t0,
                   struct bench_load_result *ret)
{
    uint64_t t_end = t0, records = 0;
    size_t n = 0, k = 0;
    uint64_t *lat;

    for (unsigned i = 0; i < producers; i++)
        n += shared_slot(sh, i)->n_lat;
    lat = malloc((n ? n : 1) * sizeof(*lat));
    if (!lat)
        return -ENOMEM;
    for (unsigned i = 0; i < producers; i++) {
        const struct slot *s = shared_slot(sh, i);
        memcpy(lat + k, s->lat, s->n_lat * sizeof(*lat));
        k += s->n_lat;
        records += s->acked;
        if (s->t_end_ns > t_end)
            t_end = s->t_end_ns;
    }
    qsort(lat, n, sizeof(*lat), cmp_u64);
    ret->elapsed_s = (double)(t_end - t0) / 1e9;
    ret->records = records;
    ret->lat_ns = lat;
    ret->n_lat = n;
    ret->policy = shared_slot(sh, 0)->policy;
    for (unsigned i = 1; i < producers; i++)
        if (shared_slot(sh, i)->policy != ret->policy)
            ret->policy = -1; /* not one policy: say unknown rather than pick one */
    return 0;
}

int bench_load_run(const struct bench_load_params *p, struct bench_load_result *ret, char *why,
                   size_t why_len)
{
    uint64_t max_flushes = p->flush_every ? (p->records + p->flush_every - 1) / p->flush_every : 1;
    struct shared sh = { 0 };
    struct children c = { 0 };
    _cleanup_free_ struct pollfd *pfd = NULL;
    _cleanup_free_ unsigned *which = NULL;
    int ready[2] = { -1, -1 }, start[2] = { -1, -1 }, done[2] = { -1, -1 },
        finish[2] = { -1, -1 };
    pid_t self = getpid();
    unsigned got = 0, failed = 0;
    int bad = -1; /* the first producer that did not connect */
    uint64_t t0 = 0, t_finish, connect_deadline;
    int r;

    why[0] = '\0';
    r = shared_map(&sh, p->producers, max_flushes);
    if (r < 0) {
        snprintf(why, why_len, "cannot map room for %" PRIu64 " latencies per producer: %s",
                 max_flushes, strerror(-r));
        return r;
    }
    pfd = calloc((size_t)p->producers + 1, sizeof(*pfd));
    which = calloc((size_t)p->producers + 1, sizeof(*which));
    if (!pfd || !which || children_alloc(&c, p->producers) < 0) {
        r = -ENOMEM;
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(start, O_CLOEXEC) < 0 ||
        pipe2(done, O_CLOEXEC) < 0 || pipe2(finish, O_CLOEXEC) < 0) {
        r = -errno;
        snprintf(why, why_len, "pipe2: %s", strerror(-r));
        goto out;
    }

    fflush(NULL); /* a child must not write our buffered output again */
    for (unsigned i = 0; i < p->producers; i++) {
        pid_t pid = fork();

        if (pid < 0) {
            r = -errno;
            snprintf(why, why_len, "fork: %s", strerror(-r));
            goto abort;
        }
        if (pid == 0) {
            /* Above all the start pipe's write end: a copy left open here
             * would keep the barrier shut. */
            (void)close(start[1]);
            (void)close(ready[0]);
            (void)close(done[0]);
            (void)close(finish[1]);
            for (size_t k = 0; k < p->n_close_fds; k++)
                (void)close(p->close_fds[k]);
            for (unsigned k = 0; k < i; k++)
                (void)close(c.pidfds[k]);
            if (bench_child_setup(self) < 0)
                _exit(3);
            r = producer_run(p, i, shared_slot(&sh, i), shared_control(&sh), ready[1], start[0],
                             done[1], finish[0]);
            _exit(r < 0 ? 1 : 0);
        }
        c.pids[i] = pid;
        r = bench_pidfd_open(pid);
        if (r < 0) {
            snprintf(why, why_len, "pidfd_open: %s", strerror(-r));
            goto abort;
        }
        c.pidfds[i] = r;
    }
    (void)close(ready[1]);
    (void)close(start[0]);
    (void)close(done[1]);
    (void)close(finish[0]);
    ready[1] = start[0] = done[1] = finish[0] = -1;

    /* Every producer writes one byte once it connected (or failed to), then
     * closes its end; one that dies first closes it too. So the wait ends
     * with every byte, or with end of file once no producer is left to
     * write one. */
    connect_deadline = now_monotonic_ns() + CONNECT_WAIT_NS;
    if (connect_deadline > p->deadline_ns)
        connect_deadline = p->deadline_ns;
    while (got < p->producers) {
        char buf[256];
        ssize_t len;

        pfd[0] = (struct pollfd){ .fd = ready[0], .events = POLLIN };
        r = bench_poll(pfd, 1, connect_deadline);
        if (r < 0) {
            snprintf(why, why_len, "%s while the producers connected",
                     r == -ETIMEDOUT ? "timed out" : strerror(-r));
            goto abort;
        }
        len = read(ready[0], buf, sizeof(buf));
        if (len < 0 && errno == EINTR)
            continue;
        if (len <= 0)
            break;
        got += (unsigned)len;
    }
    for (unsigned i = 0; i < p->producers; i++) {
        if (shared_slot(&sh, i)->stage != STAGE_CONNECTED) {
            bad = (int)i;
            r = -ECANCELED;
            goto abort;
        }
    }

    t0 = now_monotonic_ns();
    (void)close(start[1]); /* go */
    start[1] = -1;
    r = wait_done(&c, &sh, done[0], pfd, which, p->deadline_ns);
    t_finish = now_monotonic_ns();
    (void)close(finish[1]); /* every producer may close and exit now */
    finish[1] = -1;
    if (r == 0)
        r = wait_all(&c, pfd, which, p->deadline_ns);
    if (r < 0) {
        snprintf(why, why_len, "%s while the producers ran (%u of %u still running)",
                 r == -ETIMEDOUT ? "timed out (see --timeout)" : strerror(-r),
                 children_running(&c), p->producers);
        goto out;
    }
    for (unsigned i = 0; i < p->producers; i++) {
        if (producer_ok(&sh, &c, i))
            continue;
        if (failed++ == 0)
            describe_failure(&sh, &c, i, why, why_len);
    }
    if (failed) {
        size_t len = strlen(why);
        if (failed > 1)
            snprintf(why + len, why_len - len, " (and %u more producers failed)", failed - 1);
        r = -EIO;
        goto out;
    }
    r = collect(&sh, p->producers, t0, ret);
    ret->teardown_s = (double)(now_monotonic_ns() - t_finish) / 1e9;
    if (r < 0)
        snprintf(why, why_len, "out of memory");
    goto out;

abort:
    /* Release the barrier with the abort flag set, so connected producers
     * close and exit instead of waiting for a run that will not come. */
    __atomic_store_n(&shared_control(&sh)->abort_run, 1, __ATOMIC_RELEASE);
    if (start[1] >= 0) {
        (void)close(start[1]);
        start[1] = -1;
    }
    if (finish[1] >= 0) {
        (void)close(finish[1]);
        finish[1] = -1;
    }
    (void)wait_all(&c, pfd, which, now_monotonic_ns() + ABORT_WAIT_NS);
    /* Described only now: the exit status of a producer that died is known
     * once it was reaped. */
    if (bad >= 0)
        describe_failure(&sh, &c, (unsigned)bad, why, why_len);
out:
    children_free(&c); /* kills what still runs */
    for (int k = 0; k < 2; k++) {
        if (ready[k] >= 0)
            (void)close(ready[k]);
        if (start[k] >= 0)
            (void)close(start[k]);
        if (done[k] >= 0)
            (void)close(done[k]);
        if (finish[k] >= 0)
            (void)close(finish[k]);
    }
    if (sh.base)
        (void)munmap(sh.base, sh.bytes);
    return r;
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
    const char *p = buf;

    while (len) {
        ssize_t n = pwrite(fd, p, len, off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        p += n;
        len -= (size_t)n;
        off += n;
    }
    return 0;
}

int bench_fdatasync_probe(const char *dir, unsigned iterations, uint64_t **ret_lat_ns,
                          size_t *ret_n)
{
    /* A few rounds first: the first syncs of a new file also commit its
     * creation, which the daemon's appends to an open shard do not pay. */
    const unsigned warmup = 5;
    _cleanup_free_ char *path = path_join(dir, ".bench-fdatasync-probe");
    _cleanup_free_ uint64_t *lat = calloc(iterations ? iterations : 1, sizeof(*lat));
    unsigned char block[4096];
    int fd, r = 0;

    if (!path || !lat)
        return -ENOMEM;
    memset(block, 'p', sizeof(block));
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    for (unsigned i = 0; i < warmup + iterations; i++) {
        uint64_t t0 = now_monotonic_ns();

        /* At the end of the file, as a shard grows: the size changes too,
         * so fdatasync must commit metadata, just as for the daemon. */
        r = pwrite_all(fd, block, sizeof(block), (off_t)i * (off_t)sizeof(block));
        if (r < 0)
            break;
        if (fdatasync(fd) < 0) {
            r = -errno;
            break;
        }
        if (i >= warmup)
            lat[i - warmup] = now_monotonic_ns() - t0;
    }
    (void)close(fd);
    if (unlink(path) < 0 && r == 0)
        r = -errno;
    if (r < 0)
        return r;
    qsort(lat, iterations, sizeof(*lat), cmp_u64);
    *ret_lat_ns = lat;
    lat = NULL;
    *ret_n = iterations;
    return 0;
}

int bench_fdatasync_probe_concurrent(const char *dir, unsigned writers, size_t bytes,
                                     unsigned iterations, uint64_t **ret_lat_ns, size_t *ret_n)
{
    const unsigned warmup = 5;
    size_t n = (size_t)writers * iterations;
    size_t map_len = n * sizeof(uint64_t) + sizeof(int);
    uint64_t *shared, *lat;
    int *failed;
    int start[2];
    pid_t *pids;
    int r = 0;

    if (writers == 0 || iterations == 0)
        return -EINVAL;
    shared = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED)
        return -errno;
    failed = (int *)(shared + n);
    pids = calloc(writers, sizeof(*pids));
    if (!pids || pipe2(start, O_CLOEXEC) < 0) {
        r = pids ? -errno : -ENOMEM;
        free(pids);
        (void)munmap(shared, map_len);
        return r;
    }
    for (unsigned w = 0; w < writers; w++) {
        pid_t pid = fork();

        if (pid < 0) {
            r = -errno;
            break;
        }
        if (pid == 0) {
            char name[64], go;
            _cleanup_free_ char *path = NULL;
            unsigned char *buf = malloc(bytes);
            off_t off = 0;
            int fd, e = 0;

            (void)close(start[1]);
            snprintf(name, sizeof(name), ".bench-fdatasync-probe.%u", w);
            path = path_join(dir, name);
            fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) : -1;
            if (!buf || fd < 0)
                _exit(1);
            memset(buf, 'p', bytes);
            for (unsigned i = 0; i < warmup + iterations && e == 0; i++) {
                uint64_t t0;

                if (i == warmup && read(start[0], &go, 1) != 0)
                    e = EPROTO; /* the parent closes the pipe to start everyone */
                t0 = now_monotonic_ns();
                if (e == 0) {
                    int pr = pwrite_all(fd, buf, bytes, off);
                    if (pr < 0)
                        e = -pr;
                }
                if (e == 0 && fdatasync(fd) < 0)
                    e = errno;
                off += (off_t)bytes;
                if (e == 0 && i >= warmup)
                    shared[(size_t)w * iterations + (i - warmup)] = now_monotonic_ns() - t0;
            }
            (void)close(fd);
            (void)unlink(path);
            if (e)
                __atomic_store_n(failed, e, __ATOMIC_RELAXED);
            _exit(e ? 1 : 0);
        }
        pids[w] = pid;
    }
    (void)close(start[0]);
    (void)close(start[1]); /* every writer's read returns 0: go */
    for (unsigned w = 0; w < writers; w++) {
        int status;

        if (pids[w] <= 0)
            continue;
        while (waitpid(pids[w], &status, 0) < 0 && errno == EINTR)
            ;
        if (r == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
            r = *failed ? -*failed : -EIO;
    }
    free(pids);
    if (r == 0) {
        lat = malloc(n * sizeof(*lat));
        if (!lat) {
            r = -ENOMEM;
        } else {
            memcpy(lat, shared, n * sizeof(*lat));
            qsort(lat, n, sizeof(*lat), cmp_u64);
            *ret_lat_ns = lat;
            *ret_n = n;
        }
    }
    (void)munmap(shared, map_len);
    return r;
}
