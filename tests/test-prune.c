/* logctl prune (docs/RETENTION.md): the real logctl on real spools.
 *  - merged files by age and by total size, oldest first, the options over
 *    the config file, a merged directory elsewhere: exactly the files the
 *    rule names go, in that order, and the output says why;
 *  - shipped shards on a spool with ship/progress: only those shipped whole,
 *    by the age of their newest record and by size, their streams'
 *    positions in streams/; never an active shard, a shard not shipped
 *    whole, quarantine/; without ship/progress done/ is untouched;
 *  - --dry-run removes and writes nothing, and names what the real run
 *    then removes;
 *  - symbolic links planted in merged/ and done/ (to files and a directory
 *    outside the spool), a symbolic link as the merged directory, the
 *    spool and done/: nothing is followed, every target survives; other
 *    names, a subdirectory and a merge's temp file stay;
 *  - merge.lock held: exit status 3, nothing removed; an interrupted
 *    merge's output and sources stay, and the next merge finishes it;
 *  - the real daemon: streams written with the protocol, their shards
 *    pruned once shipped, and the streams resumed at the right position
 *    after a restart;
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
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "harness.h"
#include "json.h"
#include "merge.h"
#include "shard_format.h"
#include "ship_progress.h"
#include "spool_names.h"
#include "stream_positions.h"
#include "wire.h"

#define BLOCK 4096u
#define SEC 1000000000ull
#define MINUTE (60 * SEC)
#define HOUR (3600 * SEC)
#define DAY (86400 * SEC)
#define WAIT_MS 10000
#define RUN_TIMEOUT_MS 30000
#define KILL_ROUNDS 20u

/* ---- the spool ---- */

struct world {
    struct harness h;
    char *done, *active, *merged, *quarantine, *streams, *outside;
    uint64_t now;      /* when the world was made: every age counts from it */
    uint64_t next_id;  /* shard ids of the shards written here */
};

static void make_dir(const char *path)
{
    if (mkdir(path, 0750) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", path, strerror(errno));
}

static int setup(void **state)
{
    struct world *w = calloc(1, sizeof(*w));

    assert_non_null(w);
    harness_init(&w->h);
    w->done = harness_path(w->h.spool, "done");
    w->active = harness_path(w->h.spool, "active");
    w->merged = harness_path(w->h.spool, "merged");
    w->quarantine = harness_path(w->h.spool, "quarantine");
    w->streams = harness_path(w->h.spool, "streams");
    w->outside = harness_path(w->h.dir, "outside");
    make_dir(w->h.spool);
    make_dir(w->done);
    make_dir(w->active);
    make_dir(w->merged);
    make_dir(w->quarantine);
    make_dir(w->outside);
    w->now = now_realtime_ns();
    w->next_id = 0x1000;
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    struct world *w = *state;

    if (w->h.daemon > 0)
        (void)harness_stop(&w->h, SIGKILL, 10000);
    harness_cleanup(&w->h);
    free(w->done);
    free(w->active);
    free(w->merged);
    free(w->quarantine);
    free(w->streams);
    free(w->outside);
    free(w);
    return 0;
}

static bool exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

static void write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    if (fd < 0)
        fail_msg("create %s: %s", path, strerror(errno));
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
}

static uint64_t size_of(const char *path)
{
    struct stat st;

    assert_int_equal(lstat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* A sealed shard of exactly blocks * BLOCK bytes, as the daemon seals one:
 * header h, records of 100 bytes "<producer> <position>" padded with '.',
 * the newest received at newest_ns, a seal trailer padding to BLOCK.
 * Returns the bytes (free them); *ret_records gets the record count. */
static unsigned char *shard_bytes(const struct shard_header *h, unsigned blocks,
                                  uint64_t newest_ns, size_t *ret_len, uint64_t *ret_records)
{
    unsigned char *buf = malloc((size_t)blocks * BLOCK);
    struct shard_trailer t = { 0 };
    uint64_t n = 0;
    size_t len, hdr;

    assert_non_null(buf);
    hdr = len = shard_encode_header(buf, h);
    /* Records while the trailer still lands in the last block. */
    do {
        char payload[100];
        int k = snprintf(payload, sizeof(payload), "%s %06" PRIu64 " ", h->producer,
                         shard_header_has_stream(h) ? h->first_position + n : n);

        memset(payload + k, '.', sizeof(payload) - (size_t)k);
        len += shard_encode_record(buf + len, payload, sizeof(payload), 0);
        n++;
    } while (len + SHARD_RECORD_HEADER + 100 + SHARD_TRAILER_MIN <= (size_t)blocks * BLOCK &&
             len + SHARD_TRAILER_MIN <= (size_t)(blocks - 1) * BLOCK);
    /* Timestamps now that the count is known: a millisecond apart, the
     * last at newest_ns. */
    {
        size_t off = hdr;

        for (uint64_t i = 0; i < n; i++) {
            char payload[100];

            memcpy(payload, buf + off + SHARD_RECORD_HEADER, sizeof(payload));
            shard_encode_record(buf + off, payload, sizeof(payload),
                                newest_ns - (n - 1 - i) * 1000000u);
            off += SHARD_RECORD_HEADER + sizeof(payload);
        }
    }
    t.trailer_len = (uint32_t)shard_trailer_size(len, BLOCK);
    t.shard_len = len;
    t.records = n;
    t.newest_ns = newest_ns;
    shard_encode_trailer(buf + len, &t);
    len += t.trailer_len;
    assert_int_equal(len, (size_t)blocks * BLOCK);
    *ret_len = len;
    *ret_records = n;
    return buf;
}

/* A shard the test wrote: where it is and what it holds. */
struct shard {
    char name[SPOOL_NAME_SIZE];
    char *path;
    struct shard_header h;
    uint64_t records;
    uint64_t newest_ns;
    uint64_t bytes;
};

static void shard_free(struct shard *s)
{
    free(s->path);
    s->path = NULL;
}

/* Writes a sealed shard of producer into dir (done/, or elsewhere); with
 * stream (16 bytes) a version 3 shard of that stream from first. */
static struct shard add_shard(struct world *w, const char *dir, const char *producer,
                              const uint8_t *stream, uint64_t first, unsigned blocks,
                              uint64_t newest_ns)
{
    struct shard s = { 0 };
    unsigned char *buf;
    size_t len;

    /* The test's own uid: the daemon resumes a stream only for its owner. */
    s.h.uid = (uint32_t)getuid();
    s.h.gid = (uint32_t)getgid();
    s.h.pid = 4242;
    s.h.shard_id = w->next_id++;
    s.h.created_ns = newest_ns - 10 * SEC;
    s.h.producer_len = (size_t)snprintf(s.h.producer, sizeof(s.h.producer), "%s", producer);
    if (stream) {
        s.h.version = SHARD_FORMAT_VERSION_STREAM;
        memcpy(s.h.stream_id, stream, SHARD_STREAM_ID_SIZE);
        s.h.first_position = first;
    }
    buf = shard_bytes(&s.h, blocks, newest_ns, &len, &s.records);
    assert_int_equal(spool_name_format(SPOOL_SHARD, producer, strlen(producer), s.h.shard_id,
                                       s.name, sizeof(s.name)),
                     0);
    s.path = harness_path(dir, s.name);
    write_file(s.path, buf, len);
    free(buf);
    s.newest_ns = newest_ns;
    s.bytes = len;
    return s;
}

/* A merged file of blocks one-block shards, under merge's default name for
 * time ns, in dir. Returns its path. */
static char *add_merged(struct world *w, const char *dir, uint64_t ns, unsigned blocks)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / SEC), .tv_nsec = (long)(ns % SEC) };
    char name[SPOOL_MERGED_NAME_SIZE];
    struct shard_header h = { .uid = 1000, .gid = 1000, .pid = 1 };
    unsigned char *all = malloc((size_t)blocks * BLOCK);
    char *path;

    assert_non_null(all);
    assert_int_equal(spool_merged_name(&ts, 0, name, sizeof(name)), 0);
    h.producer_len = (size_t)snprintf(h.producer, sizeof(h.producer), "merged");
    for (unsigned i = 0; i < blocks; i++) {
        uint64_t records;
        size_t len;
        unsigned char *one;

        h.shard_id = w->next_id++;
        h.created_ns = ns - SEC;
        one = shard_bytes(&h, 1, ns - SEC, &len, &records);
        memcpy(all + (size_t)i * BLOCK, one, BLOCK);
        free(one);
    }
    path = harness_path(dir, name);
    write_file(path, all, (size_t)blocks * BLOCK);
    free(all);
    return path;
}

static void make_stream_id(uint8_t *id, unsigned seed)
{
    for (unsigned i = 0; i < SHARD_STREAM_ID_SIZE; i++)
        id[i] = (uint8_t)(seed * 37 + i * 11 + 3);
}

/* <spool>/ship/progress as logctl ship stores it after a commit. */
static void store_progress(struct world *w, struct positions_entry *v, size_t n)
{
    int fd = open(w->h.spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(ship_progress_store(fd, v, n), 0);
    close(fd);
}

/* A progress entry saying the shard s is shipped up to (not including)
 * position upto of its stream (its record index, without a stream). */
static struct positions_entry shipped_to(const struct shard *s, uint64_t upto)
{
    struct positions_entry e = { .next_position = upto, .newest_ns = s->newest_ns, .uid = 1000 };

    ship_stream_key(&s->h, e.stream_id);
    snprintf(e.producer, sizeof(e.producer), "%s", s->h.producer);
    return e;
}

static uint64_t shard_end(const struct shard *s)
{
    return ship_first_position(&s->h) + s->records;
}

/* ---- what the positions files and done/ know of each stream ---- */

struct known {
    uint8_t id[SHARD_STREAM_ID_SIZE];
    uint64_t next;
};

struct known_set {
    struct known v[256];
    size_t n;
};

static void know(struct known_set *k, const uint8_t *id, uint64_t next)
{
    for (size_t i = 0; i < k->n; i++) {
        if (memcmp(k->v[i].id, id, SHARD_STREAM_ID_SIZE) == 0) {
            if (next > k->v[i].next)
                k->v[i].next = next;
            return;
        }
    }
    assert_true(k->n < sizeof(k->v) / sizeof(k->v[0]));
    memcpy(k->v[k->n].id, id, SHARD_STREAM_ID_SIZE);
    k->v[k->n++].next = next;
}

static int know_entry(const struct positions_entry *e, void *arg)
{
    know(arg, e->stream_id, e->next_position);
    return 0;
}

/* The positions of streams/ alone (with_done false), or with what the
 * version 3 shards of done/ say, as the daemon rebuilds them at start. */
static void known_positions(const struct world *w, bool with_done, struct known_set *k)
{
    struct positions_load_report rep = { 0 };
    int fd = open(w->h.spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    k->n = 0;
    assert_true(fd >= 0);
    assert_int_equal(positions_load(fd, know_entry, k, &rep), 0);
    if (rep.n_bad)
        fail_msg("streams/%s: %s", rep.bad[0].name, rep.bad[0].why);
    positions_load_report_free(&rep);
    close(fd);
    if (with_done) {
        DIR *d = opendir(w->done);
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d))) {
            char *p;
            struct stat st;
            struct shard_header h;
            struct shard_trailer t;
            uint64_t start;
            int sfd;

            if (de->d_name[0] == '.')
                continue;
            p = harness_path(w->done, de->d_name);
            sfd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            if (sfd >= 0 && fstat(sfd, &st) == 0 && S_ISREG(st.st_mode) &&
                shard_locate_before(sfd, (uint64_t)st.st_size, &start, &h, &t) == 0 &&
                shard_header_has_stream(&h))
                know(k, h.stream_id, h.first_position + t.records);
            if (sfd >= 0)
                close(sfd);
            free(p);
        }
        closedir(d);
    }
}

static uint64_t known_next(const struct known_set *k, const uint8_t *id)
{
    for (size_t i = 0; i < k->n; i++)
        if (memcmp(k->v[i].id, id, SHARD_STREAM_ID_SIZE) == 0)
            return k->v[i].next;
    return 0;
}

/* ---- running logctl prune ---- */

static struct harness_run prune(struct world *w, const char *a1, const char *a2, const char *a3,
                                const char *a4, const char *a5, const char *a6)
{
    return harness_run_logctl(&w->h, "prune", "--config", w->h.config, "--spool", w->h.spool,
                              a1, a2, a3, a4, a5, a6, NULL);
}

/* The paths of the "removed" (or "would remove") lines, in order. */
static size_t removed_lines(const char *out, const char *verb, char ***ret)
{
    char **v = NULL;
    size_t n = 0, vl = strlen(verb);

    for (const char *p = out; p && *p;) {
        const char *nl = strchr(p, '\n');
        const char *end;

        if (strncmp(p, verb, vl) == 0 && p[vl] == ' ' && (end = strstr(p + vl + 1, " (")) &&
            (!nl || end < nl)) {
            v = realloc(v, (n + 1) * sizeof(*v));
            assert_non_null(v);
            v[n++] = strndup(p + vl + 1, (size_t)(end - p - vl - 1));
        }
        p = nl ? nl + 1 : NULL;
    }
    *ret = v;
    return n;
}

/* Checks that the removed lines name exactly want[0..n), in that order. */
static void expect_removed(const struct harness_run *r, const char *verb, char *const *want,
                           size_t n)
{
    char **got;
    size_t m = removed_lines(r->out, verb, &got);

    if (m != n)
        fail_msg("%zu files %s, expected %zu:\n%s", m, verb, n, r->out);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(got[i], want[i]) != 0)
            fail_msg("file %zu %s is %s, expected %s:\n%s", i, verb, got[i], want[i], r->out);
        free(got[i]);
    }
    free(got);
}

/* Fails unless the line of r's output that names path (with a space
 * after it) holds needle. */
static void line_has(const struct harness_run *r, const char *path, const char *needle)
{
    const char *p = r->out, *nl;
    size_t len = strlen(path);

    while ((p = strstr(p, path)) && p[len] != ' ')
        p += len;
    if (!p)
        fail_msg("%s is not in the output:\n%s", path, r->out);
    nl = strchr(p, '\n');
    if (!memmem(p, nl ? (size_t)(nl - p) : strlen(p), needle, strlen(needle)))
        fail_msg("the line of %s does not say \"%s\":\n%s", path, needle, r->out);
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    char *s;

    va_start(ap, f);
    assert_true(vasprintf(&s, f, ap) > 0);
    va_end(ap);
    return s;
}

/* ---- (a) merged files: age, then size, oldest first ---- */

static void test_merged_age_and_size(void **state)
{
    struct world *w = *state;
    static const uint64_t age[] = { 40 * DAY, 35 * DAY, 20 * DAY, 10 * DAY, 2 * DAY, HOUR };
    static const unsigned blocks[] = { 1, 2, 3, 4, 5, 6 };
    char *path[6], *archive = harness_path(w->h.dir, "archive"), *arch[3];
    char *limit = fmt("%u", 12 * BLOCK);
    struct harness_run r;

    for (size_t i = 0; i < 6; i++)
        path[i] = add_merged(w, w->merged, w->now - age[i], blocks[i]);
    /* The file says less; the options win, as for logctl ship. */
    harness_write_config(&w->h, "[retention]\nmerged_max_age = 1d\nmerged_max_bytes = 1G\n");

    /* 30 days: the two oldest by age; then 18 blocks over 12: the next two,
     * oldest first, leaving 11. */
    r = prune(w, "--merged-max-age", "30d", "--merged-max-bytes", limit, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune");
    expect_removed(&r, "removed", path, 4);
    line_has(&r, path[0], "(4096 bytes): age 40d");
    line_has(&r, path[1], "over merged_max_age 30d");
    line_has(&r, path[2], "(12288 bytes): size: merged files over "
                                            "merged_max_bytes 48 KiB");
    line_has(&r, path[3], "size:");
    harness_expect_in(r.out, "pruned 4 files, 40960 bytes", "the summary");
    harness_expect_in(r.out, "kept 2 merged files (44 KiB)", "what is kept");
    for (size_t i = 0; i < 6; i++)
        assert_int_equal(exists(path[i]), i >= 4);
    harness_run_free(&r);

    /* Again: nothing more to do, exit 0. */
    r = prune(w, "--merged-max-age", "30d", "--merged-max-bytes", limit, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune with nothing to do");
    harness_expect_in(r.out, "pruned 0 files", "the summary");
    harness_run_free(&r);

    /* The config file alone: 1 day takes the 2-day-old file. */
    r = prune(w, NULL, NULL, NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune by the config file");
    expect_removed(&r, "removed", &path[4], 1);
    assert_true(exists(path[5]));
    harness_run_free(&r);

    /* A merged directory elsewhere ([retention] merged_dir, --merged-dir):
     * there, and only there. */
    make_dir(archive);
    arch[0] = add_merged(w, archive, w->now - 90 * DAY, 1);
    arch[1] = add_merged(w, archive, w->now - 60 * DAY, 1);
    arch[2] = add_merged(w, archive, w->now - DAY, 1);
    r = prune(w, "--merged-dir", archive, "--merged-max-age", "30d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune --merged-dir");
    expect_removed(&r, "removed", arch, 2);
    assert_true(exists(arch[2]));
    assert_true(exists(path[5]));
    harness_run_free(&r);

    /* Bad values are usage errors naming the option. */
    r = prune(w, "--merged-max-age", "soon", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 2, "a bad duration");
    harness_expect_in(r.err, "--merged-max-age 'soon'", "the option named");
    harness_run_free(&r);
    r = prune(w, "--shipped-max-bytes", "-1", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 2, "a bad size");
    harness_run_free(&r);
    /* No limit at all: nothing to do, nothing opened. */
    harness_write_config(&w->h, "");
    r = prune(w, NULL, NULL, NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune without limits");
    harness_expect_in(r.out, "nothing to prune: no [retention] limit is set", "the note");
    assert_true(exists(path[5]));
    harness_run_free(&r);

    for (size_t i = 0; i < 6; i++)
        free(path[i]);
    for (size_t i = 0; i < 3; i++)
        free(arch[i]);
    free(archive);
    free(limit);
}

/* ---- (a), (d) shipped shards: shipped whole only, age then size ---- */

struct shipped_spool {
    struct shard a1, a2, a3, b1, b2, c1, l1, l2;
    uint8_t a[16], b[16], c[16];
    char *active, *quarantined;
};

/* Streams a (three shards, shipped), b (two, shipped), c (one, its last
 * record not shipped), l1 and l2 without a stream (l1 shipped, l2 not),
 * an active shard of a whose records the progress covers, and a file in
 * quarantine/. */
static void make_shipped_spool(struct world *w, struct shipped_spool *s)
{
    struct positions_entry p[5];
    struct shard act;

    make_stream_id(s->a, 1);
    make_stream_id(s->b, 2);
    make_stream_id(s->c, 3);
    s->a1 = add_shard(w, w->done, "app", s->a, 0, 1, w->now - 5 * DAY);
    s->a2 = add_shard(w, w->done, "app", s->a, shard_end(&s->a1), 1, w->now - 4 * DAY);
    s->a3 = add_shard(w, w->done, "app", s->a, shard_end(&s->a2), 1, w->now - HOUR);
    s->b1 = add_shard(w, w->done, "db.u0", s->b, 0, 2, w->now - 3 * DAY);
    s->b2 = add_shard(w, w->done, "db.u0", s->b, shard_end(&s->b1), 3, w->now - 2 * HOUR);
    s->c1 = add_shard(w, w->done, "cron", s->c, 0, 1, w->now - 7 * DAY);
    s->l1 = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 6 * DAY);
    s->l2 = add_shard(w, w->done, "legacy", NULL, 0, 1, w->now - 6 * DAY);
    act = add_shard(w, w->outside, "app", s->a, shard_end(&s->a3), 1, w->now - 9 * DAY);
    s->active = fmt("%s/app.%016" PRIx64 ".tmp", w->active, act.h.shard_id);
    assert_int_equal(rename(act.path, s->active), 0);
    s->quarantined = harness_path(w->quarantine, "app.0000000000000001.shard");
    write_file(s->quarantined, "damaged", 7);
    p[0] = shipped_to(&s->a3, shard_end(&s->a3) + act.records); /* the active one too */
    p[1] = shipped_to(&s->b2, shard_end(&s->b2));
    p[2] = shipped_to(&s->c1, shard_end(&s->c1) - 1);
    p[3] = shipped_to(&s->l1, s->l1.records);
    p[4] = shipped_to(&s->l2, s->l2.records - 1);
    store_progress(w, p, 5);
    shard_free(&act);
}

static void free_shipped_spool(struct shipped_spool *s)
{
    struct shard *all[] = { &s->a1, &s->a2, &s->a3, &s->b1, &s->b2, &s->c1, &s->l1, &s->l2 };

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        shard_free(all[i]);
    free(s->active);
    free(s->quarantined);
}

static void test_shipped_age_and_size(void **state)
{
    struct world *w = *state;
    struct shipped_spool s;
    struct known_set k;
    struct harness_run r;
    char *limit = fmt("%u", 3 * BLOCK);

    make_shipped_spool(w, &s);
    /* Shipped whole: l1 (6 d), a1 (5 d), a2 (4 d), b1 (3 d), b2 (2 h, 3
     * blocks), a3 (1 h). Past 2 days: the first four; then 4 blocks over
     * 3: b2, the older of the rest. */
    {
        char *want[] = { s.l1.path, s.a1.path, s.a2.path, s.b1.path, s.b2.path };

        r = prune(w, "--shipped-max-age", "2d", "--shipped-max-bytes", limit, NULL, NULL);
        harness_expect_code(&r, 0, "logctl prune of shipped shards");
        expect_removed(&r, "removed", want, 5);
    }
    line_has(&r, s.l1.path, "age 6d");
    line_has(&r, s.b1.path, "over shipped_max_age 2d");
    line_has(&r, s.b2.path, "size: shipped shards over shipped_max_bytes");
    harness_expect_in(r.out, "kept 1 shipped shard (4.0 KiB) and 2 not yet shipped whole",
                      "what is kept");
    harness_run_free(&r);
    assert_false(exists(s.l1.path));
    assert_false(exists(s.a1.path));
    assert_false(exists(s.a2.path));
    assert_false(exists(s.b1.path));
    assert_false(exists(s.b2.path));
    assert_true(exists(s.a3.path));
    assert_true(exists(s.c1.path)); /* old, but its last record is not shipped */
    assert_true(exists(s.l2.path));
    assert_true(exists(s.active));  /* shipped, old, but active */
    assert_true(exists(s.quarantined));

    /* Where the removed streams stopped is in streams/: a at a2's end (a3
     * is still in done/), b at its end; c was not touched. */
    known_positions(w, false, &k);
    assert_int_equal(k.n, 2);
    assert_int_equal(known_next(&k, s.a), shard_end(&s.a2));
    assert_int_equal(known_next(&k, s.b), shard_end(&s.b2));
    assert_int_equal(harness_count_files(&w->h, "streams", ".pos"), 1);
    free_shipped_spool(&s);
    free(limit);
}

/* Without ship/progress the spool is not shipped: done/ is merge's alone. */
static void test_not_shipped_untouched(void **state)
{
    struct world *w = *state;
    struct shard old = add_shard(w, w->done, "app", NULL, 0, 2, w->now - 30 * DAY);
    uint8_t id[16];
    struct shard old3;
    struct harness_run r;
    char *ship = harness_path(w->h.spool, "ship");

    make_stream_id(id, 9);
    old3 = add_shard(w, w->done, "app", id, 0, 1, w->now - 30 * DAY);
    for (int pass = 0; pass < 2; pass++) {
        /* The second time ship/ exists (a shipper that never committed). */
        r = prune(w, "--shipped-max-age", "1s", "--shipped-max-bytes", "1", NULL, NULL);
        harness_expect_code(&r, 0, "logctl prune on a spool not shipped");
        harness_expect_in(r.out, "ship/progress does not exist: the spool is not shipped",
                          "the note");
        harness_expect_in(r.out, "pruned 0 files", "the summary");
        harness_run_free(&r);
        assert_true(exists(old.path));
        assert_true(exists(old3.path));
        assert_false(exists(w->streams));
        make_dir(ship);
    }
    shard_free(&old);
    shard_free(&old3);
    free(ship);
}

/* ---- (b) --dry-run ---- */

static void test_dry_run(void **state)
{
    struct world *w = *state;
    struct shipped_spool s;
    char *m_old = add_merged(w, w->merged, w->now - 50 * DAY, 1);
    char *m_new = add_merged(w, w->merged, w->now - DAY, 1);
    char *want[5];
    char *lock = harness_path(w->h.spool, "merge.lock");
    struct json_value *v = NULL;
    const struct json_value *removed;
    const char *why = NULL;
    struct harness_run r;

    make_shipped_spool(w, &s);
    want[0] = m_old;
    want[1] = s.l1.path;
    want[2] = s.a1.path;
    want[3] = s.a2.path;
    want[4] = s.b1.path;
    r = prune(w, "--dry-run", "--merged-max-age", "30d", "--shipped-max-age", "2d", NULL);
    harness_expect_code(&r, 0, "logctl prune --dry-run");
    expect_removed(&r, "would remove", want, 5);
    harness_expect_in(r.out, "prune --dry-run: would remove 5 files", "the summary");
    harness_expect_in(r.out, "nothing was removed", "the summary");
    harness_run_free(&r);
    /* Nothing removed, nothing written: no positions, not even the lock. */
    assert_true(exists(m_old) && exists(m_new));
    for (size_t i = 1; i < 5; i++)
        assert_true(exists(want[i]));
    assert_false(exists(w->streams));
    assert_false(exists(lock));

    r = prune(w, "--dry-run", "--json", "--merged-max-age", "30d", "--shipped-max-age", "2d");
    harness_expect_code(&r, 0, "logctl prune --dry-run --json");
    assert_int_equal(json_parse(r.out, r.out_len, &v, &why, NULL), 0);
    assert_true(json_get_bool(v, "ok", false));
    assert_true(json_get_bool(v, "dry_run", false));
    assert_true(json_get_bool(v, "shipping", false));
    removed = json_get(v, "removed");
    assert_non_null(removed);
    assert_int_equal(removed->type, JSON_ARRAY);
    assert_int_equal(removed->n, 5);
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(json_get_str(&removed->items[i], "path", ""), want[i]);
        assert_string_equal(json_get_str(&removed->items[i], "reason", ""), "age");
        assert_string_equal(json_get_str(&removed->items[i], "kind", ""),
                            i == 0 ? "merged" : "shipped");
        assert_int_equal(json_get_u64(&removed->items[i], "bytes", 0), size_of(want[i]));
    }
    assert_int_equal(json_get_u64(json_get(v, "kept"), "not_shipped", 99), 2);
    json_value_free(v);
    harness_run_free(&r);
    assert_true(exists(m_old));
    assert_false(exists(w->streams));

    /* The real run removes what the dry run named. */
    r = prune(w, "--merged-max-age", "30d", "--shipped-max-age", "2d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune after the dry run");
    expect_removed(&r, "removed", want, 5);
    harness_run_free(&r);
    for (size_t i = 0; i < 5; i++)
        assert_false(exists(want[i]));
    assert_true(exists(m_new));
    assert_true(exists(lock));
    free_shipped_spool(&s);
    free(m_old);
    free(m_new);
    free(lock);
}

/* ---- (c) symbolic links and other names ---- */

static char *make_link(const char *target, const char *dir, const char *name)
{
    char *p = harness_path(dir, name);

    assert_int_equal(symlink(target, p), 0);
    return p;
}

static void test_symlinks(void **state)
{
    struct world *w = *state;
    /* Outside the spool: a file with a merged file's name, a directory, and
     * a sealed shard that the progress says is shipped. */
    char *target = add_merged(w, w->outside, w->now - 400 * DAY, 1);
    char *target_dir = harness_path(w->outside, "olddir");
    char *target_in_dir = harness_path(target_dir, "precious");
    struct shard victim = add_shard(w, w->outside, "evil", NULL, 0, 1, w->now - 400 * DAY);
    char *link1, *link2, *link3, *subdir, *in_subdir, *other, *temp, *badname, *real;
    char *mlink = harness_path(w->h.dir, "merged-link");
    char *slink = harness_path(w->h.dir, "spool-link");
    struct positions_entry p = shipped_to(&victim, victim.records);
    unsigned char *before;
    size_t before_len, after_len;
    unsigned char *after;
    struct harness_run r;

    make_dir(target_dir);
    write_file(target_in_dir, "keep me", 7);
    before = (unsigned char *)harness_slurp(target, &before_len);
    link1 = make_link(target, w->merged, "merged-20000101T000000.000000000Z.lsm");
    link2 = make_link(target_dir, w->merged, "merged-20000102T000000.000000000Z.lsm");
    link3 = make_link(victim.path, w->done, victim.name);
    subdir = harness_path(w->merged, "merged-20000103T000000.000000000Z.lsm");
    make_dir(subdir);
    in_subdir = harness_path(subdir, "inside");
    write_file(in_subdir, "x", 1);
    other = add_merged(w, w->outside, w->now - 300 * DAY, 1);
    {
        /* Not merge's names: kept whatever their age. */
        char *o = harness_path(w->merged, "yesterday.lsm");

        assert_int_equal(rename(other, o), 0);
        free(other);
        other = o;
    }
    temp = harness_path(w->merged, ".merged-20000104T000000.000000000Z.lsm.4242.tmp");
    write_file(temp, "partial", 7);
    badname = harness_path(w->merged, "merged-2000.lsm");
    write_file(badname, "x", 1);
    real = add_merged(w, w->merged, w->now - 200 * DAY, 1);
    store_progress(w, &p, 1);

    r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune among symbolic links");
    expect_removed(&r, "removed", &real, 1);
    harness_expect_in(r.err, "merged-20000101T000000.000000000Z.lsm: a symbolic link, not a "
                             "merged file; left alone",
                      "the note on the link");
    harness_expect_in(r.err, "merged-20000103T000000.000000000Z.lsm: a directory",
                      "the note on the directory");
    harness_expect_in(r.err, "a symbolic link, not a sealed shard; left alone",
                      "the note on the link in done/");
    harness_run_free(&r);
    assert_false(exists(real));
    assert_true(exists(link1) && exists(link2) && exists(link3));
    assert_true(exists(target) && exists(target_dir) && exists(target_in_dir));
    assert_true(exists(victim.path));
    assert_true(exists(subdir) && exists(in_subdir));
    assert_true(exists(other) && exists(temp) && exists(badname));
    after = (unsigned char *)harness_slurp(target, &after_len);
    assert_int_equal(after_len, before_len);
    assert_memory_equal(after, before, before_len);
    free(after);

    /* A symbolic link as the merged directory is refused, its target left. */
    assert_int_equal(symlink(w->outside, mlink), 0);
    r = prune(w, "--merged-dir", mlink, "--merged-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 1, "logctl prune with a symbolic link as merged_dir");
    harness_expect_in(r.err, mlink, "the error names the directory");
    harness_expect_in(r.err, "a symbolic link; logctl prune follows none", "and says why");
    harness_run_free(&r);
    assert_true(exists(target));
    /* ... and so is one as the spool. */
    assert_int_equal(symlink(w->h.spool, slink), 0);
    r = harness_run_logctl(&w->h, "prune", "--config", w->h.config, "--spool", slink,
                           "--merged-max-age", "1d", NULL);
    harness_expect_code(&r, 1, "logctl prune with a symbolic link as the spool");
    harness_expect_in(r.err, "a symbolic link; logctl prune follows none", "the error");
    harness_run_free(&r);
    /* ... and one as done/: the merged part goes on, done/ is not read. */
    {
        char *done_real = harness_path(w->h.dir, "done-real");

        assert_int_equal(rename(w->done, done_real), 0);
        assert_int_equal(symlink(w->outside, w->done), 0);
        r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
        harness_expect_code(&r, 1, "logctl prune with a symbolic link as done/");
        harness_expect_in(r.err, "done: a symbolic link", "the error");
        harness_run_free(&r);
        assert_true(exists(victim.path));
        assert_int_equal(unlink(w->done), 0);
        assert_int_equal(rename(done_real, w->done), 0);
        free(done_real);
    }
    assert_true(exists(target) && exists(target_in_dir) && exists(link1));

    free(before);
    free(target);
    free(target_dir);
    free(target_in_dir);
    shard_free(&victim);
    free(link1);
    free(link2);
    free(link3);
    free(subdir);
    free(in_subdir);
    free(other);
    free(temp);
    free(badname);
    free(real);
    free(mlink);
    free(slink);
}

/* ---- merge.lock held, and an interrupted merge ---- */

static void crash_at_first_delete(enum merge_step step, void *userdata)
{
    (void)userdata;
    if (step == MERGE_STEP_SOURCE_DELETED)
        _exit(0); /* as kill -9 here would */
}

static void test_lock_and_pending_merge(void **state)
{
    struct world *w = *state;
    char *lock = harness_path(w->h.spool, "merge.lock");
    char *old = add_merged(w, w->merged, w->now - 100 * DAY, 1);
    struct timespec out_ts = { .tv_sec = (time_t)((w->now - 90 * DAY) / SEC) };
    char out_name[SPOOL_MERGED_NAME_SIZE], *out;
    struct shard src[4];
    struct positions_entry p[4];
    struct harness_run r;
    size_t left = 0;
    pid_t pid;
    int fd, status;

    /* Held by someone else: exit 3, nothing touched. */
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX), 0);
    r = prune(w, "--merged-max-age", "1d", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 3, "logctl prune while merge.lock is held");
    harness_expect_in(r.err, lock, "the message names the lock");
    harness_expect_in(r.err, "nothing was removed", "and says what happened");
    harness_run_free(&r);
    assert_true(exists(old));
    assert_int_equal(close(fd), 0);

    /* A merge --delete killed after its first deletion: its output (with a
     * default name, 90 days old) and its remaining sources (shipped, old)
     * stay for the next merge, which then finishes. */
    for (unsigned i = 0; i < 4; i++) {
        src[i] = add_shard(w, w->done, "batch", NULL, 0, 1, w->now - 80 * DAY);
        p[i] = shipped_to(&src[i], src[i].records);
    }
    store_progress(w, p, 4);
    assert_int_equal(spool_merged_name(&out_ts, 0, out_name, sizeof(out_name)), 0);
    out = harness_path(w->merged, out_name);
    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct merge_opts o = { .spool = w->h.spool, .output = out, .delete_sources = true,
                                .at_step = crash_at_first_delete };
        struct merge_result res;

        (void)merge_run(&o, &res);
        _exit(3);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (unsigned i = 0; i < 4; i++)
        left += exists(src[i].path);
    assert_int_equal(left, 3);
    assert_true(exists(out));

    r = prune(w, "--merged-max-age", "1d", "--shipped-max-age", "1d", NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune beside an interrupted merge");
    expect_removed(&r, "removed", &old, 1);
    harness_expect_in(r.err, "the output of an interrupted merge", "the note on the output");
    harness_expect_in(r.err, "a source of an interrupted merge", "the note on a source");
    harness_expect_in(r.out, "kept 4 files an interrupted merge needs", "the summary");
    harness_run_free(&r);
    assert_true(exists(out));
    left = 0;
    for (unsigned i = 0; i < 4; i++)
        left += exists(src[i].path);
    assert_int_equal(left, 3);

    r = harness_run_logctl(&w->h, "merge", "--spool", w->h.spool, NULL);
    harness_expect_code(&r, 0, "logctl merge after prune");
    harness_expect_in(r.out, "finished an interrupted merge: removed 3 merged sources",
                      "the recovery");
    harness_run_free(&r);
    /* Now the output is an old merged file like any other. */
    r = prune(w, "--merged-max-age", "1d", NULL, NULL, NULL, NULL);
    harness_expect_code(&r, 0, "logctl prune after the merge");
    expect_removed(&r, "removed", &out, 1);
    harness_run_free(&r);

    for (unsigned i = 0; i < 4; i++)
        shard_free(&src[i]);
    free(out);
    free(old);
    free(lock);
}

/* ---- (d) the real daemon: streams pruned once shipped, then resumed ---- */

struct raw {
    int fd;
    unsigned char buf[65536];
    size_t have;
    struct wire_welcome welcome;
    uint64_t acked;
    uint32_t error;
    bool eof;
};

static void raw_pump(struct raw *c, int timeout_ms)
{
    struct pollfd p = { .fd = c->fd, .events = POLLIN };
    ssize_t n;

    if (poll(&p, 1, timeout_ms) <= 0)
        return;
    n = recv(c->fd, c->buf + c->have, sizeof(c->buf) - c->have, MSG_DONTWAIT);
    if (n <= 0) {
        c->eof = true;
        return;
    }
    c->have += (size_t)n;
    while (c->have >= WIRE_HEADER_SIZE) {
        struct wire_header h;
        const unsigned char *pl = c->buf + WIRE_HEADER_SIZE;

        assert_int_equal(wire_decode_header(c->buf, sizeof(c->buf), &h), 0);
        if (c->have < WIRE_HEADER_SIZE + h.length)
            break;
        if (h.type == WIRE_WELCOME) {
            assert_int_equal(wire_decode_welcome(pl, h.length, &c->welcome), 0);
        } else if (h.type == WIRE_ACK) {
            assert_int_equal(wire_decode_ack(pl, h.length, &c->acked), 0);
        } else if (h.type == WIRE_ERROR) {
            const char *m;
            size_t ml;

            assert_int_equal(wire_decode_error(pl, h.length, &c->error, &m, &ml), 0);
        }
        memmove(c->buf, c->buf + WIRE_HEADER_SIZE + h.length,
                c->have - WIRE_HEADER_SIZE - h.length);
        c->have -= WIRE_HEADER_SIZE + h.length;
    }
}

/* Connects with a version 2 HELLO for stream id from first and waits for
 * the WELCOME. */
static void raw_open(struct raw *c, struct world *w, const char *name, const uint8_t *id,
                     uint64_t first)
{
    unsigned char frame[WIRE_HEADER_SIZE + WIRE_HELLO_FIXED_V2 + WIRE_PRODUCER_NAME_MAX];
    uint64_t end = now_monotonic_ns() + (uint64_t)WAIT_MS * 1000000u;
    int n;

    memset(c, 0, sizeof(*c));
    c->fd = harness_raw_connect(w->h.sock);
    n = wire_encode_hello_v2(frame, name, strlen(name), id, first);
    assert_true(n > 0);
    harness_raw_send(c->fd, frame, (size_t)n);
    while (c->welcome.version == 0 && !c->error && !c->eof) {
        if (now_monotonic_ns() >= end)
            fail_msg("no WELCOME within %d ms", WAIT_MS);
        raw_pump(c, 100);
    }
    if (c->error || c->eof)
        fail_msg("the daemon refused stream %s from %" PRIu64 " (error %u)", name, first,
                 c->error);
}

/* Sends records first .. first + n - 1 ("<name> <position>") and waits for
 * their ACK. */
static void raw_append(struct raw *c, const char *name, uint64_t first, uint64_t n)
{
    size_t cap = WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED + n * 80;
    size_t pos = WIRE_HEADER_SIZE + WIRE_APPEND_POSITION + WIRE_APPEND_FIXED;
    unsigned char *f = malloc(cap);
    uint64_t end = now_monotonic_ns() + (uint64_t)WAIT_MS * 1000000u;

    assert_non_null(f);
    wire_put_u64(f + WIRE_HEADER_SIZE, first);
    wire_put_u32(f + WIRE_HEADER_SIZE + WIRE_APPEND_POSITION, (uint32_t)n);
    for (uint64_t i = 0; i < n; i++) {
        char rec[64];
        int len = snprintf(rec, sizeof(rec), "%s %06" PRIu64, name, first + i);

        wire_put_u32(f + pos, (uint32_t)len);
        memcpy(f + pos + 4, rec, (size_t)len);
        pos += 4 + (size_t)len;
    }
    wire_encode_header(f, WIRE_APPEND, (uint32_t)(pos - WIRE_HEADER_SIZE));
    harness_raw_send(c->fd, f, pos);
    free(f);
    while (c->acked < first + n) {
        if (c->error || c->eof)
            fail_msg("%s: the connection ended (error %u) at ACK %" PRIu64, name, c->error,
                     c->acked);
        if (now_monotonic_ns() >= end)
            fail_msg("%s: ACK %" PRIu64 " after %d ms, waiting for %" PRIu64, name, c->acked,
                     WAIT_MS, first + n);
        raw_pump(c, 100);
    }
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
    struct raw c;

    raw_open(&c, w, name, id, first);
    assert_int_equal(c.welcome.next_position, first);
    raw_append(&c, name, first, n);
    close(c.fd);
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
    struct raw live, back;

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
    close(live.fd);
    wait_count(w, "done", ".shard", 3);
    harness_assert_clean_exit(harness_stop(&w->h, SIGTERM, WAIT_MS));

    /* After a restart, alpha (no shard left) and beta resume where they
     * stopped: the daemon read streams/ and done/. */
    harness_start(&w->h, NULL);
    raw_open(&back, w, "alpha", s1, 60);
    assert_int_equal(back.welcome.next_position, 60);
    raw_append(&back, "alpha", 60, 5);
    close(back.fd);
    raw_open(&back, w, "beta", s2, 40);
    assert_int_equal(back.welcome.next_position, 40);
    close(back.fd);
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

/* ---- (e) killed at random moments, run again ---- */

struct child {
    pid_t pid;
    int pidfd;
};

static struct child spawn_prune(struct world *w, const char *out_path)
{
    const char *argv[] = { harness_logctl(), "prune", "--config", w->h.config, "--spool",
                           w->h.spool, NULL };
    struct child c;

    fflush(NULL);
    c.pid = fork();
    assert_true(c.pid >= 0);
    if (c.pid == 0) {
        int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0 || process_reset_signals() < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
    assert_true(c.pidfd >= 0);
    return c;
}

static int reap(struct child *c)
{
    struct pollfd p = { .fd = c->pidfd, .events = POLLIN };
    int status, r;

    do
        r = poll(&p, 1, RUN_TIMEOUT_MS);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        (void)kill(c->pid, SIGKILL);
        fail_msg("logctl prune (pid %ld) did not end within %d ms", (long)c->pid,
                 RUN_TIMEOUT_MS);
    }
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    close(c->pidfd);
    return status;
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
static bool wait_trigger(const struct watch *wt, const struct child *c, enum trigger t,
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
        struct child c;
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
        (void)kill(c.pid, SIGKILL);
        status = reap(&c);
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
        struct raw c;

        /* Round 0's stream 0: every shard pruned in the first round. */
        raw_open(&c, w, "r00.s0", l.streams[0], l.ends[0]);
        assert_int_equal(c.welcome.next_position, l.ends[0]);
        raw_append(&c, "r00.s0", l.ends[0], 3);
        close(c.fd);
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
        cmocka_unit_test_setup_teardown(test_merged_age_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shipped_age_and_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_shipped_untouched, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lock_and_pending_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shipped_with_daemon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kill_rounds, setup, teardown),
    };

    if (getenv("LOGSHARD_TEST_FILTER"))
        cmocka_set_test_filter(getenv("LOGSHARD_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
