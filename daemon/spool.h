/* The spool directory: <spool>/active for shards being written, <spool>/done
 * for sealed ones. */
#pragma once

#include <stddef.h>

#include "config.h"

struct daemon;

/* Creates the spool and its subdirectories when missing and opens them
 * (d->spool_fd, d->active_fd, d->done_fd). Returns 0 or a negative errno
 * with the path and the reason in why. */
int spool_open(struct daemon *d, char *why, size_t why_len);

void spool_close(struct daemon *d);

/* What fsync = batch syncs with in this spool ([sync] sync_method as
 * configured, auto resolved): one-flush where the file system makes it
 * safe (ext4 other than data=journal, XFS: an overwrite of blocks already
 * allocated and written changes no metadata, and an fdatasync flushes the
 * disk's cache even when the file has nothing to write back), else syncfs
 * when the spool is a file system of its own, else fdatasync. A one-flush
 * asked for where it is not safe falls back to fdatasync. *ret_why says
 * why, for the start-up log line (static text). */
enum sync_method spool_batch_sync(const struct daemon *d, const char **ret_why);
