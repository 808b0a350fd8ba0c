/* Reading one syslog message; syslog_msg.h gives the rules. The parser
 * walks the bytes once with a pointer and an end, never reads past the end,
 * and fills a scratch struct that becomes the result only when a reading
 * succeeds as a whole, so that a half-read RFC 5424 header leaves nothing
 * behind in the BSD reading that replaces it. */
#include "syslog_msg.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define NS_PER_SEC 1000000000ull
/* The last second whose ns still fit in a u64 (2554-07-21). */
#define MAX_SECONDS (UINT64_MAX / NS_PER_SEC)

/* RFC 5424's PRINTUSASCII: what header tokens are made of. */
static bool printable(unsigned char c)
{
    return c >= 33 && c <= 126;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* n digits at p as a number; false when one is not a digit. */
static bool read_digits(const char *p, size_t n, unsigned *ret)
{
    unsigned v = 0;

    for (size_t i = 0; i < n; i++) {
        if (!is_digit(p[i]))
            return false;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    *ret = v;
    return true;
}

static struct syslog_slice slice(const char *p, size_t len)
{
    return (struct syslog_slice){ .ptr = p, .len = len };
}

/* ---- calendar ---- */

static bool leap_year(unsigned y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned days_in_month(unsigned y, unsigned month)
{
    static const unsigned char days[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

    return month == 2 && leap_year(y) ? 29 : days[month - 1];
}

/* Leap years among 1..y (y >= 0). */
static int64_t leap_years_through(int64_t y)
{
    return y / 4 - y / 100 + y / 400;
}

/* Days from 1970-01-01 to y-month-day (y >= 1; negative before 1970). */
static int64_t days_since_epoch(unsigned y, unsigned month, unsigned day)
{
    static const unsigned short before_month[12] = { 0,   31,  59,  90,  120, 151,
                                                     181, 212, 243, 273, 304, 334 };
    int64_t days = 365 * ((int64_t)y - 1970) + leap_years_through((int64_t)y - 1) -
                   leap_years_through(1969);

    days += before_month[month - 1] + (month > 2 && leap_year(y) ? 1 : 0);
    return days + day - 1;
}

/* ---- PRI ---- */

/* "<PRI>" at the start: sets *ret_pri and returns the bytes it takes, or 0
 * when there is no valid PRI. */
static size_t parse_pri(const char *p, size_t len, unsigned *ret_pri)
{
    size_t i = 1;
    unsigned v = 0;

    if (len < 3 || p[0] != '<')
        return 0;
    while (i < len && i <= 4 && is_digit(p[i]))
        v = v * 10 + (unsigned)(p[i++] - '0');
    if (i == 1 || i > 4 || i >= len || p[i] != '>' || v > SYSLOG_PRI_MAX)
        return 0;
    *ret_pri = v;
    return i + 1;
}

/* ---- RFC 5424 ---- */

/* RFC 5424's TIMESTAMP (not NILVALUE) in t[0..n): returns false when it is
 * malformed; otherwise sets *ret_has_time and *ret_ns as syslog_msg says. */
static bool parse_rfc5424_time(const char *t, size_t n, bool *ret_has_time, uint64_t *ret_ns)
{
    unsigned year, month, day, hour, minute, second, off_h = 0, off_m = 0;
    uint64_t frac_ns = 0;
    int64_t secs, offset = 0;
    size_t pos = 19;

    if (n < 20 || !read_digits(t, 4, &year) || t[4] != '-' || !read_digits(t + 5, 2, &month) ||
        t[7] != '-' || !read_digits(t + 8, 2, &day) || t[10] != 'T' ||
        !read_digits(t + 11, 2, &hour) || t[13] != ':' || !read_digits(t + 14, 2, &minute) ||
        t[16] != ':' || !read_digits(t + 17, 2, &second))
        return false;
    if (month < 1 || month > 12 || day < 1 || day > days_in_month(year, month) || hour > 23 ||
        minute > 59 || second > 59)
        return false;
    if (t[pos] == '.') {
        size_t digits = 0;
        uint64_t scale = NS_PER_SEC;

        pos++;
        while (pos < n && is_digit(t[pos]) && digits < 9) {
            scale /= 10;
            frac_ns += (uint64_t)(t[pos] - '0') * scale;
            pos++;
            digits++;
        }
        if (digits == 0 || pos >= n)
            return false;
    }
    if (t[pos] == 'Z') {
        if (pos + 1 != n)
            return false;
    } else if (t[pos] == '+' || t[pos] == '-') {
        if (pos + 6 != n || !read_digits(t + pos + 1, 2, &off_h) || t[pos + 3] != ':' ||
            !read_digits(t + pos + 4, 2, &off_m) || off_h > 23 || off_m > 59)
            return false;
        offset = (int64_t)off_h * 3600 + off_m * 60;
        if (t[pos] == '-')
            offset = -offset;
    } else {
        return false;
    }

    /* Well formed; whether a u64 of ns since 1970 can hold it is another
     * matter, which costs the time but not the header. Year 0 cannot be
     * counted by days_since_epoch and is long before 1970 anyway. */
    *ret_has_time = false;
    if (year < 1)
        return true;
    secs = days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second -
           offset;
    if (secs < 0 || (uint64_t)secs > MAX_SECONDS ||
        (uint64_t)secs * NS_PER_SEC > UINT64_MAX - frac_ns)
        return true;
    *ret_has_time = true;
    *ret_ns = (uint64_t)secs * NS_PER_SEC + frac_ns;
    return true;
}

/* A header token: 1 to max bytes of PRINTUSASCII, then the SP after it,
 * which is consumed. "-" gives an absent slice. */
static bool take_token(const char **pp, const char *end, size_t max, struct syslog_slice *ret)
{
    const char *p = *pp, *start = p;

    while (p < end && printable((unsigned char)*p))
        p++;
    if (p == start || (size_t)(p - start) > max || p == end || *p != ' ')
        return false;
    *ret = (p - start == 1 && *start == '-') ? slice(NULL, 0) : slice(start, (size_t)(p - start));
    *pp = p + 1;
    return true;
}

/* SD-NAME: 1 to 32 PRINTUSASCII except '=', SP, ']' and '"'. */
static bool take_sd_name(const char **pp, const char *end)
{
    const char *p = *pp, *start = p;

    while (p < end && printable((unsigned char)*p) && *p != '=' && *p != ']' && *p != '"')
        p++;
    if (p == start || (size_t)(p - start) > SYSLOG_SD_NAME_MAX)
        return false;
    *pp = p;
    return true;
}

/* One SD-ELEMENT, "[" SD-ID *(SP PARAM-NAME "=" '"' PARAM-VALUE '"') "]".
 * Inside a value a backslash takes the next byte with it, so an escaped
 * '"' does not end it; the value's bytes are not judged further (the RFC
 * wants UTF-8; what was sent is kept either way). */
static bool take_sd_element(const char **pp, const char *end)
{
    const char *p = *pp;

    if (p == end || *p != '[')
        return false;
    p++;
    if (!take_sd_name(&p, end))
        return false;
    for (;;) {
        if (p == end)
            return false;
        if (*p == ']')
            break;
        if (*p != ' ')
            return false;
        p++;
        if (!take_sd_name(&p, end) || p == end || *p != '=')
            return false;
        p++;
        if (p == end || *p != '"')
            return false;
        p++;
        while (p < end && *p != '"') {
            if (*p == '\\') {
                if (++p == end)
                    return false;
            }
            p++;
        }
        if (p == end)
            return false;
        p++; /* the closing '"' */
    }
    *pp = p + 1;
    return true;
}

/* The RFC 5424 header after "<PRI>", p[0..end): "1 " TIMESTAMP HOSTNAME
 * APP-NAME PROCID MSGID STRUCTURED-DATA [SP MSG]. Fills m only when all
 * of it is well formed. */
static bool parse_rfc5424(const char *p, const char *end, struct syslog_msg *m)
{
    struct syslog_msg r = *m;
    struct syslog_slice stamp;

    if (end - p < 2 || p[0] != '1' || p[1] != ' ')
        return false;
    p += 2;
    /* The longest stamp: 19 + '.' + 9 digits + "+hh:mm". */
    if (!take_token(&p, end, 35, &stamp))
        return false;
    r.time_text = stamp;
    r.has_time = false;
    r.time_ns = 0;
    if (stamp.ptr && !parse_rfc5424_time(stamp.ptr, stamp.len, &r.has_time, &r.time_ns))
        return false;
    if (!take_token(&p, end, SYSLOG_HOSTNAME_MAX, &r.hostname) ||
        !take_token(&p, end, SYSLOG_APP_NAME_MAX, &r.app_name) ||
        !take_token(&p, end, SYSLOG_PROCID_MAX, &r.procid) ||
        !take_token(&p, end, SYSLOG_MSGID_MAX, &r.msgid))
        return false;

    if (p < end && *p == '-') {
        r.structured_data = slice(NULL, 0);
        p++;
    } else {
        const char *sd = p;

        if (!take_sd_element(&p, end))
            return false;
        while (p < end && *p == '[')
            if (!take_sd_element(&p, end))
                return false;
        r.structured_data = slice(sd, (size_t)(p - sd));
    }

    if (p < end) {
        if (*p != ' ')
            return false;
        p++;
    }
    /* MSG-UTF8 starts with a BOM, which says how to read the text and is
     * not part of it. */
    if (end - p >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) {
        r.message_bom = true;
        p += 3;
    }
    r.message = slice(p, (size_t)(end - p));
    r.format = SYSLOG_FORMAT_RFC5424;
    *m = r;
    return true;
}

/* ---- RFC 3164 ---- */

/* "Mmm dd hh:mm:ss" at p, followed by a SP or the end. */
#define BSD_STAMP_LEN 15u

static bool parse_bsd_stamp(const char *p, const char *end, struct tm *ret)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    unsigned month = 0, day, hour, minute, second;

    if ((size_t)(end - p) < BSD_STAMP_LEN ||
        ((size_t)(end - p) > BSD_STAMP_LEN && p[BSD_STAMP_LEN] != ' '))
        return false;
    for (unsigned i = 0; i < 12; i++)
        if (memcmp(p, months + 3 * i, 3) == 0)
            month = i + 1;
    if (month == 0 || p[3] != ' ' || p[6] != ' ' || p[9] != ':' || p[12] != ':')
        return false;
    /* glibc pads the day with a space ("Dec  2"), some senders with a 0. */
    if (p[4] == ' ' ? !read_digits(p + 5, 1, &day) : !read_digits(p + 4, 2, &day))
        return false;
    if (!read_digits(p + 7, 2, &hour) || !read_digits(p + 10, 2, &minute) ||
        !read_digits(p + 13, 2, &second))
        return false;
    /* Feb 29 is judged once the year is known. */
    if (day < 1 || day > days_in_month(2000, month) || hour > 23 || minute > 59 || second > 59)
        return false;
    *ret = (struct tm){ .tm_mon = (int)month - 1, .tm_mday = (int)day, .tm_hour = (int)hour,
                        .tm_min = (int)minute, .tm_sec = (int)second };
    return true;
}

/* The year of a BSD stamp, as syslog_msg_parse documents it. */
static bool resolve_bsd_time(const struct tm *stamp, uint64_t reference_ns, uint64_t *ret_ns)
{
    time_t reference = (time_t)(reference_ns / NS_PER_SEC);
    struct tm now;
    int year;

    if (!localtime_r(&reference, &now))
        return false;
    year = now.tm_year + 1900;
    /* Next year's stamp can be no more than a day ahead only for a January
     * stamp received in December; skipping it otherwise saves a mktime. */
    for (int y = stamp->tm_mon == 0 && now.tm_mon == 11 ? year + 1 : year; y >= year - 8; y--) {
        struct tm t = *stamp;
        time_t s;

        if (y < 1970 || (t.tm_mon == 1 && t.tm_mday == 29 && !leap_year((unsigned)y)))
            continue;
        t.tm_year = y - 1900;
        t.tm_isdst = -1; /* mktime finds out whether DST was in force */
        s = mktime(&t);
        if (s < 0 || (uint64_t)s > MAX_SECONDS)
            continue;
        if ((int64_t)s <= (int64_t)reference + 86400) {
            *ret_ns = (uint64_t)s * NS_PER_SEC;
            return true;
        }
    }
    return false;
}

/* TAG ["[" procid "]"] ":" (SP / end) at p. On success sets the app_name
 * and procid of m and returns where the text starts. */
static const char *parse_tag(const char *p, const char *end, struct syslog_msg *m)
{
    const char *q = p, *pid = NULL, *pid_end = NULL;

    while (q < end && printable((unsigned char)*q) && *q != ':' && *q != '[' && *q != ']')
        q++;
    if (q == p || (size_t)(q - p) > SYSLOG_APP_NAME_MAX || q == end)
        return NULL;
    if (*q == '[') {
        pid = ++q;
        while (q < end && printable((unsigned char)*q) && *q != ']')
            q++;
        if (q == pid || (size_t)(q - pid) > SYSLOG_PROCID_MAX || q == end || *q != ']')
            return NULL;
        pid_end = q++;
    }
    if (q == end || *q != ':')
        return NULL;
    q++;
    if (q < end && *q != ' ')
        return NULL;
    m->app_name = slice(p, (size_t)(pid ? pid - 1 - p : q - 1 - p));
    m->procid = pid ? slice(pid, (size_t)(pid_end - pid)) : slice(NULL, 0);
    return q < end ? q + 1 : q;
}

/* The BSD reading of what follows a valid PRI, p[0..end). */
/* resolve: whether to find the stamp's instant (has_time, time_ns) too. */
static void parse_bsd(const char *p, const char *end, uint64_t reference_ns, bool resolve,
                      struct syslog_msg *m)
{
    const char *text;
    struct tm stamp;

    m->format = SYSLOG_FORMAT_RFC3164;
    if (parse_bsd_stamp(p, end, &stamp)) {
        m->time_text = slice(p, BSD_STAMP_LEN);
        m->has_time = resolve && resolve_bsd_time(&stamp, reference_ns, &m->time_ns);
        p += BSD_STAMP_LEN;
        if (p < end)
            p++;

        text = parse_tag(p, end, m);
        if (!text) {
            /* HOSTNAME SP TAG: the word counts as a hostname only when a
             * TAG follows it, since glibc and logger send none locally. */
            const char *w = p;

            while (w < end && printable((unsigned char)*w))
                w++;
            if (w > p && (size_t)(w - p) <= SYSLOG_HOSTNAME_MAX && w < end && *w == ' ') {
                text = parse_tag(w + 1, end, m);
                if (text)
                    m->hostname = slice(p, (size_t)(w - p));
            }
        }
    } else {
        text = parse_tag(p, end, m);
    }
    if (!text)
        text = p;
    m->message = slice(text, (size_t)(end - text));
}

/* ---- the public calls ---- */

static void parse(const char *data, size_t len, uint64_t reference_ns, bool resolve,
                  struct syslog_msg *ret_msg)
{
    struct syslog_msg m = {
        .format = SYSLOG_FORMAT_NONE,
        .facility = SYSLOG_ABSENT,
        .severity = SYSLOG_ABSENT,
        .message = slice(data, len),
    };
    const char *end = data + len;
    unsigned pri;
    size_t n;

    if (len == 0) {
        /* Present and empty: a slice that cannot be NULL, as promised. */
        m.message = slice(data ? data : "", 0);
        *ret_msg = m;
        return;
    }
    n = parse_pri(data, len, &pri);
    if (n == 0) {
        *ret_msg = m;
        return;
    }
    m.facility = (int)(pri >> 3);
    m.severity = (int)(pri & 7);
    if (!parse_rfc5424(data + n, end, &m))
        parse_bsd(data + n, end, reference_ns, resolve, &m);
    *ret_msg = m;
}

void syslog_msg_parse(const char *data, size_t len, uint64_t reference_ns,
                      struct syslog_msg *ret_msg)
{
    parse(data, len, reference_ns, true, ret_msg);
}

struct syslog_slice syslog_msg_identifier(const char *data, size_t len)
{
    struct syslog_msg m;

    parse(data, len, 0, false, &m);
    return m.app_name;
}

size_t syslog_msg_strip_trailer(const char *data, size_t len)
{
    while (len > 0 && data[len - 1] == '\0')
        len--;
    if (len > 0 && data[len - 1] == '\n') {
        len--;
        if (len > 0 && data[len - 1] == '\r')
            len--;
    }
    return len;
}

static bool producer_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int syslog_producer_name(const char *ident, size_t ident_len, uid_t uid, char *out, size_t size)
{
    char name[SYSLOG_PRODUCER_NAME_SIZE];
    size_t n;
    int k;

    if (!ident || ident_len == 0) {
        ident = SYSLOG_PRODUCER_FALLBACK;
        ident_len = strlen(SYSLOG_PRODUCER_FALLBACK);
    }
    n = ident_len < SYSLOG_PRODUCER_IDENT_MAX ? ident_len : SYSLOG_PRODUCER_IDENT_MAX;
    for (size_t i = 0; i < n; i++)
        name[i] = producer_char_ok((unsigned char)ident[i]) ? ident[i] : '_';
    /* A leading '.' would hide the shard file, a leading '-' make its name
     * read as an option. */
    if (name[0] == '.' || name[0] == '-')
        name[0] = '_';
    k = snprintf(name + n, sizeof(name) - n, ".u%lu", (unsigned long)uid);
    if (k < 0 || (size_t)k >= sizeof(name) - n)
        return -ENOBUFS; /* cannot happen with a 32-bit uid_t */
    n += (size_t)k;
    if (n + 1 > size)
        return -ENOBUFS;
    memcpy(out, name, n + 1);
    return (int)n;
}
