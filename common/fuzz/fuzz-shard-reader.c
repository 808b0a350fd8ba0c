/* Fuzz target for the shard and merged-file reader in common/shard_format.c,
 * the one logctl cat, the merge checks and recovery share.
 *
 * Input: the whole file. It is written to a memfd and read with
 * shard_reader_next until the end or an error, as `logctl cat` does. Beyond
 * "no crash", the reader's contract is checked: every item lies inside the
 * file and its bytes are the file's bytes, items come back to back from
 * offset 0, the valid prefix (shard_reader_valid_end) never passes the file
 * size and ends exactly at the file size after a clean end, and an error is
 * sticky and reported at the valid end. Recovery truncates a torn shard to
 * that valid end, so a wrong value there would cut acknowledged records.
 *
 * Then the same file is read again as logctl cat and verify salvage it,
 * skipping every damage with shard_reader_skip_damage: items and skipped
 * spans then tile the file exactly (each skip begins where the last item
 * ended and reading goes on where it ends), every skip makes progress, so
 * the loop ends after at most one skip per byte, and a trailer after a
 * skipped record counts it. The growing mode (cat --follow) is run too: it
 * may stop earlier with -EAGAIN but must not return anything else.
 *
 * In both passes each record of a shard with a stream (version 3 or 4)
 * must carry the position first_position + its index in the shard, skipped
 * records counted, and a record of a shard without one position 0. A
 * record's credentials (version 4) must be the file's bytes after its
 * timestamp when its length field has the flag, and absent (all zero)
 * otherwise; the payload never includes them. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "shard_format.h"

static void check_header_item(const struct shard_item *it, const uint8_t *data, size_t size)
{
    const struct shard_header *h = it->header;

    static const uint8_t none[SHARD_STREAM_ID_SIZE];
    size_t name_at = SHARD_HEADER_FIXED;

    FUZZ_CHECK(h && it->payload == NULL && it->len == 0 && it->position == 0);
    FUZZ_CHECK(h->version >= SHARD_FORMAT_VERSION_MIN && h->version <= SHARD_FORMAT_VERSION_MAX);
    FUZZ_CHECK(h->producer_len >= 1 && h->producer_len <= WIRE_PRODUCER_NAME_MAX);
    FUZZ_CHECK(h->header_len == shard_header_size_v(h->version, h->producer_len));
    FUZZ_CHECK(h->header_len <= SHARD_HEADER_MAX);
    FUZZ_CHECK(it->offset <= size && h->header_len <= size - it->offset);
    FUZZ_CHECK(memcmp(data + it->offset, SHARD_MAGIC, SHARD_MAGIC_SIZE) == 0);
    FUZZ_CHECK(h->first_position < SHARD_POSITION_LIMIT);
    if (h->version >= SHARD_FORMAT_VERSION_STREAM) {
        FUZZ_CHECK(memcmp(data + it->offset + SHARD_HEADER_FIXED, h->stream_id,
                          SHARD_STREAM_ID_SIZE) == 0);
        FUZZ_CHECK(wire_get_u64(data + it->offset + SHARD_HEADER_FIXED + SHARD_STREAM_ID_SIZE) ==
                   h->first_position);
        name_at += SHARD_HEADER_STREAM;
    } else {
        /* Older versions have no stream. */
        FUZZ_CHECK(memcmp(h->stream_id, none, sizeof(none)) == 0 && h->first_position == 0);
    }
    if (h->version >= SHARD_FORMAT_VERSION_SOURCE) {
        /* A source other than a client's, and no flags. */
        FUZZ_CHECK(h->source != SHARD_SOURCE_CLIENT);
        FUZZ_CHECK(wire_get_u16(data + it->offset + name_at) == h->source);
        FUZZ_CHECK(wire_get_u16(data + it->offset + name_at + 2) == 0);
        name_at += SHARD_HEADER_SOURCE;
    } else {
        FUZZ_CHECK(h->source == SHARD_SOURCE_CLIENT);
    }
    FUZZ_CHECK(shard_header_has_stream(h) == (memcmp(h->stream_id, none, sizeof(none)) != 0));
    FUZZ_CHECK(shard_header_has_stream(h) || h->first_position == 0);
    FUZZ_CHECK(strlen(h->producer) == h->producer_len);
    FUZZ_CHECK(memcmp(data + it->offset + name_at, h->producer, h->producer_len) == 0);
    FUZZ_CHECK(wire_check_producer_name(h->producer, h->producer_len) == 0);
    {
        /* It encodes back to the same bytes. */
        unsigned char again[SHARD_HEADER_MAX];

        FUZZ_CHECK(h->version == 1 || shard_encode_header(again, h) == h->header_len);
        FUZZ_CHECK(h->version == 1 || memcmp(again, data + it->offset, h->header_len) == 0);
    }
}

/* A record's position: its shard's first position plus the records of the
 * shard before it (index), with a stream; 0 without. */
static void check_position(const struct shard_item *it, uint64_t index)
{
    if (shard_header_has_stream(it->header))
        FUZZ_CHECK(it->position == it->header->first_position + index);
    else
        FUZZ_CHECK(it->position == 0);
}

/* The bytes a record item takes in the file. */
static uint64_t record_size(const struct shard_item *it)
{
    return shard_record_size(it->len, it->has_creds);
}

static void check_record_item(const struct shard_item *it, const uint8_t *data, size_t size)
{
    static const struct shard_creds no_creds;
    uint64_t body;

    FUZZ_CHECK(it->header && it->payload);
    FUZZ_CHECK(it->len >= 1 && it->len <= SHARD_RECORD_MAX);
    FUZZ_CHECK(it->offset <= size && record_size(it) <= size - it->offset);
    body = record_size(it) - it->len;
    FUZZ_CHECK(wire_get_u64(data + it->offset + 8) == it->timestamp_ns);
    FUZZ_CHECK(memcmp(data + it->offset + body, it->payload, it->len) == 0);
    if (it->has_creds) {
        /* Only version 4 has them, flagged in the length field. */
        FUZZ_CHECK(it->header->version >= SHARD_FORMAT_VERSION_SOURCE);
        FUZZ_CHECK(wire_get_u32(data + it->offset) == (it->len | SHARD_RECORD_FLAG_CREDS));
        FUZZ_CHECK(wire_get_u32(data + it->offset + SHARD_RECORD_HEADER) == it->creds.pid);
        FUZZ_CHECK(wire_get_u32(data + it->offset + SHARD_RECORD_HEADER + 4) == it->creds.uid);
        FUZZ_CHECK(wire_get_u32(data + it->offset + SHARD_RECORD_HEADER + 8) == it->creds.gid);
    } else {
        FUZZ_CHECK(wire_get_u32(data + it->offset) == it->len);
        FUZZ_CHECK(memcmp(&it->creds, &no_creds, sizeof(no_creds)) == 0);
    }
    /* The CRC covers every byte but its own, credentials included. */
    FUZZ_CHECK(shard_record_crc(data + it->offset, it->payload, it->len) ==
               wire_get_u32(data + it->offset + 4));
}

/* Headers and trailers carry nothing of a record's. */
static void check_not_record(const struct shard_item *it)
{
    static const struct shard_creds no_creds;

    FUZZ_CHECK(!it->has_creds && memcmp(&it->creds, &no_creds, sizeof(no_creds)) == 0);
    FUZZ_CHECK(it->payload == NULL && it->timestamp_ns == 0 && it->position == 0);
}

/* A trailer ends its shard: it is only ever followed by a header or the end. */
static void check_trailer_item(const struct shard_item *it, const uint8_t *data, size_t size,
                               uint64_t shard_start, uint64_t shard_records)
{
    const struct shard_trailer *t = it->trailer;

    FUZZ_CHECK(it->header && it->header->version >= 2 && t);
    FUZZ_CHECK(it->len == t->trailer_len && it->len >= SHARD_TRAILER_MIN &&
               it->len < SHARD_TRAILER_MAX);
    FUZZ_CHECK(it->offset <= size && it->len <= size - it->offset);
    FUZZ_CHECK(wire_get_u32(data + it->offset) == SHARD_TRAILER_MARKER);
    FUZZ_CHECK(t->shard_len == it->offset - shard_start);
    FUZZ_CHECK(t->records == shard_records);
    for (uint32_t i = 8; i < it->len - SHARD_TRAILER_TAIL; i++)
        FUZZ_CHECK(data[it->offset + i] == 0);
}

/* Reads the whole file through, skipping damage; flags as for
 * shard_reader_skip_damage. */
static void salvage(int fd, const uint8_t *data, size_t size, unsigned flags, bool active)
{
    struct shard_reader *r = NULL;
    struct shard_item it;
    struct shard_skip skip;
    uint64_t expect = 0, records = 0, shard_start = 0, shard_records = 0;
    uint64_t skips = 0;
    bool sealed = false, in_shard = false;
    int rc;

    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    FUZZ_CHECK(shard_reader_new(&r, fd) == 0 && r);
    if (active)
        shard_reader_set_active(r);
    for (;;) {
        memset(&it, 0xa5, sizeof(it));
        rc = shard_reader_next(r, &it);
        if (rc < 0) {
            FUZZ_CHECK(rc == -EBADMSG || rc == -ENODATA);
            memset(&skip, 0xa5, sizeof(skip));
            rc = shard_reader_skip_damage(r, flags, &skip);
            if (rc == -EAGAIN) {
                FUZZ_CHECK(flags & SHARD_SKIP_GROWING);
                /* The reader stays where it was, error and all. */
                FUZZ_CHECK(shard_reader_valid_end(r) == expect);
                break;
            }
            FUZZ_CHECK(rc == 0 || rc == 1);
            FUZZ_CHECK(++skips <= size + 1);
            FUZZ_CHECK(skip.offset == expect);
            FUZZ_CHECK(skip.why && *skip.why);
            FUZZ_CHECK(skip.bytes <= size - expect);
            FUZZ_CHECK(skip.bytes > 0 || (size == 0 && rc == 0));
            FUZZ_CHECK(skip.records <= 1);
            FUZZ_CHECK(skip.records == 0 || (!skip.resync && skip.in_shard && in_shard));
            if (skip.in_shard)
                FUZZ_CHECK(in_shard &&
                           wire_check_producer_name(skip.header.producer,
                                                    skip.header.producer_len) == 0);
            if (skip.records == 1)
                FUZZ_CHECK(skip.position ==
                           (shard_header_has_stream(&skip.header)
                                ? skip.header.first_position + shard_records
                                : 0));
            else
                FUZZ_CHECK(skip.position == 0);
            expect += skip.bytes;
            shard_records += skip.records;
            FUZZ_CHECK(shard_reader_valid_end(r) == expect);
            if (rc == 0) {
                FUZZ_CHECK(expect == size);
                FUZZ_CHECK(shard_reader_next(r, &it) == 0);
                break;
            }
            if (skip.resync) {
                /* A valid shard header is next. */
                FUZZ_CHECK(size - expect >= SHARD_MAGIC_SIZE &&
                           memcmp(data + expect, SHARD_MAGIC, SHARD_MAGIC_SIZE) == 0);
                in_shard = false;
            }
            continue;
        }
        if (rc == 0) {
            FUZZ_CHECK(expect == size);
            break;
        }
        FUZZ_CHECK(rc == 1 && it.offset == expect);
        if (it.kind != SHARD_ITEM_RECORD)
            check_not_record(&it);
        if (it.kind == SHARD_ITEM_HEADER) {
            check_header_item(&it, data, size);
            expect += it.header->header_len;
            shard_start = it.offset;
            shard_records = 0;
            sealed = false;
            in_shard = true;
        } else if (it.kind == SHARD_ITEM_TRAILER) {
            FUZZ_CHECK(in_shard && !sealed);
            check_trailer_item(&it, data, size, shard_start, shard_records);
            expect += it.len;
            sealed = true;
            in_shard = false;
        } else {
            FUZZ_CHECK(it.kind == SHARD_ITEM_RECORD && in_shard && !sealed);
            check_record_item(&it, data, size);
            check_position(&it, shard_records);
            expect += record_size(&it);
            records++;
            shard_records++;
        }
        FUZZ_CHECK(shard_reader_valid_end(r) == expect);
        FUZZ_CHECK(shard_reader_records(r) == records);
    }
    shard_reader_free(r);
}

/* Reads the file again as an active shard (shard_reader_set_active): zeros
 * and records ending in zeros never make an item valid, so the items are
 * the same and the reader stops at the same offset, at most calling the
 * stop -ENODATA where the first pass found -EBADMSG. Continuing there
 * reads the same bytes anew and stops again the same way. */
static void read_active(int fd, size_t size, int want_rc, uint64_t want_end, uint64_t want_records)
{
    struct shard_reader *r = NULL;
    struct shard_item it;
    uint64_t offset;
    const char *why;
    int rc;

    FUZZ_CHECK(lseek(fd, 0, SEEK_SET) == 0);
    FUZZ_CHECK(shard_reader_new(&r, fd) == 0 && r);
    shard_reader_set_active(r);
    while ((rc = shard_reader_next(r, &it)) == 1)
        FUZZ_CHECK(it.offset < size);
    FUZZ_CHECK(shard_reader_valid_end(r) == want_end);
    FUZZ_CHECK(shard_reader_records(r) == want_records);
    FUZZ_CHECK(rc == want_rc || (rc == -ENODATA && want_rc == -EBADMSG));
    if (rc == -ENODATA) {
        FUZZ_CHECK(shard_reader_continue(r) == 0);
        FUZZ_CHECK(shard_reader_next(r, &it) == -ENODATA);
        shard_reader_error(r, &offset, &why);
        FUZZ_CHECK(offset == want_end && why && *why);
    }
    shard_reader_free(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct shard_reader *r = NULL;
    struct shard_item it;
    uint64_t expect = 0, records = 0, err_offset;
    uint64_t shard_start = 0, shard_records = 0;
    bool sealed = false;
    const char *why;
    int fd = fuzz_memfd_with(data, size);
    int rc;

    FUZZ_CHECK(shard_reader_new(&r, fd) == 0 && r);
    for (;;) {
        uint64_t item_size;

        memset(&it, 0xa5, sizeof(it));
        rc = shard_reader_next(r, &it);
        if (rc <= 0)
            break;
        FUZZ_CHECK(rc == 1);
        /* Items are back to back from offset 0: nothing is skipped. */
        FUZZ_CHECK(it.offset == expect);
        if (it.kind != SHARD_ITEM_RECORD)
            check_not_record(&it);
        if (it.kind == SHARD_ITEM_HEADER) {
            check_header_item(&it, data, size);
            item_size = it.header->header_len;
            shard_start = it.offset;
            shard_records = 0;
            sealed = false;
        } else if (it.kind == SHARD_ITEM_TRAILER) {
            FUZZ_CHECK(expect > 0 && !sealed);
            check_trailer_item(&it, data, size, shard_start, shard_records);
            item_size = it.len;
            sealed = true;
        } else {
            FUZZ_CHECK(it.kind == SHARD_ITEM_RECORD);
            FUZZ_CHECK(expect > 0); /* a shard header always comes first */
            FUZZ_CHECK(!sealed);
            check_record_item(&it, data, size);
            check_position(&it, shard_records);
            item_size = record_size(&it);
            records++;
            shard_records++;
        }
        expect += item_size;
        FUZZ_CHECK(shard_reader_valid_end(r) == expect);
        FUZZ_CHECK(shard_reader_records(r) == records);
    }

    FUZZ_CHECK(shard_reader_valid_end(r) <= size);
    FUZZ_CHECK(shard_reader_valid_end(r) == expect);
    FUZZ_CHECK(shard_reader_records(r) == records);
    shard_reader_error(r, &err_offset, &why);
    FUZZ_CHECK(err_offset == expect);
    if (rc == 0) {
        /* A clean end means the whole file was read as valid items. */
        FUZZ_CHECK(expect == size && size > 0);
        FUZZ_CHECK(why == NULL);
    } else {
        FUZZ_CHECK(rc == -EBADMSG || rc == -ENODATA);
        FUZZ_CHECK(why && *why);
        FUZZ_CHECK(expect < size || rc == -ENODATA);
        /* The error is sticky, and later calls say the same. */
        FUZZ_CHECK(shard_reader_next(r, &it) == rc);
        FUZZ_CHECK(shard_reader_valid_end(r) == expect);
    }
    shard_reader_free(r);
    read_active(fd, size, rc, expect, records);
    salvage(fd, data, size, 0, false);
    salvage(fd, data, size, SHARD_SKIP_GROWING, false);
    salvage(fd, data, size, SHARD_SKIP_GROWING, true);
    return 0;
}
