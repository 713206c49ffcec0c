// lib/common.mjs: small helpers that the area interop tests share.
//
// Starting proflink (startProflink: temp config, wait for its ports, a handle
// with stop() and the stderr log), free ports, the binary's path and polling
// with an assertion come from lib/proflink.mjs and are re-exported here, so a
// test imports its helpers from one place. What is added here:
//   - until(cond, ms, pollMs): polls; resolves true or false (the caller
//     asserts, with its own message);
//   - waitListening(port, ms): throws when the port never accepts TCP;
//   - readJsonLines(file): the file exporter's OTLP/JSON lines, parsed;
//   - readBody(req) and request(): raw bodies of node http requests/answers;
//   - loadProtos(files): a protobufjs Root over the project's proto/ folder;
//   - exportSpans(): one SDK exporter call as a promise;
//   - burnCpuInCheckout/burnCpuInPricing: CPU work that shows up as its own
//     leaf function in a profile (the tests look for these names).
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR, canConnect, repo, sleep } from './proflink.mjs';

export {
  BIN, PROTO_DIR, repo, sleep, freePort, freePorts, canConnect, waitFor, startProflink, httpGet,
  TraceRequest, ProfilesRequest, PushRequest,
} from './proflink.mjs';

export const FIXTURES = path.join(repo, 'tests', 'interop', 'fixtures');

export async function until(cond, ms = 10000, pollMs = 50) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return true;
    await sleep(pollMs);
  }
  return false;
}

export async function waitListening(port, ms = 10000) {
  if (!(await until(() => canConnect(port), ms))) throw new Error(`port ${port} never listened`);
}

// One JSON document a line (the file exporter's `format: json`); a missing
// file reads as no lines.
export function readJsonLines(file) {
  if (!fs.existsSync(file)) return [];
  return fs.readFileSync(file, 'utf8').split('\n').filter((l) => l.trim()).map((l) => JSON.parse(l));
}

export function readBody(req) {
  return new Promise((resolve) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
  });
}

// An HTTP request on a fresh connection: resolves {status, headers, body}.
export function request(port, p, headers, body, method = 'POST') {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, method, headers, agent: false },
      (res) => {
        readBody(res).then((b) => resolve({ status: res.statusCode, headers: res.headers, body: b }));
      });
    req.on('error', reject);
    req.end(body);
  });
}

export function loadProtos(files) {
  const root = new protobuf.Root();
  root.resolvePath = (origin, target) => (path.isAbsolute(target) ? target : path.join(PROTO_DIR, target));
  root.loadSync(files);
  return root;
}

export function exportSpans(exporter, spans) {
  return new Promise((resolve) => exporter.export(spans, resolve));
}

export function burnCpuInCheckout(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x += Math.sqrt(i * x + 1);
  return x;
}

export function burnCpuInPricing(ms) {
  const end = Date.now() + ms;
  let x = 0;
  while (Date.now() < end) for (let i = 0; i < 10000; i++) x += Math.sin(i + x);
  return x;
}
