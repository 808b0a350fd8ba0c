/* CRC32C (Castagnoli), the checksum of every shard header and record. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Extends crc (0 to start) over len bytes of data and returns the new value.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise;
 * both give the same result. */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len);

/* Extends three CRCs at once, crc[k] over len[k] bytes of data[k], as three
 * calls of crc32c_extend() would. Faster than those where the crc32
 * instruction is used: the three run side by side. */
void crc32c_extend3(uint32_t crc[3], const void *const data[3], const size_t len[3]);

/* The CRC32C of one buffer. */
static inline uint32_t crc32c(const void *data, size_t len)
{
    return crc32c_extend(0, data, len);
}

/* Forces the table implementation (1) or lets the CPU decide (0). Tests use it
 * to check that both give the same answers. */
void crc32c_force_software(int on);
