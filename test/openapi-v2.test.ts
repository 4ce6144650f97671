import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { test } from 'node:test';
import { request } from './helpers/http.js';
import { kubectl } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

// /openapi/v2: kubectl 1.27 and 1.28 fetch it (protobuf only) before every apply, create, patch and explain, and
// fail without it. The document is the v3 documents in Swagger 2.0's dialect.

const PROTOBUF_ASKED = 'application/com.github.proto-openapi.spec.v2@v1.0+protobuf';
const PROTOBUF_ANSWERED = 'application/com.github.proto-openapi.spec.v2.v1.0+protobuf';
const KUBECTL_128 = '/usr/lib/google-cloud-sdk/bin/kubectl.1.28';

interface Swagger {
  swagger: string;
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: Array<{ name: string; in: string; type?: string; schema?: { $ref?: string } }>;
        'x-kubernetes-group-version-kind'?: unknown;
      }
    >
  >;
  definitions: Record<
    string,
    {
      properties?: Record<string, { $ref?: string; type?: string; format?: string }>;
      'x-kubernetes-group-version-kind'?: unknown;
    }
  >;
}

test('/openapi/v2 in JSON and protobuf: Swagger 2.0 definitions and paths, an ETag, 304 for a cached copy', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const json = await request<Swagger>(server.url, '/openapi/v2');
  assert.equal(json.status, 200);
  assert.match(json.headers.get('content-type') ?? '', /^application\/json/);
  const doc = json.body;
  assert.equal(doc.swagger, '2.0');
  assert.ok(!json.text.includes('#/components/'), 'every reference points into #/definitions/');
  const deployment = doc.definitions['io.k8s.api.apps.v1.Deployment']!;
  assert.deepEqual(deployment['x-kubernetes-group-version-kind'], [
    { group: 'apps', kind: 'Deployment', version: 'v1' },
  ]);
  assert.equal(deployment.properties!.metadata!.$ref, '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta');
  const intOrString = doc.definitions['io.k8s.api.apps.v1.RollingUpdateDeployment']!.properties!.maxSurge!;
  assert.equal(intOrString.$ref, '#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString');
  assert.equal(doc.definitions['io.k8s.apimachinery.pkg.util.intstr.IntOrString']!.properties, undefined);

  // What kubectl's field-validation check looks for: a PATCH of the kind that takes fieldValidation.
  const patch = doc.paths['/apis/apps/v1/namespaces/{namespace}/deployments/{name}']!.patch!;
  assert.deepEqual(patch['x-kubernetes-group-version-kind'], { group: 'apps', version: 'v1', kind: 'Deployment' });
  assert.ok(patch.parameters!.some((p) => p.name === 'fieldValidation' && p.in === 'query' && p.type === 'string'));
  assert.ok(
    patch.parameters!.some(
      (p) => p.in === 'body' && p.schema?.$ref === '#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch',
    ),
  );

  const pb = await fetch(`${server.url}/openapi/v2`, { headers: { accept: `${PROTOBUF_ASKED}, application/json` } });
  assert.equal(pb.status, 200);
  assert.equal(
    pb.headers.get('content-type'),
    PROTOBUF_ANSWERED,
    "the name Go's mime parser accepts, as kube-openapi answers",
  );
  const bytes = Buffer.from(await pb.arrayBuffer());
  assert.equal(bytes[0], 0x0a, 'field 1 (swagger), a string');
  assert.equal(bytes.toString('latin1', 2, 5), '2.0');
  assert.ok(bytes.includes(Buffer.from('io.k8s.api.apps.v1.Deployment')));
  const etag = pb.headers.get('etag')!;
  assert.match(etag, /^"[0-9A-F]+"$/);
  const cached = await fetch(`${server.url}/openapi/v2`, {
    headers: { accept: PROTOBUF_ASKED, 'if-none-match': etag },
  });
  assert.equal(cached.status, 304);
});

const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              color: {type: string, enum: [red, blue], nullable: true}
`;

const DEPLOYMENT = (image: string, extra = ''): string => `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "${image}"${extra}}]}
`;

test('kubectl 1.28, which reads /openapi/v2 only: apply, strict field validation, explain, custom resources', async (t) => {
  if (!existsSync(KUBECTL_128)) {
    t.skip(`kubectl 1.28 not installed: ${KUBECTL_128} is absent, so the /openapi/v2 client check cannot run`);
    return;
  }
  const server = await serverFor(t, ['--nodes', '0']);
  const k = (args: string[], input?: string) =>
    kubectl(server.url, args, { binary: KUBECTL_128, ...(input === undefined ? {} : { input }) });

  const created = await k(['apply', '-f', '-'], DEPLOYMENT('nginx:1.0'));
  assert.equal(created.code, 0, created.stderr);
  assert.equal(created.stdout, 'deployment.apps/web created\n');
  const updated = await k(['apply', '-f', '-'], DEPLOYMENT('nginx:1.1'));
  assert.equal(updated.code, 0, updated.stderr);
  assert.equal(updated.stdout, 'deployment.apps/web configured\n');
  assert.equal(updated.stderr, '');

  const unknown = await k(['apply', '-f', '-'], DEPLOYMENT('nginx:1.2', ', colour: red'));
  assert.notEqual(unknown.code, 0);
  assert.match(unknown.stderr, /unknown field "spec\.template\.spec\.containers\[0\]\.colour"/);

  const explained = await k(['explain', 'deployment.spec.strategy']);
  assert.equal(explained.code, 0, explained.stderr);
  assert.match(explained.stdout, /FIELD: strategy <DeploymentStrategy>/);

  const crd = await k(['apply', '-f', '-'], CRD);
  assert.equal(crd.code, 0, crd.stderr);
  let widget = await k(
    ['apply', '-f', '-'],
    'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 3, color: red}\n',
  );
  for (
    let i = 0;
    i < 20 && widget.code !== 0 && /the server doesn't have a resource type|no matches for kind/.test(widget.stderr);
    i++
  ) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    widget = await k(
      ['apply', '-f', '-'],
      'apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: default}\nspec: {size: 3, color: red}\n',
    );
  }
  assert.equal(widget.code, 0, widget.stderr);
  assert.equal(widget.stdout, 'widget.example.com/w created\n');
});
