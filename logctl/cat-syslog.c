/* logctl cat's view of syslog records: see cat-syslog.h. */
#include "cat-syslog.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <strings.h>

#include "text.h"

static const char *const severity_names[8] = { "emerg",   "alert",  "crit", "err",
                                                "warning", "notice", "info", "debug" };

/* One level, by number or name (with the aliases journalctl takes). */
static int parse_level(const char *s, size_t len)
{
    static const struct {
        const char *name;
        int level;
    } aliases[] = { { "panic", 0 }, { "error", 3 }, { "warn", 4 } };

    if (len == 1 && s[0] >= '0' && s[0] <= '7')
        return s[0] - '0';
    for (int i = 0; i < 8; i++)
        if (strlen(severity_names[i]) == len && strncasecmp(s, severity_names[i], len) == 0)
            return i;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (strlen(aliases[i].name) == len && strncasecmp(s, aliases[i].name, len) == 0)
            return aliases[i].level;
    return -EINVAL;
}

int cat_syslog_parse_priority(const char *arg, uint8_t *ret_mask)
{
    const char *dots = strstr(arg, "..");
    int from, to;
    uint8_t mask = 0;

    if (!dots) {
        to = parse_level(arg, strlen(arg));
        if (to < 0)
            return to;
        from = 0;
    } else {
        from = parse_level(arg, (size_t)(dots - arg));
        to = parse_level(dots + 2, strlen(dots + 2));
        if (from < 0 || to < 0)
            return -EINVAL;
        if (from > to) {
            int t = from;

            from = to;
            to = t;
        }
    }
    for (int s = from; s <= to; s++)
        mask |= (uint8_t)(1u << s);
    *ret_mask = mask;
    return 0;
}

const char *cat_syslog_severity_name(int severity)
{
    return severity >= 0 && severity < 8 ? severity_names[severity] : NULL;
}

const char *cat_syslog_facility_name(int facility, char buf[4])
{
    static const char *const names[12] = { "kern", "user", "mail",   "daemon", "auth", "syslog",
                                           "lpr",  "news", "uucp",   "cron",   "authpriv",
                                           "ftp" };
    static const char *const locals[8] = { "local0", "local1", "local2", "local3",
                                           "local4", "local5", "local6", "local7" };

    if (facility >= 0 && facility < 12)
        return names[facility];
    if (facility >= 16 && facility < 24)
        return locals[facility - 16];
    snprintf(buf, 4, "%d", facility >= 0 && facility < 24 ? facility : 99);
    return buf;
}

bool cat_syslog_wanted(const struct syslog_msg *m, const struct cat_syslog_filter *f)
{
    if (!m)
        return !cat_syslog_filtering(f);
    if (f->by_severity && (m->severity == SYSLOG_ABSENT || !(f->severities & (1u << m->severity))))
        return false;
    if (f->n_identifiers == 0)
        return true;
    for (size_t i = 0; i < f->n_identifiers; i++)
        if (m->app_name.ptr && strlen(f->identifiers[i]) == m->app_name.len &&
            memcmp(f->identifiers[i], m->app_name.ptr, m->app_name.len) == 0)
            return true;
    return false;
}

static void print_slice(FILE *f, const char *name, struct syslog_slice s)
{
    fprintf(f, "%s=", name);
    if (s.ptr && s.len > 0)
        fwrite(s.ptr, 1, s.len, f);
    else
        fputc('-', f);
    fputc(' ', f);
}

void cat_syslog_print_meta(FILE *f, const struct syslog_msg *m)
{
    char num[4], when[64];

    if (m->format == SYSLOG_FORMAT_NONE)
        fputs("facility=- severity=- ", f);
    else
        fprintf(f, "facility=%s severity=%s ", cat_syslog_facility_name(m->facility, num),
                cat_syslog_severity_name(m->severity));
    print_slice(f, "identifier", m->app_name);
    print_slice(f, "procid", m->procid);
    print_slice(f, "hostname", m->hostname);
    if (m->has_time && rfc3339_format(m->time_ns, 6, when, sizeof(when)) >= 0)
        fprintf(f, "time=%s ", when);
    else
        fputs("time=- ", f);
}

static void json_slice(struct json_out *o, const char *name, struct syslog_slice s)
{
    json_key(o, name);
    if (s.ptr)
        json_str(o, s.ptr, s.len);
    else
        json_null(o);
}

void cat_syslog_json(struct json_out *o, const struct syslog_msg *m)
{
    char num[4], when[64];
    bool has_pri = m->format != SYSLOG_FORMAT_NONE;

    json_key(o, "syslog");
    json_obj_begin(o);
    json_member_str(o, "format",
                    m->format == SYSLOG_FORMAT_RFC5424   ? "rfc5424"
                    : m->format == SYSLOG_FORMAT_RFC3164 ? "rfc3164"
                                                         : "none");
    json_key(o, "facility");
    json_cstr(o, has_pri ? cat_syslog_facility_name(m->facility, num) : NULL);
    json_key(o, "severity");
    json_cstr(o, has_pri ? cat_syslog_severity_name(m->severity) : NULL);
    json_slice(o, "identifier", m->app_name);
    json_slice(o, "procid", m->procid);
    json_slice(o, "hostname", m->hostname);
    json_slice(o, "msgid", m->msgid);
    json_key(o, "time");
    if (m->has_time && rfc3339_format(m->time_ns, 9, when, sizeof(when)) >= 0)
        json_cstr(o, when);
    else
        json_null(o);
    json_slice(o, "structured_data", m->structured_data);
    json_obj_end(o);
}
