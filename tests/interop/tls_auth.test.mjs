// tls_auth.test.mjs: proflink as a gateway, with TLS, mutual TLS and
// authentication extensions on its listeners, driven by real clients.
//
// A throw-away PKI is generated with openssl (lib/pki.mjs). proflink runs:
//   otlp/tls   gRPC over TLS (no auth) and OTLP/HTTP over TLS with a bearer
//              token read from a file;
//   otlp/mtls  gRPC and HTTP requiring a client certificate from the CA;
//   pyroscope/token  HTTPS + bearertokenauth;  pyroscope/basic  HTTPS +
//              basicauth (an htpasswd file, SHA-512-crypt);
// traces go to a fake OTLP/HTTP backend, profiles to a fake Pyroscope push
// API. Checks:
//   - the OTel JS gRPC exporter with the CA as root certificate, and the
//     OTel JS HTTP exporter with the CA, get their spans through; with a
//     client certificate too on the mutual-TLS listener;
//   - @pyroscope/nodejs with authToken, and with basicAuthUser/Password,
//     over HTTPS (NODE_EXTRA_CA_CERTS) gets its profiles through;
//   - curl without a client certificate, with one from another CA, with an
//     expired one: the handshake is refused; with a wrong token: 401, with
//     the right one 200; gRPC with a wrong token: UNAUTHENTICATED; a plain
//     HTTP client on the TLS port gets nothing; nothing refused reaches the
//     backend;
//   - the store's query API serves over TLS, telemetry over mutual TLS;
//   - the token file is re-read when it changes; SIGHUP reloads certificates.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import grpc from '@grpc/grpc-js';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as HttpExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { pushSink, startProflink, tracerProvider, until } from './lib/common.mjs';
import { freePorts, httpBackend } from './lib/proflink.mjs';
import { makePki } from './lib/pki.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));

let pki, pc, backend, sink, uploads = [];
let gTls, hTls, gM, hM, pTok, pBasic, apiPort, telPort;

function curl(args) {
  return new Promise((resolve) => {
    execFile('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', '--max-time', '10', ...args],
      (err, stdout) => resolve({ code: err ? err.code : 0, status: stdout.trim() }));
  });
}

async function sendSpans(exporter, name) {
  const provider = tracerProvider(`tls-${name}`, exporter);
  const span = provider.getTracer('t').startSpan(name);
  const id = span.spanContext().spanId;
  span.end();
  await provider.forceFlush();
  await provider.shutdown();
  return id;
}

const arrived = (id) => until(() => backend.counts.has(id), 10000);

before(async () => {
  pki = makePki();
  [gTls, hTls, gM, hM, pTok, pBasic, apiPort, telPort] = await freePorts(8);
  backend = await httpBackend();
  const [sinkPort] = await freePorts(1);
  sink = await pushSink(sinkPort, uploads);
  fs.writeFileSync(pki.f('token'), 'first-token\n');
  const bcrypt = await new Promise((resolve, reject) => execFile('openssl',
    ['passwd', '-6', 'hunter2'], (e, out) => (e ? reject(e) : resolve(out.trim()))));
  fs.writeFileSync(pki.f('htpasswd'), `# users\nbob:${bcrypt}\n`);
  const tls = `cert_file: ${pki.f('server.pem')}, key_file: ${pki.f('server.key')}`;
  const mtls = `${tls}, client_ca_file: ${pki.f('ca.pem')}`;
  pc = await startProflink(`
extensions:
  bearertokenauth/in: { filename: ${pki.f('token')} }
  basicauth/in: { htpasswd: { file: ${pki.f('htpasswd')} } }
receivers:
  otlp/tls:
    protocols:
      grpc: { endpoint: "127.0.0.1:${gTls}", tls: { ${tls} } }
      http: { endpoint: "127.0.0.1:${hTls}", tls: { ${tls} }, auth: { authenticator: bearertokenauth/in } }
  otlp/mtls:
    protocols:
      grpc: { endpoint: "127.0.0.1:${gM}", tls: { ${mtls} }, auth: { authenticator: bearertokenauth/in } }
      http: { endpoint: "127.0.0.1:${hM}", tls: { ${mtls} } }
  pyroscope/token: { endpoint: "127.0.0.1:${pTok}", tls: { ${tls} }, auth: { authenticator: bearertokenauth/in } }
  pyroscope/basic: { endpoint: "127.0.0.1:${pBasic}", tls: { ${tls} }, auth: { authenticator: basicauth/in } }
exporters:
  otlphttp: { endpoint: "http://127.0.0.1:${backend.port}", compression: none, retry_on_failure: { enabled: false } }
  pyroscope: { endpoint: "http://127.0.0.1:${sinkPort}" }
  sqlite: { path: ${pki.f('store.db')}, api: { endpoint: "127.0.0.1:${apiPort}", tls: { ${tls} } } }
service:
  extensions: [bearertokenauth/in, basicauth/in]
  telemetry: { metrics: { address: "127.0.0.1:${telPort}", tls: { ${mtls} } } }
  pipelines:
    traces: { receivers: [otlp/tls, otlp/mtls], exporters: [otlphttp, sqlite] }
    profiles: { receivers: [pyroscope/token, pyroscope/basic], exporters: [pyroscope] }
`, { ports: [gTls, hTls, gM, hM, pTok, pBasic] });
});

after(async () => {
  if (pc) await pc.cleanup();
  if (backend) await backend.stop();
  if (sink) await new Promise((r) => sink.close(r));
  if (pki) pki.cleanup();
});

test('OTel JS gRPC exporter over TLS with the CA as root certificate', async () => {
  const exporter = new GrpcExporter({
    url: `https://localhost:${gTls}`,
    credentials: grpc.credentials.createSsl(pki.read('ca.pem')),
  });
  const id = await sendSpans(exporter, 'grpc-tls');
  assert.ok(await arrived(id), `span over gRPC+TLS did not arrive: ${pc.log}`);
});

test('OTel JS HTTP exporter over TLS with the CA and the bearer token', async () => {
  const exporter = new HttpExporter({
    url: `https://localhost:${hTls}/v1/traces`,
    headers: { Authorization: 'Bearer first-token' },
    httpAgentOptions: { ca: pki.read('ca.pem') },
  });
  const id = await sendSpans(exporter, 'http-tls');
  assert.ok(await arrived(id), `span over HTTPS did not arrive: ${pc.log}`);
});

test('mutual TLS: gRPC and HTTP exporters with a client certificate', async () => {
  const meta = new grpc.Metadata();
  meta.set('authorization', 'Bearer first-token');
  const g = new GrpcExporter({
    url: `https://localhost:${gM}`,
    metadata: meta,
    credentials: grpc.credentials.createSsl(pki.read('ca.pem'), pki.read('client.key'), pki.read('client.pem')),
  });
  const id1 = await sendSpans(g, 'grpc-mtls');
  const h = new HttpExporter({
    url: `https://localhost:${hM}/v1/traces`,
    httpAgentOptions: { ca: pki.read('ca.pem'), key: pki.read('client.key'), cert: pki.read('client.pem') },
  });
  const id2 = await sendSpans(h, 'http-mtls');
  assert.ok(await arrived(id1), 'gRPC span over mutual TLS did not arrive');
  assert.ok(await arrived(id2), 'HTTP span over mutual TLS did not arrive');
});

test('curl: a client without the right certificate is refused in the handshake', async () => {
  const url = `https://localhost:${hM}/v1/traces`;
  const base = ['--cacert', pki.f('ca.pem'), '-H', 'content-type: application/json', '-d', '{}', url];
  const none = await curl(base);
  const stranger = await curl(['--cert', pki.f('other.pem'), '--key', pki.f('other.key'), ...base]);
  const expired = await curl(['--cert', pki.f('expired.pem'), '--key', pki.f('expired.key'), ...base]);
  const good = await curl(['--cert', pki.f('client.pem'), '--key', pki.f('client.key'), ...base]);
  for (const [what, r] of [['no certificate', none], ['another CA', stranger], ['expired', expired]]) {
    assert.notEqual(r.code, 0, `${what}: curl should fail`);
    assert.equal(r.status, '000', `${what}: no HTTP answer expected, got ${r.status}`);
  }
  assert.equal(good.status, '200', 'the good client certificate');
  assert.match(pc.log, /TLS handshake refused/);
  // a client that does not trust proflink's CA refuses it too
  const untrusting = await curl(['-H', 'content-type: application/json', '-d', '{}', `https://localhost:${hTls}/v1/traces`]);
  assert.equal(untrusting.code, 60, 'curl without the CA: certificate problem (60)');
});

test('curl: wrong or missing token is 401 and nothing reaches the pipeline; the right one is 200', async () => {
  const before = backend.requests.length;
  const url = `https://localhost:${hTls}/v1/traces`;
  const base = ['--cacert', pki.f('ca.pem'), '-H', 'content-type: application/json',
    '-d', '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"x"}]}]}]}', url];
  assert.equal((await curl(base)).status, '401');
  assert.equal((await curl(['-H', 'Authorization: Bearer wrong', ...base])).status, '401');
  assert.equal((await curl(['-H', 'Authorization: Basic Zm9vOmJhcg==', ...base])).status, '401');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(backend.requests.length, before, 'a refused request reached the backend');
  assert.equal((await curl(['-H', 'Authorization: Bearer first-token', ...base])).status, '200');
  // plain HTTP on a TLS port gets no HTTP answer
  const plain = await curl(['-d', '{}', `http://127.0.0.1:${hTls}/v1/traces`]);
  assert.notEqual(plain.status, '200');
});

test('gRPC with a wrong token: UNAUTHENTICATED, and nothing arrives', async () => {
  const before = backend.requests.length;
  const call = (token) => new Promise((resolve) => {
    const meta = new grpc.Metadata();
    if (token) meta.set('authorization', `Bearer ${token}`);
    const client = new grpc.Client(`localhost:${gM}`,
      grpc.credentials.createSsl(pki.read('ca.pem'), pki.read('client.key'), pki.read('client.pem')));
    // an empty ExportTraceServiceRequest is a valid call
    client.makeUnaryRequest('/opentelemetry.proto.collector.trace.v1.TraceService/Export',
      (x) => x, (x) => x, Buffer.alloc(0), meta, (e) => { client.close(); resolve(e ? e.code : 0); });
  });
  assert.equal(await call('nope'), grpc.status.UNAUTHENTICATED);
  assert.equal(await call(null), grpc.status.UNAUTHENTICATED);
  assert.equal(await call('first-token'), grpc.status.OK);
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(backend.requests.length, before);
});

// The Pyroscope SDK sends with fetch(), which trusts NODE_EXTRA_CA_CERTS
// only when set at process start: it runs in a child process.
function runPyroscopeSdk(options) {
  const code = `
    import Pyroscope from '@pyroscope/nodejs';
    Pyroscope.init(${JSON.stringify(options)});
    Pyroscope.start();
    const end = Date.now() + 2500;
    let x = 0;
    while (Date.now() < end) x += Math.sqrt(x + 1);
    await Pyroscope.stop();
  `;
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', code], {
      cwd: here, env: { ...process.env, NODE_EXTRA_CA_CERTS: pki.f('ca.pem') }, stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('exit', (c) => resolve({ code: c, out }));
  });
}

test('@pyroscope/nodejs over HTTPS with authToken, and with basic auth', async () => {
  const r1 = await runPyroscopeSdk({
    serverAddress: `https://localhost:${pTok}`, appName: 'tls-token-app', authToken: 'first-token',
    flushIntervalMs: 1000,
  });
  assert.equal(r1.code, 0, r1.out);
  const r2 = await runPyroscopeSdk({
    serverAddress: `https://localhost:${pBasic}`, appName: 'tls-basic-app',
    basicAuthUser: 'bob', basicAuthPassword: 'hunter2', flushIntervalMs: 1000,
  });
  assert.equal(r2.code, 0, r2.out);
  const names = () => uploads.map((u) => u.body.toString('latin1'));
  assert.ok(await until(() => names().some((b) => b.includes('tls-token-app'))),
    `no profile from the authToken client: ${pc.log}`);
  assert.ok(await until(() => names().some((b) => b.includes('tls-basic-app'))),
    `no profile from the basic-auth client: ${pc.log}`);
  // a wrong password is refused
  const auth = Buffer.from('bob:wrong').toString('base64');
  const bad = await curl(['--cacert', pki.f('ca.pem'), '-H', `Authorization: Basic ${auth}`,
    '--data-binary', 'foo;bar 1', `https://localhost:${pBasic}/ingest?name=x&format=folded`]);
  assert.equal(bad.status, '401', `curl exit ${bad.code}; ${pc.log.slice(-3000)}`);
  const good = Buffer.from('bob:hunter2').toString('base64');
  const ok = await curl(['--cacert', pki.f('ca.pem'), '-H', `Authorization: Basic ${good}`,
    '--data-binary', 'foo;bar 1', `https://localhost:${pBasic}/ingest?name=x&format=folded`]);
  assert.equal(ok.status, '200');
});

test('the token file is re-read when it changes', async () => {
  const url = `https://localhost:${hTls}/v1/traces`;
  const base = ['--cacert', pki.f('ca.pem'), '-H', 'content-type: application/json', '-d', '{}', url];
  await new Promise((r) => setTimeout(r, 1100)); // a different mtime, and past the 1 s check
  fs.writeFileSync(pki.f('token'), 'second-token\n');
  await new Promise((r) => setTimeout(r, 1100));
  assert.equal((await curl(['-H', 'Authorization: Bearer second-token', ...base])).status, '200');
  assert.equal((await curl(['-H', 'Authorization: Bearer first-token', ...base])).status, '401');
});

test('telemetry (/health, /metrics) over mutual TLS', async () => {
  const url = `https://localhost:${telPort}/health`;
  const ok = await curl(['--cacert', pki.f('ca.pem'), '--cert', pki.f('client.pem'), '--key', pki.f('client.key'), url]);
  assert.equal(ok.status, '200');
  const noCert = await curl(['--cacert', pki.f('ca.pem'), url]);
  assert.equal(noCert.status, '000');
});

test("the store's query API over TLS", async () => {
  const ok = await curl(['--cacert', pki.f('ca.pem'), `https://localhost:${apiPort}/api/traces?since=1h`]);
  assert.equal(ok.status, '200');
  const plain = await curl([`http://127.0.0.1:${apiPort}/api/traces`]);
  assert.notEqual(plain.status, '200');
});

test('SIGHUP re-reads the certificates', async () => {
  pc.child.kill('SIGHUP');
  assert.ok(await until(() => /TLS certificate reloaded/.test(pc.log), 5000), pc.log);
  assert.ok(await until(async () => (await curl(['--cacert', pki.f('ca.pem'), '-H', 'Authorization: Bearer second-token',
    '-H', 'content-type: application/json', '-d', '{}', `https://localhost:${hTls}/v1/traces`])).status === '200', 10000));
});
