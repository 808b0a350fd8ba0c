/* Fuzz target for common/syslog_frame.c: the framer of a syslog stream
 * connection, fed by a peer that sends anything.
 *
 * Input: one byte that picks max_message_bytes, one that picks how the
 * stream is cut into reads, then the bytes of the connection. The stream
 * goes through the framer twice, whole and in reads of varying size (each
 * call gets the bytes not consumed yet in a fresh block of exactly their
 * size, so a read past them is an ASan report and the framer cannot count
 * on the buffer staying put), and through a plain model of RFC 6587 written
 * here from syslog_frame.h. Checked:
 *  - every call: a frame consumes 1 to the bytes given, its message lies
 *    in what it consumed, no longer than the limit, a cut exactly the
 *    limit; a message of newline framing holds no LF or NUL; the frame is
 *    untouched when the call fails; "need more" only below
 *    syslog_framer_buffer_size, so a full buffer always makes progress;
 *    an error stays (the next call returns it again);
 *  - both runs and the model give the same messages and cuts at the same
 *    offsets, the same count of discarded bytes and the same end, and a
 *    clean end consumes every byte.
 * The seeds in corpus/syslog-frame/ are written by hand (not by
 * make-seeds.py). */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "syslog_frame.h"

static const size_t limits[] = { 1, 2, 3, 4, 5, 8, 10, 16, 31, 64, 100, 1000, 65536, 1 << 20 };

/* A message or a cut, where it lies in the stream. */
struct rec {
    enum syslog_frame_kind kind;
    size_t offset;
    size_t len;
};

struct outcome {
    struct rec *recs;
    size_t n;
    size_t discarded;
    size_t consumed;
    int end;
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* RFC 6587 as syslog_frame.h describes it, the simple way: the whole
 * stream at hand, no state. */
static void model(const char *s, size_t n, size_t max, struct outcome *out)
{
    size_t pos = 0;

    out->end = -ENODATA;
    if (n > 0 && s[0] >= '1' && s[0] <= '9') {
        while (pos < n) {
            size_t value = 0, i = pos;

            if (s[pos] < '1' || s[pos] > '9') {
                out->end = -EBADMSG;
                break;
            }
            while (i < n && is_digit(s[i]) && value <= max)
                value = value * 10 + (size_t)(s[i++] - '0');
            if (value > max) {
                out->end = -EMSGSIZE;
                break;
            }
            if (i == n || (s[i] == ' ' && n - (i + 1) < value)) {
                out->end = -EPIPE;
                break;
            }
            if (s[i] != ' ') {
                out->end = -EBADMSG;
                break;
            }
            out->recs[out->n++] = (struct rec){ SYSLOG_FRAME_MESSAGE, i + 1, value };
            pos = i + 1 + value;
        }
    } else {
        while (pos < n) {
            size_t e = pos, content, total;

            while (e < n && s[e] != '\n' && s[e] != '\0')
                e++;
            content = e - pos;
            if (e < n && s[e] == '\n' && content > 0 && s[e - 1] == '\r')
                content--;
            total = e < n ? e + 1 - pos : e - pos;
            if (content <= max) {
                out->recs[out->n++] = (struct rec){ SYSLOG_FRAME_MESSAGE, pos, content };
            } else {
                out->recs[out->n++] = (struct rec){ SYSLOG_FRAME_CUT, pos, max };
                out->discarded += total - max;
            }
            pos += total;
        }
    }
    out->consumed = pos;
}

static bool same_frame(const struct syslog_frame *a, const struct syslog_frame *b)
{
    return a->kind == b->kind && a->msg == b->msg && a->msg_len == b->msg_len &&
           a->consumed == b->consumed;
}

/* One call, with every per-call contract checked. */
static int call(struct syslog_framer *f, bool finishing, const char *buf, size_t len,
                struct syslog_frame *ret)
{
    static const struct syslog_frame sentinel = { .kind = SYSLOG_FRAME_DISCARDED,
                                                  .msg = (const char *)&sentinel,
                                                  .msg_len = 4242,
                                                  .consumed = 4343 };
    size_t max = f->max_message_bytes;
    enum syslog_framing framing;
    struct syslog_frame frame = sentinel;
    int r = finishing ? syslog_framer_finish(f, buf, len, &frame)
                      : syslog_framer_next(f, buf, len, &frame);

    framing = syslog_framer_framing(f);
    if (len > 0)
        FUZZ_CHECK(framing != SYSLOG_FRAMING_UNKNOWN);
    if (r != 0) {
        FUZZ_CHECK(same_frame(&frame, &sentinel));
        if (r == -EAGAIN) {
            FUZZ_CHECK(!finishing);
            FUZZ_CHECK(len < syslog_framer_buffer_size(max));
            return r;
        }
        if (r == -ENODATA) {
            FUZZ_CHECK(finishing && len == 0);
            return r;
        }
        FUZZ_CHECK(r == -EBADMSG || r == -EMSGSIZE || (finishing && r == -EPIPE));
        FUZZ_CHECK(framing == SYSLOG_FRAMING_OCTET_COUNTING);
        /* Broken for good. */
        FUZZ_CHECK(syslog_framer_next(f, buf, len, &frame) == r);
        FUZZ_CHECK(syslog_framer_finish(f, buf, len, &frame) == r);
        FUZZ_CHECK(same_frame(&frame, &sentinel));
        return r;
    }

    FUZZ_CHECK(frame.consumed >= 1 && frame.consumed <= len);
    switch (frame.kind) {
    case SYSLOG_FRAME_DISCARDED:
        FUZZ_CHECK(framing == SYSLOG_FRAMING_NON_TRANSPARENT);
        FUZZ_CHECK(frame.msg == NULL && frame.msg_len == 0);
        break;
    case SYSLOG_FRAME_CUT:
        FUZZ_CHECK(framing == SYSLOG_FRAMING_NON_TRANSPARENT);
        FUZZ_CHECK(frame.msg == buf && frame.msg_len == max && frame.consumed == max);
        break;
    case SYSLOG_FRAME_MESSAGE:
        FUZZ_CHECK(frame.msg != NULL && frame.msg >= buf && frame.msg_len <= max);
        FUZZ_CHECK((size_t)(frame.msg - buf) + frame.msg_len <= frame.consumed);
        if (framing == SYSLOG_FRAMING_NON_TRANSPARENT) {
            FUZZ_CHECK(frame.msg == buf);
            FUZZ_CHECK(!memchr(frame.msg, '\n', frame.msg_len));
            FUZZ_CHECK(!memchr(frame.msg, '\0', frame.msg_len));
            /* The line end: nothing (the last line), LF, NUL or CR LF. */
            FUZZ_CHECK(frame.consumed - frame.msg_len <= 2);
        } else {
            FUZZ_CHECK(framing == SYSLOG_FRAMING_OCTET_COUNTING);
            FUZZ_CHECK(frame.msg + frame.msg_len == buf + frame.consumed);
            FUZZ_CHECK(frame.msg_len >= 1 && frame.msg[-1] == ' ');
        }
        break;
    default:
        FUZZ_CHECK(!"unknown frame kind");
    }
    *ret = frame;
    return 0;
}

/* The connection read in pieces: whole when seed is 0, else in reads of
 * 1 to 1 + seed % 32 bytes chosen by a small generator. */
static void run(const char *s, size_t n, size_t max, unsigned seed, struct outcome *out)
{
    struct syslog_framer f;
    uint32_t lcg = seed * 2654435761u + 1;
    size_t fed = 0;
    bool finishing = false;

    FUZZ_CHECK(syslog_framer_init(&f, max) == 0);
    FUZZ_CHECK(syslog_framer_framing(&f) == SYSLOG_FRAMING_UNKNOWN);
    for (;;) {
        size_t pending = fed - out->consumed;
        char *buf = malloc(pending ? pending : 1);
        struct syslog_frame frame;
        int r;

        FUZZ_CHECK(buf);
        memcpy(buf, s + out->consumed, pending);
        r = call(&f, finishing, buf, pending, &frame);
        if (r == 0 && frame.kind != SYSLOG_FRAME_DISCARDED)
            out->recs[out->n++] = (struct rec){ frame.kind,
                                                out->consumed + (size_t)(frame.msg - buf),
                                                frame.msg_len };
        free(buf);
        if (r == 0) {
            if (frame.kind == SYSLOG_FRAME_DISCARDED)
                out->discarded += frame.consumed;
            out->consumed += frame.consumed;
            continue;
        }
        if (r == -EAGAIN) {
            if (fed == n) {
                finishing = true;
            } else if (seed == 0) {
                fed = n;
            } else {
                size_t step;

                lcg = lcg * 1103515245u + 12345u;
                step = 1 + (lcg >> 16) % (1 + seed % 32);
                fed = step < n - fed ? fed + step : n;
            }
            continue;
        }
        out->end = r;
        break;
    }
}

static void compare(const struct outcome *a, const struct outcome *b)
{
    FUZZ_CHECK(a->n == b->n);
    FUZZ_CHECK(a->discarded == b->discarded);
    FUZZ_CHECK(a->end == b->end);
    for (size_t i = 0; i < a->n; i++) {
        FUZZ_CHECK(a->recs[i].kind == b->recs[i].kind);
        FUZZ_CHECK(a->recs[i].offset == b->recs[i].offset);
        FUZZ_CHECK(a->recs[i].len == b->recs[i].len);
    }
    /* Where the stream stopped: all of it after a clean end; an error
     * leaves the frame it could not read. */
    FUZZ_CHECK(a->consumed == b->consumed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct outcome want = { 0 }, whole = { 0 }, parts = { 0 };
    const char *s;
    size_t n, max;

    if (size < 2)
        return 0;
    max = limits[data[0] % (sizeof(limits) / sizeof(limits[0]))];
    s = (const char *)data + 2;
    n = size - 2;
    /* At most one message or cut per byte, and one more. */
    want.recs = malloc((n + 1) * sizeof(struct rec));
    whole.recs = malloc((n + 1) * sizeof(struct rec));
    parts.recs = malloc((n + 1) * sizeof(struct rec));
    FUZZ_CHECK(want.recs && whole.recs && parts.recs);

    model(s, n, max, &want);
    run(s, n, max, 0, &whole);
    run(s, n, max, 1u + data[1], &parts);
    compare(&want, &whole);
    compare(&want, &parts);
    if (want.end == -ENODATA)
        FUZZ_CHECK(whole.consumed == n);

    free(want.recs);
    free(whole.recs);
    free(parts.recs);
    return 0;
}
