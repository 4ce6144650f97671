import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Api } from './helpers/http.js';
import { KUBECTL, kubectl, kubectlMissing } from './helpers/kubectl.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';

// kube-sim's discovery against kube-apiserver 1.32's (test/fixtures/discovery-1.32, with its source in the README
// there): every group-version, resource and subresource, with its kind, scope, verbs, short names and categories;
// then what kubectl shows of it (`api-resources -o wide`, `api-versions`).

interface Resource {
  name: string;
  singularName: string;
  namespaced: boolean;
  kind: string;
  verbs: string[];
  shortNames?: string[];
  categories?: string[];
  group?: string;
  version?: string;
}

interface Fixture {
  groupVersions: Record<string, { groupVersion: string; resources: Resource[] }>;
}

const DIR = join(ROOT, 'test/fixtures/discovery-1.32');
const kubeApiserver = JSON.parse(readFileSync(join(DIR, 'resources.json'), 'utf8')) as Fixture;

/**
 * A cluster with metrics-server (as kube-sim is by default) adds exactly its group: metrics-server 0.7's
 * APIResourceList of metrics.k8s.io/v1beta1 (pkg/api: get and list, no singular name).
 */
const METRICS_SERVER: Fixture['groupVersions'] = {
  'metrics.k8s.io/v1beta1': {
    groupVersion: 'metrics.k8s.io/v1beta1',
    resources: [
      { name: 'nodes', singularName: '', namespaced: false, kind: 'NodeMetrics', verbs: ['get', 'list'] },
      { name: 'pods', singularName: '', namespaced: true, kind: 'PodMetrics', verbs: ['get', 'list'] },
    ],
  },
};
const fixture: Fixture = { groupVersions: { ...kubeApiserver.groupVersions, ...METRICS_SERVER } };
const apiVersions = `${[
  ...readFileSync(join(DIR, 'api-versions.txt'), 'utf8').trimEnd().split('\n'),
  ...Object.keys(METRICS_SERVER),
]
  .sort()
  .join('\n')}\n`;

/**
 * Subresources 1.32 serves that kube-sim does not yet: the node proxy (to the kubelet's own API). The test fails when
 * one of them appears (take it off this list) as when any other entry differs.
 */
const NOT_YET_SERVED: Record<string, string[]> = {
  v1: ['nodes/proxy'],
};

/** What the comparison looks at of an APIResource (storageVersionHash aside), in a stable form. */
function normalized(r: Resource): string {
  return JSON.stringify({
    name: r.name,
    singularName: r.singularName,
    namespaced: r.namespaced,
    kind: r.kind,
    verbs: [...r.verbs].sort(),
    shortNames: r.shortNames ?? [],
    categories: r.categories ?? [],
    group: r.group ?? '',
    version: r.version ?? '',
  });
}

describe('discovery equals kube-apiserver 1.32 with metrics-server', () => {
  let server: SimServer;
  let api: Api;
  before(async () => {
    server = await startServer(['--nodes', '0']);
    api = new Api(server.url);
  });
  after(async () => {
    await server.stop();
  });

  it('serves the same group-versions as /api and /apis list them', async () => {
    const core = await api.expect<{ versions: string[] }>(200, '/api');
    const groups = await api.expect<{ groups: Array<{ versions: Array<{ groupVersion: string }> }> }>(200, '/apis');
    const served = [...core.versions, ...groups.groups.flatMap((g) => g.versions.map((v) => v.groupVersion))].sort();
    assert.deepEqual(served, Object.keys(fixture.groupVersions).sort());
  });

  for (const [gv, expected] of Object.entries(fixture.groupVersions)) {
    it(`${gv}: every resource and subresource as 1.32 lists it`, async () => {
      const path = gv === 'v1' ? '/api/v1' : `/apis/${gv}`;
      const list = await api.expect<{ groupVersion: string; resources: Resource[] }>(200, path);
      assert.equal(list.groupVersion, gv);
      const actual = new Map(list.resources.map((r) => [r.name, normalized(r)]));
      const wanted = new Map(expected.resources.map((r) => [r.name, normalized(r)]));
      assert.deepEqual(
        [...actual.keys()].filter((n) => !wanted.has(n)),
        [],
        `${gv} serves resources 1.32 does not`,
      );
      assert.deepEqual(
        [...wanted.keys()].filter((n) => !actual.has(n)),
        NOT_YET_SERVED[gv] ?? [],
        `${gv} lacks resources 1.32 serves`,
      );
      for (const [name, want] of wanted) if (actual.has(name)) assert.equal(actual.get(name), want, `${gv} ${name}`);
    });
  }

  it('kubectl api-resources -o wide prints the rows a 1.32 cluster prints', async (t) => {
    const missing = kubectlMissing();
    if (missing) return t.skip(missing);
    const r = await kubectl(server.url, ['api-resources', '-o', 'wide'], { binary: KUBECTL });
    assert.equal(r.code, 0, r.stderr);
    const [header, ...lines] = r.stdout.split('\n').filter((l) => l.trim() !== '');
    const columns = ['NAME', 'SHORTNAMES', 'APIVERSION', 'NAMESPACED', 'KIND', 'VERBS', 'CATEGORIES'];
    const starts = columns.map((c) => header!.indexOf(c));
    assert.ok(
      starts.every((s) => s >= 0),
      header,
    );
    const cell = (line: string, i: number): string =>
      line.slice(starts[i], i + 1 < starts.length ? starts[i + 1] : undefined).trim();
    const actual = lines.map((l) => columns.map((_, i) => cell(l, i)).join(' | '));
    // kubectl lists each group's preferred version (autoscaling/v2), sorted by group, then name.
    const preferred = new Map<string, string>();
    for (const gv of Object.keys(fixture.groupVersions)) {
      const group = gv.includes('/') ? gv.split('/')[0]! : '';
      const version = gv.split('/').pop()!;
      const current = preferred.get(group);
      if (!current || version > current) preferred.set(group, version);
    }
    const expected = [...preferred.entries()]
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .flatMap(([group, version]) => {
        const gv = group ? `${group}/${version}` : version;
        return fixture.groupVersions[gv]!.resources.filter((res) => !res.name.includes('/'))
          .sort((a, b) => (a.name < b.name ? -1 : 1))
          .map((res) =>
            [
              res.name,
              (res.shortNames ?? []).join(','),
              gv,
              String(res.namespaced),
              res.kind,
              [...res.verbs].sort().join(','),
              (res.categories ?? []).join(','),
            ].join(' | '),
          );
      });
    assert.deepEqual(actual, expected);
  });

  it('kubectl api-versions prints the 1.32 list', async (t) => {
    const missing = kubectlMissing();
    if (missing) return t.skip(missing);
    const r = await kubectl(server.url, ['api-versions']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, apiVersions);
  });
});
