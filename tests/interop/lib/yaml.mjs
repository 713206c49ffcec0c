// lib/yaml.mjs: config sections the interop tests share.
//   profilesToFile(tmp, metricsPort, {receiver, logLevel}): the exporters and
//   service sections of a profiles pipeline from `receiver` (pprof_scrape)
//   to the file exporter (tmp/out.jsonl), with metrics on metricsPort.
import path from 'node:path';

export function profilesToFile(tmp, metricsPort, { receiver = 'pprof_scrape', logLevel = 'warn' } = {}) {
  return `exporters:
  file:
    path: ${path.join(tmp, 'out.jsonl')}
service:
  telemetry:
    logs: { level: ${logLevel} }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
    profiles: { receivers: [${receiver}], exporters: [file] }`;
}
