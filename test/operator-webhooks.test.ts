import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { Replica } from './helpers/operator-replica.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';

// Issue 16: the example Operator's admission webhooks, as an envtest user would test theirs: `sim serve` maps the
// webhook Service to the Operator running on the host (--map-service), the Operator serves HTTPS with a certificate
// it made for the Service's name and registers its webhook configurations; kubectl then meets the mutating webhook
// (an untagged image is pinned) and the validating one (scripts and foreign registries are refused).

const missing = kubectlMissing();
const CRD_FILE = join(ROOT, 'fixtures/operator/website-crd.yaml');

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

function website(name: string, spec: string): string {
  return `apiVersion: example.kube-sim.dev/v1\nkind: Website\nmetadata: {name: ${name}}\nspec: ${spec}\n`;
}

describe('the example Operator’s admission webhooks, against sim serve as envtest would run them', {
  skip: missing,
}, () => {
  let server: SimServer;
  let dir: string;
  let operator: Replica;

  const kubectl = () => kubectlAgainst(server, () => `--- operator:\n${operator?.log ?? ''}`);

  before(async () => {
    const port = await freePort();
    server = await startServer(['--nodes', '0', '--map-service', `default/website-webhook=127.0.0.1:${port}`]);
    dir = mkdtempSync(join(tmpdir(), 'kube-sim-operator-webhooks-'));
    const kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      execFileSync(process.execPath, [join(ROOT, 'bin/sim.js'), 'kubeconfig', '--server', server.url], {
        encoding: 'utf8',
      }),
    );
    await kubectl().ok(['apply', '-f', CRD_FILE]);
    await kubectl().ok(['wait', '--for=condition=Established', 'crd/websites.example.kube-sim.dev', '--timeout=30s']);
    operator = new Replica('webhooks', kubeconfig, [
      '--webhook-port',
      String(port),
      '--webhook-service',
      'default/website-webhook',
    ]);
    await operator.until(/registered the admission webhooks/);
  });
  after(async () => {
    await operator?.kill('SIGKILL');
    await server?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('registers its webhooks for the Service, with its own CA', async () => {
    const config = JSON.parse(
      await kubectl().ok(['get', 'validatingwebhookconfiguration', 'website-operator', '-o', 'json']),
    ) as { webhooks: Array<{ clientConfig: { service: unknown; caBundle: string } }> };
    assert.deepEqual(config.webhooks[0]!.clientConfig.service, {
      namespace: 'default',
      name: 'website-webhook',
      path: '/validate',
      port: 443,
    });
    assert.match(Buffer.from(config.webhooks[0]!.clientConfig.caBundle, 'base64').toString(), /BEGIN CERTIFICATE/);
    assert.match(operator.log, /certificate for website-webhook\.default\.svc/);
  });

  it('pins an untagged image through the mutating webhook', async () => {
    await kubectl().ok(['apply', '-f', '-'], website('pinned', '{content: hi, image: nginx}'));
    const image = await kubectl().ok(['get', 'website', 'pinned', '-o', 'jsonpath={.spec.image}']);
    assert.equal(image, 'nginx:1.27');
    await kubectl().ok(['apply', '-f', '-'], website('tagged', '{content: hi, image: "nginx:1.26"}'));
    assert.equal(await kubectl().ok(['get', 'website', 'tagged', '-o', 'jsonpath={.spec.image}']), 'nginx:1.26');
  });

  it('refuses a page with a script and an image from another registry, in kube-apiserver’s words', async () => {
    const script = await kubectl().run(['apply', '-f', '-'], website('scripted', '{content: "<script>x()</script>"}'));
    assert.notEqual(script.code, 0);
    assert.equal(
      script.stderr.trim(),
      'Error from server (Forbidden): error when creating "STDIN": admission webhook "validate.websites.example.kube-sim.dev" denied the request: spec.content: a Website may not run scripts (<script> found)',
    );
    const foreign = await kubectl().run(['apply', '-f', '-'], website('foreign', '{content: hi, image: quay.io/x/y}'));
    assert.notEqual(foreign.code, 0);
    assert.match(
      foreign.stderr,
      /denied the request: spec\.image: quay\.io\/x\/y:1\.27 is not from an allowed registry \(docker\.io\/library\/, registry\.example\.com\/\)/,
    );
    const scaled = await kubectl().run([
      'patch',
      'website',
      'pinned',
      '--type=merge',
      '-p',
      '{"spec":{"content":"<SCRIPT>"}}',
    ]);
    assert.notEqual(scaled.code, 0, 'updates are validated too');
    assert.equal((await kubectl().run(['get', 'website', 'scripted'])).code, 1, 'nothing refused was stored');
  });
});
