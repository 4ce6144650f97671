import { stringify as toYaml } from 'yaml';
import type { KubeObject } from '../api/types.js';

/**
 * Serialise once: stored objects never change after they are written, so their JSON text is cached beside
 * them and reused by every list, get and watch event that carries them.
 */
const jsonCache = new WeakMap<object, string>();

export function jsonOf(obj: object): string {
  let text = jsonCache.get(obj);
  if (text === undefined) {
    text = JSON.stringify(obj);
    jsonCache.set(obj, text);
  }
  return text;
}

/** A list as JSON, splicing in each item's cached text instead of re-serialising it. */
export function listJson(head: { apiVersion: string; kind: string; metadata: object }, items: readonly KubeObject[]): string {
  const parts = new Array<string>(items.length);
  for (let i = 0; i < items.length; i++) parts[i] = jsonOf(items[i]!);
  return `{"kind":${JSON.stringify(head.kind)},"apiVersion":${JSON.stringify(head.apiVersion)},"metadata":${JSON.stringify(head.metadata)},"items":[${parts.join(',')}]}`;
}

export type OutputFormat = 'json' | 'yaml';

export function render(value: unknown, format: OutputFormat): string {
  if (format === 'yaml') return toYaml(value, { lineWidth: 0 });
  return typeof value === 'object' && value !== null ? jsonOf(value) : JSON.stringify(value);
}
