/* Start-up: the stream table rebuilt from the spool, after recovery has
 * sealed what an earlier run left in active/ and before the daemon listens:
 * from the shards in done/ and from the positions logctl merge --delete
 * recorded in streams/ for the shards it removed.
 *
 * Every sealed shard of format version 3 in done/ names its stream and the
 * position of its first record; the seal trailer gives its record count, so
 * a shard costs two small reads: its header and its last 32 bytes (a shard
 * without a valid trailer is read through). The spool is trusted over any
 * acknowledgement: after a crash of the daemon alone, the page cache kept
 * what it wrote, so the spool may hold records its producer never saw
 * acknowledged, and a resume must not write them again. */
#include "streams-scan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "fileutil.h"
#include "log.h"
#include "shard_format.h"
#include "spool_names.h"
#include "stream_positions.h"
#include "streams.h"

static int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            return -ENODATA;
        got += (size_t)n;
    }
    return 0;
}

/* The record count and newest time from the seal trailer at the end of a
 * file of size bytes. Returns 0, or a negative errno when there is no
 * valid trailer. */
static int read_trailer(int fd, uint64_t size, struct shard_trailer *ret)
{
    unsigned char tail[SHARD_TRAILER_TAIL], head[8];
    const char *why;
    uint32_t n;
    int r;

    if (size < SHARD_TRAILER_MIN)
        return -EBADMSG;
    r = pread_full(fd, tail, sizeof(tail), size - SHARD_TRAILER_TAIL);
    if (r < 0)
        return r;
    n = wire_get_u32(tail + SHARD_TRAILER_TAIL - 8);
    if (n < SHARD_TRAILER_MIN || n > size)
        return -EBADMSG;
    r = pread_full(fd, head, sizeof(head), size - n);
    if (r < 0)
        return r;
    return shard_decode_trailer_ends(head, tail, size, ret, &why);
}

/* Reads the shard through: its records as far as they are whole, and the
 * newest receive time among them. */
static int count_records(int fd, uint64_t *ret_records, uint64_t *ret_newest)
{
    struct shard_reader *rd;
    struct shard_item it;
    uint64_t records = 0, newest = 0;
    int r = shard_reader_new(&rd, fd);

    if (r < 0)
        return r;
    while ((r = shard_reader_next(rd, &it)) > 0) {
        if (it.kind == SHARD_ITEM_HEADER && records > 0)
            break; /* a done/ shard is one shard; anything after is not ours */
        if (it.kind == SHARD_ITEM_RECORD) {
            records++;
            if (it.timestamp_ns > newest)
                newest = it.timestamp_ns;
        }
    }
    shard_reader_free(rd);
    *ret_records = records;
    *ret_newest = newest;
    return 0;
}

/* One file of done/: its stream's position, if it has a stream. */
static int scan_one(struct daemon *d, const char *name, struct streams_scan_stats *st)
{
    unsigned char buf[SHARD_HEADER_MAX];
    struct shard_header h;
    struct shard_trailer t;
    struct stat sb;
    const char *why;
    uint64_t records, newest;
    mode_t mode;
    ssize_t n;
    int fd, r;

    r = open_regular_at(d->done_fd, name, O_NOFOLLOW, &fd, &mode);
    if (r < 0)
        return r == -EBADFD || r == -EISDIR ? 0 : r; /* not a shard: recovery said so */
    do
        n = pread(fd, buf, sizeof(buf), 0);
    while (n < 0 && errno == EINTR);
    if (n < 0) {
        r = -errno;
        goto out;
    }
    r = shard_decode_header(buf, (size_t)n, &h, &why);
    if (r < 0 || !shard_header_has_stream(&h)) {
        r = 0; /* no stream to remember (or not a shard: recovery reported it) */
        goto out;
    }
    if (fstat(fd, &sb) < 0) {
        r = -errno;
        goto out;
    }
    if (read_trailer(fd, (uint64_t)sb.st_size, &t) == 0) {
        records = t.records;
        newest = t.newest_ns;
    } else {
        r = count_records(fd, &records, &newest);
        if (r < 0)
            goto out;
        st->read_through++;
    }
    st->shards++;
    /* A shard that holds no record says nothing of the positions before
     * its first. */
    if (records > 0)
        r = streams_note_stored(d, h.stream_id, h.producer, h.uid, h.first_position + records,
                                newest ? newest : h.created_ns);
out:
    (void)close(fd); /* read only */
    return r;
}

struct kept_positions {
    struct daemon *d;
    struct positions_entry *v;
    size_t n, cap;
    uint64_t expired;
};

/* One entry of a positions file: into the table, and kept for the file the
 * daemon writes unless its resume window has passed. */
static int take_position(const struct positions_entry *e, void *arg)
{
    struct kept_positions *k = arg;
    uint64_t window = k->d->config.resume_window_ms * UINT64_C(1000000);
    int r;

    if (e->newest_ns + window <= now_realtime_ns()) {
        k->expired++;
        return 0;
    }
    r = streams_note_stored(k->d, e->stream_id, e->producer, e->uid, e->next_position,
                            e->newest_ns);
    if (r < 0)
        return r;
    if (k->n == k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 64;
        struct positions_entry *nv = realloc(k->v, cap * sizeof(*nv));

        if (!nv)
            return -ENOMEM;
        k->v = nv;
        k->cap = cap;
    }
    k->v[k->n++] = *e;
    return 0;
}

/* The positions that logctl merge --delete recorded in <spool>/streams/
 * for the shards it removed. What is still within its window is written
 * into one file of the daemon's own before the files read are removed, so
 * that a crash at any step loses nothing (a file read twice is harmless:
 * the table keeps the highest position); a damaged file goes to
 * quarantine/. */
static int load_positions(struct daemon *d, struct streams_scan_stats *st, char *why,
                          size_t why_len)
{
    struct kept_positions k = { .d = d };
    struct positions_load_report rep = { 0 };
    int r = positions_load(d->spool_fd, take_position, &k, &rep);

    if (r < 0) {
        snprintf(why, why_len, "cannot read the stream positions in %s/streams: %s",
                 d->config.spool, strerror(-r));
        free(k.v);
        return r;
    }
    st->positions_files = rep.n_read;
    st->positions_expired = k.expired;
    for (size_t i = 0; i < rep.n_bad; i++) {
        const struct positions_bad_file *b = &rep.bad[i];
        char *q = NULL;

        if (b->error == -EBADMSG && positions_quarantine(d->spool_fd, b->name, &q) == 0) {
            log_warning("streams/%s is no stream positions file (line %zu: %s); moved to "
                        "quarantine/%s: a stream it named may resume too low and write "
                        "records twice",
                        b->name, b->line, b->why, q);
            free(q);
        } else {
            log_warning("streams/%s cannot be read (%s: %s); left in place: a stream it "
                        "names may resume too low",
                        b->name, b->why ? b->why : "error", strerror(-b->error));
        }
    }
    /* One file of the daemon's, nothing expired, nothing left over: it
     * already is what would be written. */
    if (rep.n_read > 1 || k.expired > 0 || rep.n_temps > 0 ||
        (rep.n_read == 1 && strncmp(rep.read[0], "daemon-", 7) != 0)) {
        char *name = NULL;

        r = k.n > 0 ? positions_write(d->spool_fd, "daemon", k.v, k.n, &name) : 0;
        if (r == 0)
            r = positions_remove(d->spool_fd, (const char *const *)rep.read, rep.n_read);
        if (r == 0)
            r = positions_remove(d->spool_fd, (const char *const *)rep.temps, rep.n_temps);
        if (r < 0)
            log_warning("cannot compact the stream positions of %s/streams: %s; the files "
                        "stay and are read again at the next start",
                        d->config.spool, strerror(-r));
        free(name);
    }
    positions_load_report_free(&rep);
    free(k.v);
    return 0;
}

int streams_scan(struct daemon *d, struct streams_scan_stats *ret_stats, char *why,
                 size_t why_len)
{
    struct streams_scan_stats st = { 0 };
    struct dirent *e;
    DIR *dir;
    int r;

    r = opendir_at(d->done_fd, &dir);
    if (r < 0) {
        snprintf(why, why_len, "cannot read %s/done: %s", d->config.spool, strerror(-r));
        return r;
    }
    while ((errno = 0, e = readdir(dir))) {
        struct spool_name sn;

        if (spool_name_parse(e->d_name, SPOOL_SHARD, &sn) < 0)
            continue;
        r = scan_one(d, e->d_name, &st);
        if (r == -ENOMEM) {
            snprintf(why, why_len, "out of memory for the stream table");
            break;
        }
        if (r < 0) {
            /* One unreadable shard: its stream may resume too low. Said,
             * and counted, not fatal: recovery has already judged it. */
            st.unreadable++;
            if (st.first_unreadable[0] == '\0')
                snprintf(st.first_unreadable, sizeof(st.first_unreadable), "done/%.256s: %.200s",
                         e->d_name, strerror(-r));
            r = 0;
        }
    }
    if (r == 0 && errno != 0) {
        r = -errno;
        snprintf(why, why_len, "cannot read %s/done: %s", d->config.spool, strerror(-r));
    }
    (void)closedir(dir);
    if (r < 0)
        return r;
    r = load_positions(d, &st, why, why_len);
    if (r < 0)
        return r;
    streams_loaded(d);
    st.streams = d->streams.count;
    if (ret_stats)
        *ret_stats = st;
    return 0;
}
