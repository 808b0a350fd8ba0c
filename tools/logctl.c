/* logctl: the administrator's tool for logshard. This file owns the command
 * line as a whole (dispatch, top-level --help and --version, the shared
 * option-error messages) and the command line of `logctl merge`, whose work
 * is done by merge.c: merge.c is a library that tests call directly, so it
 * never prints, and everything a user sees from a merge is written here.
 *
 * Exit status everywhere: 0 success, 1 a problem found or an operation
 * failed, 2 usage error. Errors go to stderr, prefixed "logctl: <command>:"
 * and naming the file and the reason. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "logctl.h"
#include "logshard-build.h"
#include "merge.h"

int logctl_option_error(const char *command, int opt, char **argv)
{
    const char *arg = optind > 0 ? argv[optind - 1] : "";

    if (opt == ':') {
        if (optopt != 0 && arg[0] == '-' && arg[1] != '-')
            fprintf(stderr, "logctl: %s: option '-%c' needs an argument\n", command, optopt);
        else
            fprintf(stderr, "logctl: %s: option '%s' needs an argument\n", command, arg);
    } else if (optopt != 0) {
        fprintf(stderr, "logctl: %s: unknown option '-%c'\n", command, optopt);
    } else {
        fprintf(stderr, "logctl: %s: unknown option '%s'\n", command, arg);
    }
    fprintf(stderr, "Try 'logctl %s --help'.\n", command);
    return LOGCTL_EXIT_USAGE;
}

int logctl_usage_error(const char *command, const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "logctl: %s: ", command);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'logctl %s --help'.\n", command);
    return LOGCTL_EXIT_USAGE;
}

static void merge_help(void)
{
    printf("Usage: logctl merge --spool DIR [--output FILE] [--delete] [--verbose]\n"
           "\n"
           "Concatenate every sealed shard in DIR/done/ into one merged file, which\n"
           "'logctl cat' reads like a shard. Only files named\n"
           "<producer>.<16 lowercase hex digit id>.shard are taken; temp files,\n"
           "dotfiles and other names are ignored. Without --delete the sources are\n"
           "left in place.\n"
           "\n"
           "Order: by producer name in byte order (as strcmp), then by shard id\n"
           "ascending, which keeps each producer's records in the order written.\n"
           "\n"
           "Every source is checked (header, every record's length and CRC, and that\n"
           "the header matches the file name) before anything is written; one bad\n"
           "source refuses the whole merge and no output is created. The output is\n"
           "written under a temp name (.<name>.<pid>.tmp) in its directory, synced,\n"
           "and renamed into place; an existing file is never overwritten.\n"
           "\n"
           "Crash safety: one merge at a time per spool (DIR/merge.lock; a second one\n"
           "fails). Before copying, the merge records the output, temp and source\n"
           "names in DIR/merge.intent; a merge that was killed is finished (its\n"
           "output was published: the sources it lists are removed if it was a\n"
           "--delete merge) or rolled back (its temp file is removed) by the next\n"
           "merge, which says so on its first line. A merge killed at any instant and\n"
           "run again leaves every record in exactly one output file.\n"
           "\n"
           "Options:\n"
           "  -s, --spool DIR     the daemon's spool directory (required)\n"
           "  -o, --output FILE   where to write; default\n"
           "                      DIR/merged/merged-<UTC YYYYmmddTHHMMSS.nnnnnnnnnZ>.lsm\n"
           "                      (DIR/merged/ is created when missing)\n"
           "  -d, --delete        remove the merged shards from DIR/done/ once the\n"
           "                      output is durable\n"
           "  -v, --verbose       also print one line per merged shard\n"
           "  -h, --help          show this help\n"
           "\n"
           "Prints a summary: shards, records, bytes and the output path. With no\n"
           "sealed shard it says so, creates nothing and exits 0.\n"
           "Exit status: 0 merged (or nothing to merge), 1 failed (also when another\n"
           "merge is running on DIR), 2 usage error.\n");
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

int logctl_merge(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "spool", required_argument, NULL, 's' },
        { "output", required_argument, NULL, 'o' },
        { "delete", no_argument, NULL, 'd' },
        { "verbose", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct merge_opts opts = { 0 };
    struct merge_result res;
    bool verbose = false;
    int opt, r;

    while ((opt = getopt_long(argc, argv, ":s:o:dvh", longopts, NULL)) != -1) {
        switch (opt) {
        case 's':
            opts.spool = optarg;
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
        case 'h':
            merge_help();
            return LOGCTL_EXIT_OK;
        default:
            return logctl_option_error("merge", opt, argv);
        }
    }
    if (optind < argc)
        return logctl_usage_error("merge", "unexpected argument '%s'", argv[optind]);
    if (!opts.spool || !*opts.spool)
        return logctl_usage_error("merge", "--spool DIR is required");
    if (opts.output && !*opts.output)
        return logctl_usage_error("merge", "--output needs a file name");

    r = merge_run(&opts, &res);
    /* Whatever else happened, an interrupted merge that was dealt with is
     * news: it changed files. */
    print_recovery(&res);
    if (r == 0 && res.n_sources == 0) {
        printf("no sealed shards in %s/done; nothing merged, no file created\n", opts.spool);
        merge_result_free(&res);
        return LOGCTL_EXIT_OK;
    }
    if (r < 0 && !res.output_path) {
        fflush(stdout);
        fprintf(stderr, "logctl: merge: %s\n", res.error ? res.error : strerror(-r));
        merge_result_free(&res);
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
    if (res.used_fallback)
        printf("note: copy_file_range(2) was not available here; copied with read/write\n");
    if (r < 0) {
        /* The output exists; what failed came after it (a directory sync,
         * removing a source), and the next merge finishes it. */
        fflush(stdout);
        fprintf(stderr, "logctl: merge: %s\n", res.error ? res.error : strerror(-r));
    }
    merge_result_free(&res);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "logctl: merge: write error on standard output: %s\n", strerror(errno));
        return LOGCTL_EXIT_FAILURE;
    }
    return r < 0 ? LOGCTL_EXIT_FAILURE : LOGCTL_EXIT_OK;
}

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "merge", logctl_merge, "concatenate the sealed shards of a spool into one file" },
    { "cat", logctl_cat, "print the records of shard or merged files" },
    { "send", logctl_send, "send the lines of standard input to logshardd as records" },
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: logctl [--help] [--version] COMMAND [OPTIONS...]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'logctl COMMAND --help' for the options of a command.\n"
               "Exit status: 0 success, 1 a problem found or an operation failed,\n"
               "2 usage error.\n");
}

int main(int argc, char **argv)
{
    const char *name;

    if (argc < 2) {
        usage(stderr);
        return LOGCTL_EXIT_USAGE;
    }
    name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 || strcmp(name, "help") == 0) {
        usage(stdout);
        return LOGCTL_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("logctl (logshard) %s\n", LOGSHARD_VERSION);
        return LOGCTL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(name, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    if (name[0] == '-')
        fprintf(stderr, "logctl: unknown option '%s'\n", name);
    else
        fprintf(stderr, "logctl: unknown command '%s'\n", name);
    fprintf(stderr, "Try 'logctl --help'.\n");
    return LOGCTL_EXIT_USAGE;
}
