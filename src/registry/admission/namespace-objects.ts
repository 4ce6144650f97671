import { FieldSelector, LabelSelector } from '../../api/selectors.js';
import type { KubeObject } from '../../api/types.js';
import type { MemoryStore } from '../../storage/memory-store.js';

const EVERYTHING = { label: LabelSelector.everything(), field: new FieldSelector([]) };

/**
 * The objects of a store table in one namespace, as admission plugins read them from their listers: nothing is
 * listed for a namespace that has none (a count, the common case on the write path), else its contiguous range.
 */
export function namespaceObjects(store: MemoryStore, table: string, namespace: string): readonly KubeObject[] {
  if (store.count(table, namespace) === 0) return [];
  return store.list(table, { namespace, ...EVERYTHING }).items;
}
