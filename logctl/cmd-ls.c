/* logctl ls: one line per shard. Shards being written (active/) come from
 * the daemon over the admin socket, because only the daemon knows how much
 * of an active file is written and acknowledged; sealed shards (done/) are
 * read from the spool directly, through the shard reader, so listing them
 * needs no daemon at all (--done). A sealed shard that does not read back
 * cleanly is listed with what could be read past the damage (as logctl cat
 * reads it) and reported, and the exit status says a problem was found. */
#include <errno.h>
#include <dirent.h>
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

#define LS_TIMEOUT_MS 10000

struct entry {
    char producer[WIRE_PRODUCER_NAME_MAX + 1];
    uint64_t id;
    const char *state; /* "active", "sealing", "done" */
    char *file;        /* relative to the spool */
    uint64_t size, records;
    uint64_t first_ns, last_ns; /* 0: no record */
    uint64_t uid, gid, pid;
    char *error; /* a damaged sealed shard: what is wrong */
};

struct list {
    struct entry *v;
    size_t n, cap;
};

static void ls_help(void)
{
    printf("Usage: logctl ls [--active|--done] [--producer NAME] [--bytes] [--json]\n"
           "                 [--spool DIR] [--admin-socket PATH] [--config FILE]\n"
           "\n"
           "List shards, one line each: producer, state, size, records, the receive\n"
           "times of the first and last record (local time), and the producer's uid\n"
           "and pid, then the shard id. Sorted by producer, then by shard id (which\n"
           "is the order they were created in).\n"
           "\n"
           "States: active (being written), sealing (retired, its seal is running),\n"
           "done (sealed into the spool's done/ directory).\n"
           "\n"
           "Active shards come from the running daemon (its admin socket); sealed\n"
           "ones are read from DIR/done/, each file read through to count its\n"
           "records, so --done works without the daemon, and is slower on a big spool.\n"
           "\n"
           "Options:\n"
           "      --active             only the shards being written (needs the daemon)\n"
           "      --done               only the sealed shards (reads the spool)\n"
           "  -p, --producer NAME      only the shards of producer NAME\n"
           "  -b, --bytes              sizes in bytes, not human-readable\n"
           "  -j, --json               one JSON object per shard and line: producer,\n"
           "                           state, shard, file, size, records, first, last\n"
           "                           (RFC 3339, UTC, or null), uid, gid, pid\n"
           "  -s, --spool DIR          the spool (default: the daemon's, else [daemon]\n"
           "                           spool of the config file, else /var/lib/logshard)\n"
           "  -a, --admin-socket PATH  the daemon's admin socket (see logctl status)\n"
           "  -c, --config FILE        the daemon's config file\n"
           "  -h, --help               show this help\n"
           "\n"
           "Exit status: 0 listed, 1 the daemon is not running (without --done) or a\n"
           "sealed shard is damaged (see logctl verify), 2 usage error or access\n"
           "refused.\n");
}

static struct entry *add(struct list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        struct entry *nv = reallocarray(l->v, cap, sizeof(*nv));
        if (!nv)
            return NULL;
        l->v = nv;
        l->cap = cap;
    }
    memset(&l->v[l->n], 0, sizeof(l->v[0]));
    return &l->v[l->n++];
}

static void list_free(struct list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        free(l->v[i].file);
        free(l->v[i].error);
    }
    free(l->v);
}

static int cmp_entry(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;
    int c = strcmp(x->producer, y->producer);

    if (c)
        return c;
    return x->id < y->id ? -1 : x->id > y->id;
}

static uint64_t parse_rfc3339(const char *s)
{
    uint64_t ns = 0;

    if (!s || logctl_parse_time(s, 0, &ns) < 0)
        return 0;
    return ns;
}

/* The active shards, from the daemon's ls reply. */
static int add_active(struct list *l, const struct json_value *reply)
{
    const struct json_value *shards = json_get(reply, "shards");

    if (!shards || shards->type != JSON_ARRAY)
        return -EBADMSG;
    for (size_t i = 0; i < shards->n; i++) {
        const struct json_value *s = &shards->items[i];
        const char *hex = json_get_str(s, "shard", "0");
        struct entry *e = add(l);

        if (!e)
            return -ENOMEM;
        snprintf(e->producer, sizeof(e->producer), "%s", json_get_str(s, "producer", "?"));
        e->id = strtoull(hex, NULL, 16);
        e->state = strcmp(json_get_str(s, "state", ""), "sealing") == 0 ? "sealing" : "active";
        e->file = strdup(json_get_str(s, "file", "?"));
        if (!e->file)
            return -ENOMEM;
        e->size = json_get_u64(s, "size", 0);
        e->records = json_get_u64(s, "records", 0);
        e->first_ns = parse_rfc3339(json_get_str(s, "first", NULL));
        e->last_ns = parse_rfc3339(json_get_str(s, "last", NULL));
        e->uid = json_get_u64(s, "uid", 0);
        e->gid = json_get_u64(s, "gid", 0);
        e->pid = json_get_u64(s, "pid", 0);
    }
    return 0;
}

/* Reads one sealed shard through for its figures, past any damage (as
 * logctl cat reads it), and notes the first damage and how many places
 * are damaged. Only a regular file is opened: a FIFO would block. */
static void scan_done(int done_fd, struct entry *e, const char *name)
{
    _cleanup_close_ int fd = -1;
    struct shard_reader *reader = NULL;
    struct shard_item item;
    struct shard_skip skip, first = { .why = NULL };
    uint64_t damaged = 0, skipped = 0;
    mode_t mode = 0;
    struct stat st;
    int r;

    r = open_regular_at(done_fd, name, O_NOFOLLOW, &fd, &mode);
    if (r < 0 || fstat(fd, &st) < 0) {
        if (r == 0)
            r = -errno;
        if (r == -EBADFD || r == -EISDIR)
            r = asprintf(&e->error, "not a regular file (%s)",
                         r == -EISDIR ? "directory" : file_type_name(mode));
        else
            r = asprintf(&e->error, "%s", strerror(-r));
        if (r < 0)
            e->error = NULL;
        return;
    }
    e->size = (uint64_t)st.st_size;
    if (shard_reader_new(&reader, fd) < 0) {
        e->error = strdup("out of memory");
        return;
    }
    for (;;) {
        r = shard_reader_next(reader, &item);
        if (r == -EBADMSG || r == -ENODATA) {
            r = shard_reader_skip_damage(reader, 0, &skip);
            if (r >= 0) {
                if (damaged++ == 0)
                    first = skip;
                skipped += skip.bytes;
                if (r > 0)
                    continue;
            }
        }
        if (r <= 0)
            break;
        if (item.kind == SHARD_ITEM_HEADER) {
            e->uid = item.header->uid;
            e->gid = item.header->gid;
            e->pid = item.header->pid;
            continue;
        }
        if (item.kind != SHARD_ITEM_RECORD)
            continue;
        if (!e->first_ns)
            e->first_ns = item.timestamp_ns;
        e->last_ns = item.timestamp_ns;
    }
    e->records = shard_reader_records(reader);
    if (r < 0) {
        uint64_t off;
        const char *why;

        shard_reader_error(reader, &off, &why);
        if (asprintf(&e->error, "%s at offset %" PRIu64 ": %s", why ? why : "error", off,
                     strerror(-r)) < 0)
            e->error = NULL;
    } else if (damaged > 0) {
        if (asprintf(&e->error,
                     "%s at offset %" PRIu64 "; %" PRIu64 " bytes skipped in %" PRIu64
                     " place%s",
                     first.why, first.offset, skipped, damaged, damaged == 1 ? "" : "s") < 0)
            e->error = NULL;
    }
    shard_reader_free(reader);
}

static int add_done(struct list *l, const char *spool, const char *producer)
{
    _cleanup_free_ char *done_path = path_join(spool, "done");
    _cleanup_close_ int done_fd = -1;
    struct merge_source *src = NULL;
    size_t n = 0;
    int r;

    if (!done_path)
        return -ENOMEM;
    done_fd = open(done_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (done_fd < 0) {
        r = -errno;
        fprintf(stderr, "logctl: ls: %s: %s\n", done_path, strerror(errno));
        return r;
    }
    r = merge_list_sources(done_fd, &src, &n);
    if (r < 0) {
        fprintf(stderr, "logctl: ls: %s: cannot list: %s\n", done_path, strerror(-r));
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        struct entry *e;

        if (producer && strcmp(producer, src[i].producer) != 0)
            continue;
        e = add(l);
        if (!e || asprintf(&e->file, "done/%s", src[i].name) < 0) {
            if (e)
                e->file = NULL;
            merge_sources_free(src, n);
            return -ENOMEM;
        }
        memcpy(e->producer, src[i].producer, sizeof(e->producer));
        e->id = src[i].id;
        e->state = "done";
        scan_done(done_fd, e, src[i].name);
    }
    merge_sources_free(src, n);
    return 0;
}

static void print_json(const struct list *l)
{
    for (size_t i = 0; i < l->n; i++) {
        const struct entry *e = &l->v[i];
        struct json_out o;
        char hex[17], t[64];

        snprintf(hex, sizeof(hex), "%016" PRIx64, e->id);
        json_out_init(&o);
        json_obj_begin(&o);
        json_member_str(&o, "producer", e->producer);
        json_member_str(&o, "state", e->state);
        json_member_str(&o, "shard", hex);
        json_member_str(&o, "file", e->file);
        json_member_u64(&o, "size", e->size);
        json_member_u64(&o, "records", e->records);
        json_key(&o, "first");
        if (e->first_ns && rfc3339_format(e->first_ns, 9, t, sizeof(t)) == 0)
            json_cstr(&o, t);
        else
            json_null(&o);
        json_key(&o, "last");
        if (e->last_ns && rfc3339_format(e->last_ns, 9, t, sizeof(t)) == 0)
            json_cstr(&o, t);
        else
            json_null(&o);
        json_member_u64(&o, "uid", e->uid);
        json_member_u64(&o, "gid", e->gid);
        json_member_u64(&o, "pid", e->pid);
        if (e->error) {
            json_member_str(&o, "error", e->error);
        }
        json_obj_end(&o);
        (void)logctl_print_json_line("ls", &o); /* says why itself; the next line may fit */
    }
}

static void print_table(const struct list *l, bool bytes)
{
    static const char *const head[] = { "PRODUCER", "STATE", "SIZE", "RECORDS", "FIRST",
                                        "LAST", "UID", "PID", "SHARD" };
    enum { NCOL = 9 };
    size_t w[NCOL];
    char (*cells)[NCOL][72] = calloc(l->n ? l->n : 1, sizeof(*cells));

    if (!cells) {
        fprintf(stderr, "logctl: ls: out of memory\n");
        return;
    }
    for (int c = 0; c < NCOL; c++)
        w[c] = strlen(head[c]);
    for (size_t i = 0; i < l->n; i++) {
        const struct entry *e = &l->v[i];

        snprintf(cells[i][0], 72, "%s", e->producer);
        snprintf(cells[i][1], 72, "%s%s", e->state, e->error ? "(damaged)" : "");
        logctl_format_size(e->size, bytes, cells[i][2], 72);
        snprintf(cells[i][3], 72, "%" PRIu64 "%s", e->records, e->error ? "+?" : "");
        logctl_format_local_time(e->first_ns, cells[i][4], 72);
        logctl_format_local_time(e->last_ns, cells[i][5], 72);
        snprintf(cells[i][6], 72, "%" PRIu64, e->uid);
        snprintf(cells[i][7], 72, "%" PRIu64, e->pid);
        snprintf(cells[i][8], 72, "%016" PRIx64, e->id);
        for (int c = 0; c < NCOL; c++)
            if (strlen(cells[i][c]) > w[c])
                w[c] = strlen(cells[i][c]);
    }
    for (int c = 0; c < NCOL; c++) {
        bool right = c == 2 || c == 3 || c == 6 || c == 7;
        if (c == NCOL - 1)
            printf("%s\n", head[c]);
        else
            printf(right ? "%*s  " : "%-*s  ", (int)w[c], head[c]);
    }
    for (size_t i = 0; i < l->n; i++)
        for (int c = 0; c < NCOL; c++) {
            bool right = c == 2 || c == 3 || c == 6 || c == 7;
            if (c == NCOL - 1)
                printf("%s\n", cells[i][c]);
            else
                printf(right ? "%*s  " : "%-*s  ", (int)w[c], cells[i][c]);
        }
    free(cells);
}

int logctl_ls(int argc, char **argv)
{
    enum { OPT_ACTIVE = 256, OPT_DONE };
    static const struct option longopts[] = {
        { "active", no_argument, NULL, OPT_ACTIVE },
        { "done", no_argument, NULL, OPT_DONE },
        { "producer", required_argument, NULL, 'p' },
        { "bytes", no_argument, NULL, 'b' },
        { "json", no_argument, NULL, 'j' },
        { "spool", required_argument, NULL, 's' },
        { "admin-socket", required_argument, NULL, 'a' },
        { "config", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *producer = NULL, *spool_opt = NULL, *socket_opt = NULL, *config = NULL;
    bool active = true, done = true, bytes = false, json = false, damaged = false;
    struct json_value *reply = NULL;
    char *spool = NULL;
    struct list l = { 0 };
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":p:bjs:a:c:h", longopts, NULL)) != -1) {
        switch (opt) {
        case OPT_ACTIVE: done = false; active = true; break;
        case OPT_DONE: active = false; done = true; break;
        case 'p': producer = optarg; break;
        case 'b': bytes = true; break;
        case 'j': json = true; break;
        case 's': spool_opt = optarg; break;
        case 'a': socket_opt = optarg; break;
        case 'c': config = optarg; break;
        case 'h': ls_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("ls", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("ls", "unexpected argument '%s'", argv[optind]);
    if (producer && wire_check_producer_name(producer, strlen(producer)) < 0)
        return logctl_usage_error("ls", "--producer '%s': names are %s", producer,
                                  wire_producer_name_rule);

    if (active) {
        char *socket_path = NULL;

        r = logctl_admin_socket("ls", socket_opt, config, &socket_path);
        if (r != 0)
            return r;
        r = logctl_admin_request("ls", socket_path, "ls", producer, LS_TIMEOUT_MS, &reply);
        free(socket_path);
        if (r != 0)
            return r;
        r = add_active(&l, reply);
        if (r < 0) {
            fprintf(stderr, "logctl: ls: the daemon's reply is not a list of shards\n");
            json_value_free(reply);
            list_free(&l);
            return LOGCTL_EXIT_FAILURE;
        }
    }
    if (done) {
        const char *daemon_spool = json_get_str(reply, "spool", NULL);

        if (!spool_opt && daemon_spool) {
            spool = strdup(daemon_spool);
            r = spool ? 0 : LOGCTL_EXIT_FAILURE;
        } else {
            r = logctl_spool("ls", spool_opt, config, &spool);
        }
        if (r == 0) {
            int e = add_done(&l, spool, producer);
            if (e < 0)
                r = logctl_exit_for_errno(e);
        }
        if (r != 0) {
            json_value_free(reply);
            list_free(&l);
            free(spool);
            return r;
        }
    }
    json_value_free(reply);
    if (l.n > 1)
        qsort(l.v, l.n, sizeof(l.v[0]), cmp_entry);
    if (json)
        print_json(&l);
    else
        print_table(&l, bytes);
    fflush(stdout);
    for (size_t i = 0; i < l.n; i++)
        if (l.v[i].error) {
            fprintf(stderr, "logctl: ls: %s/%s: %s\n", spool, l.v[i].file, l.v[i].error);
            damaged = true;
        }
    list_free(&l);
    free(spool);
    if (ferror(stdout)) {
        fprintf(stderr, "logctl: ls: write error on standard output\n");
        return LOGCTL_EXIT_FAILURE;
    }
    return damaged ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
