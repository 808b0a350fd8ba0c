/* logctl verify: reads shard and merged files through the shard reader,
 * which checks every header (magic, version, lengths, CRC, name rule) and
 * every record (length, CRC32C), and reports per file the first offset that
 * is not part of a valid item and why. With --spool it checks the sealed
 * shards of done/ and the merged files of merged/, and for done/ also that
 * each file holds exactly one shard whose header matches its name: what
 * logctl merge will insist on. */
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

#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "merge.h"
#include "shard_format.h"

enum verdict { V_OK, V_CORRUPT, V_TORN, V_UNREADABLE };

struct result {
    enum verdict verdict;
    uint64_t shards, records, bytes;
    uint64_t offset; /* of the first bad byte */
    char why[256];
    int err; /* V_UNREADABLE */
};

static void verify_help(void)
{
    printf("Usage: logctl verify [--json] [--quiet] FILE...\n"
           "       logctl verify [--json] [--quiet] --spool DIR\n"
           "\n"
           "Check shard and merged files: every shard header (magic, version, lengths,\n"
           "CRC, producer name) and every record (length and CRC32C). For each file it\n"
           "prints OK with its shards, records and bytes, or the first offset that is\n"
           "not part of a valid item and why:\n"
           "  CORRUPT  bytes that cannot be a valid item (a flipped bit, a foreign file)\n"
           "  TORN     the file ends inside an item (a write was cut short)\n"
           "  ERROR    the file cannot be read\n"
           "Everything before that offset is valid.\n"
           "\n"
           "With --spool DIR it checks every file in DIR/done/ (each must hold exactly\n"
           "one shard whose header matches its name, as logctl merge requires) and\n"
           "every *.lsm file in DIR/merged/. Files in DIR/active/ are being written and\n"
           "are not checked.\n"
           "\n"
           "Options:\n"
           "  -s, --spool DIR   check the spool's sealed shards and merged files\n"
           "  -j, --json        one JSON object per file and line: file, ok, verdict,\n"
           "                    shards, records, bytes, and for a bad file offset and\n"
           "                    error\n"
           "  -q, --quiet       print only the files that are not OK\n"
           "  -h, --help        show this help\n"
           "\n"
           "Exit status: 0 every file is valid, 1 a file is corrupt, torn or missing,\n"
           "2 usage error or a file could not be read for lack of permission.\n");
}

/* Checks one file; dir_fd/name when it is in done/ (then also the name
 * check), or path alone. */
static void verify_file(int dir_fd, const char *name, const char *path, bool done_rules,
                        struct result *res)
{
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id = 0;
    bool named = false;
    struct stat st;
    int r;

    memset(res, 0, sizeof(*res));
    fd = dir_fd >= 0 ? openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
                     : open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        res->verdict = V_UNREADABLE;
        res->err = errno;
        snprintf(res->why, sizeof(res->why), "%s", strerror(errno));
        return;
    }
    if (!S_ISREG(st.st_mode)) {
        res->verdict = V_UNREADABLE;
        res->err = EISDIR;
        snprintf(res->why, sizeof(res->why), "not a regular file");
        return;
    }
    if (done_rules)
        named = merge_parse_source_name(name, producer, &id) == 0;
    r = shard_reader_new(&reader, fd);
    if (r < 0) {
        res->verdict = V_UNREADABLE;
        res->err = -r;
        snprintf(res->why, sizeof(res->why), "%s", strerror(-r));
        return;
    }
    while ((r = shard_reader_next(reader, &item)) > 0) {
        if (item.kind != SHARD_ITEM_HEADER)
            continue;
        res->shards++;
        if (done_rules && res->shards > 1) {
            res->verdict = V_CORRUPT;
            res->offset = item.offset;
            snprintf(res->why, sizeof(res->why),
                     "second shard header (a file in done/ holds exactly one shard)");
            goto out;
        }
        if (done_rules && named &&
            (strcmp(item.header->producer, producer) != 0 || item.header->shard_id != id)) {
            res->verdict = V_CORRUPT;
            res->offset = item.offset;
            snprintf(res->why, sizeof(res->why),
                     "shard header says producer '%s' shard id %016" PRIx64
                     ", which does not match the file name",
                     item.header->producer, item.header->shard_id);
            goto out;
        }
    }
    res->records = shard_reader_records(reader);
    res->bytes = shard_reader_valid_end(reader);
    if (r < 0) {
        const char *why;

        shard_reader_error(reader, &res->offset, &why);
        res->verdict = r == -ENODATA ? V_TORN : r == -EBADMSG ? V_CORRUPT : V_UNREADABLE;
        res->err = res->verdict == V_UNREADABLE ? -r : 0;
        snprintf(res->why, sizeof(res->why), "%s%s%s", why ? why : strerror(-r),
                 res->verdict == V_UNREADABLE && why ? ": " : "",
                 res->verdict == V_UNREADABLE && why ? strerror(-r) : "");
    }
out:
    if (res->verdict != V_OK) {
        res->records = shard_reader_records(reader);
        res->bytes = res->offset;
    }
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
};

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
            if (res->verdict != V_UNREADABLE) {
                json_member_u64(&o, "offset", res->offset);
            }
            json_member_str(&o, "error", res->why);
        }
        json_obj_end(&o);
        json_raw(&o, "\n", 1);
        if (json_out_finish(&o, &text, &len) == 0) {
            fputs(text, stdout);
            free(text);
        }
        return;
    }
    switch (res->verdict) {
    case V_OK:
        printf("OK       %s: %" PRIu64 " shard%s, %" PRIu64 " record%s, %" PRIu64 " bytes\n",
               path, res->shards, res->shards == 1 ? "" : "s", res->records,
               res->records == 1 ? "" : "s", res->bytes);
        break;
    case V_CORRUPT:
    case V_TORN:
        printf("%-8s %s: offset %" PRIu64 ": %s (%" PRIu64 " valid record%s before it)\n",
               res->verdict == V_TORN ? "TORN" : "CORRUPT", path, res->offset, res->why,
               res->records, res->records == 1 ? "" : "s");
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
    {
        /* A descriptor of its own for the stream; fd stays for openat. */
        int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);

        dir = dfd >= 0 ? fdopendir(dfd) : NULL;
        if (!dir) {
            r = -errno;
            if (dfd >= 0)
                (void)close(dfd); /* never read */
            fprintf(stderr, "logctl: verify: %s: %s\n", dir_path, strerror(-r));
            return r;
        }
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
        verify_file(fd, names[i], path, done_rules, &res);
        if (res.verdict == V_UNREADABLE && res.err == ENOENT)
            continue; /* merged and deleted since the listing: nothing to check */
        report(path, &res, json, quiet, t);
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

    if (spool) {
        r = verify_dir(spool, "done", NULL, true, json, quiet, &t);
        if (r == 0)
            r = verify_dir(spool, "merged", ".lsm", false, json, quiet, &t);
    } else {
        for (int i = optind; i < argc; i++) {
            struct result res;

            verify_file(-1, NULL, argv[i], false, &res);
            report(argv[i], &res, json, quiet, &t);
        }
    }
    if (!json && !quiet && r == 0)
        printf("%zu file%s checked, %zu bad\n", t.files, t.files == 1 ? "" : "s", t.bad);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: verify: write error on standard output: %s\n",
                strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    if (r < 0)
        return logctl_exit_for_errno(r);
    if (t.access_refused)
        return LOGCTL_EXIT_USAGE;
    return t.bad ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
