/* The disk budget: producers' usage against their quotas, the spool's
 * against its budget and its filesystem's free space (budget.h).
 *
 * Two tables, both keyed with random bytes (names come from producers):
 * the producers by name, and the files of the followed directories by
 * directory and name, each file with its size and, in done/, its producer.
 * A file's entry is the only place its size is kept, so a removal reported
 * by inotify subtracts exactly what was added, and a report that repeats
 * what is known (our own seal's rename, seen again by inotify) changes
 * nothing. An overflowed inotify queue makes the directories be read
 * again in full. */
#include "budget.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "daemon.h"
#include "fileutil.h"
#include "keyed_hash.h"
#include "log.h"
#include "spool_names.h"

/* The spool's free space is asked this often; in between, what was taken
 * since is subtracted from the last answer. */
#define STATVFS_INTERVAL_MS 250
#define INITIAL_BUCKETS 256u

enum budget_dir { DIR_DONE, DIR_MERGED, DIR_QUARANTINE, N_DIRS };
static const char *const dir_names[N_DIRS] = { "done", "merged", "quarantine" };

struct budget_producer {
    struct budget_producer *hash_next;
    uint64_t hash;
    unsigned refs;          /* gets not yet put */
    uint64_t active_bytes;  /* taken into its open shards */
    uint64_t sealed_bytes;  /* its files in done/ */
    uint64_t sealed_files;
    uint64_t quota;         /* 0: none */
    struct list_node waiters;
    uint64_t wait_start_ns; /* monotonic; 0 while nobody waits */
    uint64_t wait_total_ns; /* ended waits */
    uint64_t pauses, refused;
    size_t name_len;
    char name[];
};

struct budget_file {
    struct budget_file *hash_next;
    uint64_t hash;
    struct budget_producer *producer; /* done/ only: holds a reference */
    uint64_t size;
    uint8_t dir;
    char name[];
};

struct followed_dir {
    int fd; /* -1 while the directory does not exist */
    int wd; /* its inotify watch; -1 while none */
    uint64_t bytes, files;
};

struct table {
    void **buckets; /* chains of producers or files, through hash_next */
    size_t n_buckets, count;
};

struct budget {
    struct keyed_hash key;
    struct table producers, files;
    struct followed_dir dirs[N_DIRS];
    int inotify_fd;
    int spool_wd; /* the spool itself: merged/ and quarantine/ may appear */
    uv_poll_t poll;
    uv_timer_t statvfs_timer;
    bool poll_started;
    uint64_t active_bytes; /* all producers' taken bytes */
    uint64_t left_bytes;   /* shards left in active/ for recovery */
    uint64_t taken_total; /* every byte ever taken: only grows */
    uint64_t free_sample, taken_at_sample;
    bool free_known;
    uint64_t refused_budget, quota_pauses;
    uint64_t freed_bytes; /* files gone from the followed directories */
};

/* ---- tables ---- */

static int table_init(struct table *t)
{
    t->buckets = calloc(INITIAL_BUCKETS, sizeof(void *));
    t->n_buckets = INITIAL_BUCKETS;
    t->count = 0;
    return t->buckets ? 0 : -ENOMEM;
}

/* Both entry kinds begin with hash_next and hash. */
struct chained {
    struct chained *hash_next;
    uint64_t hash;
};

static void table_grow(struct table *t)
{
    size_t n = t->n_buckets * 2;
    void **nb;

    if (t->count <= t->n_buckets)
        return;
    nb = calloc(n, sizeof(void *));
    if (!nb)
        return; /* longer chains, still correct */
    for (size_t b = 0; b < t->n_buckets; b++) {
        struct chained *e = t->buckets[b], *next;
        for (; e; e = next) {
            next = e->hash_next;
            e->hash_next = nb[e->hash & (n - 1)];
            nb[e->hash & (n - 1)] = e;
        }
    }
    free(t->buckets);
    t->buckets = nb;
    t->n_buckets = n;
}

static void table_add(struct table *t, void *entry)
{
    struct chained *e = entry;

    e->hash_next = t->buckets[e->hash & (t->n_buckets - 1)];
    t->buckets[e->hash & (t->n_buckets - 1)] = e;
    t->count++;
    table_grow(t);
}

static void table_del(struct table *t, void *entry)
{
    struct chained *e = entry;
    struct chained **pp = (struct chained **)&t->buckets[e->hash & (t->n_buckets - 1)];

    while (*pp != e)
        pp = &(*pp)->hash_next;
    *pp = e->hash_next;
    t->count--;
}

static uint64_t file_hash(const struct budget *b, enum budget_dir dir, const char *name)
{
    return keyed_hash_bytes(&b->key, name, strlen(name)) ^ ((uint64_t)dir * 0x9e3779b97f4a7c15ull);
}

static struct budget_file *file_find(const struct budget *b, enum budget_dir dir,
                                     const char *name)
{
    uint64_t h = file_hash(b, dir, name);

    for (struct budget_file *f = b->files.buckets[h & (b->files.n_buckets - 1)]; f;
         f = f->hash_next)
        if (f->hash == h && f->dir == dir && strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

static struct budget_producer *producer_find(const struct budget *b, const char *name,
                                             size_t len, uint64_t h)
{
    for (struct budget_producer *p = b->producers.buckets[h & (b->producers.n_buckets - 1)]; p;
         p = p->hash_next)
        if (p->hash == h && p->name_len == len && memcmp(p->name, name, len) == 0)
            return p;
    return NULL;
}

/* ---- producers ---- */

static uint64_t producer_usage(const struct budget_producer *p)
{
    return p->active_bytes + p->sealed_bytes;
}

static bool producer_over(const struct budget_producer *p)
{
    return p->quota && producer_usage(p) >= p->quota;
}

static struct budget_producer *producer_ref(struct daemon *d, const char *name, size_t len)
{
    struct budget *b = d->budget;
    uint64_t h;
    struct budget_producer *p;

    if (!b)
        return NULL;
    h = keyed_hash_bytes(&b->key, name, len);
    p = producer_find(b, name, len, h);
    if (!p) {
        p = calloc(1, sizeof(*p) + len + 1);
        if (!p)
            return NULL;
        p->hash = h;
        p->name_len = len;
        memcpy(p->name, name, len);
        p->name[len] = '\0';
        p->quota = config_producer_quota(&d->config, p->name);
        list_init(&p->waiters);
        table_add(&b->producers, p);
    }
    p->refs++;
    return p;
}

struct budget_producer *budget_producer_get(struct daemon *d, const char *name)
{
    return producer_ref(d, name, strlen(name));
}

/* A producer stays while anything refers to it: a connection, a shard, a
 * file of done/. Its counters go with it; status shows the living. */
void budget_producer_put(struct daemon *d, struct budget_producer *p)
{
    if (!p)
        return;
    assert(p->refs > 0);
    if (--p->refs > 0)
        return;
    assert(list_empty(&p->waiters));
    table_del(&d->budget->producers, p);
    free(p);
}

/* Calls back the connections waiting for p once it is under its quota.
 * They may wait again at once (their next frame finds p over it again):
 * the list is taken first, so each is called once. */
static void producer_maybe_release(struct daemon *d, struct budget_producer *p)
{
    struct list_node ready;

    if (list_empty(&p->waiters) || producer_over(p))
        return;
    p->wait_total_ns += now_monotonic_ns() - p->wait_start_ns;
    p->wait_start_ns = 0;
    log_info("producer %s is under its quota again (%" PRIu64 " of %" PRIu64
             " bytes): its connections are read again",
             p->name, producer_usage(p), p->quota);
    list_init(&ready);
    while (!list_empty(&p->waiters)) {
        struct list_node *n = p->waiters.next;
        list_del(n);
        list_add_tail(&ready, n);
    }
    p->refs++; /* the callbacks may put the last other reference */
    while (!list_empty(&ready)) {
        struct budget_waiter *w = list_entry(ready.next, struct budget_waiter, node);

        list_del(&w->node);
        w->resume(w);
    }
    budget_producer_put(d, p);
}

void budget_taken(struct daemon *d, struct budget_producer *p, uint64_t bytes)
{
    if (!p)
        return;
    p->active_bytes += bytes;
    d->budget->active_bytes += bytes;
    d->budget->taken_total += bytes;
}

/* ---- files ---- */

static void file_remove(struct daemon *d, struct budget_file *f)
{
    struct budget *b = d->budget;

    table_del(&b->files, f);
    b->freed_bytes += f->size;
    b->dirs[f->dir].bytes -= f->size;
    b->dirs[f->dir].files--;
    free(f);
}

/* Removes the entry of dir/name, if any, and frees its producer's share. */
static void forget_file(struct daemon *d, enum budget_dir dir, const char *name)
{
    struct budget_file *f = file_find(d->budget, dir, name);
    struct budget_producer *p;
    uint64_t size;

    if (!f)
        return;
    p = f->producer;
    size = f->size;
    file_remove(d, f);
    if (p) {
        p->sealed_bytes -= size;
        p->sealed_files--;
        producer_maybe_release(d, p); /* p lives on: the file's reference */
        budget_producer_put(d, p);
    }
}

/* Brings the entry of dir/name in line with the file: its size when it is
 * a regular file (never following a symlink), no entry otherwise. */
static void learn_file(struct daemon *d, enum budget_dir dir, const char *name)
{
    struct budget *b = d->budget;
    struct budget_file *f;
    struct stat st;
    size_t len = strlen(name);

    if (b->dirs[dir].fd < 0 || fstatat(b->dirs[dir].fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISREG(st.st_mode)) {
        forget_file(d, dir, name);
        return;
    }
    f = file_find(b, dir, name);
    if (f) {
        uint64_t old = f->size;

        f->size = (uint64_t)st.st_size;
        b->dirs[dir].bytes += f->size - old;
        if (f->producer) {
            f->producer->sealed_bytes += f->size - old;
            if (f->size < old)
                producer_maybe_release(d, f->producer);
        }
        return;
    }
    f = calloc(1, sizeof(*f) + len + 1);
    if (!f)
        return; /* uncounted: the budget errs on the generous side */
    memcpy(f->name, name, len + 1);
    f->dir = (uint8_t)dir;
    f->size = (uint64_t)st.st_size;
    f->hash = file_hash(b, dir, name);
    if (dir == DIR_DONE) {
        struct spool_name sn;

        /* Only a shard's name says whose it is; anything else in done/
         * counts for the spool alone. */
        if (spool_name_parse(name, SPOOL_SHARD, &sn) == 0) {
            f->producer = producer_ref(d, sn.producer, sn.producer_len);
            if (f->producer) {
                f->producer->sealed_bytes += f->size;
                f->producer->sealed_files++;
            }
        }
    }
    table_add(&b->files, f);
    b->dirs[dir].bytes += f->size;
    b->dirs[dir].files++;
}

/* Opens dir (if it exists now), watches it and reads it whole. Called at
 * start, when the spool reports the directory created, and after an
 * overflow; entries no longer there are forgotten. */
static void follow_dir(struct daemon *d, enum budget_dir dir)
{
    struct budget *b = d->budget;
    struct followed_dir *fd = &b->dirs[dir];
    char path[4096];
    DIR *dh;
    int dup_fd;

    if (fd->fd < 0) {
        fd->fd = openat(d->spool_fd, dir_names[dir],
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd->fd < 0)
            return;
    }
    if (fd->wd < 0 && b->inotify_fd >= 0) {
        snprintf(path, sizeof(path), "%s/%s", d->config.spool, dir_names[dir]);
        fd->wd = inotify_add_watch(b->inotify_fd, path,
                                   IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_DELETE |
                                       IN_MOVED_FROM | IN_DELETE_SELF | IN_ONLYDIR |
                                       IN_DONT_FOLLOW);
        if (fd->wd < 0)
            log_warning("disk budget: cannot follow %s/%s (%s); removals there are seen only "
                        "after a restart",
                        d->config.spool, dir_names[dir], strerror(errno));
    }
    /* Forget what is gone, then learn what is there. */
    for (size_t i = 0; i < b->files.n_buckets; i++) {
        struct budget_file *f = b->files.buckets[i], *next;
        for (; f; f = next) {
            struct stat st;
            next = f->hash_next;
            if (f->dir == dir && (fstatat(fd->fd, f->name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
                                  !S_ISREG(st.st_mode)))
                forget_file(d, dir, f->name);
        }
    }
    dup_fd = openat(fd->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    dh = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
    if (!dh) {
        if (dup_fd >= 0)
            close(dup_fd);
        log_warning("disk budget: cannot read %s/%s: %s", d->config.spool, dir_names[dir],
                    strerror(errno));
        return;
    }
    for (struct dirent *e; (e = readdir(dh));) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
            continue;
        learn_file(d, dir, e->d_name);
    }
    closedir(dh);
}

static void unfollow_dir(struct daemon *d, enum budget_dir dir)
{
    struct budget *b = d->budget;

    if (b->dirs[dir].wd >= 0 && b->inotify_fd >= 0)
        (void)inotify_rm_watch(b->inotify_fd, b->dirs[dir].wd);
    b->dirs[dir].wd = -1;
    if (b->dirs[dir].fd >= 0)
        close(b->dirs[dir].fd);
    b->dirs[dir].fd = -1;
}

static void on_inotify(uv_poll_t *h, int status, int events)
{
    struct daemon *d = h->data;
    struct budget *b = d->budget;
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool rescan = false;

    (void)events;
    if (status < 0)
        return;
    for (;;) {
        ssize_t n = read(b->inotify_fd, buf, sizeof(buf));

        if (n <= 0)
            break;
        for (char *q = buf; q < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)q;
            q += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                rescan = true;
                continue;
            }
            if (ev->wd == b->spool_wd) {
                /* merged/ or quarantine/ made (merge and recovery make
                 * them when first needed). */
                for (int i = DIR_MERGED; i < N_DIRS; i++)
                    if (ev->len && strcmp(ev->name, dir_names[i]) == 0 &&
                        (ev->mask & (IN_CREATE | IN_MOVED_TO)))
                        follow_dir(d, (enum budget_dir)i);
                continue;
            }
            for (int i = 0; i < N_DIRS; i++) {
                if (ev->wd != b->dirs[i].wd)
                    continue;
                if (ev->mask & (IN_DELETE_SELF | IN_IGNORED)) {
                    b->dirs[i].wd = -1;
                    unfollow_dir(d, (enum budget_dir)i);
                    rescan = true;
                } else if (ev->len && (ev->mask & (IN_DELETE | IN_MOVED_FROM))) {
                    forget_file(d, (enum budget_dir)i, ev->name);
                } else if (ev->len) {
                    learn_file(d, (enum budget_dir)i, ev->name);
                }
            }
        }
    }
    if (rescan) {
        log_warning("disk budget: the inotify queue overflowed or a directory went; reading "
                    "done/, merged/ and quarantine/ again");
        for (int i = 0; i < N_DIRS; i++)
            follow_dir(d, (enum budget_dir)i);
    }
}

/* ---- free space ---- */

static void sample_free(struct daemon *d)
{
    struct budget *b = d->budget;
    struct statvfs sv;

    if (fstatvfs(d->spool_fd, &sv) < 0) {
        b->free_known = false;
        return;
    }
    b->free_sample = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    b->taken_at_sample = b->taken_total;
    b->free_known = true;
}

static void on_statvfs_timer(uv_timer_t *t)
{
    sample_free(t->data);
}

static uint64_t free_estimate(const struct budget *b)
{
    /* Taken bytes reach the disk later, and a seal's padding adds a block
     * at most: counted as used from when they are taken. */
    uint64_t since = b->taken_total - b->taken_at_sample;
    return b->free_sample > since ? b->free_sample - since : 0;
}

/* ---- the interface ---- */

int budget_start(struct daemon *d, char *why, size_t why_len)
{
    struct budget *b = calloc(1, sizeof(*b));

    if (!b || table_init(&b->producers) < 0 || table_init(&b->files) < 0) {
        if (b) {
            free(b->producers.buckets);
            free(b->files.buckets);
        }
        free(b);
        snprintf(why, why_len, "disk budget: out of memory");
        return -ENOMEM;
    }
    keyed_hash_init(&b->key);
    for (int i = 0; i < N_DIRS; i++)
        b->dirs[i] = (struct followed_dir){ .fd = -1, .wd = -1 };
    d->budget = b;
    b->spool_wd = -1;
    b->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (b->inotify_fd < 0) {
        log_warning("disk budget: no inotify (%s): what merge, ship and prune remove is seen "
                    "only after a restart, so producers over their quota wait until then",
                    strerror(errno));
    } else {
        b->spool_wd = inotify_add_watch(b->inotify_fd, d->config.spool,
                                        IN_CREATE | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW);
        (void)uv_poll_init(d->loop, &b->poll, b->inotify_fd);
        b->poll.data = d;
        (void)uv_poll_start(&b->poll, UV_READABLE, on_inotify);
        uv_unref((uv_handle_t *)&b->poll);
        b->poll_started = true;
    }
    /* The watches first, then the reading: nothing done between the two
     * goes unseen. */
    for (int i = 0; i < N_DIRS; i++)
        follow_dir(d, (enum budget_dir)i);
    sample_free(d);
    (void)uv_timer_init(d->loop, &b->statvfs_timer);
    b->statvfs_timer.data = d;
    (void)uv_timer_start(&b->statvfs_timer, on_statvfs_timer, STATVFS_INTERVAL_MS,
                         STATVFS_INTERVAL_MS);
    uv_unref((uv_handle_t *)&b->statvfs_timer);
    return 0;
}

static void on_closed(uv_handle_t *h)
{
    (void)h;
}

void budget_stop(struct daemon *d)
{
    struct budget *b = d->budget;

    if (!b)
        return;
    (void)uv_timer_stop(&b->statvfs_timer);
    uv_close((uv_handle_t *)&b->statvfs_timer, on_closed);
    if (b->poll_started) {
        (void)uv_poll_stop(&b->poll);
        uv_close((uv_handle_t *)&b->poll, on_closed);
        b->poll_started = false;
    }
    /* The inotify descriptor closes after the poll handle (budget_free). */
}

void budget_free(struct daemon *d)
{
    struct budget *b = d->budget;

    if (!b)
        return;
    for (int i = 0; i < N_DIRS; i++)
        if (b->dirs[i].fd >= 0)
            close(b->dirs[i].fd);
    if (b->inotify_fd >= 0)
        close(b->inotify_fd);
    for (size_t i = 0; i < b->files.n_buckets; i++) {
        struct budget_file *f = b->files.buckets[i], *next;
        for (; f; f = next) {
            next = f->hash_next;
            free(f);
        }
    }
    for (size_t i = 0; i < b->producers.n_buckets; i++) {
        struct budget_producer *p = b->producers.buckets[i], *next;
        for (; p; p = next) {
            next = p->hash_next;
            free(p);
        }
    }
    free(b->files.buckets);
    free(b->producers.buckets);
    free(b);
    d->budget = NULL;
}

void budget_shard_ended(struct daemon *d, struct budget_producer *p, uint64_t taken,
                        enum budget_shard_end end, const char *file)
{
    struct budget *b = d->budget;

    if (!b || !p)
        return;
    assert(p->active_bytes >= taken && b->active_bytes >= taken);
    p->active_bytes -= taken;
    b->active_bytes -= taken;
    switch (end) {
    case BUDGET_END_DONE:
        learn_file(d, DIR_DONE, file);
        break;
    case BUDGET_END_QUARANTINE:
        if (b->dirs[DIR_QUARANTINE].fd < 0)
            follow_dir(d, DIR_QUARANTINE);
        else
            learn_file(d, DIR_QUARANTINE, file);
        break;
    case BUDGET_END_LEFT:
        b->left_bytes += taken;
        break;
    case BUDGET_END_REMOVED:
        break;
    }
    producer_maybe_release(d, p);
}

static uint64_t spool_bytes(const struct budget *b)
{
    uint64_t n = b->active_bytes + b->left_bytes;

    for (int i = 0; i < N_DIRS; i++)
        n += b->dirs[i].bytes;
    return n;
}

int budget_admit(struct daemon *d, struct budget_producer *p, char *why, size_t why_len)
{
    const struct config *c = &d->config;
    struct budget *b = d->budget;

    if (!b)
        return 0;
    if (c->spool_budget_bytes && spool_bytes(b) >= c->spool_budget_bytes) {
        snprintf(why, why_len,
                 "the spool %s holds %" PRIu64 " bytes, at spool_budget_bytes (%" PRIu64 ")",
                 c->spool, spool_bytes(b), c->spool_budget_bytes);
        return -ENOSPC;
    }
    if (c->spool_min_free_bytes && b->free_known && free_estimate(b) <= c->spool_min_free_bytes) {
        snprintf(why, why_len,
                 "the filesystem of the spool %s has %" PRIu64
                 " bytes free, at spool_min_free_bytes (%" PRIu64 ")",
                 c->spool, free_estimate(b), c->spool_min_free_bytes);
        return -ENOSPC;
    }
    if (p && producer_over(p)) {
        snprintf(why, why_len,
                 "producer %s holds %" PRIu64 " bytes in the spool (%" PRIu64
                 " in open shards, %" PRIu64 " in %" PRIu64 " sealed shards of done/), at its "
                 "quota of %" PRIu64,
                 p->name, producer_usage(p), p->active_bytes, p->sealed_bytes, p->sealed_files,
                 p->quota);
        return -EDQUOT;
    }
    return 0;
}

void budget_wait(struct daemon *d, struct budget_producer *p, struct budget_waiter *w)
{
    assert(p && !list_linked(&w->node));
    if (list_empty(&p->waiters)) {
        p->wait_start_ns = now_monotonic_ns();
        p->pauses++;
        d->budget->quota_pauses++;
        log_warning_ratelimited(d->loop, "producers entering quota waits",
                                "producer %s is at its quota (%" PRIu64 " of %" PRIu64
                                " bytes in the spool): its connections wait until merge, ship "
                                "or prune frees its share",
                                p->name, producer_usage(p), p->quota);
    }
    list_add_tail(&p->waiters, &w->node);
}

void budget_unwait(struct budget_waiter *w)
{
    if (list_linked(&w->node))
        list_del(&w->node);
}

void budget_count_refused(struct daemon *d, struct budget_producer *p)
{
    if (p && producer_over(p))
        p->refused++;
    else if (d->budget)
        d->budget->refused_budget++;
}

void budget_reload(struct daemon *d)
{
    struct budget *b = d->budget;
    struct budget_producer **waiting;
    size_t n = 0;

    if (!b)
        return;
    waiting = calloc(b->producers.count ? b->producers.count : 1, sizeof(*waiting));
    for (size_t i = 0; i < b->producers.n_buckets; i++)
        for (struct budget_producer *p = b->producers.buckets[i]; p; p = p->hash_next) {
            p->quota = config_producer_quota(&d->config, p->name);
            if (waiting && !list_empty(&p->waiters)) {
                p->refs++;
                waiting[n++] = p;
            }
        }
    /* Released only after the walk: the connections called back may end
     * and put producers of the table. */
    for (size_t i = 0; i < n; i++) {
        producer_maybe_release(d, waiting[i]);
        budget_producer_put(d, waiting[i]);
    }
    free(waiting);
}

void budget_figures(const struct daemon *d, struct budget_figures *ret)
{
    const struct budget *b = d->budget;

    memset(ret, 0, sizeof(*ret));
    ret->budget_bytes = d->config.spool_budget_bytes;
    ret->min_free_bytes = d->config.spool_min_free_bytes;
    if (!b)
        return;
    ret->active_bytes = b->active_bytes + b->left_bytes;
    ret->done_bytes = b->dirs[DIR_DONE].bytes;
    ret->merged_bytes = b->dirs[DIR_MERGED].bytes;
    ret->quarantine_bytes = b->dirs[DIR_QUARANTINE].bytes;
    ret->spool_bytes = spool_bytes(b);
    ret->free_bytes = b->free_known ? free_estimate(b) : 0;
    ret->refused_budget = b->refused_budget;
    ret->quota_pauses = b->quota_pauses;
    ret->freed_bytes = b->freed_bytes;
    for (size_t i = 0; i < b->producers.n_buckets; i++)
        for (const struct budget_producer *p = b->producers.buckets[i]; p; p = p->hash_next)
            if (!list_empty(&p->waiters))
                ret->producers_waiting++;
}

int budget_each_producer(const struct daemon *d,
                         int (*fn)(void *data, const struct budget_producer_figures *f),
                         void *data)
{
    const struct budget *b = d->budget;
    uint64_t now = now_monotonic_ns();

    if (!b)
        return 0;
    for (size_t i = 0; i < b->producers.n_buckets; i++)
        for (const struct budget_producer *p = b->producers.buckets[i]; p; p = p->hash_next) {
            struct budget_producer_figures f = {
                .name = p->name,
                .bytes = producer_usage(p),
                .active_bytes = p->active_bytes,
                .sealed_bytes = p->sealed_bytes,
                .sealed_files = p->sealed_files,
                .quota = p->quota,
                .waiting = !list_empty(&p->waiters),
                .wait_ns = p->wait_total_ns + (p->wait_start_ns ? now - p->wait_start_ns : 0),
                .pauses = p->pauses,
                .refused = p->refused,
            };
            int r = fn(data, &f);
            if (r)
                return r;
        }
    return 0;
}
