/**
 * Pods that move: when a pod of a controller leaves a lane (terminating, deleted, or bound to a node and so gone
 * from "Not scheduled") and another pod of the same controller appears in a lane in the same moment, the new one
 * flies in from where the old one was (a FLIP animation), so an eviction or a rescheduled StatefulSet pod reads as
 * motion across lanes. Both ends are recorded while a frame is committed and paired right after it, before the
 * browser paints: every position is read first and every animation started after, so that a frame of many pods
 * costs one layout, not one per pod.
 */

interface Departure {
  element: HTMLElement;
  /** Where it was, read at the first pairing after it left. */
  rect?: DOMRect;
  at: number;
}

/** A departure is a candidate for this long (wall time) after it was seen. */
const PAIR_WITHIN_MS = 4000;
const FLIGHT_MS = 900;
/** At most this many pods fly per frame; past it (a Deployment of thousands rolling) the rest simply appear. */
const MAX_FLIGHTS_PER_FRAME = 40;

const departures = new Map<string, Departure[]>();
const arrivals = new Map<string, HTMLElement[]>();
let pairing = false;

function schedulePairing(): void {
  if (pairing) return;
  pairing = true;
  queueMicrotask(pair);
}

function pair(): void {
  pairing = false;
  const now = performance.now();
  // Reads: where the new departures were, where the arrivals are.
  for (const [group, list] of departures) {
    const fresh = list.filter((d) => now - d.at < PAIR_WITHIN_MS);
    for (const d of fresh) if (!d.rect && d.element.isConnected) d.rect = d.element.getBoundingClientRect();
    const placed = fresh.filter((d) => d.rect !== undefined && d.rect.width > 0);
    if (placed.length > 0) departures.set(group, placed);
    else departures.delete(group);
  }
  const flights: Array<{ element: HTMLElement; dx: number; dy: number }> = [];
  for (const [group, waiting] of arrivals) {
    const from = departures.get(group);
    if (!from) continue;
    for (const element of waiting) {
      const departure = from.shift();
      if (!departure) break;
      if (flights.length >= MAX_FLIGHTS_PER_FRAME || !element.isConnected) continue;
      const to = element.getBoundingClientRect();
      const dx = departure.rect!.left - to.left;
      const dy = departure.rect!.top - to.top;
      if (Math.abs(dx) >= 1 || Math.abs(dy) >= 1) flights.push({ element, dx, dy });
    }
    if (from.length === 0) departures.delete(group);
  }
  arrivals.clear();
  // Writes.
  for (const { element, dx, dy } of flights) {
    if (typeof element.animate !== 'function') continue;
    element.animate(
      [
        // Transform only: the compositor moves it without a repaint per frame.
        { transform: `translate(${dx}px, ${dy}px) scale(1.3)` },
        { transform: 'translate(0, 0) scale(1)' },
      ],
      { duration: FLIGHT_MS, easing: 'cubic-bezier(0.2, 0.7, 0.2, 1)' },
    );
    // An attribute the view does not render, so that re-renders keep it (tests look for it).
    element.dataset.moved = String(Math.round(Math.hypot(dx, dy)));
  }
}

/** A pod of `group` (its controller's uid) stopped being where `element` shows it. */
export function departed(group: string, element: HTMLElement): void {
  let list = departures.get(group);
  if (!list) departures.set(group, (list = []));
  list.push({ element, at: performance.now() });
  schedulePairing();
}

/** A pod of `group` has just appeared as `element`. */
export function arrived(group: string, element: HTMLElement): void {
  let list = arrivals.get(group);
  if (!list) arrivals.set(group, (list = []));
  list.push(element);
  schedulePairing();
}
