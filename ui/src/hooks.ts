import { useEffect, useReducer, useState } from 'preact/hooks';
import { type Attributes, can, type Decision } from './access.js';
import { onTokenChange } from './api.js';
import { clock } from './clock.js';
import { store } from './store.js';

/** A function that re-renders the component. */
export function useRerender(): () => void {
  const [, bump] = useReducer((n: number) => n + 1, 0);
  return bump as () => void;
}

/** Re-renders the component when any of the store's topics changes (see ClusterStore.subscribe). */
export function useTopics(...topics: string[]): void {
  const bump = useRerender();
  const key = topics.join('\n');
  // Effects run after the render: a frame the store applied in between told no one, so look again once subscribed.
  const renderedAt = store.generation;
  useEffect(() => {
    const offs = topics.map((t) => store.subscribe(t, bump));
    if (store.generation !== renderedAt) bump();
    return () => {
      for (const off of offs) off();
    };
  }, [key]);
}

export function useClock(): typeof clock {
  const bump = useRerender();
  useEffect(() => clock.subscribe(bump), []);
  return clock;
}

/** Whether the user may do something (undefined while the server is asked). */
export function useCan(attrs: Attributes | undefined): Decision | undefined {
  const [decision, setDecision] = useState<Decision | undefined>(undefined);
  const [generation, bump] = useReducer((n: number) => n + 1, 0);
  useEffect(() => onTokenChange(() => bump(undefined)), []);
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
  const bump = useRerender();
  useEffect(() => clock.onKubelets(bump), []);
  return clock.stopped;
}
