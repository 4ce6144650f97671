import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { can, whoAmI } from './access.js';
import { currentToken, KINDS, type Kind, onTokenChange, onUnauthorized, setToken } from './api.js';
import { clock } from './clock.js';
import { EventsView } from './components/Events.js';
import { Header } from './components/Header.js';
import { Inspector } from './components/Inspector.js';
import { NodesView } from './components/Nodes.js';
import { WorkloadsView } from './components/Workloads.js';
import { useSubscription, useTokenGeneration, useTopics } from './hooks.js';
import { currentNotices, dismiss, onNotices } from './notices.js';
import { MAX_EVENTS, store } from './store.js';
import { Reflector } from './watch.js';
import './style.css';

/**
 * Past this many pods the page keeps a sample and says so (it stays fluid up to here); `?maxPods=N` sets another
 * bound.
 */
const MAX_PODS = Number(new URLSearchParams(location.search).get('maxPods')) || 5000;

const LIMITS: Partial<Record<Kind, number>> = { Pod: MAX_PODS, Event: MAX_EVENTS };

let reflectors: Reflector[] = [];

function startWatching(): void {
  for (const r of reflectors) r.stop();
  reflectors = KINDS.map((kind) => new Reflector(kind, LIMITS[kind], kind === 'Event' ? 'newest' : 'sample'));
  for (const r of reflectors) r.start();
  void clock.refresh();
}

function TokenDialog({ onClose, reason }: { onClose: () => void; reason: string }) {
  const [value, setValue] = useState(currentToken() ?? '');
  return (
    <div class="dialog-backdrop">
      <form
        class="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          setToken(value.trim());
          onClose();
        }}
      >
        <h2>Bearer token</h2>
        <p>{reason}</p>
        <p class="note">
          <code>sim serve --auth</code> prints an admin token; <code>kubectl create token NAME</code> makes one for a
          ServiceAccount. It is kept for this tab only.
        </p>
        <input
          type="password"
          name="token"
          autoComplete="off"
          value={value}
          onInput={(e) => setValue((e.target as HTMLInputElement).value)}
          placeholder="token"
          aria-label="bearer token"
        />
        <div class="dialog-buttons">
          <button type="submit">Connect</button>
          <button type="button" onClick={onClose}>
            Cancel
          </button>
        </div>
      </form>
    </div>
  );
}

function Notices() {
  useSubscription(onNotices);
  return (
    <div class="notices" aria-live="polite">
      {currentNotices().map((n) => (
        <button
          type="button"
          key={n.id}
          class={`notice ${n.level}`}
          onClick={() => dismiss(n.id)}
          data-notice={n.level}
        >
          {n.text}
        </button>
      ))}
    </div>
  );
}

/** Says so when the user may only read (SelfSubjectAccessReview of the page's actions), and when pods are sampled. */
function Banners() {
  useTopics('feeds');
  const [readOnly, setReadOnly] = useState<string | undefined>(undefined);
  const generation = useTokenGeneration();
  useEffect(() => {
    let live = true;
    void Promise.all([
      can({ verb: 'post', path: '/sim/v1/clock/advance' }),
      can({ verb: 'patch', resource: 'nodes' }),
      can({ verb: 'delete', resource: 'pods' }),
      can({ verb: 'patch', group: 'apps', resource: 'deployments', subresource: 'scale' }),
    ]).then((decisions) => {
      if (!live) return;
      setReadOnly(
        decisions.every((d) => !d.allowed)
          ? decisions.map((d) => d.reason.replace(/^you may not /, '')).join(', ')
          : undefined,
      );
    });
    return () => {
      live = false;
    };
  }, [generation]);
  const sample = store.feed('Pod')?.sample;
  return (
    <div class="banners">
      {readOnly && (
        <div class="banner read-only" data-banner="read-only">
          Read-only: you may not {readOnly} (SelfSubjectAccessReview), so the buttons are disabled.
        </div>
      )}
      {sample && sample.total > sample.shown && (
        <div class="banner sample" data-banner="sample">
          Showing a sample: {sample.shown.toLocaleString()} of {sample.total.toLocaleString()} pods (the page keeps at
          most {MAX_PODS.toLocaleString()}).
        </div>
      )}
    </div>
  );
}

function App() {
  const [user, setUser] = useState<string | undefined>(undefined);
  const [asking, setAsking] = useState<string | undefined>(undefined);
  useEffect(() => {
    const off = onUnauthorized(() =>
      setAsking(
        currentToken()
          ? 'The server did not accept this token (401 Unauthorized).'
          : 'This server requires a bearer token (it runs with --auth).',
      ),
    );
    const refresh = () => {
      startWatching();
      void whoAmI().then(setUser);
    };
    const offToken = onTokenChange(refresh);
    refresh();
    return () => {
      off();
      offToken();
    };
  }, []);
  return (
    <div class="app">
      <Header user={user} onToken={() => setAsking('Use another bearer token.')} />
      <Banners />
      <main>
        <section class="nodes-pane">
          <NodesView />
        </section>
        <section class="side-pane">
          <WorkloadsView />
        </section>
      </main>
      <EventsView />
      <Inspector />
      <Notices />
      {asking && <TokenDialog reason={asking} onClose={() => setAsking(undefined)} />}
    </div>
  );
}

render(<App />, document.getElementById('app')!);
