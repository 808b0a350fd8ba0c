/* The spool directory: <spool>/active for shards being written, <spool>/done
 * for sealed ones. */
#pragma once

#include <stddef.h>

struct daemon;

/* Creates the spool and its subdirectories when missing and opens them
 * (d->spool_fd, d->active_fd, d->done_fd). Returns 0 or a negative errno
 * with the path and the reason in why. */
int spool_open(struct daemon *d, char *why, size_t why_len);

void spool_close(struct daemon *d);
