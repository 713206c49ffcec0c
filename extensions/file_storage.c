/*
 * file_storage.c: the `file_storage` extension, in the Collector's shape:
 *
 *   extensions:
 *     file_storage/queue:
 *       directory: /var/lib/otelcol/queue
 *       create_directory: true
 *   exporters:
 *     otlp:
 *       sending_queue: {storage: file_storage/queue}
 *
 * The extension only names a directory: the config loader
 * (config/config.c) turns an exporter's `sending_queue.storage` that names
 * a configured file_storage extension into that directory, where the
 * sending queue keeps its SQLite database (<exporter id>.queue.db). At
 * create the extension makes sure the directory exists (creating it when
 * `create_directory` is set).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/component.h"
#include "core/log.h"

static int fs_validate(void *cfg, pl_cfg_ctx *ctx);

#include "extensions/file_storage.config.h"

static int fs_validate(void *cfg_, pl_cfg_ctx *ctx)
{
    const fs_cfg *c = cfg_;
    return pl_cfg_check(ctx, c->directory && c->directory[0], "directory", "must not be empty");
}

#include "extensions/file_storage.config.inc"

/* mkdir -p with mode 0750; 0 or -1 (errno set). */
static int make_dirs(const char *path)
{
    char *p = strdup(path);
    if (!p)
        return -1;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0750) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = '/';
    }
    int rc = mkdir(p, 0750) != 0 && errno != EEXIST ? -1 : 0;
    free(p);
    return rc;
}

static pl_status fs_create(const pl_create_settings *settings, const void *config, void **out,
                           pl_err *err)
{
    const fs_cfg *c = config;
    struct stat st;
    if (stat(c->directory, &st) != 0) {
        if (!c->create_directory)
            return pl_errf(err, PL_ERR_INVALID,
                           "directory %s does not exist (create_directory: true creates it)",
                           c->directory);
        if (make_dirs(c->directory) != 0)
            return pl_errf(err, PL_ERR_INVALID, "cannot create directory %s: %s", c->directory,
                           strerror(errno));
        pl_info(settings->id, "created directory %s", c->directory);
    } else if (!S_ISDIR(st.st_mode)) {
        return pl_errf(err, PL_ERR_INVALID, "%s is not a directory", c->directory);
    }
    *out = malloc(1);
    return *out ? PL_OK : PL_ERR_NOMEM;
}

static void fs_destroy(void *self)
{
    free(self);
}

const pl_component_type pl_extension_file_storage = {
    PL_COMPONENT_HEAD("file_storage", PL_KIND_EXTENSION, 0, &fs_section),
    .description = "a directory for the persistent sending queues of the exporters whose "
                   "sending_queue.storage names it",
    .create = fs_create,
    .destroy = fs_destroy,
};
