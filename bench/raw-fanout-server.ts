/**
 * The ceiling for watch fan-out on this machine: a plain node http server that holds every GET open as a
 * chunked 200 and, when told over IPC, writes one line (a watch event's text) to all of them in a loop for a
 * while, as fast as the sockets take it. What a watch server can do at best is this loop, with no store, no
 * filtering and no encoding. Run as a child process by bench/fanout.ts (`spawnRawFanout`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { trackChild, urlPrinted } from './server-process.js';

type Request = { op: 'run'; line: string; durationMs: number };

const isChild = process.argv[1] === fileURLToPath(import.meta.url) && typeof process.send === 'function';

if (isChild) {
  const open = new Set<http.ServerResponse>();
  const server = http.createServer((req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    req.socket.setNoDelay(true);
    open.add(res);
    res.on('close', () => open.delete(res));
  });
  server.listen(0, '127.0.0.1', () =>
    process.stdout.write(`listening on http://127.0.0.1:${(server.address() as AddressInfo).port}\n`),
  );
  process.on('message', (m: Request) => {
    if (m.op !== 'run') return;
    const end = performance.now() + m.durationMs;
    let events = 0;
    // One event to every response per turn; a turn yields to the event loop so that sockets flush, and waits for
    // a response that has more than 1 MiB queued (as a watch server must, or memory grows without bound).
    const turn = (): void => {
      if (performance.now() >= end) {
        process.send!({ events });
        return;
      }
      let slow: http.ServerResponse | undefined;
      for (const res of open) {
        res.write(m.line);
        if (res.writableLength > 1024 * 1024) slow = res;
      }
      events++;
      if (slow) slow.once('drain', () => setImmediate(turn));
      else setImmediate(turn);
    };
    turn();
  });
  process.on('SIGTERM', () => process.exit(0));
}

export interface RawFanout {
  url: string;
  /** Writes `line` to every open response for `durationMs`; resolves with the number of events written. */
  run(line: string, durationMs: number): Promise<number>;
  stop(): void;
}

export async function spawnRawFanout(): Promise<RawFanout> {
  const child: ChildProcess = spawn(process.execPath, [fileURLToPath(import.meta.url)], {
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  });
  process.once('exit', () => child.kill('SIGKILL'));
  trackChild(child);
  const url = await urlPrinted(child, /listening on (\S+)/);
  return {
    url,
    run: (line, durationMs) =>
      new Promise((resolve) => {
        child.once('message', (m: { events: number }) => resolve(m.events));
        child.send({ op: 'run', line, durationMs } satisfies Request);
      }),
    stop: () => void child.kill('SIGTERM'),
  };
}
