/* logshard-bench: what its parts share. bench.c owns the command line and
 * the order of a run, bench-proc.c child processes, waits with deadlines and
 * signals, bench-daemon.c the logshardd it starts, bench-load.c the producer
 * processes and the fdatasync probe, bench-merge.c the merge timings, and
 * bench-report.c the figures and how they are printed.
 *
 * Every function that can fail returns 0 (or a count) or a negative errno;
 * where a caller needs more than an errno to tell the user what went wrong,
 * it passes a why buffer that the function fills on failure. Only bench.c
 * and bench-report.c print. */
#pragma once

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

#define BENCH_EXIT_OK 0
#define BENCH_EXIT_FAILURE 1
#define BENCH_EXIT_USAGE 2

/* A deadline that never comes. */
#define BENCH_NO_DEADLINE UINT64_MAX

/* ---- bench-proc.c: processes, waits, files ---- */

/* Blocks SIGINT, SIGTERM and SIGHUP in the bench and notes their arrival, so
 * that every wait (bench_poll) ends with -EINTR and the run cleans up. */
int bench_signals_setup(void);

/* Raises the bench's soft descriptor limit to its hard one: it holds a
 * pidfd for each of up to thousands of producers. What it starts gets the
 * limit the bench was started with back (bench_child_setup), so the
 * daemon is measured with the limit a user's shell gives it. Returns 0 or
 * a negative errno. */
int bench_fd_limit_setup(void);

/* The signal that interrupted the bench, or 0. */
int bench_interrupted(void);

/* In a forked child: process_reset_signals() (common/process.h), the soft
 * descriptor limit the bench started with, and SIGKILL when the bench dies
 * (a child must never outlive it). */
int bench_child_setup(pid_t bench_pid);

/* ppoll(2) until an event, the deadline (CLOCK_MONOTONIC ns, or
 * BENCH_NO_DEADLINE) or a signal noted by bench_signals_setup().
 * Returns the number of ready descriptors, -ETIMEDOUT, -EINTR or -errno. */
int bench_poll(struct pollfd *fds, nfds_t n, uint64_t deadline_ns);

/* pidfd_open(2). */
int bench_pidfd_open(pid_t pid);

/* Waits until the child exits (or the deadline), then reaps it. *ret_status
 * gets its wait status, *ret_ru (may be NULL) its resource usage. */
int bench_wait_exit(pid_t pid, int pidfd, uint64_t deadline_ns, int *ret_status,
                    struct rusage *ret_ru);

/* SIGKILL and reap, waiting at most a few seconds. Both may be -1. */
void bench_kill_and_reap(pid_t pid, int pidfd);

/* Runs argv[0] (a path) with stdin from /dev/null, stdout to out_path and
 * stderr to err_path (both created or truncated), until it exits or the
 * deadline passes (then it is killed: -ETIMEDOUT). *ret_status gets the
 * wait status. */
int bench_run_program(const char *const *argv, const char *out_path, const char *err_path,
                      uint64_t deadline_ns, int *ret_status);

/* Describes a wait status ("exit status 3", "killed by signal 9"). */
void bench_describe_status(int status, char *buf, size_t len);

/* Finds a helper program: explicit when not NULL, else $env_name when set
 * and not empty, else each of rel (relative to the directory of
 * /proc/self/exe, NULL-terminated), else name in $PATH. Returns a new string
 * or NULL when nothing executable was found. */
char *bench_find_program(const char *explicit_path, const char *env_name, const char *const *rel,
                         const char *name);

/* mkdtemp(base/logshard-bench.XXXXXX); *ret_dir is a new string. */
int bench_make_tempdir(const char *base, char **ret_dir);

/* Removes path and everything below it, not following symlinks. */
int bench_remove_tree(const char *path);

/* The file system type of path ("ext4", "tmpfs", or "0x..." when unknown)
 * into buf. *ret_volatile says that fdatasync there costs nothing because
 * nothing ever reaches a disk (tmpfs, ramfs). */
int bench_fs_type(const char *path, char *buf, size_t len, bool *ret_volatile);

/* Reads a whole (small) file into a new NUL-terminated string. */
int bench_read_file(const char *path, char **ret_text, size_t *ret_len);

/* ---- bench-daemon.c: the logshardd the bench starts ---- */

struct bench_daemon {
    pid_t pid;            /* -1: not running */
    int pidfd;
    int notify_fd;        /* our NOTIFY_SOCKET */
    char *spool;          /* <dir>/spool */
    char *socket;         /* <dir>/producer.sock */
    char *admin_socket;   /* <dir>/admin.sock: never the system daemon's */
    char *notify_path;    /* <dir>/notify.sock */
    char *log_path;       /* <dir>/daemon.log: the daemon's stderr */
    char *status;         /* the STATUS= sent with READY=1, or NULL */
    const char *config;   /* the daemon's --config; NULL: /dev/null (every default) */
    bool shared_session;  /* true: in the bench's session; false: a session of its own */
};

/* What the daemon said and used when it exited after SIGTERM. */
struct bench_daemon_exit {
    int status;           /* wait status */
    double cpu_s;         /* utime + stime of the whole life */
    bool sealed_line;     /* the "all shards sealed" line was found: */
    uint64_t records;     /*   records received this run */
    uint64_t shards;      /*   shards sealed this run */
    uint64_t syncs;       /*   fdatasync + fsync calls completed this run */
};

void bench_daemon_init(struct bench_daemon *d);

/* Starts exe with d->config (or an empty config), spool, socket and log in dir and the
 * given fsync policy, and waits for READY=1 until the deadline. */
int bench_daemon_start(struct bench_daemon *d, const char *exe, const char *dir,
                       const char *policy, uint64_t deadline_ns, char *why, size_t why_len);

/* CPU seconds (utime + stime) and VmHWM (KiB) of the running daemon. */
int bench_daemon_sample(const struct bench_daemon *d, double *ret_cpu_s, double *ret_hwm_kib);

/* SIGTERM, wait for the exit (until the deadline; then SIGKILL and
 * -ETIMEDOUT), and read the exit line from the log. */
int bench_daemon_stop(struct bench_daemon *d, uint64_t deadline_ns, struct bench_daemon_exit *ret,
                      char *why, size_t why_len);

/* Prints the last lines of the daemon's log, for a failure report. */
void bench_daemon_dump_log(const struct bench_daemon *d, FILE *out);

/* Kills the daemon if it still runs, closes and frees everything. */
void bench_daemon_destroy(struct bench_daemon *d);

/* ---- bench-load.c: producers and the fdatasync probe ---- */

struct bench_load_params {
    const char *socket;
    unsigned producers;
    uint64_t records;      /* per producer */
    size_t size;           /* bytes per record */
    uint64_t flush_every;  /* 0: one flush at the end */
    size_t buffer_bytes;   /* client batch buffer; 0: the library's default */
    uint64_t deadline_ns;  /* for the whole load */
    const int *close_fds;  /* the bench's descriptors a producer closes, */
    size_t n_close_fds;    /*   since a fork keeps them */
};

struct bench_load_result {
    double elapsed_s;      /* barrier release to the last final flush */
    double teardown_s;     /* then every producer closing and exiting */
    uint64_t records;      /* acknowledged, all producers */
    uint64_t *lat_ns;      /* every timed flush, sorted; free() */
    size_t n_lat;
    int policy;            /* logshard_fsync_policy() of the connections */
};

/* Runs the producers. On failure why says which producer failed and how. */
int bench_load_run(const struct bench_load_params *p, struct bench_load_result *ret, char *why,
                   size_t why_len);

/* iterations of pwrite(4 KiB at the end of a new file in dir) + fdatasync,
 * each timed; the file is removed. */
int bench_fdatasync_probe(const char *dir, unsigned iterations, uint64_t **ret_lat_ns,
                          size_t *ret_n);

/* The same with writers processes at once, each appending bytes to a file
 * of its own and fdatasyncing it, iterations times, all timed (sorted into
 * *ret_lat_ns, writers * iterations values): what the disk gives when as
 * many shards are synced at the same time as there are producers. */
int bench_fdatasync_probe_concurrent(const char *dir, unsigned writers, size_t bytes,
                                     unsigned iterations, uint64_t **ret_lat_ns, size_t *ret_n);

/* ---- bench-merge.c ---- */

struct bench_merge_result {
    uint64_t shards;
    uint64_t bytes;        /* sum of the shard files' sizes */
    double logctl_s;       /* logctl merge --spool S --output F */
    double cat_s;          /* /bin/sh running cat of every shard > F */
    double cat_sync_s;     /* the same, then sync(1) of F: fsync, as merge does */
    double copy_s;         /* read/write loop in the bench */
};

/* Lays out shards sealed shards in spool/done/ directly, with the daemon's
 * own encoder: producer "bench", ids 1.., records of record_bytes until the
 * next would take the shard past shard_bytes, then the seal trailer padded
 * to the block size of spool's filesystem. For merge figures at shard
 * counts no set of producer connections reaches. span_ns 0 gives every
 * record the time of the layout; else the records' times step evenly
 * through the span_ns before now, shard after shard (for reading a time
 * window of a big spool). */
int bench_merge_layout(const char *spool, uint64_t shards, uint64_t shard_bytes,
                       size_t record_bytes, uint64_t span_ns, char *why, size_t why_len);

/* Times the three ways of concatenating the .shard files of spool/done/,
 * each writing a new file in workdir. */
int bench_merge_time(const char *logctl, const char *spool, const char *workdir,
                     uint64_t deadline_ns, struct bench_merge_result *ret, char *why,
                     size_t why_len);

/* ---- bench-report.c ---- */

enum bench_fig {
    FIG_ELAPSED_S,
    FIG_TEARDOWN_S,
    FIG_RECORDS,
    FIG_RECORDS_PER_S,
    FIG_MIB_PER_S,
    FIG_FLUSHES,
    FIG_ACK_P50_US,
    FIG_ACK_P99_US,
    FIG_ACK_P999_US,
    FIG_ACK_MAX_US,
    FIG_CPU_TERM_S,
    FIG_CPU_TOTAL_S,
    FIG_CPU_US_PER_RECORD,
    FIG_PEAK_RSS_MIB,
    FIG_SYNCS,
    FIG_SYNCS_PER_S,
    FIG_RECORDS_PER_SYNC,
    FIG_DAEMON_RECORDS,
    FIG_DAEMON_SHARDS,
    FIG_FDS_P50_US,
    FIG_FDS_P99_US,
    FIG_ACK_OVER_FDS,
    FIG_FDS_CONC_P99_US,
    FIG_ACK_OVER_FDS_CONC,
    FIG_MERGE_SHARDS,
    FIG_MERGE_MIB,
    FIG_LOGCTL_S,
    FIG_LOGCTL_MIB_PER_S,
    FIG_LOGCTL_SHARDS_PER_S,
    FIG_CAT_S,
    FIG_CAT_MIB_PER_S,
    FIG_COPY_S,
    FIG_COPY_MIB_PER_S,
    FIG_CAT_SYNC_S,
    FIG_LOGCTL_OVER_CAT,
    FIG_LOGCTL_OVER_CAT_SYNC,
    FIG_LOGCTL_OVER_COPY,
    FIG__MAX,
};

/* One run's figures (NAN: unknown) and what it ran on. */
struct bench_run {
    double fig[FIG__MAX];
    char fs_type[32];
    bool fs_volatile;
    char io[64];           /* the daemon's I/O path, from its READY status */
    int policy;            /* in force, as the connections saw it; -1 unknown */
    char *dir;             /* the run's temp dir (kept or removed) */
};

/* All runs of one fsync policy. */
struct bench_series {
    const char *policy;    /* NULL: whatever an external daemon runs */
    struct bench_run *runs;
    size_t n_runs;
};

struct bench_report {
    bool merge_mode;
    bool external;         /* --socket: a daemon the bench did not start */
    const char *daemon_path;
    const char *daemon_config; /* --daemon-config, NULL: /dev/null */
    bool shared_session;   /* --shared-session */
    const char *socket;
    const char *logctl_path;
    unsigned producers;
    uint64_t records;
    size_t size;
    uint64_t flush_every;
    unsigned repeat;
    bool keep;
    uint64_t layout_shards;     /* merge mode with --shards: laid out, no daemon */
    uint64_t layout_shard_bytes;
    struct bench_series *series;
    size_t n_series;
};

void bench_run_init(struct bench_run *run);

/* The nearest-rank percentile of n sorted values, in tenths of a percent
 * (500: p50, 999: p99.9). */
uint64_t bench_percentile(const uint64_t *sorted, size_t n, unsigned per_mille);

/* Name of an enum logshard_fsync_policy value ("batch"), or NULL. */
const char *bench_policy_name(int policy);

void bench_print_table(FILE *out, const struct bench_report *r);
void bench_print_json(FILE *out, const struct bench_report *r);
