/* The metrics file: the figures of `logctl status`, in the Prometheus text
 * exposition format, rewritten every metrics_interval_s for node_exporter's
 * textfile collector. */
#pragma once

struct daemon;

/* Starts the timer; writes the first file at once when metrics_file is set.
 * Returns 0 or -ENOMEM. */
int metrics_start(struct daemon *d);

/* After a reload: metrics_file or metrics_interval_s may have changed. */
void metrics_reconfigure(struct daemon *d);

/* Stops the timer. A write in flight on the thread pool finishes on its own
 * (the loop runs until it has). */
void metrics_stop(struct daemon *d);
