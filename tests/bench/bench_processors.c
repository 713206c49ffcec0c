/*
 * bench_processors.c: cost per span and per sample of the batch,
 * memory_limiter, attributes, resource and redaction processors.
 *
 * Each processor is driven through its descriptor, as the pipeline does,
 * with a capture consumer that frees what it gets. Input batches are built
 * before the clock starts; the figure is (time of all consume calls, plus
 * the flush for batch) / items. Several rounds run and the median is
 * printed.
 *
 *   build/tests/bench_processors [rounds [label-substring]]
 */
#include <stdlib.h>
#include <time.h>

#include "processors_fixtures.h"

#define SPANS_PER_BATCH   100
#define BATCHES           100
#define SAMPLES_PER_BATCH 1000
#define PROFILE_BATCHES   20

/* Keeps what comes out, so that freeing it is not timed. */
typedef struct sink {
    pl_batch **out;
    size_t n, cap;
    size_t items;
} sink;

static pl_status sink_fn(void *arg, pl_batch *b)
{
    sink *s = arg;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 256;
        s->out = realloc(s->out, s->cap * sizeof(*s->out));
    }
    s->out[s->n++] = b;
    return PL_OK;
}

static void sink_free(sink *s)
{
    for (size_t i = 0; i < s->n; i++) {
        s->items += pl_batch_items(s->out[i]);
        pl_batch_free(s->out[i]);
    }
    free(s->out);
}

/* A span with 10 typical attributes (route, method, status, user, ...). */
static pl_batch *bench_traces(void)
{
    pl_batch *b = px_traces(1, SPANS_PER_BATCH);
    for (uint32_t i = 0; i < SPANS_PER_BATCH; i++) {
        pl_attrs *a = &px_span(b, 0, i)->attrs;
        px_put_str(b, a, "http.method", "GET");
        px_put(b, a, "http.status_code", pl_value_int(200));
        px_put_str(b, a, "user.email", "someone@example.com");
        px_put_str(b, a, "http.url", "https://shop.example.com/cart?id=1234");
        px_put_str(b, a, "net.peer.name", "10.0.0.12");
        px_put_str(b, a, "db.statement", "SELECT * FROM cart WHERE id = ?");
        px_put_str(b, a, "payment.note", "card 4111 1111 1111 1111");
        px_put(b, a, "retry", pl_value_int(0));
        px_put_str(b, a, "thread.name", "worker-3");
    }
    return b;
}

typedef pl_batch *(*make_fn)(void);

static pl_batch *bench_profiles(void)
{
    return px_profiles("svc", "secret_", SAMPLES_PER_BATCH);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Returns ns per item for one round. */
static double round_ns(const pl_component_type *type, const char *yaml, make_fn make, int n_batches)
{
    px_proc p;
    if (px_open(&p, type, yaml, NULL) != PL_OK) {
        fprintf(stderr, "cannot open %s: %s\n", type->type, p.err.msg);
        exit(1);
    }
    pl_batch **in = malloc((size_t)n_batches * sizeof(*in));
    size_t items = 0;
    for (int i = 0; i < n_batches; i++) {
        in[i] = make();
        items += pl_batch_items(in[i]);
    }
    sink out = {0};
    pl_consumer next;
    pl_consumer_init_func(&next, sink_fn, &out);
    uint64_t t0 = pl_time_mono_ns();
    for (int i = 0; i < n_batches; i++)
        type->consume(p.self, in[i], &next);
    if (type->shutdown)
        type->shutdown(p.self); /* batch: flushes what it holds */
    uint64_t t1 = pl_time_mono_ns();
    sink_free(&out);
    size_t out_items = out.items;
    if (out_items != items && type != &pl_processor_memory_limiter)
        fprintf(stderr, "%s: %zu items in, %zu out\n", type->type, items, out_items);
    p.type->destroy(p.self);
    p.self = NULL;
    px_close(&p);
    free(in);
    return (double)(t1 - t0) / (double)items;
}

static const char *only; /* run only benchmarks whose label contains this */

static void bench(const char *label, const pl_component_type *type, const char *yaml, make_fn make,
                  int n_batches, int rounds, const char *unit)
{
    if (only && !strstr(label, only))
        return;
    double *r = malloc((size_t)rounds * sizeof(double));
    for (int i = 0; i < rounds; i++)
        r[i] = round_ns(type, yaml, make, n_batches);
    qsort(r, (size_t)rounds, sizeof(double), cmp_double);
    printf("| %-58s | %8.1f ns/%s | %8.1f | %8.1f |\n", label, r[rounds / 2], unit, r[0],
           r[rounds - 1]);
    free(r);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 9;
    if (rounds < 1)
        rounds = 1;
    only = argc > 2 ? argv[2] : NULL;
    pl_log_set_level(PL_LOG_ERROR);
    printf("rounds: %d; traces: %d batches x %d spans (10 attributes each); profiles: %d "
           "batches x %d samples\n\n",
           rounds, BATCHES, SPANS_PER_BATCH, PROFILE_BATCHES, SAMPLES_PER_BATCH);
    printf("| %-58s | %14s | %8s | %8s |\n", "processor / config", "median", "min", "max");
    printf("|%s|%s|%s|%s|\n", "------------------------------------------------------------",
           "----------------", "----------", "----------");

    const char *attrs4 = "actions:\n"
                         "  - {key: env, action: insert, value: prod}\n"
                         "  - {key: http.method, action: upsert, value: POST}\n"
                         "  - {key: user.email, action: hash}\n"
                         "  - {key: thread.name, action: delete}\n";
    const char *extract = "actions:\n"
                          "  - {key: http.url, action: extract, pattern: "
                          "'^(?P<scheme>[a-z]+)://(?P<host>[^/]+)'}\n";
    const char *resource = "attributes:\n"
                           "  - {key: deployment.environment, action: upsert, value: prod}\n"
                           "  - {key: host.name, action: insert, value: h1}\n";
    const char *redact = "blocked_values:\n"
                         "  - '[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}[ -]?[0-9]{4}'\n"
                         "  - 'Bearer [A-Za-z0-9._-]+'\n";
    const char *redact_prof = "functions: ['^secret_']\nfiles: ['^/home/']\n"
                              "blocked_values: ['t[0-9]']\n";

    bench("memory_limiter (under the limit), traces", &pl_processor_memory_limiter,
          "limit_mib: 1000000\n", bench_traces, BATCHES, rounds, "span");
    bench("attributes: insert+upsert+hash+delete, traces", &pl_processor_attributes, attrs4,
          bench_traces, BATCHES, rounds, "span");
    bench("attributes: extract 2 named groups, traces", &pl_processor_attributes, extract,
          bench_traces, BATCHES, rounds, "span");
    bench("attributes: insert+upsert+hash+delete, profile samples", &pl_processor_attributes,
          "actions:\n"
          "  - {key: env, action: insert, value: prod}\n"
          "  - {key: thread, action: upsert, value: main}\n"
          "  - {key: thread, action: hash}\n"
          "  - {key: other, action: delete}\n",
          bench_profiles, PROFILE_BATCHES, rounds, "sample");
    bench("resource: upsert+insert, traces (per span, 100 spans/resource)", &pl_processor_resource,
          resource, bench_traces, BATCHES, rounds, "span");
    bench("redaction: 2 value patterns, 10 attrs/span, traces", &pl_processor_redaction, redact,
          bench_traces, BATCHES, rounds, "span");
    bench("redaction: functions+files+labels, profile samples", &pl_processor_redaction,
          redact_prof, bench_profiles, PROFILE_BATCHES, rounds, "sample");
    bench("batch: merge 100 x 100 spans (send_batch_size 8192)", &pl_processor_batch,
          "send_batch_size: 8192\ntimeout: 10s\n", bench_traces, BATCHES, rounds, "span");
    bench("batch: merge + split at 1000 spans", &pl_processor_batch,
          "send_batch_size: 1000\nsend_batch_max_size: 1000\ntimeout: 10s\n", bench_traces, BATCHES,
          rounds, "span");
    bench("batch: 1 batch per send (no copy)", &pl_processor_batch,
          "send_batch_size: 100\ntimeout: 10s\n", bench_traces, BATCHES, rounds, "span");
    bench("batch: merge 20 x 1000 samples, re-indexed dictionary", &pl_processor_batch,
          "send_batch_size: 100000\ntimeout: 10s\n", bench_profiles, PROFILE_BATCHES, rounds,
          "sample");
    bench("batch: split profiles at 3000 samples", &pl_processor_batch,
          "send_batch_size: 3000\nsend_batch_max_size: 3000\ntimeout: 10s\n", bench_profiles,
          PROFILE_BATCHES, rounds, "sample");
    return 0;
}
