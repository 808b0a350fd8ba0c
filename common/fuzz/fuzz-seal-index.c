/* Fuzz target for common/seal_index.c: the reader of <spool>/done.index,
 * a file anyone who can write the spool can fill with anything, and whose
 * entries make logctl cat pass over shards unread.
 *
 * Input: the bytes of an index file. The parser takes any bytes: it
 * returns 0 (or -ENOMEM) and holds only entries a writer could have
 * written: each encodes again to bytes that decode to itself, and is the
 * one seal_index_find gives for its name and inode. Every entry costs at
 * least SEAL_INDEX_FIXED bytes and a byte of name, which bounds the count.
 * The decoder, at the start of the input, takes an entry only within the
 * bytes it was given, and only one whose encoding is as long as what it
 * read; -EAGAIN and -EBADMSG are its only refusals, and a refusal writes
 * no length. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "seal_index.h"

/* e encodes, and its bytes decode back to e at their full length. */
static void check_round_trip(const struct seal_index_entry *e)
{
    unsigned char buf[SEAL_INDEX_ENTRY_MAX];
    struct seal_index_entry back;
    size_t back_len = 0;
    int n = seal_index_encode(e, buf);

    FUZZ_CHECK(n > (int)SEAL_INDEX_FIXED && n <= (int)SEAL_INDEX_ENTRY_MAX);
    FUZZ_CHECK((size_t)n == SEAL_INDEX_FIXED + strlen(e->name));
    FUZZ_CHECK(seal_index_decode(buf, (size_t)n, &back, &back_len) == 0);
    FUZZ_CHECK(back_len == (size_t)n);
    FUZZ_CHECK(strcmp(back.name, e->name) == 0);
    FUZZ_CHECK(back.inode == e->inode);
    FUZZ_CHECK(back.created_ns == e->created_ns);
    FUZZ_CHECK(back.newest_ns == e->newest_ns);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct seal_index *ix = NULL;
    struct seal_index_entry e;
    size_t len = 12345;
    int r;

    if (size > SEAL_INDEX_FILE_MAX)
        return 0;

    r = seal_index_decode(data, size, &e, &len);
    if (r == 0) {
        unsigned char buf[SEAL_INDEX_ENTRY_MAX];

        FUZZ_CHECK(len > SEAL_INDEX_FIXED && len <= size && len <= SEAL_INDEX_ENTRY_MAX);
        FUZZ_CHECK(seal_index_encode(&e, buf) == (int)len);
        /* What was taken is exactly what a writer writes for it. */
        FUZZ_CHECK(memcmp(buf, data, len) == 0);
        check_round_trip(&e);
    } else {
        FUZZ_CHECK(r == -EAGAIN || r == -EBADMSG);
        FUZZ_CHECK(len == 12345);
    }

    r = seal_index_parse(data, size, &ix);
    if (r == -ENOMEM)
        return 0;
    FUZZ_CHECK(r == 0 && ix != NULL);
    FUZZ_CHECK(seal_index_count(ix) <= size / (SEAL_INDEX_FIXED + 1));
    /* An entry at the start is one the parser takes too (or a later one
     * for its name). */
    if (len != 12345)
        FUZZ_CHECK(seal_index_count(ix) >= 1);
    for (size_t i = 0; i < seal_index_count(ix); i++) {
        const struct seal_index_entry *at = seal_index_at(ix, i);

        FUZZ_CHECK(at != NULL);
        check_round_trip(at);
        /* Found as itself, not as another entry: so no name is held twice. */
        FUZZ_CHECK(seal_index_find(ix, at->name, at->inode) == at);
    }
    seal_index_free(ix);
    return 0;
}
