// lib/store.mjs: proflink as the store tests run it: OTLP/HTTP and Pyroscope
// receivers through the correlation processor (as collector.yaml) into the
// sqlite exporter with its API (and web view) on a free port.
//   startStore({ prefix, correlation }) -> { pl, dir, db, otlpPort, pyroPort, apiPort }
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, startProflink } from './common.mjs';

export async function startStore({ prefix = 'proflink-store-', correlation = [] } = {}) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const db = path.join(dir, 'data', 'proflink.db');
  const [otlpPort, pyroPort, apiPort, metricsPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const yaml = [
    'receivers:',
    '  otlp:',
    '    protocols:',
    `      http: { endpoint: "127.0.0.1:${otlpPort}" }`,
    '  pyroscope:',
    `    endpoint: "127.0.0.1:${pyroPort}"`,
    'processors:',
    '  correlation:',
    ...correlation.map((l) => `    ${l}`),
    '    span_attributes: [http.route]',
    'exporters:',
    '  sqlite:',
    `    path: "${db}"`,
    `    api: { endpoint: "127.0.0.1:${apiPort}" }`,
    'service:',
    '  telemetry:',
    `    metrics: { address: "127.0.0.1:${metricsPort}" }`,
    '  pipelines:',
    '    traces: { receivers: [otlp], processors: [correlation], exporters: [sqlite] }',
    '    profiles: { receivers: [pyroscope], processors: [correlation], exporters: [sqlite] }',
    '',
  ].join('\n');
  const pl = await startProflink(yaml, { dir, ports: [otlpPort, pyroPort, apiPort] });
  return { pl, dir, db, otlpPort, pyroPort, apiPort };
}
