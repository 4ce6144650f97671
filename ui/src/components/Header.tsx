import { useEffect, useState } from 'preact/hooks';
import { advance, pauseClock, runClock } from '../actions.js';
import { KINDS } from '../api.js';
import { useClock, useTopics } from '../hooks.js';
import { store } from '../store.js';
import { ActionButton } from './ActionButton.js';

const STEPS = ['10s', '1m', '5m', '1h'] as const;
const RATES = [1, 10, 60, 600];

function formatTime(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('T', ' ').replace('.000Z', 'Z');
}

/** The cluster clock, moving on between reads at the clock's own pace. */
function ClockFace() {
  const clock = useClock();
  const [, setTick] = useState(0);
  const moving = clock.state?.mode === 'real' || clock.state?.running === true;
  useEffect(() => {
    if (!moving) return;
    const timer = setInterval(() => setTick((n) => n + 1), 250);
    return () => clearInterval(timer);
  }, [moving]);
  const state = clock.state;
  return (
    <span class="clock-face" data-now={state?.now ?? ''} title="cluster time (GET /sim/v1/clock)">
      <span class="clock-time">{formatTime(clock.now())}</span>
      <span class={`badge ${state?.mode === 'virtual' ? 'quiet' : 'warn'}`}>
        {state
          ? state.mode === 'virtual'
            ? state.running
              ? `virtual, running ×${state.rate ?? 1}`
              : 'virtual, paused'
            : 'real clock'
          : '…'}
      </span>
    </span>
  );
}

function ClockControls() {
  const clock = useClock();
  const [rate, setRate] = useState(1);
  const state = clock.state;
  if (!state) return clock.error ? <span class="error">clock: {clock.error}</span> : null;
  if (state.mode !== 'virtual')
    return <span class="note">time follows the wall; start sim serve with --clock virtual to step it</span>;
  const advanceAttrs = { verb: 'post', path: '/sim/v1/clock/advance' };
  const next = state.nextTimerAt ? Date.parse(state.nextTimerAt) : undefined;
  const now = Date.parse(state.now);
  return (
    <span class="clock-controls">
      {STEPS.map((step) => (
        <ActionButton key={step} label={`+${step}`} attrs={advanceAttrs} run={() => advance(step)} />
      ))}
      <span title={next === undefined ? 'nothing is scheduled' : `the next timer is due at ${state.nextTimerAt}`}>
        <ActionButton
          label={next === undefined ? 'next timer' : `next timer (+${Math.max(0, (next - now) / 1000).toFixed(1)}s)`}
          attrs={advanceAttrs}
          run={() => advance('next-timer')}
        />
      </span>
      {state.running ? (
        <ActionButton label="pause" attrs={{ verb: 'post', path: '/sim/v1/clock/pause' }} run={pauseClock} />
      ) : (
        <>
          <ActionButton label="run" attrs={{ verb: 'post', path: '/sim/v1/clock/run' }} run={() => runClock(rate)} />
          <select
            value={String(rate)}
            onChange={(e) => setRate(Number((e.target as HTMLSelectElement).value))}
            aria-label="cluster seconds per second"
            title="cluster seconds per second while running"
          >
            {RATES.map((r) => (
              <option key={r} value={String(r)}>
                ×{r}
              </option>
            ))}
          </select>
        </>
      )}
    </span>
  );
}

/** Whether every watch is live, and the first that is not. */
function FeedsSummary() {
  useTopics('feeds');
  const troubled = KINDS.map((kind) => ({ kind, feed: store.feed(kind) })).filter((f) => f.feed?.state !== 'live');
  if (troubled.length === 0)
    return (
      <span class="badge good" data-watches="live" title="every list and watch is live">
        live
      </span>
    );
  const first = troubled[0]!;
  return (
    <span class="badge warn" data-watches={first.feed?.state ?? 'starting'} title={first.feed?.message ?? ''}>
      {first.kind}s: {first.feed?.state ?? 'starting'}
      {first.feed?.message ? ` — ${first.feed.message}` : ''}
    </span>
  );
}

function Counts() {
  useTopics('kind:Node', 'kind:Pod', 'feeds');
  const sample = store.feed('Pod')?.sample;
  return (
    <span class="totals">
      {store.count('Node')} nodes · {sample ? sample.total.toLocaleString() : store.count('Pod').toLocaleString()} pods
    </span>
  );
}

export function Header({ user, onToken }: { user: string | undefined; onToken: () => void }) {
  return (
    <header class="top">
      <h1>kube-sim</h1>
      <Counts />
      <FeedsSummary />
      <span class="spacer" />
      <ClockFace />
      <ClockControls />
      <span class="spacer" />
      <button type="button" class="link user" onClick={onToken} title="use another bearer token">
        {user ? `as ${user}` : 'token…'}
      </button>
    </header>
  );
}
