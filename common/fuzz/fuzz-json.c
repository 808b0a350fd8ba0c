/* Fuzz target for the JSON parser (common/json-parse.c), the one parser of
 * the admin protocol, which reads whatever a peer sends on the admin socket,
 * and for the writer (common/json-write.c) and UTF-8 rules (common/text.c)
 * it relies on.
 *
 * Input: the bytes of one document, as the daemon's admin.c hands a request
 * line to json_parse. Each input is used twice:
 *  - parsed as a document. A refusal must be -EBADMSG (or -ENOMEM) with a
 *    reason and an offset inside the text, and leave the tree alone. An accepted
 *    text must be valid UTF-8, its tree must keep the parser's documented
 *    limits, and the tree written back (json_write_value) must parse again
 *    into the same tree and be written the same way: writer and parser
 *    agree on every value the parser accepts. Every proper prefix of that
 *    compact text, which ends with its value's last byte, must be refused.
 *  - written as one string value (json_str), which must give valid JSON
 *    text that parses back into the input itself when the input is valid
 *    UTF-8, and into the input with U+FFFD in place of each bad byte
 *    otherwise. */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "json.h"

/* Longest compact text whose every prefix is parsed; the check is
 * quadratic, and longer texts get only their longest prefix checked. */
#define PREFIX_CHECK_MAX 512u

static const char *const no_why = "(untouched)";
static struct json_value untouched;

/* The parser's contract for a refusal: the reason and the offset are
 * written, the tree is not. */
static int parse_checked(const char *text, size_t len, struct json_value **ret)
{
    struct json_value *const sentinel = &untouched;
    struct json_value *v = sentinel;
    const char *why = no_why;
    size_t off = (size_t)-1;
    int r = json_parse(text, len, &v, &why, &off);

    FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
    if (r < 0) {
        FUZZ_CHECK(v == sentinel);
        FUZZ_CHECK(why != no_why && why && *why);
        FUZZ_CHECK(off <= len);
        return r;
    }
    FUZZ_CHECK(v != sentinel && v);
    *ret = v;
    return 0;
}

/* What every tree the parser builds looks like. */
static void check_tree(const struct json_value *v, unsigned depth)
{
    switch (v->type) {
    case JSON_NULL:
    case JSON_FALSE:
    case JSON_TRUE:
        break;
    case JSON_NUMBER:
        /* JSON has no infinity, and the writer would have to write it as
         * null: the parser keeps only what it can give back. */
        FUZZ_CHECK(isfinite(v->number));
        if (v->is_u64)
            FUZZ_CHECK(v->number == (double)v->u64);
        break;
    case JSON_STRING:
        FUZZ_CHECK(v->string && v->string[v->string_len] == '\0');
        FUZZ_CHECK(utf8_valid(v->string, v->string_len));
        break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        FUZZ_CHECK(depth < JSON_MAX_DEPTH);
        FUZZ_CHECK(v->n == 0 || v->items);
        for (size_t i = 0; i < v->n; i++) {
            if (v->type == JSON_OBJECT) {
                const struct json_value *first = json_get(v, v->keys[i]);

                FUZZ_CHECK(utf8_valid(v->keys[i], strlen(v->keys[i])));
                /* Duplicate names are kept; json_get finds the first. */
                FUZZ_CHECK(first && first <= &v->items[i]);
                FUZZ_CHECK(strcmp(v->keys[first - v->items], v->keys[i]) == 0);
            }
            check_tree(&v->items[i], depth + 1);
        }
        break;
    default:
        FUZZ_CHECK(!"a type json.h does not name");
    }
}

/* Whether a and b are the same JSON value. A number may come back as a
 * whole number ("1.0" is written as 1), so numbers compare by value. */
static bool same_value(const struct json_value *a, const struct json_value *b)
{
    if (a->type != b->type)
        return false;
    switch (a->type) {
    case JSON_NUMBER:
        if (a->is_u64 && !(b->is_u64 && a->u64 == b->u64))
            return false;
        return a->number == b->number && signbit(a->number) == signbit(b->number);
    case JSON_STRING:
        return a->string_len == b->string_len &&
               memcmp(a->string, b->string, a->string_len) == 0;
    case JSON_ARRAY:
    case JSON_OBJECT:
        if (a->n != b->n)
            return false;
        for (size_t i = 0; i < a->n; i++) {
            if (a->type == JSON_OBJECT && strcmp(a->keys[i], b->keys[i]) != 0)
                return false;
            if (!same_value(&a->items[i], &b->items[i]))
                return false;
        }
        return true;
    default:
        return true;
    }
}

static void write_tree(const struct json_value *v, char **ret, size_t *ret_len)
{
    struct json_out o;
    int r;

    json_out_init(&o);
    json_write_value(&o, v);
    r = json_out_finish(&o, ret, ret_len);
    FUZZ_CHECK(r == 0);
    FUZZ_CHECK(strlen(*ret) <= *ret_len && (*ret)[*ret_len] == '\0');
}

/* Refusal of a proper prefix of text. Each prefix gets a heap block of
 * exactly its length, so a parser reading past the end is an ASan report. */
static void check_prefix_refused(const char *text, size_t n)
{
    char *copy = malloc(n);
    struct json_value *v = NULL;

    FUZZ_CHECK(copy);
    memcpy(copy, text, n);
    FUZZ_CHECK(parse_checked(copy, n, &v) == -EBADMSG);
    free(copy);
}

static void check_document(const uint8_t *data, size_t size)
{
    struct json_value *v = NULL, *again = NULL;
    char *text, *text2;
    size_t len, len2;

    if (parse_checked((const char *)data, size, &v) < 0)
        return;
    /* Outside strings only ASCII is accepted, inside them valid UTF-8. */
    FUZZ_CHECK(utf8_valid(data, size));
    check_tree(v, 0);

    write_tree(v, &text, &len);
    FUZZ_CHECK(utf8_valid(text, len));
    FUZZ_CHECK(parse_checked(text, len, &again) == 0);
    FUZZ_CHECK(same_value(v, again));
    write_tree(again, &text2, &len2);
    FUZZ_CHECK(len == len2 && memcmp(text, text2, len) == 0);

    /* A compact container or string ends with its last byte, so any text
     * cut before it is unfinished. A number may be cut into a shorter one. */
    if (v->type == JSON_ARRAY || v->type == JSON_OBJECT || v->type == JSON_STRING) {
        if (len <= PREFIX_CHECK_MAX) {
            for (size_t n = 0; n < len; n++)
                check_prefix_refused(text, n);
        } else {
            check_prefix_refused(text, len - 1);
        }
    }
    free(text2);
    free(text);
    json_value_free(again);
    json_value_free(v);
}

/* The bytes with every byte that starts no valid UTF-8 sequence replaced by
 * U+FFFD, as json_str documents; *ret_len is the result's length. */
static char *replace_bad_bytes(const uint8_t *data, size_t size, size_t *ret_len)
{
    char *out = malloc(size * 3 + 1);
    size_t o = 0;

    FUZZ_CHECK(out);
    for (size_t i = 0; i < size;) {
        size_t l = utf8_sequence_len(data + i, size - i);

        if (l == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, data + i, l);
            o += l;
            i += l;
        }
    }
    *ret_len = o;
    return out;
}

static void check_string(const uint8_t *data, size_t size)
{
    struct json_out o;
    struct json_value *v = NULL;
    char *text, *want;
    size_t len, want_len;

    json_out_init(&o);
    json_str(&o, data, size);
    FUZZ_CHECK(json_out_finish(&o, &text, &len) == 0);
    FUZZ_CHECK(utf8_valid(text, len));
    /* Every byte below 0x20 is escaped, so the text is one line. */
    for (size_t i = 0; i < len; i++)
        FUZZ_CHECK((unsigned char)text[i] >= 0x20);
    FUZZ_CHECK(parse_checked(text, len, &v) == 0);
    FUZZ_CHECK(v->type == JSON_STRING);
    want = replace_bad_bytes(data, size, &want_len);
    FUZZ_CHECK(utf8_valid(data, size) == (want_len == size && memcmp(want, data, size) == 0));
    FUZZ_CHECK(v->string_len == want_len && memcmp(v->string, want, want_len) == 0);
    free(want);
    json_value_free(v);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_document(data, size);
    check_string(data, size);
    return 0;
}
