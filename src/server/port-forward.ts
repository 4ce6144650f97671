import { wallClock } from '../clock/clock.js';
import type { PortForwardTarget } from '../api/kubelet-connector.js';
import type { SpdyConnection, SpdyStream } from './spdy.js';

/**
 * pods/portforward, kubelet's side (its portforward httpStreamHandler): over one SPDY connection the client opens a
 * pair of streams per forwarded connection, an error stream and a data stream with the same `port` and `requestID`
 * headers. Once both are there the data stream is connected to the port in the pod; if that fails, the reason goes
 * down the error stream, and either way both streams are closed when the connection is over. The same handler serves
 * SPDY tunnelled through a WebSocket (subprotocol SPDY/3.1+portforward.k8s.io, kubectl 1.31+).
 */

/** The protocol kubelet's port-forward server speaks over SPDY (portforward.ProtocolV1Name). */
export const PORT_FORWARD_PROTOCOL = 'portforward.k8s.io';
/** The WebSocket subprotocol of SPDY tunnelled in binary messages (KEP-4006). */
export const PORT_FORWARD_TUNNEL_PROTOCOL = 'SPDY/3.1+portforward.k8s.io';

/** How long the second stream of a pair may take (kubelet's DefaultStreamCreationTimeout). */
const STREAM_CREATION_TIMEOUT_MS = 30_000;

interface StreamPair {
  error?: SpdyStream;
  data?: SpdyStream;
  cancelTimeout(): void;
}

/** Serves port-forward streams on a SPDY connection that `accept` creates with the given stream handler. */
export function servePortForward(
  accept: (handler: (stream: SpdyStream) => 'accept' | 'refuse') => SpdyConnection,
  target: PortForwardTarget,
): void {
  const pairs = new Map<string, StreamPair>();
  const connection = accept((stream) => {
    // kubelet's httpStreamReceived: a stream without a valid port or stream type is refused (reset, no reply).
    const port = stream.header('port') ?? '';
    const type = stream.header('streamtype');
    if (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535) return 'refuse';
    if (type !== 'error' && type !== 'data') return 'refuse';
    // Clients before the requestID header: the pair's ids are consecutive odd numbers, error first.
    const requestId = stream.header('requestid') ?? String(type === 'error' ? stream.id : stream.id - 2);
    let pair = pairs.get(requestId);
    if (!pair) {
      const timer = wallClock.setTimer(STREAM_CREATION_TIMEOUT_MS, () => {
        pairs.delete(requestId);
        pair?.error?.end(`(request=${requestId}) timed out waiting for streams`);
      });
      pair = { cancelTimeout: () => timer.cancel() };
      pairs.set(requestId, pair);
    }
    if (pair[type]) {
      pair.error?.write(`error processing stream for request ${requestId}: ${type} stream already assigned`);
      return 'accept';
    }
    pair[type] = stream;
    const { error, data } = pair;
    if (error && data) {
      pair.cancelTimeout();
      pairs.delete(requestId);
      forward(target, Number(data.header('port')), error, data);
    }
    return 'accept';
  });
  connection.onClose(() => {
    for (const pair of pairs.values()) pair.cancelTimeout();
    pairs.clear();
  });
}

function forward(target: PortForwardTarget, port: number, error: SpdyStream, data: SpdyStream): void {
  const done = (): void => {
    data.end();
    error.end();
  };
  target.forward(port, data).then(done, (err: unknown) => {
    error.write(err instanceof Error ? err.message : String(err));
    done();
  });
}
