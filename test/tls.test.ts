import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import WebSocket from 'ws';
import { kubectl, skipWithoutKubectl } from './helpers/kubectl.js';
import { serverFor, startServer } from './helpers/server.js';

const KUBECTL_129 = '/usr/lib/google-cloud-sdk/bin/kubectl.1.29';

interface Kubeconfig {
  clusters: Array<{
    cluster: { server: string; 'certificate-authority-data'?: string; 'insecure-skip-tls-verify'?: boolean };
  }>;
}

/** GET over HTTPS trusting only `ca` (or the system's CAs); resolves with status and body. */
function httpsGet(url: string, ca?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, ca === undefined ? {} : { ca }, (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode!, text }));
      })
      .on('error', reject);
  });
}

/** Sends `data` (pieces a few ms apart) on a raw TCP connection and resolves with everything read until it closes. */
function rawExchange(port: number, data: string | string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('latin1').on('data', (c: string) => (text += c));
    socket.once('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? resolve(text) : reject(err)));
    socket.once('close', () => resolve(text));
    const pieces = Array.isArray(data) ? [...data] : [data];
    const next = (): void => {
      const piece = pieces.shift();
      if (piece === undefined) return;
      socket.write(piece);
      setTimeout(next, 5);
    };
    socket.once('connect', next);
  });
}

test('--tls: HTTPS with a generated CA in the kubeconfig; kubectl get/create/watch/exec work; the CA survives a restart', {
  timeout: 120_000,
}, async (t) => {
  if (skipWithoutKubectl(t)) return;
  const data = mkdtempSync(join(tmpdir(), 'kube-sim-tls-'));
  t.after(() => rmSync(data, { recursive: true, force: true }));
  const server = await startServer(['--tls', '--data', data, '--nodes', '1']);
  let stopped = false;
  t.after(async () => {
    if (!stopped) await server.stop();
  });
  assert.match(server.url, /^https:\/\/127\.0\.0\.1:\d+$/);

  // The kubeconfig sim serve wrote names the https URL and carries the CA, which is kept under --data.
  const kubeconfigFile = join(data, 'tls', 'kubeconfig');
  const config = parseYaml(readFileSync(kubeconfigFile, 'utf8')) as Kubeconfig;
  const cluster = config.clusters[0]!.cluster;
  assert.equal(cluster.server, server.url);
  assert.equal(cluster['insecure-skip-tls-verify'], undefined, 'the CA is verified, not skipped');
  const ca = Buffer.from(cluster['certificate-authority-data']!, 'base64').toString('utf8');
  assert.equal(ca, readFileSync(join(data, 'tls', 'ca.crt'), 'utf8'));
  assert.equal(statSync(join(data, 'tls', 'ca.key')).mode & 0o077, 0, 'the CA key is readable by its owner only');
  const env = { KUBECONFIG: kubeconfigFile };
  const run = async (args: string[]): Promise<string> => {
    const result = await kubectl(undefined, args, { env, timeoutMs: 30_000 });
    assert.equal(result.code, 0, `kubectl ${args.join(' ')}: ${result.stderr}`);
    assert.equal(result.stderr, '', `kubectl ${args.join(' ')} wrote to stderr`);
    return result.stdout;
  };

  // The serving certificate verifies against the CA for 127.0.0.1 and localhost alike.
  assert.equal((await httpsGet(`${server.url}/healthz`, ca)).text, 'ok');
  assert.equal((await httpsGet(`${server.url.replace('127.0.0.1', 'localhost')}/healthz`, ca)).text, 'ok');
  await assert.rejects(
    httpsGet(`${server.url}/healthz`),
    /self[- ]signed|unable to verify|certificate/i,
    'a client trusting only the system CAs refuses the server',
  );

  assert.match(await run(['get', 'ns']), /^NAME\s+STATUS\s+AGE\ndefault\s+Active/);
  assert.equal(await run(['create', 'configmap', 'over-tls', '--from-literal=k=v']), 'configmap/over-tls created\n');
  // A watch over TLS sees a change made after it started.
  const watch = kubectl(server.url, ['get', 'configmap', '--watch-only', '-o', 'name', '--request-timeout=4s'], {
    env,
    timeoutMs: 30_000,
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  await run(['create', 'configmap', 'watched', '--from-literal=k=v']);
  const watched = await watch;
  assert.match(watched.stdout, /configmap\/watched/);

  // exec (a WebSocket upgrade) over TLS.
  await run(['run', 'tls-pod', '--image=nginx', '--restart=Never']);
  await run(['wait', '--for=condition=Ready', 'pod/tls-pod', '--timeout=30s']);
  assert.equal(await run(['exec', 'tls-pod', '--', 'echo', 'over', 'tls']), 'over tls\n');
  // exec over SPDY/3.1 (kubectl before 1.30) over TLS, the CA verified the same way.
  if (existsSync(KUBECTL_129)) {
    const spdy = await kubectl(undefined, ['exec', '-i', 'tls-pod', '--', 'cat'], {
      env,
      binary: KUBECTL_129,
      input: 'spdy over tls\n',
      timeoutMs: 30_000,
    });
    assert.equal(spdy.code, 0, spdy.stderr);
    assert.equal(spdy.stdout, 'spdy over tls\n');
  }

  // A WebSocket watch over wss:// verified against the CA.
  const ws = new WebSocket(
    `${server.url.replace('https:', 'wss:')}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0`,
    ['v4.channel.k8s.io'],
    { ca },
  );
  const firstEvent = await new Promise<string>((resolve, reject) => {
    ws.once('message', (data) => resolve(String(data)));
    ws.once('error', reject);
  });
  ws.close();
  assert.match(firstEvent, /"type":"ADDED"/);

  // Plain HTTP to the TLS port gets Go's answer (kube-apiserver's), byte for byte, and the server goes on serving
  // HTTPS. Only the five starts Go recognises get it; anything else just fails TLS.
  const goAnswer = 'HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n';
  assert.equal(await rawExchange(server.port, 'GET /api HTTP/1.1\r\nHost: x\r\n\r\n'), goAnswer);
  assert.equal(
    await rawExchange(server.port, 'POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}'),
    goAnswer,
  );
  assert.equal(await rawExchange(server.port, 'OPTIONS / HTTP/1.1\r\n\r\n'), goAnswer);
  assert.equal(
    await rawExchange(server.port, 'DELETE /api HTTP/1.1\r\n\r\n'),
    '',
    'DELETE is not one of the starts Go answers',
  );
  const plain = await fetch(`${server.url.replace('https:', 'http:')}/api`);
  assert.equal(plain.status, 400);
  assert.equal(await plain.text(), 'Client sent an HTTP request to an HTTPS server.\n');
  // The first bytes arriving one at a time are still recognised.
  assert.equal(await rawExchange(server.port, ['G', 'E', 'T', ' ', '/x HTTP/1.1\r\n\r\n']), goAnswer);
  assert.match(await run(['get', 'configmap', 'over-tls', '-o', 'name']), /configmap\/over-tls/);

  // A connection that has sent nothing yet does not hold up a clean shutdown.
  const idle = net.connect(server.port, '127.0.0.1');
  idle.on('error', () => undefined);
  await new Promise((resolve) => idle.once('connect', resolve));
  // A restart on the same --data keeps the CA: the kubeconfig written before still works.
  const shutdown = await server.stop();
  assert.equal(
    shutdown.forced,
    false,
    `SIGTERM did not end the server with a silent connection open:\n${shutdown.hang}`,
  );
  idle.destroy();
  stopped = true;
  await serverFor(t, ['--tls', '--data', data, '--nodes', '0', '--port', String(server.port)]);
  assert.equal(readFileSync(join(data, 'tls', 'ca.crt'), 'utf8'), ca, 'the same CA');
  const after = await kubectl(undefined, ['get', 'configmap', 'over-tls', '-o', 'name'], {
    env: { KUBECONFIG: kubeconfigFile },
    timeoutMs: 30_000,
  });
  assert.equal(after.stdout, 'configmap/over-tls\n', after.stderr);
});

test('by default the server binds 127.0.0.1 only', async (t) => {
  const server = await serverFor(t, ['--nodes', '0']);
  assert.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const external = Object.values(networkInterfaces())
    .flat()
    .find((address) => address && address.family === 'IPv4' && !address.internal);
  if (!external) {
    t.diagnostic('no non-loopback IPv4 address on this machine: only the printed address is checked');
    return;
  }
  // The same port on the machine's other address refuses the connection.
  const outcome = await new Promise<string>((resolve) => {
    const socket = net.connect(server.port, external.address);
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
  assert.equal(outcome, 'ECONNREFUSED', `connecting to ${external.address}:${server.port}`);
});

test('--tls without --data: the kubeconfig goes to a temporary directory that a clean shutdown removes', async () => {
  const server = await startServer(['--tls', '--nodes', '0']);
  let stopped = false;
  try {
    const file = /kubeconfig written to (\S+)/.exec(server.stdout())?.[1];
    assert.ok(file, `no kubeconfig line in: ${server.stdout()}`);
    assert.ok(statSync(file).isFile());
    await server.stop();
    stopped = true;
    assert.throws(() => statSync(join(file, '..')), /ENOENT/, 'the temporary directory is gone');
  } finally {
    if (!stopped) await server.stop();
  }
});
