/*
 * fuzz_pprof_scrape.c: what the pprof_scrape receiver does with a target's
 * HTTP response: status, truncation and a body that should be a pprof (raw
 * or gzipped), decoded under the receiver's budget and handed on.
 *
 * The response handler is static in receivers/pprof_scrape.c, so this target
 * compiles that file into itself.
 *
 * Input: [status selector u8][flags u8] then the body.
 */
#include "../../receivers/pprof_scrape.c"
#include "core/stats.h"
#include "pipeline/consumer.h"
#include "proto/otlp_pb.h"

static pl_status sink(void *arg, pl_batch *batch)
{
    (void)arg;
    pl_err err = {{0}};
    if (pl_otlp_validate_profiles(&batch->data.profiles, &err) != PL_OK)
        __builtin_trap(); /* a decoded scrape indexes inside its dictionary */
    pl_batch_free(batch);
    return PL_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const int statuses[] = {200, 200, 200, 404, 500, 301};
    static pl_stats *stats;
    if (!stats)
        stats = pl_stats_new("pprof_scrape/fuzz", PL_KIND_RECEIVER);
    pl_log_set_level(PL_LOG_ERROR);
    pl_consumer next;
    pl_consumer_init_func(&next, sink, NULL);
    uint64_t ok = 0, failed = 0;
    pl_kv attr = {.key = PL_BYTES_LIT("service.name"),
                  .value = pl_value_string(PL_BYTES_LIT("fuzz"))};
    scrape_target target = {.attrs = &attr, .n_attrs = 1};
    scrape s = {.stats = stats,
                .next = &next,
                .max_profile_size = 1u << 20,
                .targets = &target,
                .n_targets = 1,
                .scrapes_ok = &ok,
                .scrapes_failed = &failed};
    snprintf(s.id, sizeof(s.id), "pprof_scrape/fuzz");
    scrape_job job = {.owner = &s, .url = "http://target/debug/pprof/profile", .profile = "cpu"};
    pl_http_client_result res = {0};
    res.status = statuses[data[0] % 6];
    res.body_truncated = (data[1] & 1) != 0;
    res.transport_error = (data[1] & 2) ? 7 : 0;
    res.error = "connection refused";
    res.body = data + 2;
    res.body_len = size - 2;
    on_scraped(&job, &res);
    if (ok + failed != 1)
        __builtin_trap(); /* every answer is counted once */
    return 0;
}
