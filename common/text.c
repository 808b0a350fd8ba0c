/* Text helpers; see text.h. */
#include "text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* ---- UTF-8 ---- */

size_t utf8_sequence_len(const unsigned char *s, size_t n)
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
        size_t l;

        if (p[i] < 0x80) { /* ASCII, the common case: then eight bytes at a time */
            i++;
            while (i + 8 <= n) {
                uint64_t w;

                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                    break;
                i += 8;
            }
            continue;
        }
        l = utf8_sequence_len(p + i, n - i);
        if (!l)
            return false;
        i += l;
    }
    return true;
}

size_t utf8_encode(char *out, uint32_t cp)
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

int decimal_parse_u64(const char *s, size_t len, bool canonical, uint64_t *ret)
{
    uint64_t v = 0;

    if (len == 0 || len > 20 || (canonical && len > 1 && s[0] == '0'))
        return -EBADMSG;
    for (size_t i = 0; i < len; i++) {
        unsigned d;

        if (s[i] < '0' || s[i] > '9')
            return -EBADMSG;
        d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EBADMSG;
        v = v * 10 + d;
    }
    *ret = v;
    return 0;
}

size_t decimal_format_u64(char *out, uint64_t v)
{
    char rev[20];
    size_t n = 0;

    do {
        rev[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = rev[n - 1 - i];
    out[n] = '\0';
    return n;
}
