/*
 * resourcedetection.c: the `resourcedetection` processor, in the
 * Collector's shape:
 *
 *   resourcedetection:
 *     detectors: [env, system, docker]
 *     override: true
 *     system:
 *       hostname_sources: [os]
 *       resource_attributes: {host.arch: {enabled: true}}
 *
 * Detection runs once, at create; the attributes found are then set on the
 * resource of every ResourceSpans / ResourceProfiles / ResourceLogs /
 * ResourceMetrics with the `resource` processor's engine (resource_fixed.h):
 * replacing values already there when `override` (the default), else only
 * where absent. When two detectors find the same key the earlier one in
 * `detectors` wins, as in the Collector.
 *
 *   env     OTEL_RESOURCE_ATTRIBUTES (k=v,k2=v2; keys and values
 *           percent-decoded, surrounding spaces trimmed)
 *   system  host.name (hostname_sources: dns = canonical name of the host
 *           name, os = gethostname), os.type (linux), host.arch (off by
 *           default, as in the Collector: amd64, arm64, x86, arm32, ...)
 *   docker  accepted; proflink does not query the Docker daemon, so it sets
 *           nothing (a warning at load, an info line at create)
 *
 * Other detectors (ec2, gcp, azure, k8snode, ...) are refused at load.
 */
#include <ctype.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "core/component.h"
#include "core/log.h"
#include "resource_fixed.h"

static int rd_sys_validate(void *cfg, pl_cfg_ctx *ctx);
static int rd_validate(void *cfg, pl_cfg_ctx *ctx);

#include "processors/resourcedetection.config.h"

static const char *const supported_detectors[] = {"env", "system", "docker", NULL};

static bool in_list(const char *const *names, const char *s)
{
    for (size_t i = 0; names[i]; i++)
        if (strcmp(names[i], s) == 0)
            return true;
    return false;
}

static int rd_sys_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    const rd_sys_cfg *c = cfg_;
    static const char *const sources[] = {"dns", "os", NULL};
    int errors = 0;
    for (size_t i = 0; i < c->hostname_sources.n; i++) {
        const char *s = c->hostname_sources.items[i];
        errors += pl_cfg_check(ctx, in_list(sources, s), "hostname_sources",
                               "hostname source '%s' is not supported (proflink has dns, os)", s);
    }
    return errors;
}

static int rd_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    const rd_cfg *c = cfg_;
    int errors = 0;
    for (size_t i = 0; i < c->detectors.n; i++) {
        const char *d = c->detectors.items[i];
        errors +=
            pl_cfg_check(ctx, in_list(supported_detectors, d), "detectors",
                         "detector '%s' is not supported (proflink has env, system, docker)", d);
        if (strcmp(d, "docker") == 0)
            pl_cfg_warnf(ctx, "detectors",
                         "detector 'docker': proflink does not query the Docker daemon; it sets "
                         "no attributes");
    }
    return errors;
}

#include "processors/resourcedetection.config.inc"

/* ---- detection ------------------------------------------------------------ */

typedef struct found {
    char **keys;
    char **values;
    size_t n, cap;
    bool oom;
} found;

static bool found_has(const found *f, const char *key)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->keys[i], key) == 0)
            return true;
    return false;
}

/* Adds key=value (copied) unless an earlier detector set the key. */
static void found_add(found *f, const char *key, size_t klen, const char *value, size_t vlen)
{
    char *k = strndup(key, klen);
    if (!k) {
        f->oom = true;
        return;
    }
    if (found_has(f, k)) {
        free(k);
        return;
    }
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 8;
        char **nk = realloc(f->keys, cap * sizeof(char *));
        if (nk)
            f->keys = nk;
        char **nv = nk ? realloc(f->values, cap * sizeof(char *)) : NULL;
        if (nv)
            f->values = nv;
        if (!nk || !nv) {
            free(k);
            f->oom = true;
            return;
        }
        f->cap = cap;
    }
    char *v = strndup(value, vlen);
    if (!v) {
        free(k);
        f->oom = true;
        return;
    }
    f->keys[f->n] = k;
    f->values[f->n++] = v;
}

static void found_free(found *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->keys[i]);
        free(f->values[i]);
    }
    free(f->keys);
    free(f->values);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes s[0..n) in place after trimming spaces; returns the new
 * length. A '%' not followed by two hex digits stays as it is. */
static size_t trim_decode(char *s, size_t n, char **start)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int h, l;
        if (s[i] == '%' && i + 2 < n && (h = hexval((unsigned char)s[i + 1])) >= 0 &&
            (l = hexval((unsigned char)s[i + 2])) >= 0) {
            s[o++] = (char)(h * 16 + l);
            i += 2;
        } else {
            s[o++] = s[i];
        }
    }
    *start = s;
    return o;
}

/* OTEL_RESOURCE_ATTRIBUTES: k=v pairs separated by commas. A pair without
 * '=' or with an empty key is skipped with a warning. */
static void detect_env(const char *id, found *f)
{
    const char *env = getenv("OTEL_RESOURCE_ATTRIBUTES");
    if (!env || !*env)
        return;
    char *copy = strdup(env);
    if (!copy) {
        f->oom = true;
        return;
    }
    char *p = copy;
    while (p) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = '\0';
        char *eq = strchr(p, '=');
        char *k = NULL, *v = NULL;
        size_t kl = 0, vl = 0;
        if (eq) {
            *eq = '\0';
            kl = trim_decode(p, strlen(p), &k);
            vl = trim_decode(eq + 1, strlen(eq + 1), &v);
        }
        if (eq && kl)
            found_add(f, k, kl, v, vl);
        else if (*p && strspn(p, " \t") != strlen(p))
            pl_warn(id, "OTEL_RESOURCE_ATTRIBUTES: entry '%s' is not key=value; skipped", p);
        p = comma ? comma + 1 : NULL;
    }
    free(copy);
}

/* The Collector's names for the machine architecture (host.arch). */
static const char *arch_name(const char *machine)
{
    if (strcmp(machine, "x86_64") == 0 || strcmp(machine, "amd64") == 0)
        return "amd64";
    if (strcmp(machine, "aarch64") == 0 || strcmp(machine, "arm64") == 0)
        return "arm64";
    if (machine[0] == 'i' && strcmp(machine + 2, "86") == 0)
        return "x86";
    if (strncmp(machine, "arm", 3) == 0)
        return "arm32";
    if (strncmp(machine, "ppc64", 5) == 0)
        return "ppc64";
    if (strcmp(machine, "ppc") == 0)
        return "ppc32";
    return machine;
}

static void detect_system(const char *id, const rd_sys_cfg *c, found *f)
{
    const rd_sys_attrs_cfg *a = &c->resource_attributes;
    if (a->host_name.enabled) {
        char host[256] = "";
        bool have = false;
        if (gethostname(host, sizeof(host) - 1) != 0)
            host[0] = '\0';
        for (size_t i = 0; !have && host[0] && i < c->hostname_sources.n; i++) {
            const char *src = c->hostname_sources.items[i];
            if (strcmp(src, "os") == 0) {
                found_add(f, "host.name", 9, host, strlen(host));
                have = true;
            } else if (strcmp(src, "dns") == 0) {
                struct addrinfo hints = {.ai_flags = AI_CANONNAME, .ai_family = AF_UNSPEC};
                struct addrinfo *res = NULL;
                if (getaddrinfo(host, NULL, &hints, &res) == 0 && res && res->ai_canonname &&
                    *res->ai_canonname) {
                    found_add(f, "host.name", 9, res->ai_canonname, strlen(res->ai_canonname));
                    have = true;
                }
                if (res)
                    freeaddrinfo(res);
            }
        }
        if (!have)
            pl_warn(id, "system: no hostname source answered; host.name not set");
    }
    struct utsname u;
    bool uts = uname(&u) == 0;
    if (a->os_type.enabled && uts) {
        char os[sizeof(u.sysname)];
        size_t n = 0;
        for (; u.sysname[n] && n + 1 < sizeof(os); n++)
            os[n] = (char)tolower((unsigned char)u.sysname[n]);
        found_add(f, "os.type", 7, os, n);
    }
    if (a->host_arch.enabled && uts) {
        const char *arch = arch_name(u.machine);
        found_add(f, "host.arch", 9, arch, strlen(arch));
    }
}

static void detect_docker(const char *id)
{
    struct stat st;
    if (stat("/var/run/docker.sock", &st) != 0)
        pl_info(id, "docker: /var/run/docker.sock not found; detector skipped");
    else
        pl_info(id, "docker: proflink does not query the Docker daemon; detector sets nothing");
}

static pl_status rd_create(const pl_create_settings *s, const void *config, void **out, pl_err *err)
{
    const rd_cfg *cfg = config;
    const char *id = s && s->id ? s->id : "resourcedetection";
    found f = {0};
    for (size_t i = 0; i < cfg->detectors.n; i++) {
        const char *d = cfg->detectors.items[i];
        if (strcmp(d, "env") == 0)
            detect_env(id, &f);
        else if (strcmp(d, "system") == 0)
            detect_system(id, &cfg->system, &f);
        else if (strcmp(d, "docker") == 0)
            detect_docker(id);
        else {
            found_free(&f);
            return pl_errf(err, PL_ERR_INVALID, "detector '%s' is not supported", d);
        }
    }
    if (f.oom) {
        found_free(&f);
        return pl_errf(err, PL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < f.n; i++)
        pl_info(id, "detected %s=%s", f.keys[i], f.values[i]);
    pl_status st =
        pl_resource_fixed_create(s, (const char *const *)f.keys, (const char *const *)f.values, f.n,
                                 cfg->override, out, err);
    found_free(&f);
    return st;
}

static pl_status rd_start(void *self, pl_err *err)
{
    return PL_OK;
}

static void rd_shutdown(void *self) {}

const pl_component_type pl_processor_resourcedetection = {
    PL_COMPONENT_HEAD("resourcedetection", PL_KIND_PROCESSOR, PL_SIGNALS_ALL, &rd_section),
    .description = "detects resource attributes once at start (env, system) and sets them on "
                   "every resource",
    PL_COMPONENT_LIFECYCLE(rd_create, rd_start, rd_shutdown, pl_resource_fixed_destroy),
    .consume = pl_resource_fixed_consume,
};
