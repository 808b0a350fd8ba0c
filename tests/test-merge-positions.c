/* Unit tests of the stream positions merge --delete records before it
 * removes version 3 shards (docs/MERGE.md, step 5): the file in
 * <spool>/streams/ reads back with each stream's next position; when it
 * cannot be written nothing is deleted, and the next merge records it and
 * finishes; a merge killed before or after recording them is finished by
 * a recovery that records them (again) before it removes anything. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "merge.h"
#include "shard_format.h"
#include "spool_names.h"
#include "stream_positions.h"

#include "merge-fixture.h"

/* A version 3 shard of a stream; stream 0 means a version 2 shard. */
struct v3_spec {
    const char *producer;
    uint64_t id;
    uint8_t stream; /* the stream id is 16 bytes of this value; 0: none */
    uint64_t first;
    unsigned records;
    uint32_t uid;
};

static const struct v3_spec specs[] = {
    { "app", 1, 0xa1, 0, 5, 1000 },
    { "app", 2, 0xa1, 5, 3, 1000 },
    { "app", 3, 0xa2, 100, 2, 1000 },
    { "web", 1, 0xb1, 7, 0, 33 }, /* a stream's shard with no record */
    { "old", 1, 0, 0, 4, 1 },     /* version 2: no stream */
};
#define N_SPECS (sizeof(specs) / sizeof(specs[0]))

/* The newest record of a shard of spec, as build_v3 writes it. */
static uint64_t newest_of(const struct v3_spec *s)
{
    return s->records ? BASE_TS + s->id * 1000 + s->records - 1 : BASE_TS;
}

static void write_v3(const struct fixture *f, const struct v3_spec *spec)
{
    struct shard_header h;
    struct shard_trailer t = { 0 };
    unsigned char *buf = malloc(SHARD_HEADER_MAX + spec->records * 64u + SHARD_TRAILER_MAX);
    char *name = shard_name(spec->producer, spec->id), *path = join(f->done, name);
    size_t len;

    assert_non_null(buf);
    memset(&h, 0, sizeof(h));
    h.version = spec->stream ? SHARD_FORMAT_VERSION_STREAM : 2;
    h.uid = spec->uid;
    h.gid = spec->uid;
    h.pid = 42;
    h.shard_id = spec->id;
    h.created_ns = BASE_TS;
    h.producer_len = strlen(spec->producer);
    memcpy(h.producer, spec->producer, h.producer_len);
    if (spec->stream) {
        memset(h.stream_id, spec->stream, sizeof(h.stream_id));
        h.first_position = spec->first;
    }
    len = shard_encode_header(buf, &h);
    for (unsigned i = 0; i < spec->records; i++) {
        char p[32];
        int n = snprintf(p, sizeof(p), "%s/%" PRIu64 "/%u", spec->producer, spec->id, i);

        len += shard_encode_record(buf + len, p, (uint32_t)n, BASE_TS + spec->id * 1000 + i);
    }
    t.shard_len = len;
    t.records = spec->records;
    t.newest_ns = newest_of(spec);
    t.trailer_len = (uint32_t)shard_trailer_size(len, 4096);
    shard_encode_trailer(buf + len, &t);
    write_file(path, buf, len + t.trailer_len);
    free(buf);
    free(path);
    free(name);
}

static void write_specs(const struct fixture *f)
{
    for (size_t i = 0; i < N_SPECS; i++)
        write_v3(f, &specs[i]);
}

static size_t specs_left(const struct fixture *f)
{
    size_t n = 0;

    for (size_t i = 0; i < N_SPECS; i++) {
        char *name = shard_name(specs[i].producer, specs[i].id), *path = join(f->done, name);

        n += exists(path);
        free(path);
        free(name);
    }
    return n;
}

/* What the daemon would learn: the highest next position of each stream
 * over every file read. */
struct learnt {
    struct positions_entry v[8];
    size_t n;
    size_t calls;
};

static int learn(const struct positions_entry *e, void *arg)
{
    struct learnt *l = arg;

    l->calls++;
    for (size_t i = 0; i < l->n; i++) {
        if (memcmp(l->v[i].stream_id, e->stream_id, sizeof(e->stream_id)) == 0) {
            if (e->next_position > l->v[i].next_position)
                l->v[i] = *e;
            return 0;
        }
    }
    assert_true(l->n < 8);
    l->v[l->n++] = *e;
    return 0;
}

static const struct positions_entry *find(const struct learnt *l, uint8_t stream)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].stream_id[0] == stream)
            return &l->v[i];
    return NULL;
}

/* Loads <spool>/streams/ and checks that every stream of specs is there
 * with the position after its last record; returns the files read. */
static size_t check_positions(const struct fixture *f)
{
    struct positions_load_report rep;
    struct learnt l = { 0 };
    int spool_fd = open(f->spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const struct positions_entry *e;
    size_t files;

    assert_true(spool_fd >= 0);
    assert_int_equal(positions_load(spool_fd, learn, &l, &rep), 0);
    assert_int_equal(rep.n_bad, 0);
    assert_int_equal(rep.n_temps, 0);
    files = rep.n_read;
    positions_load_report_free(&rep);
    assert_int_equal(close(spool_fd), 0);
    assert_int_equal(l.n, 3);
    e = find(&l, 0xa1);
    assert_non_null(e);
    assert_true(e->next_position == 8);
    assert_true(e->newest_ns == newest_of(&specs[1]));
    assert_int_equal(e->uid, 1000);
    assert_string_equal(e->producer, "app");
    e = find(&l, 0xa2);
    assert_non_null(e);
    assert_true(e->next_position == 102);
    e = find(&l, 0xb1);
    assert_non_null(e);
    assert_true(e->next_position == 7);
    assert_true(e->newest_ns == BASE_TS);
    assert_int_equal(e->uid, 33);
    assert_string_equal(e->producer, "web");
    return files;
}

static char *streams_dir(const struct fixture *f)
{
    return join(f->spool, SPOOL_STREAMS_DIR);
}

struct order_watch {
    const struct fixture *f;
    size_t positions, deleted;
};

static void watch_order(enum merge_step step, void *userdata)
{
    struct order_watch *w = userdata;
    char *dir = streams_dir(w->f);

    switch (step) {
    case MERGE_STEP_POSITIONS_WRITTEN:
        /* Durable before any source goes. */
        assert_int_equal(w->deleted, 0);
        assert_int_equal(specs_left(w->f), N_SPECS);
        assert_int_equal(count_entries(dir), 1);
        w->positions++;
        break;
    case MERGE_STEP_SOURCE_DELETED:
        assert_int_equal(w->positions, 1);
        w->deleted++;
        break;
    default:
        break;
    }
    free(dir);
}

static void test_delete_records_positions(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct order_watch w = { 0 };
    struct spool_positions_name pn;
    char *out, *dir;

    (void)state;
    fixture_init(&f);
    write_specs(&f);
    out = join(f.out, "merged.lsm");
    dir = streams_dir(&f);

    /* Without --delete nothing is removed, so nothing is recorded. */
    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.positions_file);
    merge_result_free(&res);
    assert_false(exists(dir));
    assert_int_equal(unlink(out), 0);

    opts.delete_sources = true;
    opts.at_step = watch_order;
    opts.userdata = &w;
    w.f = &f;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_int_equal(res.deleted, N_SPECS);
    assert_non_null(res.positions_file);
    assert_int_equal(spool_positions_name_parse(res.positions_file, &pn), 0);
    assert_string_equal(pn.kind, "merge");
    merge_result_free(&res);
    assert_int_equal(w.positions, 1);
    assert_int_equal(w.deleted, N_SPECS);
    assert_int_equal(specs_left(&f), 0);
    assert_int_equal(check_positions(&f), 1);
    check_no_leftovers(&f);
    free(dir);
    free(out);
    fixture_free(&f);
}

/* Version 2 shards alone have no stream: --delete writes no file. */
static void test_no_stream_no_file(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *dir;

    (void)state;
    fixture_init(&f);
    write_v3(&f, &specs[4]);
    out = join(f.out, "merged.lsm");
    dir = streams_dir(&f);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.deleted, 1);
    assert_null(res.positions_file);
    merge_result_free(&res);
    assert_false(exists(dir));
    free(dir);
    free(out);
    fixture_free(&f);
}

/* streams/ cannot be written (a file planted under its name): the output is
 * made, nothing is deleted, and the next merge, once streams/ can be made,
 * records the positions and finishes. */
static void test_positions_failure_deletes_nothing(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *dir, *intent;

    (void)state;
    fixture_init(&f);
    write_specs(&f);
    out = join(f.out, "merged.lsm");
    dir = streams_dir(&f);
    intent = join(f.spool, SPOOL_MERGE_INTENT);
    write_file(dir, "not a directory", 15);
    opts.spool = f.spool;
    opts.output = out;
    opts.delete_sources = true;
    assert_int_equal(merge_run(&opts, &res), -ENOTDIR);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, "no source was removed"));
    assert_non_null(res.output_path); /* the output is there, complete */
    assert_int_equal(res.deleted, 0);
    assert_null(res.positions_file);
    merge_result_free(&res);
    assert_int_equal(specs_left(&f), N_SPECS);
    assert_true(exists(out));
    assert_true(exists(intent));

    /* Still in the way: the recovery refuses too, and deletes nothing. */
    assert_int_equal(merge_run(&opts, &res), -ENOTDIR);
    merge_result_free(&res);
    assert_int_equal(specs_left(&f), N_SPECS);

    assert_int_equal(unlink(dir), 0);
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
    assert_int_equal(res.recovery_deleted, N_SPECS);
    assert_non_null(res.positions_file);
    merge_result_free(&res);
    assert_int_equal(specs_left(&f), 0);
    assert_int_equal(check_positions(&f), 1);
    check_no_leftovers(&f);
    free(intent);
    free(dir);
    free(out);
    fixture_free(&f);
}

/* A crash: a child runs the merge and leaves with _exit(0) at the nth time
 * it reaches step, as a kill -9 there would. */
struct crash_plan {
    enum merge_step step;
    unsigned nth, seen;
};

static void crash_step(enum merge_step step, void *userdata)
{
    struct crash_plan *p = userdata;

    if (step == p->step && ++p->seen == p->nth)
        _exit(0);
}

static void run_crashing(const struct merge_opts *base, struct crash_plan plan)
{
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct merge_opts o = *base;
        struct merge_result res;

        o.at_step = crash_step;
        o.userdata = &plan;
        (void)merge_run(&o, &res);
        _exit(3); /* the crash point was never reached */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_recovery_records_positions(void **state)
{
    static const struct {
        const char *what;
        struct crash_plan plan;
        size_t files_after_crash, left_after_crash, files_at_end;
    } cases[] = {
        { "published, positions not written", { MERGE_STEP_PUBLISHED, 1, 0 }, 0, N_SPECS, 1 },
        { "positions written, nothing removed", { MERGE_STEP_POSITIONS_WRITTEN, 1, 0 }, 1,
          N_SPECS, 2 },
        { "two sources removed", { MERGE_STEP_SOURCE_DELETED, 2, 0 }, 1, N_SPECS - 2, 2 },
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fixture f;
        struct merge_opts opts = { 0 };
        struct merge_result res;
        char *out, *dir;

        print_message("crash: %s\n", cases[i].what);
        fixture_init(&f);
        write_specs(&f);
        out = join(f.out, "merged.lsm");
        dir = streams_dir(&f);
        opts.spool = f.spool;
        opts.output = out;
        opts.delete_sources = true;
        run_crashing(&opts, cases[i].plan);
        assert_int_equal(exists(dir) ? count_entries(dir) : 0, cases[i].files_after_crash);
        assert_int_equal(specs_left(&f), cases[i].left_after_crash);

        assert_int_equal(merge_run(&opts, &res), 0);
        assert_int_equal(res.recovery, MERGE_RECOVERY_FINISHED);
        assert_int_equal(res.recovery_deleted, cases[i].left_after_crash);
        merge_result_free(&res);
        assert_int_equal(specs_left(&f), 0);
        /* Written again by the recovery: harmless, the reader keeps the
         * highest position of each stream. */
        assert_int_equal(check_positions(&f), cases[i].files_at_end);
        check_no_leftovers(&f);
        free(dir);
        free(out);
        fixture_free(&f);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_delete_records_positions),
        cmocka_unit_test(test_no_stream_no_file),
        cmocka_unit_test(test_positions_failure_deletes_nothing),
        cmocka_unit_test(test_recovery_records_positions),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
