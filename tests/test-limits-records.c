/* The largest records: a record of exactly max_record_bytes and a frame
 * one byte over it, a record of 256 MiB (the largest the documentation
 * allows), and the client library under valgrind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "logshard.h"
#include "wire.h"

/* Sends one record of exactly rec bytes through the library, after one of
 * rec + 1 bytes was refused without reaching the daemon. */
static void send_largest_record(const struct harness *h, size_t rec)
{
    logshard_opts o = { .socket_path = h->sock, .producer = "big" };
    logshard *ls = NULL;
    char *buf = malloc(rec + 1);

    assert_non_null(buf);
    memset(buf, 'r', rec + 1);
    assert_int_equal(logshard_connect(&ls, &o), 0);
    assert_int_equal(logshard_append(ls, buf, rec + 1), -EMSGSIZE);
    assert_int_equal(logshard_append(ls, buf, rec), 0);
    assert_int_equal(logshard_flush(ls, 120000), 0);
    logshard_close(ls);
    free(buf);
}

/* At the boundary: max_frame_bytes exactly max_record_bytes + 8, and the
 * session buffer exactly one frame. A record of max_record_bytes is taken
 * whole; a frame one byte over the limit is refused from its header. */
static void test_largest_record(void **state)
{
    struct harness *h = *state;
    static unsigned char payload[2048];
    unsigned char frame[WIRE_HEADER_SIZE];
    char msg[WIRE_ERROR_MESSAGE_MAX + 1];
    uint32_t len = 0;
    char *text;
    size_t text_len;
    int fd;

    harness_write_config(h, "[limits]\nmax_record_bytes = 64K\nmax_frame_bytes = 65544\n"
                            "session_buffer_bytes = 65544\n");
    harness_start(h, NULL);
    send_largest_record(h, 65536);

    fd = harness_raw_connect(h->sock);
    harness_raw_hello(fd, "raw");
    assert_int_equal(harness_raw_read_frame(fd, payload, sizeof(payload), &len), WIRE_WELCOME);
    assert_int_equal(wire_get_u32(payload + 4), 65536);
    assert_int_equal(wire_get_u32(payload + 8), 65544);
    wire_encode_header(frame, WIRE_APPEND, 65545);
    harness_raw_send(fd, frame, sizeof(frame));
    assert_int_equal(harness_raw_read_until_error(fd, msg, sizeof(msg), NULL), EMSGSIZE);
    close(fd);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));

    text = harness_merge_and_cat(h, "largest", &text_len);
    assert_int_equal(text_len, 65536 + 1);
    assert_int_equal(strspn(text, "r"), 65536);
    free(text);
}

/* The same with the largest record the documentation allows, 256 MiB:
 * heavy (about 1 GiB of memory between the test and the daemon), so it runs
 * only when LOGSHARD_TEST_HEAVY is set. */
static void test_record_of_256_mib(void **state)
{
    struct harness *h = *state;
    char *done, *path = NULL;
    struct stat st;

    if (!getenv("LOGSHARD_TEST_HEAVY")) {
        fprintf(stderr, "LOGSHARD_TEST_HEAVY is not set: not sending 256 MiB\n");
        skip();
    }
    harness_write_config(h, "[limits]\nmax_record_bytes = 256M\nmax_frame_bytes = 268435464\n"
                            "session_buffer_bytes = 268435464\nmemory_limit_bytes = 1G\n");
    harness_start(h, NULL);
    send_largest_record(h, 256u << 20);
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 60000));
    assert_int_equal(harness_count_files(h, "done", ".shard"), 1);
    done = harness_path(h->spool, "done");
    {
        const char *verify[] = { harness_logctl(), "verify", "--spool", h->spool, NULL };
        int status = harness_run(verify, NULL, NULL, 120000);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    {
        DIR *d = opendir(done);
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d)) != NULL)
            if (de->d_name[0] != '.')
                path = harness_path(done, de->d_name);
        closedir(d);
    }
    assert_non_null(path);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > (off_t)(256u << 20));
    free(path);
    free(done);
}

/* The client library under valgrind: no invalid access, no leak. */
static void test_client_under_valgrind(void **state)
{
    struct harness *h = *state;
    char *in, *err;
    const char *argv[] = { "/usr/bin/valgrind", "--quiet", "--error-exitcode=99",
                           "--leak-check=full", "--errors-for-leak-kinds=definite,indirect",
                           harness_logctl(), "send", "--socket", h->sock, "--producer",
                           "valgrind", NULL };
    FILE *f;
    pid_t pid;
    int st;

    if (access(argv[0], X_OK) != 0) {
        fprintf(stderr, "valgrind is not installed\n");
        skip();
    }
#ifdef __SANITIZE_ADDRESS__
    /* valgrind cannot run AddressSanitizer's binaries; the development
     * build runs this test. */
    fprintf(stderr, "sanitizer build: valgrind does not run ASan binaries\n");
    skip();
#endif
    in = harness_path(h->dir, "lines.txt");
    err = harness_path(h->dir, "valgrind.txt");
    f = fopen(in, "we");
    assert_non_null(f);
    for (int i = 0; i < 2000; i++)
        fprintf(f, "valgrind %d line of text\n", i);
    assert_int_equal(fclose(f), 0);
    harness_start(h, NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(in, O_RDONLY | O_CLOEXEC);
        int efd = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || efd < 0 || dup2(fd, 0) < 0 || dup2(efd, 2) < 0 ||
            process_reset_signals() < 0)
            _exit(127);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        size_t n;
        char *text = harness_slurp(err, &n);
        fail_msg("logctl send under valgrind: status %d\n%s", st, text);
    }
    harness_assert_clean_exit(harness_stop(h, SIGTERM, 30000));
    {
        size_t n;
        char *text = harness_merge_and_cat(h, "vg.lsm", &n);
        size_t lines = 0;
        for (char *p = text; *p; p++)
            lines += *p == '\n';
        assert_int_equal(lines, 2000);
        free(text);
    }
    free(in);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_largest_record, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_record_of_256_mib, harness_setup, harness_teardown),
        cmocka_unit_test_setup_teardown(test_client_under_valgrind, harness_setup, harness_teardown),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
