/* Times on logctl's command line (--since, --until, --before), in the forms
 * journalctl accepts, so an operator can type what they already know.
 * Absolute times without a zone are local time (mktime, with the C
 * library's idea of daylight saving time); "Z" or "UTC" makes them UTC. A
 * date that does not exist (February 30, 25:00) is refused rather than
 * normalised into another day. "now" is passed in, so tests can pin it. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "logctl.h"

#define NS_PER_S 1000000000ull

/* Reads exactly n digits. */
static bool digits(const char **p, int n, int *ret)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (!isdigit((unsigned char)(*p)[i]))
            return false;
        v = v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    *ret = v;
    return true;
}

/* ".123" -> nanoseconds; 1 to 9 digits. */
static bool fraction(const char **p, uint64_t *ret_ns)
{
    uint64_t ns = 0;
    int n = 0;

    if (**p != '.')
        return false;
    (*p)++;
    while (isdigit((unsigned char)**p)) {
        if (n == 9)
            return false;
        ns = ns * 10 + (uint64_t)(**p - '0');
        n++;
        (*p)++;
    }
    if (n == 0)
        return false;
    for (; n < 9; n++)
        ns *= 10;
    *ret_ns = ns;
    return true;
}

/* Local or UTC seconds for a broken-down time, refusing what mktime would
 * silently move to another day. */
static int to_epoch(const struct tm *want, bool utc, int64_t *ret)
{
    struct tm tm = *want;
    time_t t;

    tm.tm_isdst = -1;
    errno = 0;
    t = utc ? timegm(&tm) : mktime(&tm);
    if (t == (time_t)-1 && errno)
        return -ERANGE;
    if (tm.tm_year != want->tm_year || tm.tm_mon != want->tm_mon ||
        tm.tm_mday != want->tm_mday || tm.tm_hour != want->tm_hour ||
        tm.tm_min != want->tm_min)
        return -EINVAL; /* e.g. February 30, or a local time skipped by DST */
    *ret = (int64_t)t;
    return 0;
}

static int finish(int64_t secs, uint64_t frac_ns, uint64_t *ret)
{
    if (secs < 0)
        return -ERANGE;
    if ((uint64_t)secs > (UINT64_MAX - frac_ns) / NS_PER_S)
        return -ERANGE;
    *ret = (uint64_t)secs * NS_PER_S + frac_ns;
    return 0;
}

/* The unit of a relative time, in nanoseconds; *p is moved past it. */
static uint64_t unit_ns(const char **p)
{
    static const struct {
        const char *name;
        uint64_t ns;
    } units[] = {
        /* Longest names first, so "min" is not taken for "m" then "in". */
        { "microseconds", 1000ull }, { "microsecond", 1000ull },
        { "milliseconds", 1000000ull }, { "millisecond", 1000000ull },
        { "seconds", NS_PER_S }, { "second", NS_PER_S }, { "minutes", 60 * NS_PER_S },
        { "minute", 60 * NS_PER_S }, { "hours", 3600 * NS_PER_S }, { "hour", 3600 * NS_PER_S },
        { "days", 86400 * NS_PER_S }, { "day", 86400 * NS_PER_S },
        { "weeks", 604800 * NS_PER_S }, { "week", 604800 * NS_PER_S },
        { "usec", 1000ull }, { "msec", 1000000ull }, { "secs", NS_PER_S }, { "sec", NS_PER_S },
        { "mins", 60 * NS_PER_S }, { "min", 60 * NS_PER_S }, { "us", 1000ull },
        { "ms", 1000000ull }, { "s", NS_PER_S }, { "m", 60 * NS_PER_S },
        { "h", 3600 * NS_PER_S }, { "d", 86400 * NS_PER_S }, { "w", 604800 * NS_PER_S },
    };

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        size_t n = strlen(units[i].name);

        if (strncmp(*p, units[i].name, n) == 0 && !isalpha((unsigned char)(*p)[n])) {
            *p += n;
            return units[i].ns;
        }
    }
    return 0;
}

/* "1h30m", "90s", "2 days 3h": a sum of number-unit pairs, blanks allowed
 * between them. */
static int parse_span(const char *p, const char *end, uint64_t *ret_ns)
{
    uint64_t total = 0;
    bool any = false;

    while (p < end) {
        uint64_t n = 0, unit;

        while (p < end && *p == ' ')
            p++;
        if (p == end)
            break;
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        while (p < end && isdigit((unsigned char)*p)) {
            if (n > (UINT64_MAX - 9) / 10)
                return -ERANGE;
            n = n * 10 + (uint64_t)(*p++ - '0');
        }
        while (p < end && *p == ' ')
            p++;
        if (p == end)
            return -EINVAL; /* a number needs its unit */
        unit = unit_ns(&p);
        if (!unit || p > end)
            return -EINVAL;
        if (n && unit > UINT64_MAX / n)
            return -ERANGE;
        if (total > UINT64_MAX - n * unit)
            return -ERANGE;
        total += n * unit;
        any = true;
    }
    if (!any)
        return -EINVAL;
    *ret_ns = total;
    return 0;
}

static int local_midnight(uint64_t now_ns, int day_offset, uint64_t *ret)
{
    time_t now = (time_t)(now_ns / NS_PER_S);
    struct tm tm;
    int64_t secs;

    if (!localtime_r(&now, &tm))
        return -ERANGE;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_mday += day_offset;
    tm.tm_isdst = -1;
    errno = 0;
    secs = (int64_t)mktime(&tm);
    if (secs == -1 && errno)
        return -ERANGE;
    return finish(secs, 0, ret);
}

int logctl_parse_time(const char *text, uint64_t now_ns, uint64_t *ret_ns)
{
    size_t len;
    const char *p, *end;
    struct tm tm;
    uint64_t frac = 0, span;
    int64_t secs;
    bool utc = false, have_date = false;
    int v, r;

    if (!text)
        return -EINVAL;
    while (*text == ' ')
        text++;
    len = strlen(text);
    while (len > 0 && text[len - 1] == ' ')
        len--;
    if (len == 0)
        return -EINVAL;
    end = text + len;

    if (len == 3 && strncmp(text, "now", 3) == 0) {
        *ret_ns = now_ns;
        return 0;
    }
    if (len == 5 && strncmp(text, "today", 5) == 0)
        return local_midnight(now_ns, 0, ret_ns);
    if (len == 9 && strncmp(text, "yesterday", 9) == 0)
        return local_midnight(now_ns, -1, ret_ns);
    if (len == 8 && strncmp(text, "tomorrow", 8) == 0)
        return local_midnight(now_ns, 1, ret_ns);

    /* Relative: "-1h", "+30m", "1h ago". */
    if (text[0] == '-' || text[0] == '+') {
        r = parse_span(text + 1, end, &span);
        if (r < 0)
            return r;
        if (text[0] == '-')
            return span > now_ns ? -ERANGE : (*ret_ns = now_ns - span, 0);
        return span > UINT64_MAX - now_ns ? -ERANGE : (*ret_ns = now_ns + span, 0);
    }
    if (len > 4 && strncmp(end - 4, " ago", 4) == 0) {
        r = parse_span(text, end - 4, &span);
        if (r < 0)
            return r;
        return span > now_ns ? -ERANGE : (*ret_ns = now_ns - span, 0);
    }

    /* Unix time: "@1764583200.25". */
    if (text[0] == '@') {
        uint64_t s = 0;

        p = text + 1;
        if (p == end || !isdigit((unsigned char)*p))
            return -EINVAL;
        while (p < end && isdigit((unsigned char)*p)) {
            if (s > (UINT64_MAX - 9) / 10)
                return -ERANGE;
            s = s * 10 + (uint64_t)(*p++ - '0');
        }
        if (p < end && !fraction(&p, &frac))
            return -EINVAL;
        if (p != end)
            return -EINVAL;
        if (s > (uint64_t)INT64_MAX)
            return -ERANGE;
        return finish((int64_t)s, frac, ret_ns);
    }

    /* Absolute: [YYYY-MM-DD][( |T)HH:MM[:SS[.frac]]][Z| UTC]. */
    if (len >= 1 && end[-1] == 'Z') {
        utc = true;
        end--;
    } else if (len >= 4 && strncasecmp(end - 4, " UTC", 4) == 0) {
        utc = true;
        end -= 4;
    }
    memset(&tm, 0, sizeof(tm));
    p = text;
    if (end - p >= 10 && p[4] == '-') {
        int y, mo, d;

        if (!digits(&p, 4, &y) || *p++ != '-' || !digits(&p, 2, &mo) || *p++ != '-' ||
            !digits(&p, 2, &d))
            return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > 31)
            return -EINVAL;
        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        have_date = true;
        if (p < end) {
            if (*p != ' ' && *p != 'T')
                return -EINVAL;
            p++;
        }
    } else {
        /* A time alone is today's, in the zone it is given in. */
        time_t now = (time_t)(now_ns / NS_PER_S);
        struct tm today;

        if (!(utc ? gmtime_r(&now, &today) : localtime_r(&now, &today)))
            return -ERANGE;
        tm.tm_year = today.tm_year;
        tm.tm_mon = today.tm_mon;
        tm.tm_mday = today.tm_mday;
    }
    if (p < end) {
        if (!digits(&p, 2, &v) || v > 23)
            return -EINVAL;
        tm.tm_hour = v;
        if (p >= end || *p++ != ':' || !digits(&p, 2, &v) || v > 59)
            return -EINVAL;
        tm.tm_min = v;
        if (p < end && *p == ':') {
            p++;
            if (!digits(&p, 2, &v) || v > 59)
                return -EINVAL;
            tm.tm_sec = v;
            if (p < end && *p == '.' && !fraction(&p, &frac))
                return -EINVAL;
        }
    } else if (!have_date) {
        return -EINVAL;
    }
    if (p != end)
        return -EINVAL;
    r = to_epoch(&tm, utc, &secs);
    if (r < 0)
        return r;
    return finish(secs, frac, ret_ns);
}
