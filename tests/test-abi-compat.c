/* A program of release 0.1.0 against this library. It is compiled against
 * tests/test-abi-0.1/logshard.h, a verbatim copy of the header as 0.1.0
 * installed it, and linked with the shared library of this build, so it
 * binds to the LOGSHARD_1 symbols exactly as a binary built back then
 * (tests/test-abi.sh checks that it does) and passes the logshard_opts of
 * that header. Against the real daemon, every call of 0.1.0 must still do
 * what that header promises. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
/* By its path, so that no include directory can put today's header first. */
#include "test-abi-0.1/logshard.h"

#define RECORDS 2000

static void test_release_0_1_program(void **state)
{
    struct harness *h = *state;
    /* Filled the way 0.1.0's documentation shows, every field set. */
    logshard_opts opts = { .socket_path = h->sock, .producer = "compat-0.1",
                           .buffer_bytes = 4096, .flags = LOGSHARD_NONBLOCK };
    logshard *ls = NULL;
    char rec[128], *text, *line, *save = NULL;
    uint64_t taken = 0, n = 0;
    size_t len;

    harness_start(h, NULL);
    assert_int_equal(logshard_connect(&ls, &opts), 0);
    assert_non_null(ls);
    assert_int_equal(logshard_fsync_policy(ls), LOGSHARD_FSYNC_BATCH);
    assert_null(logshard_error_message(ls));
    while (taken < RECORDS) {
        int r;

        len = harness_make_record(rec, sizeof(rec), "compat", taken, 40);
        r = logshard_append(ls, rec, len);
        if (r == -EAGAIN) {
            /* 0.1.0's way to wait with LOGSHARD_NONBLOCK: a short flush. */
            r = logshard_flush(ls, 100);
            assert_true(r == 0 || r == -ETIMEDOUT);
            continue;
        }
        assert_int_equal(r, 0);
        taken++;
    }
    assert_int_equal(logshard_flush(ls, 30000), 0);
    assert_int_equal(logshard_unacked(ls), 0);
    assert_int_equal(logshard_append(ls, rec, 0), -EINVAL);
    assert_string_not_equal(logshard_strerror(-ETIMEDOUT), "Unknown error");
    logshard_close(ls);

    /* A flag 0.1.0 did not know is still refused. */
    opts.flags = 0x80;
    ls = NULL;
    assert_int_equal(logshard_connect(&ls, &opts), -EINVAL);
    assert_null(ls);
    /* NULL options: the socket from $LOGSHARD_SOCKET, the program's name. */
    assert_int_equal(setenv("LOGSHARD_SOCKET", h->sock, 1), 0);
    assert_int_equal(logshard_connect(&ls, NULL), 0);
    assert_int_equal(logshard_flush(ls, 30000), 0);
    logshard_close(ls);
    assert_int_equal(unsetenv("LOGSHARD_SOCKET"), 0);

    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    text = harness_merge_and_cat(h, "merged.lsm", &len);
    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char want[128];

        harness_make_record(want, sizeof(want), "compat", n, 40);
        want[40] = '\0';
        assert_string_equal(line, want);
        n++;
    }
    assert_int_equal(n, RECORDS);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_release_0_1_program, harness_setup,
                                        harness_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
