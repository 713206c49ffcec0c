/*
 * log.c: see log.h. Writes each line with a single fputs so lines from
 * different threads do not interleave.
 */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pl_log_level current_level = PL_LOG_INFO;

void pl_log_set_level(pl_log_level level)
{
    current_level = level;
}

pl_log_level pl_log_get_level(void)
{
    return current_level;
}

int pl_log_level_parse(const char *name)
{
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, names[i]) == 0)
            return i;
    if (strcasecmp(name, "warning") == 0)
        return PL_LOG_WARN;
    return -1;
}

int pl_log_enabled(pl_log_level level)
{
    return level >= current_level && current_level != PL_LOG_OFF;
}

void pl_log(pl_log_level level, const char *component, const char *fmt, ...)
{
    static const char *tags[] = {"debug", "info ", "warn ", "error"};
    if (!pl_log_enabled(level) || level > PL_LOG_ERROR)
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     ts.tv_nsec / 1000000, tags[level]);
    if (component && n < (int)sizeof(line))
        n += snprintf(line + n, sizeof(line) - (size_t)n, "[%s] ", component);
    if (n < (int)sizeof(line)) {
        va_list ap;
        va_start(ap, fmt);
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
        va_end(ap);
    }
    if (n >= (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n] = '\n';
    line[n + 1] = '\0';
    fputs(line, stderr);
}
