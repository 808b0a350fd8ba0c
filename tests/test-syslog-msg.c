/* Unit tests for common/syslog_msg.c: one syslog message read as RFC 5424,
 * RFC 3164 or neither, the trailer senders append, and the producer name
 * of a connectionless sender. The samples marked "real" are the bytes the
 * named sender wrote, captured on a Unix datagram socket (util-linux
 * logger 2.38, glibc 2.36 syslog(3), Python 3.11 SysLogHandler). The
 * program runs with TZ=UTC unless a test says otherwise. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "syslog_msg.h"
#include "wire.h"

#define NS 1000000000ull

/* ns since the epoch of a UTC date and time. */
static uint64_t utc_ns(int year, int month, int day, int hour, int minute, int second)
{
    struct tm tm = { .tm_year = year - 1900, .tm_mon = month - 1, .tm_mday = day,
                     .tm_hour = hour, .tm_min = minute, .tm_sec = second };
    time_t t = timegm(&tm);

    assert_true(t >= 0);
    return (uint64_t)t * NS;
}

static void use_tz(const char *tz)
{
    assert_int_equal(setenv("TZ", tz, 1), 0);
    tzset();
}

/* want NULL: the field must be absent. */
#define assert_slice(s, want) check_slice((s), (want), #s, __LINE__)
static void check_slice(struct syslog_slice s, const char *want, const char *what, int line)
{
    if (!want) {
        if (s.ptr || s.len)
            fail_msg("line %d: %s: want absent, got \"%.*s\"", line, what, (int)s.len,
                     s.ptr ? s.ptr : "");
        return;
    }
    if (!s.ptr)
        fail_msg("line %d: %s: want \"%s\", got absent", line, what, want);
    if (s.len != strlen(want) || memcmp(s.ptr, want, s.len) != 0)
        fail_msg("line %d: %s: want \"%s\", got \"%.*s\"", line, what, want, (int)s.len, s.ptr);
}

/* Parses the string s (without its NUL) and checks that every slice lies
 * in it and the message runs to its end, as the header promises. */
static struct syslog_msg parse_at(const char *s, size_t len, uint64_t reference_ns)
{
    const struct syslog_slice *fields[7];
    struct syslog_msg m;

    memset(&m, 0x5a, sizeof(m));
    syslog_msg_parse(s, len, reference_ns, &m);
    fields[0] = &m.time_text;
    fields[1] = &m.hostname;
    fields[2] = &m.app_name;
    fields[3] = &m.procid;
    fields[4] = &m.msgid;
    fields[5] = &m.structured_data;
    fields[6] = &m.message;
    for (size_t i = 0; i < 7; i++) {
        const struct syslog_slice *f = fields[i];
        if (!f->ptr) {
            assert_int_equal(f->len, 0);
            continue;
        }
        assert_true(f->ptr >= s && f->ptr + f->len <= s + len);
    }
    assert_non_null(m.message.ptr);
    assert_ptr_equal(m.message.ptr + m.message.len, s + len);
    /* The daemon's shortcut to the identifier finds the same one. */
    {
        struct syslog_slice id = syslog_msg_identifier(s, len);

        assert_ptr_equal(id.ptr, m.app_name.ptr);
        assert_int_equal(id.len, m.app_name.len);
    }
    return m;
}

/* Reference time of most tests: a few seconds after the real samples. */
#define REF utc_ns(2026, 12, 2, 16, 25, 40)

static struct syslog_msg parse(const char *s)
{
    return parse_at(s, strlen(s), REF);
}

static void assert_none(const char *s, size_t len)
{
    struct syslog_msg m = parse_at(s, len, REF);

    if (m.format != SYSLOG_FORMAT_NONE)
        fail_msg("\"%.*s\": want format none, got %d", (int)len, s, m.format);
    assert_int_equal(m.facility, SYSLOG_ABSENT);
    assert_int_equal(m.severity, SYSLOG_ABSENT);
    assert_false(m.has_time);
    assert_slice(m.time_text, NULL);
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, NULL);
    assert_slice(m.procid, NULL);
    assert_ptr_equal(m.message.ptr, s);
    assert_int_equal(m.message.len, len);
}

/* ---- real senders ---- */

static void test_glibc(void **state)
{
    /* syslog(3) after openlog("gtest", LOG_PID, LOG_DAEMON), LOG_WARNING. */
    struct syslog_msg m = parse("<28>Dec  2 16:25:31 gtest[19864]: glibc says 42");
    (void)state;

    assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
    assert_int_equal(m.facility, 3);
    assert_int_equal(m.severity, 4);
    assert_slice(m.time_text, "Dec  2 16:25:31");
    assert_true(m.has_time);
    assert_true(m.time_ns == utc_ns(2026, 12, 2, 16, 25, 31));
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, "gtest");
    assert_slice(m.procid, "19864");
    assert_slice(m.msgid, NULL);
    assert_slice(m.structured_data, NULL);
    assert_slice(m.message, "glibc says 42");
    assert_false(m.message_bom);

    /* openlog(NULL, 0, LOG_USER): the program's name, no pid. */
    m = parse("<14>Dec  2 16:25:31 g: no ident");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
    assert_int_equal(m.facility, 1);
    assert_int_equal(m.severity, 6);
    assert_slice(m.app_name, "g");
    assert_slice(m.procid, NULL);
    assert_slice(m.hostname, NULL);
    assert_slice(m.message, "no ident");
}

static void test_logger_rfc3164(void **state)
{
    /* logger -u PATH --rfc3164 -t myapp "hello 3164": with a hostname. */
    struct syslog_msg m = parse("<13>Dec  2 16:15:17 vm myapp: hello 3164");
    (void)state;

    assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
    assert_int_equal(m.facility, 1);
    assert_int_equal(m.severity, 5);
    assert_true(m.has_time);
    assert_true(m.time_ns == utc_ns(2026, 12, 2, 16, 15, 17));
    assert_slice(m.hostname, "vm");
    assert_slice(m.app_name, "myapp");
    assert_slice(m.procid, NULL);
    assert_slice(m.message, "hello 3164");

    /* logger -u PATH "hello default": on a Unix socket logger's default is
     * the local format, without hostname. */
    m = parse("<13>Dec  2 16:15:17 root: hello default");
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, "root");
    assert_slice(m.message, "hello default");
}

static void test_logger_rfc5424(void **state)
{
    /* logger --rfc5424 -t myapp --id=4242 --msgid ID47 --sd-id
     * exampleSDID@32473 --sd-param 'iut="3"' --sd-param
     * 'eventSource="Appl"' "hello 5424" */
    static const char real[] =
        "<13>1 2026-12-02T16:15:17.466024+00:00 vm myapp 4242 ID47 [timeQuality tzKnown=\"1\" "
        "isSynced=\"0\"][exampleSDID@32473 iut=\"3\" eventSource=\"Appl\"] hello 5424";
    struct syslog_msg m = parse(real);
    (void)state;

    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_int_equal(m.facility, 1);
    assert_int_equal(m.severity, 5);
    assert_slice(m.time_text, "2026-12-02T16:15:17.466024+00:00");
    assert_true(m.has_time);
    assert_true(m.time_ns == utc_ns(2026, 12, 2, 16, 15, 17) + 466024000ull);
    assert_slice(m.hostname, "vm");
    assert_slice(m.app_name, "myapp");
    assert_slice(m.procid, "4242");
    assert_slice(m.msgid, "ID47");
    assert_slice(m.structured_data, "[timeQuality tzKnown=\"1\" isSynced=\"0\"][exampleSDID@32473 "
                                    "iut=\"3\" eventSource=\"Appl\"]");
    assert_slice(m.message, "hello 5424");
    assert_false(m.message_bom);

    /* logger --rfc5424=notq,notime,nohost -t x minimal: NILVALUEs. */
    m = parse("<13>1 - - x - - - minimal");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_slice(m.time_text, NULL);
    assert_false(m.has_time);
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, "x");
    assert_slice(m.procid, NULL);
    assert_slice(m.msgid, NULL);
    assert_slice(m.structured_data, NULL);
    assert_slice(m.message, "minimal");
}

static void test_python(void **state)
{
    /* SysLogHandler(address=PATH).emit(...): PRI, the text, a NUL. */
    static const char real[] = "<14>python message";
    size_t len = syslog_msg_strip_trailer(real, sizeof(real)); /* the NUL included */
    struct syslog_msg m;
    (void)state;

    assert_int_equal(len, strlen(real));
    m = parse_at(real, len, REF);
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
    assert_int_equal(m.facility, 1);
    assert_int_equal(m.severity, 6);
    assert_slice(m.time_text, NULL);
    assert_false(m.has_time);
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, NULL); /* "python" is followed by a space, not ':' */
    assert_slice(m.message, "python message");

    /* With handler.ident = "myapp: ". */
    m = parse("<14>myapp: python message");
    assert_slice(m.app_name, "myapp");
    assert_slice(m.hostname, NULL);
    assert_slice(m.message, "python message");
}

static void test_no_pri(void **state)
{
    static const char kernel[] = "[12345.678901] usb 1-1: new high-speed USB device number 2";
    (void)state;

    assert_none(kernel, strlen(kernel));
    assert_none("", 0);
    assert_none("plain text", 10);
    /* NUL bytes in the middle are just bytes. */
    assert_none("a\0b", 3);
    /* A kernel line with PRI: a message without header. */
    {
        struct syslog_msg m = parse("<6>[    1.234] Linux version 6.1");
        assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
        assert_int_equal(m.facility, 0);
        assert_int_equal(m.severity, 6);
        assert_slice(m.app_name, NULL);
        assert_slice(m.message, "[    1.234] Linux version 6.1");
    }
}

static void test_pri(void **state)
{
    static const struct {
        const char *s;
        int facility, severity;
    } good[] = {
        { "<0>x", 0, 0 },     { "<191>x", 23, 7 }, { "<13>x", 1, 5 },
        { "<013>x", 1, 5 },   { "<00>x", 0, 0 },   { "<007>x", 0, 7 },
        { "<8>x", 1, 0 },     { "<190>x", 23, 6 },
    };
    static const char *const bad[] = {
        "<192>x", "<999>x", "<0013>x", "<>x", "<1", "<", "<13", "<-1>x", "<1a>x",
        "< 1>x",  "13>x",   "<1000>x", "x<13>",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct syslog_msg m = parse(good[i].s);
        if (m.format != SYSLOG_FORMAT_RFC3164 || m.facility != good[i].facility ||
            m.severity != good[i].severity)
            fail_msg("%s: got format %d facility %d severity %d", good[i].s, m.format,
                     m.facility, m.severity);
        assert_slice(m.message, "x");
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_none(bad[i], strlen(bad[i]));
    /* PRI alone: a message with empty text. */
    {
        struct syslog_msg m = parse("<13>");
        assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
        assert_slice(m.message, "");
    }
}

/* ---- RFC 5424 ---- */

static void test_rfc5424_times(void **state)
{
    static const struct {
        const char *stamp;
        uint64_t ns;
    } good[] = {
        { "2003-10-11T22:14:15.003Z", 1065910455ull * NS + 3000000 },
        { "1985-04-12T23:20:50.52Z", 482196050ull * NS + 520000000 },
        { "2003-08-24T05:14:15.000003-07:00", 1061727255ull * NS + 3000 },
        { "2026-12-02T16:15:17+05:30", 1796228117ull * NS - 19800ull * NS },
        { "2026-12-02T16:15:17.123456789Z", 1796228117ull * NS + 123456789 },
        { "2004-02-29T00:00:00Z", 1078012800ull * NS },
        { "1970-01-01T00:00:00Z", 0 },
        { "1969-12-31T23:30:00-01:00", 1800ull * NS },
        { "2000-12-31T23:59:59.9+23:59", 978307199ull * NS + 900000000 - 86340ull * NS },
    };
    char buf[128];
    (void)state;

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct syslog_msg m;

        snprintf(buf, sizeof(buf), "<165>1 %s host app - - - text", good[i].stamp);
        m = parse(buf);
        if (m.format != SYSLOG_FORMAT_RFC5424 || !m.has_time || m.time_ns != good[i].ns)
            fail_msg("%s: format %d has_time %d ns %llu, want %llu", good[i].stamp, m.format,
                     m.has_time, (unsigned long long)m.time_ns, (unsigned long long)good[i].ns);
        assert_slice(m.time_text, good[i].stamp);
        assert_int_equal(m.facility, 20);
        assert_int_equal(m.severity, 5);
    }
}

static void test_rfc5424_time_out_of_range(void **state)
{
    /* Well formed, but no u64 of ns since 1970 holds them: the header
     * stands, the time is not known. */
    static const char *const stamps[] = { "1969-12-31T23:59:59Z", "0000-01-01T00:00:00Z",
                                          "9999-12-31T23:59:59Z", "2554-07-22T00:00:00Z" };
    char buf[128];
    (void)state;

    for (size_t i = 0; i < sizeof(stamps) / sizeof(stamps[0]); i++) {
        struct syslog_msg m;

        snprintf(buf, sizeof(buf), "<13>1 %s host app - - - text", stamps[i]);
        m = parse(buf);
        assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
        assert_false(m.has_time);
        assert_slice(m.time_text, stamps[i]);
        assert_slice(m.hostname, "host");
    }
    /* The last second that fits. */
    {
        struct syslog_msg m = parse("<13>1 2554-07-21T23:34:33Z h a - - -");
        assert_true(m.has_time);
        assert_true(m.time_ns == 18446744073ull * NS);
    }
}

/* A malformed RFC 5424 header is read the BSD way from after the PRI:
 * nothing of the half-read header is left in the fields. */
static void check_falls_back(const char *s)
{
    struct syslog_msg m = parse(s);
    const char *after_pri = strchr(s, '>') + 1;

    if (m.format != SYSLOG_FORMAT_RFC3164)
        fail_msg("%s: want the BSD reading, got format %d", s, m.format);
    assert_slice(m.hostname, NULL);
    assert_slice(m.msgid, NULL);
    assert_slice(m.structured_data, NULL);
    assert_slice(m.time_text, NULL);
    assert_false(m.has_time);
    assert_false(m.message_bom);
    assert_slice(m.message, after_pri);
}

static void test_rfc5424_malformed(void **state)
{
    static const char *const bad[] = {
        /* timestamps */
        "<13>1 2003-10-11T22:14:15.0123456789Z h a - - - x", /* 10 fraction digits */
        "<13>1 2003-02-29T00:00:00Z h a - - - x",            /* no such day */
        "<13>1 2003-10-11T22:14:60Z h a - - - x",            /* leap second */
        "<13>1 2003-10-11t22:14:15Z h a - - - x",
        "<13>1 2003-10-11T22:14:15z h a - - - x",
        "<13>1 2003-10-11T22:14:15 h a - - - x",             /* no zone */
        "<13>1 2003-10-11T22:14:15. h a - - - x",
        "<13>1 2003-10-11T22:14:15.Z h a - - - x",
        "<13>1 2003-10-11T22:14:15+7:00 h a - - - x",
        "<13>1 2003-10-11T22:14:15+24:00 h a - - - x",
        "<13>1 2003-13-11T22:14:15Z h a - - - x",
        "<13>1 2003-00-11T22:14:15Z h a - - - x",
        "<13>1 2003-10-11T24:00:00Z h a - - - x",
        "<13>1 03-10-11T22:14:15Z h a - - - x",
        "<13>1 Oct 11 22:14:15 h a - - - x",
        /* missing fields */
        "<13>1 - h a - -",
        "<13>1 - h a -",
        "<13>1 - h",
        "<13>1 ",
        "<13>1",
        "<13>1  - h a - - - x", /* an empty token */
        /* over length: app-name 49, msgid 33, hostname 256 */
        "<13>1 - h aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa - - - x",
        "<13>1 - h a - mmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmm - x",
        /* structured data */
        "<13>1 - h a - - [id x",
        "<13>1 - h a - - [id k=\"v\"",
        "<13>1 - h a - - [id k=v] x",
        "<13>1 - h a - - [id k=\"v] x",
        "<13>1 - h a - - [id k=\"v\\\"] x",
        "<13>1 - h a - - [id k=\"v\\", /* a backslash at the very end */
        "<13>1 - h a - - [] x",
        "<13>1 - h a - - [id  k=\"v\"] x",
        "<13>1 - h a - - [id k =\"v\"] x",
        "<13>1 - h a - - [id =\"v\"] x",
        "<13>1 - h a - - [i\"d] x",
        "<13>1 - h a - - [123456789012345678901234567890123] x", /* SD-ID of 33 */
        "<13>1 - h a - - [id]x",
        "<13>1 - h a - - -x",
        "<13>1 - h a - - x",
        /* version */
        "<13>2 - h a - - - x",
        "<13>10 - h a - - - x",
        /* a byte outside '!'..'~' in a token */
        "<13>1 - h\x7f a - - - x",
        "<13>1 - h a\xc3\xa9 - - - x",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        check_falls_back(bad[i]);
    /* Hostname of exactly 256 bytes. */
    {
        char buf[400];
        int n = snprintf(buf, sizeof(buf), "<13>1 - %0256d a - - - x", 0);
        assert_true(n > 0 && (size_t)n < sizeof(buf));
        check_falls_back(buf);
    }
}

static void test_rfc5424_limits(void **state)
{
    char buf[600];
    struct syslog_msg m;
    (void)state;

    /* Every token at its limit: hostname 255, app-name 48, procid 128,
     * msgid 32, an SD-ID and a PARAM-NAME of 32. */
    snprintf(buf, sizeof(buf), "<13>1 - %0255d %048d %0128d %032d [%032d %032d=\"\"] x", 1, 2, 3, 4,
             5, 6);
    m = parse(buf);
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_int_equal(m.hostname.len, 255);
    assert_int_equal(m.app_name.len, 48);
    assert_int_equal(m.procid.len, 128);
    assert_int_equal(m.msgid.len, 32);
    assert_int_equal(m.structured_data.len, 1 + 32 + 1 + 32 + 3 + 1);
    assert_slice(m.message, "x");
}

static void test_rfc5424_fields(void **state)
{
    struct syslog_msg m;
    (void)state;

    /* An escaped quote and bracket inside a value, a ']' unescaped inside
     * quotes, three elements, an empty value. */
    m = parse("<13>1 - h a - - [a k=\"x\\\"y\\]z\"][b k=\"]\" j=\"\"][c] the text");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_slice(m.structured_data, "[a k=\"x\\\"y\\]z\"][b k=\"]\" j=\"\"][c]");
    assert_slice(m.message, "the text");
    /* Elements follow each other without a space: after one, a space
     * starts the text. */
    m = parse("<13>1 - h a - - [id] [id2] x");
    assert_slice(m.structured_data, "[id]");
    assert_slice(m.message, "[id2] x");

    /* No MSG at all, and an empty one. */
    m = parse("<13>1 - - - - - -");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_slice(m.message, "");
    m = parse("<13>1 - - - - - [x]");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_slice(m.structured_data, "[x]");
    assert_slice(m.message, "");
    m = parse("<13>1 - - - - - - ");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_slice(m.message, "");

    /* MSG keeps its spaces, newlines and anything else. */
    m = parse("<13>1 - - - - - -  two spaces\nand a line");
    assert_slice(m.message, " two spaces\nand a line");

    /* MSG-UTF8: the BOM is noted and left out of the text. */
    m = parse("<13>1 - - - - - - \xef\xbb\xbf" "caf\xc3\xa9");
    assert_true(m.message_bom);
    assert_slice(m.message, "caf\xc3\xa9");
    m = parse("<13>1 - - - - - - \xef\xbb");
    assert_false(m.message_bom);
    assert_slice(m.message, "\xef\xbb");

    /* Leading zeros in the PRI do not stop RFC 5424. */
    m = parse("<013>1 - h - - - - x");
    assert_int_equal(m.format, SYSLOG_FORMAT_RFC5424);
    assert_int_equal(m.severity, 5);
    assert_slice(m.hostname, "h");
    assert_slice(m.app_name, NULL);
}

/* ---- RFC 3164 ---- */

static void test_rfc3164_header(void **state)
{
    struct syslog_msg m;
    char buf[128];
    (void)state;

    /* A word that no TAG follows is no hostname. */
    m = parse("<13>Dec  2 16:15:17 host some text");
    assert_true(m.has_time);
    assert_slice(m.hostname, NULL);
    assert_slice(m.app_name, NULL);
    assert_slice(m.message, "host some text");

    m = parse("<13>Dec  2 16:15:17 host app[12]: x");
    assert_slice(m.hostname, "host");
    assert_slice(m.app_name, "app");
    assert_slice(m.procid, "12");
    assert_slice(m.message, "x");

    /* The ':' of a TAG is followed by a space or the end. */
    m = parse("<13>Dec  2 16:15:17 http://example.org is down");
    assert_slice(m.app_name, NULL);
    assert_slice(m.message, "http://example.org is down");
    m = parse("<13>Dec  2 16:15:17 app:");
    assert_slice(m.app_name, "app");
    assert_slice(m.message, "");
    m = parse("<13>Dec  2 16:15:17 app:  two");
    assert_slice(m.message, " two");

    /* What a procid can be: the sender's text, not a number. */
    m = parse("<13>Dec  2 16:15:17 postfix/smtpd[abc-1]: x");
    assert_slice(m.app_name, "postfix/smtpd");
    assert_slice(m.procid, "abc-1");
    m = parse("<13>Dec  2 16:15:17 app[]: x");
    assert_slice(m.app_name, NULL);
    assert_slice(m.message, "app[]: x");
    m = parse("<13>Dec  2 16:15:17 app[12: x");
    assert_slice(m.app_name, NULL);
    m = parse("<13>Dec  2 16:15:17 app[12]x: y");
    assert_slice(m.app_name, NULL);
    m = parse("<13>Dec  2 16:15:17 app[1 2]: y");
    assert_slice(m.app_name, NULL);

    /* A TAG of 48 bytes is one, of 49 is not. */
    snprintf(buf, sizeof(buf), "<13>Dec  2 16:15:17 %048d: x", 7);
    m = parse(buf);
    assert_int_equal(m.app_name.len, 48);
    assert_slice(m.message, "x");
    snprintf(buf, sizeof(buf), "<13>Dec  2 16:15:17 %049d: x", 7);
    m = parse(buf);
    assert_slice(m.app_name, NULL);
    assert_int_equal(m.message.len, 49 + 3);

    /* A stamp and nothing after it. */
    m = parse("<13>Dec  2 16:15:17");
    assert_true(m.has_time);
    assert_slice(m.message, "");
    m = parse("<13>Dec  2 16:15:17 ");
    assert_true(m.has_time);
    assert_slice(m.message, "");

    /* Zero-padded day. */
    m = parse("<13>Dec 02 16:15:17 app: x");
    assert_true(m.has_time);
    assert_true(m.time_ns == utc_ns(2026, 12, 2, 16, 15, 17));
    assert_slice(m.app_name, "app");
}

static void test_rfc3164_bad_stamps(void **state)
{
    static const char *const bad[] = {
        "<13>Dez  2 16:15:17 app: x", "<13>dec  2 16:15:17 app: x", "<13>Dec 32 16:15:17 app: x",
        "<13>Dec  0 16:15:17 app: x", "<13>Feb 30 16:15:17 app: x", "<13>Apr 31 16:15:17 app: x",
        "<13>Dec  2 24:00:00 app: x", "<13>Dec  2 16:60:00 app: x", "<13>Dec  2 16:15:60 app: x",
        "<13>Dec  2 16:15:17app: x",  "<13>Dec 2 16:15:17 app: x",  "<13>Dec  2 16:15 app: x",
        "<13>Dec  2 16.15.17 app: x", "<13>Dec  x 16:15:17 app: x",
    };
    (void)state;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct syslog_msg m = parse(bad[i]);

        assert_int_equal(m.format, SYSLOG_FORMAT_RFC3164);
        assert_slice(m.time_text, NULL);
        assert_false(m.has_time);
        assert_slice(m.hostname, NULL);
        /* "Dec" and the rest are text now: no TAG at the start. */
        assert_slice(m.app_name, NULL);
        assert_slice(m.message, bad[i] + 4);
    }
}

static void check_year(const char *stamp, uint64_t reference_ns, uint64_t want_ns)
{
    char buf[64];
    struct syslog_msg m;

    snprintf(buf, sizeof(buf), "<13>%s app: x", stamp);
    m = parse_at(buf, strlen(buf), reference_ns);
    assert_slice(m.time_text, stamp);
    if (!m.has_time || m.time_ns != want_ns)
        fail_msg("%s: has_time %d ns %llu, want %llu", stamp, m.has_time,
                 (unsigned long long)m.time_ns, (unsigned long long)want_ns);
}

static void test_rfc3164_year(void **state)
{
    uint64_t ref;
    (void)state;

    /* Same year. */
    check_year("Jun 15 12:00:00", utc_ns(2026, 6, 15, 12, 0, 5), utc_ns(2026, 6, 15, 12, 0, 0));
    /* Across New Year: sent on Dec 31, received on Jan 1. */
    check_year("Dec 31 23:59:59", utc_ns(2027, 1, 1, 0, 0, 10), utc_ns(2026, 12, 31, 23, 59, 59));
    /* A sender whose clock runs ahead: Jan 1 received late on Dec 31. */
    check_year("Jan  1 00:00:05", utc_ns(2026, 12, 31, 23, 59, 59), utc_ns(2027, 1, 1, 0, 0, 5));
    /* More than a day ahead: last year's. */
    check_year("Jan  2 00:00:05", utc_ns(2026, 12, 31, 23, 0, 0), utc_ns(2026, 1, 2, 0, 0, 5));
    check_year("Jun 17 12:00:00", utc_ns(2026, 6, 15, 12, 0, 0), utc_ns(2025, 6, 17, 12, 0, 0));
    /* The edge: exactly one day ahead is this year, one second more is not. */
    ref = utc_ns(2026, 6, 15, 12, 0, 0);
    check_year("Jun 16 12:00:00", ref, utc_ns(2026, 6, 16, 12, 0, 0));
    check_year("Jun 16 12:00:01", ref, utc_ns(2025, 6, 16, 12, 0, 1));
    /* Feb 29 goes back to the last leap year. */
    check_year("Feb 29 12:00:00", utc_ns(2026, 3, 1, 0, 0, 0), utc_ns(2024, 2, 29, 12, 0, 0));
    check_year("Feb 29 12:00:00", utc_ns(2024, 3, 1, 0, 0, 0), utc_ns(2024, 2, 29, 12, 0, 0));
    check_year("Feb 29 12:00:00", utc_ns(2101, 1, 1, 0, 0, 0), utc_ns(2096, 2, 29, 12, 0, 0));
    /* Before the epoch there is no time: the stamp stays as text. */
    {
        struct syslog_msg m = parse_at("<13>Dec 31 00:00:00 app: x", 26, 1000 * NS);
        assert_slice(m.time_text, "Dec 31 00:00:00");
        assert_false(m.has_time);
        assert_slice(m.app_name, "app");
    }
}

static void test_rfc3164_local_time(void **state)
{
    (void)state;

    /* The stamp is local time of the TZ in effect: two hours east of UTC
     * (a POSIX TZ string, so no zone files are needed). */
    use_tz("XST-2");
    check_year("Jun 15 12:00:00", utc_ns(2026, 6, 15, 10, 0, 5), utc_ns(2026, 6, 15, 10, 0, 0));
    /* The year is that of the reference in local time: 23:30 UTC on Dec 31
     * is already Jan 1 there. */
    check_year("Jan  1 01:00:00", utc_ns(2026, 12, 31, 23, 30, 0), utc_ns(2026, 12, 31, 23, 0, 0));
    use_tz("UTC");
    check_year("Jun 15 12:00:00", utc_ns(2026, 6, 15, 12, 0, 5), utc_ns(2026, 6, 15, 12, 0, 0));
}

/* ---- trailer ---- */

static void test_strip_trailer(void **state)
{
    static const struct {
        const char *s;
        size_t len, want;
    } cases[] = {
        { "text", 4, 4 },         { "text\0", 5, 4 },     { "text\0\0\0", 7, 4 },
        { "text\n", 5, 4 },       { "text\r\n", 6, 4 },   { "text\n\0", 6, 4 },
        { "text\r\n\0\0", 8, 4 }, { "text\n\n", 6, 5 },   { "text\r", 5, 5 },
        { "text\0\n", 6, 5 },     { "te\0xt", 5, 5 },     { "", 0, 0 },
        { "\0", 1, 0 },           { "\n", 1, 0 },         { "\r\n", 2, 0 },
        { "\n\r\n", 3, 1 },       { "text\n\r", 6, 6 },
    };
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t got = syslog_msg_strip_trailer(cases[i].s, cases[i].len);
        if (got != cases[i].want)
            fail_msg("case %zu: got %zu, want %zu", i, got, cases[i].want);
    }
}

/* ---- producer names ---- */

static void test_producer_name(void **state)
{
    static const struct {
        const char *ident;
        uid_t uid;
        const char *want;
    } cases[] = {
        { "sshd", 0, "sshd.u0" },
        { "postfix/smtpd", 106, "postfix_smtpd.u106" },
        { "-x", 1000, "_x.u1000" },
        { ".hidden", 1000, "_hidden.u1000" },
        { "../../etc/passwd", 0, "_._.._etc_passwd.u0" },
        { "caf\xc3\xa9", 7, "caf__.u7" },
        { "a b:c[1]", 7, "a_b_c_1_.u7" },
        { "", 0, "syslog.u0" },
        { "x", 4294967295u, "x.u4294967295" },
        { "Cron.daily-1_2", 5, "Cron.daily-1_2.u5" },
    };
    char out[SYSLOG_PRODUCER_NAME_SIZE];
    char ident[100];
    int r;
    (void)state;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        r = syslog_producer_name(cases[i].ident, strlen(cases[i].ident), cases[i].uid, out,
                                 sizeof(out));
        assert_int_equal(r, strlen(cases[i].want));
        assert_string_equal(out, cases[i].want);
        assert_int_equal(wire_check_hello_name(out, (size_t)r), 0);
    }
    /* No identifier at all. */
    r = syslog_producer_name(NULL, 0, 33, out, sizeof(out));
    assert_int_equal(r, 10);
    assert_string_equal(out, "syslog.u33");
    /* A NUL is a byte like any other. */
    r = syslog_producer_name("a\0b", 3, 1, out, sizeof(out));
    assert_string_equal(out, "a_b.u1");

    /* Cut at 48 bytes; the longest name fits SYSLOG_PRODUCER_NAME_SIZE and
     * the rule's 64 bytes. */
    memset(ident, 'z', sizeof(ident));
    r = syslog_producer_name(ident, sizeof(ident), 4294967295u, out, sizeof(out));
    assert_int_equal(r, 48 + 12);
    assert_int_equal(r + 1, SYSLOG_PRODUCER_NAME_SIZE);
    assert_memory_equal(out, ident, 48);
    assert_string_equal(out + 48, ".u4294967295");
    assert_int_equal(wire_check_hello_name(out, (size_t)r), 0);

    /* Too small a buffer: -ENOBUFS, nothing written. */
    memset(out, '#', sizeof(out));
    assert_int_equal(syslog_producer_name("sshd", 4, 0, out, 7), -ENOBUFS);
    assert_int_equal(out[0], '#');
    assert_int_equal(syslog_producer_name("sshd", 4, 0, out, 8), 7);
    assert_string_equal(out, "sshd.u0");

    /* Whatever the identifier's bytes, the name passes the HELLO rule. */
    for (unsigned a = 0; a < 256; a++) {
        for (unsigned b = 0; b < 256; b += 51) {
            char two[2] = { (char)a, (char)b };
            r = syslog_producer_name(two, 2, 1000, out, sizeof(out));
            assert_int_equal(r, 2 + 6);
            if (wire_check_hello_name(out, (size_t)r) != 0)
                fail_msg("bytes %u %u give \"%s\"", a, b, out);
            assert_null(strchr(out, '/'));
        }
    }
}

/* The identifier a message names, through the rule, end to end. */
static void test_producer_name_from_message(void **state)
{
    char out[SYSLOG_PRODUCER_NAME_SIZE];
    struct syslog_msg m = parse("<28>Dec  2 16:25:31 ../x[1]: forged");
    (void)state;

    assert_slice(m.app_name, "../x");
    assert_int_equal(syslog_producer_name(m.app_name.ptr, m.app_name.len, 1000, out, sizeof(out)),
                     strlen("_._x.u1000"));
    assert_string_equal(out, "_._x.u1000");
    m = parse("<14>python message");
    assert_int_equal(syslog_producer_name(m.app_name.ptr, m.app_name.len, 0, out, sizeof(out)),
                     strlen("syslog.u0"));
    assert_string_equal(out, "syslog.u0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_glibc),
        cmocka_unit_test(test_logger_rfc3164),
        cmocka_unit_test(test_logger_rfc5424),
        cmocka_unit_test(test_python),
        cmocka_unit_test(test_no_pri),
        cmocka_unit_test(test_pri),
        cmocka_unit_test(test_rfc5424_times),
        cmocka_unit_test(test_rfc5424_time_out_of_range),
        cmocka_unit_test(test_rfc5424_malformed),
        cmocka_unit_test(test_rfc5424_limits),
        cmocka_unit_test(test_rfc5424_fields),
        cmocka_unit_test(test_rfc3164_header),
        cmocka_unit_test(test_rfc3164_bad_stamps),
        cmocka_unit_test(test_rfc3164_year),
        cmocka_unit_test(test_rfc3164_local_time),
        cmocka_unit_test(test_strip_trailer),
        cmocka_unit_test(test_producer_name),
        cmocka_unit_test(test_producer_name_from_message),
    };

    use_tz("UTC");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
