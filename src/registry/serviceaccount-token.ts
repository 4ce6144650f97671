import { rfc3339 } from '../clock/clock.js';
import { Errors, FieldErrors } from '../api/errors.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import {
  BOUND_RESOURCES,
  ISSUER,
  ServiceAccountTokens,
  type BoundKind,
  type BoundObject,
  type TokenObjects,
} from '../auth/service-account-tokens.js';
import type { GenericStore } from './generic-store.js';
import { resourceKey, type KindInfo } from './types.js';

/**
 * serviceaccounts/NAME/token, the TokenRequest subresource (kube's pkg/registry/core/serviceaccount/storage
 * token.go): it checks the request against the stored ServiceAccount and bound object, and has auth's issuer
 * sign the token.
 */
const DEFAULT_EXPIRATION_SECONDS = 3600;
const MIN_EXPIRATION_SECONDS = 600;

const issuers = new WeakMap<GenericStore, ServiceAccountTokens>();

/**
 * The token issuer of a cluster (one per store, made on first use): TokenRequest signs with it, and the API
 * server's authenticator (cluster/auth-backend.ts) checks with the same keys.
 */
export function serviceAccountTokens(api: GenericStore): ServiceAccountTokens {
  let tokens = issuers.get(api);
  if (!tokens) {
    const objects: TokenObjects = {
      clock: api.ctx.clock,
      random: api.ctx.random,
      get: (resource, namespace, name) => {
        const info = api.registry.lookup('', 'v1', resource);
        return info ? api.store.get(resourceKey(info), namespace, name) : undefined;
      },
    };
    issuers.set(api, (tokens = new ServiceAccountTokens(objects)));
  }
  return tokens;
}

/** TokenRequest's spec.boundObjectRef: the Pod (running as this ServiceAccount), Secret or Node the token dies with. */
function boundObject(
  api: GenericStore,
  saName: string,
  namespace: string | undefined,
  ref: Record<string, unknown>,
): Partial<Record<BoundKind, BoundObject>> {
  const kind = String(ref.kind ?? '');
  const apiVersion = String(ref.apiVersion ?? '');
  const name = String(ref.name ?? '');
  const kinds: Record<string, BoundKind> = { Pod: 'pod', Secret: 'secret', Node: 'node' };
  const bound = kinds[kind];
  if (!bound || apiVersion.includes('/')) {
    const group = apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
    const version = apiVersion.includes('/') ? apiVersion.split('/')[1] : apiVersion;
    throw Errors.badRequest(`cannot bind token to object of type ${group}/${version}, Kind=${kind}`);
  }
  const info = api.registry.lookup('', 'v1', BOUND_RESOURCES[bound])!;
  const obj = api.store.get(resourceKey(info), bound === 'node' ? undefined : namespace, name);
  if (!obj) throw Errors.notFound({ group: '', resource: BOUND_RESOURCES[bound] }, name);
  if (bound === 'pod' && (obj.spec as { serviceAccountName?: unknown } | undefined)?.serviceAccountName !== saName) {
    throw Errors.badRequest(
      `cannot bind token for serviceaccount ${JSON.stringify(saName)} to pod running with different serviceaccount name.`,
    );
  }
  const uid = obj.metadata.uid ?? '';
  if (typeof ref.uid === 'string' && ref.uid !== '' && ref.uid !== uid) {
    throw Errors.conflict(
      { group: '', resource: kind },
      name,
      `the UID in the bound object reference (${ref.uid}) does not match the UID in record. The object might have been deleted and then recreated`,
    );
  }
  const result: Partial<Record<BoundKind, BoundObject>> = { [bound]: { name, uid } };
  // A pod-bound token also names the pod's node (ServiceAccountTokenPodNodeInfo).
  const nodeName = bound === 'pod' ? (obj.spec as { nodeName?: unknown } | undefined)?.nodeName : undefined;
  if (typeof nodeName === 'string' && nodeName !== '') {
    const node = api.store.get(resourceKey(api.registry.lookup('', 'v1', 'nodes')!), undefined, nodeName);
    if (node) result.node = { name: nodeName, uid: node.metadata.uid ?? '' };
  }
  return result;
}

/**
 * POST serviceaccounts/NAME/token (TokenRequest, authentication.k8s.io/v1), in TokenREST.Create's order: the
 * names in the body must match the URL, the ServiceAccount must exist, then spec.expirationSeconds (default 1 h)
 * must be at least 10 minutes; spec.audiences default to the API server's; spec.boundObjectRef ties the token
 * to a Pod, Secret or Node.
 */
export function createServiceAccountToken(
  api: GenericStore,
  info: KindInfo,
  namespace: string | undefined,
  name: string,
  body: unknown,
  options: { dryRun?: boolean },
): KubeObject {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'TokenRequest' is not a JSON object");
  if (body.kind !== undefined && body.kind !== 'TokenRequest')
    throw Errors.badRequest(
      `the body of a serviceaccounts/token request must be a TokenRequest, not ${String(body.kind)}`,
    );
  const spec = isPlainObject(body.spec) ? body.spec : {};
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (typeof meta.name === 'string' && meta.name !== '' && meta.name !== name) {
    throw Errors.invalid('authentication.k8s.io', 'TokenRequest', name, [
      FieldErrors.invalid('metadata.name', meta.name, 'must match the service account name if specified'),
    ]);
  }
  if (typeof meta.namespace === 'string' && meta.namespace !== '' && meta.namespace !== namespace) {
    throw Errors.invalid('authentication.k8s.io', 'TokenRequest', name, [
      FieldErrors.invalid(
        'metadata.namespace',
        meta.namespace,
        'must match the service account namespace if specified',
      ),
    ]);
  }
  const serviceAccount = api.store.get(resourceKey(info), namespace, name);
  if (!serviceAccount) throw Errors.notFound({ group: '', resource: 'serviceaccounts' }, name);
  // SetDefaults_TokenRequestSpec: an unset expirationSeconds is an hour (an explicit 0 is invalid).
  const expirationSeconds =
    spec.expirationSeconds === undefined || spec.expirationSeconds === null
      ? DEFAULT_EXPIRATION_SECONDS
      : spec.expirationSeconds;
  if (typeof expirationSeconds !== 'number' || !Number.isInteger(expirationSeconds))
    throw Errors.badRequest('spec.expirationSeconds must be an integer');
  const audiences = Array.isArray(spec.audiences) && spec.audiences.length > 0 ? spec.audiences : [ISSUER];
  if (!audiences.every((a): a is string => typeof a === 'string'))
    throw Errors.badRequest('spec.audiences must be a list of strings');
  const causes = [];
  if (expirationSeconds < MIN_EXPIRATION_SECONDS)
    causes.push(
      FieldErrors.invalid(
        'spec.expirationSeconds',
        expirationSeconds,
        'may not specify a duration less than 10 minutes',
      ),
    );
  if (expirationSeconds > 2 ** 32)
    causes.push(
      FieldErrors.invalid(
        'spec.expirationSeconds',
        expirationSeconds,
        'may not specify a duration larger than 2^32 seconds',
      ),
    );
  if (causes.length > 0) throw Errors.invalid('authentication.k8s.io', 'TokenRequest', '', causes);
  const bound = isPlainObject(spec.boundObjectRef) ? boundObject(api, name, namespace, spec.boundObjectRef) : {};
  const now = api.ctx.clock.now();
  const { token, expiresAt } = options.dryRun
    ? { token: '', expiresAt: now + expirationSeconds * 1000 }
    : serviceAccountTokens(api).issue(serviceAccount, audiences, expirationSeconds, bound);
  return {
    kind: 'TokenRequest',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { name, namespace, creationTimestamp: rfc3339(now) },
    spec: {
      audiences,
      expirationSeconds,
      boundObjectRef: isPlainObject(spec.boundObjectRef) ? spec.boundObjectRef : null,
    },
    status: { token, expirationTimestamp: rfc3339(expiresAt) },
  };
}
