/* Integration test of `logctl merge --delete` against kill -9: the real
 * logctl binary ($LOGCTL) merges a spool of real sealed shards and is
 * killed at a random instant, then run again to completion, round after
 * round, with new shards added before each round. At the end every record
 * of every producer must appear exactly once, in order, across all the
 * merged files, and no source, temp file or intent may be left.
 *
 * Where the kill lands matters more than how often: a plain random delay
 * almost never hits the short window between publishing and the end of
 * the deletions. So each round picks a trigger: a delay after the start, a
 * delay after merge.intent appears (the copy), a few hundred microseconds
 * after the output appears (published, directory sync, first deletions),
 * or right after the k-th source is deleted. The triggers are inotify
 * events, waited for with poll and a deadline; the delays are what the test
 * is about. The state after each kill is classified and counted, and rounds
 * are added (up to a cap) until each phase was hit at least once.
 *
 * The random choices come from a seed printed at the start; set
 * MERGE_CRASH_SEED to repeat them (the kill instants also depend on
 * timing, so a repeat is close, not exact). */
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
#include "shard_format.h"

#define PRODUCERS 8u
#define FIRST_SHARDS 200u
#define SHARDS_PER_ROUND 40u
#define MIN_ROUNDS 32u
#define MAX_ROUNDS 80u
#define RUN_TIMEOUT_MS 30000
#define TIME_BUDGET_NS (40ull * 1000000000ull)

/* ---- randomness ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: small, and the same sequence for the same seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

static uint64_t rnd_range(uint64_t lo, uint64_t hi) /* inclusive */
{
    return lo + rnd() % (hi - lo + 1);
}

/* ---- the spool and its records ---- */

struct world {
    struct harness h;
    char *done;
    char *merged;
    uint64_t next_id[PRODUCERS];
    uint32_t next_seq[PRODUCERS];
    size_t outputs; /* published merged files expected so far */
};

static size_t payload_len(uint32_t seq)
{
    return 40 + (size_t)((seq * 7919u) % 1400u);
}

/* "p03 0000000042|" then a filler that depends on the sequence number. */
static size_t make_payload(unsigned char *out, unsigned producer, uint32_t seq)
{
    size_t len = payload_len(seq);
    int n = snprintf((char *)out, 32, "p%02u %010" PRIu32 "|", producer, seq);

    memset(out + n, 'a' + (int)(seq % 26u), len - (size_t)n);
    return len;
}

/* Writes one sealed shard of producer p, of 100 to 400 KiB, into done/. */
static void add_shard(struct world *w, unsigned p)
{
    size_t target = (size_t)rnd_range(100, 400) * 1024;
    unsigned char *buf = malloc(target + SHARD_HEADER_MAX + SHARD_RECORD_HEADER + 2000);
    struct shard_header h;
    char name[128], *path;
    size_t len;
    int fd;

    assert_non_null(buf);
    memset(&h, 0, sizeof(h));
    h.uid = 1000;
    h.gid = 1000;
    h.pid = 4242;
    h.shard_id = ++w->next_id[p];
    h.created_ns = now_realtime_ns();
    h.producer_len = (size_t)snprintf(h.producer, sizeof(h.producer), "p%02u", p);
    len = shard_encode_header(buf, &h);
    while (len < target) {
        unsigned char payload[1500];
        uint32_t seq = w->next_seq[p]++;
        size_t plen = make_payload(payload, p, seq);

        len += shard_encode_record(buf + len, payload, (uint32_t)plen, h.created_ns + seq);
    }
    snprintf(name, sizeof(name), "%s.%016" PRIx64 ".shard", h.producer, h.shard_id);
    path = harness_path(w->done, name);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
    free(path);
    free(buf);
}

static void add_shards(struct world *w, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        add_shard(w, (unsigned)rnd_range(0, PRODUCERS - 1));
}

/* Counts entries of dir: ".shard" sources, dotfiles, and other names. */
struct dir_count {
    size_t shards, dotfiles, others;
};

static struct dir_count count_dir(const char *dir)
{
    struct dir_count c = { 0 };
    DIR *d = opendir(dir);
    struct dirent *de;

    assert_non_null(d);
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (de->d_name[0] == '.')
            c.dotfiles++;
        else if (len > 6 && strcmp(de->d_name + len - 6, ".shard") == 0)
            c.shards++;
        else
            c.others++;
    }
    closedir(d);
    return c;
}

static bool spool_has(const struct world *w, const char *name)
{
    char *p = harness_path(w->h.spool, name);
    struct stat st;
    bool r = lstat(p, &st) == 0;

    free(p);
    return r;
}

/* ---- running and killing logctl ---- */

static struct harness_child spawn_merge(const struct world *w, const char *out_path)
{
    const char *argv[] = { harness_logctl(), "merge", "--spool", w->h.spool, "--delete", NULL };

    return harness_child_start(argv, out_path, out_path);
}

/* Sends sig unless 0, waits until the child has exited (it may already
 * have) and returns its wait status. */
static int reap(struct harness_child *c, int sig)
{
    return harness_child_wait(c, sig, RUN_TIMEOUT_MS, "logctl merge");
}

/* Waits up to ns nanoseconds; returns true when the child exited first. */
static bool wait_ns(const struct harness_child *c, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000u),
                           .tv_nsec = (long)(ns % 1000000000u) };
    struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
    int r;

    do
        r = ppoll(&p, 1, &ts, NULL);
    while (r < 0 && errno == EINTR);
    assert_true(r >= 0);
    return r > 0;
}

enum trigger {
    TRIGGER_START,     /* delay after the start */
    TRIGGER_INTENT,    /* delay after merge.intent appears */
    TRIGGER_PUBLISHED, /* short delay after the output appears */
    TRIGGER_DELETED,   /* right after the k-th source was deleted */
};
static const char *const trigger_names[] = { "start+0..30ms", "intent+0..10ms",
                                             "output+0..100us", "k-th delete" };

struct watch {
    int fd;
    int wd_spool, wd_merged, wd_done;
};

static void drain(const struct watch *wt)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));

    while (read(wt->fd, buf, sizeof(buf)) > 0)
        ;
}

/* Waits for the event of the trigger (counting deletions for
 * TRIGGER_DELETED). Returns false when the child exited first. */
static bool wait_event(const struct watch *wt, const struct harness_child *c, enum trigger t,
                       size_t k)
{
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    uint64_t deadline = now_monotonic_ns() + (uint64_t)RUN_TIMEOUT_MS * 1000000u;
    size_t deletes = 0;

    for (;;) {
        struct pollfd p[2] = { { .fd = wt->fd, .events = POLLIN },
                               { .fd = c->pidfd, .events = POLLIN } };
        uint64_t now = now_monotonic_ns();
        ssize_t n;

        if (now >= deadline)
            fail_msg("no inotify event for trigger '%s' within %d ms", trigger_names[t],
                     RUN_TIMEOUT_MS);
        if (poll(p, 2, (int)((deadline - now) / 1000000u) + 1) < 0) {
            assert_int_equal(errno, EINTR);
            continue;
        }
        while ((n = read(wt->fd, buf, sizeof(buf))) > 0) {
            for (char *q = buf; q < buf + n;) {
                const struct inotify_event *ev = (const struct inotify_event *)q;
                const char *name = ev->len ? ev->name : "";

                q += sizeof(*ev) + ev->len;
                if (t == TRIGGER_INTENT && ev->wd == wt->wd_spool &&
                    strcmp(name, "merge.intent") == 0)
                    return true;
                if (t == TRIGGER_PUBLISHED && ev->wd == wt->wd_merged && name[0] != '.' &&
                    (ev->mask & IN_MOVED_TO))
                    return true;
                if (t == TRIGGER_DELETED && ev->wd == wt->wd_done && (ev->mask & IN_DELETE) &&
                    ++deletes >= k)
                    return true;
            }
        }
        /* Events are read before the exit is believed: a fast child may
         * have done everything and left. */
        if (p[1].revents)
            return false;
    }
}

/* ---- phases ---- */

enum phase {
    PHASE_DONE_BEFORE_KILL, /* the merge finished before the kill */
    PHASE_BEFORE_INTENT,    /* killed while checking sources */
    PHASE_INTENT_ONLY,      /* intent, no temp yet */
    PHASE_COPY,             /* intent and temp */
    PHASE_PUBLISHED,        /* output there, every source still there */
    PHASE_DELETING,         /* output there, some sources gone */
    PHASE_DELETED,          /* every source gone, intent still there */
    PHASE_AFTER_INTENT,     /* killed after removing the intent */
    N_PHASES
};
static const char *const phase_names[] = {
    "finished before the kill", "checking sources (no intent yet)",
    "intent written, no temp yet", "copying (intent + temp)",
    "published, no source removed", "removing sources",
    "sources removed, intent left", "intent removed (end)",
};

static enum phase classify(const struct world *w, bool exited, size_t sources)
{
    struct dir_count done = count_dir(w->done);
    struct dir_count merged = count_dir(w->merged);
    bool published = merged.others > w->outputs;

    if (exited)
        return PHASE_DONE_BEFORE_KILL;
    assert_true(merged.others <= w->outputs + 1);
    if (!spool_has(w, "merge.intent")) {
        /* Without an intent, a kill leaves the state of before or after. */
        if (done.shards == sources) {
            assert_false(published);
            assert_int_equal(merged.dotfiles, 0);
            return PHASE_BEFORE_INTENT;
        }
        assert_int_equal(done.shards, 0);
        assert_true(published);
        return PHASE_AFTER_INTENT;
    }
    if (!published) {
        assert_int_equal(done.shards, sources);
        return merged.dotfiles ? PHASE_COPY : PHASE_INTENT_ONLY;
    }
    if (done.shards == sources)
        return PHASE_PUBLISHED;
    return done.shards ? PHASE_DELETING : PHASE_DELETED;
}

/* ---- checking every record ---- */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void check_all_records(const struct world *w)
{
    uint32_t seq[PRODUCERS] = { 0 };
    uint64_t last_id[PRODUCERS] = { 0 };
    char **names = NULL;
    size_t n = 0;
    uint64_t records = 0;
    DIR *d = opendir(w->merged);
    struct dirent *de;

    assert_non_null(d);
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        names = realloc(names, (n + 1) * sizeof(*names));
        assert_non_null(names);
        names[n] = strdup(de->d_name);
        assert_non_null(names[n]);
        n++;
    }
    closedir(d);
    assert_int_equal(n, w->outputs);
    /* Default names sort by time, so this is the order of the merges. */
    qsort(names, n, sizeof(*names), name_cmp);

    for (size_t i = 0; i < n; i++) {
        char *path = harness_path(w->merged, names[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct shard_reader *r = NULL;
        struct shard_item item;
        unsigned p = 0;
        int rc;

        assert_true(fd >= 0);
        assert_int_equal(shard_reader_new(&r, fd), 0);
        while ((rc = shard_reader_next(r, &item)) > 0) {
            unsigned char expect[1500];
            size_t len;

            if (item.kind == SHARD_ITEM_HEADER) {
                assert_int_equal(sscanf(item.header->producer, "p%02u", &p), 1);
                assert_true(p < PRODUCERS);
                /* Each shard once, and in order. */
                if (item.header->shard_id != last_id[p] + 1)
                    fail_msg("%s: producer p%02u shard %" PRIu64 " follows shard %" PRIu64,
                             path, p, item.header->shard_id, last_id[p]);
                last_id[p] = item.header->shard_id;
                continue;
            }
            len = make_payload(expect, p, seq[p]);
            if (item.len != len || memcmp(item.payload, expect, len) != 0)
                fail_msg("%s at offset %" PRIu64 ": expected record %" PRIu32
                         " of producer p%02u, found '%.15s'",
                         path, item.offset, seq[p], p, (const char *)item.payload);
            seq[p]++;
            records++;
        }
        if (rc < 0)
            fail_msg("%s: reader error %d", path, rc);
        shard_reader_free(r);
        assert_int_equal(close(fd), 0);
        free(path);
        free(names[i]);
    }
    free(names);
    for (unsigned p = 0; p < PRODUCERS; p++) {
        if (seq[p] != w->next_seq[p] || last_id[p] != w->next_id[p])
            fail_msg("producer p%02u: %" PRIu32 " of %" PRIu32 " records and %" PRIu64
                     " of %" PRIu64 " shards in the merged files",
                     p, seq[p], w->next_seq[p], last_id[p], w->next_id[p]);
    }
    print_message("checked %" PRIu64 " records of %u producers in %zu merged files\n", records,
                  PRODUCERS, n);
}

/* After a merge that ran to completion: nothing left behind. */
static void check_clean(const struct world *w)
{
    struct dir_count done = count_dir(w->done);
    struct dir_count merged = count_dir(w->merged);

    assert_int_equal(done.shards, 0);
    assert_int_equal(done.dotfiles, 0);
    assert_int_equal(merged.dotfiles, 0);
    assert_int_equal(merged.others, w->outputs);
    assert_false(spool_has(w, "merge.intent"));
    assert_false(spool_has(w, "merge.intent.tmp"));
}

static bool has_line(const char *path, const char *prefix)
{
    size_t len;
    char *text = harness_slurp(path, &len);
    bool r = strncmp(text, prefix, strlen(prefix)) == 0;

    free(text);
    return r;
}

static void test_merge_killed_at_random(void **state)
{
    struct world w;
    struct watch wt;
    size_t hits[N_PHASES] = { 0 };
    size_t recovery_kills = 0;
    const char *seed_env = getenv("MERGE_CRASH_SEED");
    uint64_t seed, start = now_monotonic_ns();
    char *out_killed, *out_rerun;
    unsigned round;

    (void)state;
    if (seed_env) {
        char *end;

        errno = 0;
        seed = strtoull(seed_env, &end, 0);
        assert_true(errno == 0 && *end == '\0' && end != seed_env);
    } else {
        seed = now_realtime_ns() ^ ((uint64_t)getpid() << 32);
    }
    rng_state = seed ? seed : 1;
    print_message("merge-crash: seed %" PRIu64 " (set MERGE_CRASH_SEED=%" PRIu64
                  " to repeat)\n",
                  seed, seed);

    memset(&w, 0, sizeof(w));
    harness_init(&w.h);
    w.done = harness_path(w.h.spool, "done");
    w.merged = harness_path(w.h.spool, "merged");
    assert_int_equal(mkdir(w.h.spool, 0750), 0);
    assert_int_equal(mkdir(w.done, 0750), 0);
    assert_int_equal(mkdir(w.merged, 0750), 0);
    out_killed = harness_path(w.h.dir, "killed.out");
    out_rerun = harness_path(w.h.dir, "rerun.out");

    wt.fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    assert_true(wt.fd >= 0);
    wt.wd_spool = inotify_add_watch(wt.fd, w.h.spool, IN_MOVED_TO);
    wt.wd_merged = inotify_add_watch(wt.fd, w.merged, IN_MOVED_TO);
    wt.wd_done = inotify_add_watch(wt.fd, w.done, IN_DELETE);
    assert_true(wt.wd_spool >= 0 && wt.wd_merged >= 0 && wt.wd_done >= 0);

    add_shards(&w, FIRST_SHARDS);
    for (round = 0; round < MAX_ROUNDS; round++) {
        size_t sources = count_dir(w.done).shards;
        enum trigger t = (enum trigger)(round % 4);
        uint64_t delay_ns = 0;
        size_t k = 0;
        struct harness_child c;
        bool exited = false;
        enum phase ph;
        int status;

        if (round >= MIN_ROUNDS) {
            bool missing = hits[PHASE_COPY] == 0 || hits[PHASE_PUBLISHED] == 0 ||
                           hits[PHASE_DELETING] == 0;

            if (!missing || now_monotonic_ns() - start > TIME_BUDGET_NS)
                break;
            /* Aim at what was not hit yet. */
            t = hits[PHASE_COPY] == 0       ? TRIGGER_INTENT
                : hits[PHASE_PUBLISHED] == 0 ? TRIGGER_PUBLISHED
                                             : TRIGGER_DELETED;
        }
        if (round > 0)
            add_shards(&w, SHARDS_PER_ROUND);
        sources = count_dir(w.done).shards;
        switch (t) {
        case TRIGGER_START:
            delay_ns = rnd_range(0, 30000) * 1000u;
            break;
        case TRIGGER_INTENT:
            delay_ns = rnd_range(0, 10000) * 1000u;
            break;
        case TRIGGER_PUBLISHED:
            /* The window is the output directory's fsync: often tens of us. */
            delay_ns = rnd() % 2 ? 0 : rnd_range(0, 100) * 1000u;
            break;
        case TRIGGER_DELETED:
            k = (size_t)rnd_range(1, sources);
            break;
        }

        drain(&wt);
        c = spawn_merge(&w, out_killed);
        if (t != TRIGGER_START)
            exited = !wait_event(&wt, &c, t, k);
        if (!exited && delay_ns)
            exited = wait_ns(&c, delay_ns);
        status = reap(&c, exited ? 0 : SIGKILL);
        if (exited || !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
            /* It beat the kill: then it must have succeeded. */
            assert_true(WIFEXITED(status));
            assert_int_equal(WEXITSTATUS(status), 0);
            exited = true;
        }
        ph = classify(&w, exited, sources);
        hits[ph]++;
        print_message("round %2u: %zu sources, trigger %s (%" PRIu64 " us, k=%zu): %s\n", round,
                      sources, trigger_names[t], delay_ns / 1000u, k, phase_names[ph]);

        /* Every fourth round, the merge that recovers is killed too. */
        if (round % 4 == 3 && ph != PHASE_DONE_BEFORE_KILL) {
            bool ended;

            c = spawn_merge(&w, out_killed);
            ended = wait_ns(&c, rnd_range(0, 3000) * 1000u);
            if (!ended)
                recovery_kills++;
            (void)reap(&c, ended ? 0 : SIGKILL);
        }

        /* Run again, to the end. */
        {
            const char *argv[] = { harness_logctl(), "merge", "--spool", w.h.spool, "--delete",
                                   NULL };

            status = harness_run(argv, out_rerun, NULL, RUN_TIMEOUT_MS);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            size_t len;
            char *text = harness_slurp(out_rerun, &len);

            fail_msg("round %u: the rerun failed (status %d):\n%s", round, status, text);
        }
        /* It says what it found, unless a killed recovery already did the
         * work (then there is no intent left to report on). */
        if (round % 4 != 3) {
            bool finished = has_line(out_rerun, "finished an interrupted merge");
            bool rolled_back = has_line(out_rerun, "rolled back an interrupted merge");

            switch (ph) {
            case PHASE_INTENT_ONLY:
            case PHASE_COPY:
                assert_true(rolled_back);
                break;
            case PHASE_PUBLISHED:
            case PHASE_DELETING:
            case PHASE_DELETED:
                assert_true(finished);
                break;
            default:
                assert_false(finished || rolled_back);
                break;
            }
        }
        w.outputs++;
        check_clean(&w);
    }

    print_message("merge-crash: %u rounds in %.1f s, %zu recoveries killed too; phases hit:\n",
                  round, (double)(now_monotonic_ns() - start) / 1e9, recovery_kills);
    for (int i = 0; i < N_PHASES; i++)
        print_message("  %-34s %zu\n", phase_names[i], hits[i]);
    check_all_records(&w);
    assert_true(hits[PHASE_COPY] > 0);
    assert_true(hits[PHASE_PUBLISHED] > 0);
    assert_true(hits[PHASE_DELETING] > 0);

    assert_int_equal(close(wt.fd), 0);
    free(out_killed);
    free(out_rerun);
    free(w.done);
    free(w.merged);
    harness_cleanup(&w.h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_killed_at_random),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
