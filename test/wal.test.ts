import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Cluster } from '../src/cluster/cluster.js';
import { StoreEvent } from '../src/storage/watch.js';
import { encodeRecord, scanWal, WalCorruptError, WriteAheadLog } from '../src/storage/wal.js';

// The write-ahead log in process: compaction while running, replay on top of a snapshot, and the scan rules.

test('in memory, durable() has nothing to wait for', async () => {
  const cluster = await Cluster.start({ clock: 'virtual', seed: 1 });
  assert.equal(cluster.durable(), undefined);
  await cluster.close();
});

test('in-process writes are logged, compacted into the snapshot while running, and replayed on top of it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-unit-'));
  const clusters: Cluster[] = [];
  t.after(async () => {
    for (const c of clusters.reverse()) await c.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const data = join(dir, 'data');
  const first = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data, walCompactBytes: 20_000 });
  clusters.push(first);
  const cms = first.kind('', 'v1', 'configmaps');
  const written = new Map<string, string>();
  for (let i = 0; i < 200; i++) {
    const obj = await first.api.create(cms, 'default', {
      metadata: { name: `cm-${i}` },
      data: { i: String(i), pad: 'p'.repeat(200) },
    });
    written.set(obj.metadata.name!, obj.metadata.resourceVersion!);
    if (i % 10 === 9) await first.durable(); // batches of ten, some of them past the compaction threshold
  }
  const updated = await first.api.patch(cms, 'default', 'cm-3', 'merge', { data: { i: 'three' } }, {});
  written.set('cm-3', updated.metadata.resourceVersion!);
  first.api.delete(cms, 'default', 'cm-4', {});
  written.delete('cm-4');
  await first.durable();
  const revision = first.store.currentRevision;
  const snapshot = JSON.parse(readFileSync(join(data, 'snapshot.json'), 'utf8')) as { revision: number };
  assert.ok(
    snapshot.revision > 0 && snapshot.revision < revision,
    `compacted while running (snapshot at ${snapshot.revision} of ${revision})`,
  );
  // Compaction empties the log each time it grows as large as the last snapshot (a byte rewritten per byte logged),
  // so whatever the start-up state's size, the log never holds much more than the snapshot plus one batch.
  const snapshotBytes = statSync(join(data, 'snapshot.json')).size;
  assert.ok(statSync(join(data, 'wal.log')).size < snapshotBytes + 10_000, 'the log was emptied by compaction');

  // A second start on the same directory without closing the first: as after a crash.
  const second = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data });
  clusters.push(second);
  assert.equal(second.store.currentRevision, revision, 'the revision counter is restored exactly');
  const found = new Map(
    second.store
      .all('/configmaps')
      .filter((o) => o.metadata.name!.startsWith('cm-'))
      .map((o) => [o.metadata.name!, o.metadata.resourceVersion!]),
  );
  assert.deepEqual(found, written);
  assert.deepEqual((second.store.get('/configmaps', 'default', 'cm-3')!.data as Record<string, string>).i, 'three');
});

test('a virtual clock resumes where the data left it: the last commit after a crash, the snapshot after a clean close', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-clock-'));
  const clusters: Cluster[] = [];
  t.after(async () => {
    for (const c of clusters.reverse()) await c.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const data = join(dir, 'data');
  const day = 24 * 3600 * 1000;
  const first = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data });
  clusters.push(first);
  const start = first.clock.now();
  await first.virtualClock!.advance(3 * day);
  first.api.create(first.kind('', 'v1', 'configmaps'), 'default', { metadata: { name: 'written-on-day-3' } });
  await first.durable();

  // As after kill -9: the log's last commit carries the time.
  const second = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data });
  clusters.push(second);
  assert.equal(second.clock.now(), start + 3 * day);
  const created = Date.parse(
    second.store.get('/configmaps', 'default', 'written-on-day-3')!.metadata.creationTimestamp!,
  );
  assert.ok(created <= second.clock.now(), 'nothing restored lies in the future');

  // A clean close compacts into the snapshot, which keeps time moved on without writes too.
  await second.virtualClock!.advance(day);
  clusters.pop();
  await second.close();
  const third = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data });
  clusters.push(third);
  assert.equal(third.clock.now(), start + 4 * day);

  // An explicit start time still wins.
  clusters.pop();
  await third.close();
  const fourth = await Cluster.start({ clock: 'virtual', seed: 1, dataPath: data, startTime: start });
  clusters.push(fourth);
  assert.equal(fourth.clock.now(), start);
});

test('compaction waits until the log is as large as the last snapshot, so rewriting a large state costs a byte per byte logged', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-growth-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const snapshotBytes = 40_000;
  const sizesAtCompaction: number[] = [];
  const file = join(dir, 'wal.log');
  const wal = await WriteAheadLog.open(file, {
    compactBytes: 5_000,
    snapshot: async () => {
      sizesAtCompaction.push(statSync(file).size);
      return snapshotBytes;
    },
    onDurable: () => undefined,
  });
  t.after(() => wal.close());
  for (let revision = 1; revision <= 400; revision++) {
    wal.append(
      '/configmaps',
      new StoreEvent(
        'ADDED',
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `cm-${revision}`, namespace: 'default' },
          data: { pad: 'p'.repeat(200) },
        },
        undefined,
        revision,
      ),
    );
    await wal.whenDurable(revision);
  }
  // The first compaction comes at compactBytes (nothing was snapshotted yet), every later one only past 40,000 bytes.
  assert.ok(sizesAtCompaction.length >= 2, `compacted ${sizesAtCompaction.length} times`);
  assert.ok(sizesAtCompaction[0]! > 5_000 && sizesAtCompaction[0]! < 40_000, `first at ${sizesAtCompaction[0]} bytes`);
  for (const size of sizesAtCompaction.slice(1)) assert.ok(size > snapshotBytes, `a later compaction at ${size} bytes`);

  // After a restart the log continues the snapshot on disk: its size counts from the first compaction on.
  await wal.close();
  sizesAtCompaction.length = 0;
  const reopened = await WriteAheadLog.open(file, {
    compactBytes: 5_000,
    snapshotBytes,
    snapshot: async () => {
      sizesAtCompaction.push(statSync(file).size);
      return snapshotBytes;
    },
    onDurable: () => undefined,
  });
  t.after(() => reopened.close());
  reopened.startAt(400);
  for (let revision = 401; revision <= 600; revision++) {
    reopened.append(
      '/configmaps',
      new StoreEvent(
        'ADDED',
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: `cm-${revision}`, namespace: 'default' },
          data: { pad: 'p'.repeat(200) },
        },
        undefined,
        revision,
      ),
    );
    await reopened.whenDurable(revision);
  }
  assert.ok(sizesAtCompaction.length >= 1, `compacted ${sizesAtCompaction.length} times after the restart`);
  for (const size of sizesAtCompaction)
    assert.ok(size > snapshotBytes, `a compaction after the restart at ${size} bytes`);
});

test('scanWal: clean, torn tail, hole in the last commit, corruption before a later commit, repair', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-scan-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'wal.log');
  const cm = (name: string, rv: number) => ({
    r: rv,
    k: '/configmaps',
    t: 'A' as const,
    o: { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name, namespace: 'default', resourceVersion: String(rv) } },
  });
  const commit1 = encodeRecord({ t: 'B', r: 0 }) + encodeRecord(cm('a', 1)) + encodeRecord(cm('b', 2));
  const commit2 = encodeRecord({ t: 'B', r: 2 }) + encodeRecord(cm('c', 3)) + encodeRecord(cm('d', 4));

  writeFileSync(file, commit1 + commit2);
  assert.deepEqual(
    scanWal(file, false).records.map((r) => r.r),
    [1, 2, 3, 4],
  );

  writeFileSync(file, commit1 + commit2.slice(0, -20));
  const torn = scanWal(file, false);
  assert.deepEqual(
    torn.records.map((r) => r.r),
    [1, 2, 3],
  );
  assert.equal(torn.goodLength, Buffer.byteLength(commit1 + commit2) - Buffer.byteLength(encodeRecord(cm('d', 4))));

  const holed = commit2.replace('"c"', '"x"'); // checksum mismatch inside the last commit, a valid record after it
  writeFileSync(file, commit1 + holed);
  assert.deepEqual(
    scanWal(file, false).records.map((r) => r.r),
    [1, 2],
  );

  const corrupt = commit1.replace('"b"', '"x"');
  writeFileSync(file, corrupt + commit2);
  const offset = Buffer.byteLength(encodeRecord({ t: 'B', r: 0 }) + encodeRecord(cm('a', 1)));
  assert.throws(
    () => scanWal(file, false),
    (err: Error) =>
      err instanceof WalCorruptError &&
      err.offset === offset &&
      err.message.includes(`${file} is corrupt at byte offset ${offset}`),
  );
  const repaired = scanWal(file, true);
  assert.deepEqual(
    repaired.records.map((r) => r.r),
    [1],
  );
  assert.deepEqual(repaired.discarded, { offset, why: 'checksum mismatch', repaired: true });
});

test('the log writes each record as encodeRecord spells it, multi-byte text, deletions and batches past the buffer included', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-wal-bytes-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'wal.log');
  const wal = await WriteAheadLog.open(file, {
    compactBytes: Number.MAX_SAFE_INTEGER,
    snapshot: () => Promise.resolve(0),
    onDurable: () => undefined,
    now: () => 1_700_000_000_000,
  });
  const object = (name: string, rv: number, text: string) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: 'default', resourceVersion: String(rv) },
    data: { text },
  });
  const events: Array<{ resource: string; event: StoreEvent }> = [
    { resource: '/configmaps', event: { type: 'ADDED', revision: 1, object: object('a', 1, 'grüße, 日本, 🚀') } },
    { resource: '/configmaps', event: { type: 'MODIFIED', revision: 2, object: object('a', 2, 'x'.repeat(100_000)) } },
    { resource: '/configmaps', event: { type: 'DELETED', revision: 3, object: object('a', 3, '') } },
  ] as unknown as Array<{ resource: string; event: StoreEvent }>;
  for (const { resource, event } of events) wal.append(resource, event);
  await wal.whenDurable(3);
  const written = readFileSync(file, 'utf8');
  await wal.close();
  const expected =
    encodeRecord({ t: 'B', r: 0, c: 1_700_000_000_000 }) +
    encodeRecord({ r: 1, k: '/configmaps', t: 'A', o: object('a', 1, 'grüße, 日本, 🚀') }) +
    encodeRecord({ r: 2, k: '/configmaps', t: 'M', o: object('a', 2, 'x'.repeat(100_000)) }) +
    encodeRecord({ r: 3, k: '/configmaps', t: 'D', n: 'default', m: 'a' });
  let differs = 0;
  while (differs < expected.length && written[differs] === expected[differs]) differs++;
  assert.ok(written === expected, `the log differs from encodeRecord's text from character ${differs} on`);
  writeFileSync(file, written);
  assert.deepEqual(
    scanWal(file, false).records.map((r) => r.r),
    [1, 2, 3],
  );
});
