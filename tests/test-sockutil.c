/* Unit tests for common/sockutil.c: addresses of every length around the
 * limit, and connecting to a listening, a bound-only and a missing socket. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "sockutil.h"

static void test_address_lengths(void **state)
{
    struct sockaddr_un sa;
    char path[sizeof(sa.sun_path) + 2];
    socklen_t len = 0;

    (void)state;
    assert_int_equal(unix_address("/run/x.sock", &sa, &len), 0);
    assert_int_equal(sa.sun_family, AF_UNIX);
    assert_string_equal(sa.sun_path, "/run/x.sock");
    assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + strlen("/run/x.sock") + 1);

    memset(path, 'a', sizeof(path));
    path[sizeof(sa.sun_path) - 1] = '\0'; /* the longest that fits, NUL included */
    assert_int_equal(unix_address(path, &sa, &len), 0);
    assert_int_equal(len, sizeof(sa));
    path[sizeof(sa.sun_path) - 1] = 'a';
    path[sizeof(sa.sun_path)] = '\0';
    len = 7;
    assert_int_equal(unix_address(path, &sa, &len), -ENAMETOOLONG);
    assert_int_equal(len, 7); /* untouched on failure */
}

static void test_connect(void **state)
{
    char dir[] = "/tmp/test-sockutil.XXXXXX";
    char path[64];
    struct sockaddr_un sa;
    socklen_t sa_len;
    int s, fd = -7;

    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/s", dir);

    assert_int_equal(unix_connect(path, &fd), -ENOENT);
    assert_int_equal(fd, -7);

    s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s >= 0);
    assert_int_equal(unix_address(path, &sa, &sa_len), 0);
    assert_int_equal(bind(s, (struct sockaddr *)&sa, sa_len), 0);
    /* Bound but not listening: refused, as a stale socket file is. */
    assert_int_equal(unix_connect(path, &fd), -ECONNREFUSED);
    assert_int_equal(listen(s, 4), 0);
    assert_int_equal(unix_connect(path, &fd), 0);
    assert_true(fd >= 0);
    close(fd);
    close(s);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_address_lengths),
        cmocka_unit_test(test_connect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
