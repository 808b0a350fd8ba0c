/* Positions per stream for logctl verify. Each stream keeps its positions
 * as sorted, disjoint, non-adjacent ranges: records of one shard arrive in
 * position order, so a healthy stream is one range however many records it
 * has, and every further range is a gap that will be reported anyway. A
 * lookup of the range a position falls into is a binary search; the range
 * the last record extended is tried first, which is where the next record
 * of the same shard belongs.
 *
 * A shard seen again under the same id (the copy of a done/ shard in a
 * merged file that was made without --delete) holds the same records, not
 * duplicates: its positions are added to the ranges but never counted as
 * seen twice. */
#include "verify-streams.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"
#include "json.h"

#define GAPS_SHOWN 10 /* per stream; the totals count them all */

struct range {
    uint64_t lo, hi; /* inclusive */
};

struct verify_stream {
    uint8_t id[SHARD_STREAM_ID_SIZE];
    struct range *ranges;
    size_t n_ranges, cap_ranges, hint;
    uint64_t *shard_ids; /* sorted */
    size_t n_shards, cap_shards;
    uint64_t records;    /* positions seen, copies included */
    uint64_t duplicates; /* positions seen twice in different shards */
    uint64_t dup_position;
    char *dup_path; /* where the first duplicate was found */
    uint64_t dup_offset;
};

struct verify_streams {
    struct verify_stream **v; /* sorted by id */
    size_t n, cap;
};

int verify_streams_new(struct verify_streams **ret)
{
    struct verify_streams *vs = calloc(1, sizeof(*vs));

    if (!vs)
        return -ENOMEM;
    *ret = vs;
    return 0;
}

void verify_streams_free(struct verify_streams *vs)
{
    if (!vs)
        return;
    for (size_t i = 0; i < vs->n; i++) {
        free(vs->v[i]->ranges);
        free(vs->v[i]->shard_ids);
        free(vs->v[i]->dup_path);
        free(vs->v[i]);
    }
    free(vs->v);
    free(vs);
}

/* Makes room for one more element in *arr (of n, cap *cap). */
static int reserve(void **arr, size_t n, size_t *cap, size_t elem)
{
    size_t want;
    void *nv;

    if (n < *cap)
        return 0;
    want = *cap ? *cap * 2 : 8;
    nv = reallocarray(*arr, want, elem);
    if (!nv)
        return -ENOMEM;
    *arr = nv;
    *cap = want;
    return 0;
}

/* The stream with this id, made when it is new. */
static int find_stream(struct verify_streams *vs, const uint8_t *id, struct verify_stream **ret)
{
    size_t lo = 0, hi = vs->n;
    struct verify_stream *s;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = memcmp(vs->v[mid]->id, id, SHARD_STREAM_ID_SIZE);

        if (c == 0) {
            *ret = vs->v[mid];
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (reserve((void **)&vs->v, vs->n, &vs->cap, sizeof(*vs->v)) < 0)
        return -ENOMEM;
    s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    memcpy(s->id, id, SHARD_STREAM_ID_SIZE);
    memmove(vs->v + lo + 1, vs->v + lo, (vs->n - lo) * sizeof(*vs->v));
    vs->v[lo] = s;
    vs->n++;
    *ret = s;
    return 0;
}

int verify_streams_shard(struct verify_streams *vs, const struct shard_header *h,
                         struct verify_stream **ret, bool *ret_copy)
{
    struct verify_stream *s;
    size_t lo = 0, hi;
    int r;

    if (!shard_header_has_stream(h)) {
        *ret = NULL;
        *ret_copy = false;
        return 0;
    }
    r = find_stream(vs, h->stream_id, &s);
    if (r < 0)
        return r;
    hi = s->n_shards;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (s->shard_ids[mid] == h->shard_id) {
            *ret = s;
            *ret_copy = true;
            return 0;
        }
        if (s->shard_ids[mid] < h->shard_id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (reserve((void **)&s->shard_ids, s->n_shards, &s->cap_shards, sizeof(*s->shard_ids)) < 0)
        return -ENOMEM;
    memmove(s->shard_ids + lo + 1, s->shard_ids + lo, (s->n_shards - lo) * sizeof(uint64_t));
    s->shard_ids[lo] = h->shard_id;
    s->n_shards++;
    *ret = s;
    *ret_copy = false;
    return 0;
}

/* Adds p, which lies in no range, at index i (the first range above p),
 * joining the ranges it touches. */
static int insert_position(struct verify_stream *s, size_t i, uint64_t p)
{
    bool joins_prev = i > 0 && s->ranges[i - 1].hi + 1 == p;
    bool joins_next = i < s->n_ranges && s->ranges[i].lo == p + 1;

    if (joins_prev && joins_next) {
        s->ranges[i - 1].hi = s->ranges[i].hi;
        memmove(s->ranges + i, s->ranges + i + 1, (s->n_ranges - i - 1) * sizeof(*s->ranges));
        s->n_ranges--;
        s->hint = i - 1;
    } else if (joins_prev) {
        s->ranges[i - 1].hi = p;
        s->hint = i - 1;
    } else if (joins_next) {
        s->ranges[i].lo = p;
        s->hint = i;
    } else {
        if (reserve((void **)&s->ranges, s->n_ranges, &s->cap_ranges, sizeof(*s->ranges)) < 0)
            return -ENOMEM;
        memmove(s->ranges + i + 1, s->ranges + i, (s->n_ranges - i) * sizeof(*s->ranges));
        s->ranges[i] = (struct range){ p, p };
        s->n_ranges++;
        s->hint = i;
    }
    return 0;
}

int verify_streams_record(struct verify_stream *s, bool copy, uint64_t position,
                          const char *path, uint64_t offset)
{
    size_t lo = 0, hi = s->n_ranges;

    s->records++;
    /* The common case: the next position after the last one. */
    if (s->hint < s->n_ranges && s->ranges[s->hint].hi + 1 == position &&
        (s->hint + 1 == s->n_ranges || s->ranges[s->hint + 1].lo > position + 1)) {
        s->ranges[s->hint].hi = position;
        return 0;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;

        if (s->ranges[mid].lo <= position)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* lo is the first range starting above position. */
    if (lo > 0 && position <= s->ranges[lo - 1].hi) {
        if (copy)
            return 0;
        if (s->duplicates++ == 0) {
            s->dup_position = position;
            s->dup_offset = offset;
            s->dup_path = strdup(path);
            if (!s->dup_path)
                return -ENOMEM;
        }
        return 0;
    }
    return insert_position(s, lo, position);
}

static uint64_t missing(const struct verify_stream *s, uint64_t *ret_gaps)
{
    uint64_t total = 0;

    for (size_t i = 1; i < s->n_ranges; i++)
        total += s->ranges[i].lo - s->ranges[i - 1].hi - 1;
    *ret_gaps = s->n_ranges ? s->n_ranges - 1 : 0;
    return total;
}

static void report_json(const struct verify_stream *s, const char *hex)
{
    struct json_out o;
    char *text = NULL;
    size_t len;
    uint64_t gaps, lost = missing(s, &gaps);

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_str(&o, "stream", hex);
    json_member_bool(&o, "ok", gaps == 0 && s->duplicates == 0);
    json_member_u64(&o, "first", s->ranges[0].lo);
    json_member_u64(&o, "last", s->ranges[s->n_ranges - 1].hi);
    json_member_u64(&o, "missing", lost);
    json_member_u64(&o, "duplicates", s->duplicates);
    if (gaps > 0) {
        json_key(&o, "gaps");
        json_arr_begin(&o);
        for (size_t i = 1; i < s->n_ranges && i <= GAPS_SHOWN; i++) {
            json_obj_begin(&o);
            json_member_u64(&o, "from", s->ranges[i - 1].hi + 1);
            json_member_u64(&o, "to", s->ranges[i].lo - 1);
            json_obj_end(&o);
        }
        json_arr_end(&o);
    }
    if (s->duplicates > 0) {
        json_key(&o, "duplicate");
        json_obj_begin(&o);
        json_member_u64(&o, "position", s->dup_position);
        json_member_str(&o, "file", s->dup_path);
        json_member_u64(&o, "offset", s->dup_offset);
        json_obj_end(&o);
    }
    json_obj_end(&o);
    json_raw(&o, "\n", 1);
    if (json_out_finish(&o, &text, &len) == 0) {
        fputs(text, stdout);
        free(text);
    }
}

static void report_text(const struct verify_stream *s, const char *hex)
{
    uint64_t gaps, lost = missing(s, &gaps);
    uint64_t first = s->ranges[0].lo, last = s->ranges[s->n_ranges - 1].hi;

    if (gaps == 0 && s->duplicates == 0) {
        printf("OK       stream %s: positions %" PRIu64 " to %" PRIu64 "\n", hex, first, last);
        return;
    }
    for (size_t i = 1; i < s->n_ranges && i <= GAPS_SHOWN; i++)
        printf("GAP      stream %s: positions %" PRIu64 " to %" PRIu64
               " missing (it has %" PRIu64 " to %" PRIu64 ")\n",
               hex, s->ranges[i - 1].hi + 1, s->ranges[i].lo - 1, first, last);
    if (gaps > GAPS_SHOWN)
        printf("         (and %" PRIu64 " more gaps; %" PRIu64 " positions missing in all)\n",
               gaps - GAPS_SHOWN, lost);
    if (s->duplicates > 0)
        printf("DUPLICATE stream %s: %" PRIu64 " position%s seen in two shards, the first, %" PRIu64
               ", again in %s at offset %" PRIu64 "\n",
               hex, s->duplicates, s->duplicates == 1 ? "" : "s", s->dup_position, s->dup_path,
               s->dup_offset);
}

size_t verify_streams_report(const struct verify_streams *vs, bool json, bool quiet)
{
    size_t bad = 0;

    for (size_t i = 0; i < vs->n; i++) {
        const struct verify_stream *s = vs->v[i];
        char hex[LOGCTL_STREAM_TEXT_MAX];
        bool ok = s->n_ranges <= 1 && s->duplicates == 0;

        if (s->n_ranges == 0)
            continue; /* shards without records: no position to check */
        if (!ok)
            bad++;
        if (quiet && ok)
            continue;
        logctl_format_stream(s->id, hex, sizeof(hex));
        if (json)
            report_json(s, hex);
        else
            report_text(s, hex);
    }
    return bad;
}
