/* Formats log lines for stderr: with a "<N>" priority prefix when stderr is
 * connected to the journal (JOURNAL_STREAM), with a readable level word when
 * a person runs the daemon in a terminal. */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool journal_prefix;
static enum log_level max_level = LOG_LEVEL_INFO;

void log_setup(void)
{
    journal_prefix = getenv("JOURNAL_STREAM") != NULL;
    if (getenv("LOGSHARD_DEBUG"))
        max_level = LOG_LEVEL_DEBUG;
}

void log_set_max_level(enum log_level level)
{
    max_level = level;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    char line[2048];
    const char *word = "";
    va_list ap;
    int n;

    if (level > max_level)
        return;
    if (!journal_prefix) {
        switch (level) {
        case LOG_LEVEL_ERROR: word = "error: "; break;
        case LOG_LEVEL_WARNING: word = "warning: "; break;
        default: break;
        }
    }
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (journal_prefix)
        fprintf(stderr, "<%d>%s\n", (int)level, line);
    else
        fprintf(stderr, "logshardd: %s%s\n", word, line);
}
