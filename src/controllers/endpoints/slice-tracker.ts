import { ApiError } from '../../api/errors.js';
import type { KubeObject } from '../../api/types.js';
import { Resources, type KubeClient } from '../../client/client.js';
import type { Informer } from '../../client/informer.js';

/**
 * endpointsliceutil.EndpointSliceTracker: the generation each slice a Service's sync wrote should have in the cache,
 * or that it was deleted. A sync while the cache lags behind its own last writes would act on what it already
 * changed (create a second slice for the same pods): it waits for the cache, whose events bring it back. Events of
 * the controller's own writes then need no sync; those of anyone else's do.
 */
const DELETED = -1;

export class SliceTracker {
  private readonly expected = new Map<string, Map<string, number>>();

  expect(service: string, slice: KubeObject): void {
    this.of(service).set(slice.metadata.name!, slice.metadata.generation ?? 0);
  }

  expectDeleted(service: string, slice: KubeObject): void {
    this.of(service).set(slice.metadata.name!, DELETED);
  }

  /** Whether the cache still lags behind a write of the last syncs (looked up by slice name). */
  stale(service: string, cached: (name: string) => KubeObject | undefined): boolean {
    for (const [name, generation] of this.expected.get(service) ?? []) {
      const slice = cached(name);
      if (generation === DELETED ? slice !== undefined : (slice?.metadata.generation ?? -2) < generation) return true;
    }
    return false;
  }

  /** A slice came into the cache: true when it is not (or not only) the controller's own write. */
  shouldSync(service: string, slice: KubeObject): boolean {
    const expected = this.expected.get(service);
    const generation = expected?.get(slice.metadata.name!);
    if (generation === undefined || generation === DELETED) return true;
    const cached = slice.metadata.generation ?? 0;
    if (cached === generation) {
      expected!.delete(slice.metadata.name!);
      return false;
    }
    return cached > generation;
  }

  /** A slice left the cache: true unless the controller deleted it. */
  shouldSyncDeleted(service: string, slice: KubeObject): boolean {
    const expected = this.expected.get(service);
    if (expected?.get(slice.metadata.name!) === DELETED) {
      expected.delete(slice.metadata.name!);
      return false;
    }
    return true;
  }

  forget(service: string): void {
    this.expected.delete(service);
  }

  private of(service: string): Map<string, number> {
    let map = this.expected.get(service);
    if (!map) this.expected.set(service, (map = new Map()));
    return map;
  }
}

/**
 * Slice events bring back the key of the object whose slices they are (`ownerKey`), unless they are the very
 * writes the tracker expects.
 */
export function requeueOnSliceChanges(
  slices: Informer,
  tracker: SliceTracker,
  ownerKey: (slice: KubeObject) => string | undefined,
  enqueue: (key: string) => void,
): void {
  slices.addEventHandler({
    add: (s) => {
      const key = ownerKey(s);
      if (key && tracker.shouldSync(key, s)) enqueue(key);
    },
    update: (old, s) => {
      const key = ownerKey(s) ?? ownerKey(old);
      if (key && tracker.shouldSync(key, s)) enqueue(key);
    },
    delete: (s) => {
      const key = ownerKey(s);
      if (key && tracker.shouldSyncDeleted(key, s)) enqueue(key);
    },
  });
}

/** Makes a plan so: creates, updates, then deletes (one already gone is fine), each one recorded in the tracker. */
export async function writeSlicePlan(
  client: KubeClient,
  tracker: SliceTracker,
  key: string,
  namespace: string,
  plan: { create: KubeObject[]; update: KubeObject[]; delete: KubeObject[] },
): Promise<void> {
  for (const slice of plan.create) tracker.expect(key, await client.create(Resources.endpointslices, namespace, slice));
  for (const slice of plan.update) tracker.expect(key, await client.update(Resources.endpointslices, slice));
  for (const slice of plan.delete) {
    tracker.expectDeleted(key, slice);
    try {
      await client.delete(Resources.endpointslices, namespace, slice.metadata.name!, {
        preconditions: { uid: slice.metadata.uid },
      });
    } catch (err) {
      if (!(err instanceof ApiError && err.code === 404)) throw err;
    }
  }
}
