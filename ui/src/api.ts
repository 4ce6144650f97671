/**
 * The page talks to the server it was loaded from, as any client does: the Kubernetes API and /sim/v1, with the
 * bearer token the user gave (kept for this tab only) when the server runs with --auth.
 */
import type { KubeObject as StoredObject, ObjectMeta } from '../../src/api/types.js';

/** An object as the API serves it: always named. */
export interface KubeObject extends StoredObject {
  metadata: ObjectMeta & { name: string };
}

const TOKEN_KEY = 'kube-sim.token';

let token: string | undefined = sessionStorage.getItem(TOKEN_KEY) ?? undefined;
const tokenListeners = new Set<() => void>();

export function currentToken(): string | undefined {
  return token;
}

export function setToken(value: string | undefined): void {
  token = value === '' ? undefined : value;
  if (token === undefined) sessionStorage.removeItem(TOKEN_KEY);
  else sessionStorage.setItem(TOKEN_KEY, token);
  for (const listener of tokenListeners) listener();
}

export function onTokenChange(listener: () => void): () => void {
  tokenListeners.add(listener);
  return () => tokenListeners.delete(listener);
}

/** A failed request, with the Status the server answered (its reason and message). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Listeners told when a request made with the token in use is answered 401: it is missing or no longer good. (A
 * 401 to a request sent with an earlier token, answered after the user gave another, says nothing of this one.)
 */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export function authHeaders(): Record<string, string> {
  return token === undefined ? {} : { authorization: `Bearer ${token}` };
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  contentType?: string;
  signal?: AbortSignal;
}

/** One request; resolves with the parsed JSON answer, throws an ApiError with the server's message. */
export async function request<T = unknown>(path: string, options: RequestOptions = {}): Promise<T> {
  const sentToken = token;
  const headers: Record<string, string> = { accept: 'application/json', ...authHeaders() };
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json';
    body = JSON.stringify(options.body);
  }
  let reply: Response;
  try {
    reply = await fetch(path, { method: options.method ?? 'GET', headers, body, signal: options.signal ?? null });
  } catch (err) {
    throw new ApiError(0, 'NetworkError', `cannot reach the server: ${err instanceof Error ? err.message : err}`);
  }
  const text = await reply.text();
  let parsed: unknown;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (!reply.ok) {
    if (reply.status === 401 && sentToken === token) for (const listener of unauthorizedListeners) listener();
    const status = parsed as { reason?: string; message?: string } | undefined;
    throw new ApiError(reply.status, status?.reason ?? '', status?.message ?? (text.trim() || reply.statusText));
  }
  return parsed as T;
}

/** What a resource's URLs are made of. */
export interface Resource {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const RESOURCES = {
  Node: { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false },
  Pod: { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true },
  Event: { group: '', version: 'v1', plural: 'events', kind: 'Event', namespaced: true },
  Deployment: { group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment', namespaced: true },
  ReplicaSet: { group: 'apps', version: 'v1', plural: 'replicasets', kind: 'ReplicaSet', namespaced: true },
  StatefulSet: { group: 'apps', version: 'v1', plural: 'statefulsets', kind: 'StatefulSet', namespaced: true },
  DaemonSet: { group: 'apps', version: 'v1', plural: 'daemonsets', kind: 'DaemonSet', namespaced: true },
  Job: { group: 'batch', version: 'v1', plural: 'jobs', kind: 'Job', namespaced: true },
  CronJob: { group: 'batch', version: 'v1', plural: 'cronjobs', kind: 'CronJob', namespaced: true },
} as const satisfies Record<string, Resource>;

export type Kind = keyof typeof RESOURCES;

/** The kinds the page lists and watches, in the order it starts them. */
export const KINDS = Object.keys(RESOURCES) as Kind[];

export function isKind(kind: string): kind is Kind {
  return Object.hasOwn(RESOURCES, kind);
}

/** The collection path of a resource, in one namespace or across all. */
export function collectionPath(resource: Resource, namespace?: string): string {
  const base = resource.group === '' ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
  const ns = resource.namespaced && namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  return `${base}${ns}/${resource.plural}`;
}

export function objectPath(resource: Resource, namespace: string | undefined, name: string, sub?: string): string {
  return `${collectionPath(resource, namespace)}/${encodeURIComponent(name)}${sub ? `/${sub}` : ''}`;
}
