/*
 * web_assets.h: the web view's files (store/web/), compiled into the binary
 * at build time by store/web/embed.py, served by the query API.
 */
#ifndef PL_STORE_WEB_ASSETS_H
#define PL_STORE_WEB_ASSETS_H

#include <stddef.h>

typedef struct pl_web_asset {
    const char *path; /* "/index.html" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
} pl_web_asset;

/* NULL when there is no such file. */
const pl_web_asset *pl_web_asset_find(const char *path);

#endif
