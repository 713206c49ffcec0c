/*
 * file.h: the `file` exporter's configuration (see file.c), for code that
 * fills it without YAML (tests): pl_file_exporter_config and
 * pl_file_rotation_config, generated from file.config.yaml.
 */
#ifndef PL_EXPORTERS_FILE_H
#define PL_EXPORTERS_FILE_H

#include "exporters/file.config.h"

#endif
