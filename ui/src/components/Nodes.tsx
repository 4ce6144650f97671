import { memo } from 'preact/compat';
import { useLayoutEffect, useRef, useState } from 'preact/hooks';
import type { KubeObject } from '../api.js';
import { useStoppedNodes, useTopics } from '../hooks.js';
import { type NodeView, nodeUsage, nodeView, POD_STATE_TEXT, podState, type Usage, hueOf } from '../model.js';
import { arrived, departed } from '../motion.js';
import { select } from '../selection.js';
import { controllerOf, keyOf, store } from '../store.js';

/** Past this many pods the lanes show pods as small squares without names. */
const NAMED_CHIPS_UP_TO = 300;
/** How long a deleted pod stays on screen, fading out (wall time). */
const LEAVING_MS = 700;

function podTitle(pod: KubeObject): string {
  const owner = controllerOf(pod);
  const node = (pod.spec as { nodeName?: string } | undefined)?.nodeName;
  return [
    `${pod.metadata.namespace}/${pod.metadata.name}`,
    POD_STATE_TEXT[podState(pod)],
    node ? `on ${node}` : 'not scheduled',
    owner ? `${owner.kind} ${owner.name}` : '',
  ]
    .filter(Boolean)
    .join(' · ');
}

interface ChipProps {
  pod: KubeObject;
  named: boolean;
  leaving?: boolean;
  /** A node lane's chip: it flies in from the lane a pod it replaces left (motion.ts). */
  moves?: boolean;
}

/** One pod: its colour is its state (transitions animate), its left edge its controller (a ReplicaSet's revision). */
export const PodChip = memo(function PodChip({ pod, named, leaving, moves }: ChipProps) {
  const ref = useRef<HTMLButtonElement>(null);
  const state = podState(pod);
  const owner = controllerOf(pod);
  const gone = leaving || state === 'terminating';
  useLayoutEffect(() => {
    if (moves && owner && ref.current && !gone) arrived(owner.uid, ref.current);
  }, []);
  useLayoutEffect(() => {
    if (moves && gone && owner && ref.current) departed(owner.uid, ref.current);
  }, [gone]);
  const hue = hueOf(owner?.name ?? pod.metadata.name);
  return (
    <button
      ref={ref}
      type="button"
      class={`pod s-${state}${named ? ' named' : ''}${leaving ? ' leaving' : ''}`}
      style={{ '--owner-hue': String(hue) }}
      title={podTitle(pod)}
      data-pod={pod.metadata.name}
      data-state={state}
      onClick={() => select('Pod', keyOf(pod))}
    >
      {named ? pod.metadata.name : ''}
    </button>
  );
});

function UsageBar({ usage }: { usage: Usage }) {
  const pct = usage.allocatable > 0 ? Math.min(100, (usage.used / usage.allocatable) * 100) : 0;
  const label = usage.resource === 'pods' ? `${usage.used / 1000}/${usage.allocatable / 1000} pods` : usage.resource;
  return (
    <div class="usage" title={`${usage.resource}: ${Math.round(pct)}% of allocatable requested`}>
      <span class="usage-label">{label}</span>
      <span class="usage-track">
        <span class={`usage-fill${pct >= 90 ? ' high' : ''}`} style={{ width: `${pct}%` }} />
      </span>
    </div>
  );
}

function NodeBadges({ view, stopped, exists }: { view: NodeView; stopped: boolean; exists: boolean }) {
  if (!exists) return <span class="badge bad">no Node object</span>;
  return (
    <>
      <span
        class={`badge ${view.ready === 'True' ? 'good' : 'bad'}`}
        data-ready={view.ready}
        title={`Ready condition: ${view.ready}${view.ready === 'Unknown' ? ' (the kubelet stopped posting status)' : ''}`}
      >
        {view.ready === 'True' ? 'Ready' : 'NotReady'}
      </span>
      {view.cordoned && <span class="badge warn">cordoned</span>}
      {stopped && <span class="badge bad">kubelet stopped</span>}
      {view.taints.length > 0 && (
        <span
          class="badge warn"
          title={view.taints.map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`).join('\n')}
        >
          {view.taints.length} taint{view.taints.length === 1 ? '' : 's'}
        </span>
      )}
    </>
  );
}

interface Ghost {
  pod: KubeObject;
  until: number;
}

/** One node and its pods. Re-renders only when this node or one of its pods changes. */
const Lane = memo(function Lane({ name, named }: { name: string; named: boolean }) {
  useTopics(`node:${name}`);
  const stoppedNodes = useStoppedNodes();
  const node = name === '' ? undefined : store.get('Node', name);
  const pods = store.podsOn(name);
  // Pods deleted since the last render stay a moment as ghosts, fading out where they were.
  const previous = useRef(new Map<string, KubeObject>());
  const ghosts = useRef(new Map<string, Ghost>());
  const [, setTick] = useState(0);
  const now = performance.now();
  const current = new Map(pods.map((p) => [p.metadata.uid ?? keyOf(p), p]));
  for (const [uid, pod] of previous.current)
    if (!current.has(uid) && !ghosts.current.has(uid)) ghosts.current.set(uid, { pod, until: now + LEAVING_MS });
  for (const [uid, ghost] of ghosts.current) if (ghost.until <= now || current.has(uid)) ghosts.current.delete(uid);
  previous.current = current;
  useLayoutEffect(() => {
    if (ghosts.current.size === 0) return;
    const timer = setTimeout(() => setTick((n) => n + 1), LEAVING_MS + 20);
    return () => clearTimeout(timer);
  });
  let shown: Array<{ pod: KubeObject; leaving: boolean }> = pods.map((pod) => ({ pod, leaving: false }));
  if (ghosts.current.size > 0) {
    shown = shown.concat([...ghosts.current.values()].map((g) => ({ pod: g.pod, leaving: true })));
    shown.sort((a, b) => {
      const ta = a.pod.metadata.creationTimestamp ?? '';
      const tb = b.pod.metadata.creationTimestamp ?? '';
      return ta < tb ? -1 : ta > tb ? 1 : a.pod.metadata.name < b.pod.metadata.name ? -1 : 1;
    });
  }
  const view = nodeView(node);
  const stopped = stoppedNodes.has(name);
  const unscheduled = name === '';
  const down = !unscheduled && (view.ready !== 'True' || stopped);
  return (
    <section
      class={`lane${unscheduled ? ' unscheduled' : ''}${down ? ' down' : ''}${view.cordoned ? ' cordoned' : ''}`}
      data-node={name}
    >
      <header class="lane-head">
        {unscheduled ? (
          <span class="lane-name">Not scheduled</span>
        ) : (
          <button type="button" class="lane-name link" onClick={() => select('Node', name)} title="inspect this node">
            {name}
          </button>
        )}
        {!unscheduled && <NodeBadges view={view} stopped={stopped} exists={node !== undefined} />}
        <span class="lane-count">{pods.length}</span>
      </header>
      {!unscheduled && node && (
        <div class="usages">
          {nodeUsage(node, pods).map((u) => (
            <UsageBar key={u.resource} usage={u} />
          ))}
        </div>
      )}
      <div class={`pods${named ? ' named' : ''}`}>
        {shown.map(({ pod, leaving }) => (
          <PodChip key={pod.metadata.uid ?? keyOf(pod)} pod={pod} named={named} leaving={leaving} moves />
        ))}
      </div>
    </section>
  );
});

/** Orders node-2 before node-10. */
const collator = new Intl.Collator(undefined, { numeric: true });

export function NodesView() {
  useTopics('kind:Node', 'lanes');
  const names = new Set<string>();
  for (const node of store.list('Node')) names.add(node.metadata.name);
  for (const lane of store.laneNames()) if (lane !== '') names.add(lane);
  const sorted = [...names].sort(collator.compare);
  const named = store.count('Pod') <= NAMED_CHIPS_UP_TO;
  const unscheduled = store.podsOn('').length > 0;
  return (
    <div class={`lanes${named ? '' : ' dense'}`}>
      {unscheduled && <Lane key="" name="" named={named} />}
      {sorted.map((name) => (
        <Lane key={name} name={name} named={named} />
      ))}
      {sorted.length === 0 && !unscheduled && <p class="empty">No nodes yet.</p>}
    </div>
  );
}
