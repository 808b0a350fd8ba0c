/* Process set-up: how a parent starts other programs, and a process's own
 * open-file limit. */
#pragma once

#include <stdint.h>

/* In a forked child before exec: every signal's disposition back to the
 * default (SIGKILL and SIGSTOP aside) and an empty signal mask, as a shell
 * gives a program it starts. A parent may ignore SIGPIPE for its own
 * sends; what it starts must not inherit that, or a program that dies of
 * SIGPIPE when a user runs it would pass its tests and benchmarks.
 * Returns 0 or a negative errno. */
int process_reset_signals(void);

/* Raises this process's soft RLIMIT_NOFILE to its hard limit (to 2^20,
 * Linux's default fs.nr_open, where the hard limit is unlimited). The
 * kernel's soft default of 1024 exists for programs that use select();
 * one that polls with epoll and holds a descriptor or two per client
 * should take what the hard limit allows. The limits before and after
 * are stored in *ret_before and *ret_now (both the same when nothing
 * changed). Returns 0 or a negative errno (the limit then unchanged). */
int process_raise_fd_limit(uint64_t *ret_before, uint64_t *ret_now);

/* Sets this process's RLIMIT_NOFILE: hard to hard and soft to soft, either
 * left as it is when 0 (a soft limit of 0 with a new hard one takes the
 * hard one). For a child before exec: the limit a test or the benchmark
 * starts a program with. Returns 0 or a negative errno. */
int process_set_fd_limit(uint64_t soft, uint64_t hard);
