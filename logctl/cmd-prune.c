/* logctl prune: the command line of retention (docs/RETENTION.md). The
 * limits come from [retention] of the config file, each overridden by its
 * option, as logctl ship takes its options over [ship]; the engine
 * (prune-run.c, prune-select.c) decides and removes and never prints;
 * this file shows what it did, one line per file and a summary, or one
 * JSON object (--json).
 *
 * Exit status: 0 done (also when there was nothing to do), 1 failed (a
 * file named with the reason), 2 usage error, 3 merge.lock was held by a
 * merge, a shipper removing shipped shards or another prune, and nothing
 * was removed: logshard-prune.service counts that as success, and the
 * next run does the work. Errors go to stderr, "logctl: prune: <file>:
 * <reason>". */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "logshard-build.h"
#include "prune.h"
#include "text.h"

static void prune_help(void)
{
    printf("Usage: logctl prune [--spool DIR] [--config FILE] [--dry-run] [--json]\n"
           "                    [--merged-dir DIR] [--merged-max-age DURATION]\n"
           "                    [--merged-max-bytes SIZE] [--shipped-max-age DURATION]\n"
           "                    [--shipped-max-bytes SIZE]\n"
           "\n"
           "Remove what logshard has finished with, oldest first, by the limits of\n"
           "[retention] in the config file (each option below overrides its key):\n"
           "  - merged files: the files of the merged directory named as logctl merge\n"
           "    names its output, merged-<UTC time>.lsm; older than merged_max_age (by\n"
           "    the time in the name), then the oldest until the rest is at most\n"
           "    merged_max_bytes;\n"
           "  - shipped shards, only on a spool logctl ship ships (DIR/ship/progress\n"
           "    exists): the sealed shards of DIR/done/ every record of which is\n"
           "    committed to Kafka, by the time of their newest record and their size\n"
           "    in the same way. Their streams' positions are recorded in\n"
           "    DIR/streams/ first, so the daemon can still resume those streams.\n"
           "Never an active shard, a sealed shard not shipped whole, quarantine/, a\n"
           "file an interrupted merge still needs, or anything else; no symbolic link\n"
           "is ever followed (a symbolic link as the spool or the merged directory is\n"
           "refused). 0 for a limit: none. No limit at all: nothing to do.\n"
           "\n"
           "Holds DIR/merge.lock while it runs, as logctl merge does; when a merge, a\n"
           "shipper removing shipped shards or another prune holds it, nothing is\n"
           "removed and the exit status is 3. Killed at any moment and run again, it\n"
           "removes the rest and never anything it must keep.\n"
           "\n"
           "Options:\n"
           "  -s, --spool DIR                 the spool (default: [daemon] spool of the\n"
           "                                  config file, else /var/lib/logshard)\n"
           "  -c, --config FILE               the config file (default\n"
           "                                  " LOGSHARD_DEFAULT_CONFIG ")\n"
           "  -n, --dry-run                   print what would be removed; remove\n"
           "                                  nothing, write nothing, take no lock\n"
           "  -j, --json                      print one JSON object: ok, dry_run, spool,\n"
           "                                  merged_dir, shipping, removed (path, kind,\n"
           "                                  bytes, reason, time, error), removed_files,\n"
           "                                  removed_bytes, kept, notes,\n"
           "                                  positions_file, error\n"
           "      --merged-dir DIR            where merged files are ([retention]\n"
           "                                  merged_dir; default DIR/merged)\n"
           "      --merged-max-age DURATION   remove merged files older than this (\"30d\")\n"
           "      --merged-max-bytes SIZE     keep at most this many bytes of merged\n"
           "                                  files (\"100G\")\n"
           "      --shipped-max-age DURATION  remove shipped shards older than this\n"
           "      --shipped-max-bytes SIZE    keep at most this many bytes of shipped\n"
           "                                  shards\n"
           "  -h, --help                      this text\n"
           "\n"
           "Prints one line per file removed (its path, its size and why: its age or\n"
           "the size limit) and a summary; notes on files left alone go to standard\n"
           "error. Exit status: 0 done (also with nothing to do), 1 failed, 2 usage\n"
           "error, 3 DIR/merge.lock held (nothing removed).\n");
}

static const char *const kind_name[] = {
    [PRUNE_MERGED] = "merged",
    [PRUNE_SHIPPED] = "shipped",
};

static const char *const reason_name[] = {
    [PRUNE_KEEP] = "keep",
    [PRUNE_AGE] = "age",
    [PRUNE_SIZE] = "size",
};

/* The limit as the config file would spell it: "30d", "12h", "90s",
 * "250ms"; sizes as "10 GiB" or bytes. */
static void format_limit_ms(uint64_t ms, char *out, size_t size)
{
    static const struct {
        uint64_t ms;
        const char *unit;
    } units[] = { { 86400000u, "d" }, { 3600000u, "h" }, { 60000u, "m" }, { 1000u, "s" } };

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ms % units[i].ms == 0) {
            snprintf(out, size, "%" PRIu64 "%s", ms / units[i].ms, units[i].unit);
            return;
        }
    }
    snprintf(out, size, "%" PRIu64 "ms", ms);
}

static const char *entry_error(const struct prune_entry *e)
{
    return e->error == -ESTALE ? "replaced by another file while prune ran; kept"
                               : strerror(-e->error);
}

/* Why an entry goes, for people: its age against the age limit, or the
 * size limit it is over. */
static void describe(const struct prune_entry *e, const struct config *c, uint64_t now_ns,
                     char *out, size_t size)
{
    bool merged = e->kind == PRUNE_MERGED;
    char limit[64], age[64];

    if (e->reason == PRUNE_AGE) {
        format_limit_ms(merged ? c->retention_merged_max_age_ms : c->retention_shipped_max_age_ms,
                        limit, sizeof(limit));
        logctl_format_duration((double)(now_ns - e->time_ns) / 1e9, age, sizeof(age));
        snprintf(out, size, "age %s, over %s_max_age %s", age, merged ? "merged" : "shipped",
                 limit);
    } else {
        logctl_format_size(merged ? c->retention_merged_max_bytes
                                  : c->retention_shipped_max_bytes,
                           false, limit, sizeof(limit));
        snprintf(out, size, "size: %s over %s_max_bytes %s, oldest first",
                 merged ? "merged files" : "shipped shards", merged ? "merged" : "shipped",
                 limit);
    }
}

static void print_json(const struct prune_result *res, const struct prune_opts *opts, int r,
                       uint64_t removed_files, uint64_t removed_bytes)
{
    struct json_out o;
    char when[64];

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_bool(&o, "ok", r == 0);
    json_member_bool(&o, "dry_run", opts->dry_run);
    json_member_str(&o, "spool", opts->spool);
    json_member_str(&o, "merged_dir", res->merged_dir);
    json_member_bool(&o, "shipping", res->shipping);
    json_key(&o, "removed");
    json_arr_begin(&o);
    for (size_t i = 0; i < res->n_entries; i++) {
        const struct prune_entry *e = &res->entries[i];

        json_obj_begin(&o);
        json_member_str(&o, "path", e->path);
        json_member_str(&o, "kind", kind_name[e->kind]);
        json_member_u64(&o, "bytes", e->bytes);
        json_member_str(&o, "reason", reason_name[e->reason]);
        if (rfc3339_format(e->time_ns, 9, when, sizeof(when)) < 0)
            snprintf(when, sizeof(when), "?");
        json_member_str(&o, "time", when);
        json_member_str(&o, "error", e->error ? entry_error(e) : NULL);
        json_obj_end(&o);
    }
    json_arr_end(&o);
    json_member_u64(&o, "removed_files", removed_files);
    json_member_u64(&o, "removed_bytes", removed_bytes);
    json_key(&o, "kept");
    json_obj_begin(&o);
    json_member_u64(&o, "merged_files", res->merged_kept);
    json_member_u64(&o, "merged_bytes", res->merged_kept_bytes);
    json_member_u64(&o, "shipped_files", res->shipped_kept);
    json_member_u64(&o, "shipped_bytes", res->shipped_kept_bytes);
    json_member_u64(&o, "not_shipped", res->not_shipped);
    json_member_u64(&o, "pending_merge", res->pending);
    json_obj_end(&o);
    json_key(&o, "notes");
    json_arr_begin(&o);
    for (size_t i = 0; i < res->n_notes; i++) {
        json_obj_begin(&o);
        json_member_str(&o, "path", res->notes[i].path);
        json_member_str(&o, "reason", res->notes[i].why);
        json_obj_end(&o);
    }
    json_arr_end(&o);
    json_member_str(&o, "positions_file", res->positions_file);
    json_member_str(&o, "error",
                    r == 0 ? NULL : res->error ? res->error : strerror(r < 0 ? -r : EIO));
    json_obj_end(&o);
    (void)logctl_print_json_line("prune", &o); /* says why itself; the exit status stands */
}

static void print_text(const struct prune_result *res, const struct prune_opts *opts,
                       const struct config *c, uint64_t removed_files, uint64_t removed_bytes)
{
    const char *verb = opts->dry_run ? "would remove" : "removed";
    size_t merged = 0, shipped = 0;
    char why[256], size[32];

    for (size_t i = 0; i < res->n_entries; i++) {
        const struct prune_entry *e = &res->entries[i];

        if (e->error)
            continue; /* on stderr */
        describe(e, c, opts->now_ns, why, sizeof(why));
        printf("%s %s (%" PRIu64 " bytes): %s\n", verb, e->path, e->bytes, why);
        merged += e->kind == PRUNE_MERGED;
        shipped += e->kind == PRUNE_SHIPPED;
    }
    if (res->merged_dir_missing)
        printf("%s does not exist: no merged file to remove\n", res->merged_dir);
    if (res->shipped_looked && !res->shipping && !res->error)
        printf("%s/ship/progress does not exist: the spool is not shipped, so no sealed shard "
               "of %s/done is removed\n",
               opts->spool, opts->spool);
    logctl_format_size(removed_bytes, false, size, sizeof(size));
    printf("%s %" PRIu64 " file%s, %" PRIu64 " bytes (%s): %zu merged file%s, %zu shipped "
           "shard%s%s\n",
           opts->dry_run ? "prune --dry-run: would remove" : "pruned", removed_files,
           removed_files == 1 ? "" : "s", removed_bytes, size, merged, merged == 1 ? "" : "s",
           shipped, shipped == 1 ? "" : "s", opts->dry_run ? "; nothing was removed" : "");
    if (res->merged_looked) {
        logctl_format_size(res->merged_kept_bytes, false, size, sizeof(size));
        printf("kept %zu merged file%s (%s) in %s\n", res->merged_kept,
               res->merged_kept == 1 ? "" : "s", size, res->merged_dir);
    }
    if (res->shipping) {
        logctl_format_size(res->shipped_kept_bytes, false, size, sizeof(size));
        printf("kept %zu shipped shard%s (%s) and %zu not yet shipped whole in %s/done\n",
               res->shipped_kept, res->shipped_kept == 1 ? "" : "s", size, res->not_shipped,
               opts->spool);
    }
    if (res->pending)
        printf("kept %zu file%s an interrupted merge needs: run logctl merge to finish it\n",
               res->pending, res->pending == 1 ? "" : "s");
}

/* An option over its [retention] key, parsed as the config file's value. */
static int apply(struct config *c, const char *option, const char *key, const char *value)
{
    char why[512];

    if (config_set(c, "retention", key, value, why, sizeof(why)) < 0)
        return logctl_usage_error("prune", "--%s '%s': %s", option, value, why);
    return 0;
}

int logctl_prune(int argc, char **argv)
{
    enum {
        OPT_MERGED_DIR = 256,
        OPT_MERGED_MAX_AGE,
        OPT_MERGED_MAX_BYTES,
        OPT_SHIPPED_MAX_AGE,
        OPT_SHIPPED_MAX_BYTES,
    };
    static const struct option options[] = {
        { "spool", required_argument, NULL, 's' },
        { "config", required_argument, NULL, 'c' },
        { "dry-run", no_argument, NULL, 'n' },
        { "json", no_argument, NULL, 'j' },
        { "merged-dir", required_argument, NULL, OPT_MERGED_DIR },
        { "merged-max-age", required_argument, NULL, OPT_MERGED_MAX_AGE },
        { "merged-max-bytes", required_argument, NULL, OPT_MERGED_MAX_BYTES },
        { "shipped-max-age", required_argument, NULL, OPT_SHIPPED_MAX_AGE },
        { "shipped-max-bytes", required_argument, NULL, OPT_SHIPPED_MAX_BYTES },
        { "help", no_argument, NULL, 'h' },
        {},
    };
    static const char *const keys[] = {
        [OPT_MERGED_DIR - OPT_MERGED_DIR] = "merged_dir",
        [OPT_MERGED_MAX_AGE - OPT_MERGED_DIR] = "merged_max_age",
        [OPT_MERGED_MAX_BYTES - OPT_MERGED_DIR] = "merged_max_bytes",
        [OPT_SHIPPED_MAX_AGE - OPT_MERGED_DIR] = "shipped_max_age",
        [OPT_SHIPPED_MAX_BYTES - OPT_MERGED_DIR] = "shipped_max_bytes",
    };
    const char *set[sizeof(keys) / sizeof(keys[0])] = { NULL };
    const char *spool_opt = NULL, *config_path = NULL;
    struct prune_opts opts = { 0 };
    struct prune_result res;
    uint64_t removed_files = 0, removed_bytes = 0;
    bool json = false, failed_entry = false, busy;
    struct config c;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":s:c:njh", options, NULL)) != -1) {
        switch (opt) {
        case 's': spool_opt = optarg; break;
        case 'c': config_path = optarg; break;
        case 'n': opts.dry_run = true; break;
        case 'j': json = true; break;
        case OPT_MERGED_DIR:
        case OPT_MERGED_MAX_AGE:
        case OPT_MERGED_MAX_BYTES:
        case OPT_SHIPPED_MAX_AGE:
        case OPT_SHIPPED_MAX_BYTES: set[opt - OPT_MERGED_DIR] = optarg; break;
        case 'h': prune_help(); return LOGCTL_EXIT_OK;
        default: return logctl_option_error("prune", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("prune", "unexpected argument '%s'", argv[optind]);
    if (spool_opt && !*spool_opt)
        return logctl_usage_error("prune", "--spool needs a directory");
    r = logctl_load_config("prune", config_path, &c);
    if (r != 0)
        return r;
    for (size_t i = 0; r == 0 && i < sizeof(keys) / sizeof(keys[0]); i++) {
        static const char *const option_names[] = {
            "merged-dir", "merged-max-age", "merged-max-bytes", "shipped-max-age",
            "shipped-max-bytes",
        };

        if (set[i])
            r = apply(&c, option_names[i], keys[i], set[i]);
    }
    if (r != 0) {
        config_free(&c);
        return r;
    }
    opts.spool = spool_opt ? spool_opt : c.spool;
    opts.merged_dir = c.retention_merged_dir;
    opts.merged_max_age_ns = c.retention_merged_max_age_ms * 1000000u;
    opts.merged_max_bytes = c.retention_merged_max_bytes;
    opts.shipped_max_age_ns = c.retention_shipped_max_age_ms * 1000000u;
    opts.shipped_max_bytes = c.retention_shipped_max_bytes;
    opts.now_ns = now_realtime_ns();

    r = prune_run(&opts, &res);
    for (size_t i = 0; i < res.n_entries; i++) {
        if (res.entries[i].error) {
            failed_entry = true;
            continue;
        }
        removed_files++;
        removed_bytes += res.entries[i].bytes;
    }
    if (json) {
        print_json(&res, &opts, r, removed_files, removed_bytes);
    } else if (res.lock_busy || (r < 0 && !res.merged_looked && !res.shipped_looked)) {
        /* Nothing was looked at: only the message below. */
    } else if (!opts.merged_max_age_ns && !opts.merged_max_bytes && !opts.shipped_max_age_ns &&
               !opts.shipped_max_bytes) {
        printf("nothing to prune: no [retention] limit is set (merged_max_age, "
               "merged_max_bytes, shipped_max_age, shipped_max_bytes)\n");
    } else {
        print_text(&res, &opts, &c, removed_files, removed_bytes);
    }
    fflush(stdout);
    for (size_t i = 0; i < res.n_notes; i++)
        fprintf(stderr, "logctl: prune: %s: %s\n", res.notes[i].path, res.notes[i].why);
    for (size_t i = 0; i < res.n_entries; i++)
        if (res.entries[i].error)
            fprintf(stderr, "logctl: prune: %s: cannot remove: %s\n", res.entries[i].path,
                    entry_error(&res.entries[i]));
    if (r < 0 && (res.error || !failed_entry))
        fprintf(stderr, "logctl: prune: %s\n", res.error ? res.error : strerror(-r));
    busy = res.lock_busy;
    prune_result_free(&res);
    config_free(&c);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: prune: write error on standard output: %s\n", strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    if (busy)
        return LOGCTL_EXIT_BUSY;
    return r < 0 ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
