import { rfc3339, type Clock } from '../clock/clock.js';
import { ApiError } from '../api/errors.js';
import type { KubeObject } from '../api/types.js';
import { Resources, type KubeClient } from '../client/client.js';

export type EventType = 'Normal' | 'Warning';

/** client-go tools/record (events_cache.go): the correlator's defaults. */
const LRU_ENTRIES = 4096;
/** A 10th distinct message of the same (source, object, type, reason) within 10 minutes is aggregated. */
export const AGGREGATE_MAX_EVENTS = 10;
export const AGGREGATE_INTERVAL_MS = 600_000;
export const AGGREGATE_MESSAGE_PREFIX = '(combined from similar events): ';
/** A source may send 25 events about an object at once, then one more every 5 minutes. */
export const SPAM_BURST = 25;
export const SPAM_REFILL_MS = 300_000;

/**
 * A map that forgets its least recently used entry beyond `max` (groupcache's lru.Cache): a Map in use order.
 * Evicting through keys().next() steps over the holes V8 leaves at the front of a Map until it rebuilds the
 * table (~3-6 us once full); a list entry per key, or one iterator kept for the map's life, evicts in ~1 us but
 * costs heap (~40 bytes a key; a kept iterator holds on to outgrown tables), measured as not worth it here.
 */
class LruMap<V> {
  private readonly map = new Map<string, V>();
  /** The most recently used key: the correlator sets each key right after getting it, and it is already last. */
  private last: string | undefined;

  constructor(private readonly max: number) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined && key !== this.last) {
      this.map.delete(key);
      this.map.set(key, value);
      this.last = key;
    }
    return value;
  }

  set(key: string, value: V): void {
    if (key !== this.last) this.map.delete(key);
    this.map.set(key, value);
    this.last = key;
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
}

/**
 * The distinct messages of similar events, in insertion order. Nearly every aggregate only ever sees one
 * message (a kubelet's Pulled/Created/Started for one pod), so a Set is made from the second on: a Set for each
 * of 3 aggregates a pod was ~470 bytes a pod in a dense cluster.
 */
class DistinctMessages {
  private first: string | undefined;
  private many: Set<string> | undefined;

  add(message: string): void {
    if (this.many) this.many.add(message);
    else if (this.first === undefined) this.first = message;
    else if (this.first !== message) this.many = new Set([this.first, message]);
  }

  get size(): number {
    return this.many ? this.many.size : this.first === undefined ? 0 : 1;
  }

  dropOldest(): void {
    if (this.many) this.many.delete(this.many.values().next().value!);
    else this.first = undefined;
  }
}

interface EventBody {
  metadata: { name: string; namespace: string };
  involvedObject: Record<string, unknown>;
  reason: string;
  message: string;
  source: Record<string, string>;
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  type: EventType;
  eventTime: null;
  reportingComponent: string;
  reportingInstance: string;
}

/** What the correlator decided for one event: drop it, create it, or bump an existing one's count. */
export type Correlation = { skip: true } | { skip: false; key: string; event: EventBody; update: boolean };

/**
 * client-go's EventCorrelator, on the injected clock:
 *  - aggregation: events that differ only in their message (same source, object, type and reason) are
 *    counted per 10-minute window; from the 10th distinct message on, they go into one event whose message is
 *    "(combined from similar events): " and the latest message;
 *  - counting: an event identical to one already written (or the aggregate) bumps that event's count,
 *    lastTimestamp and message instead of creating another;
 *  - spam filter: a token bucket per source and object (burst 25, one token per 5 minutes) drops the rest.
 * A 10,000-replica Deployment's ReplicaSet thus writes 25 "SuccessfulCreate" events, not 10,000.
 */
export class EventCorrelator {
  private readonly aggregates = new LruMap<{ messages: DistinctMessages; last: number }>(LRU_ENTRIES);
  private readonly observed = new LruMap<{ count: number; firstTimestamp: string; name: string }>(LRU_ENTRIES);
  private readonly buckets = new LruMap<{ tokens: number; at: number }>(LRU_ENTRIES);

  constructor(private readonly clock: Clock) {}

  correlate(event: EventBody, newName: () => string): Correlation {
    const now = this.clock.now();
    const { involvedObject: o, source } = event;
    const objectKey = [source.component, source.host ?? '', o.kind, o.namespace ?? '', o.name, o.uid, o.apiVersion].join('\u0000');

    // EventAggregate: similar events (all but the message) in the last 10 minutes.
    // Keys are built with join(), not template strings: these stay in the LRUs (up to 4,096 per kubelet), and a
    // template string is a rope of one V8 string per piece (8 MB for 5,000 pods' events).
    const aggregateKey = [objectKey, event.type, event.reason, event.reportingComponent, event.reportingInstance].join('\u0000');
    let aggregate = this.aggregates.get(aggregateKey);
    if (!aggregate || now - aggregate.last > AGGREGATE_INTERVAL_MS) aggregate = { messages: new DistinctMessages(), last: now };
    aggregate.messages.add(event.message);
    aggregate.last = now;
    this.aggregates.set(aggregateKey, aggregate);
    let key = [objectKey, o.fieldPath ?? '', event.type, event.reason, event.message].join('\u0000');
    if (aggregate.messages.size >= AGGREGATE_MAX_EVENTS) {
      // The set stays below the threshold, so every further similar event is aggregated too.
      aggregate.messages.dropOldest();
      key = ['aggregate', aggregateKey].join('\u0000');
      const at = rfc3339(now);
      // Like client-go's aggregate event: no reporting controller or instance.
      event = {
        ...event,
        metadata: { name: newName(), namespace: event.metadata.namespace },
        message: AGGREGATE_MESSAGE_PREFIX + event.message,
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
        reportingComponent: '',
        reportingInstance: '',
      };
    }

    // eventObserve: the same event again is a count bump of the one written first.
    const previous = this.observed.get(key);
    if (previous) event = { ...event, metadata: { ...event.metadata, name: previous.name }, firstTimestamp: previous.firstTimestamp, count: previous.count + 1 };
    this.observed.set(key, { count: event.count, firstTimestamp: event.firstTimestamp, name: event.metadata.name });

    // EventSourceObjectSpamFilter: a token bucket per source and object, full to start with.
    let bucket = this.buckets.get(objectKey);
    if (!bucket) bucket = { tokens: SPAM_BURST, at: now };
    bucket.tokens = Math.min(SPAM_BURST, bucket.tokens + (now - bucket.at) / SPAM_REFILL_MS);
    bucket.at = now;
    this.buckets.set(objectKey, bucket);
    if (bucket.tokens < 1) return { skip: true };
    bucket.tokens -= 1;
    return { skip: false, key, event, update: event.count > 1 };
  }

  /** The server's answer (its count, after a create that replaced a vanished event) for the next bump. */
  written(key: string, event: KubeObject): void {
    const count = typeof event.count === 'number' ? event.count : 1;
    const firstTimestamp = typeof event.firstTimestamp === 'string' ? event.firstTimestamp : '';
    this.observed.set(key, { count, firstTimestamp, name: event.metadata.name! });
  }
}

/**
 * Records core/v1 Events about objects, as client-go's recorder does, through the EventCorrelator above.
 * Writing events never fails the caller: they are best effort, like in Kubernetes.
 */
export class EventRecorder {
  private readonly correlator: EventCorrelator;
  private sequence = 0;

  constructor(
    private readonly client: KubeClient,
    private readonly clock: Clock,
    private readonly component: string,
    private readonly host?: string,
  ) {
    this.correlator = new EventCorrelator(clock);
  }

  event(obj: KubeObject, type: EventType, reason: string, message: string, fieldPath?: string): void {
    void this.record(obj, type, reason, message, fieldPath).catch(() => undefined);
  }

  /** `<object>.<nanoseconds, hex>`; the sequence keeps events of the same millisecond apart. */
  private nameFor(objectName: string, now: number): string {
    // Nanoseconds overflow a double's integer range, so BigInt.
    return `${objectName}.${(BigInt(now) * 1_000_000n + BigInt(this.sequence++ % 1_000_000)).toString(16)}`;
  }

  private async record(obj: KubeObject, type: EventType, reason: string, message: string, fieldPath?: string): Promise<void> {
    const namespace = obj.metadata.namespace || 'default';
    const now = this.clock.now();
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
    const source: Record<string, string> = { component: this.component };
    if (this.host) source.host = this.host;
    const at = rfc3339(now);
    const newName = (): string => this.nameFor(obj.metadata.name!, now);
    const result = this.correlator.correlate(
      {
        metadata: { name: newName(), namespace },
        involvedObject,
        reason,
        message,
        source,
        firstTimestamp: at,
        lastTimestamp: at,
        count: 1,
        type,
        eventTime: null,
        reportingComponent: this.component,
        reportingInstance: this.host ?? '',
      },
      newName,
    );
    if (result.skip) return;
    const { key, event } = result;
    if (result.update) {
      try {
        // What client-go's two-way strategic merge patch of a recurring event holds.
        const patched = await this.client.patch(Resources.events, namespace, event.metadata.name, 'strategic', { count: event.count, lastTimestamp: event.lastTimestamp, message: event.message });
        this.correlator.written(key, patched);
        return;
      } catch (err) {
        // Expired or deleted meanwhile: create it again under its name, with its count (recordEvent).
        if (!(err instanceof ApiError && err.code === 404)) throw err;
      }
    }
    const created = await this.client.create(Resources.events, namespace, event as unknown as KubeObject);
    this.correlator.written(key, created);
  }
}
