/* The names of the spool (docs/FORMAT.md, "Files in the spool") and the
 * one rename that moves files between its directories.
 *
 * Every name the daemon, recovery, merge and logctl write or recognise in a
 * spool is formatted and parsed here, so that the set of names one part
 * writes is exactly the set the others accept: a shard being written,
 * <producer>.<16 hex>.tmp in active/; a sealed one, <producer>.<16 hex>.shard
 * in done/; a file set aside in quarantine/ under the name it had, with .1 to
 * .999 added when that is taken; the default merged output,
 * merged-<UTC YYYYmmddTHHMMSS>.<ns>Z.lsm with -1, -2, ... added when that is
 * taken; a stream positions file in streams/,
 * <kind>-<20-digit ns>-<16 hex>.pos, and the hidden temp name it is written
 * under; and the fixed names of the lock, intent and stamp files.
 *
 * The crash-safe rename lives here too: it never replaces an existing file,
 * on filesystems without RENAME_NOREPLACE as well, and a crash in the middle
 * leaves at worst one inode under both names, which every caller knows how
 * to recognise.
 *
 * (daemon/spool.c is something else: it creates and opens the spool's
 * directories for the daemon. This module has no state and never logs.)
 *
 * Every function returns 0 or a negative errno; ret_* out-parameters are
 * written only on success. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

#include "wire.h"

/* The spool's directories, relative to the spool. */
#define SPOOL_ACTIVE_DIR "active"
#define SPOOL_DONE_DIR "done"
#define SPOOL_QUARANTINE_DIR "quarantine"
#define SPOOL_MERGED_DIR "merged"
/* Stream positions files (docs/FORMAT.md, "Stream positions file"). */
#define SPOOL_STREAMS_DIR "streams"

/* Files directly in the spool: logctl merge's lock and intent
 * (docs/MERGE.md), the intent's name before it is published, and the stamp
 * of recovery's full check of done/ with the temp name it is written under. */
#define SPOOL_MERGE_LOCK "merge.lock"

/* Takes <spool>/merge.lock, the lock of logctl merge and logctl prune,
 * without waiting, and writes this process's pid into it for the message
 * of whoever finds it held. 0 with the locked descriptor in *ret_fd;
 * -EBUSY when another process holds it, with that process's pid in
 * *ret_holder (0 when it wrote none); another negative errno when the file
 * cannot be opened or locked. */
int spool_merge_lock(int spool_fd, int *ret_fd, long *ret_holder);
#define SPOOL_MERGE_INTENT "merge.intent"
#define SPOOL_MERGE_INTENT_TMP "merge.intent.tmp"
#define SPOOL_DONE_CHECKED "done.checked"
#define SPOOL_DONE_CHECKED_TMP "done.checked.tmp"

/* A shard id in a name: exactly this many lowercase hex digits. */
#define SPOOL_ID_DIGITS 16u
#define SPOOL_TMP_SUFFIX ".tmp"
#define SPOOL_SHARD_SUFFIX ".shard"
#define SPOOL_MERGED_SUFFIX ".lsm"

/* The longest shard name, NUL included: a buffer of this size holds any
 * name spool_name_format writes, of either kind. */
#define SPOOL_NAME_SIZE                                                                    \
    (WIRE_PRODUCER_NAME_MAX + 1u + SPOOL_ID_DIGITS + sizeof(SPOOL_SHARD_SUFFIX))

/* The two kinds of shard file: the one being written in active/, and the
 * sealed one in done/. */
enum spool_kind {
    SPOOL_TMP,   /* <producer>.<16 hex>.tmp */
    SPOOL_SHARD, /* <producer>.<16 hex>.shard */
};

/* A shard name, taken apart. */
struct spool_name {
    char producer[WIRE_PRODUCER_NAME_MAX + 1]; /* NUL-terminated */
    size_t producer_len;
    uint64_t id;
};

/* Writes the name of shard id of producer (producer_len bytes, not
 * necessarily terminated) into buf (size bytes; SPOOL_NAME_SIZE is always
 * enough). Returns 0, -EINVAL when the producer breaks the name rule
 * (wire_check_producer_name) or kind is unknown, or -ENOBUFS when buf is
 * too small. */
int spool_name_format(enum spool_kind kind, const char *producer, size_t producer_len,
                      uint64_t id, char *buf, size_t size);

/* The same, into a new string (free() it). Returns 0, -EINVAL or -ENOMEM. */
int spool_name_new(enum spool_kind kind, const char *producer, size_t producer_len,
                   uint64_t id, char **ret_name);

/* Takes a name of the given kind apart, splitting it from the right
 * (producer names may hold dots; the id and the suffix never do): the
 * suffix, exactly SPOOL_ID_DIGITS lowercase hex digits (the writer prints
 * no other), a dot, and a producer that passes wire_check_producer_name,
 * the rule for names on disk (the rule for a producer's hello is stricter,
 * so every name the daemon writes passes). The rule refuses a leading '.',
 * so dotfiles are never taken for shards. Returns 0, or -EINVAL for any
 * other name. */
int spool_name_parse(const char *name, enum spool_kind kind, struct spool_name *ret);

/* The done/ name that active/<tmp_name> is sealed to, into buf (size
 * bytes; SPOOL_NAME_SIZE is enough). Returns 0, -EINVAL when tmp_name is no
 * shard temp name, or -ENOBUFS. */
int spool_name_sealed(const char *tmp_name, char *buf, size_t size);

/* A file moved to quarantine/ keeps its name; when that is taken, .1 to
 * .SPOOL_QUARANTINE_MAX_SUFFIX is added, in that order. */
#define SPOOL_QUARANTINE_MAX_SUFFIX 999u

/* The attempt-th quarantine name for name (0: the name itself, else
 * name.<attempt>), as a new string. Returns 0, -ERANGE when attempt is
 * above SPOOL_QUARANTINE_MAX_SUFFIX, or -ENOMEM. */
int spool_quarantine_name(const char *name, unsigned attempt, char **ret_name);

/* Flags of spool_rename_noreplace and spool_quarantine_move. */
enum {
    /* Take the link(2) and unlink(2) path even where renameat2 can refuse
     * to replace: what a filesystem without RENAME_NOREPLACE gets. For the
     * tests, which have no such filesystem at hand. */
    SPOOL_RENAME_VIA_LINK = 1u << 0,
};

/* Gives old_dir/old_name the name new_dir/new_name, never replacing an
 * existing new_name: -EEXIST then, and both files stay as they were.
 * renameat2(RENAME_NOREPLACE) does it in one step; where the filesystem
 * lacks the flag (EINVAL, ENOSYS) link(2), which never replaces either,
 * then unlink(2) of the old name do it in two. A crash between those two
 * leaves one inode under both names, which the caller's next run must
 * recognise (by st_dev and st_ino).
 *
 * When the link is made but the unlink fails: with ret_old_left NULL, that
 * is the call's error (the new name is in place all the same); with
 * ret_old_left, the call succeeds and *ret_old_left says whether the old
 * name is still there (an old name already gone counts as removed). On
 * every success *ret_old_left, when given, is written.
 *
 * Returns 0 or the negative errno of the failing call. */
int spool_rename_noreplace(int old_dir, const char *old_name, int new_dir, const char *new_name,
                           unsigned flags, bool *ret_old_left);

/* Moves from_dir/name to q_dir (the open quarantine/) under the first free
 * name of spool_quarantine_name's sequence, with spool_rename_noreplace, so
 * nothing is ever replaced and the entry is never opened (a FIFO or a
 * device moves like a file). st is the entry as fstatat without following
 * links saw it, or NULL to have it looked at here.
 *
 * A quarantine name that is already the same inode is an earlier move cut
 * short between link(2) and unlink(2): that name is returned with
 * *ret_second_name true, and the old name is left for the caller to remove
 * once it has made q_dir durable, if it wants that order. Otherwise
 * *ret_second_name is false and the old name is gone.
 *
 * Returns 0 with the quarantine name in *ret_qname (free() it); -EEXIST
 * when every name is taken by other files; or the negative errno of the
 * stat, the rename or memory. The entry stays where it was on failure
 * (except as spool_rename_noreplace says for a failed unlink). */
int spool_quarantine_move(int from_dir, const char *name, const struct stat *st, int q_dir,
                          unsigned flags, char **ret_qname, bool *ret_second_name);

/* The default output name of logctl merge, when the spool's merged/ has a
 * file of the first one: -1 to -SPOOL_MERGED_MAX_SUFFIX are tried. */
#define SPOOL_MERGED_MAX_SUFFIX 999u
/* A buffer of this size holds every default output name: its date part is
 * cut at 31 characters (a time that needs more is -EOVERFLOW). */
#define SPOOL_MERGED_NAME_SIZE 64u

/* "merged-<UTC YYYYmmddTHHMMSS>.<9-digit ns>Z.lsm" for the time ts, with
 * "-<attempt>" before ".lsm" when attempt is not 0, into buf (size bytes).
 * Names of one length sort by time. Returns 0, -ERANGE when attempt is
 * above SPOOL_MERGED_MAX_SUFFIX, -EINVAL when ts->tv_nsec is not a
 * nanosecond count (0 to 999999999), -EOVERFLOW when the time cannot be
 * represented as a UTC date, or -ENOBUFS when buf is smaller than the name
 * (SPOOL_MERGED_NAME_SIZE is always enough). */
int spool_merged_name(const struct timespec *ts, unsigned attempt, char *buf, size_t size);

/* Takes a default output name of logctl merge apart: exactly what
 * spool_merged_name writes, and nothing else (names are canonical: the
 * name is formatted again from what was read and must come out the same,
 * so a date that does not exist, a year of other than four digits or a
 * suffix with a leading zero is refused). This is what logctl prune
 * recognises as a merged file logshard wrote. Times from 1970 into the
 * year 2554 (a u64 of nanoseconds) are read. Returns 0 with the time in
 * the name in *ret_ns (nanoseconds since the epoch, UTC) and the suffix in
 * *ret_attempt (0 for none; either may be NULL), or -EINVAL for any other
 * name, temp names included (the out-parameters are then untouched). */
int spool_merged_name_parse(const char *name, uint64_t *ret_ns, unsigned *ret_attempt);

/* The temp name a merge writes output_name under, in the output's own
 * directory: ".<output_name>.<pid>.tmp", hidden, and per process so two
 * merges to one name never share it. Returns 0 or -ENOMEM. */
int spool_merged_temp_name(const char *output_name, pid_t pid, char **ret_name);

/* ---- stream positions files (common/stream_positions.h) ---- */

#define SPOOL_POSITIONS_SUFFIX ".pos"
/* A kind ("merge", "daemon", ...): 1 to this many bytes of [a-z]. */
#define SPOOL_POSITIONS_KIND_MAX 16u
/* A buffer of this size holds every positions name, temp names included:
 * ".", a kind of 16, "-", 20 digits, "-", 16 hex, ".pos", ".tmp", NUL. */
#define SPOOL_POSITIONS_NAME_SIZE 64u

/* A positions file name, taken apart. */
struct spool_positions_name {
    char kind[SPOOL_POSITIONS_KIND_MAX + 1]; /* NUL-terminated */
    uint64_t ns;    /* CLOCK_REALTIME nanoseconds when it was written */
    uint64_t nonce; /* random, so that two writers in one nanosecond differ */
    bool temp;      /* the temp name: "." + the name + ".tmp" */
};

/* Writes "<kind>-<ns as exactly 20 decimal digits>-<nonce as exactly 16
 * lowercase hex digits>.pos", or with temp its temp name
 * ".<kind>-<ns>-<nonce>.pos.tmp" (hidden, and not a positions name), into
 * buf (size bytes; SPOOL_POSITIONS_NAME_SIZE is always enough). The fixed
 * widths make names of one kind sort by time. Returns 0, -EINVAL when kind
 * is not 1 to SPOOL_POSITIONS_KIND_MAX bytes of [a-z], or -ENOBUFS. */
int spool_positions_name_format(const char *kind, uint64_t ns, uint64_t nonce, bool temp,
                                char *buf, size_t size);

/* Takes a positions name or its temp name apart; only exactly what
 * spool_positions_name_format writes is accepted (names are canonical).
 * Returns 0, or -EINVAL for any other name (*ret untouched). */
int spool_positions_name_parse(const char *name, struct spool_positions_name *ret);
