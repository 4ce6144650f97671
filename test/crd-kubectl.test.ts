import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { kubectl, kubectlMissing, type KubectlResult } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 10: a CustomResourceDefinition applied with the real kubectl serves its kind at once — discovery,
// get by plural/short name/kind, printer columns, explain, schema validation (422), defaults, pruning, the
// status and scale subresources, a second version converted by apiVersion — and deleting it removes the objects.

const missing = kubectlMissing();

const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: crontabs.stable.example.com
spec:
  group: stable.example.com
  scope: Namespaced
  names:
    plural: crontabs
    singular: crontab
    kind: CronTab
    shortNames: [ct]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Spec, type: string, jsonPath: .spec.cronSpec}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    selectableFields:
    - jsonPath: .spec.image
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the cron tab should run, and when.
            required: [cronSpec]
            x-kubernetes-validations:
            - {rule: "self.cronSpec != '@never'", message: "cronSpec must be a schedule"}
            properties:
              cronSpec: {type: string, description: The schedule in cron format.}
              image: {type: string, x-kubernetes-validations: [{rule: self == oldSelf, message: image is immutable}]}
              replicas: {type: integer, minimum: 1, maximum: 10, default: 1}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
              tags:
                type: array
                x-kubernetes-list-type: set
                items: {type: string}
          status:
            type: object
            properties:
              replicas: {type: integer}
  - name: v1beta1
    served: true
    storage: false
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`;

const CRONTAB = `apiVersion: stable.example.com/v1
kind: CronTab
metadata: {name: nightly}
spec: {cronSpec: "0 3 * * *", image: backup:1}
`;

describe('CustomResourceDefinitions with kubectl', { skip: missing }, () => {
  let server: SimServer;
  const k = (args: string[], input?: string): Promise<KubectlResult> =>
    kubectl(server.url, args, input === undefined ? {} : { input });
  const ok = async (args: string[], input?: string): Promise<string> => {
    const r = await k(args, input);
    assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}\n${server.stderr()}`);
    return r.stdout;
  };

  before(async () => {
    server = await startServer(['--nodes', '0']);
  });
  after(async () => {
    await server?.stop();
  });

  it('creates a CRD that becomes Established and is listed by api-resources', async () => {
    assert.match(
      await ok(['apply', '-f', '-'], CRD),
      /customresourcedefinition.apiextensions.k8s.io\/crontabs.stable.example.com created/,
    );
    assert.match(
      await ok(['wait', '--for=condition=Established', 'crd/crontabs.stable.example.com', '--timeout=10s']),
      /condition met/,
    );
    assert.match(await ok(['get', 'crd']), /crontabs\.stable\.example\.com/);
    assert.match(
      await ok(['api-resources', '--api-group=stable.example.com']),
      /crontabs\s+ct\s+stable\.example\.com\/v1\s+true\s+CronTab/,
    );
    const names = await ok([
      'get',
      'crd',
      'crontabs.stable.example.com',
      '-o',
      'jsonpath={.status.conditions[?(@.type=="NamesAccepted")].status} {.status.acceptedNames.kind}',
    ]);
    assert.equal(names, 'True CronTab');
    // Applied again with a change (client-side apply computes its patch from the CRD kind's OpenAPI schema), then
    // server-side: no warnings.
    const again = await k(
      ['apply', '-f', '-'],
      CRD.replace('shortNames: [ct]', 'shortNames: [ct]\n    categories: [cron]'),
    );
    assert.deepEqual([again.code, again.stderr], [0, '']);
    assert.match(again.stdout, /configured/);
    const ssa = await k(['apply', '--server-side', '--force-conflicts', '-f', '-'], CRD);
    assert.deepEqual([ssa.code, ssa.stderr], [0, '']);
    assert.match(await ok(['explain', 'crd.spec.names']), /plural\s+<string> -required-/);
  });

  it('creates, lists, patches custom objects, with defaults, printer columns and a second version', async () => {
    await ok(['apply', '-f', '-'], CRONTAB);
    for (const name of ['crontabs', 'ct', 'CronTab', 'crontab.stable.example.com']) {
      const out = await ok(['get', name]);
      assert.match(out, /^NAME\s+SPEC\s+REPLICAS\s+AGE\n/, name);
      assert.match(out, /nightly\s+0 3 \* \* \*\s+1\s+\d+s/, name);
    }
    await ok(['patch', 'ct', 'nightly', '--type=merge', '-p', '{"spec":{"replicas":3}}']);
    assert.equal(await ok(['get', 'ct', 'nightly', '-o', 'jsonpath={.spec.replicas} {.metadata.generation}']), '3 2');
    assert.equal(
      await ok([
        'get',
        'crontabs.v1beta1.stable.example.com',
        'nightly',
        '-o',
        'jsonpath={.apiVersion} {.spec.cronSpec}',
      ]),
      'stable.example.com/v1beta1 0 3 * * *',
    );
    assert.equal(
      await ok(['get', 'ct', '--field-selector', 'spec.image=backup:1', '-o', 'name']),
      'crontab.stable.example.com/nightly\n',
    );
    assert.equal(await ok(['get', 'ct', '--field-selector', 'spec.image=other', '-o', 'name']), '');
    await ok(['scale', 'ct', 'nightly', '--replicas=5']);
    assert.equal(await ok(['get', 'ct', 'nightly', '-o', 'jsonpath={.spec.replicas}']), '5');
    await ok(['patch', 'ct', 'nightly', '--subresource=status', '--type=merge', '-p', '{"status":{"replicas":5}}']);
    assert.equal(await ok(['get', 'ct', 'nightly', '-o', 'jsonpath={.status.replicas}']), '5');
  });

  it('rejects invalid objects with 422 and warns about unknown fields', async () => {
    const bad = await k(['patch', 'ct', 'nightly', '--type=merge', '-p', '{"spec":{"replicas":11}}']);
    assert.notEqual(bad.code, 0);
    assert.match(
      bad.stderr,
      /The CronTab "nightly" is invalid: spec\.replicas: Invalid value: 11: spec\.replicas in body should be less than or equal to 10/,
    );
    const immutable = await k(['patch', 'ct', 'nightly', '--type=merge', '-p', '{"spec":{"image":"backup:2"}}']);
    assert.match(
      immutable.stderr,
      /The CronTab "nightly" is invalid: spec\.image: Invalid value: "string": image is immutable/,
    );
    const never = await k(['patch', 'ct', 'nightly', '--type=merge', '-p', '{"spec":{"cronSpec":"@never"}}']);
    assert.match(
      never.stderr,
      /The CronTab "nightly" is invalid: spec: Invalid value: "object": cronSpec must be a schedule/,
    );
    const missingField = await k(
      ['create', '-f', '-'],
      'apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: empty}\nspec: {image: x}\n',
    );
    assert.match(missingField.stderr, /The CronTab "empty" is invalid: spec\.cronSpec: Required value/);
    const unknown = await k(
      ['create', '-f', '-'],
      'apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: extra}\nspec: {cronSpec: "* * * * *", colour: red}\n',
    );
    assert.notEqual(unknown.code, 0);
    assert.match(unknown.stderr, /unknown field "spec\.colour"/);
    await ok(
      ['create', '--validate=false', '-f', '-'],
      'apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: extra}\nspec: {cronSpec: "* * * * *", colour: red}\n',
    );
    assert.equal(await ok(['get', 'ct', 'extra', '-o', 'jsonpath={.spec}']), '{"cronSpec":"* * * * *","replicas":1}');
  });

  it('server-side apply merges list-type map and set lists by manager', async () => {
    const applied = (ports: string, tags: string): string =>
      `apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: merged}\nspec: {cronSpec: "* * * * *", ports: [${ports}], tags: [${tags}]}\n`;
    await ok(['apply', '--server-side', '--field-manager=alice', '-f', '-'], applied('{name: http, port: 80}', 'a'));
    await ok(['apply', '--server-side', '--field-manager=bob', '-f', '-'], applied('{name: metrics, port: 9090}', 'b'));
    assert.equal(
      await ok(['get', 'ct', 'merged', '-o', 'jsonpath={.spec.ports[*].name} {.spec.tags}']),
      'http metrics ["a","b"]',
    );
    const conflict = await k(
      ['apply', '--server-side', '--field-manager=bob', '-f', '-'],
      applied('{name: http, port: 8080}', 'b'),
    );
    assert.notEqual(conflict.code, 0);
    assert.match(
      conflict.stderr,
      /conflict with "alice" using stable\.example\.com\/v1: \.spec\.ports\[name="http"\]\.port/,
    );
    // alice stops applying her port: it goes, bob's stays.
    await ok(['apply', '--server-side', '--field-manager=alice', '-f', '-'], applied('', 'a'));
    assert.equal(await ok(['get', 'ct', 'merged', '-o', 'jsonpath={.spec.ports[*].name}']), 'metrics');
  });

  it('explains the custom kind from its schema', async () => {
    const out = await ok(['explain', 'crontab.spec']);
    assert.match(out, /KIND:\s+CronTab/);
    assert.match(out, /What the cron tab should run, and when\./);
    assert.match(out, /cronSpec\s+<string> -required-/);
  });

  it('applies a default added to the schema later when objects are read', async () => {
    await ok(
      ['apply', '--server-side', '--force-conflicts', '-f', '-'],
      CRD.replace(
        '              image: {type: string,',
        '              timezone: {type: string, default: UTC}\n              image: {type: string,',
      ),
    );
    assert.equal(await ok(['get', 'ct', 'nightly', '-o', 'jsonpath={.spec.timezone}']), 'UTC');
    assert.match(await ok(['get', 'ct', '-o', 'json']), /"timezone": "UTC"/);
    await ok(['apply', '--server-side', '--force-conflicts', '-f', '-'], CRD);
  });

  it('refuses strategic merge patches, as kube-apiserver does for custom resources', async () => {
    const r = await k(['patch', 'ct', 'nightly', '-p', '{"spec":{"replicas":2}}']);
    assert.notEqual(r.code, 0);
    assert.match(
      r.stderr,
      /application\/strategic-merge-patch\+json is not supported by stable\.example\.com\/v1, Kind=CronTab: the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json, application\/apply-patch\+yaml/,
    );
  });

  it('deleting the CRD removes its objects and stops serving the kind', async () => {
    await ok(
      ['create', '-f', '-'],
      'apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: held, finalizers: [example.com/hold]}\nspec: {cronSpec: "* * * * *"}\n',
    );
    await ok(['delete', 'crd', 'crontabs.stable.example.com', '--wait=false']);
    const crd = JSON.parse(await ok(['get', 'crd', 'crontabs.stable.example.com', '-o', 'json'])) as {
      metadata: { finalizers: string[] };
      status: { conditions: Array<{ type: string; status: string; reason: string }> };
    };
    assert.deepEqual(crd.metadata.finalizers, ['customresourcecleanup.apiextensions.k8s.io']);
    assert.deepEqual(
      crd.status.conditions.find((c) => c.type === 'Terminating'),
      {
        ...crd.status.conditions.find((c) => c.type === 'Terminating'),
        status: 'True',
        reason: 'InstanceDeletionPending',
      },
    );
    assert.equal(await ok(['get', 'ct', '-o', 'name']), 'crontab.stable.example.com/held\n');
    const refused = await k(['create', '-f', '-'], CRONTAB);
    assert.match(refused.stderr, /create not allowed while custom resource definition is terminating/);
    await ok(['patch', 'ct', 'held', '--type=merge', '-p', '{"metadata":{"finalizers":null}}']);
    assert.match(await ok(['wait', '--for=delete', 'crd/crontabs.stable.example.com', '--timeout=10s']), /deleted|^$/);
    const r = await k(['get', '--raw', '/apis/stable.example.com/v1/namespaces/default/crontabs']);
    assert.notEqual(r.code, 0);
    assert.doesNotMatch(await ok(['api-resources']), /crontabs/);
    // Created again: the old objects are gone.
    await ok(['apply', '-f', '-'], CRD);
    await ok(['wait', '--for=condition=Established', 'crd/crontabs.stable.example.com', '--timeout=10s']);
    assert.equal(
      await ok(['get', '--raw', '/apis/stable.example.com/v1/crontabs']).then(
        (s) => (JSON.parse(s) as { items: unknown[] }).items.length,
      ),
      0,
    );
    // The garbage collector watches the kind served again: an object whose owner goes is collected.
    await ok(['create', 'configmap', 'owner']);
    const uid = await ok(['get', 'configmap', 'owner', '-o', 'jsonpath={.metadata.uid}']);
    await ok(
      ['create', '-f', '-'],
      `apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata: {name: owned, ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: ${uid}}]}\nspec: {cronSpec: "* * * * *"}\n`,
    );
    await ok(['delete', 'configmap', 'owner']);
    assert.match(await ok(['wait', '--for=delete', 'crontab/owned', '--timeout=10s']), /deleted|^$/);
  });
});

describe('CustomResourceDefinitions with --data', { skip: missing }, () => {
  it('serves the kind and its objects again after a restart', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kube-sim-crd-'));
    let server = await startServer(['--nodes', '0', '--data', dir]);
    try {
      const ok = async (args: string[], input?: string): Promise<string> => {
        const r = await kubectl(server.url, args, input === undefined ? {} : { input });
        assert.equal(r.code, 0, `kubectl ${args.join(' ')} failed: ${r.stderr}\n${server.stderr()}`);
        return r.stdout;
      };
      await ok(['apply', '-f', '-'], CRD);
      await ok(['apply', '-f', '-'], CRONTAB);
      await server.stop();
      server = await startServer(['--nodes', '0', '--data', dir]);
      assert.match(await ok(['get', 'ct']), /nightly\s+0 3 \* \* \*\s+1\s+/);
      assert.equal(
        await ok(['get', 'crontabs.v1beta1.stable.example.com', 'nightly', '-o', 'jsonpath={.apiVersion}']),
        'stable.example.com/v1beta1',
      );
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
