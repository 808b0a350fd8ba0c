/* on_shipped = delete: removing from done/ the sealed shards whose every
 * record is committed and stored in <spool>/ship/progress. merge.lock is
 * taken first, so that a merge reading those shards finishes before they
 * go; and each stream's position goes to streams/ before its shard leaves,
 * since the daemon learns where a stream continues from done/ (as merge
 * --delete does). */
#include "ship-run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "fileutil.h"
#include "spool_names.h"
#include "stream_positions.h"

void ship_delete_shipped(struct shipper *s)
{
    size_t n;
    struct ship_source **v = ship_sources_sorted(s->sources, &n);
    _cleanup_close_ int lock_fd = -1;
    _cleanup_close_ int done_fd = -1;
    _cleanup_free_ struct positions_entry *e = NULL;
    _cleanup_free_ struct ship_source **gone = NULL;
    size_t m = 0;
    int r;

    e = calloc(n ? n : 1, sizeof(*e));
    gone = calloc(n ? n : 1, sizeof(*gone));
    if (!e || !gone)
        return;
    for (size_t i = 0; i < n; i++) {
        struct ship_source *src = v[i];

        if (src->active || src->broken || src->st->committed < src->first + src->records)
            continue;
        gone[m] = src;
        if (shard_header_has_stream(&src->h)) {
            memcpy(e[m].stream_id, src->h.stream_id, SHARD_STREAM_ID_SIZE);
            e[m].next_position = src->first + src->records;
            e[m].newest_ns = src->newest_ns;
            e[m].uid = src->h.uid;
            snprintf(e[m].producer, sizeof(e[m].producer), "%s", src->h.producer);
        }
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
    /* The daemon learns where each stream continues from done/: before a
     * shard of a stream leaves, its position goes to streams/, as merge
     * --delete does. */
    {
        size_t k = 0;

        for (size_t i = 0; i < m; i++)
            if (e[i].producer[0])
                e[k++] = e[i];
        if (k > 0) {
            r = positions_write(s->spool_fd, "ship", e, k, NULL);
            if (r < 0) {
                ship_say(s, SHIP_LOG_ERROR,
                         "%s/%s: cannot record the stream positions of shipped shards: %s; none is "
                         "deleted",
                         s->spool, SPOOL_STREAMS_DIR, strerror(-r));
                return;
            }
        }
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
