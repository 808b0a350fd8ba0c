/* Fuzz target for common/stream_positions.c: the strict parser of the
 * stream positions file, which the daemon trusts at start to decide which
 * records it accepts again, and the formatter whose text it must read back.
 *
 * Input: the bytes of a file. Whatever the parser accepts must be what a
 * writer could have written: entries sorted by stream id with no stream
 * twice, each one positions_entry_valid; formatted again, they give an
 * input without duplicates back at its length, parse back to the same
 * entries, and that text formats to itself (the formatter and
 * the parser agree on one canonical text). Whatever it refuses is
 * -EBADMSG with a line inside the file (or just after its last line) and
 * a reason, and leaves the result's out-parameters untouched. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "stream_positions.h"

static size_t count_lines(const uint8_t *data, size_t size)
{
    size_t n = 0;

    for (size_t i = 0; i < size; i++)
        n += data[i] == '\n';
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct positions_entry *v = (struct positions_entry *)&v, *w = NULL;
    size_t n = 12345, wn = 0, line = 0, len = 0, len2 = 0;
    const char *why = NULL;
    char *text = NULL, *text2 = NULL;
    int r;

    if (size > POSITIONS_FILE_MAX)
        return 0;
    r = positions_parse((const char *)data, size, &v, &n, &line, &why);
    if (r < 0) {
        FUZZ_CHECK(r == -EBADMSG);
        FUZZ_CHECK(why != NULL && why[0] != '\0');
        FUZZ_CHECK(line >= 1 && line <= count_lines(data, size) + 1);
        FUZZ_CHECK(v == (struct positions_entry *)&v && n == 12345);
        return 0;
    }
    FUZZ_CHECK((n == 0) == (v == NULL));
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(positions_entry_valid(&v[i]));
        if (i > 0)
            FUZZ_CHECK(memcmp(v[i - 1].stream_id, v[i].stream_id, SHARD_STREAM_ID_SIZE) < 0);
    }
    FUZZ_CHECK(positions_format(v, n, &text, &len) == 0);
    /* One line per stream plus the header and the end line. Every field has
     * one spelling, so an input without a stream twice is the same lines,
     * perhaps in another order: the same length, and the same bytes when
     * its streams were in order. */
    FUZZ_CHECK(count_lines((const uint8_t *)text, len) == n + 2);
    if (count_lines(data, size) == n + 2)
        FUZZ_CHECK(len == size);
    FUZZ_CHECK(positions_parse(text, len, &w, &wn, &line, &why) == 0);
    FUZZ_CHECK(wn == n);
    for (size_t i = 0; i < n; i++) {
        FUZZ_CHECK(memcmp(w[i].stream_id, v[i].stream_id, SHARD_STREAM_ID_SIZE) == 0);
        FUZZ_CHECK(w[i].next_position == v[i].next_position);
        FUZZ_CHECK(w[i].newest_ns == v[i].newest_ns);
        FUZZ_CHECK(w[i].uid == v[i].uid);
        FUZZ_CHECK(strcmp(w[i].producer, v[i].producer) == 0);
    }
    FUZZ_CHECK(positions_format(w, wn, &text2, &len2) == 0);
    FUZZ_CHECK(len2 == len && memcmp(text2, text, len) == 0);
    free(text);
    free(text2);
    free(v);
    free(w);
    return 0;
}
