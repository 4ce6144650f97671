import assert from 'node:assert/strict';
import { generateKeyPairSync, sign } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { validateFields } from '../src/api/schema/field-validation.js';
import { schemaNameForKind, typeInfo, type Shape } from '../src/api/schema/schema.js';
import { builtinKinds } from '../src/registry/builtin/index.js';
import { der, distinguishedName, pem, spkiOf } from '../src/api/x509.js';
import { Api, assertStatus, type Obj } from './helpers/http.js';
import { kubectlAgainst, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// The kinds kube-apiserver 1.32 serves that came with issue 24 — ComponentStatus, Binding, PodTemplate,
// ReplicationController, admission registration, APIService, CertificateSigningRequest, EndpointSlice, API Priority
// and Fairness, RuntimeClass and the CSI kinds — with their defaults, validation messages and `kubectl get` columns,
// and the typed-decoding rule every built-in kind follows: a null field is what its Go struct makes of it.

type Any = Record<string, unknown>;

function causesOf(reply: { body: unknown }): string[] {
  const details = (reply.body as { details?: { causes?: Array<{ field?: string; message: string }> } }).details;
  return (details?.causes ?? []).map((c) => `${c.field}: ${c.message}`);
}

/** A certificate request (PKCS #10, ECDSA P-256) for `cn`, PEM then base64 as spec.request carries it. */
function csrRequest(cn: string): string {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  // version 0, subject, public key, no attributes ([0] IMPLICIT SET OF, empty).
  const info = der.sequence(der.integer(0), distinguishedName(cn), spkiOf(privateKey), der.explicit(0));
  const ecdsaWithSha256 = der.sequence(der.oid('1.2.840.10045.4.3.2'));
  const request = der.sequence(info, ecdsaWithSha256, der.bits(sign('sha256', info, privateKey)));
  return Buffer.from(pem('CERTIFICATE REQUEST', request)).toString('base64');
}

describe('typed decoding: a null field comes back as the Go struct serialises it', () => {
  /** An object of the type with null at every field, two levels deep. */
  function nulls(shape: Shape, depth: number): unknown {
    if (shape.kind !== 'ref') return null;
    const t = typeInfo(shape.name);
    if (!t || t.scalar) return null;
    const out: Any = {};
    for (const [name, prop] of t.properties) out[name] = depth > 0 ? nulls(prop.shape, depth - 1) : null;
    return out;
  }
  /** Paths of the nulls left, with the type and whether the field is required there. */
  function leftNulls(value: unknown, shape: Shape, path: string, out: string[]): void {
    if (!value || typeof value !== 'object' || Array.isArray(value) || shape.kind !== 'ref') return;
    const t = typeInfo(shape.name);
    if (!t) return;
    for (const [name, v] of Object.entries(value as Any)) {
      const prop = t.properties.get(name);
      if (!prop) continue;
      const target = prop.shape.kind === 'ref' ? typeInfo(prop.shape.name) : undefined;
      const timeOrRaw = prop.shape.kind === 'any' || target?.scalar === 'date-time' || target?.scalar === 'object';
      const nilCollection = (prop.shape.kind === 'list' || prop.shape.kind === 'map') && t.required.includes(name);
      if (v === null && !timeOrRaw && !nilCollection) out.push(`${path}.${name}`);
      else leftNulls(v, prop.shape, `${path}.${name}`, out);
    }
  }

  for (const info of builtinKinds) {
    const typeName = schemaNameForKind(info.group, info.version, info.kind);
    if (!typeName) continue;
    it(`${info.group || 'core'}/${info.version} ${info.kind}`, () => {
      const shape: Shape = { kind: 'ref', name: typeName };
      const obj = nulls(shape, 2) as Any;
      validateFields(obj, typeName);
      const left: string[] = [];
      leftNulls(obj, shape, info.kind, left);
      assert.deepEqual(left, []);
    });
  }
});

describe('kube-apiserver 1.32 kinds over HTTP and kubectl', { skip: kubectlMissing() }, () => {
  let server: SimServer;
  let api: Api;
  let k: ReturnType<typeof kubectlAgainst>;
  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
    k = kubectlAgainst(server);
  });
  after(async () => {
    await server.stop();
  });

  it('ComponentStatus: the three components Healthy, read-only, with the deprecation warning', async () => {
    const r = await k.run(['get', 'componentstatuses']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(
      r.stdout,
      'NAME                 STATUS    MESSAGE   ERROR\nscheduler            Healthy   ok        \ncontroller-manager   Healthy   ok        \netcd-0               Healthy   ok        \n',
    );
    assert.match(r.stderr, /Warning: v1 ComponentStatus is deprecated in v1\.19\+/);
    const one = await api.request<Obj>('/api/v1/componentstatuses/etcd-0');
    assert.equal(one.status, 200);
    assert.equal(one.headers.get('warning'), '299 - "v1 ComponentStatus is deprecated in v1.19+"');
    assert.deepEqual((one.body as Any).conditions, [{ type: 'Healthy', status: 'True', message: 'ok' }]);
    assertStatus(await api.request('/api/v1/componentstatuses/nope'), 404, 'NotFound');
    assertStatus(await api.request('/api/v1/componentstatuses?watch=true'), 405, 'MethodNotAllowed');
    assertStatus(
      await api.request('/api/v1/componentstatuses', { method: 'POST', body: { metadata: { name: 'x' } } }),
      405,
      'MethodNotAllowed',
    );
  });

  it('Binding: POST .../bindings binds the pod its name names', async () => {
    await api.create('/api/v1/namespaces/default/pods', {
      metadata: { name: 'lone' },
      spec: { containers: [{ name: 'c', image: 'nginx' }] },
    });
    const reply = await api.request('/api/v1/namespaces/default/bindings', {
      method: 'POST',
      body: { apiVersion: 'v1', kind: 'Binding', metadata: { name: 'lone' }, target: { kind: 'Node', name: 'node-9' } },
    });
    assert.equal(reply.status, 201, reply.text);
    assert.deepEqual(reply.body, { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Success', code: 201 });
    const pod = await api.get('/api/v1/namespaces/default/pods/lone');
    assert.equal((pod.spec as Any).nodeName, 'node-9');
    const again = await api.request('/api/v1/namespaces/default/bindings', {
      method: 'POST',
      body: { metadata: { name: 'lone' }, target: { name: 'node-8' } },
    });
    assertStatus(again, 409, 'Conflict');
  });

  it('PodTemplate: defaulted as a pod spec, printed with its containers and labels', async () => {
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: v1
kind: PodTemplate
metadata: {name: tpl}
template:
  metadata: {labels: {app: a, tier: b}}
  spec: {containers: [{name: app, image: nginx:1.27}]}
`,
    );
    const tpl = (await api.get('/api/v1/namespaces/default/podtemplates/tpl')) as Any;
    const spec = (tpl.template as Any).spec as Any;
    assert.equal(spec.restartPolicy, 'Always');
    assert.equal(spec.dnsPolicy, 'ClusterFirst');
    assert.equal((spec.containers as Any[])[0]!.imagePullPolicy, 'IfNotPresent');
    assert.equal(
      await k.ok(['get', 'podtemplates']),
      'NAME   CONTAINERS   IMAGES       POD LABELS\ntpl    app          nginx:1.27   app=a,tier=b\n',
    );
  });

  it('ReplicationController: selector defaulted from the template, checked against it, a scale subresource', async () => {
    const created = await api.create('/api/v1/namespaces/default/replicationcontrollers', {
      metadata: { name: 'rc' },
      spec: {
        template: { metadata: { labels: { app: 'rc' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
      },
    });
    assert.deepEqual((created.spec as Any).selector, { app: 'rc' });
    assert.equal((created.spec as Any).replicas, 1);
    assert.deepEqual(created.metadata.labels, { app: 'rc' });
    assert.deepEqual(created.status, { replicas: 0 });
    const scale = await api.get('/api/v1/namespaces/default/replicationcontrollers/rc/scale');
    assert.deepEqual(scale.spec, { replicas: 1 });
    assert.equal((scale.status as Any).selector, 'app=rc');
    const bad = await api.request('/api/v1/namespaces/default/replicationcontrollers', {
      method: 'POST',
      body: {
        metadata: { name: 'bad' },
        spec: {
          selector: { app: 'x' },
          template: {
            metadata: { labels: { app: 'y' } },
            spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'nginx' }] },
          },
        },
      },
    });
    assertStatus(bad, 422, 'Invalid');
    assert.deepEqual(causesOf(bad), [
      'spec.template.metadata.labels: Invalid value: {"app":"y"}: `selector` does not match template `labels`',
      'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"',
    ]);
  });

  it('webhook configurations: defaulted, validated with kube-apiserver’s messages, counted', async () => {
    const created = await api.create('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations', {
      metadata: { name: 'hooks' },
      webhooks: [
        {
          name: 'pods.hooks.example.com',
          sideEffects: 'None',
          admissionReviewVersions: ['v1'],
          clientConfig: { service: { namespace: 'default', name: 'hook' } },
          rules: [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'] }],
        },
      ],
    });
    const hook = (created.webhooks as Any[])[0]!;
    assert.equal(hook.failurePolicy, 'Fail');
    assert.equal(hook.matchPolicy, 'Equivalent');
    assert.deepEqual(hook.namespaceSelector, {});
    assert.deepEqual(hook.objectSelector, {});
    assert.equal(hook.timeoutSeconds, 10);
    assert.equal(hook.reinvocationPolicy, 'Never');
    assert.equal(((hook.clientConfig as Any).service as Any).port, 443);
    assert.equal((hook.rules as Any[])[0]!.scope, '*');
    assert.equal(created.metadata.generation, 1);
    const bad = await api.request('/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations', {
      method: 'POST',
      body: { metadata: { name: 'bad' }, webhooks: [{ name: 'short.name', clientConfig: { url: 'http://x' } }] },
    });
    assertStatus(bad, 422, 'Invalid');
    assert.deepEqual(causesOf(bad), [
      'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated by dots',
      'webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun',
      'webhooks[0].admissionReviewVersions: Required value: must specify one of v1, v1beta1',
      'webhooks[0].clientConfig.url: Invalid value: "http://x": \'https\' is the only allowed URL scheme',
    ]);
    assert.match(await k.ok(['get', 'mutatingwebhookconfigurations']), /^NAME\s+WEBHOOKS\s+AGE\nhooks\s+1\s+\S+\n$/);
  });

  it('ValidatingAdmissionPolicy and binding: defaults, CEL that compiles, validation actions', async () => {
    const policy = await api.create('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', {
      metadata: { name: 'replicas' },
      spec: {
        matchConstraints: {
          resourceRules: [
            { apiGroups: ['apps'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['deployments'] },
          ],
        },
        validations: [{ expression: 'object.spec.replicas <= 5' }],
      },
    });
    const spec = policy.spec as Any;
    assert.equal(spec.failurePolicy, 'Fail');
    assert.equal((spec.matchConstraints as Any).matchPolicy, 'Equivalent');
    const bad = await api.request('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', {
      method: 'POST',
      body: { metadata: { name: 'bad' }, spec: { validations: [{ expression: 'object.spec.replicas <=' }] } },
    });
    assertStatus(bad, 422, 'Invalid');
    const causes = causesOf(bad);
    assert.equal(causes[0], 'spec.matchConstraints: Required value');
    assert.match(
      causes[1]!,
      /^spec\.validations\[0\]\.expression: Invalid value: "object\.spec\.replicas <=": compilation failed: /,
    );
    const binding = await api.request('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', {
      method: 'POST',
      body: { metadata: { name: 'b' }, spec: { policyName: 'replicas', validationActions: ['Deny', 'Warn'] } },
    });
    assertStatus(binding, 422, 'Invalid');
    assert.deepEqual(causesOf(binding), [
      'spec.validationActions: Invalid value: ["Deny","Warn"]: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)',
    ]);
    await api.create('/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', {
      metadata: { name: 'b' },
      spec: { policyName: 'replicas', validationActions: ['Deny'] },
    });
    assert.match(
      await k.ok(['get', 'validatingadmissionpolicies']),
      /^NAME\s+VALIDATIONS\s+PARAMKIND\s+AGE\nreplicas\s+1\s+<unset>\s+/,
    );
    assert.match(
      await k.ok(['get', 'validatingadmissionpolicybindings']),
      /^NAME\s+POLICYNAME\s+PARAMREF\s+AGE\nb\s+replicas\s+<unset>\s+/,
    );
  });

  it('APIService: a Local, Available one per served group-version, CRD groups included; metrics-server its own', async () => {
    const table = await k.ok(['get', 'apiservices']);
    const rows = table.trim().split('\n').slice(1);
    const discovery = await api.expect<{ groups: Array<{ versions: Array<{ groupVersion: string }> }> }>(200, '/apis');
    const served = ['v1', ...discovery.groups.flatMap((g) => g.versions.map((v) => v.groupVersion))];
    assert.equal(rows.length, served.length, table);
    const metricsServer = rows.filter((row) => row.startsWith('v1beta1.metrics.k8s.io '));
    assert.equal(metricsServer.length, 1, table);
    assert.match(metricsServer[0]!, /^v1beta1\.metrics\.k8s\.io\s+kube-system\/metrics-server\s+True\s+\S+$/);
    for (const row of rows) if (row !== metricsServer[0]) assert.match(row, /^\S+\s+Local\s+True\s+\S+$/);
    const metrics = await api.get('/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io');
    assert.deepEqual(metrics.spec, {
      group: 'metrics.k8s.io',
      version: 'v1beta1',
      groupPriorityMinimum: 100,
      versionPriority: 100,
      insecureSkipTLSVerify: true,
      service: { namespace: 'kube-system', name: 'metrics-server', port: 443 },
    });
    assert.deepEqual(
      ((metrics.status as Any).conditions as Any[]).map((c) => [c.type, c.status, c.reason, c.message]),
      [['Available', 'True', 'Passed', 'all checks passed']],
    );
    assert.match(table, /\nv1\.\s+Local\s+True/);
    assert.match(table, /\nv2\.autoscaling\s+Local\s+True/);
    const apps = await api.get('/apis/apiregistration.k8s.io/v1/apiservices/v1.apps');
    assert.deepEqual(apps.spec, { group: 'apps', version: 'v1', groupPriorityMinimum: 17800, versionPriority: 15 });
    assert.equal(apps.metadata.labels?.['kube-aggregator.kubernetes.io/automanaged'], 'onstart');
    assert.deepEqual(
      ((apps.status as Any).conditions as Any[]).map((c) => [c.type, c.status, c.reason, c.message]),
      [['Available', 'True', 'Local', 'Local APIServices are always available']],
    );
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {plural: widgets, singular: widget, kind: Widget}
  scope: Namespaced
  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]
`,
    );
    const crd = await api
      .expect<Obj>(200, '/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com')
      .catch(async () => {
        await new Promise((r) => setTimeout(r, 200));
        return api.get('/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com');
      });
    assert.deepEqual(crd.spec, {
      group: 'example.com',
      version: 'v1',
      groupPriorityMinimum: 1000,
      versionPriority: 100,
    });
    assert.equal(crd.metadata.labels?.['kube-aggregator.kubernetes.io/automanaged'], 'true');
    await k.ok(['delete', 'crd', 'widgets.example.com']);
    for (let i = 0; i < 50; i++) {
      const r = await api.request('/apis/apiregistration.k8s.io/v1/apiservices/v1.example.com');
      if (r.status === 404) return;
      await new Promise((r2) => setTimeout(r2, 100));
    }
    assert.fail('the CRD group-version’s APIService stayed after the CRD went');
  });

  it('CertificateSigningRequest: the requester recorded, kubectl certificate approve, the CONDITION column', async () => {
    await k.ok(
      ['apply', '-f', '-'],
      `apiVersion: certificates.k8s.io/v1
kind: CertificateSigningRequest
metadata: {name: alice}
spec:
  request: ${csrRequest('alice')}
  signerName: kubernetes.io/kube-apiserver-client
  expirationSeconds: 86400
  usages: [client auth]
`,
    );
    const csr = await api.get('/apis/certificates.k8s.io/v1/certificatesigningrequests/alice');
    assert.equal((csr.spec as Any).username, 'kubernetes-admin');
    assert.deepEqual((csr.spec as Any).groups, ['kubeadm:cluster-admins', 'system:authenticated']);
    assert.match(
      await k.ok(['get', 'csr']),
      /^NAME\s+AGE\s+SIGNERNAME\s+REQUESTOR\s+REQUESTEDDURATION\s+CONDITION\nalice\s+\S+\s+kubernetes\.io\/kube-apiserver-client\s+kubernetes-admin\s+24h\s+Pending\n$/,
    );
    assert.match(
      await k.ok(['certificate', 'approve', 'alice']),
      /certificatesigningrequest.certificates.k8s.io\/alice approved/,
    );
    // The csrsigning controller issues the certificate soon after (test/certificates.test.ts follows that through).
    assert.match(await k.ok(['get', 'csr', 'alice']), /\s+Approved(,Issued)?\n$/);
    const approved = await api.get('/apis/certificates.k8s.io/v1/certificatesigningrequests/alice');
    const condition = ((approved.status as Any).conditions as Any[])[0]!;
    assert.equal(condition.type, 'Approved');
    assert.equal(condition.reason, 'KubectlApprove');
    assert.ok(condition.lastUpdateTime && condition.lastTransitionTime);
    // Approved stays approved: denying it now is refused.
    const deny = await k.run(['certificate', 'deny', 'alice']);
    assert.notEqual(deny.code, 0);
    const bad = await api.request('/apis/certificates.k8s.io/v1/certificatesigningrequests', {
      method: 'POST',
      body: {
        metadata: { name: 'bad' },
        spec: { request: Buffer.from('nope').toString('base64'), signerName: 'example', expirationSeconds: 60 },
      },
    });
    assertStatus(bad, 422, 'Invalid');
    assert.deepEqual(causesOf(bad), [
      'spec.request: Invalid value: []byte{0x6e, 0x6f, 0x70, 0x65}: PEM block type must be CERTIFICATE REQUEST',
      'spec.usages: Required value',
      'spec.signerName: Invalid value: "example": must be a fully qualified domain and path of the form \'example.com/signer-name\'',
      'spec.expirationSeconds: Invalid value: 60: may not specify a duration less than 600 seconds (10 minutes)',
    ]);
  });

  it('EndpointSlice: addresses checked for their type, addressType fixed, printed', async () => {
    const bad = await api.request('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
      method: 'POST',
      body: {
        metadata: { name: 's' },
        addressType: 'IPv4',
        endpoints: [{ addresses: ['127.0.0.1'] }, { addresses: [] }],
      },
    });
    assertStatus(bad, 422, 'Invalid');
    assert.deepEqual(causesOf(bad), [
      'endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)',
      'endpoints[1].addresses: Required value: must contain at least 1 address',
    ]);
    const created = await api.create('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
      metadata: { name: 's' },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['192.0.2.1'] }, { addresses: ['192.0.2.2'] }],
      ports: [{ port: 80 }],
    });
    assert.deepEqual(created.ports, [{ name: '', protocol: 'TCP', port: 80 }]);
    const change = await api.request('/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/s', {
      method: 'PATCH',
      headers: { 'content-type': 'application/merge-patch+json' },
      body: { addressType: 'IPv6' },
    });
    assertStatus(change, 422, 'Invalid');
    assert.match(
      await k.ok(['get', 'endpointslices', 's']),
      /^NAME\s+ADDRESSTYPE\s+PORTS\s+ENDPOINTS\s+AGE\ns\s+IPv4\s+80\s+192\.0\.2\.1,192\.0\.2\.2\s+/,
    );
  });

  it('API Priority and Fairness: the bootstrap configuration, printed as kubectl sorts it', async () => {
    const schemas = await k.ok(['get', 'flowschemas']);
    assert.deepEqual(
      schemas
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split(/\s+/).slice(0, 4).join(' ')),
      [
        'exempt exempt 1 <none>',
        'probes exempt 2 <none>',
        'system-leader-election leader-election 100 ByUser',
        'endpoint-controller workload-high 150 ByUser',
        'workload-leader-election leader-election 200 ByUser',
        'system-node-high node-high 400 ByUser',
        'system-nodes system 500 ByUser',
        'kube-controller-manager workload-high 800 ByNamespace',
        'kube-scheduler workload-high 800 ByNamespace',
        'kube-system-service-accounts workload-high 900 ByNamespace',
        'service-accounts workload-low 9000 ByUser',
        'global-default global-default 9900 ByUser',
        'catch-all catch-all 10000 ByUser',
      ],
    );
    assert.match(schemas, /^NAME\s+PRIORITYLEVEL\s+MATCHINGPRECEDENCE\s+DISTINGUISHERMETHOD\s+AGE\s+MISSINGPL\n/);
    assert.ok(
      schemas
        .trim()
        .split('\n')
        .slice(1)
        .every((l) => l.endsWith('False')),
    );
    const levels = await k.ok(['get', 'prioritylevelconfigurations']);
    assert.match(levels, /\nexempt\s+Exempt\s+<none>\s+<none>\s+<none>\s+<none>\s+/);
    assert.match(levels, /\nworkload-low\s+Limited\s+100\s+128\s+6\s+50\s+/);
    // A FlowSchema naming a priority level that does not exist is Dangling.
    await api.create('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas', {
      metadata: { name: 'mine' },
      spec: { priorityLevelConfiguration: { name: 'nowhere' } },
    });
    for (let i = 0; i < 50; i++) {
      const fs = await api.get('/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas/mine');
      const dangling = (((fs.status as Any | undefined)?.conditions as Any[] | undefined) ?? [])[0];
      if (dangling?.status === 'True') {
        assert.equal(dangling.reason, 'NotFound');
        assert.equal((fs.spec as Any).matchingPrecedence, 1000);
        return;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.fail('no Dangling condition');
  });

  it('RuntimeClass and the CSI kinds: defaults, validation, columns', async () => {
    const rc = await api.request('/apis/node.k8s.io/v1/runtimeclasses', {
      method: 'POST',
      body: { metadata: { name: 'gvisor' }, handler: 'Run_SC' },
    });
    assertStatus(rc, 422, 'Invalid');
    assert.match(causesOf(rc)[0]!, /^handler: Invalid value: "Run_SC": a lowercase RFC 1123 label must consist of/);
    await api.create('/apis/node.k8s.io/v1/runtimeclasses', { metadata: { name: 'gvisor' }, handler: 'runsc' });
    assert.match(await k.ok(['get', 'runtimeclasses']), /^NAME\s+HANDLER\s+AGE\ngvisor\s+runsc\s+/);
    const driver = await api.create('/apis/storage.k8s.io/v1/csidrivers', {
      metadata: { name: 'hostpath.csi.k8s.io' },
    });
    assert.deepEqual(driver.spec, {
      attachRequired: true,
      podInfoOnMount: false,
      storageCapacity: false,
      fsGroupPolicy: 'ReadWriteOnceWithFSType',
      requiresRepublish: false,
      seLinuxMount: false,
      volumeLifecycleModes: ['Persistent'],
    });
    assert.match(
      await k.ok(['get', 'csidrivers']),
      /^NAME\s+ATTACHREQUIRED\s+PODINFOONMOUNT\s+STORAGECAPACITY\s+TOKENREQUESTS\s+REQUIRESREPUBLISH\s+MODES\s+AGE\nhostpath\.csi\.k8s\.io\s+true\s+false\s+false\s+<unset>\s+false\s+Persistent\s+/,
    );
    const attach = await api.request('/apis/storage.k8s.io/v1/volumeattachments', {
      method: 'POST',
      body: { metadata: { name: 'va' }, spec: { attacher: 'hostpath.csi.k8s.io', source: {} } },
    });
    assertStatus(attach, 422, 'Invalid');
    assert.deepEqual(causesOf(attach), [
      'spec.source: Invalid value: {}: must specify exactly one of inlineVolumeSpec and persistentVolumeName',
      'spec.nodeName: Required value',
    ]);
    await api.create('/apis/storage.k8s.io/v1/volumeattachments', {
      metadata: { name: 'va' },
      spec: { attacher: 'hostpath.csi.k8s.io', nodeName: 'node-1', source: { persistentVolumeName: 'pv-1' } },
    });
    assert.match(
      await k.ok(['get', 'volumeattachments']),
      /^NAME\s+ATTACHER\s+PV\s+NODE\s+ATTACHED\s+AGE\nva\s+hostpath\.csi\.k8s\.io\s+pv-1\s+node-1\s+false\s+/,
    );
    await api.create('/apis/storage.k8s.io/v1/namespaces/default/csistoragecapacities', {
      metadata: { name: 'cap' },
      storageClassName: 'standard',
      capacity: '10Gi',
    });
    assert.equal(
      await k.ok(['get', 'csistoragecapacities']),
      'NAME   STORAGECLASSNAME   CAPACITY\ncap    standard           10Gi\n',
    );
    await api.create('/apis/storage.k8s.io/v1/csinodes', {
      metadata: { name: 'node-1' },
      spec: { drivers: [{ name: 'hostpath.csi.k8s.io', nodeID: 'node-1' }] },
    });
    assert.match(await k.ok(['get', 'csinodes']), /^NAME\s+DRIVERS\s+AGE\nnode-1\s+1\s+/);
  });
});
