import type { KubeObject } from '../api/types.js';
import type { TableColumn } from './types.js';

/** duration.HumanDuration: the AGE column's format ("45s", "3m20s", "5h", "2d3h", "400d"). */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8)
    return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 365 * 2) return `${days}d`;
  if (hours < 24 * 365 * 8)
    return days % 365 === 0 ? `${Math.floor(days / 365)}y` : `${Math.floor(days / 365)}y${days % 365}d`;
  return `${Math.floor(days / 365)}y`;
}

export function ageOf(timestamp: unknown, now: number): string {
  if (typeof timestamp !== 'string') return '<unknown>';
  return humanDuration(now - Date.parse(timestamp));
}

const splitPaths = new Map<string, readonly string[]>();

/** A dotted path's parts, split once: field selectors and indexes read the same few paths on every write. */
function pathParts(path: string): readonly string[] {
  let parts = splitPaths.get(path);
  if (!parts) {
    if (splitPaths.size > 1000) splitPaths.clear();
    splitPaths.set(path, (parts = path.split('.')));
  }
  return parts;
}

/** Reads a dotted path from an object (no array indices); undefined where absent. */
export function field(obj: unknown, path: string): unknown {
  let current: unknown = obj;
  for (const part of pathParts(path)) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

export function num(obj: KubeObject, path: string): number {
  const v = field(obj, path);
  return typeof v === 'number' ? v : 0;
}

export function str(obj: KubeObject, path: string, fallback = ''): string {
  const v = field(obj, path);
  return typeof v === 'string' ? v : fallback;
}

export function col(
  name: string,
  cell: TableColumn['cell'],
  options: { type?: TableColumn['type']; priority?: number; description?: string; format?: string } = {},
): TableColumn {
  const column: TableColumn = { name, type: options.type ?? 'string', description: options.description ?? name, cell };
  if (options.priority !== undefined) column.priority = options.priority;
  if (options.format !== undefined) column.format = options.format;
  return column;
}

/** "<none>" for empty values, as kubectl's printers show them. */
export function orNone(value: string): string {
  return value === '' ? '<none>' : value;
}

export function selectorString(selector: unknown): string {
  if (typeof selector !== 'object' || selector === null) return '<none>';
  const s = selector as {
    matchLabels?: Record<string, string>;
    matchExpressions?: Array<{ key: string; operator: string; values?: string[] }>;
  };
  const parts: string[] = [];
  for (const [k, v] of Object.entries(s.matchLabels ?? {})) parts.push(`${k}=${v}`);
  for (const e of s.matchExpressions ?? []) {
    const values = (e.values ?? []).join(',');
    if (e.operator === 'In') parts.push(`${e.key} in (${values})`);
    else if (e.operator === 'NotIn') parts.push(`${e.key} notin (${values})`);
    else if (e.operator === 'Exists') parts.push(e.key);
    else if (e.operator === 'DoesNotExist') parts.push(`!${e.key}`);
  }
  return parts.length === 0 ? '<none>' : parts.join(',');
}

export function containerNames(template: unknown): string {
  const containers = field(template, 'spec.containers');
  return Array.isArray(containers) ? containers.map((c) => String((c as { name?: string }).name ?? '')).join(',') : '';
}

export function containerImages(template: unknown): string {
  const containers = field(template, 'spec.containers');
  return Array.isArray(containers)
    ? containers.map((c) => String((c as { image?: string }).image ?? '')).join(',')
    : '';
}
