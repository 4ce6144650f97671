import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import tls from 'node:tls';
import { constants as zlib, deflateSync } from 'node:zlib';
import { DICTIONARY } from '../src/server/spdy.js';
import { cmPath, configMap, request } from './helpers/http.js';
import { TestRandom } from './helpers/random.js';
import { serverFor, type SimServer } from './helpers/server.js';

/**
 * Chaos on raw sockets: thousands of connections that do what real clients and broken networks do — upgrades the
 * server refuses and ones it accepts, connections reset at a random byte of the request or of the answer, bodies
 * half sent, WebSockets abandoned or fed broken frames, headers trickled in — against every upgradeable and
 * streaming endpoint (exec, attach, portforward, log follow, watch over HTTP and WebSocket) and ordinary requests,
 * over plain TCP and over TLS with --auth (401 and 403 refusals too). Afterwards the server must still answer,
 * still hold every object it held, byte for byte, have logged no internal error, and have closed every connection.
 *
 * The cases come from a seeded generator: KUBE_SIM_TEST_SEED replays a run, KUBE_SIM_CHAOS_CASES changes how many.
 * A new streaming protocol adds its endpoints to UPGRADES (with the handshake it needs) and, if it can be accepted,
 * a way to misbehave after the switch to AFTER_SWITCH; every client behaviour then applies to it.
 */

const SEED = process.env.KUBE_SIM_TEST_SEED ? Number(process.env.KUBE_SIM_TEST_SEED) : Date.now() % 2 ** 31;
const CASES = process.env.KUBE_SIM_CHAOS_CASES ? Number(process.env.KUBE_SIM_CHAOS_CASES) : 3000;
/** Connections open at once. */
const CONCURRENCY = 24;
const NS = 'chaos';
/** Where complete writes go: the objects of NS are only ever written with bodies cut short. */
const SCRATCH = 'chaos-scratch';
const ADMIN = 'chaos-admin';
const NOBODY = 'chaos-nobody';
const POD = 'p';

/** Go's net/http status texts for the codes an answer may carry. */
const GO_STATUS_TEXT: Record<string, string> = {
  101: 'Switching Protocols',
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  410: 'Gone',
  413: 'Request Entity Too Large',
  415: 'Unsupported Media Type',
  422: 'Unprocessable Entity',
  431: 'Request Header Fields Too Large',
  504: 'Gateway Timeout',
};

// ---------------------------------------------------------------------------------------------------------------
// What is sent

interface Target {
  port: number;
  tls: boolean;
  /** Authorization header value for a request that should get through (--auth servers). */
  auth?: string;
}

type Headers = Record<string, string>;

function requestBytes(method: string, path: string, headers: Headers, body?: Buffer | string): Buffer {
  const lines = [`${method} ${path} HTTP/1.1`, 'Host: kube-sim'];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  const payload = body === undefined ? Buffer.alloc(0) : Buffer.from(body);
  if (body !== undefined) lines.push(`Content-Length: ${payload.length}`);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), payload]);
}

function webSocketHeaders(rng: TestRandom, protocol?: string): Headers {
  const headers: Headers = {
    Upgrade: 'websocket',
    Connection: 'Upgrade',
    'Sec-WebSocket-Key': Buffer.from(Array.from({ length: 16 }, () => rng.int(256))).toString('base64'),
    'Sec-WebSocket-Version': '13',
  };
  if (protocol) headers['Sec-WebSocket-Protocol'] = protocol;
  return headers;
}

function spdyHeaders(protocol: string): Headers {
  return { Upgrade: 'SPDY/3.1', Connection: 'Upgrade', 'X-Stream-Protocol-Version': protocol };
}

/**
 * SYN_STREAMs with these headers, ids 1, 3, 5, …, their header blocks one zlib stream with SPDY's dictionary as a
 * client's are: the first compressed and sync-flushed, the later ones stored blocks continuing it.
 */
function spdyStreams(streams: Array<Record<string, string>>): Buffer {
  return Buffer.concat(
    streams.map((headers, i) => {
      const pairs = Object.entries(headers).flat();
      const raw = Buffer.concat([
        u32(pairs.length / 2),
        ...pairs.flatMap((text) => [u32(Buffer.byteLength(text)), Buffer.from(text)]),
      ]);
      const block =
        i === 0
          ? deflateSync(raw, { dictionary: DICTIONARY, finishFlush: zlib.Z_SYNC_FLUSH })
          : Buffer.concat([
              Buffer.from([0, raw.length & 0xff, raw.length >> 8, ~raw.length & 0xff, (~raw.length >> 8) & 0xff]),
              raw,
              Buffer.from([0, 0, 0, 0xff, 0xff]),
            ]);
      return spdyControl(1, 0, Buffer.concat([u32(2 * i + 1), u32(0), Buffer.from([0, 0]), block]));
    }),
  );
}

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

/** A SPDY DATA frame. */
function spdyData(id: number, data: Buffer, fin = false): Buffer {
  return Buffer.concat([u32(id), u32(((fin ? 1 : 0) << 24) | data.length), data]);
}

/** A SPDY/3.1 control frame: version 3, `type`, flags, and the payload as given (not checked by anyone but the server). */
function spdyControl(type: number, flags: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16BE(0x8003, 0);
  head.writeUInt16BE(type, 2);
  head.writeUInt32BE(((flags & 0xff) << 24) | payload.length, 4);
  return Buffer.concat([head, payload]);
}

/** A WebSocket frame as a client sends it (masked unless told otherwise). */
function frame(
  rng: TestRandom,
  opcode: number,
  payload: Buffer,
  options: { mask?: boolean; rsv?: number } = {},
): Buffer {
  const mask = options.mask ?? true;
  const head: number[] = [0x80 | ((options.rsv ?? 0) << 4) | opcode];
  const maskBit = mask ? 0x80 : 0;
  if (payload.length < 126) head.push(maskBit | payload.length);
  else if (payload.length < 65536) head.push(maskBit | 126, payload.length >> 8, payload.length & 0xff);
  else {
    head.push(maskBit | 127, 0, 0, 0, 0);
    head.push((payload.length >>> 24) & 0xff, (payload.length >>> 16) & 0xff, (payload.length >>> 8) & 0xff);
    head.push(payload.length & 0xff);
  }
  if (!mask) return Buffer.concat([Buffer.from(head), payload]);
  const key = Buffer.from([rng.int(256), rng.int(256), rng.int(256), rng.int(256)]);
  const masked = Buffer.from(payload.map((b, i) => b ^ key[i % 4]!));
  return Buffer.concat([Buffer.from(head), key, masked]);
}

/** An upgradeable endpoint: the request line and headers of its handshake. */
interface Upgrade {
  name: string;
  path: string;
  headers(rng: TestRandom): Headers;
  /** Whether the server is expected to switch protocols (a valid handshake of a supported protocol). */
  accepted: boolean;
}

const EXEC = `/api/v1/namespaces/${NS}/pods/${POD}/exec`;
const UPGRADES: Upgrade[] = [
  // Accepted: exec over v5/v4 WebSocket, WebSocket watches on every path form.
  {
    name: 'exec echo',
    path: `${EXEC}?command=echo&command=hi&stdout=true&stderr=true`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: true,
  },
  {
    name: 'exec cat with stdin',
    path: `${EXEC}?command=cat&stdin=true&stdout=true&stderr=true`,
    headers: (r) => webSocketHeaders(r, 'v4.channel.k8s.io'),
    accepted: true,
  },
  {
    name: 'exec sh tty',
    path: `${EXEC}?command=sh&stdin=true&stdout=true&tty=true`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: true,
  },
  {
    name: 'watch ws scratch',
    path: `${cmPath(SCRATCH)}?watch=true`,
    headers: (r) => webSocketHeaders(r),
    accepted: true,
  },
  { name: 'watch ws all', path: '/api/v1/configmaps?watch=1', headers: (r) => webSocketHeaders(r), accepted: true },
  {
    name: 'watch ws path',
    path: `/api/v1/watch/namespaces/${NS}/configmaps`,
    headers: (r) => webSocketHeaders(r),
    accepted: true,
  },
  // Refused: what the Python client, old kubectls and typos send.
  {
    name: 'exec missing pod',
    path: `/api/v1/namespaces/${NS}/pods/nope/exec?command=date&stdout=true`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'exec no command',
    path: `${EXEC}?stdout=true`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'exec no stream',
    path: `${EXEC}?command=date`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'exec bad container',
    path: `${EXEC}?command=date&stdout=true&container=nope`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'exec no subprotocol',
    path: `${EXEC}?command=date&stdout=true`,
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  {
    name: 'exec bad websocket key',
    path: `${EXEC}?command=date&stdout=true`,
    headers: (r) => ({ ...webSocketHeaders(r, 'v5.channel.k8s.io'), 'Sec-WebSocket-Key': 'short' }),
    accepted: false,
  },
  {
    name: 'attach',
    path: `/api/v1/namespaces/${NS}/pods/${POD}/attach?stdout=true&stdin=true`,
    headers: (r) => webSocketHeaders(r, 'v5.channel.k8s.io'),
    accepted: true,
  },
  {
    name: 'portforward tunnel',
    path: `/api/v1/namespaces/${NS}/pods/${POD}/portforward?ports=80`,
    headers: (r) => webSocketHeaders(r, 'SPDY/3.1+portforward.k8s.io'),
    accepted: true,
  },
  // SPDY/3.1: kubectl 1.27–1.29 and client-go tools before 1.30.
  {
    name: 'exec SPDY/3.1',
    path: `${EXEC}?command=cat&stdin=true&stdout=true&stderr=true`,
    headers: () => spdyHeaders('v4.channel.k8s.io'),
    accepted: true,
  },
  {
    name: 'portforward SPDY/3.1',
    path: `/api/v1/namespaces/${NS}/pods/${POD}/portforward`,
    headers: () => spdyHeaders('portforward.k8s.io'),
    accepted: true,
  },
  {
    name: 'exec SPDY/3.1 unknown protocol',
    path: `${EXEC}?command=date&stdout=true`,
    headers: () => spdyHeaders('v9.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'portforward wrong subprotocol',
    path: `/api/v1/namespaces/${NS}/pods/${POD}/portforward?ports=80`,
    headers: (r) => webSocketHeaders(r, 'v4.channel.k8s.io'),
    accepted: false,
  },
  {
    name: 'log follow upgrade',
    path: `/api/v1/namespaces/${NS}/pods/${POD}/log?follow=true`,
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  {
    name: 'watch ws bad selector',
    path: `${cmPath(NS)}?watch=true&labelSelector=a%20b%20c`,
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  {
    name: 'watch ws bad resourceVersion',
    path: `${cmPath(NS)}?watch=true&resourceVersion=abc`,
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  { name: 'ws not a watch', path: cmPath(NS), headers: (r) => webSocketHeaders(r), accepted: false },
  {
    name: 'ws unknown resource',
    path: `/api/v1/namespaces/${NS}/widgets?watch=true`,
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  {
    name: 'ws bad escape',
    path: '/api/v1/namespaces/%zz/configmaps',
    headers: (r) => webSocketHeaders(r),
    accepted: false,
  },
  {
    name: 'h2c upgrade',
    path: cmPath(NS),
    headers: () => ({
      Upgrade: 'h2c',
      Connection: 'Upgrade, HTTP2-Settings',
      'HTTP2-Settings': 'AAMAAABkAAQAoAAAAAIAAAAA',
    }),
    accepted: false,
  },
];

/** Plain requests: [method, path, body?]. Writes to NS are always cut before their body ends. */
const READS: Array<[string, string]> = [
  ['GET', '/version'],
  ['GET', '/api'],
  ['GET', '/apis'],
  ['GET', '/openapi/v2'],
  ['GET', '/openapi/v3/api/v1'],
  ['GET', cmPath(NS)],
  ['GET', `${cmPath(NS)}?limit=7`],
  ['GET', cmPath(NS, 'cm-3')],
  ['GET', `/api/v1/namespaces/${NS}/pods/${POD}`],
  ['GET', `/api/v1/namespaces/${NS}/pods/${POD}/log`],
  ['GET', `/api/v1/namespaces/${NS}/pods/${POD}/log?follow=true`],
  ['GET', `${cmPath(NS)}?watch=true`],
  ['GET', `${cmPath(SCRATCH)}?watch=1&allowWatchBookmarks=true`],
  ['GET', '/api/v1/configmaps?watch=true&resourceVersion=0'],
  ['GET', `${cmPath(NS)}?watch=true&resourceVersion=abc`],
  ['GET', `/api/v1/namespaces/${NS}/pods/${POD}/exec?command=date`],
  ['GET', '/api/v1/namespaces/%zz'],
  ['GET', '/nope'],
];

function cmBody(name: string, size: number): string {
  return JSON.stringify(configMap(name, { blob: 'y'.repeat(size) }));
}

// ---------------------------------------------------------------------------------------------------------------
// A raw connection

class Conn {
  readonly received: Buffer[] = [];
  bytes = 0;
  closed = false;
  private waiters: Array<() => void> = [];

  private constructor(
    /** The TCP socket (under TLS, the raw one beneath it), for resets. */
    private readonly raw: net.Socket,
    private readonly stream: net.Socket,
  ) {
    stream.on('data', (chunk: Buffer) => {
      this.received.push(chunk);
      this.bytes += chunk.length;
      this.wake();
    });
    const done = (): void => {
      this.closed = true;
      this.wake();
    };
    stream.on('close', done);
    stream.on('end', done);
    stream.on('error', done);
    raw.on('error', done);
  }

  static open(target: Target): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const raw = net.connect(target.port, '127.0.0.1');
      raw.once('error', reject);
      raw.once('connect', () => {
        raw.removeListener('error', reject);
        if (!target.tls) return resolve(new Conn(raw, raw));
        const secure = tls.connect({ socket: raw, rejectUnauthorized: false, servername: 'localhost' });
        secure.once('error', reject);
        secure.once('secureConnect', () => {
          secure.removeListener('error', reject);
          resolve(new Conn(raw, secure));
        });
      });
    });
  }

  private wake(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  text(): string {
    return Buffer.concat(this.received).toString('latin1');
  }

  write(data: Buffer): void {
    if (!this.closed && !this.stream.destroyed) this.stream.write(data);
  }

  /** Resolves once `predicate` holds, the connection closes, or `ms` pass. */
  until(predicate: () => boolean, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, ms);
      const check = (): void => {
        if (this.closed || predicate()) {
          clearTimeout(timer);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /**
   * TCP RST: what a client killed mid-transfer, or one closing with unread data, sends. resetAndDestroy only on a
   * plain connection neither side has begun to close: after a shutdown (ours, or Node's reply to the server's FIN)
   * Node 20 leaves a handle that spins at exit, and under TLS the TCP handle belongs to the TLS socket (resetting
   * it crashed the test process). There, a close with unread input makes the kernel send the RST.
   */
  reset(): void {
    const raw = this.raw;
    if (raw === this.stream && !raw.destroyed && !this.closed && !raw.writableEnded && !raw.readableEnded)
      raw.resetAndDestroy();
    else this.close();
  }

  /** Half-close: the client is done sending but still reads. */
  end(): void {
    if (!this.stream.destroyed) this.stream.end();
  }

  /** Close as a client that leaves without reading the answer (the Python client's websocket library). */
  close(): void {
    this.stream.destroy();
    this.raw.destroy();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The status line of an answer, checked: HTTP/1.x, a code and Go's text for it. */
function checkStatusLine(text: string, what: string): number | undefined {
  const end = text.indexOf('\r\n');
  if (end < 0) return undefined;
  const match = /^HTTP\/1\.[01] (\d{3}) (.*)$/.exec(text.slice(0, end));
  assert.ok(match, `${what}: malformed status line ${JSON.stringify(text.slice(0, 80))}`);
  const code = Number(match[1]);
  const expected = GO_STATUS_TEXT[code];
  if (expected !== undefined) assert.equal(match[2], expected, `${what}: status text of ${code}`);
  assert.ok(code < 500 || code === 504, `${what}: a server error ${text.slice(0, 600)}`);
  return code;
}

// ---------------------------------------------------------------------------------------------------------------
// What a client does

interface Counts {
  [behaviour: string]: number;
}

/**
 * The ways to misbehave once the protocol is switched. The same bytes go to WebSocket and SPDY sessions: to each,
 * the other's frames are garbage it must survive, and each gets frames of its own that are wrong.
 */
const AFTER_SWITCH: Array<(conn: Conn, rng: TestRandom) => Promise<string>> = [
  async (conn) => {
    conn.reset();
    return 'reset at once';
  },
  async (conn, rng) => {
    await conn.until(() => false, rng.int(40));
    conn.close();
    return 'abandoned without a close frame';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x8, Buffer.from([0x03, 0xe8])));
    await conn.until(() => false, rng.int(30));
    conn.end();
    return 'close frame, then half-close';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x2, Buffer.from([0, ...Buffer.from('hello\n')])));
    conn.write(frame(rng, 0x2, Buffer.from([255, 0])));
    await conn.until(() => false, rng.int(30));
    conn.reset();
    return 'stdin and its close, then reset';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x1, Buffer.from('unmasked'), { mask: false }));
    await conn.until(() => false, 30);
    conn.reset();
    return 'unmasked frame';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x1, Buffer.from([0xff, 0xfe, 0xfd])));
    await conn.until(() => false, 30);
    conn.close();
    return 'invalid UTF-8 text';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x3 + rng.int(5), Buffer.from('x'), { rsv: rng.int(8) }));
    await conn.until(() => false, 30);
    conn.reset();
    return 'reserved opcode or bits';
  },
  async (conn, rng) => {
    // A length beyond maxPayload (3 MiB), then a little of it.
    const head = Buffer.from([0x82, 0x80 | 127, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 2, 3, 4]);
    conn.write(Buffer.concat([head, randomBytes(rng.int(100))]));
    await conn.until(() => false, 30);
    conn.reset();
    return 'oversized frame';
  },
  async (conn, rng) => {
    const whole = frame(rng, 0x2, Buffer.from([0, ...Buffer.from('echo half\n')]));
    conn.write(whole.subarray(0, 1 + rng.int(whole.length - 1)));
    await conn.until(() => false, rng.int(30));
    conn.reset();
    return 'half a frame';
  },
  async (conn, rng) => {
    conn.write(randomBytes(1 + rng.int(200)));
    await conn.until(() => false, 30);
    conn.reset();
    return 'garbage after the switch';
  },
  async (conn, rng) => {
    // SPDY: a SYN_STREAM whose header block is not zlib, a data frame for a stream never opened, a frame too long.
    const synStream = spdyControl(1, 0, Buffer.concat([Buffer.from([0, 0, 0, 1, 0, 0, 0, 0, 0, 0]), randomBytes(20)]));
    const data = Buffer.concat([Buffer.from([0, 0, 0, 7, 0, 0, 0, 3]), Buffer.from('abc')]);
    const huge = spdyControl(4, 0, Buffer.alloc(0));
    huge.writeUInt32BE(0x00ffffff, 4);
    conn.write(rng.pick([synStream, data, huge, Buffer.concat([synStream, data])]));
    await conn.until(() => false, 30);
    conn.reset();
    return 'broken SPDY frames';
  },
  async (conn, rng) => {
    // SPDY: the streams kubectl opens (exec's or port-forward's pair), some stdin, then the client is gone: at once,
    // half-way through a frame, after resetting a stream, or after a FIN on stdin.
    const exec = rng.int(2) === 0;
    const opened = exec
      ? spdyStreams([
          { streamtype: 'error' },
          { streamtype: 'stdin' },
          { streamtype: 'stdout' },
          { streamtype: 'stderr' },
        ])
      : spdyStreams([
          { streamtype: 'error', port: '80', requestid: '0' },
          { streamtype: 'data', port: '80', requestid: '0' },
        ]);
    const input = spdyData(3, Buffer.from('echo abandoned\n'.repeat(1 + rng.int(50))));
    const how = rng.int(4);
    if (how === 0) conn.write(opened);
    else if (how === 1) conn.write(Buffer.concat([opened, input]).subarray(0, opened.length + rng.int(input.length)));
    else if (how === 2) conn.write(Buffer.concat([opened, input, spdyControl(3, 0, Buffer.concat([u32(3), u32(5)]))]));
    else conn.write(Buffer.concat([opened, input, spdyData(3, Buffer.alloc(0), true)]));
    await conn.until(() => false, rng.int(40));
    if (rng.int(2) === 0) conn.reset();
    else conn.close();
    return [
      'SPDY streams abandoned',
      'SPDY reset mid-frame',
      'SPDY stream reset, abandoned',
      'SPDY stdin closed, abandoned',
    ][how]!;
  },
  async (conn, rng) => {
    // SPDY: PING and GOAWAY, then gone.
    conn.write(Buffer.concat([spdyControl(6, 0, Buffer.from([0, 0, 0, 1])), spdyControl(7, 0, Buffer.alloc(8))]));
    await conn.until(() => false, rng.int(40));
    conn.close();
    return 'SPDY ping and goaway';
  },
  async (conn, rng) => {
    conn.write(frame(rng, 0x9, Buffer.from('ping')));
    await conn.until(() => conn.bytes > 200, 100);
    conn.end();
    await conn.until(() => false, 50);
    conn.close();
    return 'ping, read, half-close';
  },
];

async function upgradeCase(target: Target, rng: TestRandom, counts: Counts, open: () => Promise<Conn>): Promise<void> {
  const upgrade = rng.pick(UPGRADES);
  const headers = upgrade.headers(rng);
  // On the --auth server: no token (401), a token without rights (403), or the admin's.
  if (target.auth !== undefined) {
    const who = rng.int(4);
    if (who === 1) headers.Authorization = `Bearer ${NOBODY}`;
    else if (who >= 2) headers.Authorization = target.auth;
  }
  const bytes = requestBytes('GET', upgrade.path, headers);
  const conn = await open();
  const what = `${target.tls ? 'tls ' : ''}upgrade ${upgrade.name}`;
  const behaviour = rng.int(6);
  let label: string;
  if (behaviour === 0) {
    // Cut the handshake short.
    conn.write(bytes.subarray(0, rng.int(bytes.length)));
    await sleep(rng.int(20));
    if (rng.int(2) === 0) conn.reset();
    else conn.close();
    label = 'handshake cut';
  } else if (behaviour === 1) {
    // The Python client: send, never read, close.
    conn.write(bytes);
    await sleep(rng.int(40));
    conn.close();
    label = 'closed unread';
  } else if (behaviour === 2) {
    // Reset at a random byte of the answer.
    conn.write(bytes);
    const at = rng.int(400);
    await conn.until(() => conn.bytes >= at, 500);
    conn.reset();
    label = 'reset mid-answer';
  } else {
    // Read the answer; if it switched protocols, misbehave on the open connection.
    conn.write(bytes);
    await conn.until(() => conn.text().includes('\r\n\r\n'), 2000);
    const code = checkStatusLine(conn.text(), what);
    if (code === 101) {
      label = `switched, ${await rng.pick(AFTER_SWITCH)(conn, rng)}`;
    } else {
      if (
        code !== undefined &&
        upgrade.accepted &&
        (target.auth === undefined || headers.Authorization === target.auth)
      )
        assert.fail(`${what}: expected to switch protocols, got ${conn.text().slice(0, 400)}`);
      // A refusal: the server closes the connection after its answer.
      await conn.until(() => false, 2000);
      assert.ok(conn.closed || code === undefined, `${what}: the refusal left the connection open`);
      label = `refused ${code}`;
      conn.close();
    }
  }
  counts[`upgrade: ${label}`] = (counts[`upgrade: ${label}`] ?? 0) + 1;
}

async function requestCase(
  target: Target,
  rng: TestRandom,
  counts: Counts,
  serial: number,
  open: () => Promise<Conn>,
): Promise<void> {
  const headers: Headers = {};
  if (target.auth !== undefined) headers.Authorization = target.auth;
  if (rng.int(3) === 0)
    headers.Accept = rng.pick(['application/json', 'application/yaml', 'application/json;as=Table;v=v1;g=meta.k8s.io']);
  let bytes: Buffer;
  // Whether sending all of it may change data of NS (it must then always be cut before the end).
  let mustCut = false;
  const kind = rng.int(10);
  if (kind < 5) {
    const [method, path] = rng.pick(READS);
    bytes = requestBytes(method, path, headers);
  } else {
    headers['Content-Type'] = kind === 9 ? 'application/merge-patch+json' : 'application/json';
    const scratch = rng.int(2) === 0;
    const ns = scratch ? SCRATCH : NS;
    const name = scratch ? `s-${serial % 50}` : `cm-${rng.int(20)}`;
    const size = rng.pick([10, 1000, 100_000]);
    if (kind < 7) bytes = requestBytes('POST', cmPath(ns), headers, cmBody(scratch ? `s-${serial}` : name, size));
    else if (kind === 7) bytes = requestBytes('PUT', cmPath(ns, name), headers, cmBody(name, size));
    else if (kind === 8)
      bytes = requestBytes(
        'DELETE',
        cmPath(ns, name),
        headers,
        '{"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}',
      );
    else bytes = requestBytes('PATCH', cmPath(ns, name), headers, JSON.stringify({ data: { blob: 'z'.repeat(size) } }));
    mustCut = !scratch;
  }
  const conn = await open();
  const behaviour = rng.int(5);
  let label: string;
  if (mustCut || behaviour === 0) {
    // Cut at a random byte of the request (for writes to NS: always before the body's last byte).
    const headEnd = bytes.indexOf('\r\n\r\n') + 4;
    const cut = mustCut ? rng.int(bytes.length) : rng.int(bytes.length);
    const pieces = rng.int(3) === 0 ? [cut] : [Math.min(cut, headEnd), cut];
    let sent = 0;
    for (const p of pieces) {
      conn.write(bytes.subarray(sent, Math.max(sent, p)));
      sent = Math.max(sent, p);
      await sleep(rng.int(10));
    }
    const how = rng.int(3);
    if (how === 0) conn.reset();
    else if (how === 1) {
      // Half-close: the server sees the end of a short request.
      conn.end();
      await conn.until(() => false, 200);
      conn.close();
    } else {
      await sleep(rng.int(30));
      conn.close();
    }
    label = `request cut (${['reset', 'half-close', 'close'][how]})`;
  } else if (behaviour === 1) {
    conn.write(bytes);
    const at = rng.int(rng.int(2) === 0 ? 300 : 60_000);
    await conn.until(() => conn.bytes >= at, 1000);
    conn.reset();
    label = 'reset mid-answer';
  } else if (behaviour === 2) {
    conn.write(bytes);
    await sleep(rng.int(20));
    conn.close();
    label = 'closed unread';
  } else if (behaviour === 3) {
    // Slow headers: the request trickles in, then is finished or dropped.
    const steps = 3 + rng.int(6);
    for (let i = 0; i < steps; i++) {
      conn.write(
        bytes.subarray(Math.floor((i * bytes.length) / steps / 2), Math.floor(((i + 1) * bytes.length) / steps / 2)),
      );
      await sleep(5 + rng.int(20));
    }
    if (rng.int(2) === 0) {
      conn.write(bytes.subarray(Math.floor(bytes.length / 2)));
      await conn.until(() => conn.text().includes('\r\n\r\n'), 2000);
      checkStatusLine(conn.text(), 'slow request');
      label = 'slow headers, answered';
    } else label = 'slow headers, dropped';
    conn.reset();
  } else {
    // Read the whole answer (or a streaming one's beginning), then leave.
    conn.write(bytes);
    await conn.until(() => conn.text().includes('\r\n\r\n'), 3000);
    const code = checkStatusLine(conn.text(), `request ${bytes.subarray(0, 60).toString('latin1')}`);
    label = `answered ${code}`;
    conn.close();
  }
  counts[`request: ${label}`] = (counts[`request: ${label}`] ?? 0) + 1;
}

// ---------------------------------------------------------------------------------------------------------------

interface Held {
  path: string;
  text: string;
}

async function snapshot(base: string, headers: Headers): Promise<Held[]> {
  const paths = [`/api/v1/namespaces/${NS}`, `/api/v1/namespaces/${NS}/pods/${POD}`];
  for (let i = 0; i < 20; i++) paths.push(cmPath(NS, `cm-${i}`));
  const held: Held[] = [];
  for (const path of paths) {
    const reply = await request(base, path, { headers });
    assert.equal(reply.status, 200, `${path}: ${reply.text}`);
    held.push({ path, text: reply.text });
  }
  // The list's own resourceVersion is the cluster's revision, which the complete writes to SCRATCH move on.
  const list = await request(base, cmPath(NS), { headers });
  held.push({ path: cmPath(NS), text: list.text.replace(/^(\{[^[]*"resourceVersion":")\d+"/, '$1"') });
  return held;
}

async function prepare(server: SimServer, headers: Headers): Promise<void> {
  const post = async (path: string, body: unknown): Promise<void> => {
    const reply = await request(server.url, path, { method: 'POST', body, headers });
    assert.ok(reply.status === 201 || reply.status === 409, `${path}: ${reply.text}`);
  };
  for (const ns of [NS, SCRATCH])
    await post('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  for (let i = 0; i < 20; i++) await post(cmPath(NS), configMap(`cm-${i}`, { blob: 'x'.repeat(i * 500) }));
  await post(`/api/v1/namespaces/${NS}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: POD },
    spec: { containers: [{ name: 'c', image: 'nginx' }] },
  });
  for (let i = 0; i < 400; i++) {
    const pod = await request<{ status?: { phase?: string; conditions?: Array<{ type: string; status: string }> } }>(
      server.url,
      `/api/v1/namespaces/${NS}/pods/${POD}`,
      { headers },
    );
    const ready = pod.body.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    if (pod.body.status?.phase === 'Running' && ready) return;
    await sleep(25);
  }
  assert.fail('the chaos pod never became ready');
}

function assertSameObjects(before: Held[], after: Held[]): void {
  const changed: string[] = [];
  for (const [i, was] of before.entries()) {
    const now = after[i]!;
    if (now.text === was.text) continue;
    let at = 0;
    while (at < was.text.length && was.text[at] === now.text[at]) at++;
    changed.push(
      `${was.path} from byte ${at}: ${JSON.stringify(was.text.slice(Math.max(0, at - 40), at + 80))} -> ${JSON.stringify(now.text.slice(Math.max(0, at - 40), at + 80))}`,
    );
  }
  assert.deepEqual(changed, [], 'the objects held before the chaos changed');
}

function openFds(pid: number): number | undefined {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return undefined;
  }
}

async function chaos(server: SimServer, target: Target, cases: number, seed: number): Promise<Counts> {
  const headers: Headers = target.auth ? { authorization: target.auth } : {};
  await prepare(server, headers);
  // Let the kubelet's last writes settle before the objects are taken as held.
  await sleep(300);
  const held = await snapshot(server.url, headers);
  const fdsBefore = openFds(server.pid);
  const rng = new TestRandom(seed);
  const counts: Counts = {};
  let next = 0;
  // Every connection a case opened is destroyed once it is done, whatever the case left it as.
  const conns: Conn[] = [];
  const open = async (): Promise<Conn> => {
    const conn = await Conn.open(target);
    conns.push(conn);
    return conn;
  };
  const worker = async (): Promise<void> => {
    while (next < cases) {
      const serial = next++;
      const caseRng = new TestRandom(rng.int(2 ** 31));
      try {
        if (caseRng.int(2) === 0) await upgradeCase(target, caseRng, counts, open);
        else await requestCase(target, caseRng, counts, serial, open);
      } catch (err) {
        throw new Error(`case ${serial} failed (replay with KUBE_SIM_TEST_SEED=${SEED}): ${(err as Error).message}`, {
          cause: err,
        });
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  } finally {
    for (const conn of conns) conn.close();
  }

  // Still up, still serving every kind of request, holding what it held.
  const version = await request(server.url, '/version', { headers });
  assert.equal(version.status, 200, version.text);
  assertSameObjects(held, await snapshot(server.url, headers));
  assert.doesNotMatch(server.stderr(), /internal error|Unhandled|ECONNRESET|EPIPE/i, server.stderr());
  // Every connection closed (refusals linger up to 10 s for a client that never closes; ours all did).
  if (fdsBefore !== undefined) {
    let fds = openFds(server.pid)!;
    for (let i = 0; i < 100 && fds > fdsBefore + 4; i++) {
      await sleep(100);
      fds = openFds(server.pid)!;
    }
    assert.ok(fds <= fdsBefore + 4, `the server holds ${fds} descriptors, ${fdsBefore} before the chaos`);
  }
  return counts;
}

function summary(counts: Counts): string {
  return Object.entries(counts)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `${k}: ${v}`)
    .join('; ');
}

test('raw-socket chaos over plain HTTP: the server stays up, answers, and keeps every object byte for byte', {
  timeout: 180_000,
}, async (t) => {
  const server = await serverFor(t, ['--nodes', '1', '--seed', String(SEED)]);
  const port = Number(new URL(server.url).port);
  const counts = await chaos(server, { port, tls: false }, CASES, SEED);
  t.diagnostic(`seed ${SEED}: ${CASES} connections; ${summary(counts)}`);
});

test('raw-socket chaos over TLS with --auth: 401 and 403 refusals too; the server stays up and keeps every object', {
  timeout: 180_000,
}, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-chaos-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tokens.csv'), `${ADMIN},admin,uid-admin,system:masters\n${NOBODY},nobody,uid-nobody\n`);
  const server = await serverFor(t, [
    '--nodes',
    '1',
    '--seed',
    String(SEED),
    '--tls',
    '--auth',
    '--token-auth-file',
    join(dir, 'tokens.csv'),
    '--kubeconfig',
    join(dir, 'kubeconfig'),
  ]);
  const port = Number(new URL(server.url).port);
  // The test's own requests over HTTPS trust the generated CA by not checking it (only the chaos cases matter).
  const previous = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  t.after(() => {
    if (previous === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    else process.env.NODE_TLS_REJECT_UNAUTHORIZED = previous;
  });
  const counts = await chaos(server, { port, tls: true, auth: `Bearer ${ADMIN}` }, Math.ceil(CASES / 5), SEED + 1);
  t.diagnostic(`seed ${SEED + 1}: ${Math.ceil(CASES / 5)} TLS connections; ${summary(counts)}`);
});

/** Sends `bytes`, then reads until the server closes (or `ms` pass); resolves with what came back. */
async function exchange(port: number, bytes: Buffer | string, ms = 2000): Promise<string> {
  const conn = await Conn.open({ port, tls: false });
  conn.write(Buffer.from(bytes));
  await conn.until(() => false, ms);
  conn.close();
  return conn.text();
}

test('each way a client broke the server, one at a time', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  const port = Number(new URL(server.url).port);
  const alive = async (what: string): Promise<void> => {
    const reply = await request(server.url, '/version');
    assert.equal(reply.status, 200, `after ${what}: ${reply.text}`);
  };
  const rng = new TestRandom(1);
  const exec = requestBytes(
    'GET',
    '/api/v1/namespaces/default/pods/nope/exec?command=date&stdout=true',
    webSocketHeaders(rng, 'v5.channel.k8s.io'),
  );

  await t.test('a refused upgrade closed unread (the Python client) leaves the server up', async () => {
    for (let i = 0; i < 20; i++) {
      const conn = await Conn.open({ port, tls: false });
      conn.write(exec);
      await sleep(20);
      conn.close();
    }
    await alive('refused upgrades closed unread');
  });

  await t.test(
    'a refused upgrade says 404 Not Found, as Go writes it, with the Status and the connection closed',
    async () => {
      const answer = await exchange(port, exec);
      assert.match(answer, /^HTTP\/1\.1 404 Not Found\r\n/);
      assert.match(answer, /\r\nconnection: close\r\n/i);
      assert.match(answer, /"reason":"NotFound"/);
    },
  );

  await t.test('protocol errors on an open WebSocket close it, not the server', async () => {
    for (const bad of [
      frame(rng, 0x1, Buffer.from('hi'), { mask: false }),
      frame(rng, 0x1, Buffer.from([0xff])),
      frame(rng, 0x3, Buffer.from('x')),
      Buffer.from([0x82, 0xff, 0, 0, 0, 0, 0x10, 0, 0, 0, 1, 2, 3, 4]),
    ]) {
      const conn = await Conn.open({ port, tls: false });
      conn.write(requestBytes('GET', '/api/v1/configmaps?watch=true', webSocketHeaders(rng)));
      await conn.until(() => conn.text().includes('\r\n\r\n'), 2000);
      assert.match(conn.text(), /^HTTP\/1\.1 101 Switching Protocols\r\n/);
      conn.write(bad);
      await conn.until(() => false, 2000);
      assert.ok(conn.closed, 'the server closes the WebSocket');
      conn.close();
      await alive(`a bad frame ${bad.subarray(0, 2).toString('hex')}`);
    }
  });

  await t.test('a request that cannot be parsed gets Go’s text answer', async () => {
    assert.equal(
      await exchange(port, 'NOT HTTP\r\n\r\n'),
      'HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n400 Bad Request',
    );
    await alive('garbage');
  });
});
