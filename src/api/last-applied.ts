import {
  type ApplyResult,
  ApplyConflicts,
  appliedFieldsMatching,
  serverSideApply,
  type WriteContext,
} from './managed-fields.js';
import { isPlainObject, type KubeObject } from './types.js';

/**
 * Moving from client-side to server-side apply, as kube-apiserver's field manager does for the "kubectl" manager
 * (k8s.io/apiserver fieldmanager: lastappliedmanager.go and lastappliedupdater.go):
 *
 * - A conflict is no conflict when the field is in the object's last-applied-configuration with the value it has
 *   live: kubectl applied it client-side, so `kubectl apply --server-side` takes it over. If every conflict is such
 *   a field the apply is forced; otherwise the 409 names only the others.
 * - After a successful apply, an object that has the annotation gets it rewritten to the applied configuration, so
 *   a later client-side `kubectl apply` diffs against what was last applied, whichever way.
 *
 * Worked example: `kubectl apply` created ConfigMap c with data {k: v1} (kubectl-client-side-apply owns f:data.f:k,
 * the annotation says k: v1); `kubectl apply --server-side` with k: v2 conflicts on .data.k with
 * kubectl-client-side-apply, but the annotation's k is the live v1, so the apply is forced: kubectl owns .data.k,
 * the live value is v2 and so is the annotation's. Had `kubectl edit` changed k to v9 meanwhile, the annotation's
 * v1 would not be live and the conflict (with kubectl-edit) would stand.
 */
export const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/** Only kubectl's own server-side apply is upgraded; another field manager opts out. */
const KUBECTL_MANAGER = 'kubectl';

/** apimachinery's TotalAnnotationSizeLimitB: past it the annotation is dropped rather than failing the apply. */
const TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024;

/**
 * serverSideApply with the client-side apply upgrade. `appliedConfig` is the request body as sent: it becomes the
 * new last-applied-configuration.
 */
export function applyAfterClientSideApply(
  live: KubeObject | undefined,
  applied: KubeObject,
  appliedConfig: Record<string, unknown>,
  ctx: WriteContext,
  force: boolean,
  gr: { group: string; resource: string },
  name: string,
): ApplyResult {
  let result: ApplyResult;
  try {
    result = serverSideApply(live, applied, ctx, force, gr, name);
  } catch (err) {
    if (!(err instanceof ApplyConflicts) || ctx.manager !== KUBECTL_MANAGER || !live) throw err;
    const allowed = fieldsLastAppliedAsLive(live, ctx);
    if (!allowed) throw err;
    const remaining = err.conflicts.filter((c) => !allowed.has(c.path));
    if (remaining.length > 0) throw new ApplyConflicts(remaining, gr, name);
    result = serverSideApply(live, applied, ctx, true, gr, name);
  }
  if (ctx.manager !== KUBECTL_MANAGER || !lastAppliedOf(result.object)) return result;
  return { ...result, object: withLastApplied(result.object, lastAppliedConfiguration(appliedConfig)) };
}

function lastAppliedOf(obj: KubeObject): string | undefined {
  const annotations = obj.metadata.annotations;
  const value = isPlainObject(annotations) ? annotations[LAST_APPLIED] : undefined;
  return typeof value === 'string' && value !== '' ? value : undefined;
}

/**
 * The fields of the live object's last-applied-configuration that still hold the values it applied; undefined
 * when there is none, it does not decode, or it was written for another version than the request's.
 */
function fieldsLastAppliedAsLive(live: KubeObject, ctx: WriteContext): Set<string> | undefined {
  const text = lastAppliedOf(live);
  if (text === undefined) return undefined;
  let config: unknown;
  try {
    config = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (!isPlainObject(config) || config.apiVersion !== ctx.apiVersion) return undefined;
  if (config.metadata !== undefined && !isPlainObject(config.metadata)) return undefined;
  return appliedFieldsMatching({ ...config, metadata: config.metadata ?? {} } as KubeObject, live, ctx);
}

/** The applied configuration without its own last-applied annotation, as Go's unstructured JSON encoder writes it. */
function lastAppliedConfiguration(appliedConfig: Record<string, unknown>): string {
  let config = appliedConfig;
  const metadata = config.metadata;
  if (isPlainObject(metadata) && isPlainObject(metadata.annotations) && LAST_APPLIED in metadata.annotations) {
    const { [LAST_APPLIED]: _, ...annotations } = metadata.annotations;
    config = { ...config, metadata: { ...metadata, annotations } };
  }
  return `${goJson(config)}\n`;
}

function withLastApplied(obj: KubeObject, value: string): KubeObject {
  const annotations: Record<string, unknown> = { ...obj.metadata.annotations, [LAST_APPLIED]: value };
  let size = 0;
  for (const [k, v] of Object.entries(annotations)) size += Buffer.byteLength(k) + Buffer.byteLength(String(v));
  if (size > TOTAL_ANNOTATION_SIZE_LIMIT) delete annotations[LAST_APPLIED];
  return { ...obj, metadata: { ...obj.metadata, annotations } } as KubeObject;
}

/**
 * JSON as Go's encoding/json writes a map[string]interface{}: keys sorted, and <, >, &, U+2028 and U+2029
 * escaped (its HTML-safe default), so that the annotation is the text kube-apiserver would store.
 */
export function goJson(value: unknown): string {
  return JSON.stringify(sortedKeys(value)).replace(/[<>&\u2028\u2029]/g, (c) => GO_ESCAPES[c]!);
}

const GO_ESCAPES: Readonly<Record<string, string>> = {
  '<': '\\u003c',
  '>': '\\u003e',
  '&': '\\u0026',
  '\u2028': '\\u2028',
  '\u2029': '\\u2029',
};

function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(value).sort()) out[k] = sortedKeys(value[k]);
  return out;
}
