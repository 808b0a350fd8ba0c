/* logctl cat --json: one JSON object per record, on a line of its own.
 *
 * A client's record (no syslog message to read, a UTF-8 payload), by far
 * the most common, is written from two texts its shard's header fixes,
 * made once per shard: from the opening brace up to the time's opening
 * quote, and from its closing quote up to the position's value (null
 * included, for a shard without a stream). A record then costs a few
 * copies and the escaping of its payload; built member by member, its
 * object escaped nine names and four strings of the header again for every
 * record, half of the time of cat --json on a big spool. Every other record
 * is built member by member. Both give the same bytes for a client's
 * record (tests/test-shard-v4-cat.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cat.h"
#include "json.h"
#include "shard_format.h"
#include "text.h"

/* A record's time as --json prints it, RFC 3339 with nanoseconds. The
 * date and time of day are formatted once per second of receive time (the
 * records of a shard mostly share a second), the nanoseconds each time. */
static void format_when(uint64_t ns, char *when, size_t size)
{
    static uint64_t cached_sec = UINT64_MAX;
    static char cached[64];
    static size_t cached_len; /* up to the '.' */
    uint64_t sec = ns / 1000000000u, frac = ns % 1000000000u;

    if (sec != cached_sec) {
        char *dot;

        if (rfc3339_format(ns, 9, cached, sizeof(cached)) < 0 ||
            !(dot = strchr(cached, '.'))) {
            cached_sec = UINT64_MAX;
            snprintf(when, size, "@%" PRIu64 "ns", ns);
            return;
        }
        cached_sec = sec;
        cached_len = (size_t)(dot - cached);
    }
    if (size < cached_len + 12) {
        snprintf(when, size, "@%" PRIu64 "ns", ns);
        return;
    }
    memcpy(when, cached, cached_len);
    when[cached_len] = '.';
    for (int i = 9; i >= 1; i--) {
        when[cached_len + (size_t)i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    when[cached_len + 10] = 'Z';
    when[cached_len + 11] = '\0';
}

/* The texts of a client record's object that its shard's header fixes. */
struct shard_texts {
    bool valid;
    struct shard_header of; /* the header they were made from */
    struct json_out before_time, after_time;
};

static bool same_shard_fields(const struct shard_header *a, const struct shard_header *b)
{
    return a->shard_id == b->shard_id && a->uid == b->uid && a->gid == b->gid &&
           a->pid == b->pid && a->producer_len == b->producer_len &&
           memcmp(a->producer, b->producer, a->producer_len) == 0 &&
           memcmp(a->stream_id, b->stream_id, SHARD_STREAM_ID_SIZE) == 0;
}

static void shard_texts_make(struct shard_texts *t, const struct shard_header *h)
{
    char text[160];
    int n;

    json_out_reset(&t->before_time);
    json_raw(&t->before_time, "{\"producer\":", 12);
    /* The first value of a fresh buffer: no comma goes before it. */
    json_str(&t->before_time, h->producer, h->producer_len);
    n = snprintf(text, sizeof(text),
                 ",\"uid\":%" PRIu32 ",\"gid\":%" PRIu32 ",\"pid\":%" PRIu32 ",\"time\":\"",
                 h->uid, h->gid, h->pid);
    json_raw(&t->before_time, text, (size_t)n);
    json_out_reset(&t->after_time);
    if (shard_header_has_stream(h)) {
        char stream[LOGCTL_STREAM_TEXT_MAX];

        logctl_format_stream(h->stream_id, stream, sizeof(stream));
        n = snprintf(text, sizeof(text),
                     "\",\"shard\":\"%016" PRIx64 "\",\"stream\":\"%s\",\"position\":",
                     h->shard_id, stream);
    } else {
        n = snprintf(text, sizeof(text),
                     "\",\"shard\":\"%016" PRIx64 "\",\"stream\":null,\"position\":null",
                     h->shard_id);
    }
    json_raw(&t->after_time, text, (size_t)n);
    t->of = *h;
    t->valid = true;
}

/* A client's record, its payload UTF-8, into o (reset), from its shard's
 * texts. Returns 0 or -ENOMEM. */
static int client_object(struct json_out *o, const struct shard_item *item, const char *when)
{
    static struct shard_texts t;
    const char *before, *after;
    size_t before_len, after_len;

    if (!t.valid || !same_shard_fields(&t.of, item->header))
        shard_texts_make(&t, item->header);
    if (json_out_peek(&t.before_time, &before, &before_len) < 0 ||
        json_out_peek(&t.after_time, &after, &after_len) < 0) {
        t.valid = false; /* a failed allocation: made afresh next time */
        return -ENOMEM;
    }
    json_raw(o, before, before_len);
    json_raw(o, when, strlen(when));
    json_raw(o, after, after_len);
    if (shard_header_has_stream(item->header)) {
        char digits[24];

        json_raw(o, digits, (size_t)snprintf(digits, sizeof(digits), "%" PRIu64, item->position));
    }
    json_raw(o, ",\"payload\":", 11);
    /* The one value written through the writer: the first of o, so no
     * comma goes before it. */
    json_str(o, item->payload, item->len);
    json_raw(o, "}\n", 2);
    return 0;
}

/* Any record into o (reset), member by member; utf8: its payload is
 * UTF-8. Returns 0 or -ENOMEM. */
static int member_object(struct json_out *o, const struct shard_item *item,
                         const struct syslog_msg *sm, const char *when, bool utf8)
{
    static uint64_t hex_of = UINT64_MAX;
    static char hex[17];

    if (item->header->shard_id != hex_of || hex_of == UINT64_MAX) {
        snprintf(hex, sizeof(hex), "%016" PRIx64, item->header->shard_id);
        hex_of = item->header->shard_id;
    }
    json_obj_begin(o);
    json_member_str(o, "producer", item->header->producer);
    json_member_u64(o, "uid", item->header->uid);
    json_member_u64(o, "gid", item->header->gid);
    json_member_u64(o, "pid", item->header->pid);
    json_member_str(o, "time", when);
    json_member_str(o, "shard", hex);
    /* Present in every object, null for a shard without a stream, so that
     * a consumer sees one shape whatever version the shard has. */
    json_key(o, "stream");
    if (shard_header_has_stream(item->header)) {
        char stream[LOGCTL_STREAM_TEXT_MAX];

        logctl_format_stream(item->header->stream_id, stream, sizeof(stream));
        json_cstr(o, stream);
        json_member_u64(o, "position", item->position);
    } else {
        json_null(o);
        json_key(o, "position");
        json_null(o);
    }
    /* Only for the other inputs, so that a client's records print exactly
     * as before version 4; within a shard of another input every object has
     * both members. */
    if (item->header->source != SHARD_SOURCE_CLIENT) {
        char num[16];

        json_member_str(o, "source", cat_source_text(item->header->source, num, sizeof(num)));
        json_key(o, "credentials");
        if (item->has_creds) {
            json_obj_begin(o);
            json_member_u64(o, "pid", item->creds.pid);
            json_member_u64(o, "uid", item->creds.uid);
            json_member_u64(o, "gid", item->creds.gid);
            json_obj_end(o);
        } else {
            json_null(o);
        }
    }
    if (sm)
        cat_syslog_json(o, sm);
    if (utf8) {
        json_key(o, "payload");
        json_str(o, item->payload, item->len);
    } else {
        char *b64 = malloc(base64_encoded_len(item->len) + 1);

        if (!b64)
            return -ENOMEM;
        base64_encode(item->payload, item->len, b64);
        json_member_str(o, "payload_base64", b64);
        free(b64);
    }
    json_obj_end(o);
    json_raw(o, "\n", 1);
    return 0;
}

int cat_print_json(const struct shard_item *item, const struct syslog_msg *sm)
{
    /* One buffer for every record: formatting allocates nothing once it
     * has grown to the largest record. */
    static struct json_out o;
    bool utf8 = utf8_valid(item->payload, item->len);
    char when[64];
    const char *text;
    size_t len;
    int r;

    format_when(item->timestamp_ns, when, sizeof(when));
    json_out_reset(&o);
    if (item->header->source == SHARD_SOURCE_CLIENT && !sm && utf8)
        r = client_object(&o, item, when);
    else
        r = member_object(&o, item, sm, when, utf8);
    if (r < 0)
        return r;
    r = json_out_peek(&o, &text, &len);
    if (r < 0) {
        json_out_free(&o); /* a failed allocation: start afresh next time */
        return r;
    }
    if (fwrite(text, 1, len, stdout) != len)
        r = errno ? -errno : -EIO;
    return r;
}
