import type { Gvr } from '../client/client.js';
import type { HttpTransport } from '../client/http.js';

export interface ApiResource {
  gvr: Gvr;
  apiVersion: string;
  kind: string;
  namespaced: boolean;
  verbs: string[];
  names: string[];
}

interface ResourceList {
  groupVersion: string;
  resources: Array<{
    name: string;
    singularName?: string;
    namespaced: boolean;
    kind: string;
    verbs?: string[];
    shortNames?: string[];
  }>;
}

/**
 * What the server serves, from its discovery documents, as kubectl learns it: resolves what a scenario
 * writes (`Deployment`, `deployments`, `deploy`, with an optional apiVersion) to a resource.
 */
export class ApiResources {
  private resources: ApiResource[] = [];

  constructor(private readonly http: HttpTransport) {}

  async load(): Promise<void> {
    const get = async <T>(path: string): Promise<T> => {
      const reply = await this.http({ method: 'GET', path });
      if (reply.status !== 200) throw new Error(`discovery: GET ${path} answered ${reply.status}`);
      return JSON.parse(reply.text) as T;
    };
    const lists: ResourceList[] = [];
    const core = await get<{ versions: string[] }>('/api');
    for (const v of core.versions) lists.push(await get<ResourceList>(`/api/${v}`));
    const groups = await get<{
      groups: Array<{
        name: string;
        preferredVersion?: { groupVersion: string };
        versions: Array<{ groupVersion: string }>;
      }>;
    }>('/apis');
    for (const g of groups.groups) {
      const preferred = g.preferredVersion?.groupVersion ?? g.versions[0]?.groupVersion;
      const ordered = [...new Set([preferred, ...g.versions.map((v) => v.groupVersion)])].filter(
        (v): v is string => v !== undefined,
      );
      for (const gv of ordered) lists.push(await get<ResourceList>(`/apis/${gv}`));
    }
    const out: ApiResource[] = [];
    for (const list of lists) {
      const [group, version] = list.groupVersion.includes('/')
        ? (list.groupVersion.split('/') as [string, string])
        : ['', list.groupVersion];
      for (const r of list.resources) {
        if (r.name.includes('/')) continue;
        out.push({
          gvr: { group, version, resource: r.name },
          apiVersion: list.groupVersion,
          kind: r.kind,
          namespaced: r.namespaced,
          verbs: r.verbs ?? [],
          names: [r.name, r.kind, r.singularName ?? '', ...(r.shortNames ?? [])]
            .filter((n) => n !== '')
            .map((n) => n.toLowerCase()),
        });
      }
    }
    this.resources = out;
  }

  all(): readonly ApiResource[] {
    return this.resources;
  }

  /** Resolves a kind or resource name; throws a message naming what the server has instead. */
  resolve(kindOrResource: string, apiVersion?: string): ApiResource {
    const wanted = kindOrResource.toLowerCase();
    let group: string | undefined;
    let name = wanted;
    // kubectl's "deployments.apps" form
    if (apiVersion === undefined && wanted.includes('.'))
      [name, group] = [wanted.slice(0, wanted.indexOf('.')), wanted.slice(wanted.indexOf('.') + 1)];
    const matches = this.resources.filter(
      (r) =>
        r.names.includes(name) &&
        (apiVersion === undefined || r.apiVersion === apiVersion) &&
        (group === undefined || r.gvr.group === group),
    );
    const found = matches[0];
    if (!found) {
      const where = apiVersion ? ` in ${apiVersion}` : '';
      throw new Error(
        `the server has no resource "${kindOrResource}"${where} (kinds it serves: ${[...new Set(this.resources.map((r) => r.kind))].sort().join(', ')})`,
      );
    }
    return found;
  }

  byKind(apiVersion: string, kind: string): ApiResource | undefined {
    return this.resources.find((r) => r.apiVersion === apiVersion && r.kind === kind);
  }
}
