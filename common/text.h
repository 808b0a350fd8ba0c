/* Text helpers for what logshard writes for other programs: strict
 * decimal numbers for the parsers of its own text files, UTF-8 checks
 * and encoding (the JSON writer and parser rely on them), base64 for opaque
 * payloads in --json output, and RFC 3339 times. Pure functions: no I/O,
 * no allocation, no logging. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- numbers ---- */

/* The len bytes at s as a decimal number: digits only (no sign, no blank),
 * at most UINT64_MAX; with canonical also no leading zero (but "0" itself),
 * so that each number has one spelling. Returns 0 with *ret, or -EBADMSG. */
int decimal_parse_u64(const char *s, size_t len, bool canonical, uint64_t *ret);

/* v in decimal at out, canonical, then a NUL (out has room for 21 bytes).
 * Returns the digits written. For hot paths where snprintf costs too much. */
size_t decimal_format_u64(char *out, uint64_t v);

/* ---- UTF-8 ---- */

/* Length of the valid UTF-8 sequence at s (n >= 1 bytes available), or 0
 * when the bytes there are not one: shortest forms only, no surrogates,
 * nothing above U+10FFFF. */
size_t utf8_sequence_len(const unsigned char *s, size_t n);

/* Whether s[0..n) is valid UTF-8: shortest forms only, no surrogates,
 * nothing above U+10FFFF. */
bool utf8_valid(const void *s, size_t n);

/* Writes the code point cp (at most U+10FFFF) as UTF-8 to out, which has
 * room for 4 bytes; returns the number of bytes written, 1 to 4. */
size_t utf8_encode(char *out, uint32_t cp);

/* ---- times ---- */

/* ns since the epoch as RFC 3339 in UTC, "2026-12-01T10:00:00Z", with
 * frac_digits (0 to 9) digits of fraction before the Z. Returns 0, or
 * -EOVERFLOW when it does not fit in size bytes or the time cannot be
 * represented. */
int rfc3339_format(uint64_t ns, unsigned frac_digits, char *out, size_t size);

/* ---- base64 ---- */

/* Length of the base64 (RFC 4648, with padding) text for n bytes. */
size_t base64_encoded_len(size_t n);

/* Writes base64_encoded_len(n) characters and a NUL to out. */
void base64_encode(const void *in, size_t n, char *out);
