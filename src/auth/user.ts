/** Who a request is from, as k8s.io/apiserver's user.Info: name, uid, groups and extra. */
export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

export const ANONYMOUS_USER = 'system:anonymous';
export const ALL_AUTHENTICATED = 'system:authenticated';
export const ALL_UNAUTHENTICATED = 'system:unauthenticated';
/** The superuser group: every request of a member is allowed, whatever RBAC says (kube-apiserver's privileged group). */
export const SYSTEM_MASTERS = 'system:masters';
const SERVICE_ACCOUNT_PREFIX = 'system:serviceaccount:';

export function serviceAccountUsername(namespace: string, name: string): string {
  return `${SERVICE_ACCOUNT_PREFIX}${namespace}:${name}`;
}

/** system:serviceaccounts and system:serviceaccounts:NS, the groups every ServiceAccount is in. */
export function serviceAccountGroups(namespace: string): string[] {
  return ['system:serviceaccounts', `system:serviceaccounts:${namespace}`];
}

/** The namespace and name in `system:serviceaccount:NS:NAME`, or undefined for other users. */
export function parseServiceAccountUsername(username: string): { namespace: string; name: string } | undefined {
  if (!username.startsWith(SERVICE_ACCOUNT_PREFIX)) return undefined;
  const parts = username.slice(SERVICE_ACCOUNT_PREFIX.length).split(':');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') return undefined;
  return { namespace: parts[0]!, name: parts[1]! };
}

/** The group authenticators add to every user they authenticate (AuthenticatedGroupAdder). */
export function withAuthenticatedGroup(user: UserInfo): UserInfo {
  if (
    user.username === ANONYMOUS_USER ||
    user.groups.includes(ALL_AUTHENTICATED) ||
    user.groups.includes(ALL_UNAUTHENTICATED)
  )
    return user;
  return { ...user, groups: [...user.groups, ALL_AUTHENTICATED] };
}
