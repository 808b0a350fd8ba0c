/* logctl cat: prints the records of shard and merged files, or of a whole
 * spool, one per line, or one JSON object per line.
 *
 * It reads through the same shard reader as merge and recovery, so what cat
 * prints is exactly what the rest of the project considers valid. Damage
 * costs only the damage: the reader skips a bad record alone when its
 * framing holds, else resynchronises at the next shard header of a merged
 * file (shard_reader_skip_damage), and cat names the file, offset, shard
 * and bytes of every skip on stderr, after what was printed before it, and
 * exits 1. Skips are never written to standard output, not even with
 * --json: it carries records only. A file that is not a regular file (a
 * FIFO, a device) is never opened for reading, which could block forever;
 * it is reported and skipped. Payloads are written as they are (binary-safe); a payload
 * that itself contains '\n' therefore spans lines, which is the documented
 * price of the plain line format. --json has no such price: every payload
 * is one JSON string, or base64 when it is not UTF-8.
 *
 * Without FILE it reads the spool: the sealed shards of done/ and the ones
 * being written in active/ (up to their last complete record; a torn tail
 * there is a write in progress, not damage), by producer and then shard id,
 * which is each producer's order of arrival. Files and spool alike, each
 * producer stream is printed in position order across its shards
 * (cat-order.c); --follow prints what arrives as it arrives. --since and --until select by
 * the daemon's receive time; --follow (follow.c) keeps printing what
 * arrives. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cat.h"
#include "fileutil.h"
#include "logctl.h"
#include "seal_index.h"
#include "shard_format.h"
#include "spool_names.h"

#define MAX_PRODUCERS 64

static void cat_help(void)
{
    printf("Usage: logctl cat [OPTIONS] FILE...\n"
           "       logctl cat [OPTIONS] [--spool DIR | --config FILE]\n"
           "       logctl cat --follow [--producer NAME] [--spool DIR] [--json|--meta]\n"
           "\n"
           "Print the records of each shard or merged FILE to standard output: the\n"
           "payload exactly as stored, then '\\n'. Without FILE, print the records of\n"
           "the spool: its sealed shards (done/) and the shards being written\n"
           "(active/, up to their last complete record), by producer, then in the\n"
           "order they were received. Each producer stream is printed in the order\n"
           "of its positions across all the files and shards read.\n"
           "\n"
           "With --meta, each line starts with\n"
           "  <producer> <time> <shard id> <stream> <position> \n"
           "where <time> is the daemon's receive time in UTC, RFC 3339 with\n"
           "microseconds (2024-05-01T12:34:56.123456Z), <shard id> the 16 hex\n"
           "digits of the file name, <stream> the 32 hex digits of the producer's\n"
           "stream and <position> the record's position in it (both '-' for a shard\n"
           "without a stream); the five are separated by single spaces and a space\n"
           "separates them from the payload. A record of a shard that another input\n"
           "than a client wrote (format version 4: the syslog inputs) has four more\n"
           "before the payload:\n"
           "  source=<source> pid=<pid> uid=<uid> gid=<gid> \n"
           "where <source> is syslog-datagram, syslog-stream, or the number of a\n"
           "source this logctl does not know, and pid, uid and gid are the sender's\n"
           "credentials the kernel gave with the record ('-' each when the record\n"
           "carries none). A syslog record then has the fields of its message:\n"
           "  facility=<f> severity=<s> identifier=<i> procid=<p> hostname=<h> time=<t> \n"
           "('-' for what the message does not have; <t> is the message's own\n"
           "timestamp in UTC).\n"
           "\n"
           "With --json, each record is one JSON object on one line:\n"
           "  {\"producer\":..,\"uid\":..,\"gid\":..,\"pid\":..,\"time\":..,\"shard\":..,\n"
           "   \"stream\":..,\"position\":..,\"payload\":..}\n"
           "time is RFC 3339 in UTC with nanoseconds; stream (32 hex digits) and\n"
           "position (a number) are null for a shard without a stream; payload is\n"
           "the record as a string, or \"payload_base64\" instead when the record is\n"
           "not valid UTF-8. A record of a shard that another input than a client\n"
           "wrote has two more members before the payload: \"source\" (a string, as\n"
           "for --meta) and \"credentials\", {\"pid\":..,\"uid\":..,\"gid\":..} from the\n"
           "kernel, or null when the record carries none; a syslog record also has\n"
           "\"syslog\": {\"format\":..,\"facility\":..,\"severity\":..,\"identifier\":..,\n"
           "\"procid\":..,\"hostname\":..,\"msgid\":..,\"time\":..,\"structured_data\":..}\n"
           "(format rfc5424, rfc3164 or none; null for what the message lacks).\n"
           "\n"
           "Options:\n"
           "  -p, --producer NAME   only records of producer NAME (may be repeated)\n"
           "  -S, --since TIME      only records received at or after TIME\n"
           "  -U, --until TIME      only records received at or before TIME\n"
           "  -m, --meta            prefix each record with its producer, time, shard,\n"
           "                        stream and position\n"
           "  -j, --json            one JSON object per record\n"
           "      --priority LEVEL  only syslog records of severity LEVEL or more\n"
           "                        important (0-7 or emerg, alert, crit, err, warning,\n"
           "                        notice, info, debug), or of a range FROM..TO, as\n"
           "                        journalctl -p takes it\n"
           "  -t, --identifier ID   only syslog records of identifier ID (the program\n"
           "                        name in the message; may be repeated)\n"
           "  -f, --follow          keep printing the records appended to the active\n"
           "                        shards (of --producer, else of every producer) from\n"
           "                        now on, like tail -f, following each producer into\n"
           "                        its next shard; stop with Ctrl-C\n"
           "  -s, --spool DIR       the spool to read without FILE, and for --follow\n"
           "                        (default: [daemon] spool of the config file, else\n"
           "                        /var/lib/logshard)\n"
           "  -c, --config FILE     the daemon's config file, to find the spool\n"
           "  -h, --help            show this help\n"
           "\n"
           "TIME is what journalctl takes: \"2026-12-01 10:00\", \"2026-12-01 10:00:30\",\n"
           "\"10:00\" (today), \"today\", \"yesterday\", \"now\", relative \"-1h\", \"-30m\",\n"
           "\"-2d\", \"1h ago\", or \"@UNIXTIME\"; local time unless it ends in Z or UTC.\n"
           "\n"
           "Damage costs only the damaged records: a bad record is skipped alone when\n"
           "its framing holds, otherwise reading resumes at the next shard of a merged\n"
           "file. Every skip is reported on standard error with the file, offset,\n"
           "shard, bytes skipped and reason, and cat goes on. A FIFO, device or\n"
           "directory where a shard should be is reported and skipped, never read.\n"
           "Exit status: 0 all files valid, 1 a file was missing, damaged or not a\n"
           "regular file, or output failed, 2 usage error or the spool could not be\n"
           "read for lack of permission.\n");
}

bool cat_wants_producer(const struct cat_opts *o, const char *producer)
{
    if (o->n_producers == 0)
        return true;
    for (size_t i = 0; i < o->n_producers; i++)
        if (strcmp(o->producers[i], producer) == 0)
            return true;
    return false;
}

/* The source of a shard as cat shows it: its name, or its number when this
 * logctl does not know it (a later input), so that the output still says
 * the records are not a client's. */
const char *cat_source_text(unsigned source, char *buf, size_t size)
{
    const char *name = shard_source_name(source);

    if (name)
        return name;
    snprintf(buf, size, "%u", source);
    return buf;
}

int cat_print_record(const struct cat_opts *o, const struct shard_item *item)
{
    struct syslog_msg parsed, *sm = NULL;

    if (item->timestamp_ns < o->since_ns || item->timestamp_ns > o->until_ns ||
        !cat_wants_producer(o, item->header->producer))
        return 0;
    /* The message is parsed only when something is to be made of it: the
     * payload is printed as received either way. */
    if (shard_source_is_syslog(item->header->source) &&
        (o->meta || o->json || cat_syslog_filtering(&o->syslog))) {
        syslog_msg_parse((const char *)item->payload, item->len, item->timestamp_ns, &parsed);
        sm = &parsed;
    }
    if (!cat_syslog_wanted(sm, &o->syslog))
        return 0;
    errno = 0;
    if (o->json)
        return cat_print_json(item, sm);
    if (o->meta) {
        char when[64], stream[LOGCTL_STREAM_TEXT_MAX];

        if (rfc3339_format(item->timestamp_ns, 6, when, sizeof(when)) < 0)
            snprintf(when, sizeof(when), "@%" PRIu64 "ns", item->timestamp_ns);
        logctl_format_shard_stream(item->header, stream, sizeof(stream));
        printf("%s %s %016" PRIx64 " %s ", item->header->producer, when,
               item->header->shard_id, stream);
        if (shard_header_has_stream(item->header))
            printf("%" PRIu64 " ", item->position);
        else
            printf("- ");
        /* As in --json: nothing more for a client's records. */
        if (item->header->source != SHARD_SOURCE_CLIENT) {
            char num[16];

            printf("source=%s ", cat_source_text(item->header->source, num, sizeof(num)));
            if (item->has_creds)
                printf("pid=%" PRIu32 " uid=%" PRIu32 " gid=%" PRIu32 " ", item->creds.pid,
                       item->creds.uid, item->creds.gid);
            else
                printf("pid=- uid=- gid=- ");
        }
        if (sm)
            cat_syslog_print_meta(stdout, sm);
    }
    if (fwrite(item->payload, 1, item->len, stdout) != item->len || putchar('\n') == EOF)
        return errno ? -errno : -EIO;
    return 0;
}

/* cat_read, for a reader that may read a range of the file: more_after
 * says the range ends before the file does, at the next shard's header, so
 * that damage that runs to the end of the range is told as running up to
 * that header, as a reader of the whole file would tell it. */
static int cat_read_range(struct shard_reader *reader, const char *path,
                          const struct cat_opts *o, unsigned skip_flags, bool print,
                          bool more_after, bool *ret_damaged, int *ret_out_err);

int cat_read(struct shard_reader *reader, const char *path, const struct cat_opts *o,
             unsigned skip_flags, bool print, bool *ret_damaged, int *ret_out_err)
{
    return cat_read_range(reader, path, o, skip_flags, print, false, ret_damaged, ret_out_err);
}

static int cat_read_range(struct shard_reader *reader, const char *path,
                          const struct cat_opts *o, unsigned skip_flags, bool print,
                          bool more_after, bool *ret_damaged, int *ret_out_err)
{
    struct shard_item item;
    struct shard_skip skip;
    int r;

    for (;;) {
        char what[LOGCTL_SKIP_TEXT_MAX];

        r = shard_reader_next(reader, &item);
        if (r > 0) {
            if (item.kind != SHARD_ITEM_RECORD || !print)
                continue;
            r = cat_print_record(o, &item);
            if (r < 0) {
                *ret_out_err = -r;
                return r;
            }
            continue;
        }
        if (r == 0)
            return 0;
        if (r == -ENODATA && (skip_flags & SHARD_SKIP_GROWING))
            return r; /* being written */
        if (r == -EBADMSG || r == -ENODATA)
            r = shard_reader_skip_damage(reader, skip_flags, &skip);
        if (r == -EAGAIN)
            return r;
        /* What was valid goes out before the complaint about what was not. */
        fflush(stdout);
        if (r < 0) {
            uint64_t off;
            const char *why;

            shard_reader_error(reader, &off, &why);
            fprintf(stderr, "logctl: cat: %s: %s at offset %" PRIu64 ": %s\n", path,
                    why ? why : "error", off, strerror(-r));
            return r;
        }
        logctl_describe_skip(&skip, r == 0 && !more_after, what, sizeof(what));
        fprintf(stderr, "logctl: cat: %s: %s\n", path, what);
        *ret_damaged = true;
        if (r == 0)
            return 1;
    }
}

int cat_shard_range(int fd, const char *path, const struct cat_opts *o, bool active,
                    uint64_t offset, uint64_t len, int *ret_out_err)
{
    struct shard_reader *reader = NULL;
    bool damaged = false, more_after = false;
    struct stat st;
    int r;

    if (len != UINT64_MAX && fstat(fd, &st) == 0)
        more_after = offset + len < (uint64_t)st.st_size;
    if (len == UINT64_MAX) {
        /* From the start, whatever fd's offset: an index pass may have
         * read through the same file description. */
        r = lseek(fd, 0, SEEK_SET) < 0 && errno != ESPIPE ? -errno : 0;
        if (r == 0)
            r = shard_reader_new(&reader, fd);
    } else {
        r = shard_reader_new_range(&reader, fd, offset, len);
    }
    if (r < 0) {
        fprintf(stderr, "logctl: cat: %s: %s\n", path, strerror(-r));
        return r;
    }
    if (active)
        shard_reader_set_active(reader);
    r = cat_read_range(reader, path, o, active ? SHARD_SKIP_GROWING : 0, true, more_after, &damaged,
                       ret_out_err);
    if (r == -ENODATA) {
        r = 0; /* the record being written */
    } else if (r == -EAGAIN) {
        uint64_t off;
        const char *why;

        shard_reader_error(reader, &off, &why);
        fflush(stdout);
        fprintf(stderr,
                "logctl: cat: %s: %s at offset %" PRIu64 "; what follows is still being "
                "written and was not read\n",
                path, why, off);
        damaged = true;
    }
    shard_reader_free(reader);
    if (r < 0 && r != -EAGAIN)
        return r;
    return damaged ? 1 : 0;
}

/* Opens name in dir_fd (or the path, with AT_FDCWD) without blocking on
 * anything but a regular file. Returns 0 with *ret_fd and its size in
 * *ret_size, -ENOENT quietly, or another negative errno after saying why,
 * naming it as shown. A quiet open says nothing at all and leaves the
 * descriptor non-blocking: it is a look at the file's ends with pread(2),
 * which ignores the flag, and one system call fewer for each file of a big
 * spool. */
static int cat_open(int dir_fd, const char *name, const char *shown, bool quiet, int *ret_fd,
                    uint64_t *ret_size)
{
    struct stat st = { 0 };
    int flags = (dir_fd == AT_FDCWD ? 0 : O_NOFOLLOW) | (quiet ? O_NONBLOCK : 0);
    int r = open_regular_stat_at(dir_fd, name, flags, ret_fd, &st);

    if (r == 0) {
        *ret_size = (uint64_t)st.st_size;
        return 0;
    }
    if (quiet || (r == -ENOENT && dir_fd != AT_FDCWD))
        return r;
    fflush(stdout);
    if (r == -EBADFD || r == -EISDIR)
        fprintf(stderr, "logctl: cat: %s: not a regular file (%s), skipped\n", shown,
                r == -EISDIR ? "directory" : file_type_name(st.st_mode));
    else
        fprintf(stderr, "logctl: cat: %s: %s\n", shown, strerror(-r));
    return r;
}

/* cat_open_fn for the files of the command line; ctx is argv from the
 * first FILE on. */
static int open_path(void *ctx, size_t file, bool quiet, int *ret_fd, uint64_t *ret_size,
                     char **ret_shown, bool *ret_active)
{
    char **paths = ctx;
    char *shown = NULL;
    int r = cat_open(AT_FDCWD, paths[file], paths[file], quiet, ret_fd, ret_size);

    if (r < 0)
        return r;
    *ret_active = false;
    if (quiet) {
        *ret_shown = NULL;
        return 0;
    }
    shown = strdup(paths[file]);
    if (!shown) {
        (void)close(*ret_fd); /* read-only */
        fprintf(stderr, "logctl: cat: out of memory\n");
        return -ENOMEM;
    }
    *ret_shown = shown;
    return 0;
}

/* ---- the spool ---- */

struct spool_file {
    struct spool_name parsed; /* the producer and id its name says */
    bool active;
    char *name;
};

static int cmp_spool_file(const void *a, const void *b)
{
    const struct spool_file *x = a, *y = b;
    int c = strcmp(x->parsed.producer, y->parsed.producer);

    if (c)
        return c;
    return x->parsed.id < y->parsed.id ? -1 : x->parsed.id > y->parsed.id;
}

/* Adds the shards named in dir_fd (done/, or active/ when active) of the
 * wanted producers to *v, but not a shard of done/ whose entry in the seal
 * index ix (when not NULL) puts it outside the time filters: that one
 * would only be opened to be passed over. Every other name that is a
 * shard's is taken, whatever the file's type: a FIFO or a directory under
 * such a name is reported when its turn comes, not passed over in silence. */
static int list_dir(int dir_fd, bool active, const struct cat_opts *o,
                    const struct seal_index *ix, struct spool_file **v, size_t *n, size_t *cap)
{
    struct dirent *de;
    DIR *dir;
    int r = opendir_at(dir_fd, &dir);

    if (r < 0)
        return r;
    for (;;) {
        struct spool_file f = { .active = active };

        errno = 0;
        de = readdir(dir);
        if (!de) {
            r = errno ? -errno : 0;
            break;
        }
        if (de->d_name[0] == '.' ||
            spool_name_parse(de->d_name, active ? SPOOL_TMP : SPOOL_SHARD, &f.parsed) < 0 ||
            !cat_wants_producer(o, f.parsed.producer))
            continue;
        if (!active && ix) {
            const struct seal_index_entry *e = seal_index_find(ix, de->d_name, de->d_ino);

            if (e && cat_outside_window(o, e->created_ns, e->newest_ns))
                continue;
        }
        if (*n == *cap) {
            struct spool_file *nv = reallocarray(*v, *cap ? *cap * 2 : 32, sizeof(**v));
            if (!nv) {
                r = -ENOMEM;
                break;
            }
            *v = nv;
            *cap = *cap ? *cap * 2 : 32;
        }
        f.name = strdup(de->d_name);
        if (!f.name) {
            r = -ENOMEM;
            break;
        }
        (*v)[(*n)++] = f;
    }
    (void)closedir(dir); /* read-only directory stream */
    return r;
}

struct spool_ctx {
    struct spool_file *v;
    int active_fd, done_fd;
    const char *active_path, *done_path;
};

/* cat_open_fn for the spool's files. A shard listed in active/ that is
 * gone was sealed since the listing: it is then read from done/,
 * complete, and stays named there. One gone from done/ was merged with
 * --delete since the listing, and is passed over. */
static int open_spool_file(void *ctx, size_t file, bool quiet, int *ret_fd, uint64_t *ret_size,
                           char **ret_shown, bool *ret_active)
{
    struct spool_ctx *c = ctx;
    struct spool_file *f = &c->v[file];
    char *shown = NULL;
    int r;

    if (!quiet && asprintf(&shown, "%s/%s", f->active ? c->active_path : c->done_path,
                           f->name) < 0)
        goto oom;
    r = cat_open(f->active ? c->active_fd : c->done_fd, f->name, shown, quiet, ret_fd, ret_size);
    if (r == -ENOENT && f->active) {
        char *name = NULL;

        free(shown);
        shown = NULL;
        if (spool_name_new(SPOOL_SHARD, f->parsed.producer, f->parsed.producer_len,
                           f->parsed.id, &name) < 0)
            goto oom;
        free(f->name);
        f->name = name;
        f->active = false;
        if (!quiet && asprintf(&shown, "%s/%s", c->done_path, name) < 0)
            goto oom;
        r = cat_open(c->done_fd, f->name, shown, quiet, ret_fd, ret_size);
    }
    if (r < 0) {
        free(shown);
        return r == -ENOENT ? 1 : r;
    }
    *ret_shown = shown;
    *ret_active = f->active;
    return 0;
oom:
    free(shown);
    if (!quiet)
        fprintf(stderr, "logctl: cat: out of memory\n");
    return -ENOMEM;
}

/* The spool's seal index, or NULL: without one, or with one that cannot
 * be read, every shard is opened, as the index only spares work. */
static struct seal_index *load_seal_index(const char *spool)
{
    struct seal_index *ix = NULL;
    int fd = open(spool, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0)
        return NULL;
    if (seal_index_load(fd, &ix) < 0)
        ix = NULL;
    (void)close(fd); /* a directory, read-only */
    return ix;
}

static int cat_spool(const char *spool, const struct cat_opts *o, bool *failed,
                     int *ret_out_err)
{
    _cleanup_free_ char *active_path = path_join(spool, SPOOL_ACTIVE_DIR);
    _cleanup_free_ char *done_path = path_join(spool, SPOOL_DONE_DIR);
    _cleanup_close_ int active_fd = -1;
    _cleanup_close_ int done_fd = -1;
    struct spool_file *v = NULL;
    struct seal_index *ix = NULL;
    size_t n = 0, cap = 0;
    int r;

    if (!active_path || !done_path)
        return -ENOMEM;
    done_fd = open(done_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0) {
        r = -errno;
        fprintf(stderr, "logctl: cat: %s: %s\n", done_path, strerror(errno));
        return r;
    }
    if (o->since_ns != 0 || o->until_ns != UINT64_MAX)
        ix = load_seal_index(spool);
    r = list_dir(done_fd, false, o, ix, &v, &n, &cap);
    if (r < 0 && r != -ENOMEM) {
        fprintf(stderr, "logctl: cat: %s: cannot list: %s\n", done_path, strerror(-r));
        goto out;
    }
    active_fd = open(active_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (r == 0 && active_fd >= 0) {
        r = list_dir(active_fd, true, o, NULL, &v, &n, &cap);
        if (r < 0 && r != -ENOMEM) {
            fprintf(stderr, "logctl: cat: %s: cannot list: %s\n", active_path, strerror(-r));
            goto out;
        }
    }
    if (r == 0 && n > 1)
        qsort(v, n, sizeof(*v), cmp_spool_file);

    if (r == 0) {
        struct spool_ctx c = { .v = v, .active_fd = active_fd, .done_fd = done_fd,
                               .active_path = active_path, .done_path = done_path };

        r = cat_files_in_order(n, open_spool_file, &c, o, failed, ret_out_err);
    }
out:
    seal_index_free(ix);
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    if (r == -ENOMEM)
        fprintf(stderr, "logctl: cat: out of memory\n");
    return r;
}

int logctl_cat(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "meta", no_argument, NULL, 'm' },
        { "json", no_argument, NULL, 'j' },
        { "producer", required_argument, NULL, 'p' },
        { "since", required_argument, NULL, 'S' },
        { "until", required_argument, NULL, 'U' },
        { "follow", no_argument, NULL, 'f' },
        { "spool", required_argument, NULL, 's' },
        { "config", required_argument, NULL, 'c' },
        { "priority", required_argument, NULL, 'P' },
        { "identifier", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *producers[MAX_PRODUCERS], *identifiers[MAX_PRODUCERS];
    struct cat_opts o = { .producers = producers,
                          .until_ns = UINT64_MAX,
                          .syslog.identifiers = identifiers };
    const char *spool_opt = NULL, *config = NULL;
    uint64_t now = now_realtime_ns();
    bool failed = false, follow = false;
    int out_err = 0;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":mjp:S:U:fs:c:t:h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'm': o.meta = true; break;
        case 'j': o.json = true; break;
        case 'p':
            if (wire_check_producer_name(optarg, strlen(optarg)) < 0)
                return logctl_usage_error("cat", "--producer '%s': names are %s", optarg,
                                          wire_producer_name_rule);
            if (o.n_producers == MAX_PRODUCERS)
                return logctl_usage_error("cat", "at most %d --producer options",
                                          MAX_PRODUCERS);
            producers[o.n_producers++] = optarg;
            break;
        case 'S':
        case 'U': {
            uint64_t t;

            r = logctl_parse_time(optarg, now, &t);
            if (r < 0)
                return logctl_usage_error(
                    "cat", "%s '%s': %s", opt == 'S' ? "--since" : "--until", optarg,
                    r == -ERANGE ? "out of range"
                                 : "not a time (e.g. \"2026-12-01 10:00\", \"yesterday\", \"-1h\")");
            if (opt == 'S')
                o.since_ns = t;
            else
                o.until_ns = t;
            break;
        }
        case 'P':
            o.syslog.by_severity = true;
            if (cat_syslog_parse_priority(optarg, &o.syslog.severities) < 0)
                return logctl_usage_error("cat",
                                          "--priority '%s': a level (0 to 7, or emerg, alert, "
                                          "crit, err, warning, notice, info, debug) or a "
                                          "range FROM..TO of two",
                                          optarg);
            break;
        case 't':
            if (o.syslog.n_identifiers == MAX_PRODUCERS)
                return logctl_usage_error("cat", "at most %d --identifier options",
                                          MAX_PRODUCERS);
            identifiers[o.syslog.n_identifiers++] = optarg;
            break;
        case 'f': follow = true; break;
        case 's': spool_opt = optarg; break;
        case 'c': config = optarg; break;
        case 'h': cat_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("cat", opt, argv);
        }
    }
    if (o.since_ns > o.until_ns)
        return logctl_usage_error("cat", "--since is after --until");
    if (optind < argc && (spool_opt || config || follow))
        return logctl_usage_error("cat", "give FILE... or a spool (--spool, --config, "
                                         "--follow), not both");

    /* Records go out in writes of a MiB rather than of stdio's default, a
     * block of the output file (4 KiB for a pipe, about 25 records of
     * --json). --follow flushes after each batch it prints. */
    if (!follow) {
        static char out_buf[1u << 20]; /* glibc ignores the size without a buffer */

        (void)setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
    }
    if (follow || optind >= argc) {
        char *spool = NULL;

        r = logctl_spool("cat", spool_opt, config, &spool);
        if (r != 0)
            return r;
        if (follow) {
            r = cat_follow(&o, spool);
            free(spool);
            return r;
        }
        r = cat_spool(spool, &o, &failed, &out_err);
        free(spool);
        if (r < 0 && !out_err) {
            fflush(stdout);
            return logctl_exit_for_errno(r);
        }
    } else {
        r = cat_files_in_order((size_t)(argc - optind), open_path, argv + optind, &o, &failed,
                               &out_err);
        if (r < 0) {
            fflush(stdout);
            fprintf(stderr, "logctl: cat: %s\n", strerror(-r));
            return logctl_exit_for_errno(r);
        }
    }
    errno = 0;
    if (out_err == 0 && fflush(stdout) != 0)
        out_err = errno ? errno : EIO;
    if (out_err != 0) {
        fprintf(stderr, "logctl: cat: write error on standard output: %s\n", strerror(out_err));
        return LOGCTL_EXIT_FAILURE;
    }
    return failed ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
