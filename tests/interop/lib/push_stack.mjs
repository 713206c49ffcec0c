// lib/push_stack.mjs: proflink between instrumented clients and a fake
// Pyroscope push API, as the correlation interop tests run it. Makes a temp
// directory (prefix), free ports and a push sink recording into `pushes`,
// and starts proflink with:
//   receivers:  otlp (http on otlpPort) and pyroscope (on pyroPort), unless
//               `receivers` gives other lines;
//   processors: the lines `processors` gives (if any);
//   exporters:  file (tmp/out.jsonl), pyroscope (to the sink), and the
//               lines `exporters` adds;
//   pipelines:  the lines `pipelines` gives;
// logs at warn and metrics on metricsPort. `receivers`, `processors`,
// `exporters` and `pipelines` are functions of {tmp, otlpPort, pyroPort,
// sinkPort, metricsPort} returning YAML lines (indented as under their
// section). Returns those values with pl, sink and stop(), which stops
// proflink, closes the sink, removes the directory and prints proflink's
// stderr when it said anything.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, pushSink, startProflink } from './common.mjs';

const otlpAndPyroscope = (p) => `  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${p.otlpPort}
  pyroscope:
    endpoint: 127.0.0.1:${p.pyroPort}`;

export async function startPushStack({
  prefix, pushes, receivers = otlpAndPyroscope, processors = null, exporters = () => '',
  pipelines, waitPorts = true,
}) {
  const [otlpPort, pyroPort, sinkPort, metricsPort] =
    await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const p = { tmp, otlpPort, pyroPort, sinkPort, metricsPort };
  const sink = await pushSink(sinkPort, pushes);
  const extra = exporters(p);
  const pl = await startProflink(`
receivers:
${receivers(p)}
${processors ? `processors:\n${processors(p)}\n` : ''}exporters:
  file:
    path: ${path.join(tmp, 'out.jsonl')}
  pyroscope:
    endpoint: http://127.0.0.1:${sinkPort}
${extra ? extra + '\n' : ''}service:
  telemetry:
    logs: { level: warn }
    metrics: { address: 127.0.0.1:${metricsPort} }
  pipelines:
${pipelines(p)}
`, { dir: tmp, ports: waitPorts ? [otlpPort, pyroPort] : [] });
  const stop = async () => {
    await pl?.stop(5000);
    sink?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
    if (pl?.log.trim()) console.log('proflink stderr:\n' + pl.log);
  };
  return { ...p, pl, sink, stop };
}
