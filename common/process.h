/* Helpers for a process that starts other programs. */
#pragma once

/* In a forked child before exec: every signal's disposition back to the
 * default (SIGKILL and SIGSTOP aside) and an empty signal mask, as a shell
 * gives a program it starts. A parent may ignore SIGPIPE for its own
 * sends; what it starts must not inherit that, or a program that dies of
 * SIGPIPE when a user runs it would pass its tests and benchmarks.
 * Returns 0 or a negative errno. */
int process_reset_signals(void);
