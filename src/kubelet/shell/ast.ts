/**
 * The exec shell's syntax tree: what parse.ts makes of tree-sitter-bash's concrete tree, and all the interpreter
 * reads. Plain objects, so a parsed script can be cached and run any number of times.
 */

export interface Statement {
  command: Command;
  /** Ended with `&`: the shell does not wait for it. */
  background: boolean;
}

export type Command =
  | SimpleCommand
  | {
      type: 'pipeline';
      commands: Command[] /** `|&` after stage i: its stderr goes down the pipe too */;
      stderr: boolean[];
    }
  | { type: 'and' | 'or'; left: Command; right: Command }
  | { type: 'not'; command: Command }
  | { type: 'group' | 'subshell'; body: Statement[] }
  | { type: 'if'; branches: Array<{ condition: Statement[]; body: Statement[] }>; otherwise?: Statement[] }
  | { type: 'loop'; until: boolean; condition: Statement[]; body: Statement[] }
  | { type: 'for'; variable: string; items?: Word[]; body: Statement[] }
  | { type: 'cfor'; init?: Arith; condition?: Arith; update?: Arith; body: Statement[] }
  | { type: 'case'; subject: Word; items: CaseItem[] }
  | { type: 'function'; name: string; body: Command }
  | { type: 'redirected'; command?: Command; redirects: Redirect[] }
  /** `[ … ]` (run as the `[` command) and bash's `[[ … ]]` (no splitting, patterns on the right of ==). */
  | { type: 'test'; words: Word[]; extended: boolean }
  /** `(( expr ))`: status 0 when the value is not zero. */
  | { type: 'arith'; expr: Arith };

export interface SimpleCommand {
  type: 'simple';
  assigns: Assign[];
  words: Word[];
  redirects: Redirect[];
}

export interface CaseItem {
  patterns: Word[];
  body: Statement[];
  /** `;;` ends the case, `;&` runs the next item's body too, `;;&` tests the next patterns. */
  next: ';;' | ';&' | ';;&';
}

export interface Assign {
  name: string;
  value?: Word;
  append: boolean;
}

export interface Redirect {
  /** The descriptor redirected; undefined means the operator's default (0 for input, 1 for output). */
  fd?: number;
  op: '>' | '>>' | '>|' | '<' | '<>' | '>&' | '<&' | '&>' | '&>>' | '<<' | '<<-' | '<<<';
  target: Word;
}

export interface Word {
  parts: Part[];
}

export type Part =
  /** Literal text; quoted text is neither split nor globbed. */
  | { t: 'text'; text: string; quoted: boolean }
  | { t: 'param'; name: string; op?: string; arg?: Word; replacement?: Word; length?: boolean; quoted: boolean }
  | { t: 'command'; body: Statement[]; quoted: boolean }
  | { t: 'arith'; expr: Arith; quoted: boolean }
  /** `~` or `~/…` at the start of a word. */
  | { t: 'tilde' };

export type Arith =
  | { t: 'num'; value: bigint }
  | { t: 'var'; name: string }
  /** A word to expand and read as a number (`$x`, `${#x}`, `$(cmd)` inside `$(( ))`). */
  | { t: 'word'; word: Word }
  | { t: 'unary'; op: string; arg: Arith }
  | { t: 'binary'; op: string; left: Arith; right: Arith }
  | { t: 'assign'; op: string; name: string; value: Arith }
  | { t: 'incdec'; op: '++' | '--'; prefix: boolean; name: string }
  | { t: 'ternary'; condition: Arith; consequence: Arith; alternative: Arith };

export interface Script {
  body: Statement[];
}
