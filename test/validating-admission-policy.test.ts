import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { startServer, type SimServer } from './helpers/server.js';

// Issue 16: ValidatingAdmissionPolicies and their bindings, applied and exercised with the real kubectl: CEL
// validations with variables and params, messageExpression, Deny and Warn actions, kube-apiserver's texts.

const missing = kubectlMissing();

type Obj = Record<string, unknown>;

const POLICY = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: replica-limit
spec:
  failurePolicy: Fail
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  variables:
  - name: max
    expression: int(params.data.maxReplicas)
  validations:
  - expression: object.spec.replicas <= variables.max
    messageExpression: "'replicas must be no greater than ' + string(variables.max) + ', not ' + string(object.spec.replicas)"
    reason: Invalid
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: replica-limit-prod
spec:
  policyName: replica-limit
  validationActions: [Deny]
  paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector:
      matchLabels: {env: prod}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: default}
data: {maxReplicas: "3"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: team-label
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  matchConditions:
  - name: not-kube-root-ca
    expression: object.metadata.name != 'kube-root-ca.crt'
  validations:
  - expression: has(object.metadata.labels) && 'team' in object.metadata.labels
    message: every ConfigMap needs a team label
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: team-label-warn
spec:
  policyName: team-label
  validationActions: [Warn]
`;

function deployment(namespace: string, replicas: number): string {
  return `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ${namespace}}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`;
}

describe('ValidatingAdmissionPolicy', { skip: missing }, () => {
  let server: SimServer;
  before(async () => {
    server = await startServer(['--nodes', '0']);
    const ns = await kubectl(server.url, ['create', 'namespace', 'prod']);
    assert.equal(ns.code, 0, ns.stderr);
    assert.equal((await kubectl(server.url, ['label', 'namespace', 'prod', 'env=prod'])).code, 0);
    assert.equal((await kubectl(server.url, ['create', 'namespace', 'dev'])).code, 0);
    const applied = await kubectl(server.url, ['apply', '-f', '-'], { input: POLICY });
    assert.equal(applied.code, 0, applied.stderr);
  });
  after(() => server?.stop());

  it('denies with its messageExpression, for the namespaces its binding selects', async () => {
    const denied = await kubectl(server.url, ['apply', '-f', '-'], { input: deployment('prod', 5) });
    assert.notEqual(denied.code, 0);
    assert.equal(
      denied.stderr.trim(),
      "The deployments \"web\" is invalid: : ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be no greater than 3, not 5",
    );
    const status = (await (
      await fetch(`${server.url}/apis/apps/v1/namespaces/prod/deployments`, {
        method: 'POST',
        headers: { 'content-type': 'application/yaml' },
        body: deployment('prod', 4),
      })
    ).json()) as Obj;
    assert.equal(status.code, 422);
    assert.equal(status.reason, 'Invalid');
    assert.equal(
      status.message,
      "deployments.apps \"web\" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: replicas must be no greater than 3, not 4",
    );
    const fine = await kubectl(server.url, ['apply', '-f', '-'], { input: deployment('prod', 2) });
    assert.equal(fine.code, 0, fine.stderr);
    const patched = await kubectl(server.url, [
      '-n',
      'prod',
      'patch',
      'deployment',
      'web',
      '-p',
      '{"spec":{"replicas":9}}',
    ]);
    assert.notEqual(patched.code, 0, 'the policy judges updates');
    assert.match(patched.stderr, /replicas must be no greater than 3, not 9/);
    // A rule that names deployments does not name deployments/scale, in kube-apiserver as here.
    const scaled = await kubectl(server.url, ['-n', 'prod', 'scale', 'deployment', 'web', '--replicas', '9']);
    assert.equal(scaled.code, 0, scaled.stderr);
    assert.equal((await kubectl(server.url, ['-n', 'prod', 'scale', 'deployment', 'web', '--replicas', '2'])).code, 0);
    const elsewhere = await kubectl(server.url, ['apply', '-f', '-'], { input: deployment('dev', 5) });
    assert.equal(elsewhere.code, 0, `dev is not bound: ${elsewhere.stderr}`);
  });

  it('follows its params: a new limit applies at once, a missing one denies (parameterNotFoundAction Deny)', async () => {
    assert.equal(
      (await kubectl(server.url, ['patch', 'configmap', 'limits', '-p', '{"data":{"maxReplicas":"6"}}'])).code,
      0,
    );
    const raised = await kubectl(server.url, ['apply', '-f', '-'], { input: deployment('prod', 5) });
    assert.equal(raised.code, 0, raised.stderr);
    assert.equal((await kubectl(server.url, ['delete', 'configmap', 'limits'])).code, 0);
    const none = await kubectl(server.url, [
      '-n',
      'prod',
      'patch',
      'deployment',
      'web',
      '-p',
      '{"spec":{"replicas":1}}',
    ]);
    assert.notEqual(none.code, 0);
    assert.match(
      none.stderr,
      /ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit-prod' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction/,
    );
  });

  it('warns through kubectl for a Warn binding, and lets the request through', async () => {
    const warned = await kubectl(server.url, ['create', 'configmap', 'unlabelled', '--from-literal=a=1']);
    assert.equal(warned.code, 0, warned.stderr);
    assert.equal(
      warned.stderr.trim(),
      "Warning: Validation failed for ValidatingAdmissionPolicy 'team-label' with binding 'team-label-warn': every ConfigMap needs a team label",
    );
    assert.equal((await kubectl(server.url, ['get', 'configmap', 'unlabelled'])).code, 0);
    const labelled = await kubectl(server.url, ['apply', '-f', '-'], {
      input: 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: labelled, labels: {team: a}}\n',
    });
    assert.equal(labelled.code, 0);
    assert.equal(labelled.stderr, '', 'a labelled ConfigMap passes without a warning');
  });
});
