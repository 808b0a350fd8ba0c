/* Unit tests for common/fileutil.c: open_regular_at opens regular files and
 * refuses everything else without blocking, naming the type it found. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "fileutil.h"

struct tmp {
    char dir[64];
    int dfd;
};

static int setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    strcpy(t->dir, "/tmp/test-fileutil.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    t->dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(t->dfd >= 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tmp *t = *state;
    const char *names[] = { "file", "fifo", "link", "sock" };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        (void)unlinkat(t->dfd, names[i], 0); /* not every test makes each */
    (void)unlinkat(t->dfd, "dir", AT_REMOVEDIR);
    close(t->dfd);
    assert_int_equal(rmdir(t->dir), 0);
    free(t);
    return 0;
}

static void test_regular_file_opens_blocking(void **state)
{
    struct tmp *t = *state;
    int fd = -1;
    char buf[8];

    int w = openat(t->dfd, "file", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    assert_true(w >= 0);
    assert_int_equal(write_all(w, "hello", 5), 0);
    close(w);

    assert_int_equal(open_regular_at(t->dfd, "file", O_NOFOLLOW, &fd, NULL), 0);
    assert_true(fd >= 0);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
    assert_int_equal(read_full(fd, buf, sizeof(buf)), 5);
    assert_memory_equal(buf, "hello", 5);
    close(fd);
}

/* Opening a FIFO for reading blocks until a writer comes; this must return
 * at once (the test would hang otherwise, and meson's timeout fails it). */
static void test_fifo_is_refused_without_blocking(void **state)
{
    struct tmp *t = *state;
    int fd = -7;
    mode_t mode = 0;

    assert_int_equal(mkfifoat(t->dfd, "fifo", 0600), 0);
    assert_int_equal(open_regular_at(t->dfd, "fifo", 0, &fd, &mode), -EBADFD);
    assert_int_equal(fd, -7); /* untouched on failure */
    assert_true(S_ISFIFO(mode));
    assert_string_equal(file_type_name(mode), "FIFO");
}

static void test_directory_socket_and_symlink_are_refused(void **state)
{
    struct tmp *t = *state;
    int fd = -7;
    mode_t mode = 0;
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int s;

    assert_int_equal(mkdirat(t->dfd, "dir", 0700), 0);
    assert_int_equal(open_regular_at(t->dfd, "dir", 0, &fd, &mode), -EISDIR);
    assert_string_equal(file_type_name(mode), "directory");

    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    assert_true(snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", t->dir) <
                (int)sizeof(sa.sun_path));
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(open_regular_at(t->dfd, "sock", 0, &fd, &mode), -ENXIO);
    close(s);

    assert_int_equal(symlinkat("/dev/null", t->dfd, "link"), 0);
    assert_int_equal(open_regular_at(t->dfd, "link", O_NOFOLLOW, &fd, &mode), -ELOOP);
    assert_int_equal(open_regular_at(t->dfd, "link", 0, &fd, &mode), -EBADFD);
    assert_string_equal(file_type_name(mode), "character device");
    assert_int_equal(fd, -7);

    assert_int_equal(open_regular_at(t->dfd, "missing", 0, &fd, &mode), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_regular_file_opens_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_is_refused_without_blocking, setup, teardown),
        cmocka_unit_test_setup_teardown(test_directory_socket_and_symlink_are_refused, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
