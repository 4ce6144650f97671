import { Duplex } from 'node:stream';
import type { RawData, WebSocket } from 'ws';
import type { PortForwardTarget } from '../api/kubelet-connector.js';
import { guardWebSocket } from './connections.js';

/**
 * pods/portforward over a WebSocket of channels, as kubelet serves it (portforward/websocket.go) to clients that
 * do not tunnel SPDY — the official Python client, browsers: the ports come in the query (`ports=8080,9090`), each
 * gets a data channel (2i, read and write) and an error channel (2i+1), and both start with the port as an
 * unsigned 16-bit little-endian integer. A port that cannot be reached gets kubelet's message on its error channel;
 * the connection ends once every port's connection has.
 *
 * Worked example, ports=8080 over v4.channel.k8s.io: the server sends [0, 0x90, 0x1f] and [1, 0x90, 0x1f]; the
 * client's [0, …bytes] go to port 8080 and the port's answer comes back as [0, …bytes]; nothing listening, the
 * server sends [1, …"error forwarding port 8080 to pod …"] and closes.
 */

/** Channels in binary messages (a first byte), or in text ones (a first digit, then base64); no subprotocol is binary. */
export const PORT_FORWARD_CHANNEL_PROTOCOLS = ['v4.channel.k8s.io', 'v4.base64.channel.k8s.io'];

/** The ports of a port-forward over channels, or kubelet's refusal (NewV4Options) as the message of a 400. */
export function forwardedPorts(params: URLSearchParams): number[] | { refusal: string } {
  const values = params.getAll('ports');
  if (values.length === 0) return { refusal: 'query parameter "port" is required' };
  const ports: number[] = [];
  for (const value of values) {
    if (value === '') return { refusal: 'query parameter "port" cannot be empty' };
    for (const piece of value.split(',')) {
      const port = /^\d+$/.test(piece) ? Number(piece) : Number.NaN;
      if (!(port <= 65535))
        return {
          refusal: `unable to parse "${value}" as a port: strconv.ParseUint: parsing "${piece}": ${Number.isNaN(port) ? 'invalid syntax' : 'value out of range'}`,
        };
      if (port < 1) return { refusal: `port "${value}" must be > 0` };
      ports.push(port);
    }
  }
  return ports;
}

/** Serves the forwarded ports over an accepted WebSocket until each port's connection is over. */
export function servePortForwardOverChannels(ws: WebSocket, ports: readonly number[], target: PortForwardTarget): void {
  const base64 = ws.protocol === 'v4.base64.channel.k8s.io';
  const send = (channel: number, data: Buffer): void => {
    if (ws.readyState !== ws.OPEN) return;
    if (base64) ws.send(`${String.fromCharCode(48 + channel)}${data.toString('base64')}`);
    else ws.send(Buffer.concat([Buffer.from([channel]), data]));
  };
  const streams = ports.map((port, i) => {
    const prefix = Buffer.alloc(2);
    prefix.writeUInt16LE(port);
    send(2 * i, prefix);
    send(2 * i + 1, prefix);
    return new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, callback) {
        send(2 * i, chunk);
        callback();
      },
    });
  });
  let open = ports.length;
  const finished = (): void => {
    if (--open === 0 && ws.readyState === ws.OPEN) ws.close(1000);
  };
  ports.forEach((port, i) => {
    const stream = streams[i]!;
    target.forward(port, stream).then(
      () => finished(),
      (err: unknown) => {
        send(2 * i + 1, Buffer.from(err instanceof Error ? err.message : String(err)));
        finished();
      },
    );
  });
  ws.on('message', (data: RawData, isBinary: boolean) => {
    const message = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
    if (message.length === 0) return;
    const channel = base64 && !isBinary ? message[0]! - 48 : message[0]!;
    const payload = base64 && !isBinary ? Buffer.from(message.subarray(1).toString(), 'base64') : message.subarray(1);
    // Data channels only: what a client writes to an error channel is not read, as kubelet's WriteChannel.
    if (channel % 2 === 0) streams[channel / 2]?.push(payload);
  });
  guardWebSocket(ws).on('close', () => {
    for (const stream of streams) stream.destroy();
  });
}
