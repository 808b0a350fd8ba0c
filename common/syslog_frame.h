/* Framing of a syslog stream connection (a Unix stream socket): where one
 * message ends and the next begins. RFC 6587 knows two framings, and a
 * connection uses one, told apart by its first byte:
 *  - octet counting, "MSG-LEN SP MSG": the length in decimal (no leading
 *    zero), one space, then exactly that many bytes, which may hold any
 *    byte, newlines included (logger --octet-count). A first byte '1' to
 *    '9' means this framing;
 *  - non-transparent framing: each message ends at a LF (logger's default
 *    on a stream socket; a CR just before the LF is part of the line end)
 *    or at a NUL (Python's SysLogHandler, glibc's syslog(3) over a stream
 *    socket). Any other first byte, '<' as a rule, means this framing.
 * A connection that starts with a digit but means newline framing (a line
 * without PRI, "42 apples\n") is read as octet counted and fails there;
 * syslog senders start with "<PRI>".
 *
 * The framer is incremental and allocation-free: the caller keeps the
 * bytes it has read in its own buffer and asks for the next message until
 * the framer needs more. It never copies; messages are slices of that
 * buffer. No I/O, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* The framing of a connection, once its first byte is known. */
enum syslog_framing {
    SYSLOG_FRAMING_UNKNOWN = 0, /* no byte seen yet */
    SYSLOG_FRAMING_OCTET_COUNTING,
    SYSLOG_FRAMING_NON_TRANSPARENT,
};

/* Where a connection is; one state, no flags beside it. */
enum syslog_framer_state {
    SYSLOG_FRAMER_DETECTING,       /* no byte seen yet */
    SYSLOG_FRAMER_OCTET_COUNTING,  /* at the start of a "MSG-LEN SP MSG" frame */
    SYSLOG_FRAMER_NON_TRANSPARENT, /* at the start of a line */
    SYSLOG_FRAMER_DISCARDING,      /* inside an over-long line, after its cut */
    SYSLOG_FRAMER_BROKEN,          /* octet counting lost its place: error holds why */
};

/* One connection's framer. Fill it with syslog_framer_init; its members
 * are for the framer (read them through the calls below). */
struct syslog_framer {
    enum syslog_framer_state state;
    size_t max_message_bytes;
    /* Non-transparent framing: how many bytes at the start of the caller's
     * buffer are already known to hold no line end, so that a long line
     * arriving in small reads is searched once, not once per read. */
    size_t searched;
    /* SYSLOG_FRAMER_BROKEN: the negative errno every call returns. */
    int error;
};

/* The largest max_message_bytes a framer takes: far above any sensible
 * limit, low enough that no length arithmetic can overflow. */
#define SYSLOG_FRAME_MAX_LIMIT ((size_t)1 << 30)

enum syslog_frame_kind {
    /* msg[0..msg_len) is a whole message, without its framing: no length
     * field, no LF, CR LF or NUL at the end. Non-transparent framing can
     * give an empty message (an empty line, or the NUL after "\n" that
     * some senders add): there is nothing to store. A message goes on as
     * a datagram does: through syslog_msg_strip_trailer (a sender may
     * still end an octet-counted message with a newline), then
     * syslog_msg_parse. */
    SYSLOG_FRAME_MESSAGE,
    /* Non-transparent framing only: a line longer than max_message_bytes.
     * msg[0..max_message_bytes) is its beginning; the framer drops the rest
     * of the line itself, as SYSLOG_FRAME_DISCARDED frames, and reads on
     * from the next line. What the caller does: store msg as the message
     * (cut, as every syslog daemon cuts over-long lines), count it and say
     * so in its log, and count the discarded bytes. The connection stays
     * usable. */
    SYSLOG_FRAME_CUT,
    /* Non-transparent framing only: consumed bytes of an over-long line
     * after its cut (up to and including its line end once it comes),
     * dropped; msg is NULL and msg_len 0. */
    SYSLOG_FRAME_DISCARDED,
};

struct syslog_frame {
    enum syslog_frame_kind kind;
    const char *msg; /* points into the caller's buffer; NULL when discarded */
    size_t msg_len;
    /* Bytes at the start of the buffer this frame used, framing included:
     * always at least 1, at most the bytes given. The caller drops them
     * before the next call. */
    size_t consumed;
};

/* Makes f the framer of a new connection whose messages may be up to
 * max_message_bytes long (1 to SYSLOG_FRAME_MAX_LIMIT). Returns 0, or
 * -EINVAL for a limit out of that range (f untouched). */
int syslog_framer_init(struct syslog_framer *f, size_t max_message_bytes);

/* The smallest buffer that can hold any frame of a connection whose limit
 * is max_message_bytes: the longest length field, its space and a message
 * of the largest size (which also covers a line of max_message_bytes, its
 * CR and its LF). A caller whose buffer holds this many bytes always gets
 * progress from syslog_framer_next once it is full; a smaller one can wait
 * forever. */
size_t syslog_framer_buffer_size(size_t max_message_bytes);

/* The next frame from buf[0..len), the connection's bytes that earlier calls
 * did not consume followed by what has been read since: between calls the
 * caller drops exactly the consumed bytes and appends, nothing else (the
 * framer remembers how far it has searched). The first call with at least
 * one byte decides the framing.
 *
 * Returns 0 with *ret_frame (see its kinds), or:
 *   -EAGAIN    no whole frame yet: read more and call again (nothing is
 *              consumed; len 0 always gives this);
 *   -EBADMSG   octet counting: the length field is not "NONZERO-DIGIT
 *              *DIGIT SP" (a letter, a leading zero, a space with no digit
 *              before it);
 *   -EMSGSIZE  octet counting: the length is over max_message_bytes; said
 *              as soon as its digits pass the limit, without waiting for
 *              the rest of the field.
 * Either error leaves the connection with no way to find the next frame:
 * the framer stays broken and returns the same error on every later call;
 * the caller logs it and closes the connection. ret_frame is written only
 * on success. */
int syslog_framer_next(struct syslog_framer *f, const char *buf, size_t len,
                       struct syslog_frame *ret_frame);

/* For the end of a connection: once the peer has closed it, call this in a
 * loop on the bytes left (as syslog_framer_next) until it returns
 * -ENODATA. It returns the frames syslog_framer_next would, and then what
 * is left: in non-transparent framing a last line without its line end is
 * a message (a cut one when it is over the limit) and the rest of an
 * over-long line is discarded.
 *
 * Returns 0 with *ret_frame, or:
 *   -ENODATA   nothing is left (len is 0, or the connection sent nothing);
 *   -EPIPE     octet counting: the connection ended inside a frame, whose
 *              bytes are lost;
 *   -EBADMSG, -EMSGSIZE  as syslog_framer_next.
 * ret_frame is written only on success. */
int syslog_framer_finish(struct syslog_framer *f, const char *buf, size_t len,
                         struct syslog_frame *ret_frame);

/* The framing the connection turned out to use, for log lines and
 * figures; SYSLOG_FRAMING_UNKNOWN until the first byte. */
enum syslog_framing syslog_framer_framing(const struct syslog_framer *f);
