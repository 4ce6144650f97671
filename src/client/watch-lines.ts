import type { Readable } from 'node:stream';

/**
 * Splits newline-delimited text — a watch response's JSON events — into its non-empty lines as chunks arrive,
 * however the chunks split them.
 */
export class LineSplitter {
  private rest = '';

  /** The lines this chunk completes (trimmed, empty ones left out); an unfinished last line waits for the next. */
  push(chunk: string): string[] {
    const text = this.rest + chunk;
    const lines: string[] = [];
    let start = 0;
    // The unfinished line held no newline: a long event arriving in many chunks is not searched again each time.
    let newline = text.indexOf('\n', this.rest.length);
    for (; newline >= 0; newline = text.indexOf('\n', start)) {
      const line = text.slice(start, newline).trim();
      if (line) lines.push(line);
      start = newline + 1;
    }
    this.rest = text.slice(start);
    return lines;
  }
}

/** Calls `onLine` with each non-empty line of a newline-delimited stream as the lines complete. */
export function onLines(stream: Readable, onLine: (line: string) => void): void {
  const lines = new LineSplitter();
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    for (const line of lines.push(chunk)) onLine(line);
  });
}
