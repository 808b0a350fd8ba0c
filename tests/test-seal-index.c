/* Unit tests for common/seal_index.c, the index logctl cat trusts to pass
 * over sealed shards without opening them: an entry encodes to the bytes
 * of the header's layout and decodes back, names that are not a sealed
 * shard's are refused on both sides, a cut entry asks for more and a
 * damaged one (any bit of it) is refused; an index keeps every good entry
 * around torn appends, garbage and damage, the last entry of a name wins,
 * a lookup matches the inode too, and a large index is all found; and the
 * file is read only when it is a regular file: never through a symbolic
 * link, never blocking on a FIFO. An entry wrongly taken would make cat
 * skip a shard it should read, so every refusal is checked. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "bytebuf.h"
#include "crc32c.h"
#include "seal_index.h"
#include "spool_names.h"
#include "wire.h"

#define N_ELEMENTS(a) (sizeof(a) / sizeof((a)[0]))

/* The entry for the sealed shard id of producer. */
static struct seal_index_entry entry(const char *producer, uint64_t id, uint64_t inode,
                                     uint64_t created_ns, uint64_t newest_ns)
{
    struct seal_index_entry e;
    char *name = NULL;

    memset(&e, 0, sizeof(e));
    assert_int_equal(spool_name_new(SPOOL_SHARD, producer, strlen(producer), id, &name), 0);
    assert_true(strlen(name) < sizeof(e.name));
    strcpy(e.name, name);
    free(name);
    e.inode = inode;
    e.created_ns = created_ns;
    e.newest_ns = newest_ns;
    return e;
}

/* A producer name of len bytes, of every character the name rule allows. */
static void producer_of(size_t len, char *buf)
{
    static const char chars[] = "abcXYZ019-_.";

    for (size_t i = 0; i < len; i++)
        buf[i] = chars[i % (sizeof(chars) - 1)];
    buf[len] = '\0';
}

static void assert_entry_equal(const struct seal_index_entry *a, const struct seal_index_entry *b)
{
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(a->name, b->name);
    assert_true(a->inode == b->inode);
    assert_true(a->created_ns == b->created_ns);
    assert_true(a->newest_ns == b->newest_ns);
}

/* Appends e's bytes to b; returns their count. */
static size_t put_entry(struct bytebuf *b, const struct seal_index_entry *e)
{
    unsigned char out[SEAL_INDEX_ENTRY_MAX];
    int n = seal_index_encode(e, out);

    assert_true(n > 0);
    memcpy(bytebuf_grow(b, (size_t)n), out, (size_t)n);
    return (size_t)n;
}

static void put_bytes(struct bytebuf *b, const void *p, size_t n)
{
    memcpy(bytebuf_grow(b, n), p, n);
}

/* Decodes a copy of buf[0..len) in a heap block of exactly that size, so a
 * read past the end is an ASan report. */
static int decode_exact(const unsigned char *buf, size_t len, struct seal_index_entry *ret,
                        size_t *ret_len)
{
    unsigned char *copy = malloc(len ? len : 1);
    int r;

    assert_non_null(copy);
    if (len)
        memcpy(copy, buf, len);
    r = seal_index_decode(copy, len, ret, ret_len);
    free(copy);
    return r;
}

/* Bytes of an entry as a writer that breaks the rules would make them:
 * the given magic and length fields, name_bytes bytes of name whatever
 * name_len says, and a CRC that is right for all of it, so that only the
 * rule under test can refuse it. Returns the count of bytes written. */
static size_t craft(unsigned char *out, uint32_t magic, uint16_t entry_len, uint16_t name_len,
                    const void *name, size_t name_bytes)
{
    wire_put_u32(out, magic);
    wire_put_u16(out + 4, entry_len);
    wire_put_u16(out + 6, name_len);
    wire_put_u64(out + 8, 77);
    wire_put_u64(out + 16, 1000);
    wire_put_u64(out + 24, 2000);
    memcpy(out + 32, name, name_bytes);
    wire_put_u32(out + 32 + name_bytes, crc32c(out, 32 + name_bytes));
    return 32 + name_bytes + 4;
}

/* craft() with the lengths an honest writer puts. */
static size_t craft_name(unsigned char *out, const void *name, size_t name_bytes)
{
    return craft(out, SEAL_INDEX_MAGIC, (uint16_t)(SEAL_INDEX_FIXED + name_bytes),
                 (uint16_t)name_bytes, name, name_bytes);
}

static void assert_decode_refused(const unsigned char *buf, size_t len, const char *what)
{
    struct seal_index_entry e;
    size_t n = 12345;
    int r = decode_exact(buf, len, &e, &n);

    if (r != -EBADMSG)
        fail_msg("%s: decode returned %d, not -EBADMSG", what, r);
    assert_int_equal(n, 12345);
}

/* ---- one entry ---- */

static void test_round_trip(void **state)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];

    (void)state;
    /* Every producer length, up to the longest name spool_name_parse takes. */
    for (size_t plen = 1; plen <= WIRE_PRODUCER_NAME_MAX; plen++) {
        struct seal_index_entry in, out;
        unsigned char buf[SEAL_INDEX_ENTRY_MAX + 8];
        size_t n = 0;
        int len;

        producer_of(plen, producer);
        in = entry(producer, 0x0123456789abcdefull * plen, UINT64_MAX - plen, plen,
                   plen % 2 ? UINT64_MAX : 0);
        len = seal_index_encode(&in, buf);
        assert_int_equal(len, SEAL_INDEX_FIXED + strlen(in.name));
        assert_true((size_t)len <= SEAL_INDEX_ENTRY_MAX);
        memset(&out, 0x5a, sizeof(out));
        assert_int_equal(decode_exact(buf, (size_t)len, &out, &n), 0);
        assert_int_equal(n, len);
        assert_entry_equal(&out, &in);

        /* Bytes after the entry are the next entry's business. */
        memset(buf + len, 0xee, 8);
        n = 0;
        assert_int_equal(seal_index_decode(buf, (size_t)len + 8, &out, &n), 0);
        assert_int_equal(n, len);
        assert_entry_equal(&out, &in);
    }
    /* The longest name is SPOOL_NAME_SIZE - 1 bytes. */
    producer_of(WIRE_PRODUCER_NAME_MAX, producer);
    {
        struct seal_index_entry in = entry(producer, 1, 2, 3, 4);

        assert_int_equal(strlen(in.name), SPOOL_NAME_SIZE - 1);
    }
}

/* The bytes are exactly the layout of the header, so that other readers
 * (and older and newer versions) agree on them. */
static void test_encode_layout(void **state)
{
    struct seal_index_entry e = entry("app", 0xab, 0x1122334455667788ull, 0x0102030405060708ull,
                                      0xf0e0d0c0b0a09080ull);
    static const unsigned char want_head[] = {
        'L', 'S', 'I', 'X',
        36 + 26, 0,
        26, 0,
        0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
        0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,
        0x80, 0x90, 0xa0, 0xb0, 0xc0, 0xd0, 0xe0, 0xf0,
    };
    unsigned char buf[SEAL_INDEX_ENTRY_MAX];
    int len;

    (void)state;
    assert_string_equal(e.name, "app.00000000000000ab.shard");
    len = seal_index_encode(&e, buf);
    assert_int_equal(len, 36 + 26);
    assert_int_equal(SEAL_INDEX_FIXED, 36);
    assert_memory_equal(buf, want_head, sizeof(want_head));
    assert_memory_equal(buf + 32, "app.00000000000000ab.shard", 26);
    assert_int_equal(wire_get_u32(buf + len - 4), crc32c(buf, (size_t)len - 4));
}

static void test_encode_refuses(void **state)
{
    static const char *const refused[] = {
        "",
        "x.tmp",
        "app.0000000000000001.tmp",            /* a shard still being written */
        "app.000000000000000F.shard",          /* the writer prints lowercase */
        "app.000000000000001.shard",           /* 15 digits */
        ".app.0000000000000001.shard",         /* a dotfile */
        ".0000000000000001.shard",             /* no producer */
        "app.0000000000000001.shard.1",        /* quarantined */
        "a b.0000000000000001.shard",
        /* The longest producer, an id of 15 digits. */
        "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn.000000000000001.shard",
        "done.index",
    };
    struct seal_index_entry e;
    unsigned char buf[SEAL_INDEX_ENTRY_MAX];

    (void)state;
    for (size_t i = 0; i < N_ELEMENTS(refused); i++) {
        memset(&e, 0, sizeof(e));
        assert_true(strlen(refused[i]) < sizeof(e.name));
        strcpy(e.name, refused[i]);
        if (seal_index_encode(&e, buf) != -EINVAL)
            fail_msg("'%s' was encoded as a sealed shard's name", refused[i]);
    }
    /* A name that fills the array with no NUL: not read past its end. */
    memset(&e, 0, sizeof(e));
    memset(e.name, 'a', sizeof(e.name));
    assert_int_equal(seal_index_encode(&e, buf), -EINVAL);
    /* The same, with a shard name's tail in the last bytes. */
    memcpy(e.name + sizeof(e.name) - 23, ".0000000000000001.shard", 23);
    assert_int_equal(seal_index_encode(&e, buf), -EINVAL);
}

/* Every prefix shorter than the entry is an entry cut short, not damage:
 * the torn last append of a crash. */
static void test_decode_short(void **state)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    static const size_t plens[] = { 1, 7, 30, WIRE_PRODUCER_NAME_MAX };

    (void)state;
    for (size_t k = 0; k < N_ELEMENTS(plens); k++) {
        struct seal_index_entry in, out;
        unsigned char buf[SEAL_INDEX_ENTRY_MAX];
        int len;

        producer_of(plens[k], producer);
        in = entry(producer, 9, 10, 11, 12);
        len = seal_index_encode(&in, buf);
        assert_true(len > 0);
        for (size_t cut = 0; cut < (size_t)len; cut++) {
            size_t n = 12345;
            int r;

            memset(&out, 0x5a, sizeof(out));
            r = decode_exact(buf, cut, &out, &n);
            if (r != -EAGAIN)
                fail_msg("an entry of %d bytes cut at %zu: %d, not -EAGAIN", len, cut, r);
            assert_int_equal(n, 12345);
        }
    }
}

static void test_decode_refuses(void **state)
{
    struct seal_index_entry in = entry("web-1", 0x42, 1234, 5, 6);
    const char *name = in.name;
    size_t name_len = strlen(name);
    unsigned char good[SEAL_INDEX_ENTRY_MAX], buf[SEAL_INDEX_ENTRY_MAX + 64];
    char long_name[SPOOL_NAME_SIZE + 1];
    int len;

    (void)state;
    len = seal_index_encode(&in, good);
    assert_true(len > 0);

    /* A wrong magic, whole or in its first four bytes alone. */
    for (size_t i = 0; i < 4; i++) {
        memcpy(buf, good, (size_t)len);
        buf[i] ^= 0x20;
        assert_decode_refused(buf, (size_t)len, "wrong magic");
        for (size_t cut = 4; cut < 8; cut++)
            assert_decode_refused(buf, cut, "wrong magic, cut short");
        /* And with a CRC that is right for it. */
        craft(buf, SEAL_INDEX_MAGIC ^ (0x20u << (8 * i)), (uint16_t)(SEAL_INDEX_FIXED + name_len),
              (uint16_t)name_len, name, name_len);
        assert_decode_refused(buf, (size_t)len, "wrong magic, right CRC");
    }

    /* An entry length that does not match the name length. */
    {
        static const int deltas[] = { -36, -1, 1, 4 };

        for (size_t i = 0; i < N_ELEMENTS(deltas); i++) {
            size_t n = craft(buf, SEAL_INDEX_MAGIC,
                             (uint16_t)((int)(SEAL_INDEX_FIXED + name_len) + deltas[i]),
                             (uint16_t)name_len, name, name_len);

            memset(buf + n, 0, 16);
            assert_decode_refused(buf, n + 16, "wrong entry length");
        }
        craft(buf, SEAL_INDEX_MAGIC, 0, (uint16_t)name_len, name, name_len);
        assert_decode_refused(buf, (size_t)len, "entry length 0");
        craft(buf, SEAL_INDEX_MAGIC, 0xffff, (uint16_t)name_len, name, name_len);
        assert_decode_refused(buf, (size_t)len, "entry length 0xffff");
        /* The name length wrong instead, the entry length right. */
        craft(buf, SEAL_INDEX_MAGIC, (uint16_t)(SEAL_INDEX_FIXED + name_len),
              (uint16_t)(name_len - 1), name, name_len);
        assert_decode_refused(buf, (size_t)len, "wrong name length");
    }

    /* A name length of 0, with lengths and CRC that agree. */
    {
        size_t n = craft_name(buf, "", 0);

        assert_int_equal(n, SEAL_INDEX_FIXED);
        assert_decode_refused(buf, n, "name length 0");
    }

    /* A name too long for any shard (SPOOL_NAME_SIZE bytes and more), all
     * else right: the name rule would refuse it too, but the reader's
     * buffer is SPOOL_NAME_SIZE bytes with the NUL. */
    memset(long_name, 'n', sizeof(long_name));
    memcpy(long_name + SPOOL_NAME_SIZE - 23, ".0000000000000001.shard", 23);
    assert_decode_refused(buf, craft_name(buf, long_name, SPOOL_NAME_SIZE), "name too long");
    memcpy(long_name + SPOOL_NAME_SIZE + 1 - 23, ".0000000000000001.shard", 23);
    assert_decode_refused(buf, craft_name(buf, long_name, SPOOL_NAME_SIZE + 1),
                          "name too long by 2");
    assert_decode_refused(buf, craft(buf, SEAL_INDEX_MAGIC, 0xffff, 0xffff - SEAL_INDEX_FIXED,
                                     long_name, 40),
                          "name length 65499");

    /* Any one bit flipped anywhere: magic, lengths, times, name, CRC. */
    for (size_t bit = 0; bit < (size_t)len * 8; bit++) {
        char what[64];

        memcpy(buf, good, (size_t)len);
        buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        snprintf(what, sizeof(what), "bit %zu flipped", bit);
        assert_decode_refused(buf, (size_t)len, what);
    }

    /* A NUL inside the name, the CRC right for it. */
    memcpy(long_name, name, name_len);
    long_name[3] = '\0';
    assert_decode_refused(buf, craft_name(buf, long_name, name_len), "NUL in the name");
    memcpy(long_name, name, name_len);
    long_name[name_len - 1] = '\0';
    assert_decode_refused(buf, craft_name(buf, long_name, name_len), "NUL last in the name");
    assert_decode_refused(buf, craft_name(buf, "\0pp.0000000000000042.shard", 26),
                          "NUL first in the name");
    /* A whole shard name, then a NUL and more: read as a C string it
     * would pass, so the name length must count. */
    assert_decode_refused(buf, craft_name(buf, "app.0000000000000042.shard\0xyz", 30),
                          "NUL after a shard name");

    /* Names that are not a sealed shard's, with lengths and CRC right for
     * each: only the name rule can refuse them. */
    {
        static const char *const names[] = {
            "web-1.0000000000000042.tmp",
            "web-1.0000000000000042.shard.1",
            "web-1.000000000000004G.shard",
            "web-1.00000000000000042.shard",
            ".web1.0000000000000042.shard",
            "web/1.0000000000000042.shard",
            "merged-20240101T120000.123456789Z.lsm",
            "done.index",
            "x",
        };

        for (size_t i = 0; i < N_ELEMENTS(names); i++)
            assert_decode_refused(buf, craft_name(buf, names[i], strlen(names[i])), names[i]);
        /* The same crafting with a good name is taken, so it is the name
         * that the cases above were refused for. */
        {
            struct seal_index_entry out;
            size_t n = 0;
            size_t m = craft_name(buf, name, name_len);

            assert_int_equal(decode_exact(buf, m, &out, &n), 0);
            assert_int_equal(n, m);
            assert_string_equal(out.name, name);
            assert_true(out.inode == 77 && out.created_ns == 1000 && out.newest_ns == 2000);
        }
    }
}

/* The header: "ret_* out-parameters are written only on success". A
 * refused entry must leave *ret as it was, whatever stage refused it. */
static void test_decode_refusal_leaves_ret(void **state)
{
    static const struct {
        const char *name;
        size_t len;
    } cases[] = {
        /* Not a sealed shard's name. */
        { "web-1.0000000000000042.tmp", sizeof("web-1.0000000000000042.tmp") - 1 },
        /* A NUL inside. */
        { "web\0-1.0000000000000042.shard", sizeof("web\0-1.0000000000000042.shard") - 1 },
    };
    unsigned char buf[SEAL_INDEX_ENTRY_MAX];

    (void)state;
    for (size_t i = 0; i < N_ELEMENTS(cases); i++) {
        struct seal_index_entry out, before;
        size_t n = 12345;
        size_t m = craft_name(buf, cases[i].name, cases[i].len);

        memset(&out, 0x5a, sizeof(out));
        before = out;
        assert_int_equal(decode_exact(buf, m, &out, &n), -EBADMSG);
        assert_int_equal(n, 12345);
        if (memcmp(&out, &before, sizeof(out)) != 0)
            fail_msg("case %zu: a refused entry changed *ret (name now \"%.*s\")", i,
                     (int)sizeof(out.name), out.name);
    }
}

/* ---- an index ---- */

/* Parses b and checks that it holds exactly want[0..n), in that order. */
static struct seal_index *parse_expect(const struct bytebuf *b, const struct seal_index_entry *want,
                                       size_t n)
{
    struct seal_index *ix = NULL;
    unsigned char *copy = malloc(b->len ? b->len : 1);

    assert_non_null(copy);
    if (b->len)
        memcpy(copy, b->p, b->len);
    assert_int_equal(seal_index_parse(copy, b->len, &ix), 0);
    free(copy);
    assert_non_null(ix);
    if (seal_index_count(ix) != n)
        fail_msg("%zu entries, not %zu", seal_index_count(ix), n);
    for (size_t i = 0; i < n; i++) {
        assert_entry_equal(seal_index_at(ix, i), &want[i]);
        assert_ptr_equal(seal_index_find(ix, want[i].name, want[i].inode), seal_index_at(ix, i));
    }
    return ix;
}

static void make_entries(struct seal_index_entry *v, size_t n)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];

    for (size_t i = 0; i < n; i++) {
        producer_of(1 + (i * 13) % WIRE_PRODUCER_NAME_MAX, producer);
        v[i] = entry(producer, 1000 + i, 5000 + i * 7, 1700000000000000000ull + i,
                     1700000000000000000ull + i * 2 + 1);
    }
}

static void test_parse_empty(void **state)
{
    struct bytebuf b = { 0 };
    struct seal_index *ix = parse_expect(&b, NULL, 0);
    struct seal_index_entry e = entry("app", 1, 2, 3, 4);

    (void)state;
    assert_null(seal_index_find(ix, e.name, e.inode));
    assert_null(seal_index_find(ix, "", 0));
    seal_index_free(ix);
    seal_index_free(NULL);
}

static void test_parse_several(void **state)
{
    struct seal_index_entry v[7];
    struct bytebuf b = { 0 };
    struct seal_index *ix;

    (void)state;
    make_entries(v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++)
        put_entry(&b, &v[i]);
    ix = parse_expect(&b, v, N_ELEMENTS(v));
    seal_index_free(ix);
    free(b.p);
}

/* The last append torn at every byte: the entries before it stay. */
static void test_parse_torn_tail(void **state)
{
    struct seal_index_entry v[4];
    struct bytebuf b = { 0 };
    size_t whole, last;

    (void)state;
    make_entries(v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++)
        put_entry(&b, &v[i]);
    whole = b.len;
    last = SEAL_INDEX_FIXED + strlen(v[3].name);
    for (size_t cut = 1; cut < last; cut++) {
        b.len = whole - cut;
        seal_index_free(parse_expect(&b, v, 3));
    }
    b.len = whole;
    seal_index_free(parse_expect(&b, v, 4));
    free(b.p);
}

/* A torn entry with whole ones after it: past "a torn append, damage" the
 * header has the reader look for the next magic, so the torn bytes cost
 * only their own entry, whether what follows is longer or shorter than the
 * torn entry announced. */
static void test_parse_torn_then_more(void **state)
{
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    struct seal_index_entry longest, after[3];
    unsigned char torn[SEAL_INDEX_ENTRY_MAX];
    size_t torn_len;

    (void)state;
    producer_of(WIRE_PRODUCER_NAME_MAX, producer);
    longest = entry(producer, 1, 2, 3, 4);
    torn_len = (size_t)seal_index_encode(&longest, torn);
    after[0] = entry("a", 10, 11, 12, 13);
    after[1] = entry("b", 20, 21, 22, 23);
    after[2] = entry("c", 30, 31, 32, 33);
    for (size_t n_after = 1; n_after <= N_ELEMENTS(after); n_after++)
        for (size_t cut = 1; cut < torn_len; cut++) {
            struct bytebuf b = { 0 };
            struct seal_index *ix = NULL;
            size_t found = 0;

            put_bytes(&b, torn, cut);
            for (size_t i = 0; i < n_after; i++)
                put_entry(&b, &after[i]);
            assert_int_equal(seal_index_parse(b.p, b.len, &ix), 0);
            for (size_t i = 0; i < n_after; i++) {
                const struct seal_index_entry *e =
                    seal_index_find(ix, after[i].name, after[i].inode);

                if (e && e->created_ns == after[i].created_ns &&
                    e->newest_ns == after[i].newest_ns)
                    found++;
            }
            found = seal_index_count(ix) == n_after ? found : 0;
            seal_index_free(ix);
            free(b.p);
            if (found != n_after)
                fail_msg("an entry of %zu bytes torn at %zu, then %zu entries of %zu bytes: "
                         "not all of them and only them found",
                         torn_len, cut, n_after, b.len - cut);
        }
}

/* Bytes that are no entry, at the start and between entries: the reader
 * finds the next magic and takes every entry after them. */
static void test_parse_garbage(void **state)
{
    static const unsigned char junk[][24] = {
        "hello, world",
        "LSI", /* a magic cut short */
        "LSIXLSIXLSIX", /* magics with nothing valid behind them */
        { 'L', 'S', 'I', 'X', 0xff, 0xff, 0x30, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 },
        { 0 },
    };
    static const size_t junk_len[] = { 12, 3, 12, 17, 1 };
    struct seal_index_entry v[4];

    (void)state;
    make_entries(v, N_ELEMENTS(v));
    for (size_t j = 0; j < N_ELEMENTS(junk); j++) {
        struct bytebuf b = { 0 };

        /* At the start, between each two entries, and also before the last. */
        for (size_t i = 0; i < N_ELEMENTS(v); i++) {
            put_bytes(&b, junk[j], junk_len[j]);
            put_entry(&b, &v[i]);
        }
        seal_index_free(parse_expect(&b, v, N_ELEMENTS(v)));
        /* Junk at the end costs nothing either. */
        put_bytes(&b, junk[j], junk_len[j]);
        seal_index_free(parse_expect(&b, v, N_ELEMENTS(v)));
        free(b.p);
    }
    /* Nothing but junk. */
    {
        struct bytebuf b = { 0 };

        for (size_t j = 0; j < N_ELEMENTS(junk); j++)
            put_bytes(&b, junk[j], junk_len[j]);
        seal_index_free(parse_expect(&b, NULL, 0));
        free(b.p);
    }
}

/* One bit flipped in an entry in the middle, at every bit of it: that
 * entry is lost, the ones before and after it are not. */
static void test_parse_damaged_middle(void **state)
{
    struct seal_index_entry v[5], rest[4];
    struct bytebuf b = { 0 };
    size_t at = 0, len = 0;

    (void)state;
    make_entries(v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++) {
        size_t n = put_entry(&b, &v[i]);

        if (i == 2)
            len = n;
        else if (i < 2)
            at += n;
    }
    memcpy(rest, v, 2 * sizeof(v[0]));
    memcpy(rest + 2, v + 3, 2 * sizeof(v[0]));
    for (size_t bit = 0; bit < len * 8; bit++) {
        struct seal_index *ix;

        b.p[at + bit / 8] ^= (unsigned char)(1u << (bit % 8));
        ix = parse_expect(&b, rest, 4);
        for (size_t i = 0; i < seal_index_count(ix); i++)
            assert_string_not_equal(seal_index_at(ix, i)->name, v[2].name);
        seal_index_free(ix);
        b.p[at + bit / 8] ^= (unsigned char)(1u << (bit % 8));
    }
    seal_index_free(parse_expect(&b, v, 5));
    free(b.p);
}

/* A shard sealed again under a name (a merge that put a new file there,
 * a rewrite): the last entry for a name is the one that counts. */
static void test_parse_later_wins(void **state)
{
    struct seal_index_entry a = entry("app", 1, 100, 1000, 2000);
    struct seal_index_entry other = entry("web", 2, 200, 3000, 4000);
    struct seal_index_entry a2 = entry("app", 1, 101, 5000, 6000);
    struct seal_index_entry a3 = entry("app", 1, 101, 7000, 8000);
    struct bytebuf b = { 0 };
    struct seal_index *ix = NULL;
    const struct seal_index_entry *e;
    size_t seen = 0;

    (void)state;
    put_entry(&b, &a);
    put_entry(&b, &other);
    put_entry(&b, &a2);
    assert_int_equal(seal_index_parse(b.p, b.len, &ix), 0);
    assert_int_equal(seal_index_count(ix), 2);
    assert_null(seal_index_find(ix, a.name, a.inode));
    e = seal_index_find(ix, a2.name, a2.inode);
    assert_entry_equal(e, &a2);
    assert_entry_equal(seal_index_find(ix, other.name, other.inode), &other);
    /* Walking the index meets the name once, with the later values. */
    for (size_t i = 0; i < seal_index_count(ix); i++)
        if (strcmp(seal_index_at(ix, i)->name, a.name) == 0) {
            assert_entry_equal(seal_index_at(ix, i), &a2);
            seen++;
        }
    assert_int_equal(seen, 1);
    seal_index_free(ix);

    /* The same inode again, other times: the later times. */
    put_entry(&b, &a3);
    assert_int_equal(seal_index_parse(b.p, b.len, &ix), 0);
    assert_int_equal(seal_index_count(ix), 2);
    assert_entry_equal(seal_index_find(ix, a3.name, a3.inode), &a3);
    seal_index_free(ix);
    free(b.p);
}

/* An entry counts only for the file of its name that has its inode. */
static void test_find_needs_inode(void **state)
{
    struct seal_index_entry v[3];
    struct bytebuf b = { 0 };
    struct seal_index *ix;
    char name[SPOOL_NAME_SIZE + 8];

    (void)state;
    make_entries(v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++)
        put_entry(&b, &v[i]);
    ix = parse_expect(&b, v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++) {
        assert_null(seal_index_find(ix, v[i].name, v[i].inode + 1));
        assert_null(seal_index_find(ix, v[i].name, v[i].inode - 1));
        assert_null(seal_index_find(ix, v[i].name, 0));
        /* Another entry's inode under this name. */
        assert_null(seal_index_find(ix, v[i].name, v[(i + 1) % N_ELEMENTS(v)].inode));
        /* Names close to it. */
        snprintf(name, sizeof(name), "%s.1", v[i].name);
        assert_null(seal_index_find(ix, name, v[i].inode));
        snprintf(name, sizeof(name), "%.*s", (int)strlen(v[i].name) - 1, v[i].name);
        assert_null(seal_index_find(ix, name, v[i].inode));
    }
    assert_null(seal_index_find(ix, "", v[0].inode));
    seal_index_free(ix);
    free(b.p);
}

/* Many entries: the table grows many times over, every entry stays
 * findable, and the order is still the file's. */
static void test_parse_many(void **state)
{
    enum { N = 10000 };
    struct seal_index_entry *v = calloc(N, sizeof(*v));
    struct bytebuf b = { 0 };
    struct seal_index *ix;

    (void)state;
    assert_non_null(v);
    make_entries(v, N);
    for (size_t i = 0; i < N; i++)
        put_entry(&b, &v[i]);
    ix = parse_expect(&b, v, N);
    for (size_t i = 0; i < N; i++)
        assert_null(seal_index_find(ix, v[i].name, v[i].inode ^ 1));
    seal_index_free(ix);

    /* All of them again with other inodes: still N entries, the new ones. */
    for (size_t i = 0; i < N; i++) {
        v[i].inode += 1000000;
        put_entry(&b, &v[i]);
    }
    ix = parse_expect(&b, v, N);
    seal_index_free(ix);
    free(b.p);
    free(v);
}

/* ---- the file ---- */

struct tmp {
    char dir[64];
    int dfd;
};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));

    assert_non_null(t);
    strcpy(t->dir, "/tmp/test-seal-index.XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    t->dfd = open(t->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(t->dfd >= 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tmp *t = *state;

    close(t->dfd);
    assert_int_equal(nftw(t->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS), 0);
    free(t);
    return 0;
}

static void write_file(int dir, const char *name, const void *p, size_t n)
{
    int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(write(fd, p, n), (ssize_t)n);
    assert_int_equal(close(fd), 0);
}

/* Loads and expects the error want, with *ret untouched. */
static void assert_load_fails(int dir, int want)
{
    struct seal_index *ix = (struct seal_index *)&ix;
    int r = seal_index_load(dir, &ix);

    if (r != want)
        fail_msg("seal_index_load returned %d (%s), not %d (%s)", r, strerror(-r), want,
                 strerror(-want));
    assert_ptr_equal(ix, (struct seal_index *)&ix);
}

static void test_load_none(void **state)
{
    struct tmp *t = *state;

    assert_load_fails(t->dfd, -ENOENT);
    /* The temp name is not the index. */
    write_file(t->dfd, SEAL_INDEX_TMP, "", 0);
    assert_load_fails(t->dfd, -ENOENT);
}

static void test_load_regular(void **state)
{
    struct tmp *t = *state;
    struct seal_index_entry v[5];
    struct bytebuf b = { 0 };
    struct seal_index *ix = NULL;

    make_entries(v, N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++)
        put_entry(&b, &v[i]);
    put_bytes(&b, "LSIX\x10", 5); /* a torn last append */
    write_file(t->dfd, SEAL_INDEX_FILE, b.p, b.len);
    assert_int_equal(seal_index_load(t->dfd, &ix), 0);
    assert_non_null(ix);
    assert_int_equal(seal_index_count(ix), N_ELEMENTS(v));
    for (size_t i = 0; i < N_ELEMENTS(v); i++) {
        assert_entry_equal(seal_index_at(ix, i), &v[i]);
        assert_ptr_equal(seal_index_find(ix, v[i].name, v[i].inode), seal_index_at(ix, i));
    }
    seal_index_free(ix);
    free(b.p);

    /* An empty file is an empty index. */
    assert_int_equal(unlinkat(t->dfd, SEAL_INDEX_FILE, 0), 0);
    write_file(t->dfd, SEAL_INDEX_FILE, "", 0);
    ix = NULL;
    assert_int_equal(seal_index_load(t->dfd, &ix), 0);
    assert_non_null(ix);
    assert_int_equal(seal_index_count(ix), 0);
    seal_index_free(ix);
}

/* A symbolic link is never followed, even to a good index: whoever can
 * write the spool must not point the reader at another file. */
static void test_load_symlink(void **state)
{
    struct tmp *t = *state;
    struct seal_index_entry e = entry("app", 1, 2, 3, 4);
    struct bytebuf b = { 0 };

    put_entry(&b, &e);
    write_file(t->dfd, "real.index", b.p, b.len);
    free(b.p);
    assert_int_equal(symlinkat("real.index", t->dfd, SEAL_INDEX_FILE), 0);
    assert_load_fails(t->dfd, -EBADFD);
    /* A dangling one, too. */
    assert_int_equal(unlinkat(t->dfd, SEAL_INDEX_FILE, 0), 0);
    assert_int_equal(symlinkat("nowhere", t->dfd, SEAL_INDEX_FILE), 0);
    assert_load_fails(t->dfd, -EBADFD);
}

/* A FIFO is refused without waiting for a writer that never comes. */
static void test_load_fifo(void **state)
{
    struct tmp *t = *state;

    assert_int_equal(mkfifoat(t->dfd, SEAL_INDEX_FILE, 0600), 0);
    /* Should the open block, the alarm ends the test instead of letting it
     * hang until meson's timeout. */
    alarm(10);
    assert_load_fails(t->dfd, -EBADFD);
    alarm(0);
}

static void test_load_directory(void **state)
{
    struct tmp *t = *state;

    assert_int_equal(mkdirat(t->dfd, SEAL_INDEX_FILE, 0700), 0);
    assert_load_fails(t->dfd, -EISDIR);
}

/* Larger than SEAL_INDEX_FILE_MAX: refused before anything is read (the
 * file is sparse, so this costs no disk). */
static void test_load_too_large(void **state)
{
    struct tmp *t = *state;
    int fd = openat(t->dfd, SEAL_INDEX_FILE, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)SEAL_INDEX_FILE_MAX + 1), 0);
    assert_int_equal(close(fd), 0);
    assert_load_fails(t->dfd, -EFBIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_encode_layout),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_decode_short),
        cmocka_unit_test(test_decode_refuses),
        cmocka_unit_test(test_decode_refusal_leaves_ret),
        cmocka_unit_test(test_parse_empty),
        cmocka_unit_test(test_parse_several),
        cmocka_unit_test(test_parse_torn_tail),
        cmocka_unit_test(test_parse_torn_then_more),
        cmocka_unit_test(test_parse_garbage),
        cmocka_unit_test(test_parse_damaged_middle),
        cmocka_unit_test(test_parse_later_wins),
        cmocka_unit_test(test_find_needs_inode),
        cmocka_unit_test(test_parse_many),
        cmocka_unit_test_setup_teardown(test_load_none, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_regular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_too_large, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
