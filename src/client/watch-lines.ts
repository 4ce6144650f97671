import type { Readable } from 'node:stream';

/**
 * Calls `onLine` with each non-empty line of a newline-delimited stream — a watch response's JSON events — as
 * the lines complete, however the chunks split them.
 */
export function onLines(stream: Readable, onLine: (line: string) => void): void {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffer += chunk;
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, newline).trim();
      buffer = buffer.slice(newline + 1);
      if (line) onLine(line);
    }
  });
}
