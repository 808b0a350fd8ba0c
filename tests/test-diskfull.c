/* A full disk, for real: the spool on a small tmpfs and on a small ext4
 * loop device, filled to the last block while producers connect, and a
 * tmpfs with no inode left for a new shard's file. Checked
 * each time: a producer whose shard cannot be written gets an ENOSPC error
 * frame, the daemon stays up and serves the others, nothing invalid ever
 * lands in done/ (logctl verify --spool passes at every step), and once
 * space is freed everything works again: logctl merge and logctl cat
 * --spool succeed and every acknowledged record is there exactly once.
 *
 * Mounting needs root and mkfs.ext4. Without them the program prints why
 * and exits 77 (skipped). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ackboard.h"
#include "harness.h"
#include "logshard.h"
#include "shard_format.h"
#include "wire.h"

/* The filesystem under the spool. */
struct small_fs {
    char *mnt;
    char *filler; /* a file that takes every free block, given back later */
    unsigned long bsize;
    bool mounted;
};

static struct small_fs fs_state;

/* The path of a program in $PATH or the sbin directories, or NULL. */
static char *which(const char *name)
{
    const char *env = getenv("PATH");
    char *dirs, *save = NULL, *found = NULL;

    if (asprintf(&dirs, "%s:/usr/sbin:/sbin", env ? env : "/usr/bin:/bin") < 0)
        return NULL;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *path = harness_path(d, name);

        if (access(path, X_OK) == 0)
            found = path;
        else
            free(path);
    }
    free(dirs);
    return found;
}

static int run_quiet(const char *const *argv, const char *err_path)
{
    return harness_run(argv, NULL, err_path, 60000);
}

/* Mounts a tmpfs with tmpfs_options (NULL: 4 MiB), or an ext4 of 8 MiB
 * with 1 KiB blocks and no blocks reserved for root (the daemon runs as
 * root here and would use them), at <dir>/small, and points the spool into
 * it. */
static void mount_small(struct harness *h, struct small_fs *fs, bool ext4,
                        const char *tmpfs_options)
{
    struct statvfs sv;

    fs->mnt = harness_path(h->dir, "small");
    fs->filler = harness_path(fs->mnt, "filler");
    assert_int_equal(mkdir(fs->mnt, 0755), 0);
    if (ext4) {
        char *img = harness_path(h->dir, "small.img");
        char *err = harness_path(h->dir, "mount.err");
        char *mkfs_path = which("mkfs.ext4"), *mount_path = which("mount");
        const char *mkfs[] = { mkfs_path, "-q", "-F", "-m", "0", "-b", "1024", img, NULL };
        const char *mnt[] = { mount_path, "-o", "loop", img, fs->mnt, NULL };
        int fd = open(img, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, 8 << 20), 0);
        close(fd);
        int st = run_quiet(mkfs, err);

        if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
            st = run_quiet(mnt, err);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            size_t len;

            fail_msg("mkfs.ext4 or mount -o loop failed: %s", harness_slurp(err, &len));
        }
        free(mkfs_path);
        free(mount_path);
        free(img);
        free(err);
    } else {
        assert_int_equal(
            mount("tmpfs", fs->mnt, "tmpfs", 0, tmpfs_options ? tmpfs_options : "size=4m"), 0);
    }
    fs->mounted = true;
    assert_int_equal(statvfs(fs->mnt, &sv), 0);
    fs->bsize = sv.f_bsize;
    free(h->spool);
    h->spool = harness_path(fs->mnt, "spool");
    fs_state = *fs;
}

/* Appends to the filler until not one more byte fits, then syncs it so
 * that ext4 has allocated every block it holds. */
static void fill(struct small_fs *fs)
{
    static char block[64 * 1024];
    int fd = open(fs->filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    size_t chunk = sizeof(block);
    struct statvfs sv;

    assert_true(fd >= 0);
    while (chunk > 0) {
        ssize_t n = write(fd, block, chunk);

        if (n < 0) {
            assert_int_equal(errno, ENOSPC);
            chunk /= 2;
        }
    }
    assert_int_equal(fsync(fd), 0);
    close(fd);
    assert_int_equal(statvfs(fs->mnt, &sv), 0);
    assert_int_equal(sv.f_bavail, 0);
}

/* Gives back blocks whole blocks of the filler. */
static void free_blocks(struct small_fs *fs, unsigned blocks)
{
    struct stat st;
    off_t size;

    assert_int_equal(stat(fs->filler, &st), 0);
    size = st.st_size / (off_t)fs->bsize * (off_t)fs->bsize - (off_t)blocks * (off_t)fs->bsize;
    assert_true(size >= 0);
    assert_int_equal(truncate(fs->filler, size), 0);
}

static void unmount_small(struct small_fs *fs)
{
    if (fs->mounted && fs->mnt)
        (void)umount2(fs->mnt, MNT_DETACH); /* a test that failed half-way */
    fs->mounted = false;
    fs_state.mounted = false;
}

static int teardown(void **state)
{
    unmount_small(&fs_state);
    free(fs_state.mnt);
    free(fs_state.filler);
    memset(&fs_state, 0, sizeof(fs_state));
    return harness_teardown(state);
}

/* logctl with args; returns its exit code (the test fails when it does not
 * exit normally, e.g. hangs past the harness's deadline). */
static int logctl(struct harness *h, const char *const *args, const char *tag)
{
    const char *argv[8] = { harness_logctl() };
    char *out = harness_path(h->dir, tag);
    int status;
    size_t i;

    for (i = 0; args[i]; i++)
        argv[i + 1] = args[i];
    argv[i + 1] = NULL;
    status = harness_run(argv, out, NULL, 60000);
    free(out);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Nothing invalid in done/: logctl verify reads every file there. */
static void assert_done_valid(struct harness *h, const char *when)
{
    const char *args[] = { "verify", "--spool", h->spool, NULL };
    size_t len;

    if (logctl(h, args, "verify.out") != 0)
        fail_msg("logctl verify --spool fails %s:\n%s", when,
                 harness_slurp(harness_path(h->dir, "verify.out"), &len));
}

/* Entries of spool/<sub> whose names start with prefix. */
static size_t count_prefixed(struct harness *h, const char *sub, const char *prefix)
{
    char *path = harness_path(h->spool, sub);
    char cmd[512];
    FILE *p;
    size_t n = 0;
    char line[512];

    snprintf(cmd, sizeof(cmd), "ls -a '%s'", path);
    p = popen(cmd, "r");
    assert_non_null(p);
    while (fgets(line, sizeof(line), p))
        n += strncmp(line, prefix, strlen(prefix)) == 0;
    pclose(p);
    free(path);
    return n;
}

static void assert_alive(struct harness *h)
{
    int status;

    assert_int_equal(waitpid(h->daemon, &status, WNOHANG), 0);
}

/* The producer "early", connected before the file system fills; it stays
 * connected while the others come and go. */
static logshard *connect_early(struct harness *h)
{
    logshard_opts opts = { .socket_path = h->sock, .producer = "early" };
    logshard *early = NULL;

    assert_int_equal(logshard_connect(&early, &opts), 0);
    return early;
}

/* Records from .. to - 1 of "early", appended and acknowledged. */
static void send_early(logshard *early, uint64_t from, uint64_t to)
{
    char rec[512];

    for (uint64_t i = from; i < to; i++) {
        size_t len = harness_make_record(rec, sizeof(rec), "early", i, 100);

        assert_int_equal(logshard_append(early, rec, len), 0);
    }
    assert_int_equal(logshard_flush(early, 10000), 0);
}

/* A producer of the raw protocol named name sends three records: the
 * ERROR frame itself must say ENOSPC, name the shard (shard_needle) and
 * the cause, and nothing may be acknowledged. */
static void expect_raw_enospc(struct harness *h, const char *name, const char *shard_needle)
{
    static const char *const recs[] = { "raw 0", "raw 1", "raw 2" };
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    unsigned char frame[256];
    uint64_t raw_acked = UINT64_MAX;
    int fd = harness_raw_connect(h->sock);
    uint32_t code;

    harness_raw_hello(fd, name);
    harness_raw_send(fd, frame, harness_encode_append(frame, recs, 3));
    code = harness_raw_read_until_error(fd, msg, sizeof(msg), &raw_acked);
    assert_int_equal(code, ENOSPC);
    if (!strstr(msg, shard_needle) || !strstr(msg, "No space left on device"))
        fail_msg("the ERROR frame does not name the shard and the cause: %s", msg);
    assert_true(raw_acked == UINT64_MAX || raw_acked == 0);
    close(fd);
}

static void run_full_disk(struct harness *h, bool ext4)
{
    enum { FULL = 4, FEW = 4 };
    const char *extra[] = { "--fsync", "batch", NULL };
    char names[MAX_PRODUCERS][32];
    uint64_t acked[MAX_PRODUCERS] = { 0 };
    struct ack_board board;
    struct small_fs fs = { 0 };
    logshard *early;
    unsigned n = 0;
    size_t len;
    char *text;
    int st;

    mount_small(h, &fs, ext4, NULL);
    harness_start(h, extra);
    board_open(&board, h);

    /* A producer that came before the disk filled; it stays connected. */
    early = connect_early(h);
    send_early(early, 0, 20);
    snprintf(names[n], sizeof(names[n]), "early");
    acked[n++] = 20;

    fill(&fs);

    /* Producers that connect now: their shard's header cannot be written.
     * Each gets ENOSPC, and no file of theirs is left anywhere. */
    for (unsigned p = 0; p < FULL; p++) {
        snprintf(names[n], sizeof(names[n]), "full-%u", p);
        st = reap(spawn(h->sock, names[n], n, board.fd, 50, 200, 10));
        assert_int_equal(st, 10 + ENOSPC);
        acked[n] = board_get(&board, n);
        assert_int_equal(acked[n], 0);
        n++;
    }
    /* The same through the raw protocol: the ERROR frame itself. */
    expect_raw_enospc(h, "rawfull", "active/rawfull.");
    assert_alive(h);
    assert_int_equal(count_prefixed(h, "done", "full-"), 0);
    assert_int_equal(count_prefixed(h, "active", "full-"), 0);
    assert_int_equal(count_prefixed(h, "done", "rawfull."), 0);
    assert_int_equal(count_prefixed(h, "active", "rawfull."), 0);
    /* The line follows the removal, so it may come a moment after it. */
    assert_true(harness_wait_log(h, "removed active/full-0.", 10000));
    assert_true(harness_wait_log(h, "instead of sealing it: its header was never written whole (No "
                                    "space left on device)",
                                 10000));
    assert_done_valid(h, "after producers connected to a full disk");

    /* A first write bigger than the one block left (a record of 4090
     * bytes after the header): it comes back short, and the shard is
     * removed rather than sealed. */
    free_blocks(&fs, 1);
    snprintf(names[n], sizeof(names[n]), "short-header");
    st = reap(spawn(h->sock, names[n], n, board.fd, 1, 4090, 1));
    assert_int_equal(st, 10 + ENOSPC);
    acked[n] = board_get(&board, n);
    assert_int_equal(acked[n], 0);
    assert_int_equal(count_prefixed(h, "done", "short-header."), 0);
    assert_int_equal(count_prefixed(h, "active", "short-header."), 0);
    n++;
    fill(&fs);

    /* A shard that fills its one free block exactly: its records fit, its
     * seal trailer does not, so it is sealed without one, and valid. The
     * header of "trailerless" is a version 3 header with its 11 bytes of
     * name, its one record 16 + the rest of the block. */
    free_blocks(&fs, 1);
    snprintf(names[n], sizeof(names[n]), "trailerless");
    assert_int_equal(reap(spawn(h->sock, names[n], n, board.fd, 1,
                                fs.bsize - shard_header_size_v(SHARD_FORMAT_VERSION_STREAM, 11) -
                                    SHARD_RECORD_HEADER,
                                1)),
                     0);
    acked[n] = board_get(&board, n);
    assert_int_equal(acked[n], 1);
    n++;
    /* The seal follows the producer's close. */
    assert_true(harness_wait_log(h, "sealed done/trailerless.", 10000));
    assert_true(harness_log_has(h, "active/trailerless."));
    assert_true(harness_log_has(h, "cannot write its seal trailer (No space left on device); sealing "
                           "it without one"));
    assert_done_valid(h, "after a shard was sealed without its trailer");
    fill(&fs);

    /* Producers that connect when only a few blocks are left: the header
     * and the first records fit, later writes or the seal trailer do not.
     * Whatever was acknowledged is kept in a valid shard. */
    for (unsigned k = 0; k < FEW; k++) {
        free_blocks(&fs, k + 1);
        snprintf(names[n], sizeof(names[n]), "few-%u", k);
        st = reap(spawn(h->sock, names[n], n, board.fd, 100, 60 + 90 * k, 1));
        if (st != 0 && st != 10 + ENOSPC)
            fail_msg("producer %s exited %d", names[n], st);
        acked[n] = board_get(&board, n);
        n++;
        assert_alive(h);
        assert_done_valid(h, "after a producer filled the last blocks");
        fill(&fs);
    }
    fprintf(stderr, "%s: %" PRIu64 ", %" PRIu64 ", %" PRIu64 " and %" PRIu64
            " records acknowledged with 1 to 4 blocks free\n",
            ext4 ? "ext4" : "tmpfs", acked[n - 4], acked[n - 3], acked[n - 2], acked[n - 1]);

    /* Space again: the producer that waited carries on, a new one is
     * served in full. */
    assert_int_equal(unlink(fs.filler), 0);
    send_early(early, 20, 40);
    acked[0] = 40;
    logshard_close(early);
    snprintf(names[n], sizeof(names[n]), "after");
    assert_int_equal(reap(spawn(h->sock, names[n], n, board.fd, 300, 150, 20)), 0);
    acked[n] = board_get(&board, n);
    assert_int_equal(acked[n], 300);
    n++;
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    assert_done_valid(h, "at the end");
    {
        const char *args[] = { "cat", "--spool", h->spool, NULL };

        assert_int_equal(logctl(h, args, "cat-spool.out"), 0);
    }
    text = harness_merge_and_cat(h, ext4 ? "ext4.lsm" : "tmpfs.lsm", &len);
    check_exactly_once(text, names, acked, n, NULL);
    free(text);
    board_close(&board);
    unmount_small(&fs);
    free(fs.mnt);
    free(fs.filler);
    fs_state.mnt = fs_state.filler = NULL;
}

static void test_full_tmpfs(void **state)
{
    run_full_disk(*state, false);
}

static void test_full_ext4(void **state)
{
    run_full_disk(*state, true);
}

/* No inode left: the file of a new producer's shard cannot be created. The
 * producer gets an ERROR frame that names the file and the cause, nothing
 * of it is left in the spool, and a producer whose shard exists carries on
 * meanwhile, acknowledged as before. Once an inode is free, a new producer
 * is served in full. */
static void test_full_inodes(void **state)
{
    struct harness *h = *state;
    const char *extra[] = { "--fsync", "batch", NULL };
    char names[MAX_PRODUCERS][32];
    uint64_t acked[MAX_PRODUCERS] = { 0 };
    struct ack_board board;
    struct small_fs fs = { 0 };
    logshard *early;
    char *fillers, *path, *text;
    unsigned n = 0, filled = 0;
    size_t len;
    int fd;

    mount_small(h, &fs, false, "size=4m,nr_inodes=64");
    harness_start(h, extra);
    board_open(&board, h);

    early = connect_early(h);
    send_early(early, 0, 20);
    snprintf(names[n], sizeof(names[n]), "early");
    acked[n++] = 20;

    /* Every inode left goes to empty files. */
    fillers = harness_path(fs.mnt, "fillers");
    assert_int_equal(mkdir(fillers, 0755), 0);
    for (;; filled++) {
        if (asprintf(&path, "%s/%u", fillers, filled) < 0)
            fail_msg("out of memory");
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        free(path);
        if (fd < 0) {
            assert_int_equal(errno, ENOSPC);
            break;
        }
        close(fd);
    }
    assert_true(filled > 0);

    /* The raw protocol: the ERROR frame itself. */
    expect_raw_enospc(h, "noinode", "cannot create shard active/noinode.");
    /* Through the library: the call that waits for the records fails. */
    snprintf(names[n], sizeof(names[n]), "noinode-lib");
    assert_int_equal(reap(spawn(h->sock, names[n], n, board.fd, 50, 200, 10)), 10 + ENOSPC);
    acked[n] = board_get(&board, n);
    assert_int_equal(acked[n], 0);
    n++;
    assert_true(harness_wait_log(h, "cannot create active/noinode.", 10000));
    assert_alive(h);
    assert_int_equal(count_prefixed(h, "active", "noinode"), 0);
    assert_int_equal(count_prefixed(h, "done", "noinode"), 0);

    /* The producer whose shard is there was never in the way. */
    send_early(early, 20, 40);
    acked[0] = 40;
    logshard_close(early);

    /* An inode again: a new producer is served in full. */
    if (asprintf(&path, "%s/0", fillers) < 0)
        fail_msg("out of memory");
    assert_int_equal(unlink(path), 0);
    free(path);
    snprintf(names[n], sizeof(names[n]), "after");
    assert_int_equal(reap(spawn(h->sock, names[n], n, board.fd, 300, 150, 20)), 0);
    acked[n] = board_get(&board, n);
    assert_int_equal(acked[n], 300);
    n++;
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    /* Merging needs inodes of its own. */
    {
        char cmd[512];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fillers);
        assert_int_equal(system(cmd), 0);
    }
    assert_done_valid(h, "at the end");
    text = harness_merge_and_cat(h, "inodes.lsm", &len);
    check_exactly_once(text, names, acked, n, NULL);
    free(text);
    free(fillers);
    board_close(&board);
}

/* Whether this machine lets the test mount what it needs; prints why not. */
static bool can_mount(void)
{
    char dir[] = "/tmp/test-diskfull.XXXXXX";
    bool ok;

    if (geteuid() != 0) {
        fprintf(stderr, "test-diskfull: not root, so it cannot mount a tmpfs or a loop device\n");
        return false;
    }
    {
        char *mkfs = which("mkfs.ext4"), *mnt = which("mount");

        ok = mkfs && mnt;
        free(mkfs);
        free(mnt);
        if (!ok) {
            fprintf(stderr, "test-diskfull: mkfs.ext4 or mount(8) is missing\n");
            return false;
        }
    }
    if (!mkdtemp(dir))
        return false;
    ok = mount("tmpfs", dir, "tmpfs", 0, "size=1m") == 0;
    if (!ok)
        fprintf(stderr, "test-diskfull: cannot mount a tmpfs: %s\n", strerror(errno));
    else
        (void)umount2(dir, MNT_DETACH);
    (void)rmdir(dir);
    return ok;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_full_tmpfs, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_ext4, harness_setup, teardown),
        cmocka_unit_test_setup_teardown(test_full_inodes, harness_setup, teardown),
    };

    if (!can_mount())
        return 77;
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
