import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import WebSocket from 'ws';
import { Api } from './helpers/http.js';
import { type SimServer, startServer } from './helpers/server.js';

// pods/portforward over kubelet's WebSocket channels (what the Python client and browsers speak; kubectl tunnels
// SPDY instead): the port on each channel first, the runtime's refusal on the error channel, kubelet's 400s.

const NS = 'default';
const POD = 'forwarded';

interface Frames {
  messages: Array<{ channel: number; data: Buffer }>;
  closeCode: number;
}

describe('port-forward over WebSocket channels', () => {
  let server: SimServer | undefined;
  let api: Api;
  before(async () => {
    server = await startServer(['--nodes', '1']);
    api = new Api(server.url);
    await api.create(`/api/v1/namespaces/${NS}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: POD },
      spec: { containers: [{ name: 'web', image: 'nginx' }] },
    });
    for (let i = 0; i < 200; i++) {
      const p = await api.get(`/api/v1/namespaces/${NS}/pods/${POD}`);
      if ((p.status as { phase?: string } | undefined)?.phase === 'Running') return;
      await new Promise((r) => setTimeout(r, 25));
    }
    assert.fail('the pod never ran');
  });
  after(() => server?.stop());

  const url = (query: string): string =>
    `${server!.url.replace(/^http/, 'ws')}/api/v1/namespaces/${NS}/pods/${POD}/portforward${query}`;

  /** Every message until the server closes, as channel and payload; base64 text messages decoded. */
  const forward = (query: string, protocols: string[]): Promise<Frames> =>
    new Promise((resolve, reject) => {
      const ws = new WebSocket(url(query), protocols);
      const messages: Frames['messages'] = [];
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        if (isBinary) messages.push({ channel: data[0]!, data: data.subarray(1) });
        else messages.push({ channel: data[0]! - 48, data: Buffer.from(data.subarray(1).toString(), 'base64') });
      });
      ws.on('close', (closeCode) => resolve({ messages, closeCode }));
      ws.on('unexpected-response', (_req, res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c));
        res.on('end', () => reject(new Error(`${res.statusCode} ${res.headers['content-type']} ${text}`)));
      });
      ws.on('error', reject);
    });

  const refusal = (port: number): RegExp =>
    new RegExp(
      `^error forwarding port ${port} to pod [0-9a-f]{64}, uid : failed to execute portforward in network namespace .*connect: connection refused $`,
    );

  for (const protocols of [['v4.channel.k8s.io'], ['v4.base64.channel.k8s.io'], []]) {
    test(`${protocols[0] ?? 'no subprotocol'}: each port's channels start with the port, the refusal comes on its error channel, then the close`, async () => {
      const { messages, closeCode } = await forward('?ports=8080,9090', protocols);
      const le = (port: number): string => Buffer.from([port & 0xff, port >> 8]).toString('hex');
      assert.deepEqual(
        messages.slice(0, 4).map((m) => [m.channel, m.data.toString('hex')]),
        [
          [0, le(8080)],
          [1, le(8080)],
          [2, le(9090)],
          [3, le(9090)],
        ],
      );
      const errors = messages.slice(4);
      assert.deepEqual(errors.map((m) => m.channel).sort(), [1, 3]);
      for (const m of errors) assert.match(m.data.toString(), refusal(m.channel === 1 ? 8080 : 9090));
      assert.equal(closeCode, 1000);
    });
  }

  test("kubelet's refusals of the ports, as plain text 400s", async () => {
    const refused = (query: string) => forward(query, ['v4.channel.k8s.io']).then(() => 'accepted', String);
    assert.equal(await refused(''), 'Error: 400 text/plain query parameter "port" is required');
    assert.equal(await refused('?ports=0'), 'Error: 400 text/plain port "0" must be > 0');
    assert.equal(
      await refused('?ports=80,x'),
      'Error: 400 text/plain unable to parse "80,x" as a port: strconv.ParseUint: parsing "x": invalid syntax',
    );
    assert.equal(
      await refused('?ports=70000'),
      'Error: 400 text/plain unable to parse "70000" as a port: strconv.ParseUint: parsing "70000": value out of range',
    );
  });

  test('a subprotocol neither tunnel nor channels is refused with the ones served', async () => {
    const answer = await forward('?ports=80', ['v5.channel.k8s.io']).then(() => 'accepted', String);
    assert.match(answer, /^Error: 400 application\/json /);
    assert.match(
      answer,
      /none of the offered subprotocols \[v5\.channel\.k8s\.io\] is supported for portforward: use SPDY\/3\.1\+portforward\.k8s\.io or v4\.channel\.k8s\.io or v4\.base64\.channel\.k8s\.io/,
    );
  });
});
