/* A small JSON writer (json-write.c) and parser (json-parse.c), for the
 * admin protocol (daemon and logctl) and logctl's --json output. The writer
 * escapes what JSON requires and never emits invalid UTF-8; the parser is
 * strict (RFC 8259: no comments, no trailing commas, valid UTF-8 only,
 * bounded nesting) because it reads what another program wrote and should
 * say so when that is wrong. No I/O, no logging.
 *
 * This is the one include for code that speaks JSON: it brings text.h too,
 * since every such caller also writes times or payloads with its helpers. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "text.h"

/* Nesting the writer and the parser accept. */
#define JSON_MAX_DEPTH 32u

/* ---- writer ---- */

/* An output buffer that grows as needed. Commas between members and items
 * are added by the writer. An allocation failure is remembered and reported
 * by json_out_finish, so callers need not check every call. */
struct json_out {
    char *buf;
    size_t len, cap;
    bool failed;
    unsigned depth;
    bool need_comma[JSON_MAX_DEPTH + 1];
    bool after_key;
};

void json_out_init(struct json_out *o);
void json_out_free(struct json_out *o);

/* Empties o for the next text, keeping its buffer (for a writer that
 * formats many texts one after the other). */
void json_out_reset(struct json_out *o);

/* The text so far (NUL-terminated; NULL while empty) and its length,
 * without handing it over; -ENOMEM after a failed allocation, -EINVAL
 * while an object or array is open. */
int json_out_peek(const struct json_out *o, const char **ret, size_t *ret_len);

/* Hands over the text, NUL-terminated: *ret (free it) and its length.
 * Returns 0, or -ENOMEM when an append failed, -EINVAL when an object or
 * array was left open (o is freed either way). */
int json_out_finish(struct json_out *o, char **ret, size_t *ret_len);

void json_obj_begin(struct json_out *o);
void json_obj_end(struct json_out *o);
void json_arr_begin(struct json_out *o);
void json_arr_end(struct json_out *o);
/* Appends text as it is, between values (e.g. the newline that ends a
 * document in a stream of them). */
void json_raw(struct json_out *o, const char *s, size_t n);

/* The name of the next member of the object being written. */
void json_key(struct json_out *o, const char *name);

/* Values. json_str escapes s[0..n); bytes that are not valid UTF-8 become
 * U+FFFD, so the output is always valid JSON text. json_cstr writes null for
 * NULL. json_double writes null for NaN and infinities (JSON has neither). */
void json_str(struct json_out *o, const void *s, size_t n);
void json_cstr(struct json_out *o, const char *s);
void json_u64(struct json_out *o, uint64_t v);
void json_i64(struct json_out *o, int64_t v);
void json_double(struct json_out *o, double v);
void json_bool(struct json_out *o, bool v);
void json_null(struct json_out *o);

/* A whole object member: json_key(o, name), then the value. */
void json_member_str(struct json_out *o, const char *name, const char *v);
void json_member_u64(struct json_out *o, const char *name, uint64_t v);
void json_member_i64(struct json_out *o, const char *name, int64_t v);
void json_member_double(struct json_out *o, const char *name, double v);
void json_member_bool(struct json_out *o, const char *name, bool v);

/* ---- parser ---- */

enum json_type {
    JSON_NULL,
    JSON_FALSE,
    JSON_TRUE,
    JSON_NUMBER,
    JSON_STRING,
    JSON_ARRAY,
    JSON_OBJECT,
};

struct json_value {
    enum json_type type;
    double number;      /* JSON_NUMBER */
    bool is_u64;        /* the number is a whole number 0..UINT64_MAX, exactly u64 */
    uint64_t u64;
    char *string;       /* JSON_STRING: NUL-terminated (may hold NUL from \u0000) */
    size_t string_len;
    size_t n;           /* JSON_ARRAY, JSON_OBJECT: number of items / members */
    struct json_value *items;
    char **keys;        /* JSON_OBJECT: keys[i] names items[i] */
};

/* Parses exactly one JSON value from text[0..len) (white space around it is
 * fine, anything else after it is not). Returns 0 and a new tree in *ret, or
 * -EBADMSG with a static reason in *ret_why and the byte offset where it was
 * found in *ret_offset (at most len; both may be NULL), or -ENOMEM.
 *
 * Beyond RFC 8259's grammar, and on purpose, so that every tree can be
 * written back (json_write_value) as the same value:
 *  - arrays and objects nest at most JSON_MAX_DEPTH deep;
 *  - a number has at most 63 characters, and one beyond the range of a
 *    double is refused (below it, it rounds to 0); is_u64 is set only for
 *    digits alone, without sign, fraction or exponent;
 *  - a \u escape of a lone surrogate gives U+FFFD; \u0000 is kept in a
 *    string value (see string_len) but refused in a member name;
 *  - duplicate member names are kept, in order; json_get finds the first. */
int json_parse(const char *text, size_t len, struct json_value **ret, const char **ret_why,
               size_t *ret_offset);

/* Frees a tree from json_parse; NULL is fine. */
void json_value_free(struct json_value *v);

/* The member named key of an object, or NULL (also when v is not an object
 * or is NULL). */
const struct json_value *json_get(const struct json_value *v, const char *key);

/* Typed reads of a member, with a fallback when it is missing or of another
 * type. */
uint64_t json_get_u64(const struct json_value *v, const char *key, uint64_t fallback);
double json_get_double(const struct json_value *v, const char *key, double fallback);
const char *json_get_str(const struct json_value *v, const char *key, const char *fallback);
bool json_get_bool(const struct json_value *v, const char *key, bool fallback);

/* Writes a parsed tree back out (compact), as the next value of o. */
void json_write_value(struct json_out *o, const struct json_value *v);
