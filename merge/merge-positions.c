/* The stream positions of what merge --delete removes (docs/MERGE.md, step
 * 5, and docs/FORMAT.md, "Stream positions file").
 *
 * The daemon learns where each producer stream continues from the version 3
 * shards in done/. A shard merge --delete removes takes that knowledge with
 * it, and a producer resuming its stream would then be told an older
 * position and send records again that are already stored: duplicates. So
 * before the first source is unlinked, one positions file naming every
 * stream among the sources is made durable in <spool>/streams/
 * (positions_write), and if that fails nothing is deleted. The daemon reads
 * those files at start and keeps the highest position of each stream, so
 * writing a file again (as recovery does: it cannot know whether the
 * killed merge got that far) is harmless. */
#include "merge-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "spool_names.h"
#include "stream_positions.h"

static int entry_id_cmp(const void *a, const void *b)
{
    const struct positions_entry *x = a, *y = b;

    return memcmp(x->stream_id, y->stream_id, sizeof(x->stream_id));
}

int merge_write_positions(int spool_fd, const char *spool, const struct merge_source *v, size_t n,
                          const struct merge_opts *opts, struct merge_result *res)
{
    _cleanup_free_ struct positions_entry *e = NULL;
    _cleanup_free_ char *name = NULL;
    size_t m = 0, out = 0;
    int r;

    for (size_t i = 0; i < n; i++)
        m += v[i].has_stream;
    if (m == 0)
        return 0; /* no stream among them: nothing the daemon could forget */
    e = calloc(m, sizeof(*e));
    if (!e)
        return merge_fail(res, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const struct merge_source *s = &v[i];
        struct positions_entry *p = &e[out];

        if (!s->has_stream)
            continue;
        /* first_position is below SHARD_POSITION_LIMIT (2^63) and a file
         * holds fewer than 2^63 records, so the sum never wraps; one that
         * reaches the limit is a stream that cannot go on, and is refused
         * by positions_write with the rest. */
        memcpy(p->stream_id, s->stream_id, sizeof(p->stream_id));
        p->next_position = s->first_position + s->records;
        p->newest_ns = s->newest_ns > s->trailer_newest_ns ? s->newest_ns : s->trailer_newest_ns;
        p->uid = s->uid;
        memcpy(p->producer, s->producer, sizeof(p->producer));
        out++;
    }
    /* One line per stream, in stream id order, so the file is the same
     * for the same sources: the highest next position and newest time of
     * each stream, with the uid and producer of its shard that goes
     * furthest (one stream has one producer anyway). */
    qsort(e, out, sizeof(*e), entry_id_cmp);
    m = 0;
    for (size_t i = 0; i < out; i++) {
        if (m > 0 && memcmp(e[m - 1].stream_id, e[i].stream_id, sizeof(e[i].stream_id)) == 0) {
            uint64_t newest = e[m - 1].newest_ns > e[i].newest_ns ? e[m - 1].newest_ns
                                                                  : e[i].newest_ns;

            if (e[i].next_position > e[m - 1].next_position)
                e[m - 1] = e[i];
            e[m - 1].newest_ns = newest;
            continue;
        }
        e[m++] = e[i];
    }
    r = positions_write(spool_fd, "merge", e, m, &name);
    if (r < 0)
        return merge_fail(res, r,
                          "%s/%s: cannot record the positions of the %zu streams of the merged "
                          "sources: %s; no source was removed (the output is complete; the next "
                          "merge records them and removes the sources)",
                          spool, SPOOL_STREAMS_DIR, m,
                          r == -EINVAL ? "a stream position out of range" : strerror(-r));
    free(res->positions_file);
    res->positions_file = name;
    name = NULL;
    merge_at_step(opts, MERGE_STEP_POSITIONS_WRITTEN);
    return 0;
}
