import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Api, type Obj } from './helpers/http.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';
import { until } from './helpers/wait.js';

// The root-ca-cert-publisher: kube-root-ca.crt in every namespace, with the cluster CA (the --tls CA, or one made and
// kept under --data), put back when deleted or changed.

const DESCRIPTION =
  'Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.';

const rootCa = (api: Api, ns: string) =>
  until(async () => {
    const reply = await api.request<Obj>(`/api/v1/namespaces/${ns}/configmaps/kube-root-ca.crt`);
    return reply.status === 200 && reply.body;
  }, `kube-root-ca.crt in ${ns}`);

const caOf = (cm: Obj): string => (cm.data as Record<string, string>)['ca.crt']!;

describe('kube-root-ca.crt', () => {
  let server: SimServer;
  let api: Api;
  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
  });
  after(async () => {
    await server?.stop();
  });

  it('is in every namespace, with the cluster CA and the controller description', async () => {
    const cm = await rootCa(api, 'default');
    assert.deepEqual(cm.metadata.annotations, { 'kubernetes.io/description': DESCRIPTION });
    assert.deepEqual(Object.keys(cm.data as object), ['ca.crt']);
    const cert = new X509Certificate(caOf(cm));
    assert.equal(cert.ca, true);
    assert.equal(cert.subject, 'CN=kube-sim-ca');
    assert.ok(cert.verify(cert.publicKey), 'self-signed');
    assert.ok(Date.parse(cert.validTo) > Date.now() + 9 * 365 * 24 * 3600 * 1000, 'valid for ten years');
    for (const ns of ['kube-system', 'kube-public', 'kube-node-lease'])
      assert.equal(caOf(await rootCa(api, ns)), caOf(cm), `the same CA in ${ns}`);
    await api.namespace('fresh');
    assert.equal(caOf(await rootCa(api, 'fresh')), caOf(cm));
  });

  it('is made again when deleted and put right when changed', { skip: kubectlMissing() ?? false }, async () => {
    const ca = caOf(await rootCa(api, 'default'));
    const del = await kubectl(server.url, ['delete', 'configmap', 'kube-root-ca.crt']);
    assert.equal(del.code, 0, del.stderr);
    assert.equal(caOf(await rootCa(api, 'default')), ca);
    await api.mergePatch('/api/v1/namespaces/default/configmaps/kube-root-ca.crt', {
      metadata: { annotations: { 'kubernetes.io/description': null, mine: 'yes' } },
      data: { 'ca.crt': 'tampered', extra: 'x' },
    });
    const restored = await until(async () => {
      const cm = await api.get('/api/v1/namespaces/default/configmaps/kube-root-ca.crt');
      return caOf(cm) === ca && cm;
    }, 'the CA put back');
    assert.deepEqual(restored.data, { 'ca.crt': ca });
    assert.deepEqual(restored.metadata.annotations, { mine: 'yes', 'kubernetes.io/description': DESCRIPTION });
  });
});

describe('the cluster CA across restarts and --tls', () => {
  it('is kept under --data, and --tls serves with it afterwards', { timeout: 60_000 }, async (t) => {
    const data = mkdtempSync(join(tmpdir(), 'kube-sim-ca-'));
    t.after(() => rmSync(data, { recursive: true, force: true }));
    let server = await startServer(['--nodes', '0', '--data', data]);
    let ca: string;
    try {
      ca = caOf(await rootCa(new Api(server.url), 'default'));
      await until(() => {
        try {
          return readFileSync(join(data, 'tls', 'ca.crt'), 'utf8') === ca;
        } catch {
          return false;
        }
      }, 'the CA written under --data');
    } finally {
      await server.stop();
    }
    server = await startServer(['--nodes', '0', '--data', data, '--tls']);
    try {
      const kubeconfig = readFileSync(join(data, 'tls', 'kubeconfig'), 'utf8');
      const caData = /certificate-authority-data: (\S+)/.exec(kubeconfig)![1]!;
      assert.equal(Buffer.from(caData, 'base64').toString('utf8'), ca, '--tls serves with the CA made before');
      const reply = await fetch(`${server.url}/healthz`).catch((err: Error) => err);
      assert.ok(reply instanceof Error, 'the serving certificate is not trusted without the CA');
      const cm = await new Promise<string>((resolve, reject) => {
        import('node:https').then(({ get }) =>
          get(`${server.url}/api/v1/namespaces/default/configmaps/kube-root-ca.crt`, { ca }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (c: string) => (text += c));
            res.on('end', () => resolve(text));
          }).on('error', reject),
        );
      });
      assert.equal(caOf(JSON.parse(cm) as Obj), ca);
    } finally {
      await server.stop();
    }
  });
});
