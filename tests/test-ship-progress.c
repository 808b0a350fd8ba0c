/* common/ship_progress.c: the spool's copy of what is shipped, written
 * whole and read back; the stream a shard without one counts as; whether
 * a sealed shard is shipped whole. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ship_progress.h"

struct fixture {
    char dir[64];
    int fd;
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));

    strcpy(f->dir, "/tmp/logshard-ship-progress-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->fd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(f->fd >= 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    char cmd[128];

    close(f->fd);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
    free(f);
    return 0;
}

static struct positions_entry entry(uint8_t first, uint64_t next, const char *producer)
{
    struct positions_entry e = { .next_position = next, .newest_ns = 1, .uid = 1000 };

    memset(e.stream_id, first, sizeof(e.stream_id));
    snprintf(e.producer, sizeof(e.producer), "%s", producer);
    return e;
}

static void test_store_and_load(void **state)
{
    struct fixture *f = *state;
    struct positions_entry v[3] = { entry(9, 10, "c"), entry(1, 5, "a"), entry(4, 7, "b") };
    struct positions_entry *back = NULL;
    size_t n = 0;

    assert_int_equal(ship_progress_load(f->fd, &back, &n, NULL), -ENOENT);
    assert_int_equal(ship_progress_store(f->fd, v, 3), 0);
    assert_int_equal(ship_progress_load(f->fd, &back, &n, NULL), 0);
    assert_int_equal(n, 3);
    assert_int_equal(back[0].stream_id[0], 1); /* sorted by stream id */
    assert_true(ship_progress_next(back, n, v[1].stream_id) == 7);
    free(back);
    /* replaced whole, never appended to */
    v[0].next_position = 11;
    assert_int_equal(ship_progress_store(f->fd, v, 1), 0);
    assert_int_equal(ship_progress_load(f->fd, &back, &n, NULL), 0);
    assert_int_equal(n, 1);
    free(back);
}

static void test_damaged_is_refused(void **state)
{
    struct fixture *f = *state;
    struct positions_entry v[1] = { entry(2, 3, "x") };
    struct positions_entry *back = NULL;
    size_t n = 0;
    const char *why = NULL;
    char path[128];
    int fd;

    assert_int_equal(ship_progress_store(f->fd, v, 1), 0);
    snprintf(path, sizeof(path), "%s/ship/progress", f->dir);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "X", 1, 40), 1);
    close(fd);
    assert_int_equal(ship_progress_load(f->fd, &back, &n, &why), -EBADMSG);
    assert_non_null(why);
    /* a symbolic link in its place is not followed */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(symlink("/etc/passwd", path), 0);
    assert_int_equal(ship_progress_load(f->fd, &back, &n, &why), -EBADMSG);
}

static void test_covers(void **state)
{
    struct shard_header with = { .version = SHARD_FORMAT_VERSION_STREAM, .first_position = 100 };
    struct shard_header without = { .version = 2, .shard_id = 0x1122334455667788ull };
    struct positions_entry v[2];
    uint8_t key[SHARD_STREAM_ID_SIZE];

    (void)state;
    memset(with.stream_id, 7, sizeof(with.stream_id));
    ship_stream_key(&without, key);
    assert_int_equal(key[0], SHIP_SHARD_KEY_PREFIX);
    assert_int_equal(key[8], 0x11);
    assert_int_equal(key[15], 0x88);
    assert_true(ship_first_position(&without) == 0);
    assert_true(ship_first_position(&with) == 100);
    v[0] = entry(7, 150, "a");
    memcpy(v[1].stream_id, key, sizeof(key));
    v[1].next_position = 10;
    /* sorted: the 0x07 stream first, the 0xff key after it */
    assert_true(ship_progress_covers(v, 2, &with, 50));
    assert_false(ship_progress_covers(v, 2, &with, 51));
    assert_true(ship_progress_covers(v, 2, &without, 10));
    assert_false(ship_progress_covers(v, 2, &without, 11));
    assert_false(ship_progress_covers(v, 0, &with, 1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_store_and_load, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_is_refused, setup, teardown),
        cmocka_unit_test(test_covers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
