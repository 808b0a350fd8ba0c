/* What the two halves of start-up recovery share: recovery.c (the run, and
 * the temp shards in active/) and recovery-done.c (the check of done/).
 * Not for any other module; recovery.h is the interface. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <dirent.h>
#include <stdint.h>
#include <sys/stat.h>

#include "recovery.h"
#include "spool_names.h"

#define report(rec, level, ...)                                                    \
    do {                                                                           \
        if ((rec)->ops && (rec)->ops->report)                                      \
            (rec)->ops->report((rec)->ops->ctx, (level), __VA_ARGS__);             \
    } while (0)

struct recovery {
    int spool_fd, active_fd, done_fd;
    int quarantine_fd; /* -1 until a file needs it */
    const struct recovery_ops *ops;
    struct recovery_stats stats;
    bool sync_active, sync_done, sync_quarantine;
    bool done_full; /* every shard of done/ is checked, not only odd entries */
};

/* A directory entry as readdir(3) gave it. */
struct recovery_entry {
    char *name;
    unsigned char type; /* d_type: DT_REG, DT_FIFO, ...; DT_UNKNOWN on some filesystems */
};

/* Lists dir_fd (without "." and "..", and only what keep accepts when it is
 * not NULL), sorted by name, so that the work and the report come in a
 * stable order and no entry is renamed while the directory is being read.
 * Returns 0 or a negative errno. */
int recovery_list_dir(int dir_fd, bool (*keep)(const struct dirent *de, void *ctx), void *ctx,
                      struct recovery_entry **ret_entries, size_t *ret_count);
void recovery_free_entries(struct recovery_entry *entries, size_t n);

/* The two spool directories recovery takes files out of. */
enum recovery_dir {
    RECOVERY_ACTIVE,
    RECOVERY_DONE,
};

/* A FIFO, a socket or a device: an entry nobody may open blindly (a FIFO
 * blocks a reader until a writer comes) and the daemon never makes. Found
 * under a shard's name in active/ or done/, such an entry is moved to
 * quarantine/, so that no tool reading the spool trips on it. Directories
 * and symbolic links are left where they are and reported. */
static inline bool recovery_is_special(mode_t mode)
{
    return S_ISFIFO(mode) || S_ISSOCK(mode) || S_ISCHR(mode) || S_ISBLK(mode);
}

/* Moves <dir>/<name> (the entry st describes, as fstatat without following
 * links saw it) to quarantine/, under its own name or, when another file
 * has that name, with a numeric suffix (spool_quarantine_move); counts it
 * and reports why. Never replaces anything and never opens the entry, so a
 * FIFO or a device is moved like a file. Returns 0 (also when only this entry could not be
 * moved: that is reported and counted) or a negative errno when
 * quarantine/ itself is unusable. */
int recovery_quarantine(struct recovery *rec, enum recovery_dir dir, const char *name,
                        const struct stat *st, const char *why);

/* Reports a problem with one entry of dir and counts it; the entry stays
 * where it is. Returns 0: one file never stops recovery. */
int recovery_fail(struct recovery *rec, enum recovery_dir dir, const char *name,
                  const char *what, int err);

/* The check of done/ (recovery-done.c), in three steps. recovery_done_plan
 * lists done/ and returns the entries to check: every shard name the first
 * time, then only entries that are not regular files (see there). It
 * reports what stops it and returns a negative errno then. */
int recovery_done_plan(struct recovery *rec, struct recovery_entry **ret_entries,
                       size_t *ret_count);

/* Checks one entry the plan returned and moves it to quarantine/ when it
 * cannot be the sealed shard its name says. Returns 0 or a negative errno
 * that must stop recovery (memory, an unusable quarantine/). */
int recovery_check_done(struct recovery *rec, const struct recovery_entry *e);

/* After a full check that could read every file: records (in
 * <spool>/done.checked) that done/ holds nothing an older version left, so
 * later starts skip the full check. */
void recovery_done_finish(struct recovery *rec);
