/* The order in which logctl cat prints the shards of several files or of
 * the spool: each producer stream in position order, whatever the order of
 * its files, their names or their shard ids (common/shard_order.h: a
 * stream's shards trade the places they have in the given order; a shard
 * without a stream keeps its place).
 *
 * Two passes, so that memory is bounded by the number of shards, not of
 * records. The first reads only the ends of each shard: the seal trailer at
 * the end of the file gives the last shard's start and header, the bytes
 * before that shard end in the trailer of the one before it, and so on to
 * offset 0 (shard_locate_before); a file being written (active/) holds one
 * shard, and its header is enough. The second pass prints the shards in the
 * new order, each through a reader of its own bytes (shard_reader_new_range),
 * so what is printed is still checked record by record, and damage is
 * reported with the file's offsets as before.
 *
 * A file whose shards cannot be found that way (a damaged or cut sealed
 * file, a version 1 file without trailers, one that cannot be opened now)
 * is read whole, front to back, at its place, as cat always read files: the
 * damage is reported when it is read, and nothing more is said. Nothing
 * here prints; the files are opened through the caller's function, once to
 * index them (quietly) and again to print them.
 *
 * The index also lets the filters skip a sealed shard unread: one of
 * another producer, one whose newest record (the trailer's newest_ns, an
 * upper bound) is before --since, and one created (the header's time)
 * more than TIME_SLACK_NS after --until. A record is received moments
 * before the shard it opens is created, never more; the slack covers that
 * and a small step of the clock. What a skipped shard holds is not read,
 * so damage in it is not reported (logctl verify reads everything). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cat.h"
#include "fileutil.h"
#include "shard_format.h"
#include "shard_order.h"

/* How much earlier than its shard's creation time a record's receive time
 * may be (see above). */
#define TIME_SLACK_NS (10ull * 1000000000ull)

bool cat_outside_window(const struct cat_opts *o, uint64_t created_ns, uint64_t newest_ns)
{
    return newest_ns < o->since_ns ||
           (created_ns > TIME_SLACK_NS && created_ns - TIME_SLACK_NS > o->until_ns);
}

struct cat_unit {
    size_t file;
    bool whole;           /* read the whole file from offset 0 */
    uint64_t offset, len; /* else: the shard's bytes */
    bool has_stream;
    uint8_t stream_id[SHARD_STREAM_ID_SIZE];
    uint64_t first_position;
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    bool sealed; /* found from its trailer: the two times below are known */
    uint64_t created_ns, newest_ns;
};

struct unit_list {
    struct cat_unit *v;
    size_t n, cap;
};

static struct cat_unit *add_unit(struct unit_list *u, size_t file)
{
    struct cat_unit *x;

    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 32;
        struct cat_unit *nv = reallocarray(u->v, cap, sizeof(*nv));

        if (!nv)
            return NULL;
        u->v = nv;
        u->cap = cap;
    }
    x = &u->v[u->n++];
    memset(x, 0, sizeof(*x));
    x->file = file;
    x->whole = true;
    return x;
}

static void set_key(struct cat_unit *x, const struct shard_header *h)
{
    x->has_stream = shard_header_has_stream(h);
    memcpy(x->stream_id, h->stream_id, SHARD_STREAM_ID_SIZE);
    x->first_position = h->first_position;
    memcpy(x->producer, h->producer, h->producer_len + 1);
}

/* Appends the shards of the file open as fd, last first, found from their
 * trailers. Returns how many, or -EBADMSG (with none appended) when the
 * file is not sealed shards back to back, -ENOMEM, or a read error. */
static int index_sealed(int fd, uint64_t size, size_t file, struct unit_list *u)
{
    size_t first = u->n;
    uint64_t end = size;

    while (end > 0) {
        struct shard_header h;
        struct cat_unit *x;
        uint64_t start;
        struct shard_trailer t;
        int r = shard_locate_before(fd, end, &start, &h, &t);

        if (r < 0) {
            u->n = first;
            return r;
        }
        x = add_unit(u, file);
        if (!x) {
            u->n = first;
            return -ENOMEM;
        }
        x->whole = false;
        x->offset = start;
        x->len = end - start;
        set_key(x, &h);
        x->sealed = true;
        x->created_ns = h.created_ns;
        x->newest_ns = t.newest_ns;
        end = start;
    }
    /* Found last first; the places in the given order are by offset. */
    for (size_t i = first, j = u->n - 1; i < j; i++, j--) {
        struct cat_unit t = u->v[i];

        u->v[i] = u->v[j];
        u->v[j] = t;
    }
    return (int)(u->n - first > INT32_MAX ? INT32_MAX : u->n - first);
}

/* Appends what the file that open_file gives as file is made of: its
 * shards, or itself whole. Returns 0 or -ENOMEM. */
static int index_file(size_t file, cat_open_fn open_file, void *ctx, struct unit_list *u)
{
    _cleanup_free_ char *shown = NULL;
    _cleanup_close_ int fd = -1;
    struct cat_unit *x;
    bool active = false;
    uint64_t size = 0;
    int r = open_file(ctx, file, true, &fd, &size, &shown, &active);

    if (r == 0 && size > 0) {
        if (!active) {
            r = index_sealed(fd, size, file, u);
            if (r == -ENOMEM)
                return r;
            if (r == 1)
                u->v[u->n - 1].whole = true; /* one shard: the file as it is */
            if (r > 0)
                return 0;
        } else {
            /* One shard being written: its header is its key. */
            unsigned char buf[SHARD_HEADER_MAX];
            ssize_t n = pread(fd, buf, sizeof(buf), 0);
            struct shard_header h;
            const char *why = NULL;

            x = add_unit(u, file);
            if (!x)
                return -ENOMEM;
            if (n > 0 && shard_decode_header(buf, (size_t)n, &h, &why) == 0)
                set_key(x, &h);
            return 0;
        }
    }
    /* Read whole at its place; what is wrong is told when it is read. */
    return add_unit(u, file) ? 0 : -ENOMEM;
}

/* Indexing a spool costs a few system calls per file (open, fstat, the
 * reads of the two ends, close), nearly all of it in the kernel: a spool
 * of 65,536 shards of 64 KiB took 0.4 s in one thread. Files are
 * independent, so they are shared among threads: one for each
 * INDEX_PARALLEL_MIN_FILES files, at most one a CPU and INDEX_THREADS_MAX,
 * each taking a run of files in list order. */
#define INDEX_PARALLEL_MIN_FILES 1024u
#define INDEX_THREADS_MAX 8u

struct index_job {
    size_t from, to;
    cat_open_fn open_file;
    void *ctx;
    struct unit_list u;
    int r;
};

static void *index_run(void *arg)
{
    struct index_job *j = arg;

    for (size_t i = j->from; i < j->to && j->r == 0; i++)
        j->r = index_file(i, j->open_file, j->ctx, &j->u);
    return NULL;
}

static size_t index_threads(size_t n_files)
{
    cpu_set_t set;
    size_t cpus = 1, by_files = n_files / INDEX_PARALLEL_MIN_FILES;

    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
        cpus = (size_t)CPU_COUNT(&set);
    if (cpus > INDEX_THREADS_MAX)
        cpus = INDEX_THREADS_MAX;
    return by_files < 1 ? 1 : by_files < cpus ? by_files : cpus;
}

/* Indexes every file into *u, in list order. The open_file callbacks only
 * ever touch their own file's state, so runs of files can be indexed in
 * threads of their own. Returns 0 or -ENOMEM. */
static int index_files(size_t n_files, cat_open_fn open_file, void *ctx, struct unit_list *u)
{
    size_t threads = index_threads(n_files), total = 0;
    struct index_job *jobs = NULL;
    pthread_t *tids = NULL;
    bool *started = NULL;
    int r = 0;

    if (threads > 1) {
        jobs = calloc(threads, sizeof(*jobs));
        tids = calloc(threads, sizeof(*tids));
        started = calloc(threads, sizeof(*started));
        if (!jobs || !tids || !started) {
            free(jobs);
            free(tids);
            free(started);
            threads = 1;
        }
    }
    if (threads == 1) {
        for (size_t i = 0; i < n_files && r == 0; i++)
            r = index_file(i, open_file, ctx, u);
        return r;
    }
    for (size_t t = 0; t < threads; t++) {
        jobs[t] = (struct index_job){ .from = n_files * t / threads,
                                      .to = n_files * (t + 1) / threads,
                                      .open_file = open_file,
                                      .ctx = ctx };
        /* A thread that cannot be started leaves its run to this one. */
        if (t > 0)
            started[t] = pthread_create(&tids[t], NULL, index_run, &jobs[t]) == 0;
    }
    for (size_t t = 0; t < threads; t++)
        if (!started[t])
            index_run(&jobs[t]);
    for (size_t t = 0; t < threads; t++) {
        if (started[t])
            (void)pthread_join(tids[t], NULL); /* joinable, ours: cannot fail */
        if (jobs[t].r < 0 && r == 0)
            r = jobs[t].r;
        total += jobs[t].u.n;
    }
    if (r == 0 && total > 0) {
        struct cat_unit *v = reallocarray(NULL, total, sizeof(*v));

        if (!v) {
            r = -ENOMEM;
        } else {
            u->v = v;
            u->n = u->cap = total;
            for (size_t t = 0, at = 0; t < threads; t++) {
                if (jobs[t].u.n > 0)
                    memcpy(v + at, jobs[t].u.v, jobs[t].u.n * sizeof(*v));
                at += jobs[t].u.n;
            }
        }
    }
    for (size_t t = 0; t < threads; t++)
        free(jobs[t].u.v);
    free(jobs);
    free(tids);
    free(started);
    return r;
}

int cat_files_in_order(size_t n_files, cat_open_fn open_file, void *ctx,
                       const struct cat_opts *o, bool *failed, int *ret_out_err)
{
    struct unit_list u = { 0 };
    struct shard_order_key *keys = NULL;
    size_t *order = NULL;
    _cleanup_free_ char *shown = NULL;
    int fd = -1, r = 0;
    size_t fd_file = SIZE_MAX;
    uint64_t size;
    bool active = false, fd_bad = false;

    r = index_files(n_files, open_file, ctx, &u);
    if (r == 0 && u.n > 0) {
        keys = calloc(u.n, sizeof(*keys));
        order = calloc(u.n, sizeof(*order));
        if (!keys || !order)
            r = -ENOMEM;
    }
    for (size_t i = 0; i < u.n && r == 0; i++) {
        keys[i] = (struct shard_order_key){ .producer = u.v[i].producer,
                                            .has_stream = u.v[i].has_stream,
                                            .first_position = u.v[i].first_position };
        memcpy(keys[i].stream_id, u.v[i].stream_id, SHARD_STREAM_ID_SIZE);
    }
    if (r == 0 && u.n > 0)
        r = shard_order_streams(keys, u.n, order);

    for (size_t k = 0; k < u.n && r == 0; k++) {
        const struct cat_unit *x = &u.v[order[k]];
        int rc;

        if (x->sealed && (!cat_wants_producer(o, x->producer) ||
                          cat_outside_window(o, x->created_ns, x->newest_ns)))
            continue;

        /* Shards of one file often follow each other: one open serves them. */
        if (x->file != fd_file) {
            if (fd >= 0)
                (void)close(fd); /* read-only */
            fd = -1;
            free(shown);
            shown = NULL;
            fd_file = x->file;
            rc = open_file(ctx, x->file, false, &fd, &size, &shown, &active);
            fd_bad = rc != 0;
            if (rc < 0)
                *failed = true;
        }
        if (fd_bad)
            continue;
        rc = x->whole ? cat_shard_range(fd, shown, o, active, 0, UINT64_MAX, ret_out_err)
                      : cat_shard_range(fd, shown, o, false, x->offset, x->len, ret_out_err);
        if (rc != 0)
            *failed = true;
        if (*ret_out_err)
            break;
    }
    if (fd >= 0)
        (void)close(fd); /* read-only */
    free(keys);
    free(order);
    free(u.v);
    return r;
}
