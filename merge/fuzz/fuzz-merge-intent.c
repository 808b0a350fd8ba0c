/* Fuzz target for the merge intent parser (merge/merge-intent.c): the text
 * of <spool>/merge.intent, which decides after a killed merge whether its
 * output is kept and which sources --delete removes.
 *
 * Input: the whole file, passed to merge_intent_parse as it is (a heap
 * block of exactly its size, so a read past the end is an ASan report).
 * The CRC32C line that guards a real intent would stop nearly every input
 * at the checksum, so each input is also parsed a second time with its last
 * line replaced by a correct "end" line over everything before it: that
 * reaches the field checks, which are what a hand edit meets.
 *
 * Contracts beyond "no crash": the result is 0, -EBADMSG (with a reason)
 * or -ENOMEM; on failure *ret is untouched, on success the reason is. What
 * is accepted is what recovery may act on: an absolute directory, output
 * and temp plain names in it and not the same, every source name one that
 * merge_parse_source_name accepts with the same producer and id, producers
 * in byte order with no name twice, sizes that add up to the recorded total, and no
 * file descriptor. And it is what merge_intent_format writes: formatting it
 * gives a text no longer than the input (only leading zeros can be
 * dropped), which parses to the same intent and formats to itself. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "fuzz.h"
#include "merge-internal.h"

static bool plain_name(const char *s)
{
    return *s && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static void check_same(const struct merge_intent *a, const struct merge_intent *b)
{
    FUZZ_CHECK(a->delete_sources == b->delete_sources);
    FUZZ_CHECK(strcmp(a->dir, b->dir) == 0);
    FUZZ_CHECK(strcmp(a->output, b->output) == 0);
    FUZZ_CHECK(strcmp(a->temp, b->temp) == 0);
    FUZZ_CHECK(a->bytes == b->bytes);
    FUZZ_CHECK(a->n_sources == b->n_sources);
    for (size_t i = 0; i < a->n_sources; i++) {
        FUZZ_CHECK(strcmp(a->sources[i].name, b->sources[i].name) == 0);
        FUZZ_CHECK(a->sources[i].bytes == b->sources[i].bytes);
    }
}

static void check_accepted(const struct merge_intent *in, size_t size)
{
    uint64_t sum = 0;
    char *text, *again;
    size_t len, len2;
    struct merge_intent back;

    FUZZ_CHECK(in->dir && in->output && in->temp);
    FUZZ_CHECK(in->dir[0] == '/');
    FUZZ_CHECK(plain_name(in->output) && plain_name(in->temp));
    FUZZ_CHECK(strcmp(in->output, in->temp) != 0);
    FUZZ_CHECK((in->n_sources == 0) == (in->sources == NULL));
    for (size_t i = 0; i < in->n_sources; i++) {
        const struct merge_source *s = &in->sources[i];
        char producer[WIRE_PRODUCER_NAME_MAX + 1];
        uint64_t id;

        FUZZ_CHECK(merge_parse_source_name(s->name, producer, &id) == 0);
        FUZZ_CHECK(strcmp(producer, s->producer) == 0 && id == s->id);
        FUZZ_CHECK(s->fd == -1);
        FUZZ_CHECK(i == 0 || strcmp(in->sources[i - 1].producer, s->producer) <= 0);
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(merge_source_cmp(&in->sources[j], s) != 0);
        FUZZ_CHECK(sum + s->bytes >= sum);
        sum += s->bytes;
    }
    FUZZ_CHECK(sum == in->bytes);

    FUZZ_CHECK(merge_intent_format(in->delete_sources, in->dir, in->output, in->temp,
                                   in->sources, in->n_sources, &text, &len) == 0);
    FUZZ_CHECK(len <= size);
    FUZZ_CHECK(merge_intent_parse(text, len, &back, NULL) == 0);
    check_same(in, &back);
    FUZZ_CHECK(merge_intent_format(back.delete_sources, back.dir, back.output, back.temp,
                                   back.sources, back.n_sources, &again, &len2) == 0);
    FUZZ_CHECK(len2 == len && memcmp(again, text, len) == 0);
    merge_intent_free(&back);
    free(again);
    free(text);
}

static void parse_one(const char *buf, size_t size)
{
    struct merge_intent in, untouched;
    const char *why = "untouched";
    int r;

    memset(&in, 0xa5, sizeof(in));
    untouched = in;
    r = merge_intent_parse(buf, size, &in, &why);
    FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
    if (r < 0) {
        FUZZ_CHECK(memcmp(&in, &untouched, sizeof(in)) == 0);
        if (r == -EBADMSG)
            FUZZ_CHECK(why && *why && strcmp(why, "untouched") != 0);
        return;
    }
    FUZZ_CHECK(strcmp(why, "untouched") == 0);
    check_accepted(&in, size);
    merge_intent_free(&in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char end[sizeof("end 00000000\n")];
    const char *nl;
    size_t body, len;
    char *fixed;

    parse_one(buf, size);

    /* The same with a correct checksum: everything up to the last
     * newline but one is the body. Again in a block of exactly its size. */
    nl = size >= 2 ? memrchr(buf, '\n', size - 1) : NULL;
    body = nl ? (size_t)(nl - buf) + 1 : 0;
    snprintf(end, sizeof(end), "end %08" PRIx32 "\n", crc32c(buf, body));
    len = body + sizeof(end) - 1;
    fixed = malloc(len);
    FUZZ_CHECK(fixed);
    memcpy(fixed, buf, body);
    memcpy(fixed + body, end, sizeof(end) - 1);
    parse_one(fixed, len);
    free(fixed);
    return 0;
}
