/* logctl: the administrator's tool for logshard. This file owns the command
 * line as a whole: the dispatch to one cmd-<name>.c per subcommand, the
 * top-level --help and --version, and the option-error messages every
 * subcommand shares, so that they all read alike.
 *
 * Exit status everywhere: 0 success, 1 a problem found or an operation
 * failed, 2 usage error or access refused. Errors go to stderr, prefixed
 * "logctl: <command>:" and naming the file and the reason. */
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "logctl.h"
#include "logshard-build.h"
#include "process.h"

int logctl_print_json_line(const char *command, struct json_out *o)
{
    char *text;
    size_t len;

    json_raw(o, "\n", 1);
    if (json_out_finish(o, &text, &len) < 0) {
        fprintf(stderr, "logctl: %s: out of memory\n", command);
        return LOGCTL_EXIT_FAILURE;
    }
    fputs(text, stdout);
    free(text);
    return 0;
}

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

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "status", logctl_status, "show what the running daemon is doing" },
    { "ls", logctl_ls, "list the shards being written and the sealed ones" },
    { "rotate", logctl_rotate, "seal the shards being written now" },
    { "cat", logctl_cat, "print records of files or of the spool; follow new ones" },
    { "verify", logctl_verify, "check every header and record CRC of shard files" },
    { "ship", logctl_ship, "produce the spool's records to Kafka exactly once" },
    { "merge", logctl_merge, "concatenate the sealed shards of a spool into one file" },
    { "prune", logctl_prune, "remove merged files and shipped shards past [retention]" },
    { "send", logctl_send, "send the lines of standard input to logshardd as records" },
};

static void usage(FILE *f)
{
    fprintf(f, "Usage: logctl [--help] [--version] COMMAND [OPTIONS...]\n\nCommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'logctl COMMAND --help' for the options of a command.\n"
               "status, ls and rotate talk to the daemon's admin socket: --admin-socket,\n"
               "else $LOGSHARD_ADMIN_SOCKET, else [daemon] admin_socket of the config file\n"
               "(--config, default " LOGSHARD_DEFAULT_CONFIG "), else\n"
               "/run/logshard/admin.sock.\n"
               "Exit status: 0 success, 1 a problem found or an operation failed,\n"
               "2 usage error or access refused (prune: 3, merge.lock held).\n");
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
        if (strcmp(name, commands[i].name) == 0) {
            /* cat --follow and ship --follow hold a descriptor for each
             * active shard they read, one per connected producer, and the
             * soft limit of 1024 that a login shell and systemd give would
             * stop them near a thousand producers. logctl polls with
             * neither select() nor anything else that minds high
             * descriptors, and starts no other program. */
            uint64_t before, now;

            (void)process_raise_fd_limit(&before, &now);
            return commands[i].run(argc - 1, argv + 1);
        }
    if (name[0] == '-')
        fprintf(stderr, "logctl: unknown option '%s'\n", name);
    else
        fprintf(stderr, "logctl: unknown command '%s'\n", name);
    fprintf(stderr, "Try 'logctl --help'.\n");
    return LOGCTL_EXIT_USAGE;
}
