/* The retention rule, apart from any file system (docs/RETENTION.md): of
 * a set of files, which go, in which order, and why. Age first, since a
 * file past its age goes whatever the total; then the total, oldest
 * first, so that what stays is always the newest. Kept apart so that
 * tests/test-logctl.c can check it on made-up lists. */
#include <stdlib.h>
#include <string.h>

#include "prune.h"

static int file_cmp(const void *a, const void *b)
{
    const struct prune_file *x = a, *y = b;

    if (x->time_ns != y->time_ns)
        return x->time_ns < y->time_ns ? -1 : 1;
    return strcmp(x->name, y->name);
}

uint64_t prune_select(struct prune_file *v, size_t n, uint64_t now_ns, uint64_t max_age_ns,
                      uint64_t max_bytes)
{
    uint64_t total = 0;

    if (n > 1)
        qsort(v, n, sizeof(*v), file_cmp);
    for (size_t i = 0; i < n; i++) {
        uint64_t age = now_ns > v[i].time_ns ? now_ns - v[i].time_ns : 0;

        v[i].reason = max_age_ns && age > max_age_ns ? PRUNE_AGE : PRUNE_KEEP;
        if (v[i].reason == PRUNE_KEEP)
            total += v[i].bytes; /* sizes of files on one system: no wrap */
    }
    for (size_t i = 0; max_bytes && i < n && total > max_bytes; i++) {
        if (v[i].reason != PRUNE_KEEP)
            continue;
        v[i].reason = PRUNE_SIZE;
        total -= v[i].bytes;
    }
    return total;
}
