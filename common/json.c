/* JSON writer and parser; see json.h. The parser builds a small tree: the
 * documents it reads (admin replies) are a few kilobytes, and a tree keeps
 * the callers simple. Recursion is bounded by JSON_MAX_DEPTH. */
#include "json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- writer ---- */

void json_out_init(struct json_out *o)
{
    memset(o, 0, sizeof(*o));
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

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when the
 * bytes there are not one. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp, min;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1f;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0f;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07;
        min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool utf8_valid(const void *s, size_t n)
{
    const unsigned char *p = s;

    for (size_t i = 0; i < n;) {
        size_t l = utf8_seq(p + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

static void put_escaped(struct json_out *o, const unsigned char *p, size_t n)
{
    putc_(o, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        size_t l;

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
        l = utf8_seq(p + i, n - i);
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

void json_u64(struct json_out *o, uint64_t v)
{
    before_value(o);
    putf(o, "%" PRIu64, v);
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

/* ---- parser ---- */

struct parser {
    const unsigned char *p;
    size_t len, pos;
    const char *why;
};

static int bad(struct parser *ps, const char *why)
{
    if (!ps->why)
        ps->why = why;
    return -EBADMSG;
}

static void skip_ws(struct parser *ps)
{
    while (ps->pos < ps->len && (ps->p[ps->pos] == ' ' || ps->p[ps->pos] == '\t' ||
                                 ps->p[ps->pos] == '\n' || ps->p[ps->pos] == '\r'))
        ps->pos++;
}

static void free_contents(struct json_value *v)
{
    if (v->type == JSON_STRING)
        free(v->string);
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT) {
        for (size_t i = 0; i < v->n; i++) {
            free_contents(&v->items[i]);
            if (v->keys)
                free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    memset(v, 0, sizeof(*v));
}

static int parse_value(struct parser *ps, struct json_value *v, unsigned depth);

static int hex4(struct parser *ps, uint32_t *ret)
{
    uint32_t x = 0;

    if (ps->len - ps->pos < 4)
        return bad(ps, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        unsigned char c = ps->p[ps->pos++];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return bad(ps, "bad hex digit in \\u escape");
        x = x << 4 | (uint32_t)d;
    }
    *ret = x;
    return 0;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* At the opening quote. The decoded text is never longer than its source. */
static int parse_string(struct parser *ps, char **ret, size_t *ret_len)
{
    size_t start = ++ps->pos, o = 0;
    char *out;
    int r;

    /* Find the end first, to size the buffer. */
    while (ps->pos < ps->len && ps->p[ps->pos] != '"') {
        if (ps->p[ps->pos] == '\\')
            ps->pos++;
        ps->pos++;
    }
    if (ps->pos >= ps->len)
        return bad(ps, "unterminated string");
    out = malloc(ps->pos - start + 1);
    if (!out)
        return -ENOMEM;
    ps->pos = start;
    for (;;) {
        unsigned char c = ps->p[ps->pos];

        if (c == '"') {
            ps->pos++;
            break;
        }
        if (c < 0x20) {
            r = bad(ps, "control character in string");
            goto fail;
        }
        if (c == '\\') {
            unsigned char e = ps->p[ps->pos + 1];
            uint32_t cp;

            ps->pos += 2;
            switch (e) {
            case '"': out[o++] = '"'; break;
            case '\\': out[o++] = '\\'; break;
            case '/': out[o++] = '/'; break;
            case 'b': out[o++] = '\b'; break;
            case 'f': out[o++] = '\f'; break;
            case 'n': out[o++] = '\n'; break;
            case 'r': out[o++] = '\r'; break;
            case 't': out[o++] = '\t'; break;
            case 'u':
                r = hex4(ps, &cp);
                if (r < 0)
                    goto fail;
                if (cp >= 0xd800 && cp <= 0xdbff && ps->len - ps->pos >= 6 &&
                    ps->p[ps->pos] == '\\' && ps->p[ps->pos + 1] == 'u') {
                    uint32_t lo;
                    size_t save = ps->pos;

                    ps->pos += 2;
                    r = hex4(ps, &lo);
                    if (r < 0)
                        goto fail;
                    if (lo >= 0xdc00 && lo <= 0xdfff)
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    else
                        ps->pos = save; /* a lone high surrogate; the next escape stands alone */
                }
                if (cp >= 0xd800 && cp <= 0xdfff)
                    cp = 0xfffd; /* a lone surrogate is no character */
                o += put_utf8(out + o, cp);
                break;
            default:
                r = bad(ps, "unknown escape in string");
                goto fail;
            }
            continue;
        }
        {
            size_t l = utf8_seq(ps->p + ps->pos, ps->len - ps->pos);
            if (!l) {
                r = bad(ps, "invalid UTF-8 in string");
                goto fail;
            }
            memcpy(out + o, ps->p + ps->pos, l);
            o += l;
            ps->pos += l;
        }
    }
    out[o] = '\0';
    *ret = out;
    *ret_len = o;
    return 0;

fail:
    free(out);
    return r;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static int parse_number(struct parser *ps, struct json_value *v)
{
    size_t start = ps->pos;
    bool whole = true, negative = false;
    char tmp[64];
    size_t n;

    if (ps->p[ps->pos] == '-') {
        negative = true;
        ps->pos++;
    }
    if (ps->pos >= ps->len || !is_digit(ps->p[ps->pos]))
        return bad(ps, "bad number");
    if (ps->p[ps->pos] == '0' && ps->pos + 1 < ps->len && is_digit(ps->p[ps->pos + 1]))
        return bad(ps, "leading zero in number");
    while (ps->pos < ps->len && is_digit(ps->p[ps->pos]))
        ps->pos++;
    if (ps->pos < ps->len && ps->p[ps->pos] == '.') {
        whole = false;
        ps->pos++;
        if (ps->pos >= ps->len || !is_digit(ps->p[ps->pos]))
            return bad(ps, "bad fraction in number");
        while (ps->pos < ps->len && is_digit(ps->p[ps->pos]))
            ps->pos++;
    }
    if (ps->pos < ps->len && (ps->p[ps->pos] == 'e' || ps->p[ps->pos] == 'E')) {
        whole = false;
        ps->pos++;
        if (ps->pos < ps->len && (ps->p[ps->pos] == '+' || ps->p[ps->pos] == '-'))
            ps->pos++;
        if (ps->pos >= ps->len || !is_digit(ps->p[ps->pos]))
            return bad(ps, "bad exponent in number");
        while (ps->pos < ps->len && is_digit(ps->p[ps->pos]))
            ps->pos++;
    }
    n = ps->pos - start;
    if (n >= sizeof(tmp))
        return bad(ps, "number too long");
    memcpy(tmp, ps->p + start, n);
    tmp[n] = '\0';
    v->type = JSON_NUMBER;
    v->number = strtod(tmp, NULL);
    if (whole && !negative) {
        char *end;
        unsigned long long u;

        errno = 0;
        u = strtoull(tmp, &end, 10);
        if (errno == 0 && *end == '\0') {
            v->is_u64 = true;
            v->u64 = u;
        }
    }
    return 0;
}

static int expect_word(struct parser *ps, const char *w, enum json_type t, struct json_value *v)
{
    size_t n = strlen(w);

    if (ps->len - ps->pos < n || memcmp(ps->p + ps->pos, w, n) != 0)
        return bad(ps, "unexpected character");
    ps->pos += n;
    v->type = t;
    return 0;
}

static int grow(struct json_value *v, size_t *cap, bool keys)
{
    size_t ncap = *cap ? *cap * 2 : 8;
    struct json_value *ni;

    ni = reallocarray(v->items, ncap, sizeof(*ni));
    if (!ni)
        return -ENOMEM;
    v->items = ni;
    if (keys) {
        char **nk = reallocarray(v->keys, ncap, sizeof(*nk));
        if (!nk)
            return -ENOMEM;
        v->keys = nk;
    }
    *cap = ncap;
    return 0;
}

static int parse_container(struct parser *ps, struct json_value *v, unsigned depth, bool object)
{
    size_t cap = 0;
    int r;

    if (depth >= JSON_MAX_DEPTH)
        return bad(ps, "nested too deeply");
    v->type = object ? JSON_OBJECT : JSON_ARRAY;
    ps->pos++;
    skip_ws(ps);
    if (ps->pos < ps->len && ps->p[ps->pos] == (object ? '}' : ']')) {
        ps->pos++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len;

        skip_ws(ps);
        if (object) {
            if (ps->pos >= ps->len || ps->p[ps->pos] != '"')
                return bad(ps, "expected a member name");
            r = parse_string(ps, &key, &key_len);
            if (r < 0)
                return r;
            skip_ws(ps);
            if (ps->pos >= ps->len || ps->p[ps->pos] != ':') {
                free(key);
                return bad(ps, "expected ':' after a member name");
            }
            ps->pos++;
        }
        if (v->n == cap && grow(v, &cap, object) < 0) {
            free(key);
            return -ENOMEM;
        }
        memset(&v->items[v->n], 0, sizeof(v->items[0]));
        if (object)
            v->keys[v->n] = key;
        v->n++;
        r = parse_value(ps, &v->items[v->n - 1], depth + 1);
        if (r < 0)
            return r;
        skip_ws(ps);
        if (ps->pos >= ps->len)
            return bad(ps, object ? "unterminated object" : "unterminated array");
        if (ps->p[ps->pos] == ',') {
            ps->pos++;
            continue;
        }
        if (ps->p[ps->pos] == (object ? '}' : ']')) {
            ps->pos++;
            return 0;
        }
        return bad(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int parse_value(struct parser *ps, struct json_value *v, unsigned depth)
{
    skip_ws(ps);
    if (ps->pos >= ps->len)
        return bad(ps, "unexpected end of text");
    switch (ps->p[ps->pos]) {
    case '{':
        return parse_container(ps, v, depth, true);
    case '[':
        return parse_container(ps, v, depth, false);
    case '"':
        v->type = JSON_STRING;
        return parse_string(ps, &v->string, &v->string_len);
    case 't':
        return expect_word(ps, "true", JSON_TRUE, v);
    case 'f':
        return expect_word(ps, "false", JSON_FALSE, v);
    case 'n':
        return expect_word(ps, "null", JSON_NULL, v);
    default:
        return parse_number(ps, v);
    }
}

int json_parse(const char *text, size_t len, struct json_value **ret, const char **ret_why,
               size_t *ret_offset)
{
    struct parser ps = { .p = (const unsigned char *)text, .len = len };
    struct json_value *v = calloc(1, sizeof(*v));
    int r;

    if (!v)
        return -ENOMEM;
    r = parse_value(&ps, v, 0);
    if (r == 0) {
        skip_ws(&ps);
        if (ps.pos != ps.len)
            r = bad(&ps, "text after the value");
    }
    if (r < 0) {
        if (ret_why)
            *ret_why = r == -ENOMEM ? "out of memory" : ps.why;
        if (ret_offset)
            *ret_offset = ps.pos;
        json_value_free(v);
        return r;
    }
    *ret = v;
    return 0;
}

void json_value_free(struct json_value *v)
{
    if (!v)
        return;
    free_contents(v);
    free(v);
}

const struct json_value *json_get(const struct json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

uint64_t json_get_u64(const struct json_value *v, const char *key, uint64_t fallback)
{
    const struct json_value *m = json_get(v, key);
    return m && m->type == JSON_NUMBER && m->is_u64 ? m->u64 : fallback;
}

double json_get_double(const struct json_value *v, const char *key, double fallback)
{
    const struct json_value *m = json_get(v, key);
    return m && m->type == JSON_NUMBER ? m->number : fallback;
}

const char *json_get_str(const struct json_value *v, const char *key, const char *fallback)
{
    const struct json_value *m = json_get(v, key);
    return m && m->type == JSON_STRING ? m->string : fallback;
}

bool json_get_bool(const struct json_value *v, const char *key, bool fallback)
{
    const struct json_value *m = json_get(v, key);

    if (m && m->type == JSON_TRUE)
        return true;
    if (m && m->type == JSON_FALSE)
        return false;
    return fallback;
}

/* ---- times ---- */

int rfc3339_format(uint64_t ns, unsigned frac_digits, char *out, size_t size)
{
    time_t secs = (time_t)(ns / 1000000000u);
    uint64_t frac = ns % 1000000000u;
    struct tm tm;
    size_t n;

    if (frac_digits > 9 || !gmtime_r(&secs, &tm))
        return -EOVERFLOW;
    n = strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm);
    if (n == 0)
        return -EOVERFLOW;
    if (frac_digits > 0) {
        for (unsigned i = frac_digits; i < 9; i++)
            frac /= 10;
        if (snprintf(out + n, size - n, ".%0*" PRIu64 "Z", (int)frac_digits, frac) >=
            (int)(size - n))
            return -EOVERFLOW;
    } else if (snprintf(out + n, size - n, "Z") >= (int)(size - n)) {
        return -EOVERFLOW;
    }
    return 0;
}

/* ---- base64 ---- */

size_t base64_encoded_len(size_t n)
{
    return (n + 2) / 3 * 4;
}

void base64_encode(const void *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = in;
    size_t o = 0, i = 0;

    for (; i + 3 <= n; i += 3) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        out[o++] = abc[x >> 18];
        out[o++] = abc[x >> 12 & 63];
        out[o++] = abc[x >> 6 & 63];
        out[o++] = abc[x & 63];
    }
    if (n - i == 1) {
        uint32_t x = (uint32_t)p[i] << 16;
        out[o++] = abc[x >> 18];
        out[o++] = abc[x >> 12 & 63];
        out[o++] = '=';
        out[o++] = '=';
    } else if (n - i == 2) {
        uint32_t x = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8;
        out[o++] = abc[x >> 18];
        out[o++] = abc[x >> 12 & 63];
        out[o++] = abc[x >> 6 & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}
