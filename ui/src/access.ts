/**
 * What the user may do, asked of the server with SelfSubjectAccessReview (as `kubectl auth can-i` does), so that a
 * read-only user sees the action buttons disabled and why, instead of a 403 after the click.
 */
import { onTokenChange, request } from './api.js';

export type Attributes =
  | { verb: string; resource: string; group?: string; subresource?: string; namespace?: string }
  | { verb: string; path: string };

export interface Decision {
  allowed: boolean;
  reason: string;
}

interface Review {
  status?: { allowed?: boolean; reason?: string; evaluationError?: string };
}

let cache = new Map<string, Promise<Decision>>();
onTokenChange(() => (cache = new Map()));

export function describe(attrs: Attributes): string {
  if ('path' in attrs) return `${attrs.verb} ${attrs.path}`;
  const resource = `${attrs.resource}${attrs.subresource ? `/${attrs.subresource}` : ''}`;
  return `${attrs.verb} ${attrs.group ? `${resource}.${attrs.group}` : resource}${attrs.namespace ? ` in namespace ${attrs.namespace}` : ''}`;
}

export function can(attrs: Attributes): Promise<Decision> {
  const key = JSON.stringify(attrs);
  let decision = cache.get(key);
  if (!decision) {
    const spec =
      'path' in attrs
        ? { nonResourceAttributes: { path: attrs.path, verb: attrs.verb } }
        : {
            resourceAttributes: {
              verb: attrs.verb,
              group: attrs.group ?? '',
              resource: attrs.resource,
              subresource: attrs.subresource ?? '',
              namespace: attrs.namespace ?? '',
            },
          };
    decision = request<Review>('/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
      method: 'POST',
      body: { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec },
    }).then(
      (review) => ({
        allowed: review.status?.allowed === true,
        reason: review.status?.allowed
          ? ''
          : `you may not ${describe(attrs)}${review.status?.reason ? ` (${review.status.reason})` : ''}`,
      }),
      (err: unknown) => ({
        allowed: false,
        reason: `cannot tell whether you may ${describe(attrs)}: ${err instanceof Error ? err.message : String(err)}`,
      }),
    );
    cache.set(key, decision);
  }
  return decision;
}

/** Who the server says the user is (SelfSubjectReview). */
export async function whoAmI(): Promise<string | undefined> {
  try {
    const review = await request<{ status?: { userInfo?: { username?: string } } }>(
      '/apis/authentication.k8s.io/v1/selfsubjectreviews',
      { method: 'POST', body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' } },
    );
    return review.status?.userInfo?.username || undefined;
  } catch {
    return undefined;
  }
}
