/*
 * file.h: the `file` exporter's configuration (see file.c), for code that
 * fills it without YAML (tests).
 */
#ifndef PL_EXPORTERS_FILE_H
#define PL_EXPORTERS_FILE_H

#include <stdint.h>

typedef struct pl_file_rotation_config {
    int64_t max_megabytes;
    int64_t max_backups;
} pl_file_rotation_config;

typedef struct pl_file_exporter_config {
    char *path;
    char *format; /* "json" or "proto" */
    pl_file_rotation_config rotation;
} pl_file_exporter_config;

#endif
