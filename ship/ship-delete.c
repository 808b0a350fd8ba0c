/* Shipped shards leaving done/. The rule, its one statement here: a sealed
 * shard may go once every record of it is committed to Kafka, which the
 * spool's copy of the progress (<spool>/ship/progress, written only after
 * a commit) says; and before it goes, its stream's position goes to
 * streams/, since the daemon learns where a stream continues from done/
 * (as merge --delete does).
 *
 * Two callers: the shipper itself with on_shipped = delete, after each
 * commit (ship_delete_shipped), and logctl prune, which removes shipped
 * shards by age and size through ship_sealed_shipped and
 * ship_record_positions (ship.h). Both take merge.lock first, so that a
 * merge reading those shards finishes before they go. */
#include "ship-run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"
#include "stream_positions.h"

bool ship_sealed_shipped(const struct ship_sealed *s, const struct positions_entry *progress,
                         size_t n)
{
    return ship_progress_covers(progress, n, &s->h, s->records);
}

static int entry_id_cmp(const void *a, const void *b)
{
    const struct positions_entry *x = a, *y = b;

    return memcmp(x->stream_id, y->stream_id, sizeof(x->stream_id));
}

int ship_record_positions(int spool_fd, const char *kind, const struct ship_sealed *v, size_t n,
                          char **ret_name)
{
    _cleanup_free_ struct positions_entry *e = NULL;
    char *name = NULL;
    size_t k = 0, m = 0;
    int r;

    for (size_t i = 0; i < n; i++)
        k += shard_header_has_stream(&v[i].h);
    if (k == 0) {
        if (ret_name)
            *ret_name = NULL;
        return 0; /* no stream among them: nothing the daemon could forget */
    }
    e = calloc(k, sizeof(*e));
    if (!e)
        return -ENOMEM;
    k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct ship_sealed *s = &v[i];

        if (!shard_header_has_stream(&s->h))
            continue;
        /* first_position is below SHARD_POSITION_LIMIT and a file holds
         * fewer than 2^63 records: the sum never wraps; one at the limit
         * is refused by positions_write with the rest. */
        memcpy(e[k].stream_id, s->h.stream_id, SHARD_STREAM_ID_SIZE);
        e[k].next_position = s->h.first_position + s->records;
        e[k].newest_ns = s->newest_ns;
        e[k].uid = s->h.uid;
        snprintf(e[k].producer, sizeof(e[k].producer), "%s", s->h.producer);
        k++;
    }
    /* One line per stream: the furthest position and the newest time of
     * its shards here (the reader would take the highest anyway; one line
     * keeps the file small when a stream has many shards). */
    qsort(e, k, sizeof(*e), entry_id_cmp);
    for (size_t i = 0; i < k; i++) {
        if (m > 0 && memcmp(e[m - 1].stream_id, e[i].stream_id, SHARD_STREAM_ID_SIZE) == 0) {
            uint64_t newest = e[m - 1].newest_ns > e[i].newest_ns ? e[m - 1].newest_ns
                                                                  : e[i].newest_ns;

            if (e[i].next_position > e[m - 1].next_position)
                e[m - 1] = e[i];
            e[m - 1].newest_ns = newest;
            continue;
        }
        e[m++] = e[i];
    }
    r = positions_write(spool_fd, kind, e, m, ret_name ? &name : NULL);
    if (r < 0)
        return r;
    if (ret_name)
        *ret_name = name;
    return 0;
}

void ship_delete_shipped(struct shipper *s)
{
    size_t n;
    struct ship_source **v = ship_sources_sorted(s->sources, &n);
    _cleanup_close_ int lock_fd = -1;
    _cleanup_close_ int done_fd = -1;
    _cleanup_free_ struct ship_sealed *sealed = NULL;
    _cleanup_free_ struct ship_source **gone = NULL;
    size_t m = 0;
    int r;

    sealed = calloc(n ? n : 1, sizeof(*sealed));
    gone = calloc(n ? n : 1, sizeof(*gone));
    if (!sealed || !gone)
        return;
    for (size_t i = 0; i < n; i++) {
        struct ship_source *src = v[i];

        if (src->active || src->broken || src->st->committed < src->first + src->records)
            continue;
        gone[m] = src;
        sealed[m] = (struct ship_sealed){ .h = src->h,
                                          .records = src->records,
                                          .newest_ns = src->newest_ns,
                                          .bytes = src->bytes };
        m++;
    }
    if (m == 0)
        return;
    /* merge.lock: a merge reading these shards finishes first; the next
     * commit tries again. */
    lock_fd = openat(s->spool_fd, SPOOL_MERGE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                     0640);
    if (lock_fd < 0 || flock(lock_fd, LOCK_EX | LOCK_NB) < 0)
        return;
    r = ship_record_positions(s->spool_fd, "ship", sealed, m, NULL);
    if (r < 0) {
        ship_say(s, SHIP_LOG_ERROR,
                 "%s/%s: cannot record the stream positions of shipped shards: %s; none is "
                 "deleted",
                 s->spool, SPOOL_STREAMS_DIR, strerror(-r));
        return;
    }
    done_fd = openat(s->spool_fd, SPOOL_DONE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0)
        return;
    for (size_t i = 0; i < m; i++) {
        if (unlinkat(done_fd, gone[i]->name, 0) < 0 && errno != ENOENT) {
            ship_say(s, SHIP_LOG_WARNING, "%s/%s/%s: shipped, but cannot be deleted: %s", s->spool,
                     SPOOL_DONE_DIR, gone[i]->name, strerror(errno));
            continue;
        }
        ship_sources_forget(s->sources, gone[i]);
    }
    r = fsync_dir_fd(done_fd);
    if (r < 0)
        ship_say(s, SHIP_LOG_WARNING, "%s/%s: fsync: %s", s->spool, SPOOL_DONE_DIR, strerror(-r));
}
