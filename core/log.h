/*
 * log.h: leveled logging to stderr. One line per event, in one of two
 * encodings (service.telemetry.logs.encoding, as in the Collector):
 *   console  2026-11-21T05:40:00.123Z info  [otlp] listening on 127.0.0.1:4318
 *   json     {"level":"info","ts":"2026-11-21T05:40:00.123Z","msg":"listening on
 *            127.0.0.1:4318","otelcol.component.id":"otlp",<initial fields>}
 * The level is set from service.telemetry.logs.level; initial fields (from
 * logs.initial_fields) are added to every JSON line, and to console lines
 * as key=value at the end.
 */
#ifndef PL_LOG_H
#define PL_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum pl_log_level {
    PL_LOG_DEBUG = 0,
    PL_LOG_INFO = 1,
    PL_LOG_WARN = 2,
    PL_LOG_ERROR = 3,
    PL_LOG_OFF = 4,
} pl_log_level;

typedef enum pl_log_encoding {
    PL_LOG_CONSOLE = 0,
    PL_LOG_JSON = 1,
} pl_log_encoding;

void pl_log_set_level(pl_log_level level);
void pl_log_set_encoding(pl_log_encoding encoding);
/* "console" or "json"; -1 if unknown. */
int pl_log_encoding_parse(const char *name);
/* Fields added to every line (copied; at most about 1 KiB of them). */
void pl_log_set_fields(char *const *keys, char *const *values, size_t n);
pl_log_level pl_log_get_level(void);
/* Parses "debug", "info", "warn", "error", "off"; -1 if unknown. */
int pl_log_level_parse(const char *name);
int pl_log_enabled(pl_log_level level);

/* `component` may be NULL. */
void pl_log(pl_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Rate-limited logging for errors that repeat (a full disk refusing every
 * write): the first line is logged, then at most one line per `interval_ns`,
 * ending in "(N more since)" when lines were held back in between. The
 * caller owns the limiter (zeroed, interval set) and uses it from one thread
 * only. Returns true when the line was written. */
typedef struct pl_log_limit {
    uint64_t interval_ns;
    uint64_t last_ns;    /* monotonic time of the last line written; 0: none yet */
    uint64_t suppressed; /* lines held back since then */
} pl_log_limit;
#define PL_LOG_LIMIT_DEFAULT_NS 10000000000ull /* 10 s */
bool pl_log_limited(pl_log_limit *limit, pl_log_level level, const char *component, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));

#define pl_debug(c, ...)                                                                           \
    do {                                                                                           \
        if (pl_log_enabled(PL_LOG_DEBUG))                                                          \
            pl_log(PL_LOG_DEBUG, c, __VA_ARGS__);                                                  \
    } while (0)
#define pl_info(c, ...)  pl_log(PL_LOG_INFO, c, __VA_ARGS__)
#define pl_warn(c, ...)  pl_log(PL_LOG_WARN, c, __VA_ARGS__)
#define pl_error(c, ...) pl_log(PL_LOG_ERROR, c, __VA_ARGS__)

#endif
