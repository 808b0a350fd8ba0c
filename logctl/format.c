/* Numbers, times, streams and skipped damage as logctl shows them to people.
 * Machine output (--json) never goes through here: it carries exact numbers
 * and RFC 3339 times. */
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "cat.h"
#include "logctl.h"

void logctl_format_size(uint64_t bytes, bool exact, char *out, size_t size)
{
    static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
    double v = (double)bytes;
    unsigned u = 0;

    if (exact || bytes < 1024) {
        snprintf(out, size, exact ? "%" PRIu64 : "%" PRIu64 " B", bytes);
        return;
    }
    v /= 1024.0;
    while (v >= 1024.0 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024.0;
        u++;
    }
    snprintf(out, size, v < 10.0 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void logctl_format_local_time(uint64_t ns, char *out, size_t size)
{
    time_t secs = (time_t)(ns / 1000000000u);
    struct tm tm;

    if (ns == 0 || !localtime_r(&secs, &tm) || strftime(out, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        snprintf(out, size, "-");
}

void logctl_format_duration(double seconds, char *out, size_t size)
{
    uint64_t s;

    if (seconds < 0)
        seconds = 0;
    if (seconds < 60.0) {
        snprintf(out, size, "%.1fs", seconds);
        return;
    }
    s = (uint64_t)seconds;
    if (s >= 86400)
        snprintf(out, size, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400,
                 s % 86400 / 3600, s % 3600 / 60);
    else if (s >= 3600)
        snprintf(out, size, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600,
                 s % 3600 / 60, s % 60);
    else
        snprintf(out, size, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
}

void logctl_format_stream(const uint8_t id[SHARD_STREAM_ID_SIZE], char *out, size_t size)
{
    static const char digits[] = "0123456789abcdef";
    size_t n = 0;

    for (size_t i = 0; i < SHARD_STREAM_ID_SIZE && n + 2 < size; i++) {
        out[n++] = digits[id[i] >> 4];
        out[n++] = digits[id[i] & 0xf];
    }
    if (size > 0)
        out[n] = '\0';
}

void logctl_format_shard_stream(const struct shard_header *h, char *out, size_t size)
{
    if (shard_header_has_stream(h))
        logctl_format_stream(h->stream_id, out, size);
    else
        snprintf(out, size, "-");
}

void logctl_describe_skip(const struct shard_skip *s, bool at_end, char *out, size_t size)
{
    char shard[WIRE_PRODUCER_NAME_MAX + 32] = "";
    int n = snprintf(out, size, "%s at offset %" PRIu64, s->why, s->offset);

    if (s->bytes == 0 || n < 0 || (size_t)n >= size)
        return;
    if (s->in_shard)
        snprintf(shard, sizeof(shard), " of shard %s.%016" PRIx64, s->header.producer,
                 s->header.shard_id);
    if (s->records)
        snprintf(out + n, size - (size_t)n, ": skipped that record (%" PRIu64 " bytes)%s",
                 s->bytes, shard);
    else if (at_end)
        snprintf(out + n, size - (size_t)n, ": skipped %" PRIu64 " bytes%s to the end of the file%s",
                 s->bytes, shard, s->torn ? " (a torn tail)" : "");
    else
        snprintf(out + n, size - (size_t)n,
                 ": skipped %" PRIu64 " bytes%s, up to the next shard header at offset %" PRIu64,
                 s->bytes, shard, s->offset + s->bytes);
}
