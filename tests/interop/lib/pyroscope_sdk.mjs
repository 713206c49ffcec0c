// lib/pyroscope_sdk.mjs: what the Pyroscope Node.js SDK tests do with it.
//   labelledSpans({tracer, provider, Pyroscope, name, burn, count}): `count`
//   spans named `${name}/${i}`, each running burn() inside
//   Pyroscope.wrapWithLabels({span_id}) as span-profile integrations do;
//   then the SDK stops (its last upload) and the provider flushes and shuts
//   down. Resolves with the spans' ids, in order.
export async function labelledSpans({ tracer, provider, Pyroscope, name, burn, count = 3 }) {
  const spans = [];
  for (let i = 0; i < count; i++) {
    const span = tracer.startSpan(`${name}/${i}`);
    spans.push(span.spanContext().spanId);
    Pyroscope.wrapWithLabels({ span_id: span.spanContext().spanId }, burn);
    span.end();
    await new Promise((r) => setTimeout(r, 20));
  }
  await Pyroscope.stop();
  await provider.forceFlush();
  await provider.shutdown();
  return spans;
}
