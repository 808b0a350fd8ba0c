/* logctl merge: the command line of the merge engine (merge/, whose
 * merge_run does the work and never prints): the options, the help text,
 * the progress line on a terminal (progress.c, fed by the engine's
 * progress callback on this thread), and what the user sees of a merge,
 * as a summary or as one JSON object (--json).
 *
 * Exit status: 0 merged (or nothing to merge), 1 failed or a source was
 * left out, 2 usage error. Errors go to stderr, prefixed "logctl: merge:"
 * and naming the file and the reason. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileutil.h"
#include "json.h"
#include "logctl.h"
#include "merge.h"
#include "progress.h"
#include "wire.h"

static void merge_help(void)
{
    printf("Usage: logctl merge [--spool DIR] [--producer NAME] [--before TIME]\n"
           "                    [--output FILE] [--delete] [--verify] [--verbose]\n"
           "                    [--config FILE]\n"
           "\n"
           "Concatenate the sealed shards in DIR/done/ into one merged file, which\n"
           "'logctl cat' reads like a shard. Only files named\n"
           "<producer>.<16 lowercase hex digit id>.shard are taken; temp files,\n"
           "dotfiles and other names are ignored. Without --delete the sources are\n"
           "left in place.\n"
           "\n"
           "Order: by producer name in byte order (as strcmp), then by shard id\n"
           "ascending, except that the shards of one stream take the places its\n"
           "shards hold in that order by their first position, so each producer\n"
           "stream's records come out in position order. With --delete, the\n"
           "position each removed stream reached is recorded in DIR/streams/\n"
           "before any source is removed, for the daemon to resume it from.\n"
           "\n"
           "Every record of every source is read and checked before anything is\n"
           "written: the header must match the file name, every record's length and\n"
           "CRC must hold, and a seal trailer must agree with what was read. A\n"
           "source that fails (damaged, cut short, empty, not a shard) is not merged\n"
           "and never deleted: it is moved unchanged to DIR/quarantine/, with a line\n"
           "on standard error naming the file, the offset and the reason. A source\n"
           "that cannot be read, and anything under a shard name that is not a\n"
           "regular file (a FIFO is never opened), stays where it is and is reported\n"
           "the same way. The rest is merged as usual, and the exit status is 1.\n"
           "The output is written under a temp name (.<name>.<pid>.tmp) in its\n"
           "directory, synced, and renamed into place; an existing file is never\n"
           "overwritten.\n"
           "\n"
           "Crash safety: one merge at a time per spool (DIR/merge.lock; a second one\n"
           "fails). Before copying, the merge records the output, temp and source\n"
           "names in DIR/merge.intent; a merge that was killed is finished (its\n"
           "output was published: the sources it lists are removed if it was a\n"
           "--delete merge) or rolled back (its temp file is removed) by the next\n"
           "merge, which says so on its first line. A merge killed at any instant and\n"
           "run again leaves every record in exactly one output file.\n"
           "\n"
           "Selection: every sealed shard, or with --producer only that producer's,\n"
           "and with --before only the shards whose every record was received before\n"
           "TIME (whole shards only: one that straddles TIME stays for a later merge).\n"
           "\n"
           "Options:\n"
           "  -s, --spool DIR     the daemon's spool directory (default: [daemon] spool\n"
           "                      of the config file, else /var/lib/logshard)\n"
           "  -p, --producer NAME only the shards of producer NAME\n"
           "  -B, --before TIME   only shards whose records all came before TIME; TIME\n"
           "                      as in logctl cat: \"2026-12-01 00:00\", \"today\", \"-1h\"\n"
           "  -o, --output FILE   where to write; default\n"
           "                      DIR/merged/merged-<UTC YYYYmmddTHHMMSS.nnnnnnnnnZ>.lsm\n"
           "                      (DIR/merged/ is created when missing)\n"
           "  -d, --delete        remove the merged shards from DIR/done/ once the\n"
           "                      output is durable\n"
           "  -v, --verbose       also print one line per merged shard\n"
           "  -V, --verify        accepted for older scripts: every record is always\n"
           "                      checked\n"
           "  -c, --config FILE   the daemon's config file, to find the spool\n"
           "  -j, --json          print one JSON object instead of the summary: ok,\n"
           "                      output, shards, records, bytes, deleted, sources,\n"
           "                      recovery (null, finished, rolled_back), problems\n"
           "                      (file, kind, offset, reason, quarantined_as), error\n"
           "  -h, --help          show this help\n"
           "\n"
           "On a terminal, a merge that takes longer than a second shows a progress\n"
           "line (bytes and shards done, rate, time left) on standard error, erased\n"
           "when it ends. Prints a summary: shards, records, bytes and the output\n"
           "path. With no sealed shard to merge it says so, creates nothing and\n"
           "exits 0.\n"
           "Exit status: 0 merged (or nothing to merge), 1 failed, or a source was\n"
           "left out (see above), or another merge is running on DIR; 2 usage error.\n");
}

static void print_recovery(const struct merge_result *res)
{
    switch (res->recovery) {
    case MERGE_RECOVERY_NONE:
        break;
    case MERGE_RECOVERY_FINISHED:
        printf("finished an interrupted merge: removed %zu merged source%s (output %s)\n",
               res->recovery_deleted, res->recovery_deleted == 1 ? "" : "s",
               res->recovery_output);
        break;
    case MERGE_RECOVERY_ROLLED_BACK:
        if (res->recovery_temp)
            printf("rolled back an interrupted merge: removed temp file %s\n",
                   res->recovery_temp);
        else
            printf("rolled back an interrupted merge: no temp file was left (output %s "
                   "was never published)\n",
                   res->recovery_output);
        break;
    }
}

static const char *const problem_kind[] = {
    [MERGE_PROBLEM_DAMAGED] = "damaged",
    [MERGE_PROBLEM_UNREADABLE] = "unreadable",
    [MERGE_PROBLEM_NOT_REGULAR] = "not_regular",
};

/* One line on stderr per file of done/ that was left out: which file, where
 * and why, and where it is now. */
static void print_problems(const struct merge_result *res, const char *spool)
{
    for (size_t i = 0; i < res->n_problems; i++) {
        const struct merge_problem *p = &res->problems[i];
        char at[48] = "";

        if (p->offset != UINT64_MAX)
            snprintf(at, sizeof(at), " at offset %" PRIu64, p->offset);
        if (p->quarantined_as)
            fprintf(stderr, "logctl: merge: %s/done/%s: %s%s; not merged, moved to %s/%s/%s\n",
                    spool, p->name, p->why, at, spool, "quarantine", p->quarantined_as);
        else if (p->kind == MERGE_PROBLEM_DAMAGED)
            fprintf(stderr,
                    "logctl: merge: %s/done/%s: %s%s; not merged, and left in place: moving it "
                    "to %s/quarantine/ failed: %s\n",
                    spool, p->name, p->why, at, spool, strerror(-p->move_error));
        else
            fprintf(stderr, "logctl: merge: %s/done/%s: %s%s; not merged, left in place\n",
                    spool, p->name, p->why, at);
    }
    if (res->n_problems > 0)
        fprintf(stderr, "logctl: merge: %zu file%s in %s/done left out of the merge\n",
                res->n_problems, res->n_problems == 1 ? "" : "s", spool);
}

/* merge --json: one object saying what happened, also on failure. */
static void print_merge_json(const struct merge_result *res, const struct merge_opts *opts,
                             int r)
{
    static const char *const recovery[] = {
        [MERGE_RECOVERY_NONE] = NULL,
        [MERGE_RECOVERY_FINISHED] = "finished",
        [MERGE_RECOVERY_ROLLED_BACK] = "rolled_back",
    };
    struct json_out o;

    json_out_init(&o);
    json_obj_begin(&o);
    json_member_bool(&o, "ok", r == 0 && res->n_problems == 0);
    json_member_str(&o, "spool", opts->spool);
    json_member_str(&o, "output", res->output_path);
    json_member_u64(&o, "shards", res->shards);
    json_member_u64(&o, "records", res->records);
    json_member_u64(&o, "bytes", res->bytes);
    json_member_u64(&o, "deleted", res->deleted);
    json_member_u64(&o, "not_shipped", res->not_shipped);
    json_member_bool(&o, "copy_fallback", res->used_fallback);
    json_key(&o, "sources");
    json_arr_begin(&o);
    for (size_t i = 0; res->output_path && i < res->n_sources; i++) {
        json_obj_begin(&o);
        json_member_str(&o, "file", res->sources[i].name);
        json_member_u64(&o, "records", res->sources[i].records);
        json_member_u64(&o, "bytes", res->sources[i].bytes);
        json_obj_end(&o);
    }
    json_arr_end(&o);
    json_member_str(&o, "recovery", recovery[res->recovery]);
    json_key(&o, "problems");
    json_arr_begin(&o);
    for (size_t i = 0; i < res->n_problems; i++) {
        const struct merge_problem *p = &res->problems[i];

        json_obj_begin(&o);
        json_member_str(&o, "file", p->name);
        json_member_str(&o, "kind", problem_kind[p->kind]);
        if (p->offset != UINT64_MAX)
            json_member_u64(&o, "offset", p->offset);
        else
            json_member_str(&o, "offset", NULL);
        json_member_str(&o, "reason", p->why);
        json_member_str(&o, "quarantined_as", p->quarantined_as);
        json_obj_end(&o);
    }
    json_arr_end(&o);
    json_member_str(&o, "error", r < 0 ? (res->error ? res->error : strerror(-r)) : NULL);
    json_obj_end(&o);
    (void)logctl_print_json_line("merge", &o); /* says why itself; the exit status stands */
}

static void on_progress(const struct merge_progress *mp, void *userdata)
{
    progress_update(userdata, mp->phase == MERGE_PHASE_COPY, mp->shards_done, mp->shards_total,
                    mp->bytes_done, mp->bytes_total);
}

int logctl_merge(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "spool", required_argument, NULL, 's' },
        { "producer", required_argument, NULL, 'p' },
        { "before", required_argument, NULL, 'B' },
        { "config", required_argument, NULL, 'c' },
        { "json", no_argument, NULL, 'j' },
        { "output", required_argument, NULL, 'o' },
        { "delete", no_argument, NULL, 'd' },
        { "verbose", no_argument, NULL, 'v' },
        { "verify", no_argument, NULL, 'V' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct merge_opts opts = { 0 };
    struct merge_result res;
    struct progress prog;
    const char *spool_opt = NULL, *config = NULL;
    char *spool = NULL;
    bool verbose = false, json = false, problems;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":s:p:B:c:jo:dvVh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            spool_opt = optarg;
            break;
        case 'p':
            if (wire_check_producer_name(optarg, strlen(optarg)) < 0)
                return logctl_usage_error("merge", "--producer '%s': names are %s", optarg,
                                          wire_producer_name_rule);
            opts.producer = optarg;
            break;
        case 'B':
            r = logctl_parse_time(optarg, now_realtime_ns(), &opts.before_ns);
            if (r < 0 || opts.before_ns == 0)
                return logctl_usage_error("merge",
                                          "--before '%s': not a time (e.g. \"2026-12-01 "
                                          "00:00\", \"today\", \"-1h\")",
                                          optarg);
            break;
        case 'c':
            config = optarg;
            break;
        case 'j':
            json = true;
            break;
        case 'o':
            opts.output = optarg;
            break;
        case 'd':
            opts.delete_sources = true;
            break;
        case 'v':
            verbose = true;
            break;
        case 'V':
            /* Kept so command lines keep their meaning; checking every
             * record is what every merge does now. */
            break;
        case 'h':
            merge_help();
            return LOGCTL_EXIT_OK;
        default:
            return logctl_option_error("merge", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("merge", "unexpected argument '%s'", argv[optind]);
    if (spool_opt && !*spool_opt)
        return logctl_usage_error("merge", "--spool needs a directory");
    if (opts.output && !*opts.output)
        return logctl_usage_error("merge", "--output needs a file name");
    r = logctl_spool("merge", spool_opt, config, &spool);
    if (r != 0)
        return r;
    opts.spool = spool;

    progress_init(&prog);
    if (prog.fd >= 0) { /* a terminal to draw on */
        opts.progress = on_progress;
        opts.userdata = &prog;
    }
    r = merge_run(&opts, &res);
    progress_clear(&prog);
    if (json) {
        print_merge_json(&res, &opts, r);
        fflush(stdout);
        print_problems(&res, opts.spool);
        if (r < 0)
            fprintf(stderr, "logctl: merge: %s\n", res.error ? res.error : strerror(-r));
        problems = res.n_problems > 0;
        merge_result_free(&res);
        free(spool);
        if (fflush(stdout) != 0) {
            fprintf(stderr, "logctl: merge: write error on standard output: %s\n",
                    strerror(errno));
            return LOGCTL_EXIT_FAILURE;
        }
        return r < 0 || problems ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
    }
    /* Whatever else happened, an interrupted merge that was dealt with is
     * news: it changed files. */
    print_recovery(&res);
    problems = res.n_problems > 0;
    if (r == 0 && res.n_sources == 0) {
        printf("no %ssealed shards %sin %s/done; nothing merged, no file created\n",
               problems ? "valid " : "",
               opts.producer || opts.before_ns || res.not_shipped ? "selected " : "",
               opts.spool);
        if (res.not_shipped)
            printf("%zu shard%s not yet shipped to Kafka by logctl ship left in %s/done\n",
                   res.not_shipped, res.not_shipped == 1 ? "" : "s", opts.spool);
        fflush(stdout);
        print_problems(&res, opts.spool);
        merge_result_free(&res);
        free(spool);
        return problems ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
    }
    if (r < 0 && !res.output_path) {
        fflush(stdout);
        print_problems(&res, opts.spool);
        fprintf(stderr, "logctl: merge: %s\n", res.error ? res.error : strerror(-r));
        merge_result_free(&res);
        free(spool);
        return LOGCTL_EXIT_FAILURE;
    }
    if (verbose)
        for (size_t i = 0; i < res.n_sources; i++)
            printf("  %s: %" PRIu64 " record%s, %" PRIu64 " bytes\n", res.sources[i].name,
                   res.sources[i].records, res.sources[i].records == 1 ? "" : "s",
                   res.sources[i].bytes);
    printf("merged %zu shard%s, %" PRIu64 " record%s, %" PRIu64 " bytes into %s\n", res.shards,
           res.shards == 1 ? "" : "s", res.records, res.records == 1 ? "" : "s", res.bytes,
           res.output_path);
    if (opts.delete_sources)
        printf("removed %zu merged shard%s from %s/done\n", res.deleted,
               res.deleted == 1 ? "" : "s", opts.spool);
    if (res.not_shipped)
        printf("%zu shard%s not yet shipped to Kafka by logctl ship left in %s/done for a "
               "later merge\n",
               res.not_shipped, res.not_shipped == 1 ? "" : "s", opts.spool);
    if (res.used_fallback)
        printf("note: copy_file_range(2) was not available here; copied with read/write\n");
    fflush(stdout);
    print_problems(&res, opts.spool);
    if (r < 0) {
        /* The output exists; what failed came after it (a directory sync,
         * removing a source), and the next merge finishes it. */
        fflush(stdout);
        fprintf(stderr, "logctl: merge: %s\n", res.error ? res.error : strerror(-r));
    }
    merge_result_free(&res);
    free(spool);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: merge: write error on standard output: %s\n", strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    return r < 0 || problems ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}
