import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, assertStatus, cmPath, configMap } from './helpers/http.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

interface ClockState {
  now: string;
  mode: 'real' | 'virtual';
  running?: boolean;
  rate?: number;
  nextTimerAt?: string;
}

/** The clock's time and mode (the next timer depends on what the cluster runs). */
function timeAndMode({ now, mode, running }: ClockState): ClockState {
  return { now, mode, running };
}

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';

test('--clock virtual: /sim/v1/clock reports virtual time, and only /sim/v1/clock/advance moves it', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '7']);
  const api = new Api(server.url);
  const clock = async (): Promise<ClockState> => timeAndMode(await api.expect<ClockState>(200, '/sim/v1/clock'));
  const advance = async (by: unknown): Promise<ClockState> =>
    timeAndMode(await api.expect<ClockState>(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } }));

  assert.deepEqual(await clock(), { now: '2025-01-01T00:00:00Z', mode: 'virtual', running: false });
  const early = await api.create(cmPath('default'), configMap('early'));
  assert.equal(early.metadata.creationTimestamp, '2025-01-01T00:00:00Z', 'timestamps come from the virtual clock');
  assert.deepEqual(
    await clock(),
    { now: '2025-01-01T00:00:00Z', mode: 'virtual', running: false },
    'time does not move by itself',
  );

  assert.deepEqual(await advance('90s'), { now: '2025-01-01T00:01:30Z', mode: 'virtual', running: false });
  assert.deepEqual(await clock(), { now: '2025-01-01T00:01:30Z', mode: 'virtual', running: false });
  assert.equal(
    (await api.create(cmPath('default'), configMap('later'))).metadata.creationTimestamp,
    '2025-01-01T00:01:30Z',
  );
  assert.equal((await advance('1h30m')).now, '2025-01-01T01:31:30Z');
  assert.equal((await advance(30)).now, '2025-01-01T01:32:00Z', 'a number is seconds');
  assert.equal((await advance('0s')).now, '2025-01-01T01:32:00Z');

  // Server-side printing ages objects by cluster time: 92 minutes since `early` was created.
  const table = await api.expect<{ kind: string; rows: Array<{ cells: unknown[] }> }>(200, cmPath('default', 'early'), {
    headers: { accept: TABLE },
  });
  assert.equal(table.kind, 'Table');
  assert.deepEqual(table.rows[0]!.cells, ['early', 0, '92m']);
  const missing = kubectlMissing();
  if (missing) t.diagnostic(`${missing}; checked the Table API only`);
  else {
    const got = await kubectl(server.url, ['get', 'cm', 'early', 'later', '--no-headers']);
    assert.deepEqual(
      got.stdout
        .trim()
        .split('\n')
        .map((l) => l.split(/\s+/)),
      [
        ['early', '0', '92m'],
        ['later', '0', '90m'],
      ],
    );
  }

  for (const bad of ['soon', '-5s', '', null]) {
    const reply = await api.request('/sim/v1/clock/advance', { method: 'POST', body: { by: bad } });
    assertStatus(reply, 400, 'BadRequest');
  }
  assertStatus(
    await api.request('/sim/v1/clock/advance', {
      method: 'POST',
      body: '{"by":',
      headers: { 'content-type': 'application/json' },
    }),
    400,
    'BadRequest',
  );
  assert.equal((await clock()).now, '2025-01-01T01:32:00Z', 'failed advances move nothing');
});

test('--clock real (the default): the clock follows the wall and cannot be advanced', async (t) => {
  const server = await serverFor(t);
  const api = new Api(server.url);
  const state = await api.expect<ClockState>(200, '/sim/v1/clock');
  assert.equal(state.mode, 'real');
  assert.ok(Math.abs(Date.parse(state.now) - Date.now()) < 5_000, `${state.now} is now`);
  const reply = await api.request('/sim/v1/clock/advance', { method: 'POST', body: { by: '90s' } });
  assert.match(assertStatus(reply, 400, 'BadRequest').message!, /--clock virtual/);
});

test('--clock virtual: advance to a time or to the next timer, run at a rate and pause', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '7']);
  const api = new Api(server.url);
  const post = (path: string, body: unknown): Promise<ClockState> =>
    api.expect<ClockState>(200, `/sim/v1/clock/${path}`, { method: 'POST', body });

  const start = await api.expect<ClockState>(200, '/sim/v1/clock');
  assert.equal(start.running, false);
  // Three nodes' kubelets renew their Leases on timers: there is always a next one.
  assert.ok(start.nextTimerAt, 'the next timer is reported');
  const next = Date.parse(start.nextTimerAt!);
  assert.ok(next > Date.parse(start.now), `${start.nextTimerAt} is after ${start.now}`);
  const stepped = await post('advance', { to: 'next-timer' });
  assert.equal(stepped.now, new Date(Math.floor(next / 1000) * 1000).toISOString().replace('.000Z', 'Z'));

  assert.equal((await post('advance', { to: '2025-01-01T00:10:00Z' })).now, '2025-01-01T00:10:00Z');
  for (const body of [
    { to: '2025-01-01T00:05:00Z' },
    { to: 'tomorrow' },
    { by: '1s', to: 'next-timer' },
    { rate: 5 },
  ]) {
    const reply = await api.request('/sim/v1/clock/advance', { method: 'POST', body });
    assert.ok(assertStatus(reply, 400, 'BadRequest').message, JSON.stringify(body));
  }
  assert.equal((await api.expect<ClockState>(200, '/sim/v1/clock')).now, '2025-01-01T00:10:00Z');

  for (const rate of [0, -1, 'fast', 1e9]) {
    const reply = await api.request('/sim/v1/clock/run', { method: 'POST', body: { rate } });
    assert.match(assertStatus(reply, 400, 'BadRequest').message!, /rate must be/);
  }
  // An hour of cluster time per wall second: a few hundred milliseconds move it by minutes.
  const running = await post('run', { rate: 3600 });
  assert.equal(running.running, true);
  assert.equal(running.rate, 3600);
  await new Promise((resolve) => setTimeout(resolve, 600));
  const paused = await post('pause', {});
  assert.equal(paused.running, false);
  const moved = Date.parse(paused.now) - Date.parse('2025-01-01T00:10:00Z');
  assert.ok(moved >= 60_000, `the running clock moved ${moved} ms`);
  await new Promise((resolve) => setTimeout(resolve, 300));
  assert.equal((await api.expect<ClockState>(200, '/sim/v1/clock')).now, paused.now, 'a paused clock stands still');
  assert.equal((await post('pause', {})).running, false, 'pausing twice is fine');
});

test('--clock real: running and pausing are refused', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const api = new Api(server.url);
  for (const action of ['run', 'pause']) {
    const reply = await api.request(`/sim/v1/clock/${action}`, { method: 'POST', body: {} });
    assert.match(assertStatus(reply, 400, 'BadRequest').message!, /--clock virtual/);
  }
  assert.equal((await api.expect<ClockState>(200, '/sim/v1/clock')).running, undefined);
});
