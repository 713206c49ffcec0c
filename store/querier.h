/*
 * querier.h: the Grafana Pyroscope data-source API of the embedded store.
 *
 * Grafana's Pyroscope data source, Profiles Drilldown and Pyroscope's own
 * clients read profiles through `querier.v1.QuerierService`, a Connect
 * unary RPC service (POST, binary `application/proto` or protojson
 * `application/json` bodies), and through the legacy `GET /pyroscope/render`
 * (flamebearer JSON). The store's API listener serves both from the same
 * read-only SQLite connection the JSON API uses, so one URL serves the web
 * view, the JSON API and Grafana.
 *
 * What a sample's labels are (Pyroscope's names):
 *   service_name        the service the samples were stored under
 *   __profile_type__    name:sample_type:sample_unit:period_type:period_unit,
 *                       built from what the store recorded per type
 *   __name__, __type__, __unit__, __period_type__, __period_unit__
 *   the sample's labels pprof labels, SDK tags, resource attributes (a
 *                       services row per tenant, service and label set)
 *   span_name           the name of the span the sample is linked to
 *   service_namespace   the linked span's resource `service.namespace`
 *   any other name      the linked span's attribute of that name (the
 *                       correlation's span_attributes, http.route, ...)
 * A sample without a linked span has "" for span labels, as a Prometheus
 * selector sees a missing label.
 */
#ifndef PL_STORE_QUERIER_H
#define PL_STORE_QUERIER_H

#include <stdbool.h>

#include "core/status.h"
#include "store/sqlite_store.h"

struct pl_http_request;
struct pl_http_response;

/* True for the paths this API answers (`/querier.v1.QuerierService/...`,
 * `/pyroscope/...`). */
bool pl_store_querier_owns(const char *path);

/* Answers one request on an owned path. `store` is the API's read-only
 * connection, or NULL when it could not be opened (`open_err` says why:
 * the answer is `unavailable`). `tenant` is the request's X-Scope-OrgID,
 * NULL without one: the answer holds only the profiles stored under that
 * tenant (NULL: those stored without one). Borrowed; runs on the API's
 * thread. */
void pl_store_querier_handle(pl_store *store, const pl_err *open_err, const char *tenant,
                             struct pl_http_request *req, struct pl_http_response *res);

#endif
