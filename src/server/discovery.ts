import { createHash } from 'node:crypto';
import type { Registry } from '../registry/registry.js';
import { groupVersion, type KindInfo } from '../registry/types.js';

/**
 * Discovery documents, derived from the registry table and rebuilt only when the set of kinds changes:
 * the legacy APIVersions/APIGroupList/APIResourceList and the aggregated APIGroupDiscoveryList kubectl asks for first.
 */
const STANDARD_VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export interface Subresource {
  name: string;
  kind: string;
  group?: string;
  version?: string;
  verbs: string[];
}

export function subresourcesOf(info: KindInfo): Subresource[] {
  const subs: Subresource[] = [];
  if (info.status) subs.push({ name: 'status', kind: info.kind, verbs: ['get', 'patch', 'update'] });
  if (info.scale)
    subs.push({ name: 'scale', kind: 'Scale', group: 'autoscaling', version: 'v1', verbs: ['get', 'patch', 'update'] });
  for (const extra of info.extraSubresources ?? []) subs.push(extra);
  return subs;
}

function storageVersionHash(info: KindInfo): string {
  return createHash('sha256').update(`${info.group}/${info.version}/${info.kind}`).digest('base64').slice(0, 11);
}

function legacyResourceList(gv: string, kinds: KindInfo[]): unknown {
  const resources: unknown[] = [];
  for (const info of [...kinds].sort((a, b) => a.resource.localeCompare(b.resource))) {
    const entry: Record<string, unknown> = {
      name: info.resource,
      singularName: info.singular,
      namespaced: info.namespaced,
      kind: info.kind,
      verbs: info.verbs ?? STANDARD_VERBS,
    };
    if (info.shortNames?.length) entry.shortNames = info.shortNames;
    if (info.categories?.length) entry.categories = info.categories;
    // Only kinds kept in storage have a storage version (a computed kind's REST storage is no genericregistry.Store).
    if (!info.computed) entry.storageVersionHash = storageVersionHash(info);
    resources.push(entry);
    for (const sub of subresourcesOf(info)) {
      const s: Record<string, unknown> = {
        name: `${info.resource}/${sub.name}`,
        singularName: '',
        namespaced: info.namespaced,
        kind: sub.kind,
        verbs: sub.verbs,
      };
      if (sub.group !== undefined) s.group = sub.group;
      if (sub.version !== undefined) s.version = sub.version;
      resources.push(s);
    }
  }
  return { kind: 'APIResourceList', apiVersion: 'v1', groupVersion: gv, resources };
}

function aggregatedResource(info: KindInfo): unknown {
  const entry: Record<string, unknown> = {
    resource: info.resource,
    responseKind: { group: info.group, version: info.version, kind: info.kind },
    scope: info.namespaced ? 'Namespaced' : 'Cluster',
    singularResource: info.singular,
    verbs: info.verbs ?? STANDARD_VERBS,
  };
  if (info.shortNames?.length) entry.shortNames = info.shortNames;
  if (info.categories?.length) entry.categories = info.categories;
  const subs = subresourcesOf(info);
  if (subs.length > 0) {
    entry.subresources = subs.map((sub) => ({
      subresource: sub.name,
      responseKind: { group: sub.group ?? info.group, version: sub.version ?? info.version, kind: sub.kind },
      verbs: sub.verbs,
    }));
  }
  return entry;
}

export class Discovery {
  private cache = new Map<string, string>();

  constructor(
    private readonly registry: Registry,
    private readonly serverAddress: () => string,
  ) {
    registry.onChange(() => this.cache.clear());
  }

  private cached(key: string, build: () => unknown): string {
    let text = this.cache.get(key);
    if (text === undefined) {
      text = JSON.stringify(build());
      this.cache.set(key, text);
    }
    return text;
  }

  private groups(): Array<{ group: string; versions: Array<{ version: string; kinds: KindInfo[] }> }> {
    const byGroup = new Map<string, Array<{ version: string; kinds: KindInfo[] }>>();
    for (const gv of this.registry.groupVersions()) {
      let versions = byGroup.get(gv.group);
      if (!versions) byGroup.set(gv.group, (versions = []));
      versions.push({ version: gv.version, kinds: gv.kinds });
    }
    return [...byGroup.entries()].map(([group, versions]) => ({
      group,
      versions: versions.sort((a, b) => compareVersions(b.version, a.version)),
    }));
  }

  apiVersions(): string {
    return this.cached('api', () => ({
      kind: 'APIVersions',
      versions: ['v1'],
      serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: this.serverAddress() }],
    }));
  }

  apiGroupList(): string {
    return this.cached('apis', () => ({
      kind: 'APIGroupList',
      apiVersion: 'v1',
      groups: this.groups()
        .filter((g) => g.group !== '')
        .map((g) => ({
          name: g.group,
          versions: g.versions.map((v) => ({ groupVersion: `${g.group}/${v.version}`, version: v.version })),
          preferredVersion: { groupVersion: `${g.group}/${g.versions[0]!.version}`, version: g.versions[0]!.version },
        })),
    }));
  }

  apiGroup(group: string): string | undefined {
    const g = this.groups().find((x) => x.group === group && group !== '');
    if (!g) return undefined;
    return this.cached(`group:${group}`, () => ({
      kind: 'APIGroup',
      apiVersion: 'v1',
      name: g.group,
      versions: g.versions.map((v) => ({ groupVersion: `${g.group}/${v.version}`, version: v.version })),
      preferredVersion: { groupVersion: `${g.group}/${g.versions[0]!.version}`, version: g.versions[0]!.version },
    }));
  }

  resourceList(group: string, version: string): string | undefined {
    const gv = this.registry.groupVersions().find((x) => x.group === group && x.version === version);
    if (!gv) return undefined;
    return this.cached(`gv:${group}/${version}`, () => legacyResourceList(groupVersion(gv), gv.kinds));
  }

  /** The aggregated document for /api (legacy: true) or /apis, in apidiscovery.k8s.io `version` (v2 or v2beta1). */
  aggregated(legacy: boolean, version: 'v2' | 'v2beta1'): string {
    return this.cached(`agg:${legacy}:${version}`, () => ({
      kind: 'APIGroupDiscoveryList',
      apiVersion: `apidiscovery.k8s.io/${version}`,
      metadata: {},
      items: this.groups()
        .filter((g) => (g.group === '') === legacy)
        .map((g) => ({
          metadata: g.group === '' ? { creationTimestamp: null } : { name: g.group, creationTimestamp: null },
          versions: g.versions.map((v) => ({
            version: v.version,
            resources: [...v.kinds].sort((a, b) => a.resource.localeCompare(b.resource)).map(aggregatedResource),
            freshness: 'Current',
          })),
        })),
    }));
  }
}

/** Kubernetes version priority: GA > beta > alpha, higher numbers first (v2 > v1 > v1beta2 > v1beta1 > v1alpha1). */
export function compareVersions(a: string, b: string): number {
  const parse = (v: string): [number, number, number] => {
    const m = /^v(\d+)(?:(alpha|beta)(\d+))?$/.exec(v);
    if (!m) return [-1, 0, 0];
    const stage = m[2] === 'alpha' ? 0 : m[2] === 'beta' ? 1 : 2;
    return [stage, Number(m[1]), Number(m[3] ?? 0)];
  };
  const [sa, ma, na] = parse(a);
  const [sb, mb, nb] = parse(b);
  return sa - sb || ma - mb || na - nb;
}
