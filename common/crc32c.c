/* CRC32C with a slice-by-8 table and, on x86-64 CPUs with SSE4.2, the crc32
 * instruction. The choice is made once, on first use; both paths are kept so
 * that a tests can compare them on the same machine. */
#include "crc32c.h"

#include <stdbool.h>
#include <string.h>

#define CRC32C_POLY_REFLECTED 0x82F63B78u

static uint32_t table[8][256];
static bool table_ready;
static int use_hardware = -1; /* -1: not decided yet */
static bool software_forced;

static void build_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (CRC32C_POLY_REFLECTED & (0u - (c & 1u)));
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    table_ready = true;
}

static uint32_t crc_software(uint32_t crc, const unsigned char *p, size_t len)
{
    if (!table_ready)
        build_table();
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^
              table[5][(w >> 16) & 0xff] ^ table[4][(w >> 24) & 0xff] ^
              table[3][(w >> 32) & 0xff] ^ table[2][(w >> 40) & 0xff] ^
              table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* Eight bytes per instruction from wherever the data starts: x86-64 loads
 * unaligned words at no extra cost, while a byte at a time up to an 8-byte
 * boundary and after the last word made a chain up to 14 instructions
 * longer, each one waiting for the one before. The daemon checksums every
 * record on its own, a record's fields and payload at any offset, so on
 * short records those bytes were a quarter of the time. */
__attribute__((target("sse4.2")))
static uint32_t crc_hardware(uint32_t crc32, const unsigned char *p, size_t len)
{
    uint64_t crc = crc32;
    uint32_t c;

    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        crc = __builtin_ia32_crc32di(crc, w);
        p += 8;
        len -= 8;
    }
    c = (uint32_t)crc;
    if (len & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c = __builtin_ia32_crc32si(c, w);
        p += 4;
    }
    if (len & 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        c = __builtin_ia32_crc32hi(c, w);
        p += 2;
    }
    if (len & 1)
        c = __builtin_ia32_crc32qi(c, *p);
    return c;
}

/* Three chains side by side: each crc32 instruction waits for the one
 * before it in its own chain only, so three independent buffers cost about
 * what one does, up to the shortest one's last whole word. */
__attribute__((target("sse4.2")))
static void crc_hardware3(uint32_t crc[3], const unsigned char *const data[3],
                          const size_t len[3])
{
    uint64_t c0 = crc[0], c1 = crc[1], c2 = crc[2];
    size_t common = len[0] < len[1] ? len[0] : len[1];
    size_t i = 0;

    if (len[2] < common)
        common = len[2];
    for (; i + 8 <= common; i += 8) {
        uint64_t w0, w1, w2;
        memcpy(&w0, data[0] + i, 8);
        memcpy(&w1, data[1] + i, 8);
        memcpy(&w2, data[2] + i, 8);
        c0 = __builtin_ia32_crc32di(c0, w0);
        c1 = __builtin_ia32_crc32di(c1, w1);
        c2 = __builtin_ia32_crc32di(c2, w2);
    }
    crc[0] = crc_hardware((uint32_t)c0, data[0] + i, len[0] - i);
    crc[1] = crc_hardware((uint32_t)c1, data[1] + i, len[1] - i);
    crc[2] = crc_hardware((uint32_t)c2, data[2] + i, len[2] - i);
}

static bool cpu_has_crc_instruction(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc_hardware(uint32_t crc, const unsigned char *p, size_t len)
{
    return crc_software(crc, p, len);
}

static void crc_hardware3(uint32_t crc[3], const unsigned char *const data[3],
                          const size_t len[3])
{
    for (int k = 0; k < 3; k++)
        crc[k] = crc_software(crc[k], data[k], len[k]);
}

static bool cpu_has_crc_instruction(void)
{
    return false;
}
#endif

void crc32c_force_software(int on)
{
    software_forced = on != 0;
}

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len)
{
    if (use_hardware < 0)
        use_hardware = cpu_has_crc_instruction();
    crc = ~crc;
    if (use_hardware && !software_forced)
        crc = crc_hardware(crc, data, len);
    else
        crc = crc_software(crc, data, len);
    return ~crc;
}

void crc32c_extend3(uint32_t crc[3], const void *const data[3], const size_t len[3])
{
    if (use_hardware < 0)
        use_hardware = cpu_has_crc_instruction();
    for (int k = 0; k < 3; k++)
        crc[k] = ~crc[k];
    if (use_hardware && !software_forced) {
        const unsigned char *const bytes[3] = { data[0], data[1], data[2] };
        crc_hardware3(crc, bytes, len);
    } else {
        for (int k = 0; k < 3; k++)
            crc[k] = crc_software(crc[k], data[k], len[k]);
    }
    for (int k = 0; k < 3; k++)
        crc[k] = ~crc[k];
}
