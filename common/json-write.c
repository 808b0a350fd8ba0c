/* The JSON writer; see json.h. Text goes into one growing buffer; the
 * writer tracks the nesting itself, so callers never write a comma, and an
 * allocation failure is remembered and reported once, by json_out_finish.
 * Strings are escaped here and their bytes checked with text.c's UTF-8
 * rules, so the output is always valid JSON text. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

void json_out_init(struct json_out *o)
{
    memset(o, 0, sizeof(*o));
}

void json_out_reset(struct json_out *o)
{
    char *buf = o->buf;
    size_t cap = o->cap;

    memset(o, 0, sizeof(*o));
    o->buf = buf;
    o->cap = cap;
    if (buf)
        buf[0] = '\0';
}

void json_out_free(struct json_out *o)
{
    free(o->buf);
    json_out_init(o);
}

static void put(struct json_out *o, const char *s, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        char *nb;

        while (cap < o->len + n + 1)
            cap *= 2;
        nb = realloc(o->buf, cap);
        if (!nb) {
            o->failed = true;
            return;
        }
        o->buf = nb;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = '\0';
}

static void putc_(struct json_out *o, char c)
{
    put(o, &c, 1);
}

__attribute__((format(printf, 2, 3))) static void putf(struct json_out *o, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        o->failed = true; /* only numbers go through here; they always fit */
        return;
    }
    put(o, tmp, (size_t)n);
}

/* Before every value: the comma that separates it from the one before. */
static void before_value(struct json_out *o)
{
    if (o->after_key) {
        o->after_key = false;
        return;
    }
    if (o->need_comma[o->depth])
        putc_(o, ',');
    o->need_comma[o->depth] = true;
}

int json_out_peek(const struct json_out *o, const char **ret, size_t *ret_len)
{
    if (o->failed)
        return -ENOMEM;
    if (o->depth != 0 || o->after_key)
        return -EINVAL;
    *ret = o->buf;
    *ret_len = o->len;
    return 0;
}

int json_out_finish(struct json_out *o, char **ret, size_t *ret_len)
{
    int r = 0;

    if (o->failed)
        r = -ENOMEM;
    else if (o->depth != 0 || o->after_key)
        r = -EINVAL;
    else if (!o->buf)
        put(o, "", 0);
    if (r == 0 && o->failed)
        r = -ENOMEM;
    if (r < 0) {
        json_out_free(o);
        return r;
    }
    *ret = o->buf;
    *ret_len = o->len;
    o->buf = NULL;
    json_out_free(o);
    return 0;
}

static void open_(struct json_out *o, char c)
{
    before_value(o);
    putc_(o, c);
    if (o->depth >= JSON_MAX_DEPTH) {
        o->failed = true;
        return;
    }
    o->depth++;
    o->need_comma[o->depth] = false;
}

static void close_(struct json_out *o, char c)
{
    if (o->depth == 0) {
        o->failed = true;
        return;
    }
    o->depth--;
    putc_(o, c);
}

void json_raw(struct json_out *o, const char *s, size_t n)
{
    put(o, s, n);
}

void json_obj_begin(struct json_out *o)
{
    open_(o, '{');
}

void json_obj_end(struct json_out *o)
{
    close_(o, '}');
}

void json_arr_begin(struct json_out *o)
{
    open_(o, '[');
}

void json_arr_end(struct json_out *o)
{
    close_(o, ']');
}

/* Bytes that stand for themselves in a JSON string: printable ASCII but
 * the quote and the backslash. Runs of them are copied whole. */
static const bool json_plain[256] = {
    [0x20] = true, [0x21] = true, [0x23 ... 0x5b] = true, [0x5d ... 0x7e] = true,
};

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether all eight bytes of w are plain: none below 0x20, none from 0x80,
 * no quote, no backslash (each test sets a byte's high bit where it
 * fails). */
static bool word_plain(uint64_t w)
{
    uint64_t below_space = (w - ONES * 0x20) & ~w;
    uint64_t quote = w ^ (ONES * '"'), backslash = w ^ (ONES * '\\');

    quote = (quote - ONES) & ~quote;
    backslash = (backslash - ONES) & ~backslash;
    return ((below_space | quote | backslash | w) & HIGHS) == 0;
}

/* The length of the run of plain bytes at p[0..n). */
static size_t plain_run(const unsigned char *p, size_t n)
{
    size_t j = 0;

    for (; j + 8 <= n; j += 8) {
        uint64_t w;

        memcpy(&w, p + j, 8);
        if (!word_plain(w))
            break;
    }
    while (j < n && json_plain[p[j]])
        j++;
    return j;
}

static void put_escaped(struct json_out *o, const unsigned char *p, size_t n)
{
    putc_(o, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l, j = i + plain_run(p + i, n - i);

        if (j > i) {
            put(o, (const char *)p + i, j - i);
            i = j;
            continue;
        }

        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            put(o, e, 2);
            i++;
            continue;
        }
        if (c < 0x20) {
            switch (c) {
            case '\n': put(o, "\\n", 2); break;
            case '\t': put(o, "\\t", 2); break;
            case '\r': put(o, "\\r", 2); break;
            case '\b': put(o, "\\b", 2); break;
            case '\f': put(o, "\\f", 2); break;
            default: putf(o, "\\u%04x", c); break;
            }
            i++;
            continue;
        }
        l = utf8_sequence_len(p + i, n - i);
        if (!l) {
            put(o, "\xef\xbf\xbd", 3); /* U+FFFD for each byte that fits nothing */
            i++;
            continue;
        }
        put(o, (const char *)p + i, l);
        i += l;
    }
    putc_(o, '"');
}

void json_key(struct json_out *o, const char *name)
{
    before_value(o);
    put_escaped(o, (const unsigned char *)name, strlen(name));
    putc_(o, ':');
    o->after_key = true;
}

void json_str(struct json_out *o, const void *s, size_t n)
{
    before_value(o);
    put_escaped(o, s, n);
}

void json_cstr(struct json_out *o, const char *s)
{
    if (!s) {
        json_null(o);
        return;
    }
    json_str(o, s, strlen(s));
}

/* Decimal digits of v into the end of buf[0..24); returns where they start. */
static char *u64_digits(uint64_t v, char *end)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

void json_u64(struct json_out *o, uint64_t v)
{
    char buf[24], *start = u64_digits(v, buf + sizeof(buf));

    before_value(o);
    put(o, start, (size_t)(buf + sizeof(buf) - start));
}

void json_i64(struct json_out *o, int64_t v)
{
    before_value(o);
    putf(o, "%" PRId64, v);
}

void json_double(struct json_out *o, double v)
{
    before_value(o);
    if (!isfinite(v)) {
        put(o, "null", 4);
        return;
    }
    /* %.17g round-trips every double; shorter forms read better, so try
     * those first. */
    for (int prec = 6; prec <= 17; prec++) {
        char tmp[40];
        int n = snprintf(tmp, sizeof(tmp), "%.*g", prec, v);

        if (n > 0 && (size_t)n < sizeof(tmp) && (strtod(tmp, NULL) == v || prec == 17)) {
            put(o, tmp, (size_t)n);
            return;
        }
    }
}

void json_bool(struct json_out *o, bool v)
{
    before_value(o);
    if (v)
        put(o, "true", 4);
    else
        put(o, "false", 5);
}

void json_null(struct json_out *o)
{
    before_value(o);
    put(o, "null", 4);
}

void json_member_str(struct json_out *o, const char *name, const char *v)
{
    json_key(o, name);
    json_cstr(o, v);
}

void json_member_u64(struct json_out *o, const char *name, uint64_t v)
{
    json_key(o, name);
    json_u64(o, v);
}

void json_member_i64(struct json_out *o, const char *name, int64_t v)
{
    json_key(o, name);
    json_i64(o, v);
}

void json_member_double(struct json_out *o, const char *name, double v)
{
    json_key(o, name);
    json_double(o, v);
}

void json_member_bool(struct json_out *o, const char *name, bool v)
{
    json_key(o, name);
    json_bool(o, v);
}

void json_write_value(struct json_out *o, const struct json_value *v)
{
    switch (v->type) {
    case JSON_NULL: json_null(o); break;
    case JSON_FALSE: json_bool(o, false); break;
    case JSON_TRUE: json_bool(o, true); break;
    case JSON_NUMBER:
        if (v->is_u64)
            json_u64(o, v->u64);
        else
            json_double(o, v->number);
        break;
    case JSON_STRING: json_str(o, v->string, v->string_len); break;
    case JSON_ARRAY:
        json_arr_begin(o);
        for (size_t i = 0; i < v->n; i++)
            json_write_value(o, &v->items[i]);
        json_arr_end(o);
        break;
    case JSON_OBJECT:
        json_obj_begin(o);
        for (size_t i = 0; i < v->n; i++) {
            json_key(o, v->keys[i]);
            json_write_value(o, &v->items[i]);
        }
        json_obj_end(o);
        break;
    }
}
