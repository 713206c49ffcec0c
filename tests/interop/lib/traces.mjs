// lib/traces.mjs: an OTLP/protobuf trace request of `n` server spans of one
// new random trace, from service `service`, each 1 ms long and starting now;
// with `routes`, span i carries http.route /route/<i % 7>. Returns the
// encoded bytes and the spans' ids (hex), in order.
import crypto from 'node:crypto';
import { TraceRequest } from './proflink.mjs';

export function randomTraceRequest(n, service, { routes = false } = {}) {
  const traceId = crypto.randomBytes(16);
  const ids = [];
  const spans = [];
  const now = BigInt(Date.now()) * 1000000n;
  for (let i = 0; i < n; i++) {
    const spanId = crypto.randomBytes(8);
    ids.push(spanId.toString('hex'));
    const span = {
      traceId, spanId, name: `op-${i}`, kind: 2,
      startTimeUnixNano: String(now), endTimeUnixNano: String(now + 1000000n),
    };
    if (routes) span.attributes = [{ key: 'http.route', value: { stringValue: `/route/${i % 7}` } }];
    spans.push(span);
  }
  const bytes = TraceRequest.encode(TraceRequest.fromObject({
    resourceSpans: [{
      resource: { attributes: [{ key: 'service.name', value: { stringValue: service } }] },
      scopeSpans: [{ spans }],
    }],
  })).finish();
  return { bytes: Buffer.from(bytes), ids };
}
