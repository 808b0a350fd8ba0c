/* logctl cat, verify, ls and cat --follow on damaged files and on files
 * that are not regular files, run as the real logctl program on real files
 * (built with the shard encoders, no daemon needed):
 *  - a merged file of three producers' shards with the first one damaged
 *    (a flipped byte, a bogus length): every record of the other shards is
 *    still printed, filters still work after the damage, the skip is named
 *    on stderr, and the exit status is 1;
 *  - FIFOs in done/, in active/ and given by name: every command returns
 *    (each run has a deadline), names the FIFO, prints the other records
 *    and exits 1;
 *  - cat --follow past a damaged record and a FIFO in active/. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "harness.h"
#include "json.h"
#include "shard_format.h"

#define PER_SHARD 500
#define ALIGN 4096

/* ---- shards built with the encoders ---- */

/* Receive time of record i of shard s: whole seconds from @1800000000, so
 * --since "@..." can select them. */
static uint64_t ts_of(unsigned s, unsigned i)
{
    return (1800000000ull + s * 1000ull + i) * 1000000000ull;
}

static size_t put_header(struct bytebuf *b, const char *producer, uint64_t id)
{
    struct shard_header h;
    size_t off = b->len;

    memset(&h, 0, sizeof(h));
    h.uid = 1000;
    h.gid = 1000;
    h.pid = 4242;
    h.shard_id = id;
    h.created_ns = ts_of(0, 0);
    h.producer_len = strlen(producer);
    memcpy(h.producer, producer, h.producer_len + 1);
    shard_encode_header(bytebuf_grow(b, shard_header_size(h.producer_len)), &h);
    return off;
}

static size_t put_record(struct bytebuf *b, const char *text, uint64_t ts)
{
    size_t off = b->len, len = strlen(text);

    shard_encode_record(bytebuf_grow(b, SHARD_RECORD_HEADER + len), text, (uint32_t)len, ts);
    return off;
}

static void put_trailer(struct bytebuf *b, size_t shard_start, uint64_t records, uint64_t newest)
{
    struct shard_trailer t = {
        .shard_len = b->len - shard_start,
        .records = records,
        .newest_ns = newest,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(t.shard_len, ALIGN);
    shard_encode_trailer(bytebuf_grow(b, t.trailer_len), &t);
}

/* A sealed shard of n records "<producer> NNNN" (shard index s for the
 * times); the offset of each record goes to rec_off when not NULL. */
static size_t put_shard(struct bytebuf *b, const char *producer, unsigned s, unsigned n,
                        size_t *rec_off)
{
    size_t start = put_header(b, producer, s + 1);

    for (unsigned i = 0; i < n; i++) {
        char text[80];
        size_t off;

        snprintf(text, sizeof(text), "%s %04u", producer, i);
        off = put_record(b, text, ts_of(s, i));
        if (rec_off)
            rec_off[i] = off;
    }
    put_trailer(b, start, n, ts_of(s, n - 1));
    return start;
}

static void write_file(const char *path, const void *p, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

static void append_file(const char *path, const void *p, size_t len)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
}

/* ---- running logctl ---- */

static size_t count_lines(const char *text, const char *prefix)
{
    size_t n = 0, pl = strlen(prefix);

    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');

        if (strncmp(p, prefix, pl) == 0)
            n++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return n;
}

/* Every record "<producer> NNNN" for i in [from, to) is a line of text. */
static void expect_records(const char *text, const char *producer, unsigned from, unsigned to,
                           const char *what)
{
    for (unsigned i = from; i < to; i++) {
        char line[80];

        snprintf(line, sizeof(line), "%s %04u\n", producer, i);
        if (!strstr(text, line))
            fail_msg("%s: record \"%s %04u\" missing", what, producer, i);
    }
}

/* ---- the reproduction: three producers merged, one damaged ---- */

struct merged {
    struct bytebuf b;
    size_t start[3];
    size_t rec[3][PER_SHARD];
};

static void build_merged(struct merged *m)
{
    static const char *const names[] = { "bada", "goodb", "goodc" };

    memset(m, 0, sizeof(*m));
    for (unsigned s = 0; s < 3; s++)
        m->start[s] = put_shard(&m->b, names[s], s, PER_SHARD, m->rec[s]);
}

static void test_flipped_byte(void **state)
{
    struct harness *h = *state;
    struct merged m;
    char *file = harness_path(h->dir, "merged.lsm");
    char want[160];
    struct harness_run r;

    build_merged(&m);
    m.b.p[m.rec[0][100] + SHARD_RECORD_HEADER + 2] ^= 0x04; /* "bada 0100" */
    write_file(file, m.b.p, m.b.len);

    r = harness_run_logctl(h, "cat", file, NULL);
    harness_expect_code(&r, 1, "cat of a merged file with a flipped byte");
    assert_int_equal(count_lines(r.out, ""), 3 * PER_SHARD - 1);
    expect_records(r.out, "bada", 0, 100, "cat");
    expect_records(r.out, "bada", 101, PER_SHARD, "cat");
    expect_records(r.out, "goodb", 0, PER_SHARD, "cat");
    expect_records(r.out, "goodc", 0, PER_SHARD, "cat");
    assert_null(strstr(r.out, "bada 0100"));
    snprintf(want, sizeof(want),
             "%s: record CRC mismatch at offset %zu: skipped that record (25 bytes) of shard "
             "bada.0000000000000001",
             file, m.rec[0][100]);
    harness_expect_in(r.err, want, "cat's skip report");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", file, NULL);
    harness_expect_code(&r, 1, "verify of a merged file with a flipped byte");
    harness_expect_in(r.out, "CORRUPT", "verify");
    harness_expect_in(r.out, "1499 records readable in 3 shards, 25 bytes skipped in 1 place",
              "verify");
    harness_expect_in(r.out, want + strlen(file) + 2, "verify");
    harness_run_free(&r);
    free(m.b.p);
    free(file);
}

static void test_bogus_length(void **state)
{
    struct harness *h = *state;
    static const uint32_t lengths[] = { 0, 7, 4000, 1u << 20, SHARD_RECORD_MAX + 1, UINT32_MAX };
    struct merged m;
    char *file = harness_path(h->dir, "merged.lsm");

    build_merged(&m);
    for (size_t k = 0; k < sizeof(lengths) / sizeof(lengths[0]); k++) {
        uint32_t len = lengths[k];
        unsigned char saved[4];
        char what[64], want[200];
        struct harness_run r;

        snprintf(what, sizeof(what), "record length %" PRIu32, len);
        memcpy(saved, m.b.p + m.rec[0][100], 4);
        wire_put_u32(m.b.p + m.rec[0][100], len);
        write_file(file, m.b.p, m.b.len);
        memcpy(m.b.p + m.rec[0][100], saved, 4);

        /* The issue: goodc's records, in a later shard, were all lost.
         * The damaged shard is another producer's: found from the
         * trailers, it is not read at all for --producer goodc. */
        r = harness_run_logctl(h, "cat", "--producer", "goodc", file, NULL);
        harness_expect_code(&r, 0, what);
        assert_int_equal(count_lines(r.out, "goodc "), PER_SHARD);
        assert_int_equal(count_lines(r.out, ""), PER_SHARD);
        expect_records(r.out, "goodc", 0, PER_SHARD, what);
        assert_true(r.err == NULL || r.err[0] == '\0');
        harness_run_free(&r);

        /* Every record but the damaged shard's rest. */
        snprintf(want, sizeof(want),
                 "at offset %zu: skipped %zu bytes of shard bada.0000000000000001, up to the "
                 "next shard header at offset %zu",
                 m.rec[0][100], m.start[1] - m.rec[0][100], m.start[1]);
        r = harness_run_logctl(h, "cat", file, NULL);
        harness_expect_code(&r, 1, what);
        harness_expect_in(r.err, want, what);
        assert_int_equal(count_lines(r.out, ""), 100 + 2 * PER_SHARD);
        expect_records(r.out, "bada", 0, 100, what);
        expect_records(r.out, "goodb", 0, PER_SHARD, what);
        harness_run_free(&r);

        /* Filters work on what follows the damage; the damaged shard's
         * newest record is before --since, so it is not read. */
        r = harness_run_logctl(h, "cat", "--since", "@1800002250", "--json", file, NULL);
        harness_expect_code(&r, 0, what);
        assert_int_equal(count_lines(r.out, "{\"producer\":\"goodc\""), 250);
        assert_int_equal(count_lines(r.out, ""), 250); /* skips are not on stdout */
        harness_run_free(&r);

        r = harness_run_logctl(h, "verify", "--json", file, NULL);
        harness_expect_code(&r, 1, what);
        {
            struct json_value *v = NULL;
            const char *why = NULL;
            size_t off = 0;

            if (json_parse(r.out, r.out_len, &v, &why, &off) < 0)
                fail_msg("%s: verify --json: not JSON: %s", what, r.out);
            assert_string_equal(json_get_str(v, "verdict", ""), "corrupt");
            assert_true(json_get_u64(v, "records", 0) == 100 + 2 * PER_SHARD);
            assert_true(json_get_u64(v, "shards", 0) == 3);
            assert_true(json_get_u64(v, "offset", 0) == m.rec[0][100]);
            assert_true(json_get_u64(v, "skipped_bytes", 0) == m.start[1] - m.rec[0][100]);
            json_value_free(v);
        }
        harness_run_free(&r);
    }
    free(m.b.p);
    free(file);
}

/* ---- FIFOs ---- */

static char *make_spool(struct harness *h)
{
    char *done = harness_path(h->spool, "done");
    char *active = harness_path(h->spool, "active");

    assert_int_equal(mkdir(h->spool, 0755), 0);
    assert_int_equal(mkdir(done, 0755), 0);
    assert_int_equal(mkdir(active, 0755), 0);
    free(done);
    return active;
}

static void test_fifos(void **state)
{
    struct harness *h = *state;
    char *active = make_spool(h);
    char *done_shard = harness_path(h->spool, "done/alpha.0000000000000001.shard");
    char *done_fifo = harness_path(h->spool, "done/fifo.0000000000000003.shard");
    char *active_shard = harness_path(active, "beta.0000000000000002.tmp");
    char *active_fifo = harness_path(active, "fifo.0000000000000004.tmp");
    struct bytebuf b = { 0 };
    struct harness_run r;
    size_t start;

    put_shard(&b, "alpha", 0, 3, NULL);
    write_file(done_shard, b.p, b.len);
    b.len = 0;
    start = put_header(&b, "beta", 2);
    (void)start;
    put_record(&b, "beta 0000", ts_of(1, 0));
    put_record(&b, "beta 0001", ts_of(1, 1));
    put_record(&b, "beta 0002", ts_of(1, 2));
    write_file(active_shard, b.p, b.len - 5); /* the last record is being written */
    assert_int_equal(mkfifo(done_fifo, 0644), 0);
    assert_int_equal(mkfifo(active_fifo, 0644), 0);

    r = harness_run_logctl(h, "cat", "--spool", h->spool, NULL);
    harness_expect_code(&r, 1, "cat --spool with FIFOs in done/ and active/");
    expect_records(r.out, "alpha", 0, 3, "cat --spool");
    expect_records(r.out, "beta", 0, 2, "cat --spool");
    assert_int_equal(count_lines(r.out, ""), 5);
    harness_expect_in(r.err, "done/fifo.0000000000000003.shard: not a regular file (FIFO), skipped",
              "cat --spool");
    harness_expect_in(r.err, "active/fifo.0000000000000004.tmp: not a regular file (FIFO), skipped",
              "cat --spool");
    harness_run_free(&r);

    r = harness_run_logctl(h, "cat", done_fifo, done_shard, NULL);
    harness_expect_code(&r, 1, "cat of a FIFO by name");
    expect_records(r.out, "alpha", 0, 3, "cat FIFO FILE");
    harness_expect_in(r.err, "fifo.0000000000000003.shard: not a regular file (FIFO), skipped",
              "cat FIFO FILE");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", "--spool", h->spool, NULL);
    harness_expect_code(&r, 1, "verify --spool with a FIFO in done/");
    harness_expect_in(r.out, "OK       ", "verify --spool");
    harness_expect_in(r.out, "fifo.0000000000000003.shard: not a regular file (FIFO)", "verify --spool");
    harness_expect_in(r.out, "2 files checked, 1 bad", "verify --spool");
    harness_run_free(&r);

    r = harness_run_logctl(h, "verify", active_fifo, done_shard, NULL);
    harness_expect_code(&r, 1, "verify of a FIFO by name");
    harness_expect_in(r.out, "ERROR    ", "verify FIFO FILE");
    harness_expect_in(r.out, "not a regular file (FIFO)", "verify FIFO FILE");
    harness_run_free(&r);

    r = harness_run_logctl(h, "ls", "--done", "--spool", h->spool, NULL);
    harness_expect_in(r.out, "alpha", "ls --done");
    harness_run_free(&r);

    free(b.p);
    free(active);
    free(done_shard);
    free(done_fifo);
    free(active_shard);
    free(active_fifo);
}

/* ---- cat --follow ---- */

struct child {
    struct harness_child proc;
    char *out_path, *err_path;
};

static void child_start(struct harness *h, struct child *c, const char *const *argv)
{
    c->out_path = harness_path(h->dir, "follow.out");
    c->err_path = harness_path(h->dir, "follow.err");
    /* Both are there when this returns, so waiting on them can read them. */
    c->proc = harness_child_start(argv, c->out_path, c->err_path);
}

struct seen {
    const char *path, *needle;
};

static bool file_has(void *arg)
{
    const struct seen *s = arg;
    size_t len;
    char *text = harness_slurp(s->path, &len);
    bool found = text && strstr(text, s->needle);

    free(text);
    return found;
}

static void child_expect(struct child *c, bool err, const char *needle)
{
    struct seen s = { err ? c->err_path : c->out_path, needle };

    if (!harness_wait_for(file_has, &s, 10000)) {
        size_t len;
        char *o = harness_slurp(c->out_path, &len), *e = harness_slurp(c->err_path, &len);

        fail_msg("cat --follow: \"%s\" did not appear on %s within 10 s\nstdout: %s\nstderr: %s",
                 needle, err ? "stderr" : "stdout", o, e);
    }
}

static void test_follow_past_damage(void **state)
{
    struct harness *h = *state;
    char *active = make_spool(h);
    char *probe = harness_path(active, "probe.0000000000000001.tmp");
    char *fifo = harness_path(active, "fifo.0000000000000002.tmp");
    char *dmg = harness_path(active, "dmg.0000000000000003.tmp");
    char *next = harness_path(active, "dmg.0000000000000004.tmp");
    const char *argv[] = { harness_logctl(), "cat", "--follow", "--spool", h->spool, NULL };
    struct bytebuf b = { 0 };
    struct child c;
    size_t rec1, rec2, cut, len;
    int status;
    bool shown = false;
    char *out;

    put_header(&b, "probe", 1);
    write_file(probe, b.p, b.len);
    child_start(h, &c, argv);
    /* The child watches active/ at some point after it starts: append to
     * the probe shard until a record of it shows. */
    for (unsigned i = 0; !shown; i++) {
        struct seen s = { c.out_path, "probe " };
        char text[32];

        assert_true(i < 200);
        b.len = 0;
        snprintf(text, sizeof(text), "probe %u", i);
        put_record(&b, text, ts_of(0, i));
        append_file(probe, b.p, b.len);
        shown = harness_wait_for(file_has, &s, 50);
    }

    /* A FIFO under a shard's name: reported, never opened for reading. */
    assert_int_equal(mkfifo(fifo, 0644), 0);
    child_expect(&c, true, "fifo.0000000000000002.tmp: not a regular file (FIFO)");

    /* A damaged record, then one half written: following waits for it. */
    b.len = 0;
    put_header(&b, "dmg", 3);
    put_record(&b, "dmg 0000", ts_of(1, 0));
    rec1 = put_record(&b, "dmg 0001", ts_of(1, 1));
    rec2 = put_record(&b, "dmg 0002", ts_of(1, 2));
    put_record(&b, "dmg 0003", ts_of(1, 3));
    b.p[rec1 + SHARD_RECORD_HEADER] ^= 0x20;
    cut = rec2 + 10;
    write_file(dmg, b.p, cut);
    child_expect(&c, false, "dmg 0000\n");
    append_file(dmg, b.p + cut, b.len - cut);
    child_expect(&c, false, "dmg 0003\n");
    child_expect(&c, true, "record CRC mismatch");

    /* Damage without framing ends the following of that shard only. */
    b.len = 0;
    put_record(&b, "dmg 0004", ts_of(1, 4));
    wire_put_u32(b.p, UINT32_MAX);
    append_file(dmg, b.p, b.len);
    child_expect(&c, true, "dmg.0000000000000003.tmp: no longer following it");
    b.len = 0;
    put_header(&b, "dmg", 4);
    put_record(&b, "dmg next", ts_of(1, 5));
    write_file(next, b.p, b.len);
    child_expect(&c, false, "dmg next\n");

    status = harness_child_wait(&c.proc, SIGTERM, 10000, "cat --follow");
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1); /* damage was found */
    out = harness_slurp(c.out_path, &len);
    assert_null(strstr(out, "dmg 0001"));
    harness_expect_in(out, "dmg 0002\n", "cat --follow");
    free(out);
    free(c.out_path);
    free(c.err_path);
    free(b.p);
    free(active);
    free(probe);
    free(fifo);
    free(dmg);
    free(next);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_flipped_byte, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_bogus_length, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_fifos, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_follow_past_damage, harness_setup, harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
