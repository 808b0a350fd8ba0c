/* Test harness for integration tests: a temporary directory, the real
 * logshardd started in it (READY=1 awaited on a NOTIFY_SOCKET the harness
 * binds), logctl runs, and waits that always have a deadline. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every fork-and-exec of the tests calls process_reset_signals() in the
 * child, so a program starts as from a shell. */
#include "process.h"

struct harness {
    char *dir;
    char *spool;
    char *sock;
    char *admin_sock; /* passed as --admin-socket by harness_start */
    char *config;
    char *log;
    char *notify_path;
    int notify_fd;
    pid_t daemon;
    int daemon_pidfd;
    uint64_t fsize_limit; /* RLIMIT_FSIZE for the daemon; 0: unchanged */
    uint64_t nofile_limit; /* RLIMIT_NOFILE for the daemon; 0: unchanged */
    uint64_t nofile_soft_limit; /* its soft limit only, the hard one kept; 0: unchanged */
    /* Every sd_notify message received, in order, each followed by "\n\n". */
    char *notify_log;
    size_t notify_len;
};

/* Makes a fresh temporary directory with an empty config file. */
void harness_init(struct harness *h);

/* Writes text to the config file. */
void harness_write_config(struct harness *h, const char *text);

/* Starts logshardd with --config, --spool, --socket and --admin-socket
 * pointing into the directory, plus extra arguments (NULL-terminated, may be NULL), and waits
 * up to 20 s for READY=1. Fails the test when it does not come. The daemon
 * starts with default signal dispositions and an empty mask
 * (process_reset_signals), as from a shell. */
void harness_start(struct harness *h, const char *const *extra);

/* Like harness_start, but runs argv as given (e.g. the daemon under
 * systemd-socket-activate) with NOTIFY_SOCKET set, and does not wait for
 * READY=1. */
void harness_spawn(struct harness *h, const char *const *argv);

/* harness_start's daemon and arguments, without waiting for READY=1: for a
 * start that is meant to fail. */
void harness_spawn_with(struct harness *h, const char *const *extra);

/* Reads every pending notification into h->notify_log. */
void harness_notify_drain(struct harness *h);

/* Waits up to timeout_ms for a notification containing needle at or after
 * offset from in h->notify_log. Returns the offset just past the message
 * that matched, or 0 when none came in time. */
size_t harness_notify_wait(struct harness *h, size_t from, const char *needle, int timeout_ms);

/* Sends sig to the daemon and waits up to timeout_ms for it to exit.
 * Returns its wait status; fails the test on timeout. */
int harness_stop(struct harness *h, int sig, int timeout_ms);

/* Waits up to timeout_ms for the daemon to exit on its own; returns its wait
 * status and fails the test on timeout. */
int harness_wait_exit(struct harness *h, int timeout_ms);

/* Whether the daemon has exited, without waiting. When it has, *ret_status
 * gets its wait status and the harness forgets the process. */
bool harness_daemon_exited(struct harness *h, int *ret_status);

/* Fails the test, printing the daemon's log and how it ended, when the
 * daemon is no longer running. */
void harness_assert_running(struct harness *h);

/* Runs a program to completion (at most timeout_ms), stdout to out_path
 * (or /dev/null when NULL), stderr to err_path (or the test's stderr), with
 * default signal dispositions (process_reset_signals). Returns the
 * wait status. */
int harness_run(const char *const *argv, const char *out_path, const char *err_path,
                int timeout_ms);

/* ---- a program left running while the test works (harness_run's parts) ---- */

/* A started program: its pid, and a pidfd that polls readable once it has
 * exited, so a test can wait for it alongside other events. */
struct harness_child {
    pid_t pid;
    int pidfd;
};

/* Starts argv[0] (execv, argv NULL-terminated) with default signal
 * dispositions and an empty mask (process_reset_signals), stdout to
 * out_path and stderr to err_path, each created or truncated before this
 * returns, so the test can read them at once; NULL keeps the test's own,
 * and err_path equal to out_path puts both in that file (opened once, so
 * neither overwrites the other). When the exec fails the child says
 * "harness: cannot run ..." on its stderr and exits 127 (125 when the
 * signals cannot be reset). Fails the test when a file cannot be opened,
 * or the fork or pidfd_open fails. */
struct harness_child harness_child_start(const char *const *argv, const char *out_path,
                                         const char *err_path);

/* The same with descriptors the caller owns (a pipe's write end, say):
 * out_fd becomes the child's stdout and err_fd its stderr, -1 keeping the
 * test's own. The caller closes them after; they should be O_CLOEXEC, or
 * the child keeps a second copy open. */
struct harness_child harness_child_start_fds(const char *const *argv, int out_fd, int err_fd);

/* Sends sig to the child unless sig is 0, then waits up to timeout_ms for
 * it to exit (it may have already) and returns its wait status. On timeout
 * it kills the child with SIGKILL, reaps it and fails the test, naming
 * what (e.g. "logctl prune") and the pid: so the child never outlives the
 * call. Closes the pidfd; c's pid and pidfd are -1 after. */
int harness_child_wait(struct harness_child *c, int sig, int timeout_ms, const char *what);

/* ---- running logctl ---- */

struct harness_run {
    int code; /* exit status, or -1 when killed */
    char *out;
    size_t out_len;
    char *err;
};

/* Runs the real logctl with the arguments given (NULL-terminated), for at
 * most HARNESS_LOGCTL_MS, capturing both outputs. A hang (on a FIFO, say)
 * fails the run instead of the test's meson timeout. */
#define HARNESS_LOGCTL_MS 60000
struct harness_run harness_run_logctl(struct harness *h, ...);
void harness_run_free(struct harness_run *r);

/* Fails the test, with both outputs, unless logctl exited with code. */
void harness_expect_code(const struct harness_run *r, int code, const char *what);

/* Fails the test unless needle is in text. */
void harness_expect_in(const char *text, const char *needle, const char *what);

/* Counts regular files in spool/<sub> whose names end with suffix. */
size_t harness_count_files(const struct harness *h, const char *sub, const char *suffix);

/* For harness_wait_for: whether the file at path exists and (needle not
 * NULL) holds needle in its first 64 KiB. */
struct harness_file_needle {
    const char *path;
    const char *needle;
};
bool harness_file_has(void *arg);

/* CLOCK_MONOTONIC in milliseconds, the clock harness_wait_for() counts in. */
int64_t harness_now_ms(void);

/* Polls cond(arg) every 10 ms until it holds or timeout_ms passes. */
bool harness_wait_for(bool (*cond)(void *arg), void *arg, int timeout_ms);

/* True when the daemon's log holds needle now (harness_log_has), or once
 * it does within timeout_ms (harness_wait_log). */
bool harness_log_has(const struct harness *h, const char *needle);
bool harness_wait_log(const struct harness *h, const char *needle, int timeout_ms);

/* Reads a whole file into a new NUL-terminated buffer; *ret_len gets its
 * size. Fails the test when it cannot. */
char *harness_slurp(const char *path, size_t *ret_len);

/* Joins two path parts into a new string. */
char *harness_path(const char *dir, const char *name);

/* cmocka fixtures: a fresh harness in *state, and its cleanup (which kills
 * a daemon still running and removes the directory). */
int harness_setup(void **state);
int harness_teardown(void **state);

/* Fails the test unless status is a normal exit with code 0. */
void harness_assert_clean_exit(int status);

/* Removes the temporary directory and everything in it. */
void harness_cleanup(struct harness *h);

/* Merges the spool with the real logctl merge into <dir>/<tag> and prints
 * it with logctl cat; returns the records as text, one per line. Fails the
 * test when either command fails. */
char *harness_merge_and_cat(struct harness *h, const char *tag, size_t *ret_len);

/* The record a producer sends as its seq-th: "<name> <seq> " padded with
 * 'x' to size bytes (or longer if the prefix needs it). Returns its length. */
size_t harness_make_record(char *buf, size_t cap, const char *name, uint64_t seq, size_t size);

/* ---- a raw protocol client, for what the library would never send ---- */

int harness_raw_connect(const char *path);
void harness_raw_send(int fd, const void *buf, size_t len);
void harness_raw_hello(int fd, const char *name);

/* Reads one frame (at most 10 s for each of its two parts): its payload
 * into payload, which must hold it (cap bytes), its length into *ret_len.
 * Returns the frame's type, or 0 at the end of the stream. */
int harness_raw_read_frame(int fd, unsigned char *payload, size_t cap, uint32_t *ret_len);

/* Reads frames until an ERROR or the end of the stream (at most 10 s).
 * Returns the ERROR's code (0 if none came) with its message in msg;
 * *ret_acked (may be NULL) gets the last ACK value seen. */
uint32_t harness_raw_read_until_error(int fd, char *msg, size_t msg_len, uint64_t *ret_acked);

/* Encodes an APPEND frame of n NUL-terminated records into out; returns its
 * size. */
size_t harness_encode_append(unsigned char *out, const char *const *recs, size_t n);

/* ---- chance with a printed seed ---- */

/* Seeds the tests' pseudo-random numbers from LOGSHARD_TEST_SEED, else
 * from the clock, and prints the seed as "seed: LOGSHARD_TEST_SEED=N", so
 * a failing run can make the same choices again. */
void harness_seed_rng(void);
/* The next pseudo-random number (xorshift64). */
uint64_t harness_rng_next(void);

/* Environment: the binaries under test. */
const char *harness_logshardd(void);
const char *harness_logctl(void);
