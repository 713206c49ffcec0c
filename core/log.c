/*
 * log.c: see log.h. Writes each line with a single fputs so lines from
 * different threads do not interleave.
 *
 * Messages can quote what clients sent, so the JSON encoding escapes every
 * control character and replaces bytes that are not UTF-8 with U+FFFD: a
 * log line is always one valid JSON object on one line.
 */
#include "log.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static pl_log_level current_level = PL_LOG_INFO;
static pl_log_encoding current_encoding = PL_LOG_CONSOLE;

/* Initial fields, pre-rendered for each encoding. Two buffers, switched
 * atomically: a reload writes the one not in use. */
#define FIELDS_SIZE 1536
typedef struct fields_text {
    char json[FIELDS_SIZE];    /* ,"k":"v",... */
    char console[FIELDS_SIZE]; /*  k=v k=v */
} fields_text;
static fields_text fields_buf[2];
static fields_text *current_fields = &fields_buf[0];

/* Set by the loop thread (start, reload), read by every thread that logs. */
void pl_log_set_level(pl_log_level level)
{
    __atomic_store_n(&current_level, level, __ATOMIC_RELAXED);
}

pl_log_level pl_log_get_level(void)
{
    return __atomic_load_n(&current_level, __ATOMIC_RELAXED);
}

void pl_log_set_encoding(pl_log_encoding encoding)
{
    __atomic_store_n(&current_encoding, encoding, __ATOMIC_RELAXED);
}

int pl_log_encoding_parse(const char *name)
{
    if (strcasecmp(name, "console") == 0)
        return PL_LOG_CONSOLE;
    if (strcasecmp(name, "json") == 0)
        return PL_LOG_JSON;
    return -1;
}

int pl_log_level_parse(const char *name)
{
    static const char *const names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i < 5; i++)
        if (strcasecmp(name, names[i]) == 0)
            return i;
    if (strcasecmp(name, "warning") == 0)
        return PL_LOG_WARN;
    return -1;
}

int pl_log_enabled(pl_log_level level)
{
    pl_log_level current = __atomic_load_n(&current_level, __ATOMIC_RELAXED);
    return level >= current && current != PL_LOG_OFF;
}

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x7f >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

/* Appends `s` as the inside of a JSON string; returns the new length. */
static size_t json_escape(char *out, size_t n, size_t size, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p && n + 8 < size) {
        unsigned c = *p;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
            p++;
        } else if (c == '\n') {
            out[n++] = '\\';
            out[n++] = 'n';
            p++;
        } else if (c == '\t') {
            out[n++] = '\\';
            out[n++] = 't';
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            out[n++] = (char)c;
            p++;
        } else {
            size_t len = utf8_len(p);
            if (len == 0) {
                n += (size_t)snprintf(out + n, size - n, "\\ufffd");
                p++;
            } else {
                memcpy(out + n, p, len);
                n += len;
                p += len;
            }
        }
    }
    out[n] = '\0';
    return n;
}

void pl_log_set_fields(char *const *keys, char *const *values, size_t n)
{
    fields_text *next = current_fields == &fields_buf[0] ? &fields_buf[1] : &fields_buf[0];
    size_t j = 0, c = 0;
    next->json[0] = next->console[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (j + 16 >= FIELDS_SIZE || c + 8 >= FIELDS_SIZE)
            break;
        next->json[j++] = ',';
        next->json[j++] = '"';
        j = json_escape(next->json, j, FIELDS_SIZE - 8, keys[i]);
        next->json[j++] = '"';
        next->json[j++] = ':';
        next->json[j++] = '"';
        j = json_escape(next->json, j, FIELDS_SIZE - 8, values[i]);
        next->json[j++] = '"';
        next->json[j] = '\0';
        c += (size_t)snprintf(next->console + c, FIELDS_SIZE - c, " %s=%s", keys[i], values[i]);
        if (c >= FIELDS_SIZE)
            c = FIELDS_SIZE - 1;
    }
    __atomic_store_n(&current_fields, next, __ATOMIC_RELEASE);
}

void pl_log(pl_log_level level, const char *component, const char *fmt, ...)
{
    static const char *const tags[] = {"debug", "info ", "warn ", "error"};
    static const char *const names[] = {"debug", "info", "warn", "error"};
    if (!pl_log_enabled(level) || level > PL_LOG_ERROR)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[64];
    snprintf(when, sizeof(when), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
    const fields_text *fields = __atomic_load_n(&current_fields, __ATOMIC_ACQUIRE);
    char line[4096 + FIELDS_SIZE];
    size_t n;
    if (__atomic_load_n(&current_encoding, __ATOMIC_RELAXED) == PL_LOG_JSON) {
        n = (size_t)snprintf(line, sizeof(line), "{\"level\":\"%s\",\"ts\":\"%s\",\"msg\":\"",
                             names[level], when);
        n = json_escape(line, n, sizeof(line) - FIELDS_SIZE - 64, msg);
        line[n++] = '"';
        if (component) {
            n += (size_t)snprintf(line + n, sizeof(line) - n, ",\"otelcol.component.id\":\"");
            n = json_escape(line, n, sizeof(line) - FIELDS_SIZE - 16, component);
            line[n++] = '"';
        }
        n += (size_t)snprintf(line + n, sizeof(line) - n, "%s}\n", fields->json);
    } else {
        /* one line per event even when a message holds a line break */
        for (char *p = msg; *p; p++)
            if (*p == '\n' || *p == '\r')
                *p = ' ';
        n = (size_t)snprintf(line, sizeof(line), "%s %s %s%s%s%s%s\n", when, tags[level],
                             component ? "[" : "", component ? component : "",
                             component ? "] " : "", msg, fields->console);
    }
    if (n >= sizeof(line) - 1) {
        line[sizeof(line) - 2] = '\n';
        line[sizeof(line) - 1] = '\0';
    }
    fputs(line, stderr);
}

bool pl_log_limited(pl_log_limit *limit, pl_log_level level, const char *component, const char *fmt,
                    ...)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    uint64_t interval = limit->interval_ns ? limit->interval_ns : PL_LOG_LIMIT_DEFAULT_NS;
    if (limit->last_ns && now - limit->last_ns < interval) {
        limit->suppressed++;
        return false;
    }
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (limit->suppressed)
        pl_log(level, component, "%s (%llu more since)", msg,
               (unsigned long long)limit->suppressed);
    else
        pl_log(level, component, "%s", msg);
    limit->last_ns = now ? now : 1;
    limit->suppressed = 0;
    return true;
}
