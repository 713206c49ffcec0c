// lib/gofixture.mjs: the Go programs of tests/interop/fixtures, built here
// with the go command (GOPATH mode, caches under `tmp`) and started. Each
// prints the port it serves on as its first line. Resolves {go, port}: the
// child process and that port.
import { execFileSync, spawn } from 'node:child_process';
import path from 'node:path';
import { FIXTURES } from './common.mjs';

export async function runGoFixture(name, tmp) {
  const bin = path.join(tmp, name);
  execFileSync('go', ['build', '-o', bin, path.join(FIXTURES, name, 'main.go')], {
    env: { ...process.env, GOCACHE: path.join(tmp, 'gocache'), GOPATH: path.join(tmp, 'gopath'), GOFLAGS: '-mod=mod', GO111MODULE: 'off' },
    stdio: 'inherit',
  });
  const go = spawn(bin, [], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    go.stdout.once('data', (d) => resolve(Number(String(d).trim())));
    go.once('exit', (c) => reject(new Error(`${name} exited ${c}`)));
  });
  return { go, port };
}
