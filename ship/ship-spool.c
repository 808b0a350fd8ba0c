/* The shipper's view of the spool: the table of streams (how far each is
 * committed and produced, where its records go) and the shards that hold
 * their records, sealed ones in done/ and the acknowledged part of active
 * ones, read from the first position not yet shipped. */
#include "ship-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"

/* ---- streams ---- */

struct ship_streams {
    struct ship_stream **v;
    size_t n, cap;
    struct ship_stream **slots; /* open addressing on the id's first 8 bytes */
    size_t n_slots;
    struct ship_partition *parts;
};

int ship_streams_new(struct ship_streams **ret)
{
    struct ship_streams *t = calloc(1, sizeof(*t));

    if (!t)
        return -ENOMEM;
    t->n_slots = 1024;
    t->slots = calloc(t->n_slots, sizeof(*t->slots));
    if (!t->slots) {
        free(t);
        return -ENOMEM;
    }
    *ret = t;
    return 0;
}

void ship_streams_free(struct ship_streams *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++)
        free(t->v[i]);
    while (t->parts) {
        struct ship_partition *p = t->parts;

        t->parts = p->next_in_list;
        free(p);
    }
    free(t->v);
    free(t->slots);
    free(t);
}

static size_t slot_of(const uint8_t id[SHARD_STREAM_ID_SIZE], size_t n_slots)
{
    uint64_t h = 0;

    /* Stream ids are random; a shard's made-up key has its id at the end. */
    for (unsigned i = 0; i < 8; i++)
        h = (h << 8) ^ (uint64_t)id[i] ^ ((uint64_t)id[8 + i] * 0x9e3779b97f4a7c15ull);
    return (size_t)(h % n_slots);
}

static int grow_slots(struct ship_streams *t)
{
    size_t n = t->n_slots * 2;
    struct ship_stream **s = calloc(n, sizeof(*s));

    if (!s)
        return -ENOMEM;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = slot_of(t->v[i]->id, n);

        while (s[j])
            j = (j + 1) % n;
        s[j] = t->v[i];
    }
    free(t->slots);
    t->slots = s;
    t->n_slots = n;
    return 0;
}

struct ship_stream *ship_streams_get(struct ship_streams *t, const uint8_t id[SHARD_STREAM_ID_SIZE],
                                     bool create)
{
    size_t j = slot_of(id, t->n_slots);
    struct ship_stream *st;

    for (; t->slots[j]; j = (j + 1) % t->n_slots)
        if (memcmp(t->slots[j]->id, id, SHARD_STREAM_ID_SIZE) == 0)
            return t->slots[j];
    if (!create)
        return NULL;
    if ((t->n + 1) * 2 > t->n_slots) {
        if (grow_slots(t) < 0)
            return NULL;
        return ship_streams_get(t, id, create);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct ship_stream **v = realloc(t->v, cap * sizeof(*v));

        if (!v)
            return NULL;
        t->v = v;
        t->cap = cap;
    }
    st = calloc(1, sizeof(*st));
    if (!st)
        return NULL;
    memcpy(st->id, id, SHARD_STREAM_ID_SIZE);
    st->last_offset = -1;
    t->v[t->n++] = st;
    t->slots[j] = st;
    return st;
}

size_t ship_streams_count(const struct ship_streams *t)
{
    return t->n;
}

struct ship_stream *ship_streams_at(struct ship_streams *t, size_t i)
{
    return t->v[i];
}

struct ship_partition *ship_streams_partition(struct ship_streams *t, const char *topic,
                                              int32_t partition)
{
    struct ship_partition *p;

    for (p = t->parts; p; p = p->next_in_list)
        if (p->partition == partition && strcmp(p->topic, topic) == 0)
            return p;
    p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    snprintf(p->topic, sizeof(p->topic), "%s", topic);
    p->partition = partition;
    p->last_offset = -1;
    p->start = -1;
    p->next_in_list = t->parts;
    t->parts = p;
    return p;
}

struct ship_partition *ship_streams_partitions(struct ship_streams *t)
{
    return t->parts;
}

/* ---- sources ---- */

struct ship_sources {
    struct ship_source **v;
    size_t n, cap;
    /* v by stream and position, as the last scan that ended left it;
     * n_sorted is 0 while a scan runs and after one that failed, so that
     * nothing lists sources the scan may have freed or not yet placed. */
    struct ship_source **sorted;
    size_t n_sorted;
    /* v by shard id, open addressing; rebuilt at the end of each scan and
     * kept up by add_source, so a spool of many shards costs one lookup a
     * name, not a pass over the list. */
    struct ship_source **by_id;
    size_t n_by_id; /* slots: a power of two, at least twice n */
};

int ship_sources_new(struct ship_sources **ret)
{
    *ret = calloc(1, sizeof(**ret));
    return *ret ? 0 : -ENOMEM;
}

static void close_reader(struct ship_source *src)
{
    shard_reader_free(src->r);
    src->r = NULL;
    if (src->fd >= 0)
        (void)close(src->fd); /* read only: nothing to report */
    src->fd = -1;
}

void ship_sources_free(struct ship_sources *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++) {
        close_reader(s->v[i]);
        free(s->v[i]);
    }
    free(s->v);
    free(s->sorted);
    free(s->by_id);
    free(s);
}

static size_t id_slot(uint64_t shard_id, size_t n_slots)
{
    return (size_t)((shard_id * 0x9e3779b97f4a7c15ull) >> 20) & (n_slots - 1);
}

static struct ship_source *find_source(struct ship_sources *s, uint64_t shard_id)
{
    if (!s->n_by_id)
        return NULL;
    for (size_t j = id_slot(shard_id, s->n_by_id); s->by_id[j]; j = (j + 1) & (s->n_by_id - 1))
        if (s->by_id[j]->shard_id == shard_id)
            return s->by_id[j];
    return NULL;
}

/* Rebuilds by_id from v, with room for twice as many. */
static int index_sources(struct ship_sources *s)
{
    size_t n = 64;

    while (n < 4 * (s->n + 1))
        n *= 2;
    free(s->by_id);
    s->by_id = calloc(n, sizeof(*s->by_id));
    s->n_by_id = s->by_id ? n : 0;
    if (!s->by_id)
        return -ENOMEM;
    for (size_t i = 0; i < s->n; i++) {
        size_t j = id_slot(s->v[i]->shard_id, n);

        while (s->by_id[j])
            j = (j + 1) & (n - 1);
        s->by_id[j] = s->v[i];
    }
    return 0;
}

static int index_source(struct ship_sources *s, struct ship_source *src)
{
    size_t j;

    if (2 * (s->n + 1) > s->n_by_id)
        return index_sources(s);
    for (j = id_slot(src->shard_id, s->n_by_id); s->by_id[j]; j = (j + 1) & (s->n_by_id - 1))
        ;
    s->by_id[j] = src;
    return 0;
}

static struct ship_source *add_source(struct ship_sources *s)
{
    struct ship_source *src;

    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        struct ship_source **v = realloc(s->v, cap * sizeof(*v));

        if (!v)
            return NULL;
        s->v = v;
        s->cap = cap;
    }
    src = calloc(1, sizeof(*src));
    if (!src)
        return NULL;
    src->fd = -1;
    s->v[s->n++] = src;
    return src;
}

static void report(const struct ship_hooks *hooks, enum ship_log_level level, const char *fmt,
                   ...) __attribute__((format(printf, 3, 4)));
static void report(const struct ship_hooks *hooks, enum ship_log_level level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (hooks->log)
        hooks->log(hooks->arg, level, msg);
}

/* The header of an open shard, from its first bytes. */
static int read_header(int fd, struct shard_header *ret)
{
    unsigned char buf[SHARD_HEADER_MAX];
    ssize_t got = pread(fd, buf, sizeof(buf), 0);
    const char *why;

    if (got < 0)
        return -errno;
    return shard_decode_header(buf, (size_t)got, ret, &why);
}

int ship_sealed_read(int fd, struct ship_sealed *ret)
{
    struct ship_sealed ss = { .records = 0 };
    struct shard_trailer t;
    struct shard_reader *rd;
    struct shard_item it;
    struct stat st;
    uint64_t start;
    bool have_header = false;
    int r;

    if (fstat(fd, &st) < 0)
        return -errno;
    ss.bytes = (uint64_t)st.st_size;
    r = shard_locate_before(fd, (uint64_t)st.st_size, &start, &ss.h, &t);
    if (r == 0 && start == 0) {
        ss.records = t.records;
        ss.newest_ns = t.newest_ns;
        *ret = ss;
        return 0;
    }
    if (lseek(fd, 0, SEEK_SET) < 0)
        return -errno;
    r = shard_reader_new(&rd, fd);
    if (r < 0)
        return r;
    while ((r = shard_reader_next(rd, &it)) > 0) {
        if (it.kind == SHARD_ITEM_HEADER) {
            /* A second shard: a merged file, which is no shard of done/;
             * taking its first shard's count for the file's would let the
             * rest be deleted unshipped. */
            if (have_header) {
                r = -EBADMSG;
                break;
            }
            ss.h = *it.header;
            ss.newest_ns = ss.h.created_ns;
            have_header = true;
        } else if (it.kind == SHARD_ITEM_RECORD) {
            ss.records++;
            ss.newest_ns = it.timestamp_ns;
        }
    }
    shard_reader_free(rd);
    if ((r == 0 && !have_header) || r == -ENODATA)
        r = -EBADMSG; /* an empty file, or one cut short: no sealed shard */
    if (r < 0)
        return r;
    *ret = ss;
    return 0;
}

/* A sealed shard's header and record count, from its two ends (or, for a
 * version 1 shard without a trailer, by reading it through). */
static int read_sealed(int fd, struct ship_source *src)
{
    struct ship_sealed ss;
    int r = ship_sealed_read(fd, &ss);

    if (r < 0)
        return r;
    src->h = ss.h;
    src->records = ss.records;
    src->newest_ns = ss.newest_ns;
    src->bytes = ss.bytes;
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct ship_source *x = *(struct ship_source *const *)a;
    const struct ship_source *y = *(struct ship_source *const *)b;
    int c = memcmp(x->st->id, y->st->id, SHARD_STREAM_ID_SIZE);

    if (c)
        return c;
    return x->first < y->first ? -1 : x->first > y->first;
}

static int attach_stream(struct ship_source *src, struct ship_streams *streams)
{
    uint8_t id[SHARD_STREAM_ID_SIZE];

    ship_stream_key(&src->h, id);
    src->first = ship_first_position(&src->h);
    src->st = ship_streams_get(streams, id, true);
    if (!src->st)
        return -ENOMEM;
    if (!src->st->producer[0]) {
        snprintf(src->st->producer, sizeof(src->st->producer), "%s", src->h.producer);
        src->st->uid = src->h.uid;
    }
    return 0;
}

int ship_sources_scan(struct ship_sources *s, int spool_fd, const char *spool,
                      struct ship_streams *streams, const struct ship_active_shard *act,
                      size_t n_act, const struct ship_hooks *hooks)
{
    _cleanup_close_ int done_fd = -1;
    _cleanup_close_ int active_fd = -1;
    struct dirent *de;
    DIR *d;
    size_t n;
    int r;

    s->n_sorted = 0;
    for (size_t i = 0; i < s->n; i++)
        s->v[i]->seen = false;
    /* The daemon's active shards first, then done/: a shard sealed in
     * between is then seen in one place or both, never in neither. */
    if (n_act) {
        active_fd = openat(spool_fd, SPOOL_ACTIVE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (active_fd < 0)
            n_act = 0;
    }
    for (size_t i = 0; i < n_act; i++) {
        struct spool_name sn;
        struct ship_source *src;
        int fd;

        if (spool_name_parse(act[i].file, SPOOL_TMP, &sn) < 0)
            continue;
        src = find_source(s, sn.id);
        if (src) {
            src->seen = true;
            if (src->active && act[i].records_acked > src->records)
                src->records = act[i].records_acked;
            if (act[i].last_ns > src->newest_ns)
                src->newest_ns = act[i].last_ns;
            continue;
        }
        r = open_regular_at(active_fd, act[i].file, O_NOFOLLOW, &fd, NULL);
        if (r < 0)
            continue; /* sealed meanwhile: done/ has it */
        src = add_source(s);
        if (!src) {
            (void)close(fd);
            return -ENOMEM;
        }
        src->shard_id = sn.id;
        src->active = true;
        src->seen = true;
        if (index_source(s, src) < 0)
            return -ENOMEM;
        snprintf(src->name, sizeof(src->name), "%s", act[i].file);
        if (read_header(fd, &src->h) < 0) {
            /* Not even a header yet: nothing acknowledged in it either. */
            (void)close(fd);
            s->n--;
            free(src);
            if (index_sources(s) < 0)
                return -ENOMEM;
            continue;
        }
        src->fd = fd;
        src->records = act[i].records_acked;
        src->newest_ns = act[i].last_ns;
        r = attach_stream(src, streams);
        if (r < 0)
            return r;
    }

    done_fd = openat(spool_fd, SPOOL_DONE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0)
        return -errno;
    r = opendir_at(done_fd, &d);
    if (r < 0)
        return r;
    while ((de = readdir(d))) {
        struct spool_name sn;
        struct ship_source *src;
        int fd;

        if (spool_name_parse(de->d_name, SPOOL_SHARD, &sn) < 0)
            continue;
        src = find_source(s, sn.id);
        if (src && !src->active) {
            src->seen = true;
            continue;
        }
        r = open_regular_at(done_fd, de->d_name, O_NOFOLLOW, &fd, NULL);
        if (r < 0) {
            if (!src && r != -ENOENT)
                report(hooks, SHIP_LOG_WARNING, "%s/%s/%s: cannot open: %s; not shipped", spool,
                       SPOOL_DONE_DIR, de->d_name, strerror(-r));
            continue;
        }
        if (src) {
            /* Sealed since it was seen active: the same file under its new
             * name; the open reader reads on. Its trailer tells its count. */
            struct ship_source probe = { .fd = -1 };

            if (read_sealed(fd, &probe) == 0) {
                src->records = probe.records;
                src->newest_ns = probe.newest_ns;
                src->active = false;
                snprintf(src->name, sizeof(src->name), "%s", de->d_name);
            }
            src->seen = true;
            (void)close(fd);
            continue;
        }
        src = add_source(s);
        if (!src) {
            (void)close(fd);
            closedir(d);
            return -ENOMEM;
        }
        src->shard_id = sn.id;
        src->seen = true;
        if (index_source(s, src) < 0) {
            (void)close(fd);
            closedir(d);
            return -ENOMEM;
        }
        snprintf(src->name, sizeof(src->name), "%s", de->d_name);
        r = read_sealed(fd, src);
        (void)close(fd);
        if (r < 0) {
            report(hooks, SHIP_LOG_WARNING,
                   "%s/%s/%s: cannot be read as a sealed shard (%s); not shipped: logctl verify "
                   "and logctl merge tell more",
                   spool, SPOOL_DONE_DIR, de->d_name, strerror(-r));
            src->broken = true;
            memset(&src->h, 0, sizeof(src->h));
            src->h.shard_id = sn.id;
            snprintf(src->h.producer, sizeof(src->h.producer), "%s", sn.producer);
            src->records = 0;
        }
        r = attach_stream(src, streams);
        if (r < 0) {
            closedir(d);
            return r;
        }
    }
    closedir(d);

    /* Forget what is gone (merged and deleted, quarantined). */
    n = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i]->seen) {
            s->v[n++] = s->v[i];
        } else {
            close_reader(s->v[i]);
            free(s->v[i]);
        }
    }
    s->n = n;
    if (index_sources(s) < 0)
        return -ENOMEM;
    free(s->sorted);
    s->sorted = malloc((s->n ? s->n : 1) * sizeof(*s->sorted));
    if (!s->sorted)
        return -ENOMEM;
    if (s->n) /* v may still be NULL: memcpy wants a pointer even for 0 bytes */
        memcpy(s->sorted, s->v, s->n * sizeof(*s->v));
    qsort(s->sorted, s->n, sizeof(*s->sorted), entry_cmp);
    s->n_sorted = s->n;
    return 0;
}

struct ship_source **ship_sources_sorted(struct ship_sources *s, size_t *ret_n)
{
    *ret_n = s->n_sorted;
    return s->sorted;
}

void ship_sources_drop_readers(struct ship_sources *s)
{
    for (size_t i = 0; i < s->n; i++) {
        shard_reader_free(s->v[i]->r);
        s->v[i]->r = NULL;
        if (!s->v[i]->active && s->v[i]->fd >= 0) {
            (void)close(s->v[i]->fd);
            s->v[i]->fd = -1;
        }
    }
}

void ship_sources_forget(struct ship_sources *s, struct ship_source *src)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == src) {
            close_reader(src);
            free(src);
            s->v[i] = s->v[--s->n];
            (void)index_sources(s); /* on failure find_source finds nothing: read again */
            break;
        }
    for (size_t i = 0; i < s->n_sorted; i++)
        if (s->sorted[i] == src) {
            memmove(&s->sorted[i], &s->sorted[i + 1],
                    (s->n_sorted - i - 1) * sizeof(*s->sorted));
            s->n_sorted--;
            break;
        }
}

/* Opens the source's file again when it has no descriptor: done/ or
 * active/ under its current name. */
static int reopen(struct ship_source *src, int spool_fd)
{
    _cleanup_close_ int dir_fd = -1;

    if (src->fd >= 0)
        return 0;
    dir_fd = openat(spool_fd, src->active ? SPOOL_ACTIVE_DIR : SPOOL_DONE_DIR,
                    O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    return open_regular_at(dir_fd, src->name, O_NOFOLLOW, &src->fd, NULL);
}

int ship_source_read(struct ship_source *src, int spool_fd, struct shard_item *ret)
{
    uint64_t want = src->st->next;
    int r;

    if (want < src->first || want >= src->first + src->records)
        return 0;
    if (src->r && src->r_pos > want) {
        shard_reader_free(src->r);
        src->r = NULL;
    }
    if (!src->r) {
        r = reopen(src, spool_fd);
        if (r < 0)
            return r;
        if (lseek(src->fd, 0, SEEK_SET) < 0)
            return -errno;
        r = shard_reader_new(&src->r, src->fd);
        if (r < 0)
            return r;
        if (src->active)
            shard_reader_set_active(src->r);
        src->r_pos = src->first;
    }
    for (bool looked_again = false;;) {
        r = shard_reader_next(src->r, ret);
        if (r == -ENODATA || r == 0) {
            /* An active shard being written: what is acknowledged is
             * written, but may reach the reader only on the next look.
             * One sealed since the reader stopped at its zeros has its
             * records there now: look once more. */
            if ((src->active || !looked_again) && shard_reader_continue(src->r) == 0) {
                if (src->active)
                    return 0;
                looked_again = true;
                continue;
            }
            return r == 0 ? -ENODATA : r;
        }
        if (r < 0)
            return r;
        if (ret->kind != SHARD_ITEM_RECORD)
            continue;
        src->r_pos++;
        if (src->r_pos - 1 == want)
            return 1;
    }
}

bool ship_stream_in_active(int spool_fd, const uint8_t id[SHARD_STREAM_ID_SIZE])
{
    _cleanup_close_ int active_fd = -1;
    struct dirent *de;
    bool found = false;
    DIR *d;

    active_fd = openat(spool_fd, SPOOL_ACTIVE_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (active_fd < 0 || opendir_at(active_fd, &d) < 0)
        return false;
    while (!found && (de = readdir(d))) {
        struct spool_name sn;
        struct shard_header h;
        uint8_t key[SHARD_STREAM_ID_SIZE];
        int fd;

        if (spool_name_parse(de->d_name, SPOOL_TMP, &sn) < 0 ||
            open_regular_at(active_fd, de->d_name, O_NOFOLLOW, &fd, NULL) < 0)
            continue;
        if (read_header(fd, &h) == 0) {
            ship_stream_key(&h, key);
            found = memcmp(key, id, SHARD_STREAM_ID_SIZE) == 0;
        } else {
            found = true; /* a shard without its header yet may be anyone's */
        }
        (void)close(fd);
    }
    closedir(d);
    return found;
}
