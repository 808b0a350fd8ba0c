/* logctl prune beside the real daemon, and killed: real logctl and
 * logshardd on real spools built by prune-fixture.c.
 *  - streams written with the protocol, their shards pruned once shipped,
 *    and the streams resumed at the right position after a restart;
 *  - 20 rounds of logctl prune killed with SIGKILL at a random moment and
 *    run again: after each kill nothing that must stay is gone and every
 *    stream's position is still known (streams/ or done/); after each
 *    rerun everything that must go is gone; at the end logctl cat --spool
 *    reads the spool and the daemon resumes a pruned stream.
 * The kill moments come from harness_rng_next() (seed printed;
 * LOGSHARD_TEST_SEED repeats it). LOGSHARD_TEST_FILTER=<test> runs one. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "harness.h"
#include "prune-fixture.h"
#include "raw-stream.h"
#include "shard_format.h"
#include "stream_positions.h"
#include "wire.h"

#define WAIT_MS 10000
#define RUN_TIMEOUT_MS 30000
#define KILL_ROUNDS 20u

/* ---- the real daemon: streams pruned once shipped, then resumed ---- */

/* Connects with a version 2 HELLO for stream id from first and waits for
 * the WELCOME. */
static void raw_open(struct raw_stream *c, struct world *w, const char *name, const uint8_t *id,
                     uint64_t first)
{
    raw_stream_open(c, w->h.sock, name, id, first);
    raw_stream_wait_welcome(c);
    if (c->error || c->eof)
        fail_msg("the daemon refused stream %s from %" PRIu64 " (error %u: %s)", name, first,
                 c->error, c->message);
}

/* Sends records first .. first + n - 1 ("<name> <position>") and waits for
 * their ACK. */
static void raw_append(struct raw_stream *c, const char *name, uint64_t first, uint64_t n)
{
    char prefix[WIRE_PRODUCER_NAME_MAX + 2];

    snprintf(prefix, sizeof(prefix), "%s ", name);
    raw_stream_append(c, prefix, first, n);
    raw_stream_wait_acked(c, first + n);
}

struct count_arg {
    const struct world *w;
    const char *sub;
    const char *suffix;
    size_t n;
};

static bool count_is(void *arg)
{
    struct count_arg *a = arg;

    return harness_count_files(&a->w->h, a->sub, a->suffix) == a->n;
}

static void wait_count(const struct world *w, const char *sub, const char *suffix, size_t n)
{
    struct count_arg a = { w, sub, suffix, n };

    if (!harness_wait_for(count_is, &a, WAIT_MS))
        fail_msg("%s/ does not hold %zu %s files within %d ms (%zu)", sub, n, suffix, WAIT_MS,
                 harness_count_files(&w->h, sub, suffix));
}

/* One stream's shard, written through the daemon: connect (resuming at
 * first), append n, close; the daemon seals it. */
static void stream_shard(struct world *w, const char *name, const uint8_t *id, uint64_t first,
                         uint64_t n, size_t sealed_after)
{
    struct raw_stream c;

    raw_open(&c, w, name, id, first);
    assert_int_equal(c.welcome.next_position, first);
    raw_append(&c, name, first, n);
    raw_stream_close(&c);
    wait_count(w, "done", ".shard", sealed_after);
}

/* The header of every shard of done/ whose stream is id, sorted by first
 * position: their paths into ret (up to max). */
static size_t shards_of(const struct world *w, const uint8_t *id, char **ret, size_t max,
                        struct shard_header *ret_h)
{
    DIR *d = opendir(w->done);
    struct dirent *de;
    size_t n = 0;

    assert_non_null(d);
    while ((de = readdir(d))) {
        char *p;
        unsigned char buf[SHARD_HEADER_MAX];
        struct shard_header h;
        const char *why;
        ssize_t got;
        int fd;

        if (de->d_name[0] == '.')
            continue;
        p = harness_path(w->done, de->d_name);
        fd = open(p, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        got = pread(fd, buf, sizeof(buf), 0);
        close(fd);
        if (got > 0 && shard_decode_header(buf, (size_t)got, &h, &why) == 0 &&
            shard_header_has_stream(&h) && memcmp(h.stream_id, id, 16) == 0) {
            size_t at = n;

            assert_true(n < max);
            while (at > 0 && ret_h[at - 1].first_position > h.first_position) {
                ret[at] = ret[at - 1];
                ret_h[at] = ret_h[at - 1];
                at--;
            }
            ret[at] = p;
            ret_h[at] = h;
            n++;
        } else {
            free(p);
        }
    }
    closedir(d);
    return n;
}

static size_t count_lines_starting(const char *text, const char *prefix)
{
    size_t n = 0;

    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');

        n += strncmp(p, prefix, strlen(prefix)) == 0;
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

static void test_shipped_with_daemon(void **state)
{
    struct world *w = *state;
    uint8_t s1[16], s2[16], s3[16];
    char *p1[4], *p2[4];
    struct shard_header h1[4], h2[4];
    struct positions_entry prog[3];
    struct shard legacy_shipped, legacy_not;
    struct harness_run r;
    struct known_set k;
    struct raw_stream live, back;

    make_stream_id(s1, 11);
    make_stream_id(s2, 12);
    make_stream_id(s3, 13);
    harness_start(&w->h, NULL);
    stream_shard(w, "alpha", s1, 0, 30, 1);
    stream_shard(w, "alpha", s1, 30, 30, 2);
    stream_shard(w, "beta", s2, 0, 20, 3);
    stream_shard(w, "beta", s2, 20, 20, 4);
    /* gamma stays connected: its shard is active. */
    raw_open(&live, w, "gamma", s3, 0);
    raw_append(&live, "gamma", 0, 10);
    assert_int_equal(harness_count_files(&w->h, "active", ".tmp"), 1);
    legacy_shipped = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - DAY);
    legacy_not = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - DAY);

    assert_int_equal(shards_of(w, s1, p1, 4, h1), 2);
    assert_int_equal(shards_of(w, s2, p2, 4, h2), 2);
    /* Shipped: all of alpha, beta's first shard, gamma's active records
     * (which never makes an active shard go), one legacy shard. */
    memset(prog, 0, sizeof(prog));
    memcpy(prog[0].stream_id, s1, 16);
    prog[0].next_position = 60;
    memcpy(prog[1].stream_id, s2, 16);
    prog[1].next_position = 20;
    memcpy(prog[2].stream_id, s3, 16);
    prog[2].next_position = 10;
    for (size_t i = 0; i < 3; i++) {
        prog[i].uid = (uint32_t)getuid();
        prog[i].newest_ns = w->now;
        snprintf(prog[i].producer, sizeof(prog[i].producer), "%s",
                 i == 0 ? "alpha" : i == 1 ? "beta" : "gamma");
    }
    {
        struct positions_entry all[4] = { prog[0], prog[1], prog[2],
                                          shipped_to(&legacy_shipped, legacy_shipped.records) };

        store_progress(w, all, 4);
    }

    /* Every shipped shard, whatever its size. */
    r = prune(w, "--shipped-max-bytes", "1", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune beside the daemon");
    harness_expect_in(r.out, "pruned 4 files", "the summary");
    harness_expect_in(r.out, "and 2 not yet shipped whole", "what is kept");
    harness_run_free(&r);
    assert_false(exists(p1[0]) || exists(p1[1]) || exists(p2[0]));
    assert_false(exists(legacy_shipped.path));
    assert_true(exists(p2[1]));
    assert_true(exists(legacy_not.path));
    assert_int_equal(harness_count_files(&w->h, "active", ".tmp"), 1);
    known_positions(w, false, &k);
    assert_int_equal(known_next(&k, s1), 60);
    assert_int_equal(known_next(&k, s2), 20);
    assert_int_equal(known_next(&k, s3), 0);

    /* The daemon is none the worse: gamma goes on, and is sealed at stop. */
    raw_append(&live, "gamma", 10, 5);
    raw_stream_close(&live);
    wait_count(w, "done", ".shard", 3);
    harness_assert_clean_exit(harness_stop(&w->h, SIGTERM, WAIT_MS));

    /* After a restart, alpha (no shard left) and beta resume where they
     * stopped: the daemon read streams/ and done/. */
    harness_start(&w->h, NULL);
    raw_open(&back, w, "alpha", s1, 60);
    assert_int_equal(back.welcome.next_position, 60);
    raw_append(&back, "alpha", 60, 5);
    raw_stream_close(&back);
    raw_open(&back, w, "beta", s2, 40);
    assert_int_equal(back.welcome.next_position, 40);
    raw_stream_close(&back);
    wait_count(w, "done", ".shard", 4);
    harness_assert_clean_exit(harness_stop(&w->h, SIGTERM, WAIT_MS));
    r = harness_run_logctl(&w->h, "cat", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl cat --spool");
    assert_int_equal(count_lines_starting(r.out, "alpha "), 5);
    assert_int_equal(count_lines_starting(r.out, "beta "), 20);
    assert_int_equal(count_lines_starting(r.out, "gamma "), 15);
    assert_int_equal(count_lines_starting(r.out, "legacy "), legacy_not.records);
    harness_expect_in(r.out, "alpha 000060\n", "alpha went on at 60");
    harness_run_free(&r);
    r = harness_run_logctl(&w->h, "verify", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl verify --spool");
    harness_run_free(&r);

    for (size_t i = 0; i < 2; i++) {
        free(p1[i]);
        free(p2[i]);
    }
    shard_free(&legacy_shipped);
    shard_free(&legacy_not);
}

/* ---- killed at random moments, run again ---- */

static struct harness_child spawn_prune(struct world *w, const char *out_path)
{
    const char *argv[] = { harness_logctl(), "prune", "--config", w->h.config, "--spool",
                           w->h.spool, NULL };

    return harness_child_start(argv, out_path, out_path);
}

enum trigger {
    TRIGGER_DELAY,          /* a delay after the start */
    TRIGGER_DELETE_MERGED,  /* the k-th file removed from merged/ */
    TRIGGER_POSITIONS,      /* the positions file appears in streams/ */
    TRIGGER_DELETE_SHIPPED, /* the k-th shard removed from done/ */
    N_TRIGGERS
};
static const char *const trigger_names[] = { "start+0..8ms", "k-th merged file removed",
                                             "positions written", "k-th shard removed" };

struct watch {
    int fd;
    int wd_merged, wd_done;
};

/* Waits for the trigger's event; false when the child exited first. */
static bool wait_trigger(const struct watch *wt, const struct harness_child *c, enum trigger t,
                         size_t k)
{
    int ifd = wt->fd;

    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    uint64_t deadline = now_monotonic_ns() + (uint64_t)RUN_TIMEOUT_MS * 1000000u;
    size_t deletes = 0;

    for (;;) {
        struct pollfd p[2] = { { .fd = ifd, .events = POLLIN },
                               { .fd = c->pidfd, .events = POLLIN } };
        uint64_t now = now_monotonic_ns();
        ssize_t n;

        if (now >= deadline)
            fail_msg("no event for trigger '%s' within %d ms", trigger_names[t], RUN_TIMEOUT_MS);
        if (poll(p, 2, (int)((deadline - now) / 1000000u) + 1) < 0) {
            assert_int_equal(errno, EINTR);
            continue;
        }
        while ((n = read(ifd, buf, sizeof(buf))) > 0) {
            for (char *q = buf; q < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)q;
                const char *name = ev->len ? ev->name : "";

                q += sizeof(*ev) + ev->len;
                if (t == TRIGGER_POSITIONS && (ev->mask & IN_MOVED_TO) && name[0] != '.')
                    return true;
                if (t == TRIGGER_DELETE_MERGED && ev->wd == wt->wd_merged &&
                    (ev->mask & IN_DELETE) && ++deletes >= k)
                    return true;
                if (t == TRIGGER_DELETE_SHIPPED && ev->wd == wt->wd_done &&
                    (ev->mask & IN_DELETE) && ++deletes >= k)
                    return true;
            }
        }
        /* Events first: a fast child may have done everything and left. */
        if (p[1].revents)
            return false;
    }
}

/* What one round of the kill test made, and what must become of it. */
struct expect {
    char *path;
    bool must_go;
};

struct ledger {
    struct expect *v;
    size_t n;
    uint8_t (*streams)[16];
    uint64_t *ends; /* the end of each stream's sealed records */
    size_t n_streams;
    struct positions_entry *progress;
    size_t n_progress;
};

static void ledger_add(struct ledger *l, char *path, bool must_go)
{
    l->v = realloc(l->v, (l->n + 1) * sizeof(*l->v));
    assert_non_null(l->v);
    l->v[l->n++] = (struct expect){ path, must_go };
}

static void ledger_stream(struct ledger *l, const uint8_t *id, uint64_t end)
{
    l->streams = realloc(l->streams, (l->n_streams + 1) * sizeof(*l->streams));
    l->ends = realloc(l->ends, (l->n_streams + 1) * sizeof(*l->ends));
    assert_non_null(l->streams);
    assert_non_null(l->ends);
    memcpy(l->streams[l->n_streams], id, 16);
    l->ends[l->n_streams++] = end;
}

static void ledger_progress(struct ledger *l, struct positions_entry e)
{
    l->progress = realloc(l->progress, (l->n_progress + 1) * sizeof(*l->progress));
    assert_non_null(l->progress);
    l->progress[l->n_progress++] = e;
}

/* One round's new material: merged files past 30 days and within it,
 * shipped streams past the hour and within it, a stream shipped only in
 * part, shards without a stream, an active shard the progress covers, a
 * planted link. Ages are days and hours from any limit, so the test's
 * own minutes never move a file across one. */
static void add_round(struct world *w, struct ledger *l, unsigned round)
{
    for (unsigned i = 0; i < 8; i++) {
        uint64_t age = (31 + (harness_rng_next() % 300)) * DAY + round * SEC + i;

        ledger_add(l, add_merged(w, w->merged, w->now - age, 1 + i % 3), true);
    }
    for (unsigned i = 0; i < 3; i++)
        ledger_add(l, add_merged(w, w->merged, w->now - (1 + i) * DAY - round * SEC, 1), false);
    for (unsigned s = 0; s < 4; s++) {
        uint8_t id[16];
        uint64_t first = 0;
        /* s 0, 1: shipped, 2 h old: they go. s 2: shipped, young: stays.
         * s 3: old, shipped up to the middle of its second shard. */
        uint64_t newest = s == 2 ? w->now : w->now - 2 * HOUR;
        struct shard sh[3];
        char producer[32];

        make_stream_id(id, 1000 + round * 8 + s);
        snprintf(producer, sizeof(producer), "r%02u.s%u", round, s);
        for (unsigned j = 0; j < 3; j++) {
            sh[j] = add_shard(w, w->done, producer, id, first, 1 + j % 2, newest - (3 - j) * SEC);
            first = shard_end(&sh[j]);
        }
        ledger_stream(l, id, first);
        ledger_progress(l, shipped_to(&sh[2], s == 3 ? shard_end(&sh[0]) + 1 : first));
        for (unsigned j = 0; j < 3; j++) {
            ledger_add(l, sh[j].path, (s < 2) || (s == 3 && j == 0));
            sh[j].path = NULL;
        }
    }
    {
        struct shard gone = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 3 * HOUR);
        struct shard kept = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 3 * HOUR);
        struct shard act = add_shard(w, w->outside, "live", NULL, 0, 1, w->now - 5 * HOUR);
        char *active = fmt("%s/live.%016" PRIx64 ".tmp", w->active, act.h.shard_id);
        char *link = fmt("%s/merged-19990101T000000.%09uZ.lsm", w->merged, round);
        char *target = add_merged(w, w->outside, w->now - (400 + round) * DAY, 1);

        ledger_progress(l, shipped_to(&gone, gone.records));
        ledger_progress(l, shipped_to(&kept, kept.records - 1));
        ledger_progress(l, shipped_to(&act, act.records));
        ledger_add(l, gone.path, true);
        ledger_add(l, kept.path, false);
        assert_int_equal(rename(act.path, active), 0);
        ledger_add(l, active, false);
        shard_free(&act);
        assert_int_equal(symlink(target, link), 0);
        ledger_add(l, link, false);
        ledger_add(l, target, false);
    }
    store_progress(w, l->progress, l->n_progress);
}

/* After a kill: nothing that must stay is gone, and every stream's end is
 * still known from streams/ or done/. With finished, everything that must
 * go is gone too. */
static void check_ledger(const struct world *w, const struct ledger *l, bool finished,
                         const char *when)
{
    struct known_set k;

    for (size_t i = 0; i < l->n; i++) {
        bool there = exists(l->v[i].path);

        if (!l->v[i].must_go && !there)
            fail_msg("%s: %s was removed, but must stay", when, l->v[i].path);
        if (finished && l->v[i].must_go && there)
            fail_msg("%s: %s is still there", when, l->v[i].path);
    }
    known_positions(w, true, &k);
    for (size_t i = 0; i < l->n_streams; i++)
        if (known_next(&k, l->streams[i]) < l->ends[i])
            fail_msg("%s: stream %zu of the ledger is known only up to %" PRIu64
                     ", its records go to %" PRIu64,
                     when, i, known_next(&k, l->streams[i]), l->ends[i]);
}

static void test_kill_rounds(void **state)
{
    struct world *w = *state;
    struct ledger l = { 0 };
    char *out = harness_path(w->h.dir, "prune.out");
    unsigned hits[N_TRIGGERS] = { 0 }, finished_first = 0;
    size_t before_cat;
    struct harness_run r;
    struct watch wt;

    harness_seed_rng();
    harness_write_config(&w->h, "[retention]\nmerged_max_age = 30d\nshipped_max_age = 1h\n"
                                "[streams]\nresume_window = 30d\n");
    make_dir(w->streams); /* watched from the first round */
    wt.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    assert_true(wt.fd >= 0);
    assert_true(inotify_add_watch(wt.fd, w->streams, IN_MOVED_TO) >= 0);
    wt.wd_merged = inotify_add_watch(wt.fd, w->merged, IN_DELETE);
    wt.wd_done = inotify_add_watch(wt.fd, w->done, IN_DELETE);
    assert_true(wt.wd_merged >= 0 && wt.wd_done >= 0);

    for (unsigned round = 0; round < KILL_ROUNDS; round++) {
        enum trigger t = (enum trigger)(harness_rng_next() % N_TRIGGERS);
        /* Each round removes 8 merged files and 8 shards. */
        size_t k_del = 1 + harness_rng_next() % 8;
        uint64_t delay = harness_rng_next() % 8000000u;
        struct harness_child c;
        bool exited = false;
        char when[64];
        int status;

        add_round(w, &l, round);
        {
            char buf[4096];

            while (read(wt.fd, buf, sizeof(buf)) > 0)
                ; /* this round's own writes */
        }
        c = spawn_prune(w, out);
        if (t == TRIGGER_DELAY) {
            struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)delay };
            struct pollfd p = { .fd = c.pidfd, .events = POLLIN };

            exited = ppoll(&p, 1, &ts, NULL) > 0;
        } else {
            exited = !wait_trigger(&wt, &c, t, k_del);
        }
        status = harness_child_wait(&c, SIGKILL, RUN_TIMEOUT_MS, "logctl prune");
        if (WIFEXITED(status)) {
            finished_first++;
            if (WEXITSTATUS(status) != 0) {
                size_t len;
                char *text = harness_slurp(out, &len);

                fail_msg("round %u: logctl prune exited %d:\n%s", round, WEXITSTATUS(status),
                         text);
            }
        } else {
            hits[t]++;
        }
        (void)exited;
        snprintf(when, sizeof(when), "round %u, after the kill (%s)", round, trigger_names[t]);
        check_ledger(w, &l, false, when);

        r = harness_run_logctl(&w->h, "prune", "--config", w->h.config, "--spool", w->h.spool,
                               NULL);
        harness_expect_code(&r, 0, "logctl prune after a kill");
        harness_run_free(&r);
        snprintf(when, sizeof(when), "round %u, after the rerun", round);
        check_ledger(w, &l, true, when);
    }
    fprintf(stderr, "kills: %u after a delay, %u after a merged file's removal, %u at the "
                    "positions, %u after a shard's removal; %u runs finished before the kill\n",
            hits[0], hits[1], hits[2], hits[3], finished_first);
    close(wt.fd);

    /* What is left reads, and a stream whose every shard went resumes
     * where it ended. */
    before_cat = 0;
    for (size_t i = 0; i < l.n; i++)
        before_cat += !l.v[i].must_go && strstr(l.v[i].path, "/done/") != NULL;
    r = harness_run_logctl(&w->h, "cat", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl cat --spool after the rounds");
    harness_run_free(&r);
    assert_int_equal(harness_count_files(&w->h, "done", ".shard"), before_cat);
    harness_start(&w->h, NULL);
    {
        struct raw_stream c;

        /* Round 0's stream 0: every shard pruned in the first round. */
        raw_open(&c, w, "r00.s0", l.streams[0], l.ends[0]);
        assert_int_equal(c.welcome.next_position, l.ends[0]);
        raw_append(&c, "r00.s0", l.ends[0], 3);
        raw_stream_close(&c);
    }
    harness_assert_clean_exit(harness_stop(&w->h, SIGTERM, WAIT_MS));
    /* verify --spool reads merged/ too, and rightly calls a planted link
     * an error: they have served, and go before it looks. */
    for (size_t i = 0; i < l.n; i++) {
        struct stat st;

        if (lstat(l.v[i].path, &st) == 0 && S_ISLNK(st.st_mode))
            assert_int_equal(unlink(l.v[i].path), 0);
    }
    r = harness_run_logctl(&w->h, "verify", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl verify --spool after the rounds");
    harness_run_free(&r);

    for (size_t i = 0; i < l.n; i++)
        free(l.v[i].path);
    free(l.v);
    free(l.streams);
    free(l.ends);
    free(l.progress);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_shipped_with_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_rounds, setup, teardown),
    };

    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
