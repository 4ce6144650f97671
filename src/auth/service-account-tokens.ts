import { makeDirectories } from '../api/directories.js';
import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { isPlainObject, type KubeObject } from '../api/types.js';
import type { Clock } from '../clock/clock.js';
import type { SeededRandom } from '../clock/random.js';
import { serviceAccountGroups, serviceAccountUsername, type UserInfo } from './user.js';

/** kubeadm's --service-account-issuer; --api-audiences defaults to it, so it is also the audience tokens get. */
export const ISSUER = 'https://kubernetes.default.svc.cluster.local';

/** A Pod, Secret or Node a token is bound to: the token dies with it (deleted, or recreated with another uid). */
export interface BoundObject {
  name: string;
  uid: string;
}

export type BoundKind = 'pod' | 'secret' | 'node';

interface Claims {
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  iss: string;
  jti: string;
  sub: string;
  'kubernetes.io': {
    namespace: string;
    serviceaccount: BoundObject;
    pod?: BoundObject;
    secret?: BoundObject;
    node?: BoundObject;
  };
}

export const BOUND_RESOURCES = { pod: 'pods', secret: 'secrets', node: 'nodes' } as const;

/**
 * What tokens are issued and checked against (kube's ServiceAccountTokenGetter; the registry makes one): the
 * current object of a kind a token names, cluster time, and the seeded RNG for token ids.
 */
export interface TokenObjects {
  readonly clock: Clock;
  readonly random: SeededRandom;
  get(
    resource: 'serviceaccounts' | (typeof BOUND_RESOURCES)[BoundKind],
    namespace: string | undefined,
    name: string,
  ): KubeObject | undefined;
}

const base64url = (data: Buffer | string): string => Buffer.from(data).toString('base64url');

/**
 * Signs and checks ServiceAccount tokens: ES256 JWTs with the claims kube-apiserver puts in bound tokens.
 * The key pair is made when first needed and lives as long as the cluster (tokens do not survive a restart).
 * node:crypto signs synchronously, which the TokenRequest subresource (a synchronous store call) needs.
 */
export class ServiceAccountTokens {
  private keys?: { privateKey: KeyObject; publicKey: KeyObject; kid: string };

  constructor(private readonly objects: TokenObjects) {}

  private keyPair(): { privateKey: KeyObject; publicKey: KeyObject; kid: string } {
    if (!this.keys) this.keys = withKid(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey);
    return this.keys;
  }

  /** Signs with this key (PKCS #8 PEM), which every API server of the cluster is given (over etcd: cluster.ts). */
  useKey(pem: string): void {
    this.keys = withKid(createPrivateKey(pem));
  }

  /** A new signing key, PKCS #8 PEM. */
  static generateKey(): string {
    return generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString();
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
    const keys = this.keyPair();
    makeDirectories(dirname(file), 0o700);
    writeFileSync(file, keys.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  }

  issue(
    serviceAccount: KubeObject,
    audiences: string[],
    expirationSeconds: number,
    bound: Partial<Record<BoundKind, BoundObject>> = {},
  ): { token: string; expiresAt: number } {
    const { privateKey, kid } = this.keyPair();
    const now = Math.floor(this.objects.clock.now() / 1000);
    const namespace = serviceAccount.metadata.namespace!;
    const name = serviceAccount.metadata.name!;
    const claims: Claims = {
      aud: audiences,
      exp: now + expirationSeconds,
      iat: now,
      nbf: now,
      iss: ISSUER,
      jti: this.objects.random.uuid(),
      sub: serviceAccountUsername(namespace, name),
      'kubernetes.io': { namespace, serviceaccount: { name, uid: serviceAccount.metadata.uid ?? '' }, ...bound },
    };
    const signingInput = `${base64url(JSON.stringify({ alg: 'ES256', kid }))}.${base64url(JSON.stringify(claims))}`;
    const signature = sign('sha256', Buffer.from(signingInput), { key: privateKey, dsaEncoding: 'ieee-p1363' });
    return { token: `${signingInput}.${base64url(signature)}`, expiresAt: claims.exp * 1000 };
  }

  /**
   * Checks a token as kube-apiserver's ServiceAccount JWT authenticator does (pkg/serviceaccount/jwt.go and the
   * validator in claims.go), for a request aimed at `audiences`: undefined when it is not one of ours at all (not a
   * JWT, another issuer), an error naming why it fails, or the user and the audiences it is good for. A bound
   * object or account deleted less than a minute ago still counts, and times get a minute of leeway, as there.
   */
  review(token: string, audiences: readonly string[]): TokenResult | undefined {
    const parts = token.split('.');
    if (parts.length !== 3 || token.trimStart().startsWith('{')) return undefined;
    const header = parseSegment(parts[0]!);
    const claims = parseSegment(parts[1]!) as Partial<Claims> | undefined;
    if (!header || !claims || claims.iss !== ISSUER) return undefined;
    const keys = this.keys;
    if (!keys || (typeof header.kid === 'string' && header.kid !== '' && header.kid !== keys.kid))
      return { error: 'invalid signature, no keys found' };
    const signed =
      header.alg === 'ES256' &&
      verify(
        'sha256',
        Buffer.from(`${parts[0]}.${parts[1]}`),
        { key: keys.publicKey, dsaEncoding: 'ieee-p1363' },
        Buffer.from(parts[2]!, 'base64url'),
      );
    if (!signed) return { error: 'go-jose/go-jose: error in cryptographic primitive' };
    // A token with no audience is a legacy one, good for the API server's own.
    const tokenAudiences = Array.isArray(claims.aud) && claims.aud.length > 0 ? claims.aud.map(String) : [ISSUER];
    const granted = tokenAudiences.filter((a) => audiences.includes(a));
    if (granted.length === 0)
      return {
        error: `token audiences ${goQuote(tokenAudiences)} is invalid for the target audiences ${goQuote(audiences)}`,
      };
    const now = this.objects.clock.now() / 1000;
    if (typeof claims.nbf === 'number' && now + LEEWAY_SECONDS < claims.nbf)
      return { error: 'service account token is not valid yet' };
    if (typeof claims.exp === 'number' && now - LEEWAY_SECONDS > claims.exp)
      return { error: 'service account token has expired' };
    if (typeof claims.iat === 'number' && now + LEEWAY_SECONDS < claims.iat)
      return { error: 'service account token is issued in the future' };
    const k8s: Record<string, unknown> = isPlainObject(claims['kubernetes.io']) ? claims['kubernetes.io'] : {};
    const namespace = typeof k8s.namespace === 'string' ? k8s.namespace : '';
    const account = ref(k8s.serviceaccount);
    const current = this.objects.get('serviceaccounts', namespace, account.name);
    if (!current) return { error: `serviceaccounts ${JSON.stringify(account.name)} not found` };
    if (current.metadata.uid !== account.uid)
      return { error: `service account UID (${current.metadata.uid ?? ''}) does not match claim (${account.uid})` };
    if (deletedBefore(current, now - LEEWAY_SECONDS))
      return { error: `service account ${namespace}/${account.name} has been deleted` };
    const extra: Record<string, string[]> = {};
    const pod = k8s.pod === undefined ? undefined : ref(k8s.pod);
    for (const [kind, bound] of [
      ['secret', k8s.secret === undefined ? undefined : ref(k8s.secret)],
      ['pod', pod],
      ['node', pod || k8s.node === undefined ? undefined : ref(k8s.node)],
    ] as const) {
      if (!bound) continue;
      const obj = this.objects.get(BOUND_RESOURCES[kind], kind === 'node' ? undefined : namespace, bound.name);
      if (!obj || deletedBefore(obj, now - LEEWAY_SECONDS))
        return { error: 'service account token has been invalidated' };
      if (obj.metadata.uid !== bound.uid)
        return {
          error: `${kind} UID (${obj.metadata.uid ?? ''}) does not match service account ${kind} ref claim (${bound.uid})`,
        };
    }
    if (pod) {
      extra['authentication.kubernetes.io/pod-name'] = [pod.name];
      extra['authentication.kubernetes.io/pod-uid'] = [pod.uid];
    }
    // A pod-bound token names the pod's node without its being checked (ServiceAccountTokenPodNodeInfo).
    const node = k8s.node === undefined ? undefined : ref(k8s.node);
    if (node && node.name !== '') {
      extra['authentication.kubernetes.io/node-name'] = [node.name];
      if (node.uid !== '') extra['authentication.kubernetes.io/node-uid'] = [node.uid];
    }
    if (typeof claims.jti === 'string' && claims.jti !== '')
      extra['authentication.kubernetes.io/credential-id'] = [`JTI=${claims.jti}`];
    const user: UserInfo = {
      username: serviceAccountUsername(namespace, account.name),
      uid: account.uid,
      groups: serviceAccountGroups(namespace),
    };
    if (Object.keys(extra).length > 0) user.extra = extra;
    return { user, audiences: granted };
  }
}

/** What a token check found: who it is and the audiences it is good for, or why it fails. */
export type TokenResult = { user: UserInfo; audiences: string[] } | { error: string };

/** go-jose's jwt.DefaultLeeway, which the ServiceAccount token validator uses for every time and deletion check. */
const LEEWAY_SECONDS = 60;

function parseSegment(segment: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
    return isPlainObject(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function ref(value: unknown): BoundObject {
  const r = isPlainObject(value) ? value : {};
  return { name: typeof r.name === 'string' ? r.name : '', uid: typeof r.uid === 'string' ? r.uid : '' };
}

/** Being deleted since before `seconds` (a pod's deletionTimestamp is the end of its grace period). */
function deletedBefore(obj: KubeObject, seconds: number): boolean {
  const at = obj.metadata.deletionTimestamp;
  return at !== undefined && at !== null && Date.parse(at) / 1000 < seconds;
}

/** Go's %q of a []string: ["a" "b"]. */
function goQuote(values: readonly string[]): string {
  return `[${values.map((v) => JSON.stringify(v)).join(' ')}]`;
}

/** The key pair and its JWT key id (the SHA-256 of the public key, as kube-apiserver derives it). */
function withKid(privateKey: KeyObject): { privateKey: KeyObject; publicKey: KeyObject; kid: string } {
  const publicKey = createPublicKey(privateKey);
  const kid = base64url(
    createHash('sha256')
      .update(publicKey.export({ type: 'spki', format: 'der' }))
      .digest(),
  );
  return { privateKey, publicKey, kid };
}
