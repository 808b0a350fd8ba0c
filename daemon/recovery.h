/* Start-up recovery of the temp shards an earlier run left in <spool>/active:
 * each is cut to its valid prefix and sealed into done/, or moved to
 * quarantine/ when it cannot be a shard of that name; and the check of
 * <spool>/done for files that are no sealed shard. See recovery.c and
 * recovery-done.c. */
#pragma once

#include <stdint.h>

/* Levels passed to recovery_ops.report: syslog priorities, the same numbers
 * as enum log_level in log.h. */
enum {
    RECOVERY_LOG_ERROR = 3,
    RECOVERY_LOG_WARNING = 4,
    RECOVERY_LOG_INFO = 6,
};

struct recovery_ops {
    void *ctx; /* passed to both callbacks */

    /* One line per event, without a trailing newline. Every line names its
     * file relative to the spool (active/..., done/..., quarantine/...).
     * May be NULL: recovery then runs silently. */
    void (*report)(void *ctx, int level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* Called with (0, total) before the first file and after each one with
     * the number handled so far; total counts the files in active/ named
     * like shard temp files and the entries of done/ to be checked. Meant
     * for keep-alive signals such as systemd's EXTEND_TIMEOUT_USEC. May be
     * NULL. */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
};

struct recovery_stats {
    uint64_t files_scanned;      /* active/ entries named <producer>.<16 hex>.tmp */
    uint64_t files_sealed;       /* cut to their valid prefix and sealed into done/ */
    uint64_t files_quarantined;  /* moved to quarantine/ */
    uint64_t duplicates_removed; /* temp names of files already sealed (same inode) */
    uint64_t empty_removed;      /* temp files with no record: empty, or a header alone */
    uint64_t files_failed;       /* left in active/ after an I/O error; tried again next start */
    uint64_t files_ignored;      /* other entries of active/, left alone */
    uint64_t records_kept;       /* records in the files sealed */
    uint64_t bytes_cut;          /* torn or corrupt tails removed from them */

    /* done/, as it was before this run sealed anything into it: */
    uint64_t done_checked;     /* entries named <producer>.<16 hex>.shard */
    uint64_t done_quarantined; /* no valid sealed shard of that name: moved to quarantine/ */
    uint64_t done_damaged;     /* a valid header but damaged records: left for merge */
    uint64_t done_failed;      /* could not be read or moved: left in done/ */
    uint64_t done_ignored;     /* directories and symbolic links, left alone */
};

/* Recovers every shard temp file in active/ (spool_fd, active_fd and done_fd
 * are the open directories <spool>, <spool>/active and <spool>/done):
 *
 *  - the longest valid prefix (header, then whole records with good CRCs) is
 *    kept, the rest is cut off, and the file is sealed as a normal seal does
 *    it: fdatasync, renameat into done/<producer>.<id>.shard, fsync of done/
 *    and active/;
 *  - a file without a valid header, or whose header names another producer
 *    or id than its file name, or whose done/ name is taken by a different
 *    file, is moved to <spool>/quarantine/ (created when needed), never
 *    deleted and never overwriting anything;
 *  - a temp name that is a second link to the file already sealed in done/
 *    (a seal interrupted between its rename and its fsync) is removed;
 *  - an empty temp file (created, then the daemon stopped before writing
 *    its header: it never held a record) is removed;
 *  - a FIFO, socket or device named like a shard is moved to quarantine/
 *    without being opened;
 *  - anything else in active/ is left alone and reported;
 *  - in done/, every <producer>.<id>.shard that cannot be the sealed shard
 *    of its name (empty, no valid header, another shard's header, a seal
 *    trailer alone, a merged file) is moved to quarantine/; one with a valid
 *    header but damaged records stays and is reported. This full check runs
 *    until one finds every file readable, which leaves the stamp
 *    <spool>/done.checked; with the stamp, only the entries of done/ that
 *    are no regular file are looked at.
 *
 * Blocking; meant to run once at start-up, before the daemon accepts
 * producers. Safe to run again after a crash at any point, including one
 * during an earlier recovery. A problem with one file is reported and that
 * file is skipped (files_failed); it is not an error of the call.
 *
 * Returns 0 and fills *ret_stats (may be NULL), or a negative errno when
 * recovery cannot be trusted to have done its job: active/ or done/ cannot be read,
 * quarantine/ cannot be created, a directory sync fails, or memory runs out.
 * ops may be NULL. */
int recovery_run(int spool_fd, int active_fd, int done_fd, const struct recovery_ops *ops,
                 struct recovery_stats *ret_stats);
