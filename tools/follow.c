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
 * SIGINT and SIGTERM arrive through a signalfd, so the loop ends between
 * two records with everything printed flushed, and the exit status is 0. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include "merge.h"

struct followed {
    struct followed *next;
    char *name; /* in active/ */
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id;
    int fd;
    struct shard_reader *reader;
};

struct follow {
    const struct cat_opts *o;
    const char *active_path;
    int active_fd, done_fd;
    struct followed *list;
    bool failed;
    int out_err;
};

/* "<producer>.<16 hex>.tmp" */
static int parse_tmp_name(const char *name, char *ret_producer, uint64_t *ret_id)
{
    size_t len = strlen(name);
    char buf[NAME_MAX + 8];

    if (len < 5 || len > NAME_MAX || strcmp(name + len - 4, ".tmp") != 0)
        return -EINVAL;
    snprintf(buf, sizeof(buf), "%.*s.shard", (int)(len - 4), name);
    return merge_parse_source_name(buf, ret_producer, ret_id);
}

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
    free(f);
}

/* Reads what has been appended since the last time; prints it unless
 * skipping (the shards that existed at start). */
static void drain(struct follow *fl, struct followed *f, bool print)
{
    struct shard_item item;
    int r;

    while ((r = shard_reader_next(f->reader, &item)) > 0) {
        if (item.kind != SHARD_ITEM_RECORD || !print)
            continue;
        r = cat_print_record(fl->o, &item);
        if (r < 0) {
            fl->out_err = -r;
            return;
        }
    }
    if (shard_reader_continue(f->reader) < 0) {
        uint64_t off;
        const char *why;

        shard_reader_error(f->reader, &off, &why);
        fflush(stdout);
        fprintf(stderr, "logctl: cat: %s/%s: %s at offset %" PRIu64 "; no longer following it\n",
                fl->active_path, f->name, why ? why : strerror(-r), off);
        fl->failed = true;
        drop(fl, f);
    }
}

static struct followed *find(struct follow *fl, const char *name)
{
    for (struct followed *f = fl->list; f; f = f->next)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}

/* A shard that was sealed before we could open it: all of it is new. */
static void cat_sealed(struct follow *fl, const char *producer, uint64_t id)
{
    char name[WIRE_PRODUCER_NAME_MAX + 32];
    struct shard_reader *reader = NULL;
    struct shard_item item;
    int fd, r;

    snprintf(name, sizeof(name), "%s.%016" PRIx64 ".shard", producer, id);
    fd = openat(fl->done_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return; /* merged and removed already: gone before we could see it */
    if (shard_reader_new(&reader, fd) < 0) {
        (void)close(fd); /* read-only */
        fl->failed = true;
        return;
    }
    while ((r = shard_reader_next(reader, &item)) > 0) {
        if (item.kind == SHARD_ITEM_RECORD && (r = cat_print_record(fl->o, &item)) < 0) {
            fl->out_err = -r;
            break;
        }
    }
    shard_reader_free(reader);
    (void)close(fd); /* read-only */
}

/* Starts following active/name: from its start (a new shard) or from its
 * current end (one that was there when --follow started). */
static void add(struct follow *fl, const char *name, bool from_start)
{
    struct followed *f;
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id;
    int fd;

    if (parse_tmp_name(name, producer, &id) < 0 || !cat_wants_producer(fl->o, producer) ||
        find(fl, name))
        return;
    fd = openat(fl->active_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno == ENOENT && from_start)
            cat_sealed(fl, producer, id);
        return;
    }
    f = calloc(1, sizeof(*f));
    if (!f || !(f->name = strdup(name)) || shard_reader_new(&f->reader, fd) < 0) {
        if (f)
            free(f->name);
        free(f);
        (void)close(fd); /* read-only */
        fprintf(stderr, "logctl: cat: out of memory\n");
        fl->failed = true;
        return;
    }
    f->fd = fd;
    f->id = id;
    memcpy(f->producer, producer, sizeof(producer));
    f->next = fl->list;
    fl->list = f;
    drain(fl, f, from_start);
}

/* Looks at every shard in active/: new ones are followed from their start
 * (after an inotify queue overflow) or from their end (at start). */
static int scan(struct follow *fl, bool from_start)
{
    int fd = fcntl(fl->active_fd, F_DUPFD_CLOEXEC, 0);
    struct dirent *de;
    DIR *dir;

    dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int r = -errno;
        if (fd >= 0)
            (void)close(fd); /* never read */
        return r;
    }
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
                    drain(fl, f, true);
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
                    drain(fl, f, true);
            } else if (ev->mask & (IN_MOVED_FROM | IN_DELETE)) {
                if (f) {
                    /* Sealed: the rest is still readable through our fd. */
                    drain(fl, f, true);
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
    _cleanup_free_ char *active_path = path_join(spool, "active");
    _cleanup_free_ char *done_path = path_join(spool, "done");
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
