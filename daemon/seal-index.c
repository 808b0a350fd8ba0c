/* Appending to the seal index and rewriting it (see the header). */
#include "seal-index.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "seal_index.h"
#include "shard_format.h"
#include "spool_names.h"

struct seal_index_writer {
    struct daemon *d;
    int fd;          /* the index, open for appending; -1: off until a rewrite */
    size_t appended; /* entries since the last rewrite, written or waiting */
    size_t kept;     /* entries the last rewrite kept */
    struct index_job *job; /* the one append or rewrite in the thread pool */
    bool fill_wanted; /* the first rewrite, which also reads the shards without an entry */
    bool stopped;    /* freed once nothing is left to do */
    /* Entries of seals not yet handed to a job. */
    struct seal_index_bytes waiting;
    size_t waiting_entries;
    char last_error[256];
};

/* An append of entries, or a rewrite, in the thread pool: one at a time,
 * so that the loop never waits on the file and the file sees one writer. */
struct index_job {
    uv_work_t w;
    struct seal_index_writer *x;
    bool rewrite;
    bool fill;               /* a rewrite that reads shards without an entry */
    atomic_bool cancel;      /* the daemon stops: a rewrite gives up */
    int fd;                  /* an append's */
    int spool_fd, done_fd;   /* a rewrite's */
    struct seal_index_bytes entries; /* an append's, owned */
    size_t kept;             /* a rewrite's */
    int err;
    char why[200];
};

#ifdef LOGSHARD_FAULT_INJECTION
/* Test builds: LOGSHARD_FAULTS=small_seal_index rewrites the index after 8
 * seals instead of SEAL_INDEX_REWRITE_MIN, so a test sees rewrites at run
 * time without sealing thousands of shards. */
static size_t rewrite_min(void)
{
    static size_t min;

    if (min == 0) {
        const char *env = getenv("LOGSHARD_FAULTS");
        min = env && strstr(env, "small_seal_index") ? 8 : SEAL_INDEX_REWRITE_MIN;
    }
    return min;
}
#else
static size_t rewrite_min(void)
{
    return SEAL_INDEX_REWRITE_MIN;
}
#endif

static void report(struct seal_index_writer *x, const char *why)
{
    if (strcmp(x->last_error, why) == 0)
        return;
    snprintf(x->last_error, sizeof(x->last_error), "%s", why);
    log_warning("%s/" SEAL_INDEX_FILE ": %s; logctl cat --since/--until opens the shards it "
                "does not cover, which is slower and loses nothing",
                x->d->config.spool, why);
}

/* The entry of the shard name in done/, from the file's own header and
 * seal trailer, which is what cat would read. 0, or -EBADMSG when the file
 * is not one sealed shard with a trailer (version 1, damage, a merged
 * file), or the error of opening or reading it. */
static int entry_from_file(int done_fd, const char *name, struct seal_index_entry *ret)
{
    struct spool_name parsed;
    struct shard_header h;
    struct shard_trailer t;
    struct stat st;
    uint64_t start;
    int fd, r;

    if (spool_name_parse(name, SPOOL_SHARD, &parsed) < 0 || strlen(name) >= sizeof(ret->name))
        return -EINVAL;
    r = open_regular_stat_at(done_fd, name, O_NOFOLLOW | O_NONBLOCK, &fd, &st);
    if (r < 0)
        return r;
    r = shard_locate_before(fd, (uint64_t)st.st_size, &start, &h, &t);
    (void)close(fd); /* read-only */
    if (r < 0)
        return r;
    if (start != 0)
        return -EBADMSG;
    ret->inode = (uint64_t)st.st_ino;
    ret->created_ns = h.created_ns;
    ret->newest_ns = t.newest_ns;
    memcpy(ret->name, name, strlen(name) + 1);
    return 0;
}

/* Writes the entries of the old index whose shard is still in done/ under
 * the same inode to the temp name, and renames that over the index; with
 * fill, also an entry for each shard of done/ that has none, read from
 * the file (and until *cancel says to stop, which fails the rewrite with
 * -ECANCELED and leaves the index as it was). Runs on a pool thread at
 * run time: touches only its arguments. */
static int rewrite(int spool_fd, int done_fd, bool fill, const atomic_bool *cancel,
                   size_t *ret_kept, char *why, size_t why_len)
{
    struct seal_index *old = NULL;
    struct seal_index_bytes out = { 0 };
    size_t kept = 0;
    DIR *dir = NULL;
    int fd = -1, r;

    r = seal_index_load(spool_fd, &old);
    if (r == -ENOMEM) {
        snprintf(why, why_len, "out of memory");
        return r;
    }
    /* One that cannot be read is replaced: by an empty one, or one filled
     * from the files. */
    if (r < 0)
        old = NULL;
    if (old || fill) {
        r = opendir_at(done_fd, &dir);
        if (r < 0) {
            snprintf(why, why_len, "cannot list done/: %s", strerror(-r));
            goto out;
        }
        for (;;) {
            const struct seal_index_entry *e = NULL;
            struct seal_index_entry read;
            struct dirent *de;

            if (cancel && atomic_load(cancel)) {
                r = -ECANCELED;
                snprintf(why, why_len, "rewrite cancelled");
                break;
            }
            errno = 0;
            de = readdir(dir);
            if (!de) {
                r = errno ? -errno : 0;
                if (r < 0)
                    snprintf(why, why_len, "cannot list done/: %s", strerror(-r));
                break;
            }
            if (old)
                e = seal_index_find(old, de->d_name, de->d_ino);
            if (!e && fill && de->d_name[0] != '.' && entry_from_file(done_fd, de->d_name, &read) == 0)
                e = &read;
            if (!e)
                continue;
            r = seal_index_bytes_add(&out, e);
            if (r == -ENOMEM) {
                snprintf(why, why_len, "out of memory");
                break;
            }
            if (r == 0) /* else -EINVAL: the index took only names it can write */
                kept++;
            r = 0;
        }
        if (r < 0)
            goto out;
    }

    /* Whatever is under the temp name (a planted link) goes first. */
    if (unlinkat(spool_fd, SEAL_INDEX_TMP, 0) < 0 && errno != ENOENT) {
        r = -errno;
        snprintf(why, why_len, "cannot remove " SEAL_INDEX_TMP ": %s", strerror(-r));
        goto out;
    }
    fd = openat(spool_fd, SEAL_INDEX_TMP,
                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);
    if (fd < 0) {
        r = -errno;
        snprintf(why, why_len, "cannot create " SEAL_INDEX_TMP ": %s", strerror(-r));
        goto out;
    }
    /* Not synced: the index is a hint, and each entry checks itself. */
    r = write_all(fd, out.buf, out.len);
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(spool_fd, SEAL_INDEX_TMP, spool_fd, SEAL_INDEX_FILE) < 0)
        r = -errno;
    if (r < 0) {
        snprintf(why, why_len, "cannot rewrite it: %s", strerror(-r));
        (void)unlinkat(spool_fd, SEAL_INDEX_TMP, 0); /* a partial temp helps nobody */
        goto out;
    }
    *ret_kept = kept;
out:
    if (dir)
        (void)closedir(dir); /* read-only */
    free(out.buf);
    seal_index_free(old);
    return r;
}

/* Opens the index for appending, a regular file only. */
static int open_index(struct seal_index_writer *x)
{
    struct stat st;
    char why[200];
    int fd = openat(x->d->spool_fd, SEAL_INDEX_FILE,
                    O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0640);

    if (fd < 0) {
        int r = -errno;

        snprintf(why, sizeof(why), "cannot open it: %s", strerror(-r));
        report(x, why);
        return r;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        (void)close(fd); /* nothing written */
        report(x, "not a regular file");
        return -EBADFD;
    }
    x->fd = fd;
    return 0;
}

static void writer_free(struct seal_index_writer *x)
{
    if (x->fd >= 0)
        (void)close(x->fd); /* appends were never synced: nothing to lose */
    free(x->waiting.buf);
    free(x);
}

static void job_work(uv_work_t *w)
{
    struct index_job *job = w->data;

    if (job->rewrite) {
        job->err = rewrite(job->spool_fd, job->done_fd, job->fill, &job->cancel, &job->kept,
                           job->why, sizeof(job->why));
        return;
    }
    job->err = write_all(job->fd, job->entries.buf, job->entries.len);
    if (job->err < 0) /* a torn entry is passed over by readers */
        snprintf(job->why, sizeof(job->why), "cannot append to it: %s", strerror(-job->err));
}

static void next_job(struct seal_index_writer *x);

static void job_done(uv_work_t *w, int status)
{
    struct index_job *job = w->data;
    struct seal_index_writer *x = job->x;

    (void)status;
    x->job = NULL;
    if (job->fill)
        x->fill_wanted = false; /* tried once, whatever came of it */
    if (job->err == -ECANCELED) {
        /* The daemon stops; the next start fills the index. */
    } else if (job->err < 0) {
        report(x, job->why);
        if (job->rewrite) {
            x->appended = 0; /* the old file stays; the next try as many seals later */
        } else {
            (void)close(x->fd); /* appends were never synced: nothing to lose */
            x->fd = -1;         /* until the next rewrite */
        }
    } else if (job->rewrite) {
        x->kept = job->kept;
        x->appended = x->waiting_entries; /* the new file has all but these */
        x->last_error[0] = '\0';
        if (x->fd >= 0)
            (void)close(x->fd); /* the old file, renamed over: nothing to lose */
        x->fd = -1;
        (void)open_index(x);
    }
    free(job->entries.buf);
    free(job);
    next_job(x);
}

/* Starts the rewrite when it is due, else an append of what waits. */
static void next_job(struct seal_index_writer *x)
{
    struct index_job *job;
    bool rewrite_due = !x->stopped && (x->fill_wanted || (x->appended >= rewrite_min() &&
                                                         x->appended > x->kept));

    if (x->job)
        return;
    if (!rewrite_due && (x->waiting.len == 0 || x->fd < 0)) {
        if (x->fd < 0) {
            x->waiting.len = 0; /* those shards are read as before */
            x->waiting_entries = 0;
        }
        if (x->stopped)
            writer_free(x);
        return;
    }
    job = calloc(1, sizeof(*job));
    if (!job)
        return; /* the next seal tries again */
    job->x = x;
    job->w.data = job;
    job->rewrite = rewrite_due;
    job->fill = rewrite_due && x->fill_wanted;
    atomic_init(&job->cancel, false);
    if (rewrite_due) {
        job->spool_fd = x->d->spool_fd;
        job->done_fd = x->d->done_fd;
    } else {
        job->fd = x->fd;
        job->entries = x->waiting;
    }
    if (uv_queue_work(x->d->loop, &job->w, job_work, job_done) < 0) {
        free(job);
        return;
    }
    if (!rewrite_due) {
        x->waiting = (struct seal_index_bytes){ 0 };
        x->waiting_entries = 0;
    }
    x->job = job;
}

int seal_index_start(struct daemon *d)
{
    struct seal_index_writer *x = calloc(1, sizeof(*x));

    if (!x)
        return -ENOMEM;
    x->d = d;
    x->fd = -1;
    d->seal_index = x;
    /* Appends wait behind the first rewrite, which replaces whatever is
     * there (a torn tail, damage, a planted link) and fills in the shards
     * without an entry (sealed by recovery, or before the index existed). */
    (void)open_index(x);
    x->fill_wanted = true;
    next_job(x);
    return 0;
}

void seal_index_note(struct daemon *d, const char *done_name, int fd, uint64_t created_ns,
                     uint64_t newest_ns)
{
    struct seal_index_writer *x = d->seal_index;
    struct seal_index_entry e = { .created_ns = created_ns, .newest_ns = newest_ns };
    struct stat st;

    if (!x || fd < 0 || fstat(fd, &st) < 0 || strlen(done_name) >= sizeof(e.name))
        return;
    e.inode = (uint64_t)st.st_ino;
    memcpy(e.name, done_name, strlen(done_name) + 1);
    if (seal_index_bytes_add(&x->waiting, &e) < 0)
        return; /* a shard without an entry is read as before */
    x->waiting_entries++;
    x->appended++;
    next_job(x);
}

void seal_index_stop(struct daemon *d)
{
    struct seal_index_writer *x = d->seal_index;

    if (!x)
        return;
    d->seal_index = NULL;
    /* What waits is still appended: the seals of the last shards. A
     * rewrite that reads shards could take long; it gives up. */
    x->stopped = true;
    if (x->job && x->job->rewrite)
        atomic_store(&x->job->cancel, true);
    next_job(x);
}
