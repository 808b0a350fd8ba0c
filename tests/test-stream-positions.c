/* Unit tests for common/stream_positions.c: the text round-trips, every
 * kind of damage is refused with its line, a file cut at any byte or with
 * any byte flipped is refused whole, a stream on several lines keeps its
 * highest position, and the files of <spool>/streams/ are written, read,
 * reported, removed and quarantined as stream_positions.h promises. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "crc32c.h"
#include "spool_names.h"
#include "stream_positions.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

static struct positions_entry entry(uint8_t id_byte, uint64_t next, uint64_t newest, uint32_t uid,
                                    const char *producer)
{
    struct positions_entry e;

    memset(&e, 0, sizeof(e));
    memset(e.stream_id, id_byte, sizeof(e.stream_id));
    e.stream_id[0] = 0x10; /* so no id is all zero */
    e.next_position = next;
    e.newest_ns = newest;
    e.uid = uid;
    snprintf(e.producer, sizeof(e.producer), "%s", producer);
    return e;
}

static void assert_entry_equal(const struct positions_entry *a, const struct positions_entry *b)
{
    assert_memory_equal(a->stream_id, b->stream_id, SHARD_STREAM_ID_SIZE);
    assert_true(a->next_position == b->next_position);
    assert_true(a->newest_ns == b->newest_ns);
    assert_int_equal(a->uid, b->uid);
    assert_string_equal(a->producer, b->producer);
}

/* The text of a file with the given stream lines, the header and end line
 * as a writer makes them (count and CRC right unless overridden). */
static char *make_text(const char *header, const char *lines, long count, long crc)
{
    char *body, *text;
    size_t n = 0;

    for (const char *p = lines; *p; p++)
        n += *p == '\n';
    assert_true(asprintf(&body, "%s%s", header, lines) > 0);
    assert_true(asprintf(&text, "%send %ld %08lx\n", body, count >= 0 ? count : (long)n,
                         crc >= 0 ? crc : (long)crc32c(body, strlen(body))) > 0);
    free(body);
    return text;
}

#define HEADER "logshard-stream-positions 1\n"
#define ID_A "10aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define ID_B "10bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* ---- the text ---- */

static void test_round_trip(void **state)
{
    struct positions_entry in[] = {
        entry(0xbb, 7, 1700000000000000001ull, 1000, "web.1"),
        entry(0xaa, 42, 1700000000000000000ull, 0, "app"),
        entry(0xcc, SHARD_POSITION_LIMIT - 1, UINT64_MAX, UINT32_MAX,
              "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"),
    };
    struct positions_entry *out = NULL;
    size_t n = 0, len = 0;
    char *text = NULL, *want;

    (void)state;
    assert_int_equal(positions_format(in, 2, &text, &len), 0);
    want = make_text(HEADER,
                     "stream 10bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb 7 1700000000000000001 1000 web.1\n"
                     "stream " ID_A " 42 1700000000000000000 0 app\n",
                     -1, -1);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(text, want, len);
    free(want);
    free(text);

    assert_int_equal(positions_format(in, N_ELEMENTS(in), &text, &len), 0);
    assert_int_equal(positions_parse(text, len, &out, &n, NULL, NULL), 0);
    assert_int_equal(n, 3);
    /* Sorted by stream id. */
    assert_entry_equal(&out[0], &in[1]);
    assert_entry_equal(&out[1], &in[0]);
    assert_entry_equal(&out[2], &in[2]);
    free(out);
    free(text);

    /* No stream at all is a file too. */
    assert_int_equal(positions_format(NULL, 0, &text, &len), 0);
    assert_int_equal(len, strlen(HEADER "end 0 00000000\n"));
    out = (struct positions_entry *)&out;
    assert_int_equal(positions_parse(text, len, &out, &n, NULL, NULL), 0);
    assert_null(out);
    assert_int_equal(n, 0);
    free(text);
}

static void test_format_refuses(void **state)
{
    struct positions_entry bad[] = {
        entry(0xaa, SHARD_POSITION_LIMIT, 0, 0, "app"),
        entry(0xaa, 1, 0, 0, ".hidden"),
        entry(0xaa, 1, 0, 0, ""),
        entry(0xaa, 1, 0, 0, "a b"),
        entry(0xaa, 1, 0, 0, "app"),
    };
    char *text = (char *)&text;
    size_t len = 99;

    (void)state;
    memset(bad[4].stream_id, 0, sizeof(bad[4].stream_id));
    for (size_t i = 0; i < N_ELEMENTS(bad); i++) {
        assert_false(positions_entry_valid(&bad[i]));
        assert_int_equal(positions_format(&bad[i], 1, &text, &len), -EINVAL);
    }
    assert_true(text == (char *)&text && len == 99);
    assert_int_equal(positions_format(bad, (size_t)POSITIONS_FILE_MAX, &text, &len), -EFBIG);
}

struct damage_case {
    const char *what;
    char *text;
    size_t line;
    const char *why;
};

static void test_damage_refused(void **state)
{
    const char *good = "stream " ID_A " 5 9 1 app\n";
    struct damage_case cases[] = {
        { "empty", strdup(""), 1, "empty file" },
        { "foreign", strdup("hello\n"), 1, "not a stream positions file" },
        { "version 2", make_text("logshard-stream-positions 2\n", "", -1, -1), 1,
          "unsupported stream positions version" },
        { "header cut", strdup("logshard-stream-pos"), 1, "ends inside the header" },
        { "no end line", strdup(HEADER "stream " ID_A " 5 9 1 app\n"), 3, "ends before its end" },
        { "unknown line", make_text(HEADER, "stream " ID_A " 5 9 1 app\nstreams x\n", -1, -1), 3,
          "unknown line" },
        { "blank line", make_text(HEADER, "\n", -1, -1), 2, "unknown line" },
        { "CRLF", make_text(HEADER, "stream " ID_A " 5 9 1 app\r\n", -1, -1), 2,
          "producer name" },
        { "short id", make_text(HEADER, "stream 10aa 5 9 1 app\n", -1, -1), 2, "stream id" },
        { "long id", make_text(HEADER, "stream " ID_A "a 5 9 1 app\n", -1, -1), 2,
          "stream id" },
        { "uppercase id", make_text(HEADER, "stream 10AAAAAAAAAAAAAAAAAAAAAAAAAAAAAA 5 9 1 app\n",
                                    -1, -1),
          2, "stream id" },
        { "zero id", make_text(HEADER, "stream 00000000000000000000000000000000 5 9 1 app\n", -1,
                               -1),
          2, "all zero" },
        { "two spaces", make_text(HEADER, "stream " ID_A "  5 9 1 app\n", -1, -1), 2,
          "next position" },
        { "sign", make_text(HEADER, "stream " ID_A " +5 9 1 app\n", -1, -1), 2,
          "next position" },
        { "leading zero", make_text(HEADER, "stream " ID_A " 05 9 1 app\n", -1, -1), 2,
          "next position" },
        { "position 2^63", make_text(HEADER, "stream " ID_A " 9223372036854775808 9 1 app\n", -1,
                                     -1),
          2, "out of range" },
        { "position overflows", make_text(HEADER, "stream " ID_A " 18446744073709551616 9 1 app\n",
                                          -1, -1),
          2, "next position" },
        { "newest overflows", make_text(HEADER, "stream " ID_A " 5 18446744073709551616 1 app\n",
                                        -1, -1),
          2, "newest time" },
        { "uid 2^32", make_text(HEADER, "stream " ID_A " 5 9 4294967296 app\n", -1, -1), 2,
          "uid" },
        { "no producer", make_text(HEADER, "stream " ID_A " 5 9 1 \n", -1, -1), 2, "producer" },
        { "producer missing", make_text(HEADER, "stream " ID_A " 5 9 1\n", -1, -1), 2, "uid" },
        { "dot producer", make_text(HEADER, "stream " ID_A " 5 9 1 .app\n", -1, -1), 2,
          "producer" },
        { "producer with space", make_text(HEADER, "stream " ID_A " 5 9 1 a b\n", -1, -1), 2,
          "producer" },
        { "producer of 65", make_text(HEADER, "stream " ID_A " 5 9 1 "
                                      "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn\n",
                                      -1, -1),
          2, "producer" },
        { "bad CRC", make_text(HEADER, good, -1, 0x12345678), 3, "CRC32C mismatch" },
        { "bad count", make_text(HEADER, good, 2, -1), 3, "count" },
        { "uppercase CRC", NULL, 2, "end line" },
        { "end without CRC", strdup(HEADER "end 0\n"), 2, "end line" },
        { "data after end", NULL, 4, "data after the end line" },
        { "second end", NULL, 4, "data after the end line" },
    };

    (void)state;
    /* Built by hand: the right CRC spelt in uppercase, and a good file with
     * bytes after it. */
    {
        char *t = make_text(HEADER, "", -1, -1);
        char *body = strdup(HEADER);
        uint32_t crc = crc32c(body, strlen(body));

        free(t);
        assert_true(asprintf(&cases[26].text, HEADER "end 0 %08X\n", crc) > 0);
        /* Else the uppercase spelling would be the same text. */
        assert_true(strpbrk(cases[26].text + strlen(HEADER), "ABCDEF") != NULL);
        t = make_text(HEADER, good, -1, -1);
        assert_true(asprintf(&cases[28].text, "%sx", t) > 0);
        assert_true(asprintf(&cases[29].text, "%send 1 00000000\n", t) > 0);
        free(t);
        free(body);
    }
    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        struct positions_entry *v = (struct positions_entry *)&v;
        size_t n = 77, line = 0;
        const char *why = NULL;

        print_message("damage: %s\n", cases[i].what);
        assert_non_null(cases[i].text);
        assert_int_equal(positions_parse(cases[i].text, strlen(cases[i].text), &v, &n, &line, &why),
                         -EBADMSG);
        assert_true(v == (struct positions_entry *)&v && n == 77);
        assert_non_null(why);
        if (!strstr(why, cases[i].why))
            fail_msg("%s: reason '%s', expected '%s'", cases[i].what, why, cases[i].why);
        assert_int_equal(line, cases[i].line);
        free(cases[i].text);
    }
}

static void test_cut_and_flipped(void **state)
{
    struct positions_entry in[] = {
        entry(0xaa, 42, 1700000000000000000ull, 1000, "app"),
        entry(0xbb, 0, 0, 0, "x"),
    };
    struct positions_entry *v = NULL;
    size_t n, len, line;
    const char *why;
    char *text;

    (void)state;
    assert_int_equal(positions_format(in, N_ELEMENTS(in), &text, &len), 0);
    /* A file cut at any byte is refused whole: nothing of it is used. */
    for (size_t k = 0; k < len; k++) {
        v = NULL;
        assert_int_equal(positions_parse(text, k, &v, &n, &line, &why), -EBADMSG);
        assert_null(v);
    }
    /* So is one with any bit flipped. */
    for (size_t k = 0; k < len; k++) {
        for (unsigned bit = 0; bit < 8; bit++) {
            text[k] ^= (char)(1u << bit);
            v = NULL;
            if (positions_parse(text, len, &v, &n, &line, &why) != -EBADMSG)
                fail_msg("byte %zu bit %u flipped was accepted", k, bit);
            text[k] ^= (char)(1u << bit);
        }
    }
    assert_int_equal(positions_parse(text, len, &v, &n, &line, &why), 0);
    free(v);
    free(text);
}

/* A stream on several lines (two writers' files concatenated by hand, or
 * a future writer) is one stream, at its highest position. */
static void test_duplicates(void **state)
{
    char *text = make_text(HEADER,
                           "stream " ID_B " 3 100 7 other\n"
                           "stream " ID_A " 5 900 1 old\n"
                           "stream " ID_A " 8 300 2 new\n"
                           "stream " ID_A " 6 950 3 mid\n",
                           -1, -1);
    char *again;
    struct positions_entry *v = NULL, *w = NULL;
    size_t n = 0, wn = 0, len;

    (void)state;
    assert_int_equal(positions_parse(text, strlen(text), &v, &n, NULL, NULL), 0);
    assert_int_equal(n, 2);
    assert_string_equal(v[0].producer, "new");
    assert_true(v[0].next_position == 8);
    assert_true(v[0].newest_ns == 950); /* the newest of all its lines */
    assert_int_equal(v[0].uid, 2);
    assert_string_equal(v[1].producer, "other");
    /* The order of the lines does not matter. */
    free(text);
    text = make_text(HEADER,
                     "stream " ID_A " 6 950 3 mid\n"
                     "stream " ID_A " 8 300 2 new\n"
                     "stream " ID_B " 3 100 7 other\n"
                     "stream " ID_A " 5 900 1 old\n",
                     -1, -1);
    assert_int_equal(positions_parse(text, strlen(text), &w, &wn, NULL, NULL), 0);
    assert_int_equal(wn, 2);
    assert_entry_equal(&w[0], &v[0]);
    assert_entry_equal(&w[1], &v[1]);
    free(w);
    /* Formatted, it is one line per stream and reads back the same. */
    assert_int_equal(positions_format(v, n, &again, &len), 0);
    assert_int_equal(positions_parse(again, len, &w, &wn, NULL, NULL), 0);
    assert_int_equal(wn, 2);
    assert_entry_equal(&w[0], &v[0]);
    free(again);
    free(w);
    free(v);
    free(text);
}

/* ---- the files ---- */

static char *tmpdir;
static int spool_fd = -1;

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    char tmpl[] = "/tmp/test-stream-positions.XXXXXX";

    (void)state;
    assert_non_null(mkdtemp(tmpl));
    tmpdir = strdup(tmpl);
    spool_fd = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(spool_fd >= 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    (void)close(spool_fd);
    (void)nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(tmpdir);
    return 0;
}

struct collected {
    struct positions_entry v[16];
    size_t n;
    int fail_at; /* > 0: each() fails with -ECANCELED at that call */
};

static int collect(const struct positions_entry *e, void *arg)
{
    struct collected *c = arg;

    if (c->fail_at > 0 && (size_t)c->fail_at == c->n + 1)
        return -ECANCELED;
    assert_true(c->n < N_ELEMENTS(c->v));
    c->v[c->n++] = *e;
    return 0;
}

static char *streams_path(const char *name)
{
    char *p;

    assert_true(asprintf(&p, "%s/%s%s%s", tmpdir, SPOOL_STREAMS_DIR, name ? "/" : "",
                         name ? name : "") > 0);
    return p;
}

static void put_file(const char *name, const char *text, size_t len)
{
    char *p = streams_path(name);
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    free(p);
}

static void test_write_load_remove(void **state)
{
    struct positions_entry in[] = {
        entry(0xbb, 7, 100, 1000, "web"),
        entry(0xaa, 42, 200, 0, "app"),
    };
    struct positions_load_report rep;
    struct collected c = { 0 };
    struct spool_positions_name pn;
    struct stat st;
    char *name = NULL, *name2 = NULL, *p;

    (void)state;
    /* No streams/ yet: nothing to read. */
    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), 0);
    assert_int_equal(rep.n_read + rep.n_bad + rep.n_temps, 0);
    positions_load_report_free(&rep);

    assert_int_equal(positions_write(spool_fd, "merge", in, N_ELEMENTS(in), &name), 0);
    assert_int_equal(spool_positions_name_parse(name, &pn), 0);
    assert_string_equal(pn.kind, "merge");
    assert_false(pn.temp);
    p = streams_path(NULL);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    {
        mode_t mask = umask(0);

        umask(mask);
        assert_int_equal(st.st_mode & 07777, 0750 & ~mask);
    }
    free(p);
    assert_int_equal(positions_write(spool_fd, "daemon", in, 1, &name2), 0);
    assert_string_not_equal(name, name2);

    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), 0);
    assert_int_equal(rep.n_read, 2);
    assert_int_equal(rep.n_bad, 0);
    assert_int_equal(rep.n_temps, 0);
    /* In name order: daemon-... before merge-..., each file's entries in
     * stream id order. */
    assert_string_equal(rep.read[0], name2);
    assert_string_equal(rep.read[1], name);
    assert_int_equal(c.n, 3);
    assert_entry_equal(&c.v[0], &in[0]);
    assert_entry_equal(&c.v[1], &in[1]);
    assert_entry_equal(&c.v[2], &in[0]);

    /* Removing what was read leaves streams/ empty. */
    assert_int_equal(positions_remove(spool_fd, (const char *const *)rep.read, rep.n_read), 0);
    /* Again: already gone is fine. */
    assert_int_equal(positions_remove(spool_fd, (const char *const *)rep.read, rep.n_read), 0);
    positions_load_report_free(&rep);
    c.n = 0;
    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), 0);
    assert_int_equal(rep.n_read, 0);
    assert_int_equal(c.n, 0);
    positions_load_report_free(&rep);
    /* Only positions names are removed. */
    {
        const char *foreign[] = { "../done/app.0000000000000001.shard" };

        assert_int_equal(positions_remove(spool_fd, foreign, 1), -EINVAL);
    }
    assert_int_equal(positions_write(spool_fd, "Merge", in, 1, NULL), -EINVAL);
    assert_int_equal(positions_write(spool_fd, "", in, 1, NULL), -EINVAL);
    free(name);
    free(name2);
}

static void test_load_reports_bad(void **state)
{
    struct positions_entry in[] = { entry(0xaa, 42, 200, 0, "app") };
    struct positions_load_report rep;
    struct collected c = { 0 };
    char name[SPOOL_POSITIONS_NAME_SIZE], fifo[SPOOL_POSITIONS_NAME_SIZE],
        link_name[SPOOL_POSITIONS_NAME_SIZE], big[SPOOL_POSITIONS_NAME_SIZE],
        tmp[SPOOL_POSITIONS_NAME_SIZE];
    char *good = NULL, *text, *p, *qname = NULL, *huge;
    size_t len;

    (void)state;
    assert_int_equal(positions_write(spool_fd, "merge", in, 1, &good), 0);
    /* A damaged one: its CRC is wrong. */
    assert_int_equal(positions_format(in, 1, &text, &len), 0);
    text[len - 2] = text[len - 2] == '0' ? '1' : '0';
    assert_int_equal(spool_positions_name_format("merge", 1, 1, false, name, sizeof(name)), 0);
    put_file(name, text, len);
    free(text);
    /* A FIFO under a positions name: never opened in a way that blocks. */
    assert_int_equal(spool_positions_name_format("merge", 2, 2, false, fifo, sizeof(fifo)), 0);
    p = streams_path(fifo);
    assert_int_equal(mkfifo(p, 0600), 0);
    free(p);
    /* A symlink to the good one: not followed. */
    assert_int_equal(spool_positions_name_format("merge", 3, 3, false, link_name,
                                                 sizeof(link_name)), 0);
    p = streams_path(link_name);
    assert_int_equal(symlink(good, p), 0);
    free(p);
    /* Larger than a file may be: refused without being read. */
    assert_int_equal(spool_positions_name_format("merge", 4, 4, false, big, sizeof(big)), 0);
    huge = calloc(1, POSITIONS_FILE_MAX + 1);
    assert_non_null(huge);
    put_file(big, huge, POSITIONS_FILE_MAX + 1);
    free(huge);
    /* A temp left by a writer that was killed, and a foreign name. */
    assert_int_equal(spool_positions_name_format("merge", 5, 5, true, tmp, sizeof(tmp)), 0);
    put_file(tmp, "logshard-stream", 15);
    put_file("notes.txt", "x", 1);

    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), 0);
    assert_int_equal(c.n, 1);
    assert_entry_equal(&c.v[0], &in[0]);
    assert_int_equal(rep.n_read, 1);
    assert_string_equal(rep.read[0], good);
    assert_int_equal(rep.n_temps, 1);
    assert_string_equal(rep.temps[0], tmp);
    assert_int_equal(rep.n_bad, 4);
    /* In name order: ns 1 (damaged), 2 (FIFO), 3 (symlink), 4 (too big). */
    assert_string_equal(rep.bad[0].name, name);
    assert_int_equal(rep.bad[0].error, -EBADMSG);
    assert_int_equal(rep.bad[0].line, 3);
    assert_non_null(strstr(rep.bad[0].why, "CRC32C"));
    assert_string_equal(rep.bad[1].name, fifo);
    assert_int_equal(rep.bad[1].error, -EBADMSG);
    assert_non_null(strstr(rep.bad[1].why, "not a regular file"));
    assert_string_equal(rep.bad[2].name, link_name);
    assert_non_null(strstr(rep.bad[2].why, "symbolic link"));
    assert_string_equal(rep.bad[3].name, big);
    assert_non_null(strstr(rep.bad[3].why, "larger"));

    /* The damaged one goes to quarantine/, under its own name, then .1. */
    assert_int_equal(positions_quarantine(spool_fd, name, &qname), 0);
    assert_string_equal(qname, name);
    free(qname);
    put_file(name, "x", 1);
    assert_int_equal(positions_quarantine(spool_fd, name, &qname), 0);
    assert_non_null(strstr(qname, ".pos.1"));
    free(qname);
    assert_int_equal(positions_quarantine(spool_fd, fifo, NULL), 0);
    assert_int_equal(positions_quarantine(spool_fd, "notes.txt", NULL), -EINVAL);
    p = streams_path(name);
    assert_int_equal(access(p, F_OK), -1);
    free(p);
    assert_int_equal(positions_remove(spool_fd, (const char *const[]){ tmp }, 1), 0);
    positions_load_report_free(&rep);

    /* each() stops the load with its error. */
    c = (struct collected){ .fail_at = 1 };
    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), -ECANCELED);
    free(good);
}

/* streams that is no directory is refused, never followed or replaced. */
static void test_write_refuses_non_directory(void **state)
{
    struct positions_entry in[] = { entry(0xaa, 42, 200, 0, "app") };
    struct positions_load_report rep;
    struct collected c = { 0 };
    char *p = streams_path(NULL), *name = (char *)&name;
    char target[] = "/tmp/test-stream-positions-target.XXXXXX";
    struct stat st;

    (void)state;
    put_file(NULL, "", 0); /* a regular file named streams */
    assert_int_equal(positions_write(spool_fd, "merge", in, 1, &name), -ENOTDIR);
    assert_true(name == (char *)&name);
    assert_int_equal(positions_load(spool_fd, collect, &c, &rep), -ENOTDIR);
    assert_int_equal(unlink(p), 0);
    assert_non_null(mkdtemp(target));
    assert_int_equal(symlink(target, p), 0);
    assert_true(positions_write(spool_fd, "merge", in, 1, NULL) < 0);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(rmdir(target), 0); /* still empty: nothing went there */
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_format_refuses),
        cmocka_unit_test(test_damage_refused),
        cmocka_unit_test(test_cut_and_flipped),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test_setup_teardown(test_write_load_remove, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_reports_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_refuses_non_directory, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
