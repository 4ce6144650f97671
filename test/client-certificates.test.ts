import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { startServer } from './helpers/server.js';

// x509 client certificate authentication on `sim serve --tls --auth`, as kube-apiserver's: a certificate the cluster
// CA signed for client auth is the user of its CN, in the groups of its Os; any other certificate is no user.

const OPENSSL = '/usr/bin/openssl';

/** A key and a certificate for CN/Os, signed by `ca` (its cert and key files) with the given extended key usage. */
function clientCertificate(dir: string, name: string, subject: string, ca: { cert: string; key: string }, eku: string) {
  const key = join(dir, `${name}.key`);
  const csr = join(dir, `${name}.csr`);
  const cert = join(dir, `${name}.crt`);
  const ext = join(dir, `${name}.ext`);
  writeFileSync(ext, `extendedKeyUsage=${eku}\nkeyUsage=critical,digitalSignature\n`);
  execFileSync(OPENSSL, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', key]);
  execFileSync(OPENSSL, ['req', '-new', '-key', key, '-subj', subject, '-out', csr]);
  execFileSync(
    OPENSSL,
    [
      'x509',
      '-req',
      '-in',
      csr,
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-CAcreateserial',
      '-days',
      '1',
      '-extfile',
      ext,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  return { key, cert };
}

/** The kubeconfig sim serve wrote, with a client certificate and key instead of the admin token. */
function kubeconfigWith(base: string, file: string, credentials: { cert: string; key: string }): void {
  const config = readFileSync(base, 'utf8').replace(
    /^ {4}token: .*$/m,
    `    client-certificate-data: ${readFileSync(credentials.cert).toString('base64')}\n    client-key-data: ${readFileSync(credentials.key).toString('base64')}`,
  );
  assert.match(config, /client-key-data/);
  writeFileSync(file, config, { mode: 0o600 });
}

test('--tls --auth: a client certificate from the cluster CA authenticates as its CN, in its O groups', {
  timeout: 60_000,
}, async (t) => {
  if (skipWithoutKubectl(t)) return;
  if (!existsSync(OPENSSL)) return t.skip(`openssl not installed (${OPENSSL}): no client certificates to make`);
  const data = mkdtempSync(join(tmpdir(), 'kube-sim-x509-'));
  t.after(() => rmSync(data, { recursive: true, force: true }));
  const server = await startServer(['--tls', '--auth', '--data', data, '--nodes', '0']);
  t.after(() => server.stop());
  const ca = { cert: join(data, 'tls', 'ca.crt'), key: join(data, 'tls', 'ca.key') };
  const base = join(data, 'tls', 'kubeconfig');
  const whoami = async (credentials: { cert: string; key: string }, name: string) => {
    const file = join(data, `${name}.kubeconfig`);
    kubeconfigWith(base, file, credentials);
    return kubectl(undefined, ['auth', 'whoami', '-o', 'jsonpath={.status.userInfo}'], { env: { KUBECONFIG: file } });
  };

  const jane = clientCertificate(data, 'jane', '/O=dev/O=qa/CN=jane', ca, 'clientAuth');
  const me = await whoami(jane, 'jane');
  assert.equal(me.code, 0, me.stderr);
  assert.deepEqual(JSON.parse(me.stdout), { groups: ['dev', 'qa', 'system:authenticated'], username: 'jane' });

  // RBAC applies to her as to any user: nothing until a binding grants it.
  const file = join(data, 'jane.kubeconfig');
  const denied = await kubectl(undefined, ['get', 'pods'], { env: { KUBECONFIG: file } });
  assert.notEqual(denied.code, 0);
  assert.match(
    denied.stderr,
    /pods is forbidden: User "jane" cannot list resource "pods" in API group "" in the namespace "default"/,
  );
  const bind = await kubectl(undefined, ['create', 'rolebinding', 'jane-view', '--clusterrole=view', '--group=qa'], {
    env: { KUBECONFIG: base },
  });
  assert.equal(bind.code, 0, bind.stderr);
  const allowed = await kubectl(undefined, ['get', 'pods'], { env: { KUBECONFIG: file } });
  assert.equal(allowed.code, 0, allowed.stderr);

  // Not for client authentication, or not signed by the cluster CA: no user, so a 401.
  const server2 = clientCertificate(data, 'serving', '/CN=impostor', ca, 'serverAuth');
  const wrongUsage = await whoami(server2, 'serving');
  assert.notEqual(wrongUsage.code, 0);
  assert.match(wrongUsage.stderr, /You must be logged in to the server \(Unauthorized\)/);
  const otherCa = { cert: join(data, 'other-ca.crt'), key: join(data, 'other-ca.key') };
  execFileSync(
    OPENSSL,
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=other-ca',
      '-days',
      '1',
      '-keyout',
      otherCa.key,
      '-out',
      otherCa.cert,
    ],
    { stdio: 'ignore' },
  );
  const stranger = clientCertificate(data, 'stranger', '/O=system:masters/CN=admin', otherCa, 'clientAuth');
  const unknownCa = await whoami(stranger, 'stranger');
  assert.notEqual(unknownCa.code, 0);
  assert.match(unknownCa.stderr, /You must be logged in to the server \(Unauthorized\)/);
});
