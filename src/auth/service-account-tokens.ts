import { createHash, generateKeyPairSync, sign, verify, type KeyObject } from 'node:crypto';
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

interface Claims {
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  iss: string;
  jti: string;
  sub: string;
  'kubernetes.io': { namespace: string; serviceaccount: { name: string; uid: string } };
}

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
    if (!this.keys) {
      const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const kid = base64url(createHash('sha256').update(publicKey.export({ type: 'spki', format: 'der' })).digest());
      this.keys = { privateKey, publicKey, kid };
    }
    return this.keys;
  }

  issue(serviceAccount: KubeObject, audiences: string[], expirationSeconds: number): { token: string; expiresAt: number } {
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
      'kubernetes.io': { namespace, serviceaccount: { name, uid: serviceAccount.metadata.uid ?? '' } },
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
    const info = this.api.registry.lookup('', 'v1', 'serviceaccounts');
    const current = info ? this.api.store.get(resourceKey(info), k8s.namespace, name) : undefined;
    if (!current || current.metadata.uid !== uid || current.metadata.deletionTimestamp) return undefined;
    const user: UserInfo = { username: serviceAccountUsername(k8s.namespace, name), uid, groups: serviceAccountGroups(k8s.namespace) };
    if (typeof c.jti === 'string') user.extra = { 'authentication.kubernetes.io/credential-id': [`JTI=${c.jti}`] };
    return user;
  }
}

const issuers = new WeakMap<GenericStore, ServiceAccountTokens>();

/** The token issuer of a cluster (one per store, made on first use). */
export function serviceAccountTokens(api: GenericStore): ServiceAccountTokens {
  let tokens = issuers.get(api);
  if (!tokens) issuers.set(api, (tokens = new ServiceAccountTokens(api)));
  return tokens;
}

/**
 * POST serviceaccounts/NAME/token (TokenRequest, authentication.k8s.io/v1): a token for the ServiceAccount, valid
 * for spec.expirationSeconds (default 1 h, at least 10 minutes) and spec.audiences (default the API server's).
 */
export function createServiceAccountToken(api: GenericStore, info: KindInfo, namespace: string | undefined, name: string, body: unknown, options: { dryRun?: boolean }): KubeObject {
  if (!isPlainObject(body)) throw Errors.badRequest("Object 'TokenRequest' is not a JSON object");
  if (body.kind !== undefined && body.kind !== 'TokenRequest') throw Errors.badRequest(`the body of a serviceaccounts/token request must be a TokenRequest, not ${String(body.kind)}`);
  const spec = isPlainObject(body.spec) ? body.spec : {};
  const meta = isPlainObject(body.metadata) ? body.metadata : {};
  const requested = spec.expirationSeconds;
  const expirationSeconds = requested === undefined || requested === null || requested === 0 ? DEFAULT_EXPIRATION_SECONDS : requested;
  const causes = [];
  if (typeof expirationSeconds !== 'number' || !Number.isInteger(expirationSeconds)) causes.push(FieldErrors.invalid('spec.expirationSeconds', expirationSeconds, 'must be an integer'));
  else if (expirationSeconds < MIN_EXPIRATION_SECONDS) causes.push(FieldErrors.invalid('spec.expirationSeconds', expirationSeconds, 'may not specify a duration less than 10 minutes'));
  else if (expirationSeconds > 2 ** 32) causes.push(FieldErrors.invalid('spec.expirationSeconds', expirationSeconds, 'may not specify a duration larger than 2^32 seconds'));
  const audiences = Array.isArray(spec.audiences) && spec.audiences.length > 0 ? spec.audiences : [ISSUER];
  audiences.forEach((a, i) => {
    if (typeof a !== 'string' || a === '') causes.push(FieldErrors.invalid(`spec.audiences[${i}]`, a, 'must be a non-empty string'));
  });
  if (causes.length > 0) throw Errors.invalid('authentication.k8s.io', 'TokenRequest', typeof meta.name === 'string' ? meta.name : '', causes);
  // Binding a token to a Pod or Secret (invalidated with it) is not simulated: refuse rather than ignore it.
  if (spec.boundObjectRef !== undefined && spec.boundObjectRef !== null) throw Errors.badRequest('spec.boundObjectRef: kube-sim does not bind tokens to objects; omit it');
  const serviceAccount = api.store.get(resourceKey(info), namespace, name);
  if (!serviceAccount) throw Errors.notFound({ group: '', resource: 'serviceaccounts' }, name);
  const { token, expiresAt } = options.dryRun ? { token: '', expiresAt: api.ctx.clock.now() + (expirationSeconds as number) * 1000 } : serviceAccountTokens(api).issue(serviceAccount, audiences as string[], expirationSeconds as number);
  return {
    kind: 'TokenRequest',
    apiVersion: 'authentication.k8s.io/v1',
    metadata: { name, namespace, creationTimestamp: rfc3339(api.ctx.clock.now()) },
    spec: { audiences, expirationSeconds, boundObjectRef: null },
    status: { token, expirationTimestamp: rfc3339(expiresAt) },
  };
}
