/* The text of one configuration value, strictly: numbers, sizes,
 * durations and lists of users or groups. A stray character is an error,
 * never silently ignored. config.c applies them to its keys; the command
 * lines use the number, size and duration parsers too. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define GIB (1024ull * MIB)

/* The id of the group (groups) or user called name; false when there is
 * none, or it cannot be looked up. */
static bool lookup_name(const char *name, bool groups, uint64_t *ret)
{
    char buf[4096];

    if (groups) {
        struct group gr, *res = NULL;

        if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res)
            return false;
        *ret = gr.gr_gid;
    } else {
        struct passwd pw, *res = NULL;

        if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || !res)
            return false;
        *ret = pw.pw_uid;
    }
    return true;
}

/* "0, 1000 www-data": numbers or names, separated by commas and blanks.
 * Names are looked up now, so a typo is an error at load time, not a
 * producer refused later. */
int parse_id_list(const char *value, bool groups, struct config_id_list *ret, char *why,
                  size_t why_len, const char *key)
{
    struct config_id_list l = { NULL, 0 };
    char *copy = strdup(value), *save = NULL;

    if (!copy) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
        uint64_t v;
        uint32_t *n;

        if (parse_uint(t, 10, &v) == 0) {
            if (v > UINT32_MAX - 1) {
                snprintf(why, why_len, "%s: %s is not a valid id", key, t);
                goto invalid;
            }
        } else if (!lookup_name(t, groups, &v)) {
            snprintf(why, why_len, "%s: no %s named '%s'", key, groups ? "group" : "user", t);
            goto invalid;
        }
        n = realloc(l.ids, (l.n + 1) * sizeof(uint32_t));
        if (!n) {
            snprintf(why, why_len, "out of memory");
            free(l.ids);
            free(copy);
            return -ENOMEM;
        }
        l.ids = n;
        l.ids[l.n++] = (uint32_t)v;
    }
    free(copy);
    *ret = l;
    return 0;

invalid:
    free(l.ids);
    free(copy);
    return -EINVAL;
}

int parse_uint(const char *text, int base, uint64_t *ret)
{
    char *end;
    unsigned long long v;

    /* strtoull would skip blanks and take a sign; neither belongs here. */
    if (!text || !isalnum((unsigned char)*text))
        return -EINVAL;
    errno = 0;
    v = strtoull(text, &end, base);
    if (errno == ERANGE)
        return -ERANGE;
    if (end == text || *end)
        return -EINVAL;
    *ret = v;
    return 0;
}

/* Splits "123suffix" into the number and the suffix. */
static int split_number(const char *text, uint64_t *ret_value, const char **ret_suffix)
{
    char *end;
    unsigned long long v;

    if (!text || !isdigit((unsigned char)*text))
        return -EINVAL;
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    *ret_value = v;
    *ret_suffix = end;
    return 0;
}

static int scale(uint64_t value, uint64_t unit, uint64_t *ret)
{
    if (unit && value > UINT64_MAX / unit)
        return -ERANGE;
    *ret = value * unit;
    return 0;
}

struct unit {
    const char *suffix;
    uint64_t factor;
};

/* A number followed by exactly one of the units' suffixes. */
static int parse_in_units(const char *text, const struct unit *units, size_t n, uint64_t *ret)
{
    uint64_t v;
    const char *suffix;
    int r = split_number(text, &v, &suffix);

    if (r < 0)
        return r;
    for (size_t i = 0; i < n; i++)
        if (strcmp(suffix, units[i].suffix) == 0)
            return scale(v, units[i].factor, ret);
    return -EINVAL;
}

int parse_size(const char *text, uint64_t *ret)
{
    static const struct unit units[] = {
        { "", 1 }, { "B", 1 },
        { "K", KIB }, { "KB", KIB }, { "KiB", KIB }, { "k", KIB },
        { "M", MIB }, { "MB", MIB }, { "MiB", MIB },
        { "G", GIB }, { "GB", GIB }, { "GiB", GIB },
        { "T", 1024 * GIB }, { "TB", 1024 * GIB }, { "TiB", 1024 * GIB },
    };

    return parse_in_units(text, units, sizeof(units) / sizeof(units[0]), ret);
}

int parse_duration_ms(const char *text, uint64_t *ret)
{
    static const struct unit units[] = {
        { "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "min", 60000 },
        { "h", 3600000 }, { "d", 86400000 },
    };

    return parse_in_units(text, units, sizeof(units) / sizeof(units[0]), ret);
}
