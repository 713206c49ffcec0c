/*
 * host.c: clocks, the process-wide memory-pressure state, and whether this
 * thread runs the pipeline under the pipeline lock (component.h).
 */
#include "component.h"

#include <time.h>

static volatile int memory_state = PL_MEMORY_OK;
/* a worker running the pipeline under the pipeline lock (one flag per
 * thread, set and cleared around each call) */
static _Thread_local bool pipeline_borrowed;

bool pl_pipeline_borrowed(void)
{
    return pipeline_borrowed;
}

void pl_pipeline_set_borrowed(bool on)
{
    pipeline_borrowed = on;
}

uint64_t pl_time_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pl_time_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t pl_clock_now(const pl_clock *clock)
{
    if (clock && clock->now_ns)
        return clock->now_ns(clock->arg);
    return pl_time_now_ns();
}

uint64_t pl_clock_mono(const pl_clock *clock)
{
    if (clock && clock->mono_ns)
        return clock->mono_ns(clock->arg);
    if (clock && clock->now_ns)
        return clock->now_ns(clock->arg);
    return pl_time_mono_ns();
}

pl_memory_state pl_memory_state_get(void)
{
    return (pl_memory_state)memory_state;
}

void pl_memory_state_set(pl_memory_state state)
{
    memory_state = state;
}

const char *pl_kind_name(pl_kind kind)
{
    switch (kind) {
    case PL_KIND_RECEIVER:
        return "receiver";
    case PL_KIND_PROCESSOR:
        return "processor";
    case PL_KIND_EXPORTER:
        return "exporter";
    case PL_KIND_EXTENSION:
        return "extension";
    }
    return "unknown";
}
