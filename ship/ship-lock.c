/* The spool's shipper side before any shipping: <spool>/ship/lock, held
 * by one shipper per spool for as long as it runs (flock, so that it goes
 * with the process however it ends; the pid inside only names the holder
 * in the refusal), and the mark that the spool is shipped.
 *
 * From its first start on, a spool counts as shipped: logctl merge --delete
 * and logctl prune keep what its progress file does not show shipped. The
 * file is written at once, empty, so that this holds also while the first
 * shipper still waits for the cluster; written only after the first
 * commit, a merge --delete in that wait took the spool for one nobody
 * ships, and deleted what was not shipped yet. */
#include "ship-run.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "ship_progress.h"
#include "spool_names.h"

int ship_lock_spool(struct shipper *s, int *ret_fd)
{
    _cleanup_close_ int dir_fd = -1;
    char pid[32];
    int fd, n;

    if (mkdirat(s->spool_fd, SHIP_DIR, 0750) == 0)
        (void)fsync(s->spool_fd);
    dir_fd = openat(s->spool_fd, SHIP_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s/%s: %s", s->spool, SHIP_DIR, strerror(errno));
        return -errno;
    }
    fd = openat(dir_fd, SHIP_LOCK_FILE, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0640);
    if (fd < 0) {
        ship_say(s, SHIP_LOG_ERROR, "%s/%s/%s: %s", s->spool, SHIP_DIR, SHIP_LOCK_FILE,
                 strerror(errno));
        return -errno;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int e = errno;
        char other[32] = "";
        ssize_t got = pread(fd, other, sizeof(other) - 1, 0);

        if (got > 0)
            other[got] = '\0';
        other[strcspn(other, "\n")] = '\0';
        (void)close(fd);
        if (e == EWOULDBLOCK) {
            ship_say(s, SHIP_LOG_ERROR,
                     "%s: another logctl ship%s%s is shipping this spool (%s/%s/%s is locked); "
                     "one shipper per spool",
                     s->spool, other[0] ? " (pid " : "", other[0] ? other : "", s->spool, SHIP_DIR,
                     SHIP_LOCK_FILE);
            return -EBUSY;
        }
        ship_say(s, SHIP_LOG_ERROR, "%s/%s/%s: flock: %s", s->spool, SHIP_DIR, SHIP_LOCK_FILE,
                 strerror(e));
        return -e;
    }
    n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
    if (ftruncate(fd, 0) == 0)
        (void)!pwrite(fd, pid, (size_t)n, 0); /* only a hint for the message above */
    *ret_fd = fd;
    return 0;
}

int ship_mark_spool_shipped(struct shipper *s)
{
    struct positions_entry none;
    int r;

    if (faccessat(s->spool_fd, SHIP_DIR "/" SHIP_PROGRESS_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0 ||
        errno != ENOENT)
        return 0; /* there (a damaged one is said when it is read) */
    r = ship_progress_store(s->spool_fd, &none, 0);
    if (r < 0)
        ship_say(s, SHIP_LOG_ERROR, "%s/%s/%s: cannot be written: %s", s->spool, SHIP_DIR,
                 SHIP_PROGRESS_FILE, strerror(-r));
    return r;
}
