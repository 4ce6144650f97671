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
 * groupcache's lru.Cache for the correlator: keys (KeyHash digests) in use order in a Map, each with a slot, a small
 * integer that indexes the correlator's columns (an array per field) where a record object per key would be.
 * Slots are 0, 1, 2, ... until `max` keys, then the least recently used key is dropped and its slot is the new
 * key's. Columns hold numbers unboxed and need no object header, less memory than a record per key (a pod's
 * kubelet events make seven keys).
 * Evicting through entries().next() steps over the holes V8 leaves at the front of a Map until it rebuilds the
 * table; a list entry per key, or one iterator kept for the map's life, evicts faster but costs heap (a kept
 * iterator holds on to outgrown tables), measured as not worth it here.
 */
class LruSlots {
  private readonly slots = new Map<number, number>();
  /** The most recently used key: the correlator often uses a key again right after, and it is already last. */
  private last = -1;

  constructor(private readonly max: number) {}

  /** The key's slot, now the most recently used key; -1 if the key is not here. */
  get(key: number): number {
    const slot = this.slots.get(key);
    if (slot === undefined) return -1;
    if (key !== this.last) {
      this.slots.delete(key);
      this.slots.set(key, slot);
      this.last = key;
    }
    return slot;
  }

  /**
   * A slot for a key that is not here, now the most recently used. At `max` keys the least recently used is
   * dropped first (lru.Cache drops it after adding: the same keys remain) and the caller overwrites its columns.
   */
  add(key: number): number {
    let slot = this.slots.size;
    if (slot >= this.max) {
      const [oldest, freed] = this.slots.entries().next().value!;
      this.slots.delete(oldest);
      slot = freed;
    }
    this.slots.set(key, slot);
    this.last = key;
    return slot;
  }

  /** The key's slot, added if it is not here. */
  use(key: number): number {
    const slot = this.get(key);
    return slot >= 0 ? slot : this.add(key);
  }
}

/**
 * A 53-bit hash of a correlator key's fields, which the LRUs hold instead of the key string: a number (one
 * 16-byte heap number) rather than 100-200 characters, which thousands of kubelet recorders kept for every pod.
 * Two 32-bit lanes, each a multiply-rotate step per UTF-16 unit (a bijection of the lane's state, so keys of one
 * length that differ in one unit keep different lanes up to the final cut to 53 bits) and a separator after each field that no unit can equal (so fields
 * cannot run into each other, which the old \0-joined strings could); then both lanes mixed into each other.
 * Why a collision cannot matter in practice: an LRU holds at most 4,096 keys, so a new key meets one of them with
 * odds of ~4,096 / 2^53 (5e-13); a billion events in one recorder would leave odds of 5e-4 of one wrong count bump
 * or aggregate in the whole run. Keys crafted to collide could (object names are the input), which would only
 * misplace an Event's count: the simulator is not a security boundary.
 */
class KeyHash {
  private a = 0;
  private b = 0;

  start(): this {
    this.a = 0x2545f491;
    this.b = 0x6a09e667;
    return this;
  }

  /** Continue from another hash's fields (the object's fields are the start of every key). */
  from(other: KeyHash): this {
    this.a = other.a;
    this.b = other.b;
    return this;
  }

  add(field: string): this {
    let a = this.a;
    let b = this.b;
    for (let i = 0; i < field.length; i++) {
      const c = field.charCodeAt(i);
      a = Math.imul(a ^ c, 0x9e3779b1);
      a = (a << 15) | (a >>> 17);
      b = Math.imul(b ^ c, 0x85ebca77);
      b = (b << 13) | (b >>> 19);
    }
    // The separator: 0x10000 is above every UTF-16 unit.
    a = Math.imul(a ^ 0x10000, 0x9e3779b1);
    this.a = (a << 15) | (a >>> 17);
    b = Math.imul(b ^ 0x10000, 0x85ebca77);
    this.b = (b << 13) | (b >>> 19);
    return this;
  }

  /** 53 bits of both lanes after murmur3-style finalising, as a non-negative integer Map key. */
  digest(): number {
    let a = this.a;
    let b = this.b;
    a = Math.imul(a ^ (a >>> 16), 0x85ebca6b);
    a ^= Math.imul(b ^ (b >>> 13), 0xc2b2ae35);
    b = Math.imul(b ^ (b >>> 16), 0x85ebca6b);
    b ^= Math.imul(a ^ (a >>> 13), 0xc2b2ae35);
    a = Math.imul(a ^ (a >>> 16), 0x27d4eb2f);
    return (b & 0x1fffff) * 0x1_0000_0000 + (a >>> 0);
  }
}

interface ObjectReference {
  kind: string | undefined;
  namespace?: string;
  name: string | undefined;
  uid: string | undefined;
  apiVersion: string | undefined;
  resourceVersion: string | undefined;
  fieldPath?: string;
}

interface EventBody {
  metadata: { name: string; namespace: string };
  involvedObject: ObjectReference;
  reason: string;
  message: string;
  source: { component: string; host?: string };
  firstTimestamp: string;
  lastTimestamp: string;
  count: number;
  type: EventType;
  eventTime: null;
  reportingComponent: string;
  reportingInstance: string;
}

/** What the correlator decided for one event: drop it, create it, or bump an existing one's count. */
export type Correlation = { skip: true } | { skip: false; key: number; event: EventBody; update: boolean };

const SKIP: Correlation = { skip: true };

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
  /**
   * EventAggregate's records: per key, the distinct messages of similar events in the current window, in
   * insertion order, and when the last came. Nearly every aggregate only ever sees one message (a kubelet's
   * Pulled/Created/Started for one pod), so a Set is made from the second on (a Set's table is large even for
   * one member, and a dense cluster has three aggregates a pod).
   */
  private readonly aggregates = new LruSlots(LRU_ENTRIES);
  private readonly firstMessage: (string | undefined)[] = [];
  private readonly messages: (Set<string> | undefined)[] = [];
  private readonly lastSimilar: number[] = [];
  /** eventObserve's records: per key, the event written first, which the same event again bumps. */
  private readonly observed = new LruSlots(LRU_ENTRIES);
  private readonly count: number[] = [];
  private readonly firstTimestamp: string[] = [];
  private readonly name: string[] = [];
  /**
   * The spam filter's token buckets, each held as one number: the instant it was (or would have been) empty.
   * Its tokens are (now - that) / SPAM_REFILL_MS, at most SPAM_BURST; in whole milliseconds this is exact, where
   * a fractional token count added up refills with rounding errors.
   */
  private readonly buckets = new LruSlots(LRU_ENTRIES);
  private readonly emptyAt: number[] = [];
  private readonly objectHash = new KeyHash();
  private readonly keyHash = new KeyHash();

  constructor(private readonly clock: Clock) {}

  correlate(event: EventBody, newName: () => string): Correlation {
    const now = this.clock.now();
    const { involvedObject: o, source } = event;
    const object = this.objectHash
      .start()
      .add(source.component)
      .add(source.host ?? '')
      .add(o.kind ?? '')
      .add(o.namespace ?? '');
    object
      .add(o.name ?? '')
      .add(o.uid ?? '')
      .add(o.apiVersion ?? '');
    const objectKey = object.digest();

    // EventAggregate: similar events (all but the message) in the last 10 minutes.
    const similar = this.keyHash
      .from(object)
      .add(event.type)
      .add(event.reason)
      .add(event.reportingComponent)
      .add(event.reportingInstance);
    const aggregateKey = similar.digest();
    let slot = this.aggregates.get(aggregateKey);
    if (slot < 0 || now - this.lastSimilar[slot]! > AGGREGATE_INTERVAL_MS) {
      if (slot < 0) slot = this.aggregates.add(aggregateKey);
      this.firstMessage[slot] = undefined;
      this.messages[slot] = undefined;
    }
    this.lastSimilar[slot] = now;
    let key: number;
    if (this.addMessage(slot, event.message) >= AGGREGATE_MAX_EVENTS) {
      // The set stays below the threshold, so every further similar event is aggregated too.
      const messages = this.messages[slot]!;
      messages.delete(messages.values().next().value!);
      // One field more than any event's own key below, so the two kinds of key cannot be the same fields.
      key = similar.add('aggregate').digest();
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
    } else {
      key = this.keyHash
        .from(object)
        .add(o.fieldPath ?? '')
        .add(event.type)
        .add(event.reason)
        .add(event.message)
        .digest();
    }

    // eventObserve: the same event again is a count bump of the one written first.
    slot = this.observed.get(key);
    if (slot >= 0) {
      event = {
        ...event,
        metadata: { ...event.metadata, name: this.name[slot]! },
        firstTimestamp: this.firstTimestamp[slot]!,
        count: this.count[slot]! + 1,
      };
    } else {
      slot = this.observed.add(key);
    }
    this.observe(slot, event.count, event.firstTimestamp, event.metadata.name);

    // EventSourceObjectSpamFilter: a token bucket per source and object, full to start with.
    const full = now - SPAM_BURST * SPAM_REFILL_MS;
    let emptyAt = full;
    slot = this.buckets.get(objectKey);
    if (slot < 0) slot = this.buckets.add(objectKey);
    else emptyAt = Math.max(this.emptyAt[slot]!, full);
    const allowed = now - emptyAt >= SPAM_REFILL_MS;
    this.emptyAt[slot] = allowed ? emptyAt + SPAM_REFILL_MS : emptyAt;
    if (!allowed) return SKIP;
    return { skip: false, key, event, update: event.count > 1 };
  }

  /** Adds a message to an aggregate's distinct messages; how many there are now. */
  private addMessage(slot: number, message: string): number {
    const many = this.messages[slot];
    if (many) return many.add(message).size;
    const first = this.firstMessage[slot];
    if (first === undefined || first === message) {
      this.firstMessage[slot] = message;
      return 1;
    }
    this.messages[slot] = new Set([first, message]);
    return 2;
  }

  private observe(slot: number, count: number, firstTimestamp: string, name: string): void {
    this.count[slot] = count;
    this.firstTimestamp[slot] = firstTimestamp;
    this.name[slot] = name;
  }

  /** The server's answer (its count, after a create that replaced a vanished event) for the next bump. */
  written(key: number, event: KubeObject): void {
    const count = typeof event.count === 'number' ? event.count : 1;
    const firstTimestamp = typeof event.firstTimestamp === 'string' ? event.firstTimestamp : '';
    this.observe(this.observed.use(key), count, firstTimestamp, event.metadata.name!);
  }
}

/**
 * Records core/v1 Events about objects, as client-go's recorder does, through the EventCorrelator above.
 * Writing events never fails the caller: they are best effort, like in Kubernetes.
 */
/**
 * Shared by every recorder of the process: two components writing about one object in the same millisecond (the PV
 * controller and a provisioner about a claim) must not make the same event name, which client-go avoids with
 * nanoseconds.
 */
let sequence = 0;

export class EventRecorder {
  private readonly correlator: EventCorrelator;
  /** The same for every event: the store copies what it is given. */
  private readonly source: { component: string; host?: string };

  constructor(
    private readonly client: KubeClient,
    private readonly clock: Clock,
    private readonly component: string,
    private readonly host?: string,
  ) {
    this.correlator = new EventCorrelator(clock);
    this.source = host ? { component, host } : { component };
  }

  event(obj: KubeObject, type: EventType, reason: string, message: string, fieldPath?: string): void {
    void this.record(obj, type, reason, message, fieldPath).catch(() => undefined);
  }

  /** `<object>.<nanoseconds, hex>`; the sequence keeps events of the same millisecond apart. */
  private nameFor(objectName: string, now: number): string {
    // Nanoseconds overflow a double's integer range, so BigInt.
    return `${objectName}.${(BigInt(now) * 1_000_000n + BigInt(sequence++ % 1_000_000)).toString(16)}`;
  }

  private async record(
    obj: KubeObject,
    type: EventType,
    reason: string,
    message: string,
    fieldPath?: string,
  ): Promise<void> {
    const namespace = obj.metadata.namespace || 'default';
    const now = this.clock.now();
    const { kind, apiVersion } = obj;
    const { name, uid, resourceVersion } = obj.metadata;
    // Made in their final shape: a `delete` would turn the object into a slow dictionary.
    const involvedObject: ObjectReference = obj.metadata.namespace
      ? { kind, namespace: obj.metadata.namespace, name, uid, apiVersion, resourceVersion }
      : { kind, name, uid, apiVersion, resourceVersion };
    if (fieldPath) involvedObject.fieldPath = fieldPath;
    const source = this.source;
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
        const patched = await this.client.patch(Resources.events, namespace, event.metadata.name, 'strategic', {
          count: event.count,
          lastTimestamp: event.lastTimestamp,
          message: event.message,
        });
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
