import { useMemo, useRef, useState } from 'preact/hooks';
import { ActionButton } from './ActionButton.js';
import { stringify } from 'yaml';
import { cordon, deletePod, drain, nodeFault } from '../actions.js';
import { type Kind, type KubeObject, RESOURCES } from '../api.js';
import { useStoppedNodes, useSubscription, useTopics } from '../hooks.js';
import { nodeView, POD_STATE_TEXT, podState } from '../model.js';
import { clearSelection, onSelection, select, selection } from '../selection.js';
import { controllerOf, keyOf, store } from '../store.js';
import { EventRow } from './Events.js';

function NodeActions({ node }: { node: KubeObject }) {
  const name = node.metadata.name;
  const stopped = useStoppedNodes().has(name);
  const view = nodeView(node);
  const path = (action: string) => `/sim/v1/nodes/${name}/${action}`;
  return (
    <div class="actions">
      {stopped ? (
        <ActionButton
          label="recover node"
          attrs={{ verb: 'post', path: path('recover') }}
          run={() => nodeFault(name, 'recover')}
        />
      ) : (
        <ActionButton
          label="fail node"
          danger
          attrs={{ verb: 'post', path: path('fail') }}
          run={() => nodeFault(name, 'fail')}
        />
      )}
      <ActionButton
        label={view.cordoned ? 'uncordon' : 'cordon'}
        attrs={{ verb: 'patch', resource: 'nodes' }}
        run={() => cordon(name, !view.cordoned)}
      />
      <ActionButton
        label="drain"
        danger
        attrs={{ verb: 'create', resource: 'pods', subresource: 'eviction' }}
        run={() => drain(name)}
      />
    </div>
  );
}

function Actions({ kind, obj }: { kind: Kind; obj: KubeObject }) {
  if (kind === 'Node') return <NodeActions node={obj} />;
  if (kind === 'Pod')
    return (
      <div class="actions">
        <ActionButton
          label="delete pod"
          danger
          attrs={{ verb: 'delete', resource: 'pods', namespace: obj.metadata.namespace }}
          run={() => deletePod(obj.metadata.namespace ?? '', obj.metadata.name)}
        />
      </div>
    );
  return null;
}

interface Ref {
  kind: string;
  name: string;
  uid: string;
}

/** From the object up its controller references (a Pod → its ReplicaSet → its Deployment). */
function ownerChain(obj: KubeObject): Array<{ ref: Ref; found?: { kind: Kind; object: KubeObject } }> {
  const chain: Array<{ ref: Ref; found?: { kind: Kind; object: KubeObject } }> = [];
  const seen = new Set<string>();
  let current: KubeObject | undefined = obj;
  while (current) {
    const ref = controllerOf(current);
    if (!ref || seen.has(ref.uid)) break;
    seen.add(ref.uid);
    const found = store.byId(ref.uid);
    chain.push(found ? { ref, found } : { ref });
    current = found?.object;
  }
  return chain.reverse();
}

function Link({ kind, object }: { kind: Kind; object: KubeObject }) {
  return (
    <button type="button" class="link" onClick={() => select(kind, keyOf(object))}>
      {kind}/{object.metadata.name}
    </button>
  );
}

function Relations({ obj, kind }: { obj: KubeObject; kind: Kind }) {
  const uid = obj.metadata.uid ?? '';
  useTopics(`owner:${uid}`);
  const chain = ownerChain(obj);
  const dependents = store.dependents(uid).sort((a, b) => (a.object.metadata.name < b.object.metadata.name ? -1 : 1));
  const others = (obj.metadata.ownerReferences ?? []).filter((r) => !r.controller && r !== controllerOf(obj));
  return (
    <section class="relations">
      <h3>Owner chain</h3>
      <ol class="chain">
        {chain.map(({ ref, found }) => (
          <li key={ref.uid}>
            {found ? (
              <Link kind={found.kind} object={found.object} />
            ) : (
              <span title="not watched by this page, or gone">
                {ref.kind}/{ref.name}
              </span>
            )}
          </li>
        ))}
        <li class="self">
          {kind}/{obj.metadata.name}
        </li>
      </ol>
      {others.length > 0 && <p class="note">also owned by {others.map((r) => `${r.kind}/${r.name}`).join(', ')}</p>}
      {dependents.length > 0 && (
        <>
          <h3>Dependents ({dependents.length})</h3>
          <ul class="dependents">
            {dependents.slice(0, 100).map(({ kind: k, object }) => (
              <li key={object.metadata.uid}>
                <Link kind={k} object={object} />
                {k === 'Pod' && <span class={`state s-${podState(object)}`}>{POD_STATE_TEXT[podState(object)]}</span>}
              </li>
            ))}
            {dependents.length > 100 && <li>… and {dependents.length - 100} more</li>}
          </ul>
        </>
      )}
    </section>
  );
}

function ObjectEvents({ uid }: { uid: string }) {
  useTopics(`events:${uid}`);
  const events = store.eventsOf(uid);
  return (
    <section>
      <h3>Events ({events.length})</h3>
      {events.length === 0 ? (
        <p class="empty">No events.</p>
      ) : (
        <table class="object-events">
          <tbody>
            {events.slice(0, 50).map((event) => (
              <EventRow key={event.metadata.uid} event={event} showObject={false} />
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

function Yaml({ obj }: { obj: KubeObject }) {
  const [managed, setManaged] = useState(false);
  const text = useMemo(() => {
    const shown = managed ? obj : { ...obj, metadata: { ...obj.metadata, managedFields: undefined } };
    return stringify(shown, { lineWidth: 0 });
  }, [obj, managed]);
  return (
    <section>
      <h3>
        YAML{' '}
        <label class="toggle">
          <input type="checkbox" checked={managed} onChange={() => setManaged(!managed)} /> managedFields
        </label>
      </h3>
      <pre class="yaml">{text}</pre>
    </section>
  );
}

/** The selected object, live: its actions, owner chain and dependents, events and YAML. */
export function Inspector() {
  useSubscription(onSelection);
  const selected = selection();
  const live = selected ? store.get(selected.kind, selected.key) : undefined;
  // The last state seen stays on show once the object is deleted.
  const last = useRef<{ key: string; obj: KubeObject } | undefined>(undefined);
  if (selected && live) last.current = { key: `${selected.kind}:${selected.key}`, obj: live };
  const shown =
    live ?? (selected && last.current?.key === `${selected.kind}:${selected.key}` ? last.current.obj : undefined);
  useTopics(selected ? `key:${selected.kind}/${selected.key}` : '');
  if (!selected) return null;
  return (
    <aside class="inspector" data-inspecting={`${selected.kind}/${selected.key}`}>
      <header>
        <span class="kind">{selected.kind}</span>
        <span class="name">{selected.key}</span>
        {!live && <span class="badge bad">{shown ? 'deleted' : 'not found'}</span>}
        <button type="button" class="close" onClick={clearSelection} aria-label="close the inspector">
          ×
        </button>
      </header>
      {shown && (
        <div class="inspector-body">
          {live && <Actions kind={selected.kind} obj={live} />}
          {selected.kind === 'Pod' && (
            <p class="state-line">
              <span class={`state s-${podState(shown)}`}>{POD_STATE_TEXT[podState(shown)]}</span>
              {(shown.spec as { nodeName?: string } | undefined)?.nodeName && (
                <>
                  {' on '}
                  <button
                    type="button"
                    class="link"
                    onClick={() => select('Node', (shown.spec as { nodeName: string }).nodeName)}
                  >
                    {(shown.spec as { nodeName: string }).nodeName}
                  </button>
                </>
              )}
            </p>
          )}
          <Relations obj={shown} kind={selected.kind} />
          {shown.metadata.uid && <ObjectEvents uid={shown.metadata.uid} />}
          <Yaml obj={shown} />
        </div>
      )}
      {!shown && (
        <p class="empty">
          This page has no {RESOURCES[selected.kind].plural} named {selected.key}.
        </p>
      )}
    </aside>
  );
}
