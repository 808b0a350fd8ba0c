/* The fixtures of the logctl prune tests, in one place so that every
 * tests/test-prune*.c program builds its spool and runs logctl prune the
 * same way; prune-fixture.h says what each one does. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "harness.h"
#include "shard_format.h"
#include "ship_progress.h"
#include "spool_names.h"
#include "stream_positions.h"

#include "prune-fixture.h"

/* ---- the spool ---- */

void make_dir(const char *path)
{
    if (mkdir(path, 0750) < 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", path, strerror(errno));
}

int setup(void **state)
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

int teardown(void **state)
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

bool exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

void write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    if (fd < 0)
        fail_msg("create %s: %s", path, strerror(errno));
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
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

void shard_free(struct shard *s)
{
    free(s->path);
    s->path = NULL;
}

struct shard add_shard(struct world *w, const char *dir, const char *producer,
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

char *add_merged(struct world *w, const char *dir, uint64_t ns, unsigned blocks)
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

void make_stream_id(uint8_t *id, unsigned seed)
{
    for (unsigned i = 0; i < SHARD_STREAM_ID_SIZE; i++)
        id[i] = (uint8_t)(seed * 37 + i * 11 + 3);
}

void store_progress(struct world *w, struct positions_entry *v, size_t n)
{
    int fd = open(w->h.spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(ship_progress_store(fd, v, n), 0);
    close(fd);
}

struct positions_entry shipped_to(const struct shard *s, uint64_t upto)
{
    struct positions_entry e = { .next_position = upto, .newest_ns = s->newest_ns, .uid = 1000 };

    ship_stream_key(&s->h, e.stream_id);
    snprintf(e.producer, sizeof(e.producer), "%s", s->h.producer);
    return e;
}

uint64_t shard_end(const struct shard *s)
{
    return ship_first_position(&s->h) + s->records;
}

/* ---- what the positions files and done/ know of each stream ---- */

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

void known_positions(const struct world *w, bool with_done, struct known_set *k)
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

uint64_t known_next(const struct known_set *k, const uint8_t *id)
{
    for (size_t i = 0; i < k->n; i++)
        if (memcmp(k->v[i].id, id, SHARD_STREAM_ID_SIZE) == 0)
            return k->v[i].next;
    return 0;
}

/* ---- running logctl prune ---- */

struct harness_run prune(struct world *w, const char *a1, const char *a2, const char *a3,
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

void expect_removed(const struct harness_run *r, const char *verb, char *const *want,
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

void line_has(const struct harness_run *r, const char *path, const char *needle)
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

char *fmt(const char *f, ...)
{
    va_list ap;
    char *s;

    va_start(ap, f);
    assert_true(vasprintf(&s, f, ap) > 0);
    va_end(ap);
    return s;
}
