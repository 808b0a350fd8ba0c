/* The seam between logctl's main() (logctl.c) and its subcommands, one file
 * each (cmd-merge.c is merge's command line, its work is in merge/), so a
 * subcommand can be added without touching the others.
 *
 * Unlike the rest of the project, these entry points return a process exit
 * status, because they are main() for their subcommand: */
#pragma once

#define LOGCTL_EXIT_OK 0
#define LOGCTL_EXIT_FAILURE 1 /* a problem found, or an operation failed */
#define LOGCTL_EXIT_USAGE 2   /* bad command line, or access refused */
#define LOGCTL_EXIT_BUSY 3    /* prune only: merge.lock held, nothing done */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct json_out;
struct json_value;

/* argv[0] is the subcommand's name; getopt_long starts after it. */
int logctl_merge(int argc, char **argv);
int logctl_cat(int argc, char **argv);
int logctl_send(int argc, char **argv);
int logctl_status(int argc, char **argv);
int logctl_ls(int argc, char **argv);
int logctl_rotate(int argc, char **argv);
int logctl_verify(int argc, char **argv);
int logctl_ship(int argc, char **argv);
int logctl_prune(int argc, char **argv);

/* ---- where things are (admin.c) ---- */

/* The admin socket: --admin-socket (option, may be NULL), else
 * $LOGSHARD_ADMIN_SOCKET, else [daemon] admin_socket of the config file
 * (config: --config, or NULL for the default file, read when it exists),
 * else the built-in default. Returns 0 and a new string, or an exit status
 * (LOGCTL_EXIT_USAGE when --config cannot be read) after saying why. */
int logctl_admin_socket(const char *command, const char *option, const char *config,
                        char **ret);

/* The daemon's settings as its config file has them: --config (path, NULL
 * for the default file, read only when it exists) over the built-in
 * defaults. Returns 0 with *ret filled (config_free it), or an exit status
 * after saying why (LOGCTL_EXIT_USAGE when an explicit file cannot be
 * read). */
struct config;
int logctl_load_config(const char *command, const char *path, struct config *ret);

/* The spool: --spool (option), else [daemon] spool of the config file,
 * else the built-in default. Same returns as logctl_admin_socket. */
int logctl_spool(const char *command, const char *option, const char *config, char **ret);

/* Sends one admin request ({"version":1,"command":command} and, when not
 * NULL, "producer") and waits up to timeout_ms for the reply. Returns 0 with
 * the reply's JSON in *ret when the daemon said ok; otherwise says why on
 * stderr ("logctl: <command>: ...") and returns the exit status:
 * LOGCTL_EXIT_USAGE when access was refused (by the socket's mode or by the
 * daemon), LOGCTL_EXIT_FAILURE when the daemon is not there, did not answer
 * in time, or refused the request. */
int logctl_admin_request(const char *command, const char *socket_path, const char *request,
                         const char *producer, int timeout_ms, struct json_value **ret);

/* Exit status for an errno met while opening a file: access refused is
 * LOGCTL_EXIT_USAGE, anything else LOGCTL_EXIT_FAILURE. */
int logctl_exit_for_errno(int err);

/* ---- formatting for people (format.c) ---- */

/* "512 B", "1.5 KiB", "12.3 MiB"; or the plain number when exact. */
void logctl_format_size(uint64_t bytes, bool exact, char *out, size_t size);

/* ns since the epoch in local time, "2026-12-01 10:00:00"; "-" for 0. */
void logctl_format_local_time(uint64_t ns, char *out, size_t size);

/* "3d 04h", "2h 03m 12s", "4.2s". */
void logctl_format_duration(double seconds, char *out, size_t size);

/* ---- times on the command line (timeparse.c) ---- */

/* Parses a time as journalctl's --since and --until do, relative to now_ns
 * (nanoseconds since the epoch):
 *   "2026-12-01", "2026-12-01 10:00", "2026-12-01 10:00:30",
 *   "2026-12-01 10:00:30.250", with 'T' instead of the space too, in local
 *   time, or UTC with a trailing "Z" or " UTC";
 *   "10:00", "10:00:30" (today); "now", "today", "yesterday", "tomorrow"
 *   (midnight, local time); "@1764583200" or "@1764583200.5" (Unix time);
 *   relative "-1h", "-30m", "+2d", "-1h30m", "-90s", "1h ago" (units us, ms,
 *   s, m or min, h, d, w, and their long names).
 * Returns 0 and *ret_ns, -EINVAL when text is not a time, or -ERANGE when it
 * is before 1970 or too far ahead. */
int logctl_parse_time(const char *text, uint64_t now_ns, uint64_t *ret_ns);

/* Reports the option error getopt_long just returned (opt is '?' or ':',
 * with an optstring starting with ':') and returns LOGCTL_EXIT_USAGE. */
int logctl_option_error(const char *command, int opt, char **argv);

/* Ends o's text with a newline and prints it on stdout, for --json output;
 * o is finished either way. Returns 0, or LOGCTL_EXIT_FAILURE after saying
 * "logctl: <command>: out of memory". */
int logctl_print_json_line(const char *command, struct json_out *o);

/* Prints "logctl: <command>: <message>" and a hint to stderr and returns
 * LOGCTL_EXIT_USAGE. */
__attribute__((format(printf, 2, 3))) int logctl_usage_error(const char *command,
                                                             const char *fmt, ...);
