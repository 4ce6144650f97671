/**
 * How Go's encoding/json words what it cannot decode, for the error texts kube-apiserver sends back: the scanner's
 * syntax errors (`invalid character 'x' looking for beginning of value`, `unexpected end of JSON input`) and
 * runtime's SimpleMetaFactory.Interpret, the first step of every JSON body's decoding, which reads apiVersion and kind.
 * These run only once JSON.parse has failed, or on a value already parsed: the happy path pays nothing.
 */

/** Go's quoteChar: the offending byte as the scanner shows it, `'x'`, `'\n'`, `'\x00'`, `'"'`, `'\''`. */
function quoteChar(c: number): string {
  if (c === 0x27) return `'\\''`;
  if (c === 0x22) return `'"'`;
  return `'${goQuoteRune(c)}'`;
}

/** strconv.Quote of the one-rune string string(rune(c)), without its double quotes (c is a byte: U+0000..U+00FF). */
function goQuoteRune(c: number): string {
  const escapes: Record<number, string> = { 7: '\\a', 8: '\\b', 12: '\\f', 10: '\\n', 13: '\\r', 9: '\\t', 11: '\\v' };
  if (escapes[c]) return escapes[c]!;
  if (c === 0x5c) return '\\\\';
  if (c < 0x20 || c === 0x7f) return `\\x${c.toString(16).padStart(2, '0')}`;
  // strconv.IsPrint: U+0080..U+009F (controls), U+00A0 (no-break space) and U+00AD (soft hyphen) are not printable.
  if ((c >= 0x80 && c <= 0xa0) || c === 0xad) return `\\u00${c.toString(16).padStart(2, '0')}`;
  return String.fromCharCode(c);
}

class SyntaxFailure {
  constructor(readonly message: string) {}
}

/** A recursive scan with the messages of Go's scanner state machine (encoding/json/scanner.go). */
class GoScanner {
  private pos = 0;

  constructor(private readonly data: Uint8Array) {}

  check(): string | undefined {
    try {
      this.scan();
      return undefined;
    } catch (err) {
      if (err instanceof SyntaxFailure) return err.message;
      throw err;
    }
  }

  private fail(context: string): never {
    if (this.pos >= this.data.length) throw new SyntaxFailure('unexpected end of JSON input');
    throw new SyntaxFailure(`invalid character ${quoteChar(this.data[this.pos]!)} ${context}`);
  }

  private peek(): number {
    return this.pos < this.data.length ? this.data[this.pos]! : -1;
  }

  private skipSpace(): void {
    for (;;) {
      const c = this.peek();
      if (c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d) this.pos++;
      else return;
    }
  }

  /** One loop with an explicit stack of open containers, so that nesting costs no call depth. */
  private scan(): void {
    const open: number[] = [];
    // What the next token may be: a value, the first element (or `]`), the first key (or `}`), a key.
    let expect: 'value' | 'firstElement' | 'firstKey' | 'key' = 'value';
    for (;;) {
      this.skipSpace();
      const c = this.peek();
      if (expect === 'firstKey' || expect === 'key') {
        if (expect === 'firstKey' && c === 0x7d) {
          this.pos++;
          open.pop();
        } else {
          if (c !== 0x22) this.fail('looking for beginning of object key string');
          this.string();
          this.skipSpace();
          if (this.peek() !== 0x3a) this.fail('after object key');
          this.pos++;
          expect = 'value';
          continue;
        }
      } else if (expect === 'firstElement' && c === 0x5d) {
        this.pos++;
        open.pop();
      } else if (c === 0x7b || c === 0x5b) {
        this.pos++;
        open.push(c);
        expect = c === 0x7b ? 'firstKey' : 'firstElement';
        continue;
      } else this.scalar(c);
      // After a value: the end of the text, or what the innermost open container allows next.
      for (;;) {
        this.skipSpace();
        const top = open[open.length - 1];
        if (top === undefined) {
          if (this.pos < this.data.length) this.fail('after top-level value');
          return;
        }
        const next = this.peek();
        if (next === 0x2c) {
          this.pos++;
          expect = top === 0x7b ? 'key' : 'value';
          break;
        }
        if (next === (top === 0x7b ? 0x7d : 0x5d)) {
          this.pos++;
          open.pop();
          continue;
        }
        this.fail(top === 0x7b ? 'after object key:value pair' : 'after array element');
      }
    }
  }

  private scalar(c: number): void {
    if (c === 0x22) return this.string();
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return this.number();
    if (c === 0x74) return this.literal('true');
    if (c === 0x66) return this.literal('false');
    if (c === 0x6e) return this.literal('null');
    this.fail('looking for beginning of value');
  }

  private string(): void {
    this.pos++;
    for (;;) {
      const c = this.peek();
      if (c === -1) this.fail('in string literal');
      if (c === 0x22) {
        this.pos++;
        return;
      }
      if (c === 0x5c) {
        this.pos++;
        const e = this.peek();
        if (e === 0x75) {
          this.pos++;
          for (let i = 0; i < 4; i++) {
            const h = this.peek();
            const hex = (h >= 0x30 && h <= 0x39) || (h >= 0x61 && h <= 0x66) || (h >= 0x41 && h <= 0x46);
            if (!hex) this.fail('in \\u hexadecimal character escape');
            this.pos++;
          }
          continue;
        }
        if (![0x62, 0x66, 0x6e, 0x72, 0x74, 0x5c, 0x2f, 0x22].includes(e)) this.fail('in string escape code');
        this.pos++;
        continue;
      }
      if (c < 0x20) this.fail('in string literal');
      this.pos++;
    }
  }

  private digits(): void {
    while (this.peek() >= 0x30 && this.peek() <= 0x39) this.pos++;
  }

  private number(): void {
    if (this.peek() === 0x2d) {
      this.pos++;
      const c = this.peek();
      if (!(c >= 0x30 && c <= 0x39)) this.fail('in numeric literal');
    }
    if (this.peek() === 0x30) this.pos++;
    else this.digits();
    if (this.peek() === 0x2e) {
      this.pos++;
      const c = this.peek();
      if (!(c >= 0x30 && c <= 0x39)) this.fail('after decimal point in numeric literal');
      this.digits();
    }
    const e = this.peek();
    if (e === 0x65 || e === 0x45) {
      this.pos++;
      if (this.peek() === 0x2b || this.peek() === 0x2d) this.pos++;
      const c = this.peek();
      if (!(c >= 0x30 && c <= 0x39)) this.fail('in exponent of numeric literal');
      this.digits();
    }
  }

  private literal(word: string): void {
    this.pos++;
    for (let i = 1; i < word.length; i++) {
      if (this.peek() !== word.charCodeAt(i)) this.fail(`in literal ${word} (expecting '${word[i]}')`);
      this.pos++;
    }
  }
}

/** What Go's json.Unmarshal says of a text that is not JSON (undefined when it is). */
export function goJsonSyntaxError(data: Uint8Array): string | undefined {
  return new GoScanner(data).check();
}

/** The JSON type name Go's UnmarshalTypeError gives a value: string, number, bool, array, object. */
export function goJsonType(value: unknown): string {
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'boolean') return 'bool';
  if (value !== null && typeof value === 'object') return 'object';
  return typeof value;
}

const FIND_KIND_TYPE =
  'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }';

/**
 * runtime.SimpleMetaFactory.Interpret: a JSON body's apiVersion and kind, read into a small struct with
 * encoding/json (keys matched case-insensitively, the last match winning). What it cannot read is an error worded
 * as kube-apiserver gives it: `couldn't get version/kind; json parse error: json: cannot unmarshal …`.
 */
export function interpretKind(value: unknown): { apiVersion: string; kind: string } | { error: string } {
  const failed = (why: string) => ({ error: `couldn't get version/kind; json parse error: ${why}` });
  if (value === null) return { apiVersion: '', kind: '' };
  if (typeof value !== 'object' || Array.isArray(value))
    return failed(`json: cannot unmarshal ${goJsonType(value)} into Go value of type ${FIND_KIND_TYPE}`);
  let apiVersion = '';
  let kind = '';
  for (const [key, v] of Object.entries(value as Record<string, unknown>)) {
    const field = key.toLowerCase() === 'apiversion' ? 'apiVersion' : key.toLowerCase() === 'kind' ? 'kind' : undefined;
    if (!field || v === null) continue;
    if (typeof v !== 'string')
      return failed(`json: cannot unmarshal ${goJsonType(v)} into Go struct field .${field} of type string`);
    if (field === 'kind') kind = v;
    else apiVersion = v;
  }
  return { apiVersion, kind };
}

/** apiserver's summarizeData: a body's first 30 bytes as text when it starts with `{`, else in hex; `<empty>`. */
export function summarizeBody(data: Uint8Array, max = 30): string {
  if (data.length === 0) return '<empty>';
  const head = data.subarray(0, max);
  const more = data.length > max ? ' ...' : '';
  if (data[0] === 0x7b) return Buffer.from(head).toString('utf8') + more;
  return Buffer.from(head).toString('hex') + more;
}
