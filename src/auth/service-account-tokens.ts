import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { rfc3339 } from '../clock/clock.js';
import { Errors, FieldErrors } from '../api/errors.js';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { GenericStore } from '../registry/generic-store.js';
import { resourceKey, type KindInfo } from '../registry/types.js';
import { serviceAccountGroups, serviceAccountUsername, type UserInfo } from './user.js';

/** kubeadm's --service-account-issuer; --api-audiences defaults to it, so it is also the audience tokens get. */
export const ISSUER = 'https://kubernetes.default.svc.cluster.local';
const DEFAULT_EXPIRATION_SECONDS = 3600;
const MIN_EXPIRATION_SECONDS = 600;

/** A Pod, Secret or Node a token is bound to: the token dies with it (deleted, or recreated with another uid). */
interface BoundObject {
  name: string;
  uid: string;
}

type BoundKind = 'pod' | 'secret' | 'node';

interface Claims {
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  iss: string;
  jti: string;
  sub: string;
  'kubernetes.io': { namespace: string; serviceaccount: BoundObject; pod?: BoundObject; secret?: BoundObject; node?: BoundObject };
}

const BOUND_RESOURCES: Record<BoundKind, string> = { pod: 'pods', secret: 'secrets', node: 'nodes' };

const base64url = (data: Buffer | string): string => Buffer.from(data).toString('base64url');

/**
 * Signs and checks ServiceAccount tokens: ES256 JWTs with the claims kube-apiserver puts in bound tokens.
 * The key pair is made when first needed and lives as long as the cluster (tokens do not survive a restart).
 * node:crypto signs synchronously, which the TokenRequest subresource (a synchronous store call) needs.
 */
export class ServiceAccountTokens {
  private keys?: { privateKey: KeyObject; publicKey: KeyObject; kid: string };

  constructor(private readonly api: GenericStore) {}

  private keyPair(): { privateKey: KeyObject; publicKey: KeyObject; kid: string } {
    if (!this.keys) this.keys = withKid(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
    return this.keys;
  }

  /**
   * Signs with the key kept in `file` (PEM, made with mode 0600 when missing), as kube-apiserver's
   * --service-account-key-file: with --data, tokens issued before a restart stay valid after it.
   */
  useKeyFile(file: string): void {
    if (existsSync(file)) {
      this.keys = withKid(createPrivateKey(readFileSync(file, 'utf8')));
      return;
    }
    const keys = withKid(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    this.keys = keys;
  }

  issue(serviceAccount: KubeObject, audiences: string[], expirationSeconds: number, bound: Partial<Record<BoundKind, BoundObject>> = {}): { token: string; expiresAt: number } {
    const { privateKey, kid } = this.keyPair();
    const now = Math.floor(this.api.ctx.clock.now() / 1000);
    const namespace = serviceAccount.metadata.namespace!;
    const name = serviceAccount.metadata.name!;
    const claims: Claims = {
      aud: audiences,
      exp: now + expirationSeconds,
      iat: now,
      nbf: now,
      iss: ISSUER,
      jti: this.api.ctx.random.uuid(),
      sub: serviceAccountUsername(namespace, name),
      'kubernetes.io': { namespace, serviceaccount: { name, uid: serviceAccount.metadata.uid ?? '' }, ...bound },
    };
    const signingInput = `${base64url(JSON.stringify({ alg: 'ES256', kid }))}.${base64url(JSON.stringify(claims))}`;
    const signature = sign('sha256', Buffer.from(signingInput), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return { token: `${signingInput}.${base64url(signature)}`, expiresAt: claims.exp * 1000 };
  }

  /**
   * The user a token stands for, or undefined when it is not one of ours, is expired, is for another audience, or
   * names a ServiceAccount that no longer exists with that uid (a deleted and re-created account's old tokens die).
   */
  authenticate(token: string): UserInfo | undefined {
    const parts = token.split('.');
    if (parts.length !== 3 || !this.keys) return undefined;
    let header: unknown;
    let claims: unknown;
    try {
      header = JSON.parse(Buffer.from(parts[0]!, 'base64url').toString('utf8'));
      claims = JSON.parse(Buffer.from(parts[1]!, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    if (!isPlainObject(header) || header.alg !== 'ES256' || header.kid !== this.keys.kid || !isPlainObject(claims)) return undefined;
    const valid = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), { key: this.keys.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(parts[2]!, 'base64url'));
    if (!valid) return undefined;
    const c = claims as Partial<Claims>;
    const now = this.api.ctx.clock.now() / 1000;
    if (c.iss !== ISSUER || typeof c.exp !== 'number' || now >= c.exp || (typeof c.nbf === 'number' && now < c.nbf)) return undefined;
    if (!Array.isArray(c.aud) || !c.aud.includes(ISSUER)) return undefined;
    const k8s = c['kubernetes.io'];
    if (!isPlainObject(k8s) || typeof k8s.namespace !== 'string' || !isPlainObject(k8s.serviceaccount)) return undefined;
    const { name, uid } = k8s.serviceaccount as { name?: unknown; uid?: unknown };
    if (typeof name !== 'string' || typeof uid !== 'string') return undefined;
    if (!this.alive('serviceaccounts', k8s.namespace, { name, uid })) return undefined;
    const extra: Record<string, string[]> = {};
    for (const kind of ['pod', 'secret', 'node'] as const) {
      const ref = k8s[kind];
      if (ref === undefined) continue;
      if (!isPlainObject(ref) || typeof ref.name !== 'string' || typeof ref.uid !== 'string') return undefined;
      if (!this.alive(BOUND_RESOURCES[kind], kind === 'node' ? undefined : k8s.namespace, { name: ref.name, uid: ref.uid })) return undefined;
      if (kind !== 'secret') extra[`authentication.kubernetes.io/${kind}-name`] = [ref.name];
      if (kind !== 'secret') extra[`authentication.kubernetes.io/${kind}-uid`] = [ref.uid];
    }
    if (typeof c.jti === 'string') extra['authentication.kubernetes.io/credential-id'] = [`JTI=${c.jti}`];
    const user: UserInfo = { username: serviceAccountUsername(k8s.namespace, name), uid, groups: serviceAccountGroups(k8s.namespace) };
    if (Object.keys(extra).length > 0) user.extra = extra;
    return user;
  }

  /** The object still exists with that uid and is not being deleted. */
  private alive(resource: string, namespace: string | undefined, ref: BoundObject): boolean {
    const info = this.api.registry.lookup('', 'v1', resource);
    const current = info ? this.api.store.get(resourceKey(info), namespace, ref.name) : undefined;
    return current !== undefined && current.metadata.uid === ref.uid && !current.metadata.deletionTimestamp;
  }
}

/** The key pair and its JWT key id (the SHA-256 of the public key, as kube-apiserver derives it). */
function withKid(privateKey: KeyObject): { privateKey: KeyObject; publicKey: KeyObject; kid: string } {
  const publicKey = createPublicKey(privateKey);
  const kid = base64url(createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest());
  return { privateKey, publicKey, kid };
}

const issuers = new WeakMap<GenericStore, ServiceAccountTokens>();

/** The token issuer of a cluster (one per store, made on first use). */
export function serviceAccountTokens(api: GenericStore): ServiceAccountTokens {
  let tokens = issuers.get(api);
  if (!tokens) issuers.set(api, (tokens = new ServiceAccountTokens(api)));
  return tokens;
}

/** TokenRequest's spec.boundObjectRef: the Pod (running as this ServiceAccount), Secret or Node the token dies with. */
function boundObject(api: GenericStore, saName: string, namespace: string | undefined, ref: Record<string, unknown>): Partial<Record<BoundKind, BoundObject>> {
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
    throw Errors.badRequest(`cannot bind token for serviceaccount ${JSON.stringify(saName)} to pod running with different serviceaccount name.`);
  }
  const uid = obj.metadata.uid ?? '';
  if (typeof ref.uid === 'string' && ref.uid !== '' && ref.uid !== uid) {
    throw Errors.conflict({ group: '', resource: kind }, name, `the UID in the bound object reference (${ref.uid}) does not match the UID in record. The object might have been deleted and then recreated`);
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
export function createServiceAccountToken(api: GenericStore, info: KindInfo, namespace: string | undefined, name: string, body: unknown, options: { dryRun?: boolean }): KubeObject {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'TokenRequest' is not a JSON object");
  if (body.kind !== undefined && body.kind !== 'TokenRequest') throw Errors.badRequest(`the body of a serviceaccounts/token request must be a TokenRequest, not ${String(body.kind)}`);
  const spec = isPlainObject(body.spec) ? body.spec : {};
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  if (typeof meta.name === 'string' && meta.name !== '' && meta.name !== name) {
    throw Errors.invalid('authentication.k8s.io', 'TokenRequest', name, [FieldErrors.invalid('metadata.name', meta.name, 'must match the service account name if specified')]);
  }
  if (typeof meta.namespace === 'string' && meta.namespace !== '' && meta.namespace !== namespace) {
    throw Errors.invalid('authentication.k8s.io', 'TokenRequest', name, [FieldErrors.invalid('metadata.namespace', meta.namespace, 'must match the service account namespace if specified')]);
  }
  const serviceAccount = api.store.get(resourceKey(info), namespace, name);
  if (!serviceAccount) throw Errors.notFound({ group: '', resource: 'serviceaccounts' }, name);
  // SetDefaults_TokenRequestSpec: an unset expirationSeconds is an hour (an explicit 0 is invalid).
  const expirationSeconds = spec.expirationSeconds === undefined || spec.expirationSeconds === null ? DEFAULT_EXPIRATION_SECONDS : spec.expirationSeconds;
  if (typeof expirationSeconds !== 'number' || !Number.isInteger(expirationSeconds)) throw Errors.badRequest('spec.expirationSeconds must be an integer');
  const audiences = Array.isArray(spec.audiences) && spec.audiences.length > 0 ? spec.audiences : [ISSUER];
  if (!audiences.every((a): a is string => typeof a === 'string')) throw Errors.badRequest('spec.audiences must be a list of strings');
  const causes = [];
  if (expirationSeconds < MIN_EXPIRATION_SECONDS) causes.push(FieldErrors.invalid('spec.expirationSeconds', expirationSeconds, 'may not specify a duration less than 10 minutes'));
  if (expirationSeconds > 2 ** 32) causes.push(FieldErrors.invalid('spec.expirationSeconds', expirationSeconds, 'may not specify a duration larger than 2^32 seconds'));
  if (causes.length > 0) throw Errors.invalid('authentication.k8s.io', 'TokenRequest', '', causes);
  const bound = isPlainObject(spec.boundObjectRef) ? boundObject(api, name, namespace, spec.boundObjectRef) : {};
  const now = api.ctx.clock.now();
  const { token, expiresAt } = options.dryRun ? { token: '', expiresAt: now + expirationSeconds * 1000 } : serviceAccountTokens(api).issue(serviceAccount, audiences, expirationSeconds, bound);
  return {
    kind: 'TokenRequest',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { name, namespace, creationTimestamp: rfc3339(now) },
    spec: { audiences, expirationSeconds, boundObjectRef: isPlainObject(spec.boundObjectRef) ? spec.boundObjectRef : null },
    status: { token, expirationTimestamp: rfc3339(expiresAt) },
  };
}
