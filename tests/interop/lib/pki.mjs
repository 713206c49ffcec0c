// lib/pki.mjs: a throw-away PKI for the TLS tests, made with the openssl
// command at run time (nothing secret is checked in):
//   ca.pem / ca.key          the test CA
//   server.pem / server.key  localhost + 127.0.0.1, signed by the CA
//   client.pem / client.key  CN=good-client, signed by the CA (mutual TLS)
//   expired.pem / .key       CN=old-client, signed by the CA, expired in 2020
//   other-ca.pem             an unrelated CA
//   other.pem / other.key    CN=stranger, signed by the unrelated CA
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

const ssl = (dir, args) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function selfSigned(dir, name, cn) {
  ssl(dir, ['req', '-x509', ...EC, '-keyout', `${name}.key`, '-out', `${name}.pem`, '-days', '3',
    '-subj', `/CN=${cn}`, '-addext', 'basicConstraints=critical,CA:TRUE',
    '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
}

function signed(dir, name, cn, ca, ext) {
  ssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
  fs.writeFileSync(path.join(dir, `${name}.ext`), ext);
  ssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`,
    '-CAcreateserial', '-out', `${name}.pem`, '-days', '3', '-extfile', `${name}.ext`]);
}

export function makePki() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'proflink-pki-'));
  selfSigned(dir, 'ca', 'proflink test CA');
  selfSigned(dir, 'other-ca', 'unrelated CA');
  signed(dir, 'server', 'localhost', 'ca',
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  signed(dir, 'client', 'good-client', 'ca', 'extendedKeyUsage=clientAuth\n');
  signed(dir, 'other', 'stranger', 'other-ca', 'extendedKeyUsage=clientAuth\n');
  // An expired certificate needs explicit dates, which only `openssl ca` sets.
  ssl(dir, ['req', ...EC, '-keyout', 'expired.key', '-out', 'expired.csr', '-subj', '/CN=old-client']);
  fs.writeFileSync(path.join(dir, 'index.txt'), '');
  fs.writeFileSync(path.join(dir, 'serial'), '01\n');
  fs.writeFileSync(path.join(dir, 'ca.cnf'), [
    '[ca]', 'default_ca = d', '[d]', 'database = index.txt', 'new_certs_dir = .', 'serial = serial',
    'default_md = sha256', 'policy = p', 'x509_extensions = e', '[p]', 'commonName = supplied',
    '[e]', 'extendedKeyUsage = clientAuth', ''].join('\n'));
  ssl(dir, ['ca', '-batch', '-config', 'ca.cnf', '-cert', 'ca.pem', '-keyfile', 'ca.key',
    '-in', 'expired.csr', '-out', 'expired.pem', '-startdate', '20200101000000Z',
    '-enddate', '20200102000000Z']);
  const f = (n) => path.join(dir, n);
  const read = (n) => fs.readFileSync(f(n));
  return { dir, f, read, cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
