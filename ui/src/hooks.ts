import { useEffect, useLayoutEffect, useReducer, useState } from 'preact/hooks';
import { type Attributes, can, type Decision } from './access.js';
import { onTokenChange } from './api.js';
import { clock } from './clock.js';
import { store } from './store.js';

/** A function that re-renders the component. */
export function useRerender(): () => void {
  const [, bump] = useReducer((n: number) => n + 1, 0);
  return bump as () => void;
}

/**
 * Subscribes a view to a source of changes, re-rendering it on each. The subscription is made in a layout effect,
 * which runs in the same task as the render that read the data: a passive effect runs after the next paint, and a
 * frame of changes applied before it told no one (a node lane stayed empty while the header counted its pods).
 */
export function useSubscription(subscribe: (listener: () => void) => () => void, key = ''): void {
  const bump = useRerender();
  useLayoutEffect(() => subscribe(bump), [key]);
}

/** Re-renders the component when any of the store's topics changes (see ClusterStore.subscribe). */
export function useTopics(...topics: string[]): void {
  useSubscription((listener) => {
    const offs = topics.map((t) => store.subscribe(t, listener));
    return () => {
      for (const off of offs) off();
    };
  }, topics.join('\n'));
}

export function useClock(): typeof clock {
  useSubscription((listener) => clock.subscribe(listener));
  return clock;
}

/** Whether the user may do something (undefined while the server is asked). */
export function useCan(attrs: Attributes | undefined): Decision | undefined {
  const [decision, setDecision] = useState<Decision | undefined>(undefined);
  const generation = useTokenGeneration();
  const key = attrs ? JSON.stringify(attrs) : '';
  useEffect(() => {
    if (!attrs) return;
    let live = true;
    void can(attrs).then((d) => live && setDecision(d));
    return () => {
      live = false;
    };
  }, [key, generation]);
  return decision;
}

/** The nodes whose kubelets are failed (/sim/v1/nodes); re-renders only when that set changes. */
export function useStoppedNodes(): ReadonlySet<string> {
  useSubscription((listener) => clock.onKubelets(listener));
  return clock.stopped;
}

/** A number that changes each time the user gives another token (for effects that ask the server again). */
export function useTokenGeneration(): number {
  const [generation, bump] = useReducer((n: number) => n + 1, 0);
  useLayoutEffect(() => onTokenChange(() => bump(undefined)), []);
  return generation;
}
