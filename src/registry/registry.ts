import type { KubeObject } from '../api/types.js';
import type { MemoryStore } from '../storage/memory-store.js';
import { groupVersion, resourceKey, type KindInfo } from './types.js';

const BASE_FIELDS = ['metadata.name', 'metadata.namespace'];

/**
 * The one table of served kinds. Routes, discovery, OpenAPI and the store's tables are all derived from it,
 * so serving a new kind (built-in or a CRD at run time) is adding a row.
 */
export class Registry {
  private readonly byResource = new Map<string, KindInfo>();
  private readonly byKind = new Map<string, KindInfo>();
  private readonly listeners: Array<() => void> = [];

  constructor(private readonly store: MemoryStore) {}

  add(info: KindInfo): void {
    this.byResource.set(`${groupVersion(info)}/${info.resource}`, info);
    this.byKind.set(`${groupVersion(info)}/${info.kind}`, info);
    // A kind served from another's storage (KindInfo.storage) shares that table; field selectors of every kind
    // on a table are evaluated on the stored objects.
    if (!info.storage) {
      const key = resourceKey(info);
      const own = fieldsOf(info);
      this.store.register({
        key,
        groupResource: { group: info.group, resource: info.resource },
        indexedFields: info.indexedFields ?? [],
        shareParts: info.shareParts === true,
        fieldsOf: (obj) => {
          const aliases = this.aliasFields(key);
          if (aliases.length === 0) return own(obj);
          const chain = [own, ...aliases].map((f) => f(obj));
          return (field) => {
            for (const get of chain) {
              const value = get(field);
              if (value !== undefined) return value;
            }
            return undefined;
          };
        },
      });
    }
    this.aliases = undefined;
    for (const l of this.listeners) l();
  }

  /** Field getters of the kinds served from another's table, by table (cached; the set of kinds rarely changes). */
  private aliases?: Map<string, Array<ReturnType<typeof fieldsOf>>>;

  private aliasFields(key: string): Array<ReturnType<typeof fieldsOf>> {
    if (!this.aliases) {
      this.aliases = new Map();
      for (const k of this.byResource.values()) {
        if (!k.storage) continue;
        const list = this.aliases.get(resourceKey(k)) ?? [];
        list.push(fieldsOf(k));
        this.aliases.set(resourceKey(k), list);
      }
    }
    return this.aliases.get(key) ?? [];
  }

  remove(info: KindInfo): void {
    this.byResource.delete(`${groupVersion(info)}/${info.resource}`);
    this.byKind.delete(`${groupVersion(info)}/${info.kind}`);
    const stillServed = [...this.byResource.values()].some((k) => !k.storage && resourceKey(k) === resourceKey(info));
    if (!stillServed && !info.storage) this.store.unregister(resourceKey(info));
    this.aliases = undefined;
    for (const l of this.listeners) l();
  }

  /** Called whenever the set of kinds changes (discovery and OpenAPI caches listen). */
  onChange(listener: () => void): void {
    this.listeners.push(listener);
  }

  lookup(group: string, version: string, resource: string): KindInfo | undefined {
    return this.byResource.get(`${group ? `${group}/` : ''}${version}/${resource}`);
  }

  byGroupVersionKind(apiVersion: string, kind: string): KindInfo | undefined {
    return this.byKind.get(`${apiVersion}/${kind}`);
  }

  kinds(): KindInfo[] {
    return [...this.byResource.values()];
  }

  /** Group versions in the order discovery lists them: core first, then groups by name. */
  groupVersions(): Array<{ group: string; version: string; kinds: KindInfo[] }> {
    const map = new Map<string, { group: string; version: string; kinds: KindInfo[] }>();
    for (const info of this.byResource.values()) {
      const key = groupVersion(info);
      let entry = map.get(key);
      if (!entry) map.set(key, (entry = { group: info.group, version: info.version, kinds: [] }));
      entry.kinds.push(info);
    }
    return [...map.values()];
  }

  supportedFields(info: KindInfo): ReadonlySet<string> {
    return new Set([...BASE_FIELDS, ...Object.keys(info.selectableFields ?? {})]);
  }
}

export function fieldsOf(info: KindInfo): (obj: KubeObject) => (field: string) => string | undefined {
  const extra = info.selectableFields ?? {};
  return (obj) => (field) => {
    if (field === 'metadata.name') return obj.metadata.name;
    if (field === 'metadata.namespace') return obj.metadata.namespace ?? '';
    return extra[field]?.(obj);
  };
}
