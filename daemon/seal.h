/* Sealing: the step that turns a finished temp shard into a completed one.
 * A shard's seal state is a struct seal inside it, written only by seal.c;
 * the shard reads how it ended through seal_outcome(). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "io.h"
#include "seal-steps.h"

struct shard;

enum seal_state {
    SEAL_IDLE,    /* not started */
    SEAL_RUNNING, /* steps in flight; each completion starts the next */
    SEAL_ENDED,   /* shard_sealed() was called; nothing more comes */
};

/* Where the shard's file is once the seal has ended. */
enum seal_outcome {
    SEAL_IN_DONE,       /* sealed into done/ */
    SEAL_IN_QUARANTINE, /* moved to quarantine/: a sync failed after records were acknowledged */
    SEAL_REMOVED,       /* removed from active/: it held no header, so no record */
    SEAL_FAILED,        /* a step failed: the file stays in active/ for recovery */
};

/* The steps beyond the shared ones (seal-steps.h): the cut of the file to
 * its last record kept, before the trailer (recovery cuts on its own); the
 * move into quarantine/ and its syncs; and the fsync of active/ that ends a
 * seal that stopped before its first step went to the ring. */
enum {
    SEAL_STEP_QUARANTINE = SEAL_STEPS,
    SEAL_STEP_SYNC_QUARANTINE,
    SEAL_STEP_SYNC_ACTIVE_AFTER_QUARANTINE,
    SEAL_STEP_FINISH,
    SEAL_STEP_CUT,
    SEAL_REQS,
};

struct seal {
    enum seal_state state;
    struct io_req req[SEAL_REQS]; /* one per step, indexed by step */
    unsigned char *trailer;       /* the seal trailer being written */
    uint32_t trailer_len, trailer_done;
    uint64_t trailer_offset;
    int quarantine_fd;
    bool quarantined;
    /* The header never reached the file whole (or no sync proved it): the
     * temp file was removed instead of sealed; discard_why says why. */
    bool discarded;
    const char *discard_why;
    unsigned completed; /* of the two directory syncs that run together */
    int error;
    const char *failed_step;
};

/* Sets up a shard's seal state (nothing started, nothing to free). */
void seal_init(struct seal *seal);

/* Frees what the seal holds (the trailer, quarantine/'s descriptor). */
void seal_free(struct seal *seal);

/* Starts sealing a shard whose writes are all done: the steps of
 * seal-steps.h, each only after the one before it succeeded, so an error
 * can never leave a name in done/ on data that was not synced. Calls
 * shard_sealed() with the outcome (0, or the first step's negative errno),
 * always from an I/O completion and never from within seal_start(), whose
 * caller may still use the shard. Must be called once per shard. */
void seal_start(struct shard *s);

/* How an ended seal left the file. */
enum seal_outcome seal_outcome(const struct seal *seal);

/* For log lines: why the file was removed (SEAL_REMOVED), or the step a
 * seal failed at (SEAL_FAILED). */
const char *seal_discard_why(const struct seal *seal);
const char *seal_failed_step(const struct seal *seal);
