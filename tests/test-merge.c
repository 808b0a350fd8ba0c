/* Unit tests of the merge engine (merge/, through merge.h): which files of
 * done/ are taken and in what order, whole merges, good and refused, and
 * damaged or misnamed sources, plain and sealed, moved to quarantine/. The
 * copy loop is tested by test-merge-copy.c, --delete and the lock by
 * test-merge-delete.c, crashes and recovery by test-merge-recovery.c, the
 * two-thread passes and progress by test-merge-threads.c; their shared
 * fixtures are merge-fixture.c. Every test works in its own mkdtemp
 * directory with shards built by the common encoder, so the merge is
 * checked against the same format the daemon writes. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "merge.h"
#include "shard_format.h"

#include "merge-fixture.h"

/* ---- names and listing ---- */

static void test_parse_names(void **state)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id = 0;
    char long_name[WIRE_PRODUCER_NAME_MAX + 2 + 32];

    (void)state;
    assert_int_equal(merge_parse_source_name("a.b.c.00000000000000ff.shard", producer, &id), 0);
    assert_string_equal(producer, "a.b.c");
    assert_int_equal(id, 0xff);
    assert_int_equal(merge_parse_source_name("x_-9.ffffffffffffffff.shard", producer, &id), 0);
    assert_string_equal(producer, "x_-9");
    assert_true(id == UINT64_MAX);

    assert_int_equal(merge_parse_source_name("a.0000000000000001.tmp", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name(".a.0000000000000001.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name(".0000000000000001.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("a.000000000000000F.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("a.shard", producer, &id), -EINVAL);
    assert_int_equal(merge_parse_source_name("", producer, &id), -EINVAL);

    /* 64 bytes is the longest name the rule allows; 65 is refused. */
    memset(long_name, 'n', WIRE_PRODUCER_NAME_MAX);
    strcpy(long_name + WIRE_PRODUCER_NAME_MAX, ".0000000000000001.shard");
    assert_int_equal(merge_parse_source_name(long_name, producer, &id), 0);
    assert_int_equal(strlen(producer), WIRE_PRODUCER_NAME_MAX);
    memset(long_name, 'n', WIRE_PRODUCER_NAME_MAX + 1);
    strcpy(long_name + WIRE_PRODUCER_NAME_MAX + 1, ".0000000000000001.shard");
    assert_int_equal(merge_parse_source_name(long_name, producer, &id), -EINVAL);
}

static void test_list_order(void **state)
{
    struct fixture f;
    struct merge_source *v = NULL;
    size_t n = 0;
    int dfd;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);

    dfd = open(f.done, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    assert_int_equal(merge_list_sources(dfd, &v, &n), 0);
    assert_int_equal(n, N_SORTED);
    for (size_t i = 0; i < n; i++) {
        char *name = shard_name(sorted_specs[i].producer, sorted_specs[i].id);

        assert_string_equal(v[i].producer, sorted_specs[i].producer);
        assert_true(v[i].id == sorted_specs[i].id);
        assert_string_equal(v[i].name, name);
        free(name);
    }
    merge_sources_free(v, n);

    /* The caller's descriptor stays usable: listing twice gives the same. */
    assert_int_equal(merge_list_sources(dfd, &v, &n), 0);
    assert_int_equal(n, N_SORTED);
    merge_sources_free(v, n);
    assert_int_equal(close(dfd), 0);
    fixture_free(&f);
}

/* ---- whole merges ---- */

static uint64_t total_records(void)
{
    uint64_t n = 0;

    for (size_t i = 0; i < N_SORTED; i++)
        n += sorted_specs[i].records;
    return n;
}

static void test_merge_end_to_end(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out = NULL, *out2 = NULL;
    unsigned char *before, *after;
    size_t before_len, after_len;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    out2 = join(f.out, "merged-fallback.lsm");

    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_string_equal(res.output_path, out);
    assert_int_equal(res.shards, N_SORTED);
    assert_true(res.records == total_records());
    assert_int_equal(res.n_sources, N_SORTED);
    /* A directory and a symlink under shard names are reported and left
     * alone; the other junk has no shard name and is not looked at. */
    assert_int_equal(res.n_problems, 2);
    assert_string_equal(res.problems[0].name, "dir.0000000000000001.shard");
    assert_string_equal(res.problems[0].why, "a directory, not a regular file");
    assert_int_equal(res.problems[0].kind, MERGE_PROBLEM_NOT_REGULAR);
    assert_null(res.problems[0].quarantined_as);
    assert_string_equal(res.problems[1].name, "link.0000000000000001.shard");
    assert_string_equal(res.problems[1].why, "a symbolic link, not a regular file");
    assert_null(res.problems[1].quarantined_as);
    {
        uint64_t bytes = 0;

        for (size_t i = 0; i < res.n_sources; i++) {
            assert_true(res.sources[i].records == sorted_specs[i].records);
            bytes += res.sources[i].bytes;
        }
        assert_true(res.bytes == bytes);
    }
    merge_result_free(&res);
    check_output(out, &f);
    /* Only the output: no temp file left behind, and no intent. */
    assert_int_equal(count_entries(f.out), 1);
    check_no_leftovers(&f);
    /* The sources stay where they were, junk included. */
    assert_int_equal(count_entries(f.done), N_SORTED + 16);

    /* An existing output is refused and left alone. */
    before = read_file(out, &before_len);
    assert_int_equal(merge_run(&opts, &res), -EEXIST);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, out));
    assert_non_null(strstr(res.error, "already exists"));
    assert_null(res.output_path);
    merge_result_free(&res);
    after = read_file(out, &after_len);
    assert_int_equal(before_len, after_len);
    assert_memory_equal(before, after, before_len);
    free(before);
    free(after);
    assert_int_equal(count_entries(f.out), 1);

    /* The forced read/write path gives the same bytes and says so. */
    opts.output = out2;
    opts.force_fallback = true;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_true(res.used_fallback);
    merge_result_free(&res);
    check_output(out2, &f);
    assert_int_equal(count_entries(f.out), 2);

    free(out);
    free(out2);
    fixture_free(&f);
}

/* "/merged-YYYYmmddTHHMMSS.nnnnnnnnnZ.lsm" */
static void check_default_name(const char *path, const char *merged)
{
    const char *base;

    assert_true(strncmp(path, merged, strlen(merged)) == 0);
    base = path + strlen(merged);
    assert_int_equal(strlen(base), strlen("/merged-20240101T000000.123456789Z.lsm"));
    assert_true(strncmp(base, "/merged-", 8) == 0);
    assert_true(base[16] == 'T' && base[23] == '.' && base[33] == 'Z');
    for (int i = 24; i < 33; i++)
        assert_true(base[i] >= '0' && base[i] <= '9');
    assert_string_equal(base + 34, ".lsm");
}

/* Two default-named merges right after each other (nearly always within
 * one second) must both succeed, under different names. */
static void test_merge_default_output(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res, res2;
    char *merged;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    merged = join(f.spool, "merged");
    opts.spool = f.spool;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_non_null(res.output_path);
    check_default_name(res.output_path, merged);
    check_output(res.output_path, &f);
    assert_int_equal(count_entries(merged), 1);

    assert_int_equal(merge_run(&opts, &res2), 0);
    assert_non_null(res2.output_path);
    check_default_name(res2.output_path, merged);
    assert_string_not_equal(res.output_path, res2.output_path);
    /* Names sort by time. */
    assert_true(strcmp(res.output_path, res2.output_path) < 0);
    check_output(res2.output_path, &f);
    assert_int_equal(count_entries(merged), 2);
    merge_result_free(&res);
    merge_result_free(&res2);
    free(merged);
    fixture_free(&f);
}

/* Writes the shard of spec into done/ under its name, altered by damage. */
typedef void (*damage_fn)(unsigned char *buf, size_t *len, const struct shard_spec *spec);

static void flip_payload_byte(unsigned char *buf, size_t *len, const struct shard_spec *spec)
{
    /* The last byte of the last record's payload. */
    (void)spec;
    buf[*len - 1] ^= 0x20;
}

static void cut_tail(unsigned char *buf, size_t *len, const struct shard_spec *spec)
{
    (void)buf;
    (void)spec;
    *len -= 3;
}

struct damage_case {
    damage_fn damage;
    const char *expect_why;
};

/* Asserts that res lists exactly one problem, the damaged file name at
 * offset for why, and that quarantine/<name> holds bytes, unchanged, and
 * done/<name> is gone. */
static void check_quarantined(const struct fixture *f, const struct merge_result *res,
                              const char *name, uint64_t offset, const char *why,
                              const unsigned char *bytes, size_t len)
{
    char *qdir = join(f->spool, "quarantine");
    char *qpath = join(qdir, name);
    char *dpath = join(f->done, name);
    unsigned char *got;
    size_t got_len;

    assert_int_equal(res->n_problems, 1);
    assert_int_equal(res->problems[0].kind, MERGE_PROBLEM_DAMAGED);
    assert_string_equal(res->problems[0].name, name);
    assert_true(res->problems[0].offset == offset);
    assert_string_equal(res->problems[0].why, why);
    assert_non_null(res->problems[0].quarantined_as);
    assert_string_equal(res->problems[0].quarantined_as, name);
    assert_false(exists(dpath));
    got = read_file(qpath, &got_len);
    assert_int_equal(got_len, len);
    if (len > 0)
        assert_memory_equal(got, bytes, len);
    free(got);
    free(dpath);
    free(qpath);
    free(qdir);
}

static void run_damage_case(const struct damage_case *c)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    const struct shard_spec *victim = &sorted_specs[2];
    unsigned char *buf;
    size_t len, last_rec;
    char *out, *name, *path;

    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    buf = build_shard(victim, &len);
    {
        /* Where the last record starts: the reported offset. */
        struct shard_spec shorter = *victim;
        unsigned char *b;

        shorter.records--;
        b = build_shard(&shorter, &last_rec);
        free(b);
    }
    c->damage(buf, &len, victim);
    name = shard_name(victim->producer, victim->id);
    path = join(f.done, name);
    write_file(path, buf, len);

    /* The damaged shard goes to quarantine/ unchanged; the rest is merged. */
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.error);
    assert_string_equal(res.output_path, out);
    assert_int_equal(res.shards, N_SORTED - 1);
    assert_true(res.records == total_records() - victim->records);
    check_quarantined(&f, &res, name, last_rec, c->expect_why, buf, len);
    merge_result_free(&res);
    check_output_without(out, 2);
    check_no_leftovers(&f);

    free(buf);
    free(out);
    free(path);
    free(name);
    fixture_free(&f);
}

static void test_merge_quarantines_corrupt_source(void **state)
{
    static const struct damage_case crc = { flip_payload_byte, "record CRC mismatch" };
    static const struct damage_case torn = { cut_tail, "file ends inside a record" };

    (void)state;
    run_damage_case(&crc);
    run_damage_case(&torn);
}

/* A valid shard under the wrong name, and a file holding two shards, are not
 * what the daemon seals into done/, so they go to quarantine/ too. */
static void test_merge_quarantines_misnamed_and_double(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    static const struct shard_spec other = { "c", 9, 2 };
    unsigned char *a, *b, *both;
    size_t alen, blen;
    char *out, *p;

    (void)state;
    fixture_init(&f);
    write_sorted_specs_shuffled(f.done);
    out = join(f.out, "merged.lsm");
    opts.spool = f.spool;
    opts.output = out;

    a = build_shard(&other, &alen);
    p = join(f.done, "b.0000000000000009.shard");
    write_file(p, a, alen);
    assert_int_equal(merge_run(&opts, &res), 0);
    check_quarantined(&f, &res, "b.0000000000000009.shard", 0,
                      "shard header says producer 'c' shard id 0000000000000009, which does "
                      "not match the file name",
                      a, alen);
    merge_result_free(&res);
    check_output(out, &f);
    assert_int_equal(unlink(out), 0);
    free(p);

    b = build_shard(&other, &blen);
    both = malloc(alen + blen);
    assert_non_null(both);
    memcpy(both, a, alen);
    memcpy(both + alen, b, blen);
    p = join(f.done, "c.0000000000000009.shard");
    write_file(p, both, alen + blen);
    assert_int_equal(merge_run(&opts, &res), 0);
    check_quarantined(&f, &res, "c.0000000000000009.shard", alen,
                      "a second shard header (a file in done/ must hold exactly one shard)",
                      both, alen + blen);
    merge_result_free(&res);
    check_output(out, &f);

    free(p);
    free(a);
    free(b);
    free(both);
    free(out);
    fixture_free(&f);
}

static void test_merge_zero_shards(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *out, *merged;

    (void)state;
    fixture_init(&f);
    write_junk(&f);
    out = join(f.out, "merged.lsm");
    merged = join(f.spool, "merged");
    opts.spool = f.spool;

    opts.output = out;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.n_sources, 0);
    assert_int_equal(res.shards, 0);
    assert_null(res.output_path);
    assert_null(res.error);
    merge_result_free(&res);
    assert_int_equal(count_entries(f.out), 0);

    /* With the default output, not even merged/ is created. */
    opts.output = NULL;
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_null(res.output_path);
    merge_result_free(&res);
    assert_false(exists(merged));

    free(merged);
    free(out);
    fixture_free(&f);
}

static void test_merge_missing_spool(void **state)
{
    struct merge_opts opts = { 0 };
    struct merge_result res;
    char *tmp = make_tmpdir();
    char *done = join(tmp, "done");

    (void)state;
    opts.spool = tmp;
    assert_int_equal(merge_run(&opts, &res), -ENOENT);
    assert_non_null(res.error);
    assert_non_null(strstr(res.error, done));
    merge_result_free(&res);
    free(done);
    rm_rf(tmp);
}

/* ---- sealed shards: checked from their two ends ---- */

static const struct shard_spec sealed_specs[] = {
    { "alpha", 1, 3 }, { "alpha", 2, 300 }, { "beta", 7, 0 }, { "gamma", 9, 40 },
};
#define N_SEALED (sizeof(sealed_specs) / sizeof(sealed_specs[0]))

/* Offset of the first record of sealed_specs[1] within its file. */
static size_t sealed_victim_record0(void)
{
    return shard_header_size(strlen(sealed_specs[1].producer));
}

static void flip_first_record(unsigned char *buf, size_t *len)
{
    (void)len;
    buf[sealed_victim_record0() + SHARD_RECORD_HEADER] ^= 0x01;
}

static void flip_trailer_records(unsigned char *buf, size_t *len)
{
    buf[*len - 24] ^= 0x01; /* the trailer's record count */
}

/* Runs a merge of the sealed specs, sealed_specs[1] damaged by damage, and
 * checks that the output is every other one (every one when damage is
 * NULL) back to back, block-aligned. */
static int merge_sealed(void (*damage)(unsigned char *buf, size_t *len), struct merge_result *res,
                        char **ret_victim, char **ret_out)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    char *name;
    int r;

    fixture_init(&f);
    for (size_t i = 0; i < N_SEALED; i++)
        write_sealed(&f, &sealed_specs[i], i == 1 ? damage : NULL);
    name = shard_name(sealed_specs[1].producer, sealed_specs[1].id);
    *ret_victim = name;
    *ret_out = join(f.tmp, "merged.lsm");
    opts.spool = f.spool;
    opts.output = *ret_out;
    r = merge_run(&opts, res);
    if (r == 0) {
        size_t got_len, off = 0;
        unsigned char *got = read_file(*ret_out, &got_len);

        for (size_t i = 0; i < N_SEALED; i++) {
            size_t len;
            unsigned char *b;

            if (i == 1 && damage)
                continue;
            b = build_sealed(&sealed_specs[i], &len);
            assert_true(off + len <= got_len);
            assert_memory_equal(got + off, b, len);
            assert_int_equal(off % 4096, 0);
            off += len;
            free(b);
        }
        assert_int_equal(off, got_len);
        free(got);
    }
    fixture_free(&f);
    return r;
}

static void test_merge_sealed_shards(void **state)
{
    static const struct {
        void (*damage)(unsigned char *buf, size_t *len);
        const char *why;
    } cases[] = {
        { flip_first_record, "record CRC mismatch" },
        { flip_trailer_records, "seal trailer CRC mismatch" },
        { cut_three, "file ends inside the seal trailer" },
    };
    struct merge_result res;
    char *victim, *out;
    uint64_t records = 0;
    (void)state;

    for (size_t i = 0; i < N_SEALED; i++)
        records += sealed_specs[i].records;

    assert_int_equal(merge_sealed(NULL, &res, &victim, &out), 0);
    assert_int_equal(res.shards, N_SEALED);
    assert_true(res.records == records);
    assert_int_equal(res.n_problems, 0);
    for (size_t i = 0; i < N_SEALED; i++) {
        assert_true(res.sources[i].records == sealed_specs[i].records);
        /* Every record is read: the newest one's time, or the header's. */
        assert_true(res.sources[i].newest_ns ==
                    BASE_TS + (sealed_specs[i].records ? sealed_specs[i].records - 1 : 0));
        assert_int_equal(res.sources[i].bytes % 4096, 0);
    }
    merge_result_free(&res);
    free(victim);
    free(out);

    /* Damage anywhere in a sealed shard, inside a record too, is found: the
     * shard is left out and the others merged. */
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        assert_int_equal(merge_sealed(cases[k].damage, &res, &victim, &out), 0);
        assert_int_equal(res.shards, N_SEALED - 1);
        assert_true(res.records == records - sealed_specs[1].records);
        assert_int_equal(res.n_problems, 1);
        assert_string_equal(res.problems[0].name, victim);
        assert_string_equal(res.problems[0].why, cases[k].why);
        assert_non_null(res.problems[0].quarantined_as);
        if (k == 0)
            assert_true(res.problems[0].offset == sealed_victim_record0());
        merge_result_free(&res);
        free(victim);
        free(out);
    }
}

/* A sealed shard under another shard's name is found from its header. */
static void test_merge_sealed_misnamed(void **state)
{
    struct fixture f;
    struct merge_opts opts = { 0 };
    struct merge_result res;
    size_t len;
    unsigned char *buf = build_sealed(&sealed_specs[0], &len);
    char *path;
    (void)state;

    fixture_init(&f);
    path = join(f.done, "alpha.00000000000000ff.shard");
    write_file(path, buf, len);
    opts.spool = f.spool;
    opts.output = "unused.lsm";
    assert_int_equal(merge_run(&opts, &res), 0);
    assert_int_equal(res.shards, 0);
    assert_null(res.output_path);
    check_quarantined(&f, &res, "alpha.00000000000000ff.shard", 0,
                      "shard header says producer 'alpha' shard id 0000000000000001, "
                      "which does not match the file name",
                      buf, len);
    merge_result_free(&res);
    free(path);
    free(buf);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_names),
        cmocka_unit_test(test_list_order),
        cmocka_unit_test(test_merge_end_to_end),
        cmocka_unit_test(test_merge_default_output),
        cmocka_unit_test(test_merge_quarantines_corrupt_source),
        cmocka_unit_test(test_merge_quarantines_misnamed_and_double),
        cmocka_unit_test(test_merge_sealed_shards),
        cmocka_unit_test(test_merge_sealed_misnamed),
        cmocka_unit_test(test_merge_zero_shards),
        cmocka_unit_test(test_merge_missing_spool),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
