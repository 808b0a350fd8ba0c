/* The JSON parser; see json.h. It builds a small tree: the documents it
 * reads (admin requests and replies) are a few kilobytes, and a tree keeps
 * the callers simple. Recursion is bounded by JSON_MAX_DEPTH, and strings
 * are checked with text.c's UTF-8 rules. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

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
/* At the opening quote. The decoded text is never longer than its source. */
static int parse_string(struct parser *ps, char **ret, size_t *ret_len)
{
    size_t start = ++ps->pos, o = 0;
    char *out;
    int r;

    /* Find the end first, to size the buffer. A backslash skips the byte
     * after it, unless the text ends there: the offset of a refusal stays
     * inside the text. */
    while (ps->pos < ps->len && ps->p[ps->pos] != '"') {
        if (ps->p[ps->pos] == '\\' && ps->len - ps->pos > 1)
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
                o += utf8_encode(out + o, cp);
                break;
            default:
                r = bad(ps, "unknown escape in string");
                goto fail;
            }
            continue;
        }
        {
            size_t l = utf8_sequence_len(ps->p + ps->pos, ps->len - ps->pos);
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
    double number;
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
    number = strtod(tmp, NULL);
    /* Beyond the range of a double strtod gives an infinity, which JSON
     * cannot express: the writer would send it back as null. */
    if (!isfinite(number))
        return bad(ps, "number out of range");
    v->type = JSON_NUMBER;
    v->number = number;
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
            /* Names are C strings: "a\u0000b" would be found as "a". */
            if (memchr(key, '\0', key_len)) {
                free(key);
                return bad(ps, "NUL in a member name");
            }
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
