import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { LogLine } from '../src/api/kubelet-connector.js';
import { LogStore } from '../src/kubelet/logs.js';

const texts = (lines: LogLine[]): string[] => lines.map((l) => l.text);

test('log store: instances per container, the current and previous kept, followers see lines and the end', () => {
  const logs = new LogStore();
  logs.start('u1', 'app', 0);
  logs.write('u1', 'app', 1, 'one');
  logs.write('u1', 'side', 2, 'side one'); // no start: instance 0
  logs.write('u1', 'app', 3, 'two');
  assert.deepEqual(logs.source('u1', 'app', 0).lines(), [
    { at: 1, text: 'one' },
    { at: 3, text: 'two' },
  ]);
  assert.deepEqual(texts(logs.source('u1', 'side', 0).lines()), ['side one']);

  const seen: string[] = [];
  let ended = false;
  const follow = logs.source('u1', 'app', 0).follow;
  assert.ok(follow);
  follow(
    (l) => seen.push(l.text),
    () => (ended = true),
  );
  logs.write('u1', 'app', 4, 'three');
  logs.start('u1', 'app', 1); // a restart ends the open instance
  assert.deepEqual(seen, ['three']);
  assert.equal(ended, true);
  assert.equal(logs.source('u1', 'app', 0).follow, undefined);

  logs.write('u1', 'app', 5, 'again');
  logs.end('u1', 'app');
  logs.start('u1', 'app', 2);
  assert.deepEqual(texts(logs.source('u1', 'app', 2).lines()), []);
  assert.deepEqual(texts(logs.source('u1', 'app', 1).lines()), ['again'], 'the previous instance is kept');
  assert.deepEqual(logs.source('u1', 'app', 0).lines(), [], 'older instances are not');
  assert.deepEqual(texts(logs.source('u1', 'side', 0).lines()), ['side one'], "another container's instance stays");

  logs.remove('u1');
  assert.deepEqual(logs.source('u1', 'side', 0).lines(), []);
  assert.deepEqual(logs.source('u2', 'app', 0).lines(), []);
});
