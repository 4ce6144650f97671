import type { ExecInput } from '../../api/kubelet-connector.js';
import { Reader, type Writer } from './io.js';

/**
 * The pseudo-terminal of `kubectl exec -it`: kubectl puts the local terminal in raw mode and sends keystrokes as
 * they are typed, so the terminal's work happens here, as a pty's line discipline and the shell's line editor do
 * it. At the prompt: editing (←/→, Home/End, Ctrl-A/E/U/K/W, Backspace, Delete), history (↑/↓), Ctrl-L, Ctrl-C
 * (a fresh line), Ctrl-D (leave, on an empty line). While a command runs: canonical mode — typed lines are
 * echoed and handed to the command when Enter is pressed, Ctrl-D ends its input, Ctrl-C interrupts it. Output
 * newlines become CR LF.
 */
const ESC = '\x1b';
/** A key's escape sequence (arrows, Home, Delete: CSI or SS3), or ESC with one character. */
const ESCAPE_SEQUENCE = new RegExp(`^${ESC}(\\[[0-9;]*[A-Za-z~]|O[A-Za-z]|[^[O])`);
/** The start of one still arriving. */
const PARTIAL_SEQUENCE = new RegExp(`^${ESC}(\\[[0-9;]*|O)?$`);

export class Terminal {
  private raw = '';
  private ended = false;
  private wake?: () => void;
  private history: string[] = [];
  /** The command running now, interrupted by Ctrl-C; undefined at the prompt. */
  private foreground?: AbortController;
  readonly out: Writer;
  /** The stdin of the commands the shell runs: canonical-mode lines. */
  readonly input: Reader;

  constructor(
    source: ExecInput | undefined,
    private readonly write: (text: string) => void | Promise<void>,
  ) {
    this.out = { write: (data) => this.write(Buffer.from(data).toString('utf8').replace(/\r?\n/g, '\r\n')) };
    this.input = new Reader({ read: () => this.cookedLine() });
    if (!source) this.ended = true;
    else void this.pump(source);
  }

  private async pump(source: ExecInput): Promise<void> {
    for (let chunk = await source.read(); chunk !== undefined; chunk = await source.read()) {
      this.raw += Buffer.from(chunk).toString('utf8');
      this.interruptIfAsked();
      this.notify();
    }
    this.ended = true;
    this.notify();
  }

  private reading = false;

  private notify(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }

  /** The next key (a character or an escape sequence), waiting for input; undefined at end of input. */
  private async key(): Promise<string | undefined> {
    for (;;) {
      if (this.raw.startsWith('\x1b')) {
        const seq = ESCAPE_SEQUENCE.exec(this.raw);
        if (seq) {
          this.raw = this.raw.slice(seq[0].length);
          return seq[0];
        }
        // a sequence still on its way waits for the rest; anything else is a lone ESC
        if (this.ended || !PARTIAL_SEQUENCE.test(this.raw)) {
          this.raw = this.raw.slice(1);
          return '\x1b';
        }
      } else if (this.raw.length > 0) {
        const c = String.fromCodePoint(this.raw.codePointAt(0)!);
        this.raw = this.raw.slice(c.length);
        return c;
      }
      if (this.ended) return undefined;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  /** While a command runs and nobody reads, a Ctrl-C still interrupts it (type-ahead before it is dropped, as a pty flushes). */
  private interruptIfAsked(): void {
    if (!this.foreground || this.reading) return;
    const at = this.raw.lastIndexOf('\x03');
    if (at < 0) return;
    this.raw = this.raw.slice(at + 1);
    void this.write('^C\r\n');
    this.foreground.abort();
  }

  /** Starts a command in the foreground; its signal aborts on Ctrl-C (one typed while it was starting too). */
  startCommand(): AbortSignal {
    this.foreground = new AbortController();
    const signal = this.foreground.signal;
    this.interruptIfAsked();
    return signal;
  }

  endCommand(): void {
    this.foreground = undefined;
  }

  /** One canonical-mode line for a command, echoed as typed; undefined for Ctrl-D on an empty line or the end. */
  private async cookedLine(): Promise<Uint8Array | undefined> {
    let line = '';
    this.reading = true;
    try {
      for (;;) {
        const k = await this.key();
        if (k === undefined) return line === '' ? undefined : Buffer.from(line);
        if (k === '\r' || k === '\n') {
          await this.write('\r\n');
          return Buffer.from(`${line}\n`);
        }
        if (k === '\x04') {
          if (line === '') return undefined;
          return Buffer.from(line);
        }
        if (k === '\x03' || k === '\x1c') {
          await this.write('^C\r\n');
          this.foreground?.abort();
          return undefined;
        }
        if (k === '\x7f' || k === '\b') {
          if (line.length > 0) {
            line = [...line].slice(0, -1).join('');
            await this.write('\b \b');
          }
        } else if (k === '\x15') {
          await this.write('\b \b'.repeat([...line].length));
          line = '';
        } else if (k >= ' ' && !k.startsWith('\x1b')) {
          line += k;
          await this.write(k);
        }
      }
    } finally {
      this.reading = false;
    }
  }

  /** The shell's prompt and line editor; undefined when the user leaves (Ctrl-D) or the input ends. */
  async readLine(prompt: string): Promise<string | undefined> {
    let chars: string[] = [];
    let cursor = 0;
    let recalled = this.history.length;
    let draft: string[] = [];
    const redraw = async (): Promise<void> => {
      const back = chars.length - cursor;
      await this.write(`\r${prompt}${chars.join('')}\x1b[K${back > 0 ? `\x1b[${back}D` : ''}`);
    };
    await this.write(prompt);
    this.reading = true;
    try {
      for (;;) {
        const k = await this.key();
        if (k === undefined) return undefined;
        switch (k) {
          case '\r':
          case '\n': {
            await this.write('\r\n');
            const line = chars.join('');
            if (line.trim() !== '' && this.history.at(-1) !== line) this.history.push(line);
            if (this.history.length > 500) this.history.shift();
            return line;
          }
          case '\x03':
            await this.write('^C\r\n');
            chars = [];
            cursor = 0;
            await this.write(prompt);
            continue;
          case '\x04':
            if (chars.length === 0) {
              await this.write('\r\n');
              return undefined;
            }
            if (cursor < chars.length) chars.splice(cursor, 1);
            break;
          case '\x7f':
          case '\b':
            if (cursor === 0) continue;
            chars.splice(--cursor, 1);
            break;
          case '\x1b[3~':
            if (cursor < chars.length) chars.splice(cursor, 1);
            break;
          case '\x01':
          case '\x1b[H':
          case '\x1bOH':
          case '\x1b[1~':
            cursor = 0;
            break;
          case '\x05':
          case '\x1b[F':
          case '\x1bOF':
          case '\x1b[4~':
            cursor = chars.length;
            break;
          case '\x1b[D':
          case '\x02':
            if (cursor > 0) cursor--;
            break;
          case '\x1b[C':
          case '\x06':
            if (cursor < chars.length) cursor++;
            break;
          case '\x15':
            chars.splice(0, cursor);
            cursor = 0;
            break;
          case '\x0b':
            chars.splice(cursor);
            break;
          case '\x17': {
            let start = cursor;
            while (start > 0 && chars[start - 1] === ' ') start--;
            while (start > 0 && chars[start - 1] !== ' ') start--;
            chars.splice(start, cursor - start);
            cursor = start;
            break;
          }
          case '\x0c':
            await this.write('\x1b[H\x1b[2J');
            break;
          case '\x1b[A':
          case '\x10':
            if (recalled === 0) continue;
            if (recalled === this.history.length) draft = chars;
            chars = [...this.history[--recalled]!];
            cursor = chars.length;
            break;
          case '\x1b[B':
          case '\x0e':
            if (recalled >= this.history.length) continue;
            recalled++;
            chars = recalled === this.history.length ? draft : [...this.history[recalled]!];
            cursor = chars.length;
            break;
          default:
            if (k < ' ' || k.startsWith('\x1b')) continue; // Tab and other controls: nothing to complete with
            chars.splice(cursor++, 0, k);
            if (cursor === chars.length) {
              await this.write(k);
              continue;
            }
        }
        await redraw();
      }
    } finally {
      this.reading = false;
    }
  }
}
