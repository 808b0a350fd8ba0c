/* Shared by the libFuzzer targets in this directory and by fuzz-replay.c,
 * the plain main() that replays their corpora in `meson test`. A target
 * checks the contracts of the code it drives, not only that it does not
 * crash: a broken contract aborts, so libFuzzer (or the replay test) stops
 * there with the input that broke it. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The entry point libFuzzer calls with each input; declared here because the
 * project builds with -Wmissing-prototypes. Returns 0 (other values are
 * reserved by libFuzzer). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Not assert(): it must stay on whatever b_ndebug says, and the message
 * names the contract that broke. */
#define FUZZ_CHECK(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: contract broken: %s\n", __FILE__, __LINE__, #cond);    \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

/* Returns a memfd (O_CLOEXEC) that holds exactly data[0..size) with its
 * offset at 0. The descriptor is created once per process and reused, so
 * millions of inputs do not churn the descriptor table. Aborts when the
 * kernel refuses, since no result would mean anything then. */
int fuzz_memfd_with(const uint8_t *data, size_t size);
