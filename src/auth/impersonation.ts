import type { IncomingMessage } from 'node:http';
import { ApiError } from '../api/errors.js';
import { forbidden, type Authorizer } from './authorizer.js';
import type { RequestAttributes } from './request-info.js';
import {
  ALL_AUTHENTICATED,
  ALL_UNAUTHENTICATED,
  ANONYMOUS_USER,
  parseServiceAccountUsername,
  serviceAccountGroups,
  type UserInfo,
} from './user.js';

const EXTRA_PREFIX = 'impersonate-extra-';

function values(req: IncomingMessage, name: string): string[] {
  return (req.headersDistinct[name] ?? []).map((v) => v.trim()).filter((v) => v !== '');
}

/** Extra keys are percent-encoded in header names (unescapeExtraKey); a malformed escape is kept as it is. */
function unescapeExtraKey(encoded: string): string {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return encoded;
  }
}

function impersonateAttributes(partial: Partial<RequestAttributes>): RequestAttributes {
  return {
    resourceRequest: true,
    path: '',
    verb: 'impersonate',
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
    ...partial,
  };
}

/**
 * WithImpersonation: Impersonate-User (or a ServiceAccount's username), Impersonate-Group, Impersonate-Uid and
 * Impersonate-Extra-* replace the requester when it may `impersonate` each of them (users, serviceaccounts, groups,
 * uids, userextras); the first one it may not is a 403 naming it. Returns the user the request then acts as.
 */
export function impersonate(req: IncomingMessage, requester: UserInfo, authorizer: Authorizer): UserInfo {
  const username = values(req, 'impersonate-user')[0];
  const groups = values(req, 'impersonate-group');
  const uid = values(req, 'impersonate-uid')[0];
  const extra: Record<string, string[]> = {};
  for (const header of Object.keys(req.headersDistinct)) {
    if (!header.startsWith(EXTRA_PREFIX)) continue;
    const key = unescapeExtraKey(header.slice(EXTRA_PREFIX.length));
    extra[key] = values(req, header);
  }
  const hasExtra = Object.keys(extra).length > 0;
  if (username === undefined) {
    if (groups.length > 0 || uid !== undefined || hasExtra) {
      throw new ApiError(
        500,
        'InternalError',
        `Internal error occurred: requested ${[...groups.map((g) => `group ${JSON.stringify(g)}`), ...(uid === undefined ? [] : [`uid ${JSON.stringify(uid)}`]), ...(hasExtra ? ['user extra'] : [])].join(', ')} without impersonating a user`,
      );
    }
    return requester;
  }
  const checks: RequestAttributes[] = [];
  const serviceAccount = parseServiceAccountUsername(username);
  if (serviceAccount)
    checks.push(
      impersonateAttributes({
        resource: 'serviceaccounts',
        namespace: serviceAccount.namespace,
        name: serviceAccount.name,
      }),
    );
  else checks.push(impersonateAttributes({ resource: 'users', name: username }));
  for (const group of groups) checks.push(impersonateAttributes({ resource: 'groups', name: group }));
  for (const [key, list] of Object.entries(extra))
    for (const value of list)
      checks.push(
        impersonateAttributes({
          apiGroup: 'authentication.k8s.io',
          resource: 'userextras',
          subresource: key,
          name: value,
        }),
      );
  if (uid !== undefined)
    checks.push(impersonateAttributes({ apiGroup: 'authentication.k8s.io', resource: 'uids', name: uid }));
  for (const attributes of checks) {
    const decision = authorizer.authorize(requester, attributes);
    if (!decision.allowed) throw forbidden(requester.username, attributes, decision.reason);
  }
  const actingGroups =
    groups.length > 0 || !serviceAccount ? [...groups] : serviceAccountGroups(serviceAccount.namespace);
  // A non-anonymous user gets system:authenticated unless either all-users group was asked for; anonymous gets
  // system:unauthenticated.
  if (username === ANONYMOUS_USER) {
    if (!actingGroups.includes(ALL_UNAUTHENTICATED)) actingGroups.push(ALL_UNAUTHENTICATED);
  } else if (!actingGroups.includes(ALL_AUTHENTICATED) && !actingGroups.includes(ALL_UNAUTHENTICATED))
    actingGroups.push(ALL_AUTHENTICATED);
  const user: UserInfo = { username, groups: actingGroups };
  if (uid !== undefined) user.uid = uid;
  if (hasExtra) user.extra = extra;
  return user;
}
