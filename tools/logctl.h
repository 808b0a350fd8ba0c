/* The seam between logctl's main() (logctl.c) and its subcommands, one file
 * each (merge's command line sits in logctl.c, its work in merge.c), so a
 * subcommand can be added without touching the others.
 *
 * Unlike the rest of the project, these entry points return a process exit
 * status, because they are main() for their subcommand: */
#pragma once

#define LOGCTL_EXIT_OK 0
#define LOGCTL_EXIT_FAILURE 1 /* a problem found, or an operation failed */
#define LOGCTL_EXIT_USAGE 2   /* bad command line */

/* argv[0] is the subcommand's name; getopt_long starts after it. */
int logctl_merge(int argc, char **argv);
int logctl_cat(int argc, char **argv);
int logctl_send(int argc, char **argv);

/* Reports the option error getopt_long just returned (opt is '?' or ':',
 * with an optstring starting with ':') and returns LOGCTL_EXIT_USAGE. */
int logctl_option_error(const char *command, int opt, char **argv);

/* Prints "logctl: <command>: <message>" and a hint to stderr and returns
 * LOGCTL_EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int logctl_usage_error(const char *command,
                                                             const char *fmt, ...);
