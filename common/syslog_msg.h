/* One syslog message, as the syslog inputs receive it: a datagram of the
 * /dev/log socket, or one frame of a stream connection (syslog_frame.h).
 * The bytes come from any local process, so nothing in them is trusted:
 * the parser reads RFC 5424 and RFC 3164 (the BSD format, as glibc's
 * syslog(3), util-linux logger and Python's SysLogHandler really send it)
 * and reports what it could find. It never fails on content: a message it
 * cannot read is still a message, reported as SYSLOG_FORMAT_NONE with the
 * whole input as its text.
 *
 * What the text says (identifier, pid, hostname) is the sender's claim; the
 * kernel's credentials (SCM_CREDENTIALS) are what the daemon trusts.
 *
 * Pure functions: no allocation, no I/O, no logging. Every field is a slice
 * of the caller's bytes, valid as long as they are. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How a message was read. */
enum syslog_format {
    /* No valid PRI at the start ("<0>" to "<191>"): nothing was read, the
     * whole input is the message. A kernel-style line without PRI, or
     * garbage. */
    SYSLOG_FORMAT_NONE = 0,
    /* A valid PRI, then the BSD reading: any of TIMESTAMP, HOSTNAME and
     * TAG[pid]: that is there (each may be missing), then the text. Also
     * what a message claiming RFC 5424 ("<PRI>1 ") becomes when its header
     * is malformed. */
    SYSLOG_FORMAT_RFC3164,
    /* A valid PRI, version 1, and every header field well formed. */
    SYSLOG_FORMAT_RFC5424,
};

/* facility and severity when the message has no valid PRI. */
#define SYSLOG_ABSENT (-1)

/* The largest valid PRI: facility 23 (local7), severity 7 (debug). */
#define SYSLOG_PRI_MAX 191

/* Length limits of header fields (RFC 5424, section 6). A token longer than
 * its limit makes the RFC 5424 header malformed; in the BSD reading a tag
 * longer than SYSLOG_APP_NAME_MAX is not taken for a tag. */
#define SYSLOG_HOSTNAME_MAX 255u
#define SYSLOG_APP_NAME_MAX 48u
#define SYSLOG_PROCID_MAX 128u
#define SYSLOG_MSGID_MAX 32u
#define SYSLOG_SD_NAME_MAX 32u

/* Part of the caller's bytes. ptr is NULL (and len 0) when the field is
 * absent, including an RFC 5424 NILVALUE "-"; a present field may be
 * empty only for the message. */
struct syslog_slice {
    const char *ptr;
    size_t len;
};

struct syslog_msg {
    enum syslog_format format;
    /* 0 to 23 and 0 to 7 from the PRI, or both SYSLOG_ABSENT (and only
     * then) when format is SYSLOG_FORMAT_NONE. */
    int facility;
    int severity;
    /* The timestamp as written (absent when the message has none or
     * RFC 5424's "-"), and, when has_time, the instant it names in ns since
     * the epoch (UTC). A stamp that is well formed but outside what the
     * u64 can hold (before 1970, after 2554) keeps its text and has no
     * time. time_ns is 0 without has_time. How an RFC 3164 stamp, which
     * has neither year nor zone, is resolved: syslog_msg_parse. */
    struct syslog_slice time_text;
    bool has_time;
    uint64_t time_ns;
    /* RFC 5424 HOSTNAME; in RFC 3164 the word before the TAG, when there
     * is one (glibc and logger over a Unix socket send none). */
    struct syslog_slice hostname;
    /* RFC 5424 APP-NAME; in RFC 3164 the TAG, the identifier before '['
     * or ':'. */
    struct syslog_slice app_name;
    /* RFC 5424 PROCID; in RFC 3164 the text between '[' and ']' after the
     * TAG. Text, not a number: the sender may write anything there. */
    struct syslog_slice procid;
    /* RFC 5424 only. */
    struct syslog_slice msgid;
    /* RFC 5424 only: every SD-ELEMENT, "[id k=\"v\"]...", verbatim, escapes
     * untouched; absent for "-". */
    struct syslog_slice structured_data;
    /* The text: everything after the header, to the end of the input
     * (with SYSLOG_FORMAT_NONE the whole input). Always present, maybe
     * empty. In RFC 5424 a leading UTF-8 BOM is left out of it and noted
     * in message_bom. */
    struct syslog_slice message;
    bool message_bom;
};

/* Reads one message from data[0..len). Never fails: a message that does
 * not parse is reported as SYSLOG_FORMAT_NONE with the whole input as its
 * message. *ret_msg is always written; its slices point into data (for an
 * empty input, the message is an empty slice that may point elsewhere).
 *
 * The rules, beyond the RFCs' grammar:
 *  - PRI: '<', one to three digits, '>', at most 191. Leading zeros are
 *    accepted ("<013>" is 13; relays pad). Anything else is no PRI.
 *  - RFC 5424 is tried when the PRI is followed by "1 ". It is all or
 *    nothing: when any header field is malformed (a bad timestamp, a token
 *    over its length limit or with a byte outside '!'..'~', broken
 *    structured data, no SP after it) the message is read the BSD way
 *    instead, from after the PRI. Its timestamp: FULL-DATE "T" FULL-TIME
 *    with 'T' and 'Z' upper case, 1 to 9 fraction digits (RFC 5424 allows
 *    6; ns are kept), "Z" or an offset "+hh:mm"/"-hh:mm"; no leap second.
 *  - BSD reading: a timestamp "Mmm dd hh:mm:ss" (day space or zero padded,
 *    English month abbreviations, followed by a space or the end), then a
 *    TAG: 1 to 48 bytes of '!'..'~' other than ':', '[' and ']', then
 *    optionally "[procid]", then ':' followed by a space or the end (the
 *    one space belongs to the header). A word before the TAG is the
 *    HOSTNAME; when neither the first nor the second word is a TAG, there
 *    is neither hostname nor TAG and the text starts after the timestamp.
 *    Without a timestamp (Python's handler, "<14>text"), a TAG is still
 *    looked for at the start, with no hostname before it. "http://x" is no
 *    TAG: the ':' must be followed by a space or the end.
 *  - RFC 3164 time: the stamp has no year and no zone. It is read in local
 *    time through mktime(3), so in the zone of the TZ in effect (the
 *    daemon calls tzset() once at start; an ambiguous time at a DST change
 *    is mktime's choice). The year is the latest one that puts the stamp
 *    no more than one day after reference_ns (the receive time, ns since
 *    the epoch): a stamp of Dec 31 received on Jan 1 is from last year, one
 *    of Jan 1 received late on Dec 31 from a sender whose clock runs ahead
 *    is from next year, and Feb 29 goes back to the last leap year (at
 *    most eight years). No such year: has_time is false. This costs one
 *    mktime(3) per stamp as a rule (two across New Year), and glibc's
 *    mktime stats /etc/localtime on every call: a caller that needs only
 *    the identifier calls syslog_msg_identifier instead.
 *
 * The parser does not strip what senders append: call
 * syslog_msg_strip_trailer first and parse what it leaves. */
void syslog_msg_parse(const char *data, size_t len, uint64_t reference_ns,
                      struct syslog_msg *ret_msg);

/* The app_name syslog_msg_parse would find in data[0..len) (absent: ptr
 * NULL), found the same way but without resolving an RFC 3164 stamp's
 * year, which is most of the cost of a parse. */
struct syslog_slice syslog_msg_identifier(const char *data, size_t len);

/* The length of data[0..len) without what senders append after a message:
 * every trailing NUL byte (Python's SysLogHandler, glibc's syslog(3) on a
 * stream socket), then one trailing "\n" or "\r\n" (logger). "text\n\0"
 * becomes "text"; "text\n\n" becomes "text\n" (only one line end is the
 * sender's). The stored payload is data[0..returned length). */
size_t syslog_msg_strip_trailer(const char *data, size_t len);

/* The producer name for a connectionless sender (a datagram), derived
 * from the identifier its message claims and the uid the kernel vouches
 * for, so that one user cannot write into the shards of another's program
 * under the same identifier. The rule:
 *
 *   <name>.u<uid>
 *
 * where <name> is the identifier (app_name) cut to its first
 * SYSLOG_PRODUCER_IDENT_MAX bytes, with every byte outside [A-Za-z0-9._-]
 * replaced by '_', and a first byte '.' or '-' replaced by '_'; an absent
 * or empty identifier gives SYSLOG_PRODUCER_FALLBACK. <uid> is decimal.
 * So "sshd" of uid 0 is "sshd.u0", "postfix/smtpd" of uid 106 is
 * "postfix_smtpd.u106", "-x" is "_x.u1000", no identifier is "syslog.u0".
 * Distinct identifiers may share a name ("a/b" and "a_b"); their records
 * keep their own text. The result always passes wire_check_hello_name
 * (and so wire_check_producer_name): never a path, never an option.
 *
 * Writes the name and a NUL to out (size bytes; SYSLOG_PRODUCER_NAME_SIZE
 * is always enough) and returns its length, or -ENOBUFS when it does not
 * fit (out untouched). */
#define SYSLOG_PRODUCER_IDENT_MAX 48u
#define SYSLOG_PRODUCER_FALLBACK "syslog"
/* ".u" and the 10 digits of the largest uid. */
#define SYSLOG_PRODUCER_NAME_SIZE (SYSLOG_PRODUCER_IDENT_MAX + 12u + 1u)
int syslog_producer_name(const char *ident, size_t ident_len, uid_t uid, char *out, size_t size);
