/* logctl cat --follow: like tail -f, for the shards being written.
 *
 * One inotify watch on <spool>/active reports everything needed: a shard
 * created there (IN_CREATE), appended to (IN_MODIFY of a file in the
 * directory), and sealed (IN_MOVED_FROM: renamed into done/). Each followed
 * shard keeps its descriptor and a shard reader that stops at the end of
 * what is written (or inside a record still being written) and reads on
 * from there on the next event (shard_reader_continue). A shard renamed into
 * done/ is read to its end through the descriptor it already has, so nothing
 * between the last event and the seal is lost, and the producer's next shard
 * is followed from its first record when it appears.
 *
 * Shards that exist when --follow starts are followed from their current
 * end: only records appended after it starts are printed. A shard created
 * and already sealed before its event is handled is read from done/.
 *
 * Damage never wedges following. A bad record is skipped alone once the
 * bytes after it show that its framing holds (until they are written, the
 * shard waits, as for a torn tail); damage without framing ends the
 * following of that shard only, since an active shard has no later shard
 * header to resynchronise at, and the producer's next shard is followed as
 * usual. Every skip is reported on stderr and makes the exit status 1. A
 * torn tail of an active shard is a write in progress, not damage. A FIFO
 * or other non-regular file under a shard's name is reported, never
 * opened for reading.
 *
 * SIGINT and SIGTERM arrive through a signalfd, so the loop ends between
 * two records with everything printed flushed, and the exit status is 0. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cat.h"
#include "fileutil.h"
#include "logctl.h"
#include "spool_names.h"

struct followed {
    struct followed *next;
    char *name; /* in active/ */
    char *path; /* as shown in messages */
    struct spool_name parsed; /* the producer and id its name says */
    int fd;
    struct shard_reader *reader;
};

struct follow {
    const struct cat_opts *o;
    const char *active_path, *done_path;
    int active_fd, done_fd;
    struct followed *list;
    bool failed;
    int out_err;
};

static void drop(struct follow *fl, struct followed *f)
{
    for (struct followed **p = &fl->list; *p; p = &(*p)->next) {
        if (*p == f) {
            *p = f->next;
            break;
        }
    }
    shard_reader_free(f->reader);
    if (f->fd >= 0)
        (void)close(f->fd); /* read-only */
    free(f->name);
    free(f->path);
    free(f);
}

/* Reads what has been appended since the last time; prints it unless
 * skipping (the shards that existed at start). sealed: the shard was
 * renamed into done/, so it is complete and damage in it can be judged
 * now. */
static void drain(struct follow *fl, struct followed *f, bool print, bool sealed)
{
    bool damaged = false;
    int r = cat_read(f->reader, f->path, fl->o, sealed ? 0 : SHARD_SKIP_GROWING, print,
                     &damaged, &fl->out_err);

    if (damaged)
        fl->failed = true;
    if (fl->out_err)
        return;
    if (r == -EAGAIN)
        return; /* a damaged record; what follows it is not written yet */
    if (r == 1) {
        fprintf(stderr, "logctl: cat: %s: no longer following it\n", f->path);
        drop(fl, f);
        return;
    }
    if (r < 0 && r != -ENODATA) {
        fprintf(stderr, "logctl: cat: %s: no longer following it\n", f->path);
        fl->failed = true;
        drop(fl, f);
        return;
    }
    /* At the end, or at a record still being written: read on from there
     * on the next event. */
    (void)shard_reader_continue(f->reader); /* only a seek can fail; the reader then stays put */
}

static struct followed *find(struct follow *fl, const char *name)
{
    for (struct followed *f = fl->list; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* Opens name in dir_fd for reading only if it is a regular file, never
 * blocking on a FIFO. Returns 0 with *ret_fd, -ENOENT quietly, or another
 * negative errno after reporting it. */
static int follow_open(struct follow *fl, int dir_fd, const char *dir_path, const char *name,
                       int *ret_fd)
{
    mode_t mode = 0;
    int r = open_regular_at(dir_fd, name, O_NOFOLLOW, ret_fd, &mode);

    if (r < 0 && r != -ENOENT) {
        fflush(stdout);
        if (r == -EBADFD || r == -EISDIR)
            fprintf(stderr, "logctl: cat: %s/%s: not a regular file (%s), skipped\n",
                    dir_path, name, r == -EISDIR ? "directory" : file_type_name(mode));
        else
            fprintf(stderr, "logctl: cat: %s/%s: %s\n", dir_path, name, strerror(-r));
        fl->failed = true;
    }
    return r;
}

/* A shard that was sealed before we could open it under tmp_name: all of
 * it is new. */
static void cat_sealed(struct follow *fl, const char *tmp_name)
{
    char name[SPOOL_NAME_SIZE];
    _cleanup_free_ char *path = NULL;
    struct shard_reader *reader = NULL;
    bool damaged = false;
    int fd;

    if (spool_name_sealed(tmp_name, name, sizeof(name)) < 0)
        return; /* not reached: add() took the name for a shard's */
    if (follow_open(fl, fl->done_fd, fl->done_path, name, &fd) < 0)
        return; /* merged and removed already (gone before we could see it), or reported */
    path = path_join(fl->done_path, name);
    if (!path || shard_reader_new(&reader, fd) < 0) {
        (void)close(fd); /* read-only */
        fprintf(stderr, "logctl: cat: out of memory\n");
        fl->failed = true;
        return;
    }
    if (cat_read(reader, path, fl->o, 0, true, &damaged, &fl->out_err) != 0 || damaged)
        fl->failed = true;
    shard_reader_free(reader);
    (void)close(fd); /* read-only */
}

/* Starts following active/name: from its start (a new shard) or from its
 * current end (one that was there when --follow started). */
static void add(struct follow *fl, const char *name, bool from_start)
{
    struct followed *f;
    struct spool_name parsed;
    int fd, r;

    if (spool_name_parse(name, SPOOL_TMP, &parsed) < 0 ||
        !cat_wants_producer(fl->o, parsed.producer) || find(fl, name))
        return;
    r = follow_open(fl, fl->active_fd, fl->active_path, name, &fd);
    if (r < 0) {
        if (r == -ENOENT && from_start)
            cat_sealed(fl, name);
        return;
    }
    f = calloc(1, sizeof(*f));
    if (!f || !(f->name = strdup(name)) || !(f->path = path_join(fl->active_path, name)) ||
        shard_reader_new(&f->reader, fd) < 0) {
        if (f) {
            free(f->name);
            free(f->path);
        }
        free(f);
        (void)close(fd); /* read-only */
        fprintf(stderr, "logctl: cat: out of memory\n");
        fl->failed = true;
        return;
    }
    shard_reader_set_active(f->reader);
    f->fd = fd;
    f->parsed = parsed;
    f->next = fl->list;
    fl->list = f;
    drain(fl, f, from_start, false);
}

/* Looks at every shard in active/: new ones are followed from their start
 * (after an inotify queue overflow) or from their end (at start). */
static int scan(struct follow *fl, bool from_start)
{
    struct dirent *de;
    DIR *dir;
    int r = opendir_at(fl->active_fd, &dir);

    if (r < 0)
        return r;
    while ((de = readdir(dir)) != NULL)
        if (de->d_name[0] != '.')
            add(fl, de->d_name, from_start);
    (void)closedir(dir); /* read-only directory stream */
    return 0;
}

static int handle_events(struct follow *fl, int ifd)
{
    char buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));

    for (;;) {
        ssize_t n = read(ifd, buf, sizeof(buf));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return n < 0 ? -errno : -EIO;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            struct followed *f;

            p += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                for (f = fl->list; f;) {
                    struct followed *next = f->next;
                    drain(fl, f, true, false);
                    f = next;
                }
                (void)scan(fl, true);
                continue;
            }
            if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT))
                return -ENOENT;
            if (!ev->len)
                continue;
            f = find(fl, ev->name);
            if (ev->mask & (IN_CREATE | IN_MOVED_TO)) {
                if (!f)
                    add(fl, ev->name, true);
            } else if (ev->mask & (IN_MODIFY | IN_CLOSE_WRITE)) {
                if (f)
                    drain(fl, f, true, false);
            } else if (ev->mask & (IN_MOVED_FROM | IN_DELETE)) {
                if (f) {
                    /* Sealed: the rest is still readable through our fd,
                     * and complete. */
                    drain(fl, f, true, true);
                    if ((f = find(fl, ev->name)))
                        drop(fl, f);
                }
            }
            if (fl->out_err)
                return 0;
        }
    }
}

int cat_follow(const struct cat_opts *o, const char *spool)
{
    _cleanup_free_ char *active_path = path_join(spool, SPOOL_ACTIVE_DIR);
    _cleanup_free_ char *done_path = path_join(spool, SPOOL_DONE_DIR);
    _cleanup_close_ int active_fd = -1;
    _cleanup_close_ int done_fd = -1;
    _cleanup_close_ int ifd = -1;
    _cleanup_close_ int sfd = -1;
    struct follow fl = { .o = o };
    sigset_t mask;
    int r = 0;

    if (!active_path || !done_path) {
        fprintf(stderr, "logctl: cat: out of memory\n");
        return LOGCTL_EXIT_FAILURE;
    }
    active_fd = open(active_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    done_fd = open(done_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (active_fd < 0 || done_fd < 0) {
        r = -errno;
        fprintf(stderr, "logctl: cat: %s: %s\n", active_fd < 0 ? active_path : done_path,
                strerror(-r));
        return logctl_exit_for_errno(r);
    }
    fl.active_path = active_path;
    fl.done_path = done_path;
    fl.active_fd = active_fd;
    fl.done_fd = done_fd;

    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ||
        (sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
        fprintf(stderr, "logctl: cat: cannot watch for signals: %s\n", strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    ifd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (ifd < 0 || inotify_add_watch(ifd, active_path,
                                     IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM |
                                         IN_MOVED_TO | IN_DELETE | IN_DELETE_SELF |
                                         IN_MOVE_SELF) < 0) {
        r = -errno;
        fprintf(stderr, "logctl: cat: cannot watch %s: %s\n", active_path, strerror(errno));
        return logctl_exit_for_errno(r);
    }
    /* The watch first, then the listing: a shard created in between is seen
     * by both, and add() follows it once. */
    r = scan(&fl, false);
    if (r < 0) {
        fprintf(stderr, "logctl: cat: %s: %s\n", active_path, strerror(-r));
        return logctl_exit_for_errno(r);
    }

    while (!fl.out_err) {
        struct pollfd p[2] = { { .fd = ifd, .events = POLLIN }, { .fd = sfd, .events = POLLIN } };

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "logctl: cat: poll: %s\n", strerror(errno));
            fl.failed = true;
            break;
        }
        if (p[0].revents) {
            r = handle_events(&fl, ifd);
            if (r < 0) {
                fflush(stdout);
                fprintf(stderr, "logctl: cat: %s: %s; stopped following\n", active_path,
                        r == -ENOENT ? "the directory went away" : strerror(-r));
                fl.failed = true;
                break;
            }
        }
        errno = 0;
        if (!fl.out_err && fflush(stdout) != 0)
            fl.out_err = errno ? errno : EIO;
        if (p[1].revents)
            break; /* SIGINT or SIGTERM: what was read is printed */
    }
    while (fl.list)
        drop(&fl, fl.list);
    errno = 0;
    if (!fl.out_err && fflush(stdout) != 0)
        fl.out_err = errno ? errno : EIO;
    if (fl.out_err) {
        fprintf(stderr, "logctl: cat: write error on standard output: %s\n",
                strerror(fl.out_err));
        return LOGCTL_EXIT_FAILURE;
    }
    return fl.failed ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
