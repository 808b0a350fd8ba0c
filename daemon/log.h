/* Daemon logging to stderr. Only the daemon's top level logs; every message
 * names its object (producer, shard file, config line). Under systemd the
 * lines carry <N> priority prefixes that journald understands. */
#pragma once

enum log_level { LOG_LEVEL_ERROR = 3, LOG_LEVEL_WARNING = 4, LOG_LEVEL_INFO = 6, LOG_LEVEL_DEBUG = 7 };

void log_setup(void);
void log_set_max_level(enum log_level level);

__attribute__((format(printf, 2, 3))) void log_msg(enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warning(...) log_msg(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__)
