/* sync-methods: what it costs on this machine to make the appends of
 * several files durable together, by each way Linux offers.
 *
 * Each round appends --bytes to each of --files files (the flush of one
 * producer each under fsync = batch), then makes all of them durable by one
 * method, and times that step, from the last append to the moment every
 * file's data is durable. The methods:
 *
 *   lone           one file only: its append and fdatasync (the reference)
 *   sequential     fdatasync of each file, one after the other
 *   concurrent     fdatasync of every file at once, one thread each (what
 *                  logshardd's io_uring does under fsync = batch)
 *   writeback      sync_file_range(SYNC_FILE_RANGE_WRITE) on every file to
 *                  start write-back, then the concurrent fdatasyncs
 *   syncfs         one syncfs(2) of the file system (everything dirty on it,
 *                  others' files included)
 *   overwrite      the files were filled with zeros and synced beforehand,
 *                  so an "append" changes no metadata, then the concurrent
 *                  fdatasyncs
 *   one-file       every file's bytes appended to one shared file instead,
 *                  and one fdatasync of it (a shared log's cost)
 *   one-flush      files prepared as for overwrite; the new bytes of every
 *                  file written out and waited for with sync_file_range
 *                  (which neither writes metadata nor flushes the disk's
 *                  cache), then one fdatasync of the first file, whose cache
 *                  flush makes every completed write durable. Durable only
 *                  because the overwrites change no metadata (no size, no
 *                  block allocation) and the file system sits on one device
 *   direct         files prepared as for overwrite; the new bytes of every
 *                  file written with O_DIRECT (from the start of the block
 *                  they begin in, the block's earlier bytes again, to the
 *                  end of the block they end in), all at once through an
 *                  io_uring, then one fdatasync of the first file as in
 *                  one-flush: the data goes from the buffer to the disk,
 *                  with no page cache and no write-back to wait for
 *   dsync          as direct, but each write with RWF_DSYNC and no
 *                  fdatasync after them: on a disk without FUA each write
 *                  then flushes the cache on its own, one flush per file
 *
 * Usage: sync-methods [--dir DIR] [--files P] [--bytes B] [--rounds R]
 *                     [--method NAME]...
 * Prints, per method, the p50, p99 and max of the step in microseconds, its
 * p99 over lone's, and the CPU time of the whole round (append and step,
 * every thread of the process, io_uring's workers included) in
 * microseconds per file. Run it on the spool's file system, with nothing
 * else writing there. */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 1024
#define MAX_METHODS 16
#define BLOCK 4096u

struct sync_job {
    int fd;
    bool start_writeback;
    int err;
};

struct files {
    int fd[MAX_FILES];
    int direct_fd[MAX_FILES]; /* direct: the same file opened O_DIRECT */
    uint64_t end[MAX_FILES];
    int shared_fd;
    uint64_t shared_end;
    int dir_fd;
};

static const char *method_names[] = {
    "lone", "sequential", "concurrent", "writeback", "syncfs", "overwrite", "one-file",
    "one-flush", "direct", "dsync",
};
enum method {
    LONE, SEQUENTIAL, CONCURRENT, WRITEBACK, SYNCFS, OVERWRITE, ONE_FILE, ONE_FLUSH, DIRECT,
    DSYNC, N_METHODS
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *what)
{
    fprintf(stderr, "sync-methods: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *sync_one(void *arg)
{
    struct sync_job *j = arg;

    if (j->start_writeback && sync_file_range(j->fd, 0, 0, SYNC_FILE_RANGE_WRITE) < 0)
        j->err = errno;
    if (fdatasync(j->fd) < 0)
        j->err = errno;
    return NULL;
}

/* fdatasync of the first n files at once, one thread each; the threads are
 * started for each round, as a ring's requests would be submitted. */
static void sync_concurrent(const struct files *f, unsigned n, bool writeback)
{
    pthread_t t[MAX_FILES];
    struct sync_job j[MAX_FILES];

    for (unsigned i = 0; i < n; i++) {
        j[i] = (struct sync_job){ .fd = f->fd[i], .start_writeback = writeback };
        if (pthread_create(&t[i], NULL, sync_one, &j[i]) != 0)
            die("pthread_create");
    }
    for (unsigned i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        if (j[i].err) {
            errno = j[i].err;
            die("fdatasync");
        }
    }
}

static void append(int fd, uint64_t *end, const void *buf, size_t len)
{
    ssize_t n = pwrite(fd, buf, len, (off_t)*end);

    if (n != (ssize_t)len)
        die("pwrite");
    *end += len;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static void open_files(struct files *f, const char *dir, unsigned n, enum method m,
                       size_t bytes, unsigned rounds)
{
    char name[64];
    void *zeros;

    f->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (f->dir_fd < 0)
        die(dir);
    for (unsigned i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "sync-methods.%d.%u", (int)getpid(), i);
        f->fd[i] = openat(f->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (f->fd[i] < 0)
            die("openat");
        f->direct_fd[i] = -1;
        if (m == DIRECT || m == DSYNC) {
            f->direct_fd[i] = openat(f->dir_fd, name, O_RDWR | O_DIRECT | O_CLOEXEC);
            if (f->direct_fd[i] < 0)
                die("openat with O_DIRECT");
        }
        (void)unlinkat(f->dir_fd, name, 0); /* gone when closed */
        f->end[i] = 0;
        if (m == OVERWRITE || m == ONE_FLUSH || m == DIRECT || m == DSYNC) {
            size_t total = bytes * (rounds + 1) + BLOCK;

            zeros = calloc(1, total);
            if (!zeros)
                die("calloc");
            append(f->fd[i], &f->end[i], zeros, total);
            free(zeros);
            if (fsync(f->fd[i]) < 0)
                die("fsync");
            f->end[i] = 0;
        }
    }
    snprintf(name, sizeof(name), "sync-methods.%d.shared", (int)getpid());
    f->shared_fd = openat(f->dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->shared_fd < 0)
        die("openat");
    (void)unlinkat(f->dir_fd, name, 0);
    f->shared_end = 0;
    if (fsync(f->dir_fd) < 0)
        die("fsync of the directory");
}

static void close_files(struct files *f, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        (void)close(f->fd[i]);
        if (f->direct_fd[i] >= 0)
            (void)close(f->direct_fd[i]);
    }
    (void)close(f->shared_fd);
    (void)close(f->dir_fd);
}

static uint64_t cpu_us(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) < 0)
        die("getrusage");
    return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
           (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* direct: each file's block-aligned span around its new bytes, staged in
 * blk[i] (the bytes before them in their first block are the file's own,
 * 'x' as every byte appended; after them, zeros up to the block's end, as
 * the prepared file holds), written at once through the ring. */
static void write_direct(struct io_uring *ring, const struct files *f, unsigned n,
                         unsigned char **blk, const uint64_t *from, size_t bytes, int rw_flags)
{
    struct io_uring_cqe *cqe;

    for (unsigned i = 0; i < n; i++) {
        uint64_t start = from[i] / BLOCK * BLOCK;
        uint64_t end = (from[i] + bytes + BLOCK - 1) / BLOCK * BLOCK;
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

        if (!sqe)
            die("io_uring_get_sqe");
        memset(blk[i], 'x', from[i] + bytes - start);
        memset(blk[i] + (from[i] + bytes - start), 0, end - (from[i] + bytes));
        io_uring_prep_write(sqe, f->direct_fd[i], blk[i], (unsigned)(end - start), start);
        sqe->rw_flags = rw_flags;
    }
    if (io_uring_submit(ring) < 0)
        die("io_uring_submit");
    for (unsigned i = 0; i < n; i++) {
        int r = io_uring_wait_cqe(ring, &cqe);

        if (r < 0) {
            errno = -r;
            die("io_uring_wait_cqe");
        }
        if (cqe->res < 0) {
            errno = -cqe->res;
            die("O_DIRECT write");
        }
        io_uring_cqe_seen(ring, cqe);
    }
}

/* Runs one method for rounds rounds; returns the p99 in microseconds. */
static double run_method(enum method m, const char *dir, unsigned files, size_t bytes,
                         unsigned rounds, double lone_p99)
{
    unsigned n = m == LONE ? 1 : files;
    uint64_t *lat = calloc(rounds, sizeof(*lat));
    unsigned char *buf = malloc(bytes);
    unsigned char *blk[MAX_FILES];
    uint64_t from[MAX_FILES];
    struct io_uring ring;
    struct files f;
    uint64_t cpu0;
    double p50, p99, max, cpu_per_file;

    if (!lat || !buf)
        die("malloc");
    memset(buf, 'x', bytes);
    if (m == DIRECT || m == DSYNC) {
        int r = io_uring_queue_init(n < 8 ? 8 : n, &ring, 0);

        if (r < 0) {
            errno = -r;
            die("io_uring_queue_init");
        }
        for (unsigned i = 0; i < n; i++)
            if (posix_memalign((void **)&blk[i], BLOCK, bytes + 2 * BLOCK) != 0)
                die("posix_memalign");
    }
    open_files(&f, dir, n, m, bytes, rounds);
    cpu0 = cpu_us();
    for (unsigned r = 0; r < rounds; r++) {
        uint64_t t0;

        if (m == DIRECT || m == DSYNC) {
            /* Staged in write_direct; the file's end moves on. */
            for (unsigned i = 0; i < n; i++) {
                from[i] = f.end[i];
                f.end[i] += bytes;
            }
        } else if (m == ONE_FILE) {
            for (unsigned i = 0; i < n; i++)
                append(f.shared_fd, &f.shared_end, buf, bytes);
        } else {
            for (unsigned i = 0; i < n; i++)
                append(f.fd[i], &f.end[i], buf, bytes);
        }
        t0 = now_ns();
        switch (m) {
        case LONE:
        case SEQUENTIAL:
            for (unsigned i = 0; i < n; i++)
                if (fdatasync(f.fd[i]) < 0)
                    die("fdatasync");
            break;
        case CONCURRENT:
        case OVERWRITE:
            sync_concurrent(&f, n, false);
            break;
        case WRITEBACK:
            sync_concurrent(&f, n, true);
            break;
        case SYNCFS:
            if (syncfs(f.dir_fd) < 0)
                die("syncfs");
            break;
        case ONE_FILE:
            if (fdatasync(f.shared_fd) < 0)
                die("fdatasync");
            break;
        case ONE_FLUSH:
            /* Every file's write started first, then each waited for. */
            for (unsigned i = 0; i < n; i++)
                if (sync_file_range(f.fd[i], (off_t)(f.end[i] - bytes), (off_t)bytes,
                                    SYNC_FILE_RANGE_WRITE) < 0)
                    die("sync_file_range");
            for (unsigned i = 0; i < n; i++)
                if (sync_file_range(f.fd[i], (off_t)(f.end[i] - bytes), (off_t)bytes,
                                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                        SYNC_FILE_RANGE_WAIT_AFTER) < 0)
                    die("sync_file_range");
            if (fdatasync(f.fd[0]) < 0)
                die("fdatasync");
            break;
        case DIRECT:
            write_direct(&ring, &f, n, blk, from, bytes, 0);
            if (fdatasync(f.fd[0]) < 0)
                die("fdatasync");
            break;
        case DSYNC:
            write_direct(&ring, &f, n, blk, from, bytes, RWF_DSYNC);
            break;
        case N_METHODS:
            break;
        }
        lat[r] = now_ns() - t0;
    }
    cpu_per_file = (double)(cpu_us() - cpu0) / rounds / n;
    close_files(&f, n);
    if (m == DIRECT || m == DSYNC) {
        io_uring_queue_exit(&ring);
        for (unsigned i = 0; i < n; i++)
            free(blk[i]);
    }
    qsort(lat, rounds, sizeof(*lat), cmp_u64);
    p50 = (double)lat[rounds / 2] / 1000.0;
    p99 = (double)lat[(size_t)((rounds - 1) * 0.99)] / 1000.0;
    max = (double)lat[rounds - 1] / 1000.0;
    printf("%-11s %5u %9.0f %9.0f %9.0f %8.2f %9.1f\n", method_names[m], n, p50, p99, max,
           lone_p99 > 0 ? p99 / lone_p99 : 1.0, cpu_per_file);
    fflush(stdout);
    free(lat);
    free(buf);
    return p99;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "dir", required_argument, NULL, 'd' },   { "files", required_argument, NULL, 'f' },
        { "bytes", required_argument, NULL, 'b' }, { "rounds", required_argument, NULL, 'r' },
        { "method", required_argument, NULL, 'm' }, { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *dir = "/var/tmp";
    unsigned files = 8, rounds = 500, n_methods = 0;
    size_t bytes = 64 * 144;
    enum method methods[MAX_METHODS];
    double lone_p99;
    int c;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': dir = optarg; break;
        case 'f': files = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'b': bytes = (size_t)strtoull(optarg, NULL, 10); break;
        case 'r': rounds = (unsigned)strtoul(optarg, NULL, 10); break;
        case 'm': {
            unsigned k;

            for (k = 0; k < N_METHODS && strcmp(optarg, method_names[k]) != 0; k++)
                ;
            if (k == N_METHODS || n_methods == MAX_METHODS) {
                fprintf(stderr, "sync-methods: unknown method '%s'\n", optarg);
                return 2;
            }
            methods[n_methods++] = (enum method)k;
            break;
        }
        case 'h':
            printf("Usage: sync-methods [--dir DIR] [--files P] [--bytes B] [--rounds R] "
                   "[--method NAME]...\nmethods: lone sequential concurrent writeback syncfs "
                   "overwrite one-file one-flush direct (default: all)\n");
            return 0;
        default: return 2;
        }
    }
    if (files < 1 || files > MAX_FILES || bytes < 1 || rounds < 2) {
        fprintf(stderr, "sync-methods: --files 1..%d, --bytes and --rounds at least 1 and 2\n",
                MAX_FILES);
        return 2;
    }
    if (n_methods == 0)
        for (unsigned k = 0; k < N_METHODS; k++)
            methods[n_methods++] = (enum method)k;
    printf("%u files, %zu bytes appended to each per round, %u rounds, in %s\n", files, bytes,
           rounds, dir);
    printf("%-11s %5s %9s %9s %9s %8s %9s\n", "method", "files", "p50 us", "p99 us", "max us",
           "p99/lone", "CPU us/f");
    lone_p99 = run_method(LONE, dir, files, bytes, rounds, 0);
    for (unsigned k = 0; k < n_methods; k++)
        if (methods[k] != LONE)
            (void)run_method(methods[k], dir, files, bytes, rounds, lone_p99);
    return 0;
}
