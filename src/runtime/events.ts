import { rfc3339, type Clock } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import { Resources, type KubeClient } from '../client/client.js';

export type EventType = 'Normal' | 'Warning';

const MAX_REMEMBERED = 4096;

/**
 * Records core/v1 Events about objects, as client-go's recorder does: one Event per distinct
 * (object, type, reason, message), whose count and lastTimestamp grow when it happens again.
 * Writing events never fails the caller: they are best effort, like in Kubernetes.
 */
export class EventRecorder {
  private readonly seen = new Map<string, { namespace: string; name: string; count: number }>();
  private sequence = 0;

  constructor(
    private readonly client: KubeClient,
    private readonly clock: Clock,
    private readonly component: string,
    private readonly host?: string,
  ) {}

  event(obj: KubeObject, type: EventType, reason: string, message: string, fieldPath?: string): void {
    void this.record(obj, type, reason, message, fieldPath).catch(() => undefined);
  }

  private async record(obj: KubeObject, type: EventType, reason: string, message: string, fieldPath?: string): Promise<void> {
    const namespace = obj.metadata.namespace || 'default';
    const now = this.clock.now();
    const key = `${obj.metadata.uid}\u0000${fieldPath ?? ''}\u0000${type}\u0000${reason}\u0000${message}`;
    const previous = this.seen.get(key);
    if (previous) {
      previous.count++;
      try {
        await this.client.patch(Resources.events, previous.namespace, previous.name, 'merge', { count: previous.count, lastTimestamp: rfc3339(now) });
        return;
      } catch (err) {
        if (!(err instanceof ApiError && err.code === 404)) throw err;
        this.seen.delete(key);
      }
    }
    const involvedObject: Record<string, unknown> = {
      kind: obj.kind,
      namespace: obj.metadata.namespace,
      name: obj.metadata.name,
      uid: obj.metadata.uid,
      apiVersion: obj.apiVersion,
      resourceVersion: obj.metadata.resourceVersion,
    };
    if (fieldPath) involvedObject.fieldPath = fieldPath;
    if (!obj.metadata.namespace) delete involvedObject.namespace;
    // Nanoseconds overflow a double's integer range, so BigInt: events in the same millisecond get distinct names.
    const name = `${obj.metadata.name}.${(BigInt(now) * 1_000_000n + BigInt(this.sequence++ % 1_000_000)).toString(16)}`;
    const source: Record<string, string> = { component: this.component };
    if (this.host) source.host = this.host;
    await this.client.create(Resources.events, namespace, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject,
      reason,
      message,
      source,
      firstTimestamp: rfc3339(now),
      lastTimestamp: rfc3339(now),
      count: 1,
      type,
      eventTime: null,
      reportingComponent: this.component,
      reportingInstance: this.host ?? '',
    } as KubeObject);
    if (this.seen.size >= MAX_REMEMBERED) this.seen.delete(this.seen.keys().next().value!);
    this.seen.set(key, { namespace, name, count: 1 });
  }
}
