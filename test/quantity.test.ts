import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  addQuantities,
  compareQuantities,
  formatQuantity,
  milliValue,
  parseQuantity,
  ZERO_QUANTITY,
} from '../src/api/quantity.js';
import { quotaEvaluator } from '../src/api/quota.js';

// Exact quantities as resource.Quantity keeps them: parse, canonical form, sums, and what quota evaluators count.

const q = (s: string) => {
  const parsed = parseQuantity(s);
  assert.ok(parsed, `${s} parses`);
  return parsed;
};

describe('quantities', () => {
  it('print in canonical form, as kube-apiserver stores them', () => {
    const cases: Array<[string, string]> = [
      ['0.5', '500m'],
      ['1500m', '1500m'],
      ['2000m', '2'],
      ['1.5Gi', '1536Mi'],
      ['0.5Ki', '512'],
      ['100000', '100k'],
      ['1e3', '1e3'],
      ['0', '0'],
      ['-2', '-2'],
      ['0.1m', '100u'],
      ['129e6', '129e6'],
      ['128974848', '128974848'],
      ['1024Ei', '1024Ei'],
    ];
    for (const [input, canonical] of cases) assert.equal(formatQuantity(q(input)), canonical, input);
    for (const bad of ['', 'abc', '1.2.3', '1Q', '--1', 'Mi']) assert.equal(parseQuantity(bad), undefined, bad);
  });

  it('add keeping the first non-zero format, exactly past what a float holds', () => {
    assert.equal(formatQuantity(addQuantities(q('128Mi'), q('256Mi'))), '384Mi');
    assert.equal(formatQuantity(addQuantities(ZERO_QUANTITY, q('256Mi'))), '256Mi');
    assert.equal(formatQuantity(addQuantities(q('500m'), q('1'))), '1500m');
    const big = addQuantities(q('8Ei'), q('1'));
    assert.equal(formatQuantity(big), '9223372036854775809');
    assert.equal(compareQuantities(big, q('8Ei')), 1);
    assert.equal(milliValue(q('0.0001')), 1n);
  });

  it('what quota evaluators count: pods, services, claims, objects', () => {
    const pod = {
      metadata: { name: 'p' },
      spec: {
        containers: [
          { name: 'a', resources: { requests: { cpu: '250m', memory: '64Mi' }, limits: { memory: '128Mi' } } },
          { name: 'b', resources: { requests: { cpu: '250m' } } },
        ],
        initContainers: [{ name: 'i', resources: { requests: { cpu: '2' } } }],
      },
      status: { phase: 'Running' },
    };
    const usage = (obj: object, group: string, resource: string) =>
      Object.fromEntries(
        [...quotaEvaluator(group, resource).usage(obj as never)].map(([k, v]) => [k, formatQuantity(v)]),
      );
    assert.deepEqual(usage(pod, '', 'pods'), {
      'count/pods': '1',
      pods: '1',
      cpu: '2',
      'requests.cpu': '2',
      memory: '64Mi',
      'requests.memory': '64Mi',
      'limits.memory': '128Mi',
    });
    assert.deepEqual(usage({ ...pod, status: { phase: 'Succeeded' } }, '', 'pods'), { 'count/pods': '1' });
    assert.deepEqual(usage({ metadata: {}, spec: { type: 'LoadBalancer', ports: [{}, {}] } }, '', 'services'), {
      'count/services': '1',
      services: '1',
      'services.nodeports': '2',
      'services.loadbalancers': '1',
    });
    const claim = { metadata: {}, spec: { storageClassName: 'gold', resources: { requests: { storage: '1.5Gi' } } } };
    assert.deepEqual(usage(claim, '', 'persistentvolumeclaims'), {
      persistentvolumeclaims: '1',
      'count/persistentvolumeclaims': '1',
      'gold.storageclass.storage.k8s.io/persistentvolumeclaims': '1',
      'requests.storage': '1536Mi',
      'gold.storageclass.storage.k8s.io/requests.storage': '1536Mi',
    });
    assert.deepEqual(usage({ metadata: {} }, '', 'configmaps'), { 'count/configmaps': '1', configmaps: '1' });
    assert.deepEqual(usage({ metadata: {} }, 'apps', 'deployments'), { 'count/deployments.apps': '1' });
  });
});
