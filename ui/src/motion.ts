/**
 * Pods that move: when a pod of a controller goes away (terminating, deleted) and another pod of the same
 * controller appears in the same moment, the new one flies in from where the old one was (a FLIP animation), so an
 * eviction or a rescheduled StatefulSet pod reads as motion across lanes. Both ends are recorded while a frame is
 * committed; they are paired right after it, before the browser paints.
 */

interface Departure {
  rect: DOMRect;
  at: number;
}

interface Arrival {
  element: HTMLElement;
}

/** A departure is a candidate for this long (wall time) after it was seen. */
const PAIR_WITHIN_MS = 4000;
const FLIGHT_MS = 900;

const departures = new Map<string, Departure[]>();
const arrivals = new Map<string, Arrival[]>();
let pairing = false;

function schedulePairing(): void {
  if (pairing) return;
  pairing = true;
  queueMicrotask(pair);
}

function pair(): void {
  pairing = false;
  const now = performance.now();
  for (const [group, waiting] of arrivals) {
    const from = departures.get(group)?.filter((d) => now - d.at < PAIR_WITHIN_MS) ?? [];
    for (const arrival of waiting) {
      const departure = from.shift();
      if (!departure) break;
      fly(arrival.element, departure.rect);
    }
    if (from.length > 0) departures.set(group, from);
    else departures.delete(group);
  }
  arrivals.clear();
}

function fly(element: HTMLElement, from: DOMRect): void {
  if (!element.isConnected || typeof element.animate !== 'function') return;
  const to = element.getBoundingClientRect();
  const dx = from.left - to.left;
  const dy = from.top - to.top;
  if (Math.abs(dx) < 1 && Math.abs(dy) < 1) return;
  element.animate(
    [
      { transform: `translate(${dx}px, ${dy}px) scale(1.25)`, boxShadow: '0 0 0 3px rgba(255, 170, 0, 0.9)' },
      { transform: 'translate(0, 0) scale(1)', boxShadow: '0 0 0 0 rgba(255, 170, 0, 0)' },
    ],
    { duration: FLIGHT_MS, easing: 'cubic-bezier(0.2, 0.7, 0.2, 1)' },
  );
  // An attribute the view does not render, so that re-renders keep it (tests look for it).
  element.dataset.moved = String(Math.round(Math.hypot(dx, dy)));
}

/** A pod of `group` (its controller's uid) stopped being where `element` shows it. */
export function departed(group: string, element: HTMLElement): void {
  if (!element.isConnected) return;
  const rect = element.getBoundingClientRect();
  if (rect.width === 0) return;
  let list = departures.get(group);
  if (!list) departures.set(group, (list = []));
  list.push({ rect, at: performance.now() });
  schedulePairing();
}

/** A pod of `group` has just appeared as `element`. */
export function arrived(group: string, element: HTMLElement): void {
  let list = arrivals.get(group);
  if (!list) arrivals.set(group, (list = []));
  list.push({ element });
  schedulePairing();
}
