/* The fixtures of the merge engine's unit tests, in one place so that
 * every tests/test-merge*.c program builds and checks spools the same way;
 * merge-fixture.h says what each one does. */
#include <setjmp.h> /* cmocka needs these before cmocka.h */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileutil.h"
#include "shard_format.h"
#include "spool_names.h"

#include "merge-fixture.h"

char *make_tmpdir(void)
{
    char *d = strdup("/tmp/test-merge-XXXXXX");

    assert_non_null(d);
    assert_non_null(mkdtemp(d));
    return d;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

void rm_rf(char *dir)
{
    assert_int_equal(nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(dir);
}

char *join(const char *a, const char *b)
{
    char *p = path_join(a, b);

    assert_non_null(p);
    return p;
}

void write_file(const char *path, const void *buf, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    assert_true(fd >= 0);
    assert_int_equal(write_all(fd, buf, len), 0);
    assert_int_equal(close(fd), 0);
}

unsigned char *read_file(const char *path, size_t *ret_len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    unsigned char *buf;

    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    buf = malloc((size_t)st.st_size + 1);
    assert_non_null(buf);
    assert_int_equal(read_full(fd, buf, (size_t)st.st_size), st.st_size);
    assert_int_equal(close(fd), 0);
    *ret_len = (size_t)st.st_size;
    return buf;
}

bool exists(const char *path)
{
    struct stat st;

    return lstat(path, &st) == 0;
}

size_t count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;

    assert_non_null(d);
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            n++;
    closedir(d);
    return n;
}

static int payload_for(char *out, size_t size, const char *producer, uint64_t id, unsigned i)
{
    /* Varying lengths, so record boundaries move around. */
    return snprintf(out, size, "%s/%016" PRIx64 "/%u/%.*s", producer, id, i, (int)(i % 7),
                    "xxxxxxx");
}

/* Builds the bytes of one shard: a header and spec->records records. */
unsigned char *build_shard(const struct shard_spec *spec, size_t *ret_len)
{
    struct shard_header h;
    size_t cap = SHARD_HEADER_MAX + (size_t)spec->records * (SHARD_RECORD_HEADER + 128);
    unsigned char *buf = malloc(cap);
    size_t len;

    assert_non_null(buf);
    memset(&h, 0, sizeof(h));
    h.uid = 1000;
    h.gid = 1000;
    h.pid = 42;
    h.shard_id = spec->id;
    h.created_ns = BASE_TS;
    h.producer_len = strlen(spec->producer);
    memcpy(h.producer, spec->producer, h.producer_len);
    len = shard_encode_header(buf, &h);
    for (unsigned i = 0; i < spec->records; i++) {
        char p[128];
        int n = payload_for(p, sizeof(p), spec->producer, spec->id, i);

        len += shard_encode_record(buf + len, p, (uint32_t)n, BASE_TS + i);
    }
    *ret_len = len;
    return buf;
}

char *shard_name(const char *producer, uint64_t id)
{
    char *name;

    assert_true(asprintf(&name, "%s.%016" PRIx64 ".shard", producer, id) > 0);
    return name;
}

void write_shard(const char *done, const struct shard_spec *spec)
{
    size_t len;
    unsigned char *buf = build_shard(spec, &len);
    char *name = shard_name(spec->producer, spec->id);
    char *path = join(done, name);

    write_file(path, buf, len);
    free(path);
    free(name);
    free(buf);
}

void fixture_init(struct fixture *f)
{
    char *active;

    umask(022);
    f->tmp = make_tmpdir();
    f->spool = join(f->tmp, "spool");
    f->done = join(f->spool, "done");
    f->out = join(f->tmp, "out");
    active = join(f->spool, "active");
    assert_int_equal(mkdir(f->spool, 0750), 0);
    assert_int_equal(mkdir(f->done, 0750), 0);
    assert_int_equal(mkdir(active, 0750), 0);
    assert_int_equal(mkdir(f->out, 0750), 0);
    free(active);
}

void fixture_free(struct fixture *f)
{
    free(f->spool);
    free(f->done);
    free(f->out);
    rm_rf(f->tmp);
}

/* Files merge must never take; their contents are not shards, so taking one
 * by mistake makes the merge fail. */
void write_junk(const struct fixture *f)
{
    static const char *const names[] = {
        "a.0000000000000004.tmp",
        ".hidden.0000000000000001.shard",
        ".merged.lsm.123.tmp",
        ".a.0000000000000001.shard.99.tmp",
        "foreign.txt",
        "a.000000000000000G.shard",
        "a.000000000000000A.shard", /* the daemon writes lowercase */
        "a.00000000000000001.shard", /* 17 digits */
        "a.000000000000001.shard",  /* 15 digits */
        "a.0000000000000001.shard~",
        "a.0000000000000001.SHARD",
        "bad name.0000000000000001.shard",
        ".0000000000000001.shard",
        "0000000000000001.shard",
    };
    char *p;

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        p = join(f->done, names[i]);
        write_file(p, "junk", 4);
        free(p);
    }
    p = join(f->done, "dir.0000000000000001.shard");
    assert_int_equal(mkdir(p, 0750), 0);
    free(p);
    p = join(f->done, "link.0000000000000001.shard");
    assert_int_equal(symlink("foreign.txt", p), 0);
    free(p);
    p = join(f->spool, "active/a.0000000000000009.tmp");
    write_file(p, "junk", 4);
    free(p);
}

/* Producers whose names contain dots must sort by the name, not by the file
 * name: "a.0000000000000001.shard" sorts after "a.0.0000000000000003.shard"
 * as a string, but producer "a" comes before producer "a.0". */
const struct shard_spec sorted_specs[] = {
    { "Z", 5, 3 },
    { "a", 1, 2 },
    { "a", 2, 4 },
    { "a", 0xa, 1 },
    { "a", 0x1f, 2 },
    { "a", 0x100, 3 },
    { "a", 0xfedcba9876543210, 2 },
    { "a-b", 1, 2 },
    { "a.0", 3, 5 },
    { "a.b", 1, 0 }, /* a shard without records is still a shard */
    { "b", 1, 6 },
};
_Static_assert(sizeof(sorted_specs) / sizeof(sorted_specs[0]) == N_SORTED,
               "N_SORTED in merge-fixture.h counts sorted_specs");

/* Creation order is a fixed permutation (7 is prime to 11), so the sort
 * cannot pass by keeping the order files were made in. */
void write_sorted_specs_shuffled(const char *done)
{
    for (size_t i = 0; i < N_SORTED; i++)
        write_shard(done, &sorted_specs[(i * 7 + 3) % N_SORTED]);
}

unsigned char *pattern(size_t len, uint32_t seed)
{
    unsigned char *b = malloc(len);
    uint32_t x = seed;

    assert_non_null(b);
    for (size_t i = 0; i < len; i++) {
        x = x * 1664525u + 1013904223u;
        b[i] = (unsigned char)(x >> 24);
    }
    return b;
}

/* After a merge has ended, by success or by recovery: no intent, no
 * half-written intent, no temp file next to the outputs. */
void check_no_leftovers(const struct fixture *f)
{
    char *intent = join(f->spool, SPOOL_MERGE_INTENT);
    char *intent_tmp = join(f->spool, SPOOL_MERGE_INTENT_TMP);
    DIR *d;
    struct dirent *de;

    assert_false(exists(intent));
    assert_false(exists(intent_tmp));
    d = opendir(f->out);
    assert_non_null(d);
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            assert_true(de->d_name[0] != '.');
    closedir(d);
    free(intent);
    free(intent_tmp);
}

/* The output must be the sources back to back in the documented order, and
 * the reader must find every record once, in that order; sorted_specs[skip]
 * is left out (SIZE_MAX: none is). */
void check_output_without(const char *path, size_t skip)
{
    unsigned char *got, *expect = NULL;
    size_t got_len, expect_len = 0;
    struct shard_reader *r = NULL;
    struct shard_item item;
    size_t spec = 0;
    unsigned rec = 0;
    int fd, rc;
    struct stat st;

    for (size_t i = 0; i < N_SORTED; i++) {
        size_t len;
        unsigned char *b;

        if (i == skip)
            continue;
        b = build_shard(&sorted_specs[i], &len);

        expect = realloc(expect, expect_len + len);
        assert_non_null(expect);
        memcpy(expect + expect_len, b, len);
        expect_len += len;
        free(b);
    }
    got = read_file(path, &got_len);
    assert_int_equal(got_len, expect_len);
    assert_memory_equal(got, expect, expect_len);
    free(got);
    free(expect);

    fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(shard_reader_new(&r, fd), 0);
    spec = (size_t)-1;
    while ((rc = shard_reader_next(r, &item)) > 0) {
        if (item.kind == SHARD_ITEM_HEADER) {
            if (spec != (size_t)-1)
                assert_int_equal(rec, sorted_specs[spec].records);
            spec++;
            if (spec == skip)
                spec++;
            rec = 0;
            assert_true(spec < N_SORTED);
            assert_string_equal(item.header->producer, sorted_specs[spec].producer);
            assert_true(item.header->shard_id == sorted_specs[spec].id);
            continue;
        }
        {
            char p[128];
            int n = payload_for(p, sizeof(p), sorted_specs[spec].producer,
                                sorted_specs[spec].id, rec);

            assert_int_equal(item.len, n);
            assert_memory_equal(item.payload, p, (size_t)n);
            assert_true(item.timestamp_ns == BASE_TS + rec);
            rec++;
        }
    }
    assert_int_equal(rc, 0);
    assert_int_equal(spec, skip == N_SORTED - 1 ? N_SORTED - 2 : N_SORTED - 1);
    assert_int_equal(rec, sorted_specs[spec].records);
    shard_reader_free(r);
    assert_int_equal(close(fd), 0);
}

void check_output(const char *path, const struct fixture *f)
{
    (void)f;
    check_output_without(path, SIZE_MAX);
}

/* How many of sorted_specs are still in done/. */
size_t sources_left(const struct fixture *f)
{
    size_t n = 0;

    for (size_t i = 0; i < N_SORTED; i++) {
        char *name = shard_name(sorted_specs[i].producer, sorted_specs[i].id);
        char *path = join(f->done, name);

        n += exists(path);
        free(path);
        free(name);
    }
    return n;
}

uint64_t file_size(const char *path)
{
    struct stat st;

    assert_int_equal(stat(path, &st), 0);
    return (uint64_t)st.st_size;
}

/* The shard of spec sealed as the daemon seals it: with its trailer,
 * padded to 4096 bytes. */
unsigned char *build_sealed(const struct shard_spec *spec, size_t *ret_len)
{
    size_t len;
    unsigned char *buf = build_shard(spec, &len);
    struct shard_trailer t = {
        .shard_len = len,
        .records = spec->records,
        .newest_ns = BASE_TS + spec->records,
    };

    t.trailer_len = (uint32_t)shard_trailer_size(len, 4096);
    buf = realloc(buf, len + t.trailer_len);
    assert_non_null(buf);
    shard_encode_trailer(buf + len, &t);
    *ret_len = len + t.trailer_len;
    return buf;
}

void write_sealed(const struct fixture *f, const struct shard_spec *spec,
                         void (*damage)(unsigned char *buf, size_t *len))
{
    size_t len;
    unsigned char *buf = build_sealed(spec, &len);
    char *name = shard_name(spec->producer, spec->id);
    char *path = join(f->done, name);

    if (damage)
        damage(buf, &len);
    write_file(path, buf, len);
    free(path);
    free(name);
    free(buf);
}

void cut_three(unsigned char *buf, size_t *len)
{
    (void)buf;
    *len -= 3;
}
