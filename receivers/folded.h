/*
 * folded.h: Pyroscope's text upload formats.
 *
 *   groups ("folded", collapsed stacks; /ingest's default format):
 *       main;handler;work 42
 *     one stack per line, root first, frames separated by ';', then one
 *     space and a non-negative integer count.
 *   lines (format=lines):
 *       main;handler;work
 *     one stack per line; each line counts 1.
 *
 * Lines end with LF or CRLF; empty lines are skipped. A groups line without
 * a valid count is an error naming the line, not a silent skip: a client
 * sending the wrong format should hear about it. Stacks go into a
 * pl_pprof_writer (leaf first), whose frame names are views into `text`.
 */
#ifndef PL_FOLDED_H
#define PL_FOLDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"
#include "proto/pprof.h"

/* Largest number of frames in one stack (deeper stacks are an error). */
#define PL_FOLDED_MAX_DEPTH 4096

/* `scale` multiplies every count (e.g. the sampling period in ns for CPU). */
pl_status pl_folded_parse(const uint8_t *text, size_t len, bool lines_format, int64_t scale,
                          pl_pprof_writer *w, pl_err *err);

#endif
