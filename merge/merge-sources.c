/* Sources and names: which files of <spool>/done/ a merge takes, in which
 * order, and the names a merge gives what it writes.
 *
 * A source is a regular file of done/ named "<producer>.<16 lowercase hex
 * digit id>.shard"; everything else there (temp files, dotfiles, foreign
 * names) is not merge's business. Order of the output: by producer name in
 * byte order (strcmp), then by shard id ascending, except that the shards
 * of one producer stream (format version 3) go in the order of their first
 * positions, taking the places the stream's shards have in that order.
 * Ids come from the clock, so they usually agree, but a daemon whose clock
 * went backwards between two shards of a resumed stream gives the later
 * shard the lower id; a reader of the output must still see the stream in
 * position order. The order is deterministic, and a shard without a
 * stream keeps the place its name gives it.
 *
 * Selection: --producer narrows the list before anything is read; --before
 * keeps the shards whose every record was received before the given time,
 * which only the check pass knows, so every candidate of the producer is
 * checked (and a bad one is still set aside). Whole shards only: a shard
 * that straddles the time stays for a later merge.
 *
 * Names a merge writes: the output (given, or
 * <spool>/merged/merged-<UTC time>Z.lsm). Every spool name is formatted and
 * parsed by common/spool_names.c, which also owns the no-replace rename
 * that publishes the output and moves a damaged source to quarantine/. */
#include "merge-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileutil.h"
#include "shard_order.h"
#include "ship_progress.h"
#include "spool_names.h"

int merge_parse_source_name(const char *name, char *ret_producer, uint64_t *ret_id)
{
    struct spool_name n;
    int r = spool_name_parse(name, SPOOL_SHARD, &n);

    if (r < 0)
        return r;
    memcpy(ret_producer, n.producer, n.producer_len + 1);
    *ret_id = n.id;
    return 0;
}

int merge_source_cmp(const void *a, const void *b)
{
    const struct merge_source *x = a, *y = b;
    int c = strcmp(x->producer, y->producer);

    if (c != 0)
        return c;
    return x->id < y->id ? -1 : x->id > y->id ? 1 : 0;
}

int merge_order_streams(struct merge_result *res)
{
    struct shard_order_key *keys;
    struct merge_source *sorted;
    size_t *order, n = res->n_sources;
    int r;

    if (n < 2)
        return 0;
    keys = calloc(n, sizeof(*keys));
    order = calloc(n, sizeof(*order));
    sorted = calloc(n, sizeof(*sorted));
    if (!keys || !order || !sorted) {
        r = merge_fail(res, -ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const struct merge_source *s = &res->sources[i];

        keys[i] = (struct shard_order_key){ .producer = s->producer,
                                            .has_stream = s->has_stream,
                                            .first_position = s->first_position };
        memcpy(keys[i].stream_id, s->stream_id, SHARD_STREAM_ID_SIZE);
    }
    r = shard_order_streams(keys, n, order);
    if (r < 0) {
        r = merge_fail(res, r, "out of memory");
        goto out;
    }
    for (size_t k = 0; k < n; k++)
        sorted[k] = res->sources[order[k]];
    memcpy(res->sources, sorted, n * sizeof(*sorted));
out:
    free(keys);
    free(order);
    free(sorted);
    return r;
}

void merge_source_release(struct merge_source *s)
{
    free(s->name);
    s->name = NULL;
    free(s->bad_why);
    s->bad_why = NULL;
    if (s->fd >= 0)
        (void)close(s->fd); /* opened read-only */
    s->fd = -1;
}

void merge_sources_free(struct merge_source *sources, size_t count)
{
    if (!sources)
        return;
    for (size_t i = 0; i < count; i++)
        merge_source_release(&sources[i]);
    free(sources);
}

int merge_list_sources(int done_dirfd, struct merge_source **ret_sources, size_t *ret_count)
{
    struct merge_source *v = NULL;
    size_t n = 0, cap = 0;
    DIR *d;
    int r = 0;

    /* A fresh open file description, so the caller's fd keeps its offset and
     * stays open after closedir. */
    r = opendir_at(done_dirfd, &d);
    if (r < 0)
        return r;

    for (;;) {
        struct merge_source s;
        struct dirent *de;

        errno = 0;
        de = readdir(d);
        if (!de) {
            if (errno != 0)
                r = -errno;
            break;
        }
        memset(&s, 0, sizeof(s));
        s.fd = -1;
        if (merge_parse_source_name(de->d_name, s.producer, &s.id) < 0)
            continue;
        if (de->d_type != DT_REG) {
            struct stat st;

            if (de->d_type != DT_UNKNOWN)
                continue;
            if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                    continue; /* gone since readdir; it is not ours to merge */
                r = -errno;
                break;
            }
            if (!S_ISREG(st.st_mode))
                continue;
        }
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct merge_source *nv = reallocarray(v, ncap, sizeof(*v));

            if (!nv) {
                r = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        s.name = strdup(de->d_name);
        if (!s.name) {
            r = -ENOMEM;
            break;
        }
        v[n++] = s;
    }
    (void)closedir(d); /* read-only directory stream: nothing to lose */

    if (r < 0) {
        merge_sources_free(v, n);
        return r;
    }
    if (n > 1)
        qsort(v, n, sizeof(*v), merge_source_cmp);
    *ret_sources = v;
    *ret_count = n;
    return 0;
}

static bool keep_producer(const struct merge_source *s, const struct merge_opts *opts)
{
    return strcmp(s->producer, opts->producer) == 0;
}

static bool keep_before(const struct merge_source *s, const struct merge_opts *opts)
{
    return s->newest_ns < opts->before_ns;
}

/* Narrows res->sources to those keep() selects, in the same order. */
static void keep_sources(struct merge_result *res,
                         bool (*keep)(const struct merge_source *, const struct merge_opts *),
                         const struct merge_opts *opts)
{
    size_t n = 0;

    for (size_t i = 0; i < res->n_sources; i++) {
        if (keep(&res->sources[i], opts))
            res->sources[n++] = res->sources[i];
        else
            merge_source_release(&res->sources[i]);
    }
    res->n_sources = n;
}

void merge_select_producer(struct merge_result *res, const struct merge_opts *opts)
{
    keep_sources(res, keep_producer, opts);
}

void merge_select_before(struct merge_result *res, const struct merge_opts *opts)
{
    keep_sources(res, keep_before, opts);
}

int merge_select_shipped(int spool_fd, const char *spool, struct merge_result *res)
{
    _cleanup_free_ struct positions_entry *shipped = NULL;
    const char *why = NULL;
    size_t n_shipped = 0, n = 0;
    int r;

    r = ship_progress_load(spool_fd, &shipped, &n_shipped, &why);
    if (r == -ENOENT)
        return 0; /* not shipped: merge is the only one that deletes */
    if (r < 0)
        return merge_fail(res, r,
                          "%s/%s/%s: cannot read what logctl ship has shipped: %s; nothing is "
                          "deleted before that is known",
                          spool, SHIP_DIR, SHIP_PROGRESS_FILE,
                          r == -EBADMSG && why ? why : strerror(-r));
    for (size_t i = 0; i < res->n_sources; i++) {
        struct merge_source *s = &res->sources[i];
        struct shard_header h = { .shard_id = s->id };

        if (s->has_stream) {
            h.version = SHARD_FORMAT_VERSION_STREAM;
            memcpy(h.stream_id, s->stream_id, sizeof(h.stream_id));
            h.first_position = s->first_position;
        }
        if (ship_progress_covers(shipped, n_shipped, &h, s->records)) {
            res->sources[n++] = *s;
        } else {
            merge_source_release(s);
            res->not_shipped++;
        }
    }
    res->n_sources = n;
    return 0;
}

/* ---- names a merge writes ---- */

int merge_split_output(const char *path, char **ret_dir, char **ret_base)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir, *b;

    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return -EISDIR;
    if (!slash)
        dir = strdup(".");
    else if (slash == path)
        dir = strdup("/");
    else
        dir = strndup(path, (size_t)(slash - path));
    b = strdup(base);
    if (!dir || !b) {
        free(dir);
        free(b);
        return -ENOMEM;
    }
    *ret_dir = dir;
    *ret_base = b;
    return 0;
}

int merge_default_output_dir(const char *spool, char **ret_path, struct merge_result *res)
{
    char *merged = path_join(spool, SPOOL_MERGED_DIR);
    int r;

    if (!merged)
        return merge_fail(res, -ENOMEM, "out of memory");
    r = mkdir_if_missing(merged, 0750);
    if (r < 0) {
        r = merge_fail(res, r, "%s: cannot create: %s", merged, strerror(-r));
        free(merged);
        return r;
    }
    /* The new directory entry must be durable before a file in it is. */
    r = fsync_dir_path(spool);
    if (r < 0) {
        free(merged);
        return merge_fail(res, r, "%s: fsync: %s", spool, strerror(-r));
    }
    *ret_path = merged;
    return 0;
}

int merge_default_output_name(int dir_fd, const char *dir, char **ret_base,
                              struct merge_result *res)
{
    char first[SPOOL_MERGED_NAME_SIZE];
    struct timespec ts;
    int r;

    (void)clock_gettime(CLOCK_REALTIME, &ts); /* cannot fail for this clock */
    for (unsigned n = 0; n <= SPOOL_MERGED_MAX_SUFFIX; n++) {
        char name[SPOOL_MERGED_NAME_SIZE];
        struct stat st;

        r = spool_merged_name(&ts, n, name, sizeof(name));
        if (r < 0)
            return merge_fail(res, r, "cannot name the output for the current time: %s",
                              strerror(-r));
        if (n == 0)
            memcpy(first, name, sizeof(first));
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT)
                return merge_fail(res, -errno, "%s: %s", dir, strerror(errno));
            *ret_base = strdup(name);
            return *ret_base ? 0 : merge_fail(res, -ENOMEM, "out of memory");
        }
    }
    return merge_fail(res, -EEXIST, "%s: %s and its %u suffixed names are all taken", dir, first,
                      SPOOL_MERGED_MAX_SUFFIX);
}
