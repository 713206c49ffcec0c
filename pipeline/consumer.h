/*
 * consumer.h: pl_consumer's shape lives in core (core/consumer.h); this
 * name stays for the graph's tests.
 */
#ifndef PL_CONSUMER_H
#define PL_CONSUMER_H

#include "core/consumer.h"

#endif
