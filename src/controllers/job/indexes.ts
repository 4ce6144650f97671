import type { KubeObject } from '../../api/types.js';

/**
 * Indexed completion mode (pkg/controller/job/indexed_job_utils.go): each pod carries its index in the
 * `batch.kubernetes.io/job-completion-index` annotation (and label); finished indexes are kept in status as
 * compressed intervals, e.g. "0-2,5,7-9".
 */
export const COMPLETION_INDEX = 'batch.kubernetes.io/job-completion-index';

/** The pod's completion index, or undefined when it has none (or a malformed one). */
export function podIndex(pod: KubeObject): number | undefined {
  const text = pod.metadata.annotations?.[COMPLETION_INDEX] ?? pod.metadata.labels?.[COMPLETION_INDEX];
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  return Number(text);
}

/** "1,3-5" → [1,3,4,5] (ignores values ≥ limit). */
export function parseIndexes(text: string | undefined, limit = Number.MAX_SAFE_INTEGER): number[] {
  if (!text) return [];
  const out: number[] = [];
  for (const part of text.split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part.trim());
    if (!m) continue;
    const from = Number(m[1]);
    const to = Math.min(m[2] === undefined ? from : Number(m[2]), limit - 1);
    for (let i = from; i <= to; i++) out.push(i);
  }
  return out;
}

/** [0,1,2,5,7,8,9] → "0-2,5,7-9". */
export function formatIndexes(indexes: Iterable<number>): string {
  const sorted = [...new Set(indexes)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(i === j ? String(sorted[i]) : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(',');
}
