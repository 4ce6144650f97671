import { memo } from 'preact/compat';
import { isKind, type KubeObject } from '../api.js';
import { useSubscription, useTopics } from '../hooks.js';
import { shortTime } from '../model.js';
import { eventsFilter, filterEvents, onSelection, select } from '../selection.js';
import { eventTime, MAX_EVENTS, store } from '../store.js';

/** The feed shows this many of the newest matching events. */
const SHOWN = 200;

interface Involved {
  kind?: string;
  name?: string;
  namespace?: string;
  uid?: string;
}

function involvedOf(event: KubeObject): Involved {
  return ((event as { involvedObject?: Involved }).involvedObject ?? {}) as Involved;
}

/** "Kind/name", as kubectl names an object (and as the filter is typed). */
export function objectLabel(o: Involved): string {
  return `${o.kind ?? ''}/${o.name ?? ''}`;
}

function matches(event: KubeObject, filter: string): boolean {
  if (filter === '') return true;
  const o = involvedOf(event);
  const label = objectLabel(o).toLowerCase();
  const f = filter.toLowerCase();
  // "Pod/web-1" names one object exactly; anything else matches part of the object's kind/name or namespace.
  if (f.includes('/')) return label === f || label.includes(f) || `${o.namespace}/${o.name}`.toLowerCase().includes(f);
  return label.includes(f) || (o.namespace ?? '').toLowerCase() === f;
}

/** One event; memoized, so that a new event re-renders its own row only (kept events are never changed in place). */
export const EventRow = memo(function EventRow({
  event,
  onObject,
  showObject = true,
}: {
  event: KubeObject;
  onObject?: (o: Involved) => void;
  showObject?: boolean;
}) {
  const e = event as { type?: string; reason?: string; message?: string; count?: number };
  const o = involvedOf(event);
  return (
    <tr class={e.type === 'Warning' ? 'warning' : ''}>
      <td class="time">{shortTime(eventTime(event))}</td>
      <td>
        <span class={`badge ${e.type === 'Warning' ? 'bad' : 'quiet'}`}>{e.type ?? 'Normal'}</span>
      </td>
      <td class="reason">{e.reason}</td>
      {showObject && (
        <td class="object">
          {onObject ? (
            <button
              type="button"
              class="link"
              onClick={() => onObject(o)}
              title="show this object's events and inspect it"
            >
              {objectLabel(o)}
            </button>
          ) : (
            objectLabel(o)
          )}
        </td>
      )}
      <td class="message">
        {e.message}
        {(e.count ?? 1) > 1 && <span class="times"> ×{e.count}</span>}
      </td>
    </tr>
  );
});

/** Shows the object's events only, and inspects it. */
function follow(o: Involved): void {
  filterEvents(objectLabel(o));
  if (o.kind && isKind(o.kind) && o.name) select(o.kind, o.namespace ? `${o.namespace}/${o.name}` : o.name);
}

export function EventsView() {
  useTopics('events', 'feeds');
  useSubscription(onSelection);
  const filter = eventsFilter();
  const all = store.events();
  const shown: KubeObject[] = [];
  for (const event of all) {
    if (!matches(event, filter)) continue;
    shown.push(event);
    if (shown.length >= SHOWN) break;
  }
  const sample = store.feed('Event')?.sample;
  return (
    <div class="events">
      <div class="events-bar">
        <h2>Events</h2>
        <input
          type="search"
          placeholder="filter by object: Pod/web-1, web, a namespace"
          value={filter}
          onInput={(e) => filterEvents((e.target as HTMLInputElement).value)}
          aria-label="filter events by object"
        />
        <span class="count">
          {shown.length < all.length ? `${shown.length} of ${all.length}` : all.length}
          {sample || all.length >= MAX_EVENTS ? ` (the newest ${MAX_EVENTS.toLocaleString()} are kept)` : ''}
        </span>
      </div>
      <div class="events-scroll">
        <table>
          <tbody>
            {shown.map((event) => (
              <EventRow key={event.metadata.uid ?? event.metadata.name} event={event} onObject={follow} />
            ))}
          </tbody>
        </table>
        {shown.length === 0 && <p class="empty">{filter ? `No events of ${filter}.` : 'No events yet.'}</p>}
      </div>
    </div>
  );
}
