// pprof_scrape_tls.test.mjs: pprof_scrape targets over https. A node https
// server with a certificate made here by openssl serves a goroutine profile.
// The target whose `tls.ca_file` names that certificate is scraped; the
// same server without it (the system CAs do not know the certificate) is
// refused during the handshake, so none of its requests arrive and none of
// its profiles are sent; `insecure_skip_verify` scrapes it anyway.
//
// Run: cd tests/interop && PROFLINK_BIN=../../build-<you>/proflink node --test pprof_scrape_tls.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';

import {
  Profile, StringTable, ValueType, Sample, Location, Line, Function as PFunction,
} from 'pprof-format';
import { freePort, readJsonLines, startProflink, until } from './lib/common.mjs';
import { profilesToFile } from './lib/yaml.mjs';

let pl, tmp, server;
const seen = []; // x-target header of every request that arrived

function goroutineProfile() {
  const st = new StringTable();
  const fn = new PFunction({ id: 1, name: st.dedup('main.main'), filename: st.dedup('main.go') });
  return zlib.gzipSync(Buffer.from(new Profile({
    stringTable: st,
    sampleType: [new ValueType({ type: st.dedup('goroutine'), unit: st.dedup('count') })],
    periodType: new ValueType({ type: st.dedup('goroutine'), unit: st.dedup('count') }),
    period: 1,
    function: [fn],
    location: [new Location({ id: 1, line: [new Line({ functionId: 1, line: 3 })] })],
    sample: [new Sample({ locationId: [1], value: [4] })],
  }).encode()));
}

before(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-scrape-tls-'));
  const key = path.join(tmp, 'key.pem'), cert = path.join(tmp, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert,
    '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  const [port, metricsPort] = await Promise.all([freePort(), freePort()]);
  server = https.createServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) }, (req, res) => {
    seen.push(req.headers['x-target']);
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    res.end(goroutineProfile());
  });
  await new Promise((r) => server.listen(port, '127.0.0.1', r));
  pl = await startProflink(`
receivers:
  pprof_scrape:
    interval: 1s
    profiles: [goroutine]
    targets:
      - endpoint: https://127.0.0.1:${port}
        labels: { service.name: tls-ca }
        headers: { X-Target: ca }
        tls: { ca_file: ${cert} }
      - endpoint: https://127.0.0.1:${port}
        labels: { service.name: tls-unknown }
        headers: { X-Target: unknown }
      - endpoint: https://127.0.0.1:${port}
        labels: { service.name: tls-skip }
        headers: { X-Target: skip }
        tls: { insecure_skip_verify: true }
${profilesToFile(tmp, metricsPort, { logLevel: 'error' })}
`, { dir: tmp });
});

after(async () => {
  await pl?.stop(5000);
  server?.close();
  server?.closeAllConnections?.();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

const services = () => readJsonLines(path.join(tmp, 'out.jsonl')).map((l) =>
  l.resourceProfiles[0].resource.attributes.find((a) => a.key === 'service.name').value.stringValue);

test('https targets: verified with tls.ca_file, refused when unknown, skip_verify on request', { timeout: 30000 }, async () => {
  assert.ok(await until(() => services().filter((s) => s === 'tls-ca').length >= 3 &&
    services().includes('tls-skip'), 15000), `services: ${services()} (log: ${pl.log})`);
  assert.ok(!services().includes('tls-unknown'), 'nothing from the unverifiable target');
  assert.ok(seen.includes('ca') && seen.includes('skip'));
  assert.ok(!seen.includes('unknown'), 'its requests never got past the handshake');
});
