import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { startServer } from './helpers/server.js';

// The docs' "issue a certificate for a Kubernetes API client using a CertificateSigningRequest", with the real
// kubectl and openssl against `sim serve --tls --auth`: the csrsigning controller signs what kubectl certificate
// approve approved with the cluster CA, and the certificate logs its user in. Denied and failed requests get none,
// kubelet-serving requests get a serving certificate, and the csrcleaner removes requests past their time.

const OPENSSL = '/usr/bin/openssl';

test('a CSR approved with kubectl certificate approve is signed by the cluster CA, and its certificate logs in', {
  timeout: 120_000,
}, async (t) => {
  if (skipWithoutKubectl(t)) return;
  if (!existsSync(OPENSSL)) return t.skip(`openssl not installed (${OPENSSL}): no certificate requests to make`);
  const data = mkdtempSync(join(tmpdir(), 'kube-sim-csr-'));
  t.after(() => rmSync(data, { recursive: true, force: true }));
  const server = await startServer(['--tls', '--auth', '--data', data, '--nodes', '0', '--clock', 'virtual']);
  t.after(() => server.stop());
  const config = join(data, 'kubeconfig');
  copyFileSync(join(data, 'tls', 'kubeconfig'), config);
  const k = async (args: string[], input?: string) =>
    kubectl(undefined, args, { env: { KUBECONFIG: config }, ...(input === undefined ? {} : { input }) });
  const ok = async (args: string[], input?: string) => {
    const r = await k(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}\n${server.stderr()}`);
    return r.stdout;
  };
  const file = (name: string) => join(data, name);
  /** openssl's key and request for `subject`, as the docs make them; the request base64 as spec.request has it. */
  const request = (name: string, subject: string, extra: string[] = []) => {
    execFileSync(OPENSSL, ['genrsa', '-out', file(`${name}.key`), '2048'], { stdio: 'ignore' });
    execFileSync(OPENSSL, [
      'req',
      '-new',
      '-key',
      file(`${name}.key`),
      '-subj',
      subject,
      ...extra,
      '-out',
      file(`${name}.csr`),
    ]);
    return readFileSync(file(`${name}.csr`)).toString('base64');
  };
  const csr = (name: string, req: string, signerName: string, usages: string[]) =>
    `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: ${name}}
spec:
  request: ${req}
  signerName: ${signerName}
  expirationSeconds: 86400
  usages: [${usages.join(', ')}]
`;
  /** `kubectl get csr NAME`'s CONDITION once it is `want` (the controller works asynchronously). */
  const condition = async (name: string, want: string) => {
    let last = '';
    for (let i = 0; i < 100; i++) {
      last = (await ok(['get', 'csr', name, '--no-headers'])).trim().split(/\s+/).at(-1)!;
      if (last === want) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`csr ${name} stayed ${last}, not ${want}`);
  };

  await ok(
    ['apply', '-f', '-'],
    csr('myuser', request('myuser', '/CN=myuser/O=app-team'), 'kubernetes.io/kube-apiserver-client', ['client auth']),
  );
  // Nothing is signed before someone approves.
  assert.match(
    await ok(['get', 'csr', 'myuser']),
    /\nmyuser\s+\S+\s+kubernetes\.io\/kube-apiserver-client\s+kubernetes-admin\s+24h\s+Pending\n$/,
  );
  assert.equal(await ok(['get', 'csr', 'myuser', '-o', 'jsonpath={.status.certificate}']), '');
  assert.match(
    await ok(['certificate', 'approve', 'myuser']),
    /certificatesigningrequest.certificates.k8s.io\/myuser approved/,
  );
  await condition('myuser', 'Approved,Issued');

  const certificate = Buffer.from(await ok(['get', 'csr', 'myuser', '-o', 'jsonpath={.status.certificate}']), 'base64');
  writeFileSync(file('myuser.crt'), certificate);
  assert.equal(
    execFileSync(OPENSSL, ['verify', '-CAfile', join(data, 'tls', 'ca.crt'), file('myuser.crt')]).toString(),
    `${file('myuser.crt')}: OK\n`,
  );
  const text = execFileSync(OPENSSL, ['x509', '-in', file('myuser.crt'), '-noout', '-text']).toString();
  assert.match(text, /Subject: CN ?= ?myuser, O ?= ?app-team\n/);
  assert.match(text, /X509v3 Extended Key Usage: \n\s+TLS Web Client Authentication\n/);
  assert.match(text, /CA:FALSE/);
  // expirationSeconds 86400 is a day, less the five minutes it is backdated by (a day is not short-lived).
  const validity = /Not Before: (.*)\n\s+Not After : (.*)\n/.exec(text)!;
  assert.equal(Date.parse(validity[2]!) - Date.parse(validity[1]!), 86400_000);

  // The docs' next steps: the certificate in the kubeconfig, a context for it, and RBAC for the user.
  await ok([
    'config',
    'set-credentials',
    'myuser',
    `--client-key=${file('myuser.key')}`,
    `--client-certificate=${file('myuser.crt')}`,
    '--embed-certs=true',
  ]);
  const cluster = (await ok(['config', 'view', '-o', 'jsonpath={.clusters[0].name}'])).trim();
  await ok(['config', 'set-context', 'myuser', `--cluster=${cluster}`, '--user=myuser']);
  const me = JSON.parse(await ok(['--context', 'myuser', 'auth', 'whoami', '-o', 'json']));
  assert.deepEqual(me.status.userInfo, { username: 'myuser', groups: ['app-team', 'system:authenticated'] });
  const denied = await k(['--context', 'myuser', 'get', 'pods']);
  assert.match(
    denied.stderr,
    /pods is forbidden: User "myuser" cannot list resource "pods" in API group "" in the namespace "default"/,
  );
  await ok(['create', 'role', 'developer', '--verb=create,get,list,update,delete', '--resource=pods']);
  await ok(['create', 'rolebinding', 'developer-binding-myuser', '--role=developer', '--user=myuser']);
  assert.match(await ok(['--context', 'myuser', 'auth', 'can-i', 'list', 'pods']), /^yes\n$/);
  assert.equal((await ok(['--context', 'myuser', 'get', 'pods'])).trim(), '');

  // Denied: no certificate. Usages the signer does not give: Failed, with the signer's reason.
  await ok(
    ['apply', '-f', '-'],
    csr('nope', request('nope', '/CN=nope'), 'kubernetes.io/kube-apiserver-client', ['client auth']),
  );
  assert.match(await ok(['certificate', 'deny', 'nope']), /certificatesigningrequest.certificates.k8s.io\/nope denied/);
  await condition('nope', 'Denied');
  await ok(
    ['apply', '-f', '-'],
    csr('server', request('server', '/CN=server'), 'kubernetes.io/kube-apiserver-client', ['server auth']),
  );
  await ok(['certificate', 'approve', 'server']);
  await condition('server', 'Approved,Failed');
  assert.equal(
    await ok([
      'get',
      'csr',
      'server',
      '-o',
      'jsonpath={.status.conditions[?(@.type=="Failed")].reason}: {.status.conditions[?(@.type=="Failed")].message}',
    ]),
    'SignerValidationFailure: invalid usage for client certificate: server auth',
  );
  assert.equal(await ok(['get', 'csr', 'server', 'nope', '-o', 'jsonpath={.items[*].status.certificate}']), '');

  // A kubelet's serving certificate: the node's name, its DNS name and IP, for server auth.
  const serving = request('kubelet', '/O=system:nodes/CN=system:node:worker-1', [
    '-addext',
    'subjectAltName=DNS:worker-1,IP:172.18.0.3',
  ]);
  await ok(
    ['apply', '-f', '-'],
    csr('kubelet', serving, 'kubernetes.io/kubelet-serving', ['digital signature', 'key encipherment', 'server auth']),
  );
  await ok(['certificate', 'approve', 'kubelet']);
  await condition('kubelet', 'Approved,Issued');
  const servingText = execFileSync(OPENSSL, ['x509', '-noout', '-text'], {
    input: Buffer.from(await ok(['get', 'csr', 'kubelet', '-o', 'jsonpath={.status.certificate}']), 'base64'),
  }).toString();
  assert.match(servingText, /Digital Signature, Key Encipherment\n/);
  assert.match(servingText, /TLS Web Server Authentication\n/);
  assert.match(servingText, /DNS:worker-1, IP Address:172\.18\.0\.3\n/);

  // The csrcleaner: issued and denied requests go an hour after they were decided, the failed one stays.
  const names = async () => (await ok(['get', 'csr', '-o', 'jsonpath={.items[*].metadata.name}'])).split(' ').sort();
  assert.deepEqual(await names(), ['kubelet', 'myuser', 'nope', 'server']);
  await ok(['create', '--raw', '/sim/v1/clock/advance', '-f', '-'], '{"by":"3601s"}');
  for (let i = 0; i < 100 && (await names()).length > 1; i++) await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(await names(), ['server']);
});

test("csrapproving approves a kubelet's client certificate request when its maker may, as kubeadm's bindings allow", {
  timeout: 120_000,
}, async (t) => {
  if (skipWithoutKubectl(t)) return;
  if (!existsSync(OPENSSL)) return t.skip(`openssl not installed (${OPENSSL}): no certificate requests to make`);
  const data = mkdtempSync(join(tmpdir(), 'kube-sim-csrapprove-'));
  t.after(() => rmSync(data, { recursive: true, force: true }));
  const tokens = join(data, 'tokens.csv');
  writeFileSync(
    tokens,
    [
      'node-token,system:node:worker-2,n2,system:nodes',
      'bootstrap-token,system:bootstrap:abcdef,b1,"system:bootstrappers,system:bootstrappers:kubeadm:default-node-token"',
      'jane-token,jane,j1,dev',
      '',
    ].join('\n'),
  );
  const server = await startServer(['--tls', '--auth', '--token-auth-file', tokens, '--data', data, '--nodes', '0']);
  t.after(() => server.stop());
  const config = join(data, 'kubeconfig');
  copyFileSync(join(data, 'tls', 'kubeconfig'), config);
  const ok = async (args: string[], input?: string, token?: string) => {
    const r = await kubectl(undefined, [...(token ? ['--token', token] : []), ...args], {
      env: { KUBECONFIG: config },
      ...(input === undefined ? {} : { input }),
    });
    assert.equal(r.code, 0, `kubectl ${args.join(' ')}: ${r.stderr}\n${server.stderr()}`);
    return r.stdout;
  };
  const request = (name: string, subject: string) => {
    execFileSync(
      OPENSSL,
      ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'].concat([
        '-keyout',
        join(data, `${name}.key`),
        '-subj',
        subject,
        '-out',
        join(data, `${name}.csr`),
      ]),
      {
        stdio: 'ignore',
      },
    );
    return readFileSync(join(data, `${name}.csr`)).toString('base64');
  };
  const kubeletCsr = (name: string, node: string, signerName = 'kubernetes.io/kube-apiserver-client-kubelet') =>
    `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: ${name}}
spec:
  request: ${request(name, `/O=system:nodes/CN=system:node:${node}`)}
  signerName: ${signerName}
  usages: [digital signature, client auth]
`;
  const conditionOf = async (name: string) =>
    ok(['get', 'csr', name, '-o', 'jsonpath={.status.conditions[*].reason}|{.status.conditions[*].message}']);
  const settled = async (name: string, want: string) => {
    let last = '';
    for (let i = 0; i < 100; i++) {
      last = await conditionOf(name);
      if (last === want) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`csr ${name}: ${last}, not ${want}`);
  };
  // Nodes may ask for certificates (the Node authorizer's rights, which kube-sim's RBAC has no role for).
  await ok([
    'create',
    'clusterrolebinding',
    'nodes-csr',
    '--clusterrole=system:node-bootstrapper',
    '--group=system:nodes',
  ]);
  await ok(['create', 'clusterrolebinding', 'jane-csr', '--clusterrole=system:node-bootstrapper', '--user=jane']);

  // A node renewing its own client certificate: selfnodeclient, bound to system:nodes by kubeadm.
  await ok(['create', '-f', '-'], kubeletCsr('renewal', 'worker-2'), 'node-token');
  await settled('renewal', 'AutoApproved|Auto approving self kubelet client certificate after SubjectAccessReview.');
  // A bootstrap token's request on a new node's behalf: nodeclient, bound to kubeadm's bootstrappers.
  await ok(['create', '-f', '-'], kubeletCsr('joining', 'worker-3'), 'bootstrap-token');
  await settled('joining', 'AutoApproved|Auto approving kubelet client certificate after SubjectAccessReview.');
  for (const name of ['renewal', 'joining'])
    for (let i = 0; i < 100; i++) {
      if ((await ok(['get', 'csr', name, '--no-headers'])).includes('Approved,Issued')) break;
      await new Promise((r) => setTimeout(r, 100));
    }
  assert.match(await ok(['get', 'csr', 'renewal', 'joining', '--no-headers']), /Approved,Issued\n.*Approved,Issued\n$/);

  // A node asking for another node's certificate, a user whom RBAC does not allow, a serving certificate: left alone.
  await ok(['create', '-f', '-'], kubeletCsr('other-node', 'worker-9'), 'node-token');
  await ok(['create', '-f', '-'], kubeletCsr('jane', 'worker-4'), 'jane-token');
  await ok(['create', '-f', '-'], kubeletCsr('serving', 'worker-2', 'kubernetes.io/kubelet-serving'), 'node-token');
  await new Promise((r) => setTimeout(r, 1000));
  assert.match(
    await ok(['get', 'csr', 'other-node', 'jane', 'serving', '--no-headers']),
    /^other-node .* Pending\njane .* Pending\nserving .* Pending\n$/,
  );
});
