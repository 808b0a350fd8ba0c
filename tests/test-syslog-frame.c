/* Unit tests for common/syslog_frame.c, the framer of syslog stream
 * connections: octet counting and newline (non-transparent) framing, told
 * apart by the first byte; streams fed whole, byte by byte and in every
 * chunk size; over-long lines cut; malformed and oversized lengths; the
 * end of a connection. The samples marked "real" are what util-linux
 * logger 2.38 and Python 3.11's SysLogHandler wrote to a Unix stream
 * socket. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "syslog_frame.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_FRAMES 64
#define TEXT_MAX 128

/* A frame as the tests compare it. */
struct seen {
    enum syslog_frame_kind kind;
    size_t len;
    char text[TEXT_MAX];
};

/* What a whole connection gave: its messages and cuts in order (the
 * discarded bytes only as a total, since how many frames they come in
 * depends on the reads), and how it ended: -ENODATA, or an error. */
struct run {
    struct seen frames[MAX_FRAMES];
    size_t n;
    size_t discarded;
    size_t consumed;
    int end;
    enum syslog_framing framing;
};

static void record(struct run *run, const struct syslog_frame *f, const char *buf, size_t len)
{
    assert_true(f->consumed >= 1 && f->consumed <= len);
    if (f->kind == SYSLOG_FRAME_DISCARDED) {
        assert_null(f->msg);
        assert_int_equal(f->msg_len, 0);
        run->discarded += f->consumed;
        return;
    }
    /* Every message lies in the bytes the frame consumed. */
    assert_non_null(f->msg);
    assert_true(f->msg >= buf && f->msg + f->msg_len <= buf + f->consumed);
    assert_true(run->n < MAX_FRAMES && f->msg_len <= TEXT_MAX);
    run->frames[run->n].kind = f->kind;
    run->frames[run->n].len = f->msg_len;
    memcpy(run->frames[run->n].text, f->msg, f->msg_len);
    run->n++;
}

/* Feeds stream[0..len) to a new framer chunk bytes at a time, as a
 * connection would: before every call the bytes not consumed yet are
 * copied to a fresh block of exactly their size (so a read past them is an
 * ASan report, and the framer cannot rely on the buffer staying put), and
 * once all is read the end of the connection. */
static void run_stream(size_t max, const char *stream, size_t len, size_t chunk, struct run *run)
{
    struct syslog_framer f;
    size_t fed = 0;
    bool finishing = false;

    memset(run, 0, sizeof(*run));
    assert_int_equal(syslog_framer_init(&f, max), 0);
    for (;;) {
        size_t pending = fed - run->consumed;
        char *buf = malloc(pending ? pending : 1);
        struct syslog_frame frame;
        int r;

        assert_non_null(buf);
        memcpy(buf, stream + run->consumed, pending);
        r = finishing ? syslog_framer_finish(&f, buf, pending, &frame)
                      : syslog_framer_next(&f, buf, pending, &frame);
        if (r == 0) {
            record(run, &frame, buf, pending);
            run->consumed += frame.consumed;
        }
        free(buf);
        if (r == 0)
            continue;
        if (r == -EAGAIN && !finishing) {
            /* A buffer of syslog_framer_buffer_size bytes always makes
             * progress. */
            assert_true(pending < syslog_framer_buffer_size(max));
            if (fed == len)
                finishing = true;
            else
                fed = fed + chunk < len ? fed + chunk : len;
            continue;
        }
        run->end = r;
        break;
    }
    run->framing = syslog_framer_framing(&f);
    if (run->end == -ENODATA)
        assert_int_equal(run->consumed, len);
}

static void assert_runs_equal(const struct run *a, const struct run *b, size_t chunk)
{
    if (a->n != b->n || a->discarded != b->discarded || a->end != b->end ||
        a->consumed != b->consumed || a->framing != b->framing)
        fail_msg("chunks of %zu: %zu frames, %zu discarded, end %d; whole: %zu, %zu, %d", chunk,
                 b->n, b->discarded, b->end, a->n, a->discarded, a->end);
    for (size_t i = 0; i < a->n; i++) {
        assert_int_equal(a->frames[i].kind, b->frames[i].kind);
        assert_int_equal(a->frames[i].len, b->frames[i].len);
        assert_memory_equal(a->frames[i].text, b->frames[i].text, a->frames[i].len);
    }
}

struct want {
    enum syslog_frame_kind kind;
    const char *text;
    size_t len; /* 0: strlen(text) */
};

/* Runs the stream whole, then byte by byte and in every other chunk size,
 * and checks each gives the frames wanted and ends with end. */
static void check_stream(size_t max, const char *stream, size_t len, const struct want *want,
                         size_t n_want, size_t discarded, int end, enum syslog_framing framing)
{
    struct run whole, parts;

    run_stream(max, stream, len, len ? len : 1, &whole);
    if (whole.n != n_want)
        fail_msg("%zu frames, want %zu (end %d)", whole.n, n_want, whole.end);
    for (size_t i = 0; i < n_want; i++) {
        size_t wlen = want[i].len ? want[i].len : strlen(want[i].text);

        if (whole.frames[i].kind != want[i].kind || whole.frames[i].len != wlen ||
            memcmp(whole.frames[i].text, want[i].text, wlen) != 0)
            fail_msg("frame %zu: kind %d \"%.*s\", want kind %d \"%.*s\"", i,
                     whole.frames[i].kind, (int)whole.frames[i].len, whole.frames[i].text,
                     want[i].kind, (int)wlen, want[i].text);
    }
    assert_int_equal(whole.discarded, discarded);
    assert_int_equal(whole.end, end);
    assert_int_equal(whole.framing, framing);
    for (size_t chunk = 1; chunk < len; chunk++) {
        run_stream(max, stream, len, chunk, &parts);
        assert_runs_equal(&whole, &parts, chunk);
    }
}

#define M(s) { SYSLOG_FRAME_MESSAGE, (s), 0 }
#define EMPTY { SYSLOG_FRAME_MESSAGE, "", 0 }
#define CUT(s) { SYSLOG_FRAME_CUT, (s), 0 }
#define CHECK(max, stream, discarded, end, framing, ...)                                       \
    do {                                                                                   \
        static const struct want w_[] = { __VA_ARGS__ };                                    \
        check_stream((max), (stream), sizeof(stream) - 1, w_, N_ELEMENTS(w_), (discarded),  \
                     (end), (framing));                                                    \
    } while (0)
#define CHECK_NONE(max, stream, end, framing)                                                  \
    check_stream((max), (stream), sizeof(stream) - 1, NULL, 0, 0, (end), (framing))

#define OC SYSLOG_FRAMING_OCTET_COUNTING
#define NT SYSLOG_FRAMING_NON_TRANSPARENT

static void test_init(void **state)
{
    struct syslog_framer f = { .max_message_bytes = 77 };
    struct syslog_frame frame;
    (void)state;

    assert_int_equal(syslog_framer_init(&f, 0), -EINVAL);
    assert_int_equal(syslog_framer_init(&f, SYSLOG_FRAME_MAX_LIMIT + 1), -EINVAL);
    assert_int_equal(f.max_message_bytes, 77); /* untouched */
    assert_int_equal(syslog_framer_init(&f, SYSLOG_FRAME_MAX_LIMIT), 0);
    assert_int_equal(syslog_framer_init(&f, 1), 0);
    assert_int_equal(syslog_framer_framing(&f), SYSLOG_FRAMING_UNKNOWN);
    /* Nothing read yet: more is needed, and the framing is still open. */
    assert_int_equal(syslog_framer_next(&f, "", 0, &frame), -EAGAIN);
    assert_int_equal(syslog_framer_framing(&f), SYSLOG_FRAMING_UNKNOWN);
    assert_int_equal(syslog_framer_finish(&f, "", 0, &frame), -ENODATA);

    /* The length field, its space, the message. */
    assert_int_equal(syslog_framer_buffer_size(1), 3);
    assert_int_equal(syslog_framer_buffer_size(9), 11);
    assert_int_equal(syslog_framer_buffer_size(10), 13);
    assert_int_equal(syslog_framer_buffer_size(1048576), 7 + 1 + 1048576);
}

static void test_detect(void **state)
{
    static const struct {
        const char *first;
        enum syslog_framing framing;
    } cases[] = {
        { "<", NT }, { "1", OC }, { "9", OC }, { "0", NT }, { " ", NT }, { "\n", NT },
        { "a", NT }, { "\0", NT },
    };
    (void)state;

    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        struct syslog_framer f;
        struct syslog_frame frame;

        assert_int_equal(syslog_framer_init(&f, 100), 0);
        (void)syslog_framer_next(&f, cases[i].first, 1, &frame);
        if (syslog_framer_framing(&f) != cases[i].framing)
            fail_msg("first byte 0x%02x: framing %d", (unsigned char)cases[i].first[0],
                     syslog_framer_framing(&f));
    }
}

/* ---- octet counting ---- */

static void test_octet_counting(void **state)
{
    (void)state;

    /* Real: logger -T --octet-count -u PATH --rfc3164 -t app "oc msg". */
    CHECK(1024, "34 <13>Dec  2 16:25:24 vm app: oc msg", 0, -ENODATA, OC,
          M("<13>Dec  2 16:25:24 vm app: oc msg"));
    /* Any byte inside a message, back to back frames, one at the limit. */
    CHECK(10, "5 a\nb\0c1 x10 0123456789", 0, -ENODATA, OC,
          { SYSLOG_FRAME_MESSAGE, "a\nb\0c", 5 }, M("x"), M("0123456789"));
    /* A message with newlines stays one (logger's a\nb). */
    CHECK(1024, "24 <13>1 - - app - - - a\nb\n", 0, -ENODATA, OC,
          M("<13>1 - - app - - - a\nb\n"));
}

static void test_octet_counting_errors(void **state)
{
    (void)state;

    CHECK_NONE(100, "12a", -EBADMSG, OC);
    CHECK_NONE(100, "3\nabc", -EBADMSG, OC);
    /* The second space is the message's first byte. */
    CHECK(100, "3  ab", 0, -ENODATA, OC, M(" ab"));
    /* A length with a leading zero, one after a space, one after a LF. */
    CHECK(100, "5 hello05 world", 0, -EBADMSG, OC, M("hello"));
    CHECK(100, "5 hello 5 world", 0, -EBADMSG, OC, M("hello"));
    CHECK(100, "5 hello\n5 world", 0, -EBADMSG, OC, M("hello"));
    CHECK(100, "5 hello<13>x", 0, -EBADMSG, OC, M("hello"));
    /* Over the limit, known from the digits alone. */
    CHECK_NONE(10, "11 0123456789a", -EMSGSIZE, OC);
    CHECK_NONE(10, "11", -EMSGSIZE, OC);
    CHECK_NONE(1048576, "1048577 ", -EMSGSIZE, OC);
    CHECK_NONE(1048576, "99999999999999999999999999999999", -EMSGSIZE, OC);
    CHECK(10, "1 a100", 0, -EMSGSIZE, OC, M("a"));
    /* Ended inside a frame. */
    CHECK_NONE(100, "5 abc", -EPIPE, OC);
    CHECK_NONE(100, "12", -EPIPE, OC);
    CHECK(100, "1 a5", 0, -EPIPE, OC, M("a"));
}

static void test_octet_counting_sticky(void **state)
{
    struct syslog_framer f;
    struct syslog_frame frame = { .consumed = 4242 };
    (void)state;

    assert_int_equal(syslog_framer_init(&f, 10), 0);
    /* Said before the space comes. */
    assert_int_equal(syslog_framer_next(&f, "11", 2, &frame), -EMSGSIZE);
    assert_int_equal(frame.consumed, 4242);
    /* However many bytes follow, and whatever they are. */
    assert_int_equal(syslog_framer_next(&f, "11 <13>x", 8, &frame), -EMSGSIZE);
    assert_int_equal(syslog_framer_next(&f, "1 x", 3, &frame), -EMSGSIZE);
    assert_int_equal(syslog_framer_finish(&f, "1 x", 3, &frame), -EMSGSIZE);
    assert_int_equal(frame.consumed, 4242);
    assert_int_equal(syslog_framer_framing(&f), OC);

    assert_int_equal(syslog_framer_init(&f, 10), 0);
    assert_int_equal(syslog_framer_next(&f, "1 x", 3, &frame), 0);
    assert_int_equal(frame.consumed, 3);
    assert_int_equal(syslog_framer_next(&f, "x", 1, &frame), -EBADMSG);
    assert_int_equal(syslog_framer_next(&f, "1 x", 3, &frame), -EBADMSG);

    /* A bad byte in the length field, then what looks like a good frame. */
    assert_int_equal(syslog_framer_init(&f, 100), 0);
    assert_int_equal(syslog_framer_next(&f, "12a", 3, &frame), -EBADMSG);
    assert_int_equal(syslog_framer_next(&f, "1 x", 3, &frame), -EBADMSG);

    /* Need more: nothing written. */
    assert_int_equal(syslog_framer_init(&f, 10), 0);
    frame.consumed = 4242;
    assert_int_equal(syslog_framer_next(&f, "10 abc", 6, &frame), -EAGAIN);
    assert_int_equal(frame.consumed, 4242);
}

/* ---- newline framing ---- */

static void test_lines(void **state)
{
    (void)state;

    /* Real: logger -T -u PATH --rfc3164 -t app plain. */
    CHECK(1024, "<13>Dec  2 16:25:24 vm app: plain\n", 0, -ENODATA, NT,
          M("<13>Dec  2 16:25:24 vm app: plain"));
    /* Real: logger -T --rfc5424 -t app "a\nb": the newline in the text
     * ends the message there, as with every syslog daemon. */
    CHECK(1024,
          "<13>1 2026-12-02T16:25:24.373091+00:00 vm app - - [timeQuality tzKnown=\"1\" "
          "isSynced=\"0\"] a\nb\n",
          0, -ENODATA, NT,
          M("<13>1 2026-12-02T16:25:24.373091+00:00 vm app - - [timeQuality tzKnown=\"1\" "
            "isSynced=\"0\"] a"),
          M("b"));
    /* Real: Python's SysLogHandler on a stream socket, NUL-terminated. */
    CHECK(1024, "<14>py stream\0<14>again\0", 0, -ENODATA, NT, M("<14>py stream"), M("<14>again"));
    /* CR LF, a lone CR (kept), empty lines, "\n\0" (an empty message). */
    CHECK(1024, "<1>a\r\n<1>b\r<1>c\n\n\r\n<1>d\n\0", 0, -ENODATA, NT, M("<1>a"), M("<1>b\r<1>c"),
          EMPTY, EMPTY, M("<1>d"), EMPTY);
    /* A last line without its line end, at the end of the connection. */
    CHECK(1024, "<1>a\n<1>tail", 0, -ENODATA, NT, M("<1>a"), M("<1>tail"));
    CHECK(1024, "<1>a\n<1>tail\r", 0, -ENODATA, NT, M("<1>a"), M("<1>tail\r"));
    /* A connection that starts with '0' is no octet counting. */
    CHECK(1024, "0 x\n", 0, -ENODATA, NT, M("0 x"));
}

static void test_lines_limit(void **state)
{
    (void)state;

    /* At the limit (8), with LF, CR LF and NUL. */
    CHECK(8, "01234567\n01234567\r\n01234567\0", 0, -ENODATA, NT, M("01234567"), M("01234567"),
          M("01234567"));
    /* One byte over: the first 8 bytes, the rest up to the line end
     * dropped, and the next line read as usual. */
    CHECK(8, "012345678\nnext\n", 2, -ENODATA, NT, CUT("01234567"), M("next"));
    CHECK(8, "0123456789abc\nnext\n", 6, -ENODATA, NT, CUT("01234567"), M("next"));
    CHECK(8, "0123456789abc\0next\0", 6, -ENODATA, NT, CUT("01234567"), M("next"));
    /* The CR after 8 bytes is part of the line end only before a LF. */
    CHECK(8, "01234567\rX\nnext\n", 3, -ENODATA, NT, CUT("01234567"), M("next"));
    CHECK(8, "01234567\r\0next\n", 2, -ENODATA, NT, CUT("01234567"), M("next"));
    /* Far over, across many reads. */
    CHECK(8, "<1>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n<1>b\n", 61,
          -ENODATA, NT, CUT("<1>aaaaa"), M("<1>b"));
    /* Two long lines in a row. */
    CHECK(4, "abcdefg\nhijklmn\nop\n", 8, -ENODATA, NT, CUT("abcd"), CUT("hijk"), M("op"));
    /* An over-long last line without line end. */
    CHECK(8, "0123456789", 2, -ENODATA, NT, CUT("01234567"));
    CHECK(8, "01234567\r", 1, -ENODATA, NT, CUT("01234567"));
    CHECK(8, "0123456789abcdef", 8, -ENODATA, NT, CUT("01234567"));
    CHECK(8, "01234567", 0, -ENODATA, NT, M("01234567"));
    /* The smallest limit. */
    CHECK(1, "a\nbc\n\n", 2, -ENODATA, NT, M("a"), CUT("b"), EMPTY);
}

/* What syslog_framer_next returns for a cut line, field by field. */
static void test_lines_cut_frames(void **state)
{
    static const char line[] = "0123456789\nx\n";
    struct syslog_framer f;
    struct syslog_frame frame;
    (void)state;

    assert_int_equal(syslog_framer_init(&f, 8), 0);
    /* 9 bytes without a line end: the line is over the limit. */
    assert_int_equal(syslog_framer_next(&f, line, 8, &frame), -EAGAIN);
    assert_int_equal(syslog_framer_next(&f, line, 9, &frame), 0);
    assert_int_equal(frame.kind, SYSLOG_FRAME_CUT);
    assert_ptr_equal(frame.msg, line);
    assert_int_equal(frame.msg_len, 8);
    assert_int_equal(frame.consumed, 8);
    /* The rest, as it comes. */
    assert_int_equal(syslog_framer_next(&f, line + 8, 0, &frame), -EAGAIN);
    assert_int_equal(syslog_framer_next(&f, line + 8, 1, &frame), 0);
    assert_int_equal(frame.kind, SYSLOG_FRAME_DISCARDED);
    assert_null(frame.msg);
    assert_int_equal(frame.consumed, 1);
    assert_int_equal(syslog_framer_next(&f, line + 9, 4, &frame), 0);
    assert_int_equal(frame.kind, SYSLOG_FRAME_DISCARDED);
    assert_int_equal(frame.consumed, 2);
    assert_int_equal(syslog_framer_next(&f, line + 11, 2, &frame), 0);
    assert_int_equal(frame.kind, SYSLOG_FRAME_MESSAGE);
    assert_ptr_equal(frame.msg, line + 11);
    assert_int_equal(frame.msg_len, 1);
    assert_int_equal(frame.consumed, 2);
}

/* The framer remembers how far it searched, relative to the start of the
 * caller's buffer: a line end that arrives later is found, also when the
 * caller moved the bytes in between. */
static void test_lines_growing(void **state)
{
    char a[32], b[32];
    struct syslog_framer f;
    struct syslog_frame frame;
    (void)state;

    assert_int_equal(syslog_framer_init(&f, 20), 0);
    memcpy(a, "<1>abc", 6);
    assert_int_equal(syslog_framer_next(&f, a, 6, &frame), -EAGAIN);
    memcpy(b, "<1>abcdef\0", 10);
    assert_int_equal(syslog_framer_next(&f, b, 10, &frame), 0);
    assert_ptr_equal(frame.msg, b);
    assert_int_equal(frame.msg_len, 9);
    assert_int_equal(frame.consumed, 10);
    /* And starts afresh for the next line. */
    assert_int_equal(syslog_framer_next(&f, "x\n", 2, &frame), 0);
    assert_int_equal(frame.msg_len, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init),
        cmocka_unit_test(test_detect),
        cmocka_unit_test(test_octet_counting),
        cmocka_unit_test(test_octet_counting_errors),
        cmocka_unit_test(test_octet_counting_sticky),
        cmocka_unit_test(test_lines),
        cmocka_unit_test(test_lines_limit),
        cmocka_unit_test(test_lines_cut_frames),
        cmocka_unit_test(test_lines_growing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
