import type { IncomingMessage } from 'node:http';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import { Errors } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import { checkRbacWrite } from './escalation.js';
import { forbidden, UnionAuthorizer, type Authorizer } from './authorizer.js';
import { bootstrapClusterRoleBindings, bootstrapClusterRoles } from './bootstrap-policy.js';
import { impersonate } from './impersonation.js';
import { RbacAuthorizer, type PolicySource } from './rbac.js';
import { requestAttributes } from './request-info.js';
import type { Requester, TokenReviewResult } from './requester.js';
import { ISSUER, type ServiceAccountTokens } from './service-account-tokens.js';
import { ALL_UNAUTHENTICATED, ANONYMOUS_USER, withAuthenticatedGroup, type UserInfo } from './user.js';

const requesters = new WeakMap<IncomingMessage, Requester>();

/** The requester an authenticated request was found to be (undefined when the server runs without --auth). */
export function requesterOf(req: IncomingMessage): Requester | undefined {
  return requesters.get(req);
}

/**
 * Paths anonymous requests may reach (kube-apiserver's AuthenticationConfiguration `anonymous.conditions`): the
 * health and version endpoints system:public-info-viewer opens. Anything else without a valid token is a 401.
 */
const ANONYMOUS_PATHS = new Set(['/healthz', '/livez', '/readyz', '/version', '/version/']);

/** kube-apiserver's --api-audiences, which default to the ServiceAccount issuer. */
const API_AUDIENCES: readonly string[] = [ISSUER];
const INVALID_BEARER_TOKEN = 'invalid bearer token';

/** The bearer token of an Authorization header, as bearertoken.go reads it (no opinion on anything else). */
function bearerToken(header: string | undefined): string | undefined {
  const parts = (header ?? '').trim().split(' ');
  if (parts.length < 2 || parts[0]!.toLowerCase() !== 'bearer' || parts[1] === '') return undefined;
  return parts[1];
}

const BEARER_PROTOCOL_PREFIX = 'base64url.bearer.authorization.k8s.io.';

/**
 * The token of a WebSocket request that carries it as a subprotocol, as kube-apiserver's
 * websocket.ProtocolAuthenticator reads it (a browser cannot set headers on a WebSocket):
 * `base64url.bearer.authorization.k8s.io.<token, base64url without padding>` beside at least one real subprotocol.
 * The token's subprotocol is taken out of the request, so that it is never the one echoed back. A malformed one
 * is a 401.
 */
function protocolToken(req: IncomingMessage): string | undefined {
  const header = req.headers['sec-websocket-protocol'];
  if (header === undefined || req.headers.upgrade?.toLowerCase() !== 'websocket') return undefined;
  let token: string | undefined;
  const others: string[] = [];
  for (const protocol of header.split(',').map((p) => p.trim())) {
    if (!protocol.startsWith(BEARER_PROTOCOL_PREFIX)) {
      others.push(protocol);
      continue;
    }
    // multiple tokens, bad base64url, or bytes that are not UTF-8
    const encoded = protocol.slice(BEARER_PROTOCOL_PREFIX.length);
    if (token !== undefined || !/^[A-Za-z0-9_-]*$/.test(encoded)) throw Errors.unauthorized();
    const bytes = Buffer.from(encoded, 'base64url');
    token = bytes.toString('utf8');
    if (!Buffer.from(token, 'utf8').equals(bytes)) throw Errors.unauthorized();
  }
  if (token === undefined || token === '') return undefined;
  if (others.length === 0) throw Errors.unauthorized();
  req.headers['sec-websocket-protocol'] = others.join(', ');
  return token;
}

const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_USAGE = '2.5.29.37.0';

/** A connection's certificate user, read once: every request on a kept-alive connection presents the same one. */
const certificateUsers = new WeakMap<object, UserInfo | null>();

/**
 * kube-apiserver's x509 authenticator: a client certificate that chains to the cluster CA (the TLS server checked
 * the chain and the dates), is good for client authentication (no extended key usage, or clientAuth or any among
 * them) and names a CN is that user (the last CN, as Go's pkix.Name keeps it), its Os the groups. Anything less is
 * no user, and the other authenticators are asked.
 */
function certificateUser(req: IncomingMessage): UserInfo | undefined {
  const socket = req.socket as Partial<TLSSocket>;
  if (!socket.encrypted || !socket.authorized || typeof socket.getPeerCertificate !== 'function') return undefined;
  let user = certificateUsers.get(socket);
  if (user === undefined) {
    user = userOf(socket.getPeerCertificate()) ?? null;
    certificateUsers.set(socket, user);
  }
  return user ?? undefined;
}

function userOf(cert: PeerCertificate | undefined): UserInfo | undefined {
  if (!cert?.subject) return undefined;
  const usages = cert.ext_key_usage;
  if (usages !== undefined && !usages.includes(CLIENT_AUTH) && !usages.includes(ANY_USAGE)) return undefined;
  const all = (v: string | string[] | undefined): string[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  const username = all(cert.subject.CN).at(-1);
  if (!username) return undefined;
  return withAuthenticatedGroup({ username, groups: all(cert.subject.O) });
}

/**
 * What ApiAuth needs of the cluster it guards (cluster/auth-backend.ts makes one): the RBAC objects as they
 * change, the ServiceAccount token issuer that TokenRequest signs with, and a way to create the default policy.
 */
export interface AuthBackend {
  readonly policy: PolicySource;
  readonly tokens: ServiceAccountTokens;
  /** Creates a bootstrap ClusterRole or ClusterRoleBinding unless one of its name is stored. */
  ensure(resource: 'clusterroles' | 'clusterrolebindings', obj: KubeObject): void;
}

/** Creates the default ClusterRoles and bindings that are missing (a restart with --data keeps the ones there). */
function bootstrapPolicy(backend: AuthBackend): void {
  for (const obj of bootstrapClusterRoles) backend.ensure('clusterroles', obj);
  for (const obj of bootstrapClusterRoleBindings) backend.ensure('clusterrolebindings', obj);
}

/**
 * `sim serve --auth`: authentication (static tokens, ServiceAccount tokens), impersonation and RBAC authorization
 * for every HTTP request, in kube-apiserver's order — 401 before anything else, then 403 before routing.
 */
export class ApiAuth {
  readonly authorizer: Authorizer;
  private readonly rbac: RbacAuthorizer;
  private readonly tokens: ServiceAccountTokens;

  constructor(
    backend: AuthBackend,
    private readonly staticTokens: ReadonlyMap<string, UserInfo>,
  ) {
    bootstrapPolicy(backend);
    this.rbac = new RbacAuthorizer(backend.policy);
    this.authorizer = new UnionAuthorizer(this.rbac);
    this.tokens = backend.tokens;
  }

  /**
   * A client certificate, the Authorization header's bearer token, then a WebSocket's token subprotocol
   * (kube-apiserver's order).
   */
  authenticate(req: IncomingMessage): UserInfo {
    const fromCertificate = certificateUser(req);
    if (fromCertificate) return fromCertificate;
    const headerToken = bearerToken(req.headers.authorization);
    const fromHeader = headerToken === undefined ? undefined : this.reviewToken(headerToken, API_AUDIENCES).user;
    if (fromHeader) return fromHeader;
    const socketToken = protocolToken(req);
    const fromProtocol = socketToken === undefined ? undefined : this.reviewToken(socketToken, API_AUDIENCES).user;
    if (fromProtocol) return fromProtocol;
    if (headerToken === undefined && socketToken === undefined) {
      const path = new URL(req.url ?? '/', 'http://localhost').pathname;
      if (ANONYMOUS_PATHS.has(path)) return { username: ANONYMOUS_USER, groups: [ALL_UNAUTHENTICATED] };
    }
    throw Errors.unauthorized();
  }

  /**
   * One token through kube-apiserver's token authenticators, in their order: the static token file (audience
   * agnostic: good only when the API server's audience is asked for), then ServiceAccount tokens. The error is
   * what the request authenticator chain reports: "invalid bearer token" alone when no authenticator knew the
   * token, next to the ServiceAccount authenticator's reason when it had one.
   */
  reviewToken(token: string, audiences: readonly string[]): TokenReviewResult {
    const apiAudiences = API_AUDIENCES.filter((a) => audiences.includes(a));
    const staticUser = apiAudiences.length > 0 ? this.staticTokens.get(token) : undefined;
    if (staticUser) return { authenticated: true, user: withAuthenticatedGroup(staticUser), audiences: apiAudiences };
    const result = this.tokens.review(token, audiences);
    if (result && 'user' in result)
      return { authenticated: true, user: withAuthenticatedGroup(result.user), audiences: result.audiences };
    return {
      authenticated: false,
      error: result ? `[${INVALID_BEARER_TOKEN}, ${result.error}]` : INVALID_BEARER_TOKEN,
    };
  }

  /** Authenticates, applies impersonation and authorizes one request; throws the 401/403 Status to answer. */
  check(req: IncomingMessage): Requester {
    const authenticated = this.authenticate(req);
    const user = impersonate(req, authenticated, this.authorizer);
    const attributes = requestAttributes(req.method ?? 'GET', req.url ?? '/');
    const decision = this.authorizer.authorize(user, attributes);
    if (!decision.allowed) throw forbidden(user.username, attributes, decision.reason);
    const requester: Requester = {
      user,
      authorizer: this.authorizer,
      reviewToken: (token, audiences) => this.reviewToken(token, audiences),
      admit: (info, obj, old) => {
        if (info.group === 'rbac.authorization.k8s.io')
          checkRbacWrite(info.resource, obj, old, requester, (kind, name, namespace) =>
            this.rbac.roleRules(kind, name, namespace),
          );
      },
    };
    requesters.set(req, requester);
    return requester;
  }
}
