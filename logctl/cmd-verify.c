/* logctl verify: reads shard and merged files through the shard reader,
 * which checks every header (magic, version, lengths, CRC, name rule) and
 * every record (length, CRC32C), and reports per file every damaged place:
 * where it begins, why, and what the reader skipped to go on (the record
 * alone when its framing holds, else up to the next shard header), so the
 * report says how much of the file is still readable, as logctl cat reads
 * it. With --spool it checks the sealed shards of done/ and the merged
 * files of merged/, and for done/ also that each file holds exactly one
 * shard whose header matches its name: what logctl merge will insist on.
 * A file that is not a regular file is never opened for reading (a FIFO
 * would block forever); it is reported as an error.
 *
 * Across all the files it checks, it follows the positions of every
 * producer stream (shard format version 3, verify-streams.c) and reports
 * a position seen in two shards or missing between the lowest and the
 * highest seen as a problem too. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cat.h"
#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "shard_format.h"
#include "spool_names.h"
#include "verify-streams.h"

enum verdict { V_OK, V_CORRUPT, V_TORN, V_UNREADABLE };

#define MAX_SKIPS_SHOWN 1000 /* per file; the totals count them all */

struct result {
    enum verdict verdict;
    uint64_t shards, records, bytes; /* readable ones; bytes of valid items */
    uint64_t offset; /* of the first bad byte */
    char why[256];
    int err; /* V_UNREADABLE */
    struct shard_skip *skips; /* what was skipped, in file order */
    size_t n_skips, n_kept;
    uint64_t skipped_bytes;
    bool last_at_end; /* the last skip ran to the end of the file */
};

static void verify_help(void)
{
    printf("Usage: logctl verify [--json] [--quiet] FILE...\n"
           "       logctl verify [--json] [--quiet] --spool DIR\n"
           "\n"
           "Check shard and merged files: every shard header (magic, version, lengths,\n"
           "CRC, producer name) and every record (length and CRC32C). For each file it\n"
           "prints OK with its shards, records and bytes, or what is wrong:\n"
           "  CORRUPT  bytes that cannot be a valid item (a flipped bit, a foreign file)\n"
           "  TORN     the file ends inside an item (a write was cut short)\n"
           "  ERROR    the file cannot be read, or is not a regular file\n"
           "For a CORRUPT file it then lists every damaged place: its offset, why, and\n"
           "what was skipped to read on (the bad record alone when its framing holds,\n"
           "else everything up to the next shard of a merged file), and counts the\n"
           "records still readable, as logctl cat reads them.\n"
           "\n"
           "Across every file it checks it follows the positions of each producer\n"
           "stream (shards of format version 3) and prints a line per stream: OK with\n"
           "its lowest and highest position, GAP for positions missing between them,\n"
           "DUPLICATE for a position found in two shards (a copy of the same shard,\n"
           "as in a merged file of shards still in done/, is no duplicate). Positions\n"
           "below the lowest found are not a gap: merge --delete removes them.\n"
           "\n"
           "With --spool DIR it checks every file in DIR/done/ (each must hold exactly\n"
           "one shard whose header matches its name, as logctl merge requires) and\n"
           "every *.lsm file in DIR/merged/. Files in DIR/active/ are being written and\n"
           "are not checked.\n"
           "\n"
           "Options:\n"
           "  -s, --spool DIR   check the spool's sealed shards and merged files\n"
           "  -j, --json        one JSON object per file and line: file, ok, verdict,\n"
           "                    shards, records, bytes (readable ones), and for a bad\n"
           "                    file offset and error (the first damage),\n"
           "                    skipped_bytes and damage (every skip: offset, bytes,\n"
           "                    records, shard, error, torn); then one object per\n"
           "                    stream: stream, ok, first, last, missing, duplicates,\n"
           "                    gaps (from, to) and duplicate (position, file, offset)\n"
           "  -q, --quiet       print only the files and streams that are not OK\n"
           "  -h, --help        show this help\n"
           "\n"
           "Exit status: 0 every file and stream is valid, 1 a file is corrupt, torn,\n"
           "missing or not a regular file, or a stream has a gap or a duplicate, 2\n"
           "usage error or a file could not be read for lack of permission.\n");
}

static int add_skip(struct result *res, const struct shard_skip *skip, bool at_end)
{
    if (res->n_skips == 0) {
        res->offset = skip->offset;
        snprintf(res->why, sizeof(res->why), "%s", skip->why);
    }
    res->n_skips++;
    res->skipped_bytes += skip->bytes;
    res->last_at_end = at_end;
    res->verdict = skip->torn && res->verdict != V_CORRUPT ? V_TORN : V_CORRUPT;
    if (res->n_kept == MAX_SKIPS_SHOWN)
        return 0;
    if (res->n_kept % 16 == 0) {
        struct shard_skip *nv = reallocarray(res->skips, res->n_kept + 16, sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        res->skips = nv;
    }
    res->skips[res->n_kept++] = *skip;
    return 0;
}

/* Checks one file; dir_fd/name when it is in done/ (then also the name
 * check), or path alone. The positions of its records go to vs. */
static void verify_file(int dir_fd, const char *name, const char *path, bool done_rules,
                        struct verify_streams *vs, struct result *res)
{
    struct verify_stream *stream = NULL;
    bool copy = false;
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    struct shard_skip skip;
    struct spool_name parsed = { .id = 0 };
    bool named = false;
    mode_t mode = 0;
    int r;

    memset(res, 0, sizeof(*res));
    r = open_regular_at(dir_fd >= 0 ? dir_fd : AT_FDCWD, dir_fd >= 0 ? name : path,
                        dir_fd >= 0 ? O_NOFOLLOW : 0, &fd, &mode);
    if (r < 0) {
        res->verdict = V_UNREADABLE;
        res->err = -r;
        if (r == -EBADFD || r == -EISDIR)
            snprintf(res->why, sizeof(res->why), "not a regular file (%s), skipped",
                     r == -EISDIR ? "directory" : file_type_name(mode));
        else
            snprintf(res->why, sizeof(res->why), "%s", strerror(-r));
        return;
    }
    if (done_rules)
        named = spool_name_parse(name, SPOOL_SHARD, &parsed) == 0;
    r = shard_reader_new(&reader, fd);
    if (r < 0) {
        res->verdict = V_UNREADABLE;
        res->err = -r;
        snprintf(res->why, sizeof(res->why), "%s", strerror(-r));
        return;
    }
    for (;;) {
        r = shard_reader_next(reader, &item);
        if (r == 0)
            break;
        if (r == -EBADMSG || r == -ENODATA) {
            r = shard_reader_skip_damage(reader, 0, &skip);
            if (r >= 0 && add_skip(res, &skip, r == 0) < 0)
                r = -ENOMEM;
            /* A record skipped alone is damage, reported as such; its
             * position is not a gap on top of that. */
            if (r >= 0 && skip.records == 1 && stream &&
                verify_streams_record(stream, copy, skip.position, path, skip.offset) < 0)
                r = -ENOMEM;
            if (r >= 0 && skip.resync)
                stream = NULL; /* the next header says which stream follows */
            if (r == 0)
                break;
            if (r > 0)
                continue;
        }
        if (r < 0) {
            uint64_t off;
            const char *why;

            shard_reader_error(reader, &off, &why);
            res->verdict = V_UNREADABLE;
            res->err = -r;
            snprintf(res->why, sizeof(res->why), "%s%s%s", why ? why : "", why ? ": " : "",
                     strerror(-r));
            goto out;
        }
        if (item.kind == SHARD_ITEM_RECORD && stream) {
            r = verify_streams_record(stream, copy, item.position, path, item.offset);
            if (r < 0)
                goto out_of_memory;
        }
        if (item.kind != SHARD_ITEM_HEADER)
            continue;
        r = verify_streams_shard(vs, item.header, &stream, &copy);
        if (r < 0)
            goto out_of_memory;
        res->shards++;
        if (done_rules && res->shards > 1) {
            res->verdict = V_CORRUPT;
            res->offset = item.offset;
            res->bytes = item.offset - res->skipped_bytes;
            snprintf(res->why, sizeof(res->why),
                     "second shard header (a file in done/ holds exactly one shard)");
            goto out;
        }
        if (done_rules && named &&
            (strcmp(item.header->producer, parsed.producer) != 0 ||
             item.header->shard_id != parsed.id)) {
            res->verdict = V_CORRUPT;
            res->offset = item.offset;
            res->bytes = item.offset - res->skipped_bytes;
            snprintf(res->why, sizeof(res->why),
                     "shard header says producer '%s' shard id %016" PRIx64
                     ", which does not match the file name",
                     item.header->producer, item.header->shard_id);
            goto out;
        }
    }
    res->bytes = shard_reader_valid_end(reader) - res->skipped_bytes;
    goto out;
out_of_memory:
    res->verdict = V_UNREADABLE;
    res->err = ENOMEM;
    snprintf(res->why, sizeof(res->why), "%s", strerror(ENOMEM));
out:
    res->records = shard_reader_records(reader);
    shard_reader_free(reader);
}

static const char *verdict_name(enum verdict v)
{
    switch (v) {
    case V_OK: return "ok";
    case V_CORRUPT: return "corrupt";
    case V_TORN: return "torn";
    default: return "error";
    }
}

struct totals {
    size_t files, bad;
    bool access_refused;
    struct verify_streams *streams; /* positions of every file checked */
    size_t bad_streams;             /* with a gap or a duplicate */
};

static void report_json(const char *path, const struct result *res)
{
    struct json_out o;
    char *text = NULL;
    size_t len;

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_str(&o, "file", path);
    json_member_bool(&o, "ok", res->verdict == V_OK);
    json_member_str(&o, "verdict", verdict_name(res->verdict));
    json_member_u64(&o, "shards", res->shards);
    json_member_u64(&o, "records", res->records);
    json_member_u64(&o, "bytes", res->bytes);
    if (res->verdict != V_OK) {
        if (res->verdict != V_UNREADABLE)
            json_member_u64(&o, "offset", res->offset);
        json_member_str(&o, "error", res->why);
    }
    if (res->n_skips > 0) {
        json_member_u64(&o, "skipped_bytes", res->skipped_bytes);
        json_key(&o, "damage");
        json_arr_begin(&o);
        for (size_t i = 0; i < res->n_kept; i++) {
            const struct shard_skip *k = &res->skips[i];

            json_obj_begin(&o);
            json_member_u64(&o, "offset", k->offset);
            json_member_u64(&o, "bytes", k->bytes);
            json_member_u64(&o, "records", k->records);
            json_key(&o, "shard");
            if (k->in_shard) {
                char shard[WIRE_PRODUCER_NAME_MAX + 32];

                snprintf(shard, sizeof(shard), "%s.%016" PRIx64, k->header.producer,
                         k->header.shard_id);
                json_cstr(&o, shard);
            } else {
                json_null(&o);
            }
            json_member_str(&o, "error", k->why);
            json_member_bool(&o, "torn", k->torn);
            json_obj_end(&o);
        }
        json_arr_end(&o);
    }
    json_obj_end(&o);
    json_raw(&o, "\n", 1);
    if (json_out_finish(&o, &text, &len) == 0) {
        fputs(text, stdout);
        free(text);
    }
}

static void report(const char *path, const struct result *res, bool json, bool quiet,
                   struct totals *t)
{
    t->files++;
    if (res->verdict != V_OK)
        t->bad++;
    if (res->verdict == V_UNREADABLE && (res->err == EACCES || res->err == EPERM))
        t->access_refused = true;
    if (quiet && res->verdict == V_OK)
        return;
    if (json) {
        report_json(path, res);
        return;
    }
    switch (res->verdict) {
    case V_OK:
        printf("OK       %s: %" PRIu64 " shard%s, %" PRIu64 " record%s, %" PRIu64 " bytes\n",
               path, res->shards, res->shards == 1 ? "" : "s", res->records,
               res->records == 1 ? "" : "s", res->bytes);
        break;
    case V_TORN:
        printf("TORN     %s: offset %" PRIu64 ": %s (%" PRIu64 " valid record%s before it)\n",
               path, res->offset, res->why, res->records, res->records == 1 ? "" : "s");
        break;
    case V_CORRUPT:
        if (res->n_skips == 0) {
            /* A rule of done/ was broken; the bytes themselves read fine. */
            printf("CORRUPT  %s: offset %" PRIu64 ": %s\n", path, res->offset, res->why);
            break;
        }
        printf("CORRUPT  %s: %" PRIu64 " record%s readable in %" PRIu64 " shard%s, %" PRIu64
               " bytes skipped in %zu place%s\n",
               path, res->records, res->records == 1 ? "" : "s", res->shards,
               res->shards == 1 ? "" : "s", res->skipped_bytes, res->n_skips,
               res->n_skips == 1 ? "" : "s");
        for (size_t i = 0; i < res->n_kept; i++) {
            char what[LOGCTL_SKIP_TEXT_MAX];

            logctl_describe_skip(&res->skips[i], i + 1 == res->n_skips && res->last_at_end,
                                 what, sizeof(what));
            printf("         %s\n", what);
        }
        if (res->n_kept < res->n_skips)
            printf("         (and %zu more)\n", res->n_skips - res->n_kept);
        break;
    default:
        printf("ERROR    %s: %s\n", path, res->why);
        break;
    }
}

static bool has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file in spool/sub whose name ends in suffix (NULL: every
 * file but dotfiles), in name order. */
static int verify_dir(const char *spool, const char *sub, const char *suffix, bool done_rules,
                      bool json, bool quiet, struct totals *t)
{
    _cleanup_free_ char *dir_path = path_join(spool, sub);
    _cleanup_close_ int fd = -1;
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    DIR *dir;
    int r = 0;

    if (!dir_path)
        return -ENOMEM;
    fd = open(dir_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT && !done_rules)
            return 0; /* no merged/ yet */
        r = -errno;
        fprintf(stderr, "logctl: verify: %s: %s\n", dir_path, strerror(errno));
        return r;
    }
    /* A stream of its own; fd stays for openat. */
    r = opendir_at(fd, &dir);
    if (r < 0) {
        fprintf(stderr, "logctl: verify: %s: %s\n", dir_path, strerror(-r));
        return r;
    }
    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] == '.' || (suffix && !has_suffix(de->d_name, suffix)))
            continue;
        if (n == cap) {
            char **nn = reallocarray(names, cap ? cap * 2 : 64, sizeof(*nn));
            if (!nn) {
                r = -ENOMEM;
                break;
            }
            names = nn;
            cap = cap ? cap * 2 : 64;
        }
        names[n] = strdup(de->d_name);
        if (!names[n]) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    (void)closedir(dir); /* read-only directory stream */
    if (r == 0 && n > 1)
        qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; r == 0 && i < n; i++) {
        _cleanup_free_ char *path = path_join(dir_path, names[i]);
        struct result res;

        if (!path) {
            r = -ENOMEM;
            break;
        }
        verify_file(fd, names[i], path, done_rules, t->streams, &res);
        if (!(res.verdict == V_UNREADABLE && res.err == ENOENT))
            report(path, &res, json, quiet, t);
        /* else merged and deleted since the listing: nothing to check */
        free(res.skips);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    if (r == -ENOMEM)
        fprintf(stderr, "logctl: verify: out of memory\n");
    return r;
}

int logctl_verify(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "spool", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *spool = NULL;
    bool json = false, quiet = false;
    struct totals t = { 0 };
    int opt, r = 0;

    while ((opt = getopt_long(argc, argv, ":s:jqh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': spool = optarg; break;
        case 'j': json = true; break;
        case 'q': quiet = true; break;
        case 'h': verify_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("verify", opt, argv);
        }
    }
    if (spool && optind < argc)
        return logctl_usage_error("verify", "give FILE... or --spool DIR, not both");
    if (!spool && optind >= argc)
        return logctl_usage_error("verify", "no file given (FILE... or --spool DIR)");

    r = verify_streams_new(&t.streams);
    if (r < 0) {
        fprintf(stderr, "logctl: verify: out of memory\n");
        return LOGCTL_EXIT_FAILURE;
    }
    if (spool) {
        r = verify_dir(spool, SPOOL_DONE_DIR, NULL, true, json, quiet, &t);
        if (r == 0)
            r = verify_dir(spool, SPOOL_MERGED_DIR, SPOOL_MERGED_SUFFIX, false, json, quiet, &t);
    } else {
        for (int i = optind; i < argc; i++) {
            struct result res;

            verify_file(-1, NULL, argv[i], false, t.streams, &res);
            report(argv[i], &res, json, quiet, &t);
            free(res.skips);
        }
    }
    if (r == 0)
        t.bad_streams = verify_streams_report(t.streams, json, quiet);
    verify_streams_free(t.streams);
    if (!json && !quiet && r == 0) {
        printf("%zu file%s checked, %zu bad", t.files, t.files == 1 ? "" : "s", t.bad);
        if (t.bad_streams > 0)
            printf("; %zu stream%s with a gap or a duplicate position", t.bad_streams,
                   t.bad_streams == 1 ? "" : "s");
        printf("\n");
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: verify: write error on standard output: %s\n",
                strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    if (r < 0)
        return logctl_exit_for_errno(r);
    if (t.access_refused)
        return LOGCTL_EXIT_USAGE;
    return t.bad || t.bad_streams ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
