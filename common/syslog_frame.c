/* The framer of a syslog stream connection; syslog_frame.h gives the
 * contract. Each state has its own reader below; syslog_framer_next only
 * dispatches. The caller's buffer is never written and never read past
 * len. */
#include "syslog_frame.h"

#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

/* No line end in buf[from..to). */
#define NOT_FOUND SIZE_MAX

int syslog_framer_init(struct syslog_framer *f, size_t max_message_bytes)
{
    if (max_message_bytes < 1 || max_message_bytes > SYSLOG_FRAME_MAX_LIMIT)
        return -EINVAL;
    *f = (struct syslog_framer){
        .state = SYSLOG_FRAMER_DETECTING,
        .max_message_bytes = max_message_bytes,
    };
    return 0;
}

size_t syslog_framer_buffer_size(size_t max_message_bytes)
{
    size_t digits = 1;

    for (size_t v = max_message_bytes; v >= 10; v /= 10)
        digits++;
    /* digits + 1 >= 2, so this also holds a line, its CR and its LF. */
    return digits + 1 + max_message_bytes;
}

enum syslog_framing syslog_framer_framing(const struct syslog_framer *f)
{
    switch (f->state) {
    case SYSLOG_FRAMER_DETECTING:
        return SYSLOG_FRAMING_UNKNOWN;
    case SYSLOG_FRAMER_OCTET_COUNTING:
    case SYSLOG_FRAMER_BROKEN: /* only octet counting breaks */
        return SYSLOG_FRAMING_OCTET_COUNTING;
    case SYSLOG_FRAMER_NON_TRANSPARENT:
    case SYSLOG_FRAMER_DISCARDING:
        return SYSLOG_FRAMING_NON_TRANSPARENT;
    }
    assert(!"unknown framer state");
    return SYSLOG_FRAMING_UNKNOWN;
}

static int frame(struct syslog_frame *ret, enum syslog_frame_kind kind, const char *msg,
                 size_t msg_len, size_t consumed)
{
    assert(consumed >= 1);
    *ret = (struct syslog_frame){
        .kind = kind, .msg = msg, .msg_len = msg_len, .consumed = consumed
    };
    return 0;
}

/* Once octet counting has misread a length, no later byte can be trusted
 * to start a frame: the framer stays broken. */
static int broken(struct syslog_framer *f, int error)
{
    f->state = SYSLOG_FRAMER_BROKEN;
    f->error = error;
    return error;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* The first LF or NUL in buf[from..to), or NOT_FOUND. memchr twice rather
 * than a byte loop: it is the one scan over every byte of a connection. */
static size_t find_line_end(const char *buf, size_t from, size_t to)
{
    const char *lf, *nul;
    size_t stop;

    if (from >= to)
        return NOT_FOUND;
    lf = memchr(buf + from, '\n', to - from);
    stop = lf ? (size_t)(lf - buf) : to;
    nul = memchr(buf + from, '\0', stop - from);
    if (nul)
        return (size_t)(nul - buf);
    return lf ? (size_t)(lf - buf) : NOT_FOUND;
}

static int next_octet_counted(struct syslog_framer *f, const char *buf, size_t len,
                              struct syslog_frame *ret)
{
    size_t max = f->max_message_bytes, value = 0, i = 0;

    if (len == 0)
        return -EAGAIN;
    if (buf[0] < '1' || buf[0] > '9')
        return broken(f, -EBADMSG);
    for (; i < len && is_digit(buf[i]); i++) {
        size_t d = (size_t)(buf[i] - '0');

        /* value <= max / 10 keeps value * 10 far from overflowing. */
        if (value > max / 10 || value * 10 + d > max)
            return broken(f, -EMSGSIZE);
        value = value * 10 + d;
    }
    if (i == len)
        return -EAGAIN;
    if (buf[i] != ' ')
        return broken(f, -EBADMSG);
    i++;
    if (len - i < value)
        return -EAGAIN;
    return frame(ret, SYSLOG_FRAME_MESSAGE, buf + i, value, i + value);
}

/* The beginning of an over-long line: max bytes now, the rest dropped. */
static int cut_line(struct syslog_framer *f, const char *buf, struct syslog_frame *ret)
{
    f->searched = 0;
    f->state = SYSLOG_FRAMER_DISCARDING;
    return frame(ret, SYSLOG_FRAME_CUT, buf, f->max_message_bytes, f->max_message_bytes);
}

static int next_line(struct syslog_framer *f, const char *buf, size_t len,
                     struct syslog_frame *ret)
{
    size_t max = f->max_message_bytes;
    /* A whole line of max bytes may need max + 2: its CR and LF. */
    size_t limit = max + 2, to = len < limit ? len : limit;
    size_t from = f->searched <= to ? f->searched : 0;
    size_t end = find_line_end(buf, from, to);

    if (end != NOT_FOUND) {
        size_t msg_len = end;

        if (buf[end] == '\n' && end > 0 && buf[end - 1] == '\r')
            msg_len--;
        if (msg_len > max)
            return cut_line(f, buf, ret);
        f->searched = 0;
        return frame(ret, SYSLOG_FRAME_MESSAGE, buf, msg_len, end + 1);
    }
    /* No line end within reach: the line is over the limit unless a CR
     * right after max bytes may still turn out to be its line end. */
    if (len >= limit || (len == max + 1 && buf[max] != '\r'))
        return cut_line(f, buf, ret);
    f->searched = to;
    return -EAGAIN;
}

static int next_discarded(struct syslog_framer *f, const char *buf, size_t len,
                          struct syslog_frame *ret)
{
    size_t end;

    if (len == 0)
        return -EAGAIN;
    end = find_line_end(buf, 0, len);
    if (end == NOT_FOUND)
        return frame(ret, SYSLOG_FRAME_DISCARDED, NULL, 0, len);
    f->state = SYSLOG_FRAMER_NON_TRANSPARENT;
    return frame(ret, SYSLOG_FRAME_DISCARDED, NULL, 0, end + 1);
}

int syslog_framer_next(struct syslog_framer *f, const char *buf, size_t len,
                       struct syslog_frame *ret_frame)
{
    switch (f->state) {
    case SYSLOG_FRAMER_DETECTING:
        if (len == 0)
            return -EAGAIN;
        /* RFC 6587, 3.4.1 and 3.4.2: MSG-LEN starts with a non-zero digit,
         * a syslog message with '<'. */
        f->state = buf[0] >= '1' && buf[0] <= '9' ? SYSLOG_FRAMER_OCTET_COUNTING
                                                  : SYSLOG_FRAMER_NON_TRANSPARENT;
        return syslog_framer_next(f, buf, len, ret_frame);
    case SYSLOG_FRAMER_OCTET_COUNTING:
        return next_octet_counted(f, buf, len, ret_frame);
    case SYSLOG_FRAMER_NON_TRANSPARENT:
        return next_line(f, buf, len, ret_frame);
    case SYSLOG_FRAMER_DISCARDING:
        return next_discarded(f, buf, len, ret_frame);
    case SYSLOG_FRAMER_BROKEN:
        return f->error;
    }
    assert(!"unknown framer state");
    return -EINVAL;
}

int syslog_framer_finish(struct syslog_framer *f, const char *buf, size_t len,
                         struct syslog_frame *ret_frame)
{
    int r = syslog_framer_next(f, buf, len, ret_frame);

    if (r != -EAGAIN)
        return r;
    if (len == 0)
        return -ENODATA;
    switch (f->state) {
    case SYSLOG_FRAMER_OCTET_COUNTING:
        return broken(f, -EPIPE);
    case SYSLOG_FRAMER_NON_TRANSPARENT:
        /* next_line cuts anything longer than max + 1 bytes already. */
        assert(len <= f->max_message_bytes + 1);
        if (len > f->max_message_bytes)
            return cut_line(f, buf, ret_frame);
        f->searched = 0;
        return frame(ret_frame, SYSLOG_FRAME_MESSAGE, buf, len, len);
    case SYSLOG_FRAMER_DETECTING: /* left with the first byte */
    case SYSLOG_FRAMER_DISCARDING: /* consumes whatever it is given */
    case SYSLOG_FRAMER_BROKEN: /* never -EAGAIN */
        break;
    }
    assert(!"syslog_framer_next wanted more in a state that cannot");
    return -EINVAL;
}
