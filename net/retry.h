/*
 * retry.h: the `retry_on_failure` table (net/retry.config.yaml): how a
 * sender waits and tries again after a retryable failure. Exporters' sending
 * queues (exporters/queue.c) and the kafka receiver's redelivery use it.
 */
#ifndef PL_NET_RETRY_H
#define PL_NET_RETRY_H

#include "core/component.h"

#include "net/retry.config.h"

extern const pl_cfg_section pl_retry_section;

#endif
