/* The seal steps, in the order they run: one description for the two
 * places that seal a shard, seal.c (asynchronously, through the I/O ring,
 * while the daemon runs) and recovery.c (synchronously, at start-up).
 *
 * Each step starts only after the one before it succeeded: the data is
 * synced before the rename, so a name in done/ never points at unsynced
 * data, and done/ is synced after it so that the new name survives; active/
 * is synced so that the old name is gone for good and recovery cannot find
 * the same shard under both names. Both sealers switch over this enum
 * without a default case, so a step added here is a compile error in
 * either until it handles it. */
#pragma once

enum seal_step {
    SEAL_STEP_TRAILER,     /* the seal trailer after the last record kept */
    SEAL_STEP_DATASYNC,    /* fdatasync of the file */
    SEAL_STEP_RENAME,      /* active/<tmp> to done/<shard>, never replacing */
    SEAL_STEP_SYNC_DONE,   /* fsync of done/ */
    SEAL_STEP_SYNC_ACTIVE, /* fsync of active/ */
    SEAL_STEPS,
};

/* The step's name for log lines ("sealing ... failed at <name>"). */
static inline const char *seal_step_name(enum seal_step step)
{
    switch (step) {
    case SEAL_STEP_TRAILER: return "writing the seal trailer";
    case SEAL_STEP_DATASYNC: return "fdatasync";
    case SEAL_STEP_RENAME: return "rename into done/";
    case SEAL_STEP_SYNC_DONE: return "fsync of done/";
    case SEAL_STEP_SYNC_ACTIVE: return "fsync of active/";
    case SEAL_STEPS: break;
    }
    return "?";
}
