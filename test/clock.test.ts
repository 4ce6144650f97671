import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Api, assertStatus, cmPath, configMap } from './helpers/http.js';
import { kubectl, kubectlMissing } from './helpers/kubectl.js';
import { serverFor } from './helpers/server.js';

interface ClockState {
  now: string;
  mode: 'real' | 'virtual';
}

const TABLE = 'application/json;as=Table;v=v1;g=meta.k8s.io,application/json';

test('--clock virtual: /sim/v1/clock reports virtual time, and only /sim/v1/clock/advance moves it', async (t) => {
  const server = await serverFor(t, ['--clock', 'virtual', '--seed', '7']);
  const api = new Api(server.url);
  const clock = (): Promise<ClockState> => api.expect<ClockState>(200, '/sim/v1/clock');
  const advance = (by: unknown): Promise<ClockState> =>
    api.expect<ClockState>(200, '/sim/v1/clock/advance', { method: 'POST', body: { by } });

  assert.deepEqual(await clock(), { now: '2025-01-01T00:00:00Z', mode: 'virtual' });
  const early = await api.create(cmPath('default'), configMap('early'));
  assert.equal(early.metadata.creationTimestamp, '2025-01-01T00:00:00Z', 'timestamps come from the virtual clock');
  assert.deepEqual(await clock(), { now: '2025-01-01T00:00:00Z', mode: 'virtual' }, 'time does not move by itself');

  assert.deepEqual(await advance('90s'), { now: '2025-01-01T00:01:30Z', mode: 'virtual' });
  assert.deepEqual(await clock(), { now: '2025-01-01T00:01:30Z', mode: 'virtual' });
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
