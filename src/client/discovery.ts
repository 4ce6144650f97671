import type { Gvr } from './client.js';
import { errorOf, type HttpTransport } from './http.js';

/** A resource an API server serves, as its discovery documents describe it. */
export interface DiscoveredResource {
  gvr: Gvr;
  apiVersion: string;
  kind: string;
  namespaced: boolean;
}

interface ApiResourceList {
  resources?: Array<{ name?: string; kind?: string; namespaced?: boolean; verbs?: string[] }>;
}

interface ApiGroupList {
  groups?: Array<{ name?: string; preferredVersion?: { version?: string }; versions?: Array<{ version?: string }> }>;
}

async function getJson<T>(transport: HttpTransport, path: string): Promise<T> {
  const reply = await transport({ method: 'GET', path });
  if (reply.status !== 200) throw errorOf(reply, `GET ${path}`);
  return JSON.parse(reply.text) as T;
}

/**
 * What a controller manager learns from discovery (client-go's ServerPreferredResources): for core v1 and each
 * group's preferred version, the resources one can list and watch (no subresources), which is what the garbage
 * collector, the namespace controller and the quota controller go over.
 */
export async function discoverResources(transport: HttpTransport): Promise<DiscoveredResource[]> {
  const versions: Array<{ group: string; version: string; path: string }> = [
    { group: '', version: 'v1', path: '/api/v1' },
  ];
  const groups = await getJson<ApiGroupList>(transport, '/apis');
  for (const g of groups.groups ?? []) {
    const version = g.preferredVersion?.version ?? g.versions?.[0]?.version;
    if (g.name && version) versions.push({ group: g.name, version, path: `/apis/${g.name}/${version}` });
  }
  const lists = await Promise.all(
    versions.map(async (v) => {
      try {
        return { ...v, list: await getJson<ApiResourceList>(transport, v.path) };
      } catch {
        // An aggregated API whose server is down (503): the others are still served, as client-go skips it.
        return { ...v, list: {} };
      }
    }),
  );
  const out: DiscoveredResource[] = [];
  for (const { group, version, list } of lists) {
    for (const r of list.resources ?? []) {
      if (!r.name || r.name.includes('/') || !r.kind) continue;
      const verbs = r.verbs ?? [];
      if (!verbs.includes('list') || !verbs.includes('watch')) continue;
      out.push({
        gvr: { group, version, resource: r.name },
        apiVersion: group === '' ? version : `${group}/${version}`,
        kind: r.kind,
        namespaced: r.namespaced === true,
      });
    }
  }
  return out;
}

/** The same resources, in the same order: whether a new discovery changed nothing. */
export function sameResources(a: readonly DiscoveredResource[], b: readonly DiscoveredResource[]): boolean {
  if (a.length !== b.length) return false;
  return a.every((r, i) => {
    const o = b[i]!;
    return r.apiVersion === o.apiVersion && r.kind === o.kind && r.gvr.resource === o.gvr.resource;
  });
}
