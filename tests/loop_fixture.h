/*
 * loop_fixture.h: running a libuv loop in a test until something has
 * happened. The bound is generous (the condition normally holds long
 * before it): it only keeps a broken build from hanging the test run.
 */
#ifndef PL_TESTS_LOOP_FIXTURE_H
#define PL_TESTS_LOOP_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

static void loop_fixture_tick_(uv_timer_t *t)
{
    (void)t; /* wakes uv_run(UV_RUN_ONCE) so the condition is looked at */
}

/* Runs `loop` until done(arg) holds or max_ms have passed; returns done(arg). */
static __attribute__((unused)) bool loop_run_until(uv_loop_t *loop, bool (*done)(void *arg),
                                                   void *arg, uint64_t max_ms)
{
    uv_timer_t tick;
    uv_timer_init(loop, &tick);
    uv_timer_start(&tick, loop_fixture_tick_, 5, 5);
    uv_update_time(loop);
    uint64_t deadline = uv_now(loop) + max_ms;
    while (!done(arg) && uv_now(loop) < deadline)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return done(arg);
}

#endif
