import { ApiError } from '../api/errors.js';
import type { LabelSelector } from '../api/selectors.js';
import type { KubeObject, OwnerReference } from '../api/types.js';
import type { Gvr, KubeClient } from '../client/client.js';
import { controllerOf } from './controller-ref.js';

/**
 * Adoption and release (controller.BaseControllerRefManager.ClaimObject), for any owner and any kind of child:
 * a child this owner controls stays while the selector matches it and is released when it no longer does; an
 * orphan the selector matches is adopted. An owner being deleted neither adopts nor releases; a child being
 * deleted is never adopted.
 */
export interface Claims {
  owned: KubeObject[];
  adopt: KubeObject[];
  release: KubeObject[];
}

/** What claiming asks of a selector; `childSelector` remembers each child's answer (cache objects never change). */
export interface ChildSelector {
  readonly empty: boolean;
  matches(child: KubeObject): boolean;
}

const answers = new WeakMap<LabelSelector, WeakMap<KubeObject, boolean>>();

export function childSelector(selector: LabelSelector): ChildSelector {
  let memo = answers.get(selector);
  if (!memo) answers.set(selector, (memo = new WeakMap()));
  const known = memo;
  return {
    empty: selector.empty,
    matches(child) {
      let answer = known.get(child);
      if (answer === undefined) known.set(child, (answer = selector.matches(child.metadata.labels)));
      return answer;
    },
  };
}

export function planClaims(
  owner: KubeObject,
  selector: ChildSelector,
  controlled: readonly KubeObject[],
  orphans: readonly KubeObject[],
): Claims {
  const deleting = owner.metadata.deletionTimestamp !== undefined;
  const claims: Claims = { owned: [], adopt: [], release: [] };
  for (const child of controlled) {
    if (controllerOf(child)?.uid !== owner.metadata.uid) continue;
    if (selector.matches(child)) claims.owned.push(child);
    else if (!deleting) claims.release.push(child);
  }
  if (deleting || selector.empty) return claims;
  for (const child of orphans) {
    if (controllerOf(child) !== undefined || child.metadata.deletionTimestamp !== undefined) continue;
    if (child.metadata.namespace === owner.metadata.namespace && selector.matches(child)) claims.adopt.push(child);
  }
  return claims;
}

/**
 * Writes the claims: adoption adds the controller reference, release removes it, each a merge patch conditional
 * on the resourceVersion the decision saw. Adoption first re-reads the owner (RecheckDeletionTimestamp), so an
 * owner deleted meanwhile adopts nothing. Returns the owned children, adopted ones included.
 */
export async function applyClaims(
  client: KubeClient,
  gvr: Gvr,
  ownerGvr: Gvr,
  owner: KubeObject,
  ref: OwnerReference,
  claims: Claims,
): Promise<KubeObject[]> {
  const owned = [...claims.owned];
  if (claims.adopt.length > 0 && (await ownerStillThere(client, ownerGvr, owner))) {
    for (const child of claims.adopt) {
      try {
        owned.push(
          await client.patch(gvr, child.metadata.namespace, child.metadata.name!, 'merge', {
            metadata: {
              ownerReferences: [...(child.metadata.ownerReferences ?? []), ref],
              resourceVersion: child.metadata.resourceVersion,
            },
          }),
        );
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 404)) throw err;
      }
    }
  }
  for (const child of claims.release) {
    const kept = (child.metadata.ownerReferences ?? []).filter((r) => r.uid !== owner.metadata.uid);
    try {
      await client.patch(gvr, child.metadata.namespace, child.metadata.name!, 'merge', {
        metadata: { ownerReferences: kept.length > 0 ? kept : null, resourceVersion: child.metadata.resourceVersion },
      });
    } catch (err) {
      if (!(err instanceof ApiError && (err.code === 404 || err.code === 422))) throw err;
    }
  }
  return owned;
}

async function ownerStillThere(client: KubeClient, gvr: Gvr, owner: KubeObject): Promise<boolean> {
  try {
    const fresh = await client.get(gvr, owner.metadata.namespace, owner.metadata.name!);
    return fresh.metadata.uid === owner.metadata.uid && fresh.metadata.deletionTimestamp === undefined;
  } catch (err) {
    if (err instanceof ApiError && err.code === 404) return false;
    throw err;
  }
}
