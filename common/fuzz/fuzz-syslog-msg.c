/* Fuzz target for common/syslog_msg.c: one syslog message from an
 * untrusted sender, the trailer strip, and the producer name derived from
 * what the message claims.
 *
 * Input: one byte that picks the reference time (the receive time RFC 3164
 * years are resolved against), then the message bytes. Checked, beyond
 * the absence of crashes:
 *  - every slice lies inside the input, and the message runs to its end;
 *  - format none exactly when there is no facility, and then the whole
 *    input is the message and nothing else is set;
 *  - facility 0..23, severity 0..7; header fields within their lengths and
 *    made of '!'..'~'; RFC 5424's fields only in RFC 5424;
 *  - an RFC 3164 time is never more than one day after the reference;
 *  - parsing twice gives the same result;
 *  - the strip removes only NULs and one line end;
 *  - the producer name, from the identifier or from any bytes, passes the
 *    HELLO name rule, ends in the uid, and fits its buffer exactly.
 * The seeds in corpus/syslog-msg/ are written by hand (not by
 * make-seeds.py): the bytes real senders wrote, and the edges of the
 * grammar. The process runs with TZ=UTC so a replay means the same on
 * every machine. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "fuzz.h"
#include "syslog_msg.h"
#include "wire.h"

#define NS 1000000000ull

/* Receive times: a normal day, the turn of a year, a leap day, the epoch's
 * first day, and the last second a u64 of ns can hold. */
static const uint64_t references[] = {
    1796228117ull * NS, /* 2026-12-02T16:15:17Z */
    1798761599ull * NS, /* 2026-12-31T23:59:59Z */
    1798761600ull * NS, /* 2027-01-01T00:00:00Z */
    1709208000ull * NS, /* 2024-02-29T12:00:00Z */
    3600ull * NS,       /* 1970-01-01T01:00:00Z */
    0,
    UINT64_MAX,
};

static void check_slice(struct syslog_slice s, const char *data, size_t len)
{
    if (!s.ptr) {
        FUZZ_CHECK(s.len == 0);
        return;
    }
    FUZZ_CHECK(s.ptr >= data && s.len <= len && (size_t)(s.ptr - data) <= len - s.len);
}

/* A header token: 1 to max bytes of '!'..'~'. */
static void check_token(struct syslog_slice s, size_t max)
{
    if (!s.ptr)
        return;
    FUZZ_CHECK(s.len >= 1 && s.len <= max);
    for (size_t i = 0; i < s.len; i++)
        FUZZ_CHECK(s.ptr[i] >= '!' && s.ptr[i] <= '~');
}

static void check_name(const char *ident, size_t ident_len, uid_t uid)
{
    char out[SYSLOG_PRODUCER_NAME_SIZE], small[SYSLOG_PRODUCER_NAME_SIZE], suffix[16];
    int r = syslog_producer_name(ident, ident_len, uid, out, sizeof(out));
    size_t n, k;

    FUZZ_CHECK(r > 0 && (size_t)r < sizeof(out));
    n = (size_t)r;
    FUZZ_CHECK(strlen(out) == n);
    FUZZ_CHECK(wire_check_hello_name(out, n) == 0);
    FUZZ_CHECK(wire_check_producer_name(out, n) == 0);
    FUZZ_CHECK(!strchr(out, '/'));
    k = (size_t)snprintf(suffix, sizeof(suffix), ".u%lu", (unsigned long)uid);
    FUZZ_CHECK(n > k && memcmp(out + n - k, suffix, k) == 0);
    /* The identifier's own bytes survive where the rule allows them. */
    if (ident && ident_len > 0) {
        FUZZ_CHECK(n - k == (ident_len < SYSLOG_PRODUCER_IDENT_MAX ? ident_len
                                                                   : SYSLOG_PRODUCER_IDENT_MAX));
        for (size_t i = 0; i < n - k; i++)
            FUZZ_CHECK(out[i] == ident[i] || out[i] == '_');
    }
    /* One byte short: refused, and nothing written. */
    memset(small, '#', sizeof(small));
    FUZZ_CHECK(syslog_producer_name(ident, ident_len, uid, small, n) == -ENOBUFS);
    FUZZ_CHECK(small[0] == '#');
}

/* The strip against the rule of syslog_msg.h, applied by hand: every
 * trailing NUL, then one LF with the CR before it if any. */
static void check_strip(const char *data, size_t len)
{
    size_t k = syslog_msg_strip_trailer(data, len), want = len;

    while (want > 0 && data[want - 1] == '\0')
        want--;
    if (want > 0 && data[want - 1] == '\n') {
        want--;
        if (want > 0 && data[want - 1] == '\r')
            want--;
    }
    FUZZ_CHECK(k == want);
}

static bool same_slice(struct syslog_slice a, struct syslog_slice b)
{
    return a.ptr == b.ptr && a.len == b.len;
}

/* Field by field: a struct copy need not copy padding. */
static bool same_msg(const struct syslog_msg *a, const struct syslog_msg *b)
{
    return a->format == b->format && a->facility == b->facility &&
           a->severity == b->severity && a->has_time == b->has_time &&
           (!a->has_time || a->time_ns == b->time_ns) && same_slice(a->time_text, b->time_text) &&
           same_slice(a->hostname, b->hostname) && same_slice(a->app_name, b->app_name) &&
           same_slice(a->procid, b->procid) && same_slice(a->msgid, b->msgid) &&
           same_slice(a->structured_data, b->structured_data) &&
           same_slice(a->message, b->message) && a->message_bom == b->message_bom;
}

int LLVMFuzzerTestOneInput(const uint8_t *input, size_t size)
{
    static bool tz_set;
    const char *data;
    uint64_t reference;
    struct syslog_msg m, again;
    size_t len;

    if (!tz_set) {
        FUZZ_CHECK(setenv("TZ", "UTC", 1) == 0);
        tzset();
        tz_set = true;
    }
    if (size < 1)
        return 0;
    reference = references[input[0] % (sizeof(references) / sizeof(references[0]))];
    data = (const char *)input + 1;
    len = size - 1;

    syslog_msg_parse(data, len, reference, &m);
    check_slice(m.time_text, data, len);
    check_slice(m.hostname, data, len);
    check_slice(m.app_name, data, len);
    check_slice(m.procid, data, len);
    check_slice(m.msgid, data, len);
    check_slice(m.structured_data, data, len);
    FUZZ_CHECK(m.message.ptr != NULL);
    if (len > 0) {
        check_slice(m.message, data, len);
        FUZZ_CHECK(m.message.ptr + m.message.len == data + len);
    } else {
        FUZZ_CHECK(m.message.len == 0);
    }
    FUZZ_CHECK(!m.has_time || m.time_text.ptr);

    switch (m.format) {
    case SYSLOG_FORMAT_NONE:
        FUZZ_CHECK(m.facility == SYSLOG_ABSENT && m.severity == SYSLOG_ABSENT);
        FUZZ_CHECK(m.message.len == len && (len == 0 || m.message.ptr == data));
        FUZZ_CHECK(!m.time_text.ptr && !m.has_time && !m.hostname.ptr && !m.app_name.ptr &&
                   !m.procid.ptr && !m.msgid.ptr && !m.structured_data.ptr && !m.message_bom);
        break;
    case SYSLOG_FORMAT_RFC3164:
        FUZZ_CHECK(data[0] == '<');
        FUZZ_CHECK(!m.msgid.ptr && !m.structured_data.ptr && !m.message_bom);
        FUZZ_CHECK(!m.time_text.ptr || m.time_text.len == 15);
        FUZZ_CHECK(!m.hostname.ptr || m.app_name.ptr);
        FUZZ_CHECK(!m.procid.ptr || m.app_name.ptr);
        if (m.app_name.ptr)
            FUZZ_CHECK(!memchr(m.app_name.ptr, ':', m.app_name.len) &&
                       !memchr(m.app_name.ptr, '[', m.app_name.len) &&
                       !memchr(m.app_name.ptr, ']', m.app_name.len));
        if (m.has_time)
            FUZZ_CHECK(reference / NS + 86400 >= m.time_ns / NS);
        break;
    case SYSLOG_FORMAT_RFC5424:
        FUZZ_CHECK(data[0] == '<');
        if (m.structured_data.ptr)
            FUZZ_CHECK(m.structured_data.len >= 3 && m.structured_data.ptr[0] == '[' &&
                       m.structured_data.ptr[m.structured_data.len - 1] == ']');
        if (m.time_text.ptr)
            FUZZ_CHECK(m.time_text.len >= 20 && m.time_text.ptr[10] == 'T');
        break;
    default:
        FUZZ_CHECK(!"unknown format");
    }
    if (m.format != SYSLOG_FORMAT_NONE)
        FUZZ_CHECK(m.facility >= 0 && m.facility <= 23 && m.severity >= 0 && m.severity <= 7);
    check_token(m.hostname, SYSLOG_HOSTNAME_MAX);
    check_token(m.app_name, SYSLOG_APP_NAME_MAX);
    check_token(m.procid, SYSLOG_PROCID_MAX);
    check_token(m.msgid, SYSLOG_MSGID_MAX);
    /* "-" is NILVALUE, never a field's value. */
    FUZZ_CHECK(!m.hostname.ptr || m.hostname.len != 1 || m.hostname.ptr[0] != '-' ||
               m.format == SYSLOG_FORMAT_RFC3164);

    syslog_msg_parse(data, len, reference, &again);
    FUZZ_CHECK(same_msg(&m, &again));
    /* The daemon's shortcut names the same producer. */
    FUZZ_CHECK(same_slice(syslog_msg_identifier(data, len), m.app_name));

    check_strip(data, len);
    check_name(m.app_name.ptr, m.app_name.len, (uid_t)(size * 2654435761u));
    check_name(data, len, (uid_t)input[0]);
    return 0;
}
