import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubeconfigYaml, readKubeconfig } from '../src/client/kubeconfig.js';

// readKubeconfig takes what kubectl takes from a kubeconfig's current context (sim replay --kubeconfig).

const CA = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';

function dir(t: { after(fn: () => void): void }): string {
  const d = mkdtempSync(join(tmpdir(), 'kube-sim-kubeconfig-'));
  t.after(() => rmSync(d, { recursive: true, force: true }));
  return d;
}

test('what sim serve writes reads back as it was given', (t) => {
  const file = join(dir(t), 'kubeconfig');
  writeFileSync(file, kubeconfigYaml({ server: 'https://127.0.0.1:6443', token: 'tok', caCert: CA }));
  assert.deepEqual(readKubeconfig(file), { server: 'https://127.0.0.1:6443', token: 'tok', caCert: CA });
  writeFileSync(file, kubeconfigYaml({ server: 'https://127.0.0.1:6443', insecureSkipTlsVerify: true }));
  assert.deepEqual(readKubeconfig(file), { server: 'https://127.0.0.1:6443', insecureSkipTlsVerify: true });
});

test('the current context picks the cluster and user; tokenFile and certificate-authority are relative to the file', (t) => {
  const d = dir(t);
  writeFileSync(join(d, 'ca.crt'), CA);
  writeFileSync(join(d, 'token'), 'from-file\n');
  const file = join(d, 'config');
  writeFileSync(
    file,
    `apiVersion: v1
kind: Config
clusters:
- {name: other, cluster: {server: https://other:443}}
- {name: sim, cluster: {server: https://127.0.0.1:8443, certificate-authority: ca.crt}}
users:
- {name: other, user: {token: wrong}}
- {name: me, user: {tokenFile: token}}
contexts:
- {name: a, context: {cluster: other, user: other}}
- {name: b, context: {cluster: sim, user: me}}
current-context: b
`,
  );
  assert.deepEqual(readKubeconfig(file), { server: 'https://127.0.0.1:8443', token: 'from-file', caCert: CA });
});

test('an unusable kubeconfig is a message naming the file and what is missing', (t) => {
  const d = dir(t);
  const file = join(d, 'config');
  writeFileSync(file, 'apiVersion: v1\nkind: Config\nclusters: []\n');
  assert.throws(() => readKubeconfig(file), { message: `kubeconfig ${file}: current-context is not set` });
  writeFileSync(file, 'current-context: gone\ncontexts: []\n');
  assert.throws(() => readKubeconfig(file), { message: `kubeconfig ${file}: context "gone" does not exist` });
  writeFileSync(
    file,
    'current-context: c\ncontexts: [{name: c, context: {cluster: x}}]\nclusters: [{name: x, cluster: {}}]\n',
  );
  assert.throws(() => readKubeconfig(file), {
    message: `kubeconfig ${file}: cluster "x" of context "c" has no server`,
  });
  assert.throws(() => readKubeconfig(join(d, 'missing')), /ENOENT/);
});
