import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rendezvousOwner, stableHash } from '../src/kubelet/node-ownership.js';

describe('rendezvous hashing of nodes over kubelets processes', () => {
  const nodes = Array.from({ length: 3000 }, (_, i) => `node-${i + 1}`);
  const members = ['host_11111111-aaaa', 'host_22222222-bbbb', 'host_33333333-cccc'];

  it('gives each process about its share, the same answer in any order of the members', () => {
    const counts = new Map<string, number>();
    for (const node of nodes) {
      const owner = rendezvousOwner(node, members)!;
      assert.equal(rendezvousOwner(node, [...members].reverse()), owner);
      counts.set(owner, (counts.get(owner) ?? 0) + 1);
    }
    for (const member of members) {
      const share = (counts.get(member) ?? 0) / nodes.length;
      assert.ok(share > 0.28 && share < 0.39, `${member}: ${share}`);
    }
  });

  it('moves only the nodes of a process that goes, and only nodes to a process that comes', () => {
    const before = new Map(nodes.map((n) => [n, rendezvousOwner(n, members)]));
    const without = members.slice(0, 2);
    for (const node of nodes) {
      const owner = rendezvousOwner(node, without);
      if (before.get(node) !== members[2]) assert.equal(owner, before.get(node), node);
    }
    const joined = [...members, 'host_44444444-dddd'];
    for (const node of nodes) {
      const owner = rendezvousOwner(node, joined);
      assert.ok(owner === before.get(node) || owner === joined[3], node);
    }
    assert.equal(rendezvousOwner('node-1', []), undefined);
  });

  it('hashes stably (the same value in every process and every run)', () => {
    assert.equal(stableHash(''), stableHash(''));
    assert.equal(stableHash('a\nnode-1'), 3_971_823_009);
    assert.notEqual(stableHash('a\nnode-1'), stableHash('a\nnode-2'));
  });
});
