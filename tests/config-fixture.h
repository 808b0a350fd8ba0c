/* The fixtures the tests of common/config.c share (tests/test-config*.c):
 * a configuration with a file to load it from in its own mkdtemp directory,
 * and the checks of its values. Every helper fails the running cmocka test
 * on an unexpected error instead of returning it. */
#pragma once

#include "config.h"

#define KIB 1024ull
#define MIB (1024ull * KIB)
#define GIB (1024ull * MIB)

/* A configuration initialised to the defaults, and path, the file
 * write_conf writes for config_load, in dir. */
struct fixture {
    char dir[64];
    char path[128];
    struct config c;
};

/* cmocka setup and teardown of a struct fixture. */
int setup(void **state);
int teardown(void **state);

/* Writes text as the fixture's config file. */
void write_conf(const struct fixture *f, const char *text);

/* Asserts that two configurations hold the same values. */
void assert_config_equal(const struct config *a, const struct config *b);

/* Asserts that c holds the embedded defaults. */
void assert_defaults(const struct config *c);

/* config_set, which must succeed. */
void set_or_fail(struct config *c, const char *section, const char *key, const char *value);
