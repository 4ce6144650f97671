import { FieldErrors } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { ageOf, col, field, str } from '../printers.js';
import type { KindInfo, TableColumn } from '../types.js';

/**
 * Events, served twice over one storage as kube-apiserver does: core/v1 Event is what is stored, and
 * events.k8s.io/v1 Event is the same objects converted on the way in and out (k8s.io/kubernetes
 * pkg/apis/events/v1 conversion):
 *
 *   events.k8s.io/v1            core/v1
 *   regarding                   involvedObject
 *   note                        message
 *   reportingController         reportingComponent
 *   deprecatedSource            source
 *   deprecatedFirstTimestamp    firstTimestamp
 *   deprecatedLastTimestamp     lastTimestamp
 *   deprecatedCount             count
 *   (same name)                 eventTime, series, action, reason, type, related, reportingInstance
 */
type Obj = Record<string, unknown>;

const RENAMES: ReadonlyArray<readonly [v1: string, core: string]> = [
  ['regarding', 'involvedObject'],
  ['note', 'message'],
  ['reportingController', 'reportingComponent'],
  ['deprecatedSource', 'source'],
  ['deprecatedFirstTimestamp', 'firstTimestamp'],
  ['deprecatedLastTimestamp', 'lastTimestamp'],
  ['deprecatedCount', 'count'],
];

function rename(obj: KubeObject, apiVersion: string, direction: 0 | 1): KubeObject {
  const out: Obj = { kind: 'Event', apiVersion };
  const from = new Map(RENAMES.map((r) => [r[direction], r[1 - direction]!]));
  for (const [k, v] of Object.entries(obj)) {
    if (k === 'kind' || k === 'apiVersion') continue;
    out[from.get(k) ?? k] = v;
  }
  return out as KubeObject;
}

/** events.k8s.io/v1 → core/v1 (the stored form). */
export function eventToCore(obj: KubeObject): KubeObject {
  return rename(obj, 'v1', 0);
}

/** core/v1 (stored) → events.k8s.io/v1. */
export function eventToV1(obj: KubeObject): KubeObject {
  return rename(obj, 'events.k8s.io/v1', 1);
}

function since(t: unknown, now: number): string {
  return typeof t === 'string' && t !== '' ? ageOf(t, now) : '<unknown>';
}

/** kube-apiserver's event columns (printEvent), computed from the core form. */
function eventColumns(core: (o: KubeObject) => KubeObject): TableColumn[] {
  const first = (o: KubeObject, now: number): string =>
    str(o, 'firstTimestamp') ? since(str(o, 'firstTimestamp'), now) : since(str(o, 'eventTime'), now);
  const last = (o: KubeObject, now: number): string => {
    if (isPlainObject(o.series)) return since(str(o, 'series.lastObservedTime'), now);
    return str(o, 'lastTimestamp') ? since(str(o, 'lastTimestamp'), now) : first(o, now);
  };
  const count = (o: KubeObject): number => {
    const series = field(o, 'series.count');
    if (isPlainObject(o.series) && typeof series === 'number') return series;
    const c = field(o, 'count');
    return typeof c === 'number' && c !== 0 ? c : 1;
  };
  const on =
    <T>(f: (o: KubeObject, now: number) => T) =>
    (o: KubeObject, now: number): T =>
      f(core(o), now);
  return [
    col('Last Seen', on(last), { description: 'Time when this Event was last seen' }),
    col(
      'Type',
      on((o) => str(o, 'type')),
      { description: 'Type of this event (Normal, Warning), new types could be added in the future' },
    ),
    col(
      'Reason',
      on((o) => str(o, 'reason')),
      {
        description:
          "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
      },
    ),
    col(
      'Object',
      on((o) => {
        const kind = str(o, 'involvedObject.kind').toLowerCase();
        const name = str(o, 'involvedObject.name');
        return name ? `${kind}/${name}` : kind;
      }),
      { description: 'The object that this event is about.' },
    ),
    col(
      'Subobject',
      on((o) => str(o, 'involvedObject.fieldPath')),
      {
        priority: 1,
        description:
          'If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].',
      },
    ),
    col(
      'Source',
      on((o) => {
        const component = str(o, 'source.component') || str(o, 'reportingComponent');
        const host = str(o, 'source.host') || str(o, 'reportingInstance');
        return host ? `${component}, ${host}` : component;
      }),
      {
        priority: 1,
        description: 'The component reporting this event. Should be a short machine understandable string.',
      },
    ),
    col(
      'Message',
      on((o) => str(o, 'message').trim()),
      { description: 'A human-readable description of the status of this operation.' },
    ),
    col('First Seen', on(first), {
      priority: 1,
      description: 'The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)',
    }),
    col('Count', on(count), {
      type: 'integer',
      priority: 1,
      description: 'The number of times this event has occurred.',
    }),
    col(
      'Name',
      on((o) => o.metadata.name ?? ''),
      { priority: 1, format: 'name', description: 'Name must be unique within a namespace.' },
    ),
  ];
}

export const coreEventColumns: TableColumn[] = eventColumns((o) => o);

/** Field selectors of events.k8s.io/v1, evaluated on the stored (core) form. */
function involved(path: string): (o: KubeObject) => string {
  return (o) => str(o, `involvedObject.${path}`);
}

export const eventsV1: KindInfo = {
  group: 'events.k8s.io',
  version: 'v1',
  kind: 'Event',
  resource: 'events',
  singular: 'event',
  namespaced: true,
  // "ev" as kube-apiserver lists it; kubectl resolves it to core's events (the higher priority) without a warning.
  shortNames: ['ev'],
  storage: { group: '', resource: 'events', toStorage: eventToCore, fromStorage: eventToV1 },
  selectableFields: {
    'regarding.kind': involved('kind'),
    'regarding.name': involved('name'),
    'regarding.namespace': involved('namespace'),
    'regarding.uid': involved('uid'),
    'regarding.apiVersion': involved('apiVersion'),
    'regarding.resourceVersion': involved('resourceVersion'),
    'regarding.fieldPath': involved('fieldPath'),
    reason: (o) => str(o, 'reason'),
    type: (o) => str(o, 'type'),
    reportingController: (o) => str(o, 'reportingComponent'),
  },
  strategy: {
    validate(obj) {
      return field(obj, 'eventTime') === undefined ? [FieldErrors.required('eventTime', '')] : [];
    },
  },
  columns: eventColumns(eventToCore),
  noAge: true,
  noName: true,
};
