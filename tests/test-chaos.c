/* Peers that go away at any moment, against the real daemon started the
 * way a user starts it (every signal at its default, SIGPIPE included):
 *  - the programs the tests start really get default dispositions and an
 *    empty mask;
 *  - raw producers that send a HELLO and frames and close before reading
 *    anything, and admin clients that send a status request and close
 *    without reading the reply: each makes the daemon write to a socket
 *    whose peer has gone, which raised SIGPIPE and ended the daemon before
 *    it ignored that signal;
 *  - the chaos rounds: under fsync = batch, rounds of producer processes
 *    using the real liblogshard, each killed with SIGKILL at a random
 *    moment, with admin clients and raw producers that leave early in
 *    between. The daemon must stay up, stop cleanly, and the merged spool
 *    must hold every acknowledged record exactly once, no record twice, and
 *    of each producer only a prefix of what it sent.
 *
 * The choices (kill delays, record sizes, flush points) come from a PRNG
 * whose seed is printed; LOGSHARD_CHAOS_SEED=N makes the same choices again
 * (the timing of the machine still differs). LOGSHARD_CHAOS_ROUNDS=N runs N
 * rounds instead of 200. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "wire.h"

#define CHAOS_ROUNDS 200u
#define CHAOS_PRODUCERS 8u
/* A producer stops by itself after this many records, so that one the kill
 * reaches late does not fill the disk. */
#define CHAOS_MAX_RECORDS 4000u
/* The kill comes within this many microseconds of the round's start: about
 * the time a producer needs for its records, so some die before they
 * connect, most mid-stream, a few after they finished. */
#define CHAOS_KILL_WINDOW_US 40000u
#define CHAOS_RECORD_MAX 160u

static const char status_request[] = "{\"version\":1,\"command\":\"status\"}\n";

static int64_t now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* splitmix64: small, and the same sequence from the same seed everywhere. */
static uint64_t prng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t prng_below(uint64_t *state, uint64_t n)
{
    return n ? prng_next(state) % n : 0;
}

static uint64_t env_u64(const char *name, uint64_t fallback)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long n;

    if (!v || !*v)
        return fallback;
    errno = 0;
    n = strtoull(v, &end, 0);
    if (errno || *end)
        fail_msg("%s=%s is not a number", name, v);
    return (uint64_t)n;
}

static bool daemon_gone(void *arg)
{
    struct harness *h = arg;
    struct pollfd p = { .fd = h->daemon_pidfd, .events = POLLIN };

    return poll(&p, 1, 0) == 1;
}

/* Something failed the way it would if the daemon had died: when it did
 * (it may take a moment to be reaped), say how, which is the finding;
 * otherwise the caller reports its own failure. */
static void blame_daemon_if_gone(struct harness *h)
{
    (void)harness_wait_for(daemon_gone, h, 2000);
    harness_assert_running(h);
}

/* ---- peers that leave early ---- */

static int connect_to(struct harness *h, const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_true(strlen(path) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, path);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = errno;
        blame_daemon_if_gone(h);
        fail_msg("connect %s: %s", path, strerror(err));
    }
    return fd;
}

/* An admin client that sends len bytes of a status request and closes at
 * once: the whole request (the daemon then writes its reply to nobody) or
 * a part of it (the daemon sees the end of the stream mid-request). */
static void admin_hit_and_run(struct harness *h, size_t len)
{
    int fd = connect_to(h, h->admin_sock);

    /* The daemon may refuse (too many admin clients) and close first; the
     * request is then lost, which is all this client wants anyway. */
    (void)send(fd, status_request, len, MSG_NOSIGNAL);
    close(fd);
}

/* A raw producer that says HELLO, sends an APPEND frame of three records
 * and closes without reading the WELCOME or the ACK. */
static void producer_hit_and_run(struct harness *h, const char *name)
{
    const char *recs[] = { "early one", "early two", "early three" };
    unsigned char frame[256];
    size_t len = harness_encode_append(frame, recs, 3);
    int fd = connect_to(h, h->sock);

    harness_raw_hello(fd, name);
    harness_raw_send(fd, frame, len);
    close(fd);
}

/* A status request answered in full: proof that the daemon still serves. */
static void admin_status_roundtrip(struct harness *h)
{
    char *out = harness_path(h->dir, "status.json");
    const char *argv[] = { harness_logctl(), "status", "--json", "--admin-socket",
                           h->admin_sock, NULL };
    int status = harness_run(argv, out, NULL, 30000);

    harness_assert_running(h);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(out);
}

/* The programs the tests start get default dispositions and an empty mask,
 * whatever the test process ignores or blocks. */
static void test_children_start_with_default_signals(void **state)
{
    struct harness *h = *state;
    char *out = harness_path(h->dir, "status.txt");
    const char *argv[] = { "/bin/cat", "/proc/self/status", NULL };
    unsigned long long ign = ~0ull, blk = ~0ull;
    sigset_t block, old;
    char *text, *line;
    size_t len;
    int status;

    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGTERM);
    assert_int_equal(sigprocmask(SIG_BLOCK, &block, &old), 0);
    assert_true(signal(SIGPIPE, SIG_IGN) != SIG_ERR); /* as main() has it */
    assert_true(signal(SIGHUP, SIG_IGN) != SIG_ERR);
    status = harness_run(argv, out, NULL, 10000);
    assert_true(signal(SIGHUP, SIG_DFL) != SIG_ERR);
    assert_int_equal(sigprocmask(SIG_SETMASK, &old, NULL), 0);
    harness_assert_clean_exit(status);

    text = harness_slurp(out, &len);
    line = strstr(text, "\nSigIgn:");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "\nSigIgn: %llx", &ign), 1);
    line = strstr(text, "\nSigBlk:");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "\nSigBlk: %llx", &blk), 1);
    if (ign != 0 || blk != 0)
        fail_msg("a child of the tests started with ignored signals %llx and blocked %llx", ign,
                 blk);
    free(text);
    free(out);
}

/* Item 1 of the issue as a user met it: the daemon started with SIGPIPE at
 * its default, and peers that close before reading what the daemon
 * writes. Before the daemon ignored SIGPIPE, it died of it (exit status 141
 * in a shell) within the first few of these. */
static void test_peers_that_leave_early(void **state)
{
    struct harness *h = *state;
    const unsigned n = 300;

    harness_start(h, NULL);
    for (unsigned i = 0; i < n; i++) {
        char name[32];

        snprintf(name, sizeof(name), "early-%u", i);
        producer_hit_and_run(h, name);
        admin_hit_and_run(h, sizeof(status_request) - 1);
        if (i % 50 == 0) {
            /* Its STATUS= notifications go to the harness's socket: a full
             * queue there would block the daemon, as a stuck supervisor
             * would. */
            harness_notify_drain(h);
            harness_assert_running(h);
        }
    }
    /* Each status reply is written after a trip to the thread pool; give the
     * last ones time to meet their closed sockets before asking whether the
     * daemon survived. */
    if (harness_wait_for(daemon_gone, h, 1000))
        harness_assert_running(h);
    admin_status_roundtrip(h);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
}

/* ---- the chaos rounds ---- */

struct producer {
    pid_t pid;
    int report_fd;     /* read end: one uint64_t per acknowledged flush */
    int64_t kill_at;   /* now_us() at which it gets SIGKILL */
    bool killed;       /* the SIGKILL was sent */
    uint64_t acked;    /* records acknowledged, as last reported */
    uint64_t found;    /* records found in the merged spool */
    char name[32];
};

/* Runs in the child: appends numbered records, flushing at random points,
 * and reports after each successful flush how many records are
 * acknowledged. Ends by itself after max records (exit 0), or with status
 * 10 + errno when a call fails; mostly, it is killed first. */
static void producer_main(const char *sock, const char *name, uint64_t seed, uint64_t max,
                          int report_fd)
{
    logshard_opts opts = { .socket_path = sock, .producer = name };
    logshard *ls = NULL;
    uint64_t rng = seed, next_flush;
    char rec[CHAOS_RECORD_MAX + 64];
    int r;

    /* The child is what a user's program is: SIGPIPE at its default, so a
     * library that raised it would end the producer with the wrong status. */
    if (process_reset_signals() < 0)
        _exit(9);
    r = logshard_connect(&ls, &opts);
    if (r < 0)
        _exit(10 + -r);
    next_flush = 1 + prng_below(&rng, 64);
    for (uint64_t seq = 0; seq < max; seq++) {
        size_t len = harness_make_record(rec, sizeof(rec), name, seq,
                                         24 + prng_below(&rng, CHAOS_RECORD_MAX - 24));

        r = logshard_append(ls, rec, len);
        if (r < 0)
            _exit(10 + -r);
        if (seq + 1 == next_flush || seq + 1 == max) {
            uint64_t acked = seq + 1;

            r = logshard_flush(ls, 30000);
            if (r < 0)
                _exit(10 + -r);
            /* 8 bytes to a pipe: written whole or not at all. */
            if (write(report_fd, &acked, sizeof(acked)) != (ssize_t)sizeof(acked))
                _exit(8);
            next_flush = seq + 1 + 1 + prng_below(&rng, 64);
        }
    }
    logshard_close(ls);
    _exit(0);
}

static void read_reports(struct producer *p)
{
    uint64_t v[64];
    ssize_t n;

    while ((n = read(p->report_fd, v, sizeof(v))) > 0) {
        assert_int_equal(n % (ssize_t)sizeof(v[0]), 0);
        for (size_t i = 0; i < (size_t)n / sizeof(v[0]); i++) {
            if (v[i] < p->acked)
                fail_msg("%s: acknowledged count went back from %" PRIu64 " to %" PRIu64,
                         p->name, p->acked, v[i]);
            p->acked = v[i];
        }
    }
    if (n < 0 && errno != EAGAIN)
        fail_msg("%s: reading its reports: %s", p->name, strerror(errno));
}

struct chaos_totals {
    uint64_t producers, killed, finished, acked, found, admin_clients, early_producers;
};

/* One round: forks the producers, sends the early leavers while they run,
 * kills each producer at its moment, reaps them and collects what they
 * reported. */
static void chaos_round(struct harness *h, unsigned round, uint64_t *rng, struct producer *ps,
                        struct chaos_totals *t)
{
    int64_t start = now_us();
    unsigned left = CHAOS_PRODUCERS;

    fflush(NULL); /* a child must not write our buffered output again */
    for (unsigned i = 0; i < CHAOS_PRODUCERS; i++) {
        struct producer *p = &ps[i];
        uint64_t child_seed = prng_next(rng);
        uint64_t max = 1 + prng_below(rng, CHAOS_MAX_RECORDS);
        int fds[2];

        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "chaos-%03u-%u", round, i);
        p->kill_at = start + (int64_t)prng_below(rng, CHAOS_KILL_WINDOW_US);
        assert_int_equal(pipe2(fds, O_CLOEXEC), 0);
        p->pid = fork();
        assert_true(p->pid >= 0);
        if (p->pid == 0) {
            close(fds[0]);
            producer_main(h->sock, p->name, child_seed, max, fds[1]);
        }
        close(fds[1]);
        p->report_fd = fds[0];
        assert_int_equal(fcntl(p->report_fd, F_SETFL, O_NONBLOCK), 0);
    }

    /* Admin clients that leave at once, one in three of them mid-request,
     * and a raw producer that does not wait for its ACK. */
    for (unsigned k = 0; k < 3; k++) {
        size_t full = sizeof(status_request) - 1;
        admin_hit_and_run(h, k == 2 ? 1 + prng_below(rng, full - 1) : full);
        t->admin_clients++;
    }
    {
        char name[32];
        snprintf(name, sizeof(name), "early-%03u", round);
        producer_hit_and_run(h, name);
        t->early_producers++;
    }

    /* Kill each producer at its moment, reading reports in between so that
     * no producer blocks on a full pipe. */
    while (left > 0) {
        struct pollfd pfd[CHAOS_PRODUCERS];
        int64_t next = INT64_MAX, wait;

        for (unsigned i = 0; i < CHAOS_PRODUCERS; i++) {
            pfd[i] = (struct pollfd){ .fd = ps[i].report_fd, .events = POLLIN };
            if (!ps[i].killed && ps[i].kill_at < next)
                next = ps[i].kill_at;
        }
        wait = next - now_us();
        if (wait > 0)
            (void)poll(pfd, CHAOS_PRODUCERS, (int)((wait + 999) / 1000));
        for (unsigned i = 0; i < CHAOS_PRODUCERS; i++)
            read_reports(&ps[i]);
        for (unsigned i = 0; i < CHAOS_PRODUCERS; i++) {
            if (ps[i].killed || ps[i].kill_at > now_us())
                continue;
            /* A producer that finished is a zombie until reaped: the kill
             * still succeeds and changes nothing. */
            assert_int_equal(kill(ps[i].pid, SIGKILL), 0);
            ps[i].killed = true;
            left--;
        }
    }

    for (unsigned i = 0; i < CHAOS_PRODUCERS; i++) {
        struct producer *p = &ps[i];
        int status;

        assert_int_equal(waitpid(p->pid, &status, 0), p->pid);
        /* Every write end is closed now: this reads to the end. */
        assert_int_equal(fcntl(p->report_fd, F_SETFL, 0), 0);
        read_reports(p);
        close(p->report_fd);
        p->report_fd = -1;
        if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
            t->killed++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            t->finished++;
        } else if (WIFEXITED(status) && WEXITSTATUS(status) > 10) {
            blame_daemon_if_gone(h);
            fail_msg("producer %s failed: %s", p->name, strerror(WEXITSTATUS(status) - 10));
        } else {
            fail_msg("producer %s ended with wait status 0x%x%s", p->name, (unsigned)status,
                     WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE
                         ? " (SIGPIPE: the library raised it)"
                         : "");
        }
    }
}

/* Checks one line of the merged spool against the producers: it must be a
 * chaos record of a known producer, and each sequence number is counted.
 * seen[round][slot] is a bitmap of CHAOS_MAX_RECORDS bits. */
static void count_record(const char *line, size_t len, unsigned rounds, unsigned char *seen,
                         struct producer *all)
{
    unsigned round, slot;
    unsigned long long seq;
    int used = 0;
    struct producer *p;
    size_t bit;
    char head[48];

    if (len >= 6 && strncmp(line, "early ", 6) == 0)
        return; /* a raw producer's record: no promise was made about it */
    /* sscanf measures its whole input string first: on the merged text,
     * line after line, that would take quadratic time. */
    snprintf(head, sizeof(head), "%.*s", (int)(len < sizeof(head) - 1 ? len : sizeof(head) - 1),
             line);
    if (sscanf(head, "chaos-%3u-%1u %llu %n", &round, &slot, &seq, &used) != 3 || used == 0 ||
        (size_t)used > len || round >= rounds || slot >= CHAOS_PRODUCERS ||
        seq >= CHAOS_MAX_RECORDS)
        fail_msg("unexpected record in the merged spool: %.*s", (int)(len < 80 ? len : 80),
                 line);
    for (size_t i = (size_t)used; i < len; i++)
        if (line[i] != 'x')
            fail_msg("record %.*s is damaged", (int)(len < 80 ? len : 80), line);
    p = &all[round * CHAOS_PRODUCERS + slot];
    bit = ((size_t)round * CHAOS_PRODUCERS + slot) * CHAOS_MAX_RECORDS + (size_t)seq;
    if (seen[bit / 8] & (1u << (bit % 8)))
        fail_msg("%s: record %llu is in the merged spool twice", p->name, seq);
    seen[bit / 8] |= (unsigned char)(1u << (bit % 8));
    p->found++;
}

static void test_chaos(void **state)
{
    struct harness *h = *state;
    uint64_t seed = env_u64("LOGSHARD_CHAOS_SEED", (uint64_t)time(NULL) ^ (uint64_t)getpid());
    unsigned rounds = (unsigned)env_u64("LOGSHARD_CHAOS_ROUNDS", CHAOS_ROUNDS);
    uint64_t rng = seed;
    struct chaos_totals t = { 0 };
    struct producer *all;
    unsigned char *seen;
    size_t bits, len;
    int64_t started = now_us();
    char *text, *line;

    assert_true(rounds >= 1 && rounds <= 1000);
    printf("chaos: seed %" PRIu64 " (LOGSHARD_CHAOS_SEED=%" PRIu64 " makes the same choices), "
           "%u rounds of %u producers\n",
           seed, seed, rounds, CHAOS_PRODUCERS);
    all = calloc((size_t)rounds * CHAOS_PRODUCERS, sizeof(*all));
    bits = (size_t)rounds * CHAOS_PRODUCERS * CHAOS_MAX_RECORDS;
    seen = calloc(bits / 8 + 1, 1);
    assert_non_null(all);
    assert_non_null(seen);

    harness_write_config(h, "[sync]\nfsync = batch\n");
    harness_start(h, NULL);
    for (unsigned r = 0; r < rounds; r++) {
        chaos_round(h, r, &rng, &all[(size_t)r * CHAOS_PRODUCERS], &t);
        harness_notify_drain(h); /* or the daemon blocks on a full notify queue */
        harness_assert_running(h);
    }
    t.producers = (uint64_t)rounds * CHAOS_PRODUCERS;
    printf("chaos: rounds done in %.1f s\n", (double)(now_us() - started) / 1e6);
    admin_status_roundtrip(h);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 60000));

    text = harness_merge_and_cat(h, "chaos.lsm", &len);
    for (line = text; line < text + len;) {
        char *nl = memchr(line, '\n', (size_t)(text + len - line));
        size_t l = nl ? (size_t)(nl - line) : (size_t)(text + len - line);

        count_record(line, l, rounds, seen, all);
        line += l + 1;
    }

    /* Per producer: the records found are exactly 0 .. found-1 (no
     * duplicates was checked above, so a gap would show as a missing bit),
     * and every acknowledged one is among them. */
    for (size_t i = 0; i < (size_t)rounds * CHAOS_PRODUCERS; i++) {
        struct producer *p = &all[i];

        for (uint64_t seq = 0; seq < p->found; seq++) {
            size_t bit = i * CHAOS_MAX_RECORDS + (size_t)seq;
            if (!(seen[bit / 8] & (1u << (bit % 8))))
                fail_msg("%s: %" PRIu64 " records found but record %" PRIu64
                         " is missing (the records present are not a prefix)",
                         p->name, p->found, seq);
        }
        if (p->found < p->acked)
            fail_msg("%s: %" PRIu64 " records acknowledged but only %" PRIu64
                     " in the merged spool",
                     p->name, p->acked, p->found);
        t.acked += p->acked;
        t.found += p->found;
    }
    printf("chaos: %u rounds, %" PRIu64 " producers (%" PRIu64 " killed with SIGKILL, %" PRIu64
           " finished first), %" PRIu64 " records acknowledged, %" PRIu64
           " found exactly once, %" PRIu64 " admin clients and %" PRIu64
           " raw producers closed early; %.1f s\n",
           rounds, t.producers, t.killed, t.finished, t.acked, t.found, t.admin_clients,
           t.early_producers, (double)(now_us() - started) / 1e6);
    free(text);
    free(seen);
    free(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_children_start_with_default_signals, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_peers_that_leave_early, harness_setup,
                                        harness_teardown),
        cmocka_unit_test_setup_teardown(test_chaos, harness_setup, harness_teardown),
    };

    /* The raw sends of this process must not end it; what it starts gets
     * SIGPIPE back at its default (process_reset_signals). */
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
