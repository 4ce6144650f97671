import { createRequire } from 'node:module';
import type {
  Arith,
  Assign,
  CaseItem,
  Command,
  Part,
  Redirect,
  Script,
  SimpleCommand,
  Statement,
  Word,
} from './ast.js';

/**
 * Shell source to the syntax tree of ast.ts, through tree-sitter-bash (the grammar GitHub and editors use) run by
 * web-tree-sitter's WebAssembly runtime. Both load on the first script, not at start-up: ~25 ms once, then a
 * short script parses in well under a millisecond. tree-sitter recovers from errors for editors; a shell must
 * not, so any ERROR or MISSING node is a syntax error, or input still to come when it is at the end.
 */

interface TsNode {
  type: string;
  isNamed: boolean;
  isMissing: boolean;
  hasError: boolean;
  startIndex: number;
  endIndex: number;
  text: string;
  childCount: number;
  child(index: number): TsNode | null;
  fieldNameForChild(index: number): string | null;
}

interface TsParser {
  parse(source: string): { rootNode: TsNode; delete(): void } | null;
}

let loading: Promise<TsParser> | undefined;

function parser(): Promise<TsParser> {
  loading ??= (async () => {
    const { Parser, Language } = await import('web-tree-sitter');
    await Parser.init();
    const wasm = createRequire(import.meta.url).resolve('tree-sitter-bash/tree-sitter-bash.wasm');
    const bash = await Language.load(wasm);
    const p = new Parser();
    p.setLanguage(bash);
    return p as unknown as TsParser;
  })();
  return loading;
}

/** A construct the grammar knows that this shell does not run (arrays, process substitution, coprocesses). */
class Unsupported extends Error {}

export type ParseResult = { script: Script } | { error: string; incomplete: boolean };

const cache = new Map<string, Script>();
const CACHE_SIZE = 512;
const CACHEABLE = 4096;

/** Parses a script; `incomplete` says the error is only that more lines are needed (an open `do`, quote, here-document). */
export async function parse(source: string): Promise<ParseResult> {
  const cached = cache.get(source);
  if (cached) return { script: cached };
  const p = await parser();
  const exitCode = process.exitCode;
  let tree: ReturnType<TsParser['parse']>;
  try {
    tree = p.parse(source);
  } catch {
    // a WebAssembly abort (out of memory) sets the process's exit code on its way out; it is this script's failure only
    process.exitCode = exitCode;
    return { error: 'syntax error: the script could not be parsed', incomplete: false };
  }
  if (!tree) return { error: 'syntax error', incomplete: false };
  try {
    const root = tree.rootNode;
    if (root.hasError) return syntaxError(root, source);
    const script: Script = { body: new Converter(source).statements(root) };
    if (source.length <= CACHEABLE) {
      if (cache.size >= CACHE_SIZE) cache.delete(cache.keys().next().value!);
      cache.set(source, script);
    }
    return { script };
  } catch (err) {
    if (err instanceof Unsupported) return { error: err.message, incomplete: false };
    throw err;
  } finally {
    tree.delete();
  }
}

function firstError(node: TsNode): TsNode | undefined {
  if (node.type === 'ERROR' || node.isMissing) return node;
  for (let i = 0; i < node.childCount; i++) {
    const child = node.child(i)!;
    if (child.hasError || child.isMissing || child.type === 'ERROR') {
      const found = firstError(child);
      if (found) return found;
    }
  }
  return undefined;
}

function syntaxError(root: TsNode, source: string): ParseResult {
  const bad = firstError(root);
  const end = source.trimEnd().length;
  if (!bad) return { error: 'syntax error', incomplete: false };
  if (bad.isMissing) {
    const expecting = bad.type.replace(/^"|"$/g, '');
    return { error: `syntax error: unexpected end of file (expecting "${expecting}")`, incomplete: true };
  }
  if (bad.endIndex >= end) {
    return { error: 'syntax error: unexpected end of file', incomplete: true };
  }
  const token = source.slice(bad.startIndex, bad.endIndex).trim().split(/\s+/)[0] ?? '';
  const unexpected = firstToken(bad) ?? token;
  return { error: `syntax error: unexpected "${unexpected}"`, incomplete: false };
}

function firstToken(node: TsNode): string | undefined {
  if (node.childCount === 0) return node.text || undefined;
  return firstToken(node.child(0)!);
}

const STATEMENTS = new Set([
  'command',
  'pipeline',
  'list',
  'negated_command',
  'redirected_statement',
  'subshell',
  'compound_statement',
  'if_statement',
  'while_statement',
  'for_statement',
  'c_style_for_statement',
  'case_statement',
  'function_definition',
  'variable_assignment',
  'variable_assignments',
  'declaration_command',
  'unset_command',
  'test_command',
]);

const TEST_EXPRESSIONS = new Set(['binary_expression', 'unary_expression', 'parenthesized_expression']);

function children(node: TsNode): Array<{ node: TsNode; field: string | null }> {
  const out: Array<{ node: TsNode; field: string | null }> = [];
  for (let i = 0; i < node.childCount; i++) out.push({ node: node.child(i)!, field: node.fieldNameForChild(i) });
  return out;
}

function integer(text: string): bigint | undefined {
  const signed = /^([+-])(.+)$/.exec(text.trim());
  if (signed) {
    const v = integer(signed[2]!);
    return v === undefined ? undefined : signed[1] === '-' ? -v : v;
  }
  const t = text.trim();
  if (/^[0-9]+$/.test(t)) return t.length > 1 && t.startsWith('0') ? BigInt(`0o${t.slice(1)}`) : BigInt(t);
  if (/^0[xX][0-9a-fA-F]+$/.test(t)) return BigInt(t);
  const based = /^(\d+)#([0-9a-zA-Z@_]+)$/.exec(t);
  if (based) {
    const base = Number(based[1]);
    if (base < 2 || base > 36) return undefined;
    let v = 0n;
    for (const c of based[2]!.toLowerCase()) {
      const d = Number.parseInt(c, 36);
      if (Number.isNaN(d) || d >= base) return undefined;
      v = v * BigInt(base) + BigInt(d);
    }
    return v;
  }
  return undefined;
}

/** Literal text of a double-quoted string: backslash escapes only $ ` " \ and newline. */
function doubleQuoted(text: string): string {
  return text.replace(/\\([$`"\\\n])/g, (_m, c: string) => (c === '\n' ? '' : c));
}

const C_ESCAPES: Record<string, string> = {
  a: '\x07',
  b: '\b',
  e: '\x1b',
  E: '\x1b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\\': '\\',
  "'": "'",
  '"': '"',
  '?': '?',
};

/** `$'…'`: C escapes (\n, \t, \x41, \101, \u263a). */
export function cEscapes(text: string): string {
  return text.replace(/\\(x[0-9a-fA-F]{1,2}|u[0-9a-fA-F]{1,4}|U[0-9a-fA-F]{1,8}|[0-7]{1,3}|c.|.)/gs, (m, e: string) => {
    if (e[0] === 'x' || e[0] === 'u' || e[0] === 'U') return String.fromCodePoint(Number.parseInt(e.slice(1), 16));
    if (/^[0-7]/.test(e)) return String.fromCharCode(Number.parseInt(e, 8) & 0xff);
    if (e[0] === 'c' && e.length === 2) return String.fromCharCode(e.charCodeAt(1) & 0x1f);
    return C_ESCAPES[e] ?? m;
  });
}

class Converter {
  constructor(private readonly source: string) {}

  private text(node: TsNode): string {
    return this.source.slice(this.start(node), node.endIndex);
  }

  /**
   * Where a node really starts: tree-sitter-bash lets an expansion's `$` token take the blanks before it inside
   * a string (`"$a $b"`), which are the string's text.
   */
  private start(node: TsNode): number {
    if (node.type === 'string_content' || node.type === 'heredoc_content') return node.startIndex;
    let at = node.startIndex;
    while (at < node.endIndex && (this.source[at] === ' ' || this.source[at] === '\t' || this.source[at] === '\n'))
      at++;
    return at;
  }

  statements(node: TsNode): Statement[] {
    const out: Statement[] = [];
    for (const { node: child } of children(node)) {
      if (!child.isNamed) {
        if (child.type === '&' && out.length > 0) out[out.length - 1]!.background = true;
        continue;
      }
      if (STATEMENTS.has(child.type)) out.push({ command: this.command(child), background: false });
      else if (child.type === 'comment' || child.type === 'heredoc_body') continue;
      else throw new Unsupported(`syntax error: unexpected ${child.type.replace(/_/g, ' ')}`);
    }
    return out;
  }

  command(node: TsNode): Command {
    switch (node.type) {
      case 'command':
        return this.simple(node);
      case 'variable_assignment':
        return { type: 'simple', assigns: [this.assign(node)], words: [], redirects: [] };
      case 'variable_assignments':
        return {
          type: 'simple',
          assigns: children(node)
            .filter((c) => c.node.type === 'variable_assignment')
            .map((c) => this.assign(c.node)),
          words: [],
          redirects: [],
        };
      case 'declaration_command':
      case 'unset_command':
        return this.declaration(node);
      case 'redirected_statement':
        return this.redirected(node);
      case 'pipeline': {
        const commands: Command[] = [];
        const stderr: boolean[] = [];
        for (const { node: c } of children(node)) {
          if (c.isNamed) {
            commands.push(this.command(c));
            stderr.push(false);
          } else if (c.type === '|&') stderr[stderr.length - 1] = true;
        }
        return { type: 'pipeline', commands, stderr };
      }
      case 'list': {
        const named = children(node).filter((c) => c.node.isNamed && c.node.type !== 'comment');
        const op = children(node).find((c) => c.node.type === '&&' || c.node.type === '||');
        if (named.length !== 2 || !op) throw new Unsupported('syntax error');
        return {
          type: op.node.type === '&&' ? 'and' : 'or',
          left: this.command(named[0]!.node),
          right: this.command(named[1]!.node),
        };
      }
      case 'negated_command': {
        const inner = children(node).find((c) => c.node.isNamed);
        if (!inner) throw new Unsupported('syntax error');
        return { type: 'not', command: this.command(inner.node) };
      }
      case 'subshell':
        return { type: 'subshell', body: this.statements(node) };
      case 'compound_statement': {
        if (node.child(0)?.type === '((') {
          const expr = children(node).find((c) => c.node.isNamed);
          return { type: 'arith', expr: expr ? this.arith(expr.node) : { t: 'num', value: 0n } };
        }
        return { type: 'group', body: this.statements(node) };
      }
      case 'if_statement':
        return this.ifStatement(node);
      case 'while_statement': {
        const condition: Statement[] = [];
        let body: Statement[] = [];
        for (const { node: c, field } of children(node)) {
          if (field === 'condition' && c.isNamed) condition.push({ command: this.command(c), background: false });
          else if (field === 'body') body = this.statements(c);
        }
        return { type: 'loop', until: node.child(0)?.type === 'until', condition, body };
      }
      case 'for_statement': {
        let variable = '';
        let items: Word[] | undefined;
        let body: Statement[] = [];
        for (const { node: c, field } of children(node)) {
          if (field === 'variable') variable = this.text(c);
          else if (c.type === 'in') items ??= [];
          else if (field === 'value') (items ??= []).push(this.word(c));
          else if (field === 'body') body = this.statements(c);
        }
        return items ? { type: 'for', variable, items, body } : { type: 'for', variable, body };
      }
      case 'c_style_for_statement': {
        const loop: Extract<Command, { type: 'cfor' }> = { type: 'cfor', body: [] };
        for (const { node: c, field } of children(node)) {
          if (field === 'initializer') loop.init = this.arith(c);
          else if (field === 'condition') loop.condition = this.arith(c);
          else if (field === 'update') loop.update = this.arith(c);
          else if (field === 'body') loop.body = this.statements(c);
        }
        return loop;
      }
      case 'case_statement': {
        let subject: Word = { parts: [] };
        const items: CaseItem[] = [];
        for (const { node: c, field } of children(node)) {
          if (field === 'value') subject = this.word(c);
          else if (c.type === 'case_item') items.push(this.caseItem(c));
        }
        return { type: 'case', subject, items };
      }
      case 'function_definition': {
        let name = '';
        let body: Command | undefined;
        for (const { node: c, field } of children(node)) {
          if (field === 'name') name = this.text(c);
          else if (field === 'body') body = this.command(c);
        }
        if (!body) throw new Unsupported('syntax error: a function needs a body');
        return { type: 'function', name, body };
      }
      case 'test_command': {
        const words: Word[] = [];
        for (const { node: c } of children(node)) {
          if (c.type === '[' || c.type === ']' || c.type === '[[' || c.type === ']]') continue;
          this.testWords(c, words);
        }
        return { type: 'test', words, extended: node.child(0)?.type === '[[' };
      }
      default:
        throw new Unsupported(`${node.type.replace(/_/g, ' ')} is not supported by this shell`);
    }
  }

  private testWords(node: TsNode, out: Word[]): void {
    if (TEST_EXPRESSIONS.has(node.type)) {
      for (const { node: c } of children(node)) this.testWords(c, out);
      return;
    }
    if (!node.isNamed || node.type === 'test_operator') {
      out.push({ parts: [{ t: 'text', text: this.text(node), quoted: true }] });
      return;
    }
    out.push(this.word(node));
  }

  private ifStatement(node: TsNode): Command {
    const branches: Array<{ condition: Statement[]; body: Statement[] }> = [];
    let otherwise: Statement[] | undefined;
    const clause = (n: TsNode): { condition: Statement[]; body: Statement[] } => {
      const b = { condition: [] as Statement[], body: [] as Statement[] };
      for (const { node: c, field } of children(n)) {
        if (field === 'condition' && c.isNamed) b.condition.push({ command: this.command(c), background: false });
        else if (c.isNamed && STATEMENTS.has(c.type)) b.body.push({ command: this.command(c), background: false });
        else if (c.type === '&') {
          const target = b.body.length > 0 ? b.body : b.condition;
          if (target.length > 0) target[target.length - 1]!.background = true;
        }
      }
      return b;
    };
    const own = { condition: [] as Statement[], body: [] as Statement[] };
    branches.push(own);
    for (const { node: c, field } of children(node)) {
      if (field === 'condition' && c.isNamed) own.condition.push({ command: this.command(c), background: false });
      else if (c.type === 'elif_clause') branches.push(clause(c));
      else if (c.type === 'else_clause') otherwise = this.statements(c);
      else if (c.isNamed && STATEMENTS.has(c.type)) own.body.push({ command: this.command(c), background: false });
    }
    return otherwise ? { type: 'if', branches, otherwise } : { type: 'if', branches };
  }

  private caseItem(node: TsNode): CaseItem {
    const item: CaseItem = { patterns: [], body: [], next: ';;' };
    for (const { node: c, field } of children(node)) {
      if (field === 'value') item.patterns.push(this.word(c));
      else if (
        field === 'termination' ||
        field === 'fallthrough' ||
        c.type === ';;' ||
        c.type === ';&' ||
        c.type === ';;&'
      ) {
        if (c.type === ';&' || c.type === ';;&') item.next = c.type;
      } else if (c.isNamed && STATEMENTS.has(c.type)) item.body.push({ command: this.command(c), background: false });
    }
    return item;
  }

  private simple(node: TsNode): SimpleCommand {
    const cmd: SimpleCommand = { type: 'simple', assigns: [], words: [], redirects: [] };
    for (const { node: c } of children(node)) {
      if (!c.isNamed) continue;
      if (c.type === 'variable_assignment' && cmd.words.length === 0) cmd.assigns.push(this.assign(c));
      else if (c.type === 'command_name') {
        const inner = children(c).find((x) => x.node.isNamed);
        cmd.words.push(this.word(inner ? inner.node : c));
      } else if (c.type === 'file_redirect' || c.type === 'heredoc_redirect' || c.type === 'herestring_redirect')
        this.redirect(c, cmd.redirects, cmd.words);
      else if (c.type === 'comment') continue;
      else cmd.words.push(this.word(c));
    }
    return cmd;
  }

  private declaration(node: TsNode): SimpleCommand {
    const words: Word[] = [{ parts: [{ t: 'text', text: node.child(0)?.type ?? '', quoted: true }] }];
    for (const { node: c } of children(node)) {
      if (!c.isNamed) continue;
      if (c.type === 'variable_assignment') {
        // export NAME=VALUE: the value is not split or globbed
        const a = this.assign(c);
        const parts: Part[] = [{ t: 'text', text: `${a.name}${a.append ? '+=' : '='}`, quoted: true }];
        for (const part of a.value?.parts ?? []) parts.push(part.t === 'tilde' ? part : { ...part, quoted: true });
        words.push({ parts });
      } else words.push(this.word(c));
    }
    return { type: 'simple', assigns: [], words, redirects: [] };
  }

  private redirected(node: TsNode): Command {
    let body: Command | undefined;
    const redirects: Redirect[] = [];
    const extra: Word[] = [];
    for (const { node: c, field } of children(node)) {
      if (field === 'body') body = this.command(c);
      else if (c.type === 'file_redirect' || c.type === 'heredoc_redirect' || c.type === 'herestring_redirect')
        this.redirect(c, redirects, extra);
    }
    if (!body)
      return extra.length > 0
        ? { type: 'simple', assigns: [], words: extra, redirects }
        : { type: 'redirected', redirects };
    return attach(body, redirects, extra);
  }

  /** One redirection; words tree-sitter attached to it after its target are the command's arguments. */
  private redirect(node: TsNode, out: Redirect[], args: Word[]): void {
    let fd: number | undefined;
    let op: Redirect['op'] | undefined;
    let target: Word | undefined;
    if (node.type === 'heredoc_redirect') {
      let strip = false;
      let quoted = false;
      let body: TsNode | undefined;
      for (const { node: c } of children(node)) {
        if (c.type === '<<-') strip = true;
        else if (c.type === 'heredoc_start') quoted = /['"\\]/.test(this.text(c));
        else if (c.type === 'heredoc_body') body = c;
        else if (c.type === 'file_descriptor') fd = Number(this.text(c));
      }
      out.push({
        ...(fd === undefined ? {} : { fd }),
        op: strip ? '<<-' : '<<',
        target: this.heredoc(body, quoted, strip),
      });
      return;
    }
    for (const { node: c, field } of children(node)) {
      if (c.type === 'file_descriptor' || field === 'descriptor') fd = Number(this.text(c));
      else if (!c.isNamed) op ??= c.type as Redirect['op'];
      else if (target === undefined) target = this.word(c);
      else args.push(this.word(c));
    }
    if (!op || !target) throw new Unsupported('syntax error: a redirection needs a target');
    if (op === ('>' as string) && node.type === 'herestring_redirect') op = '<<<';
    out.push({ ...(fd === undefined ? {} : { fd }), op, target });
  }

  private heredoc(body: TsNode | undefined, quoted: boolean, strip: boolean): Word {
    if (!body) return { parts: [{ t: 'text', text: '', quoted: true }] };
    let text: Part[];
    if (quoted) text = [{ t: 'text', text: this.text(body), quoted: true }];
    else {
      text = [];
      let at = body.startIndex;
      for (const { node: c } of children(body)) {
        if (c.type === 'heredoc_content' || c.type === 'heredoc_end' || !c.isNamed) continue;
        if (this.start(c) > at)
          text.push({ t: 'text', text: heredocText(this.source.slice(at, this.start(c))), quoted: true });
        text.push(...this.word(c, true).parts);
        at = c.endIndex;
      }
      if (body.endIndex > at)
        text.push({ t: 'text', text: heredocText(this.source.slice(at, body.endIndex)), quoted: true });
    }
    if (strip) for (const part of text) if (part.t === 'text') part.text = part.text.replace(/^\t+/gm, '');
    return { parts: text };
  }

  private assign(node: TsNode): Assign {
    let name = '';
    let value: Word | undefined;
    let append = false;
    for (const { node: c, field } of children(node)) {
      if (field === 'name') name = this.text(c);
      else if (c.type === '+=') append = true;
      else if (field === 'value') {
        if (c.type === 'array') throw new Unsupported('arrays are not supported by this shell');
        value = this.word(c, false, true);
      }
    }
    return value ? { name, value, append } : { name, append };
  }

  /** A word; `quoted` inside double quotes; `assignment` for a value (a tilde after `=` or `:` expands). */
  word(node: TsNode, quoted = false, _assignment = false): Word {
    return { parts: this.parts(node, quoted) };
  }

  private parts(node: TsNode, quoted: boolean): Part[] {
    switch (node.type) {
      case 'word':
      case 'number':
      case 'extglob_pattern':
      case 'regex':
      case 'variable_name':
      case 'command_name':
      case 'brace_expression':
        return quoted
          ? [{ t: 'text', text: this.text(node), quoted: true }]
          : unquoted(this.text(node), node.type === 'word');
      case 'raw_string':
        return [{ t: 'text', text: this.text(node).slice(1, -1), quoted: true }];
      case 'ansi_c_string':
        return [{ t: 'text', text: cEscapes(this.text(node).slice(2, -1)), quoted: true }];
      case 'translated_string': {
        const inner = children(node).find((c) => c.node.isNamed);
        return inner ? this.parts(inner.node, quoted) : [];
      }
      case 'string':
        return this.range(node, node.startIndex + 1, node.endIndex - 1, true, doubleQuoted);
      case 'concatenation':
        return this.range(node, node.startIndex, node.endIndex, quoted, quoted ? doubleQuoted : undefined);
      case 'simple_expansion': {
        const name = children(node).find((c) => c.node.isNamed);
        return [{ t: 'param', name: name ? this.text(name.node) : '$', quoted }];
      }
      case 'expansion':
        return [this.expansion(node, quoted)];
      case 'command_substitution':
        return [{ t: 'command', body: this.statements(node), quoted }];
      case 'arithmetic_expansion': {
        const expr = children(node).find((c) => c.node.isNamed);
        return [{ t: 'arith', expr: expr ? this.arith(expr.node) : { t: 'num', value: 0n }, quoted }];
      }
      case 'string_content':
        return [{ t: 'text', text: doubleQuoted(this.text(node)), quoted: true }];
      case 'process_substitution':
        throw new Unsupported('process substitution is not supported by this shell');
      case 'array':
        throw new Unsupported('arrays are not supported by this shell');
      default:
        return quoted ? [{ t: 'text', text: this.text(node), quoted: true }] : unquoted(this.text(node), false);
    }
  }

  /** The parts of a node's children between two offsets; text between them is literal (through `literal`). */
  private range(node: TsNode, from: number, to: number, quoted: boolean, literal?: (t: string) => string): Part[] {
    const parts: Part[] = [];
    let at = from;
    const gap = (end: number): void => {
      if (end <= at) return;
      const raw = this.source.slice(at, end);
      if (quoted) parts.push({ t: 'text', text: literal ? literal(raw) : raw, quoted: true });
      else parts.push(...unquoted(raw, false));
    };
    for (const { node: c } of children(node)) {
      if (!c.isNamed || c.startIndex < from || c.endIndex > to) continue;
      gap(this.start(c));
      parts.push(
        ...(c.type === 'string_content' && quoted
          ? [{ t: 'text' as const, text: doubleQuoted(this.text(c)), quoted: true }]
          : this.parts(c, quoted)),
      );
      at = c.endIndex;
    }
    gap(to);
    return parts;
  }

  private expansion(node: TsNode, quoted: boolean): Part {
    const kids = children(node).filter((c) => c.node.type !== '${' && c.node.type !== '}');
    let name: string | undefined;
    let length = false;
    let op: string | undefined;
    let opEnd = 0;
    let i = 0;
    for (; i < kids.length; i++) {
      const c = kids[i]!.node;
      if (name === undefined && (c.type === 'variable_name' || c.type === 'special_variable_name')) {
        name = this.text(c);
        continue;
      }
      if (name === undefined && !c.isNamed && c.type === '#') {
        length = true;
        continue;
      }
      if (name === undefined && c.type === 'subscript') throw new Unsupported('arrays are not supported by this shell');
      if (name === undefined && !c.isNamed && c.type === '!')
        throw new Unsupported('indirect expansion is not supported by this shell');
      if (name !== undefined && !c.isNamed) {
        op = c.type;
        opEnd = c.endIndex;
        i++;
        break;
      }
      if (name === undefined && c.isNamed) {
        name = this.text(c);
      }
    }
    if (name === undefined) {
      // ${#}: the number of positional parameters; ${} is an error
      if (length) return { t: 'param', name: '#', quoted };
      throw new Unsupported('bad substitution');
    }
    if (op === undefined) return length ? { t: 'param', name, length: true, quoted } : { t: 'param', name, quoted };
    const close = node.endIndex - 1;
    if (op === '/' || op === '//' || op === '/#' || op === '/%') {
      const rest = kids.slice(i);
      const sep = rest.findIndex((c) => !c.node.isNamed && c.node.type === '/');
      const patternEnd = sep < 0 ? close : rest[sep]!.node.startIndex;
      const pattern = { parts: this.range(node, opEnd, patternEnd, quoted) };
      const replacement = sep < 0 ? undefined : { parts: this.range(node, rest[sep]!.node.endIndex, close, quoted) };
      return replacement
        ? { t: 'param', name, op, arg: pattern, replacement, quoted }
        : { t: 'param', name, op, arg: pattern, quoted };
    }
    return { t: 'param', name, op, arg: { parts: this.range(node, opEnd, close, quoted) }, quoted };
  }

  arith(node: TsNode): Arith {
    switch (node.type) {
      case 'number': {
        const v = integer(this.text(node));
        if (v === undefined) throw new Unsupported(`arithmetic syntax error: "${this.text(node)}"`);
        return { t: 'num', value: v };
      }
      case 'variable_name':
      case 'word': {
        const text = this.text(node);
        const v = integer(text);
        if (v !== undefined) return { t: 'num', value: v };
        if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(text)) return { t: 'var', name: text };
        throw new Unsupported(`arithmetic syntax error: "${text}"`);
      }
      case 'parenthesized_expression': {
        const inner = children(node).find((c) => c.node.isNamed);
        if (!inner) throw new Unsupported('arithmetic syntax error');
        return this.arith(inner.node);
      }
      case 'variable_assignment': {
        const a = children(node);
        const name = a.find((c) => c.field === 'name');
        const value = a.find((c) => c.field === 'value');
        if (!name || !value) throw new Unsupported('arithmetic syntax error');
        return { t: 'assign', op: '=', name: this.text(name.node), value: this.arith(value.node) };
      }
      case 'binary_expression': {
        const kids = children(node);
        const left = kids.find((c) => c.field === 'left') ?? kids.find((c) => c.node.isNamed);
        const right = kids.find((c) => c.field === 'right') ?? kids.filter((c) => c.node.isNamed)[1];
        const op = kids.find((c) => c.field === 'operator') ?? kids.find((c) => !c.node.isNamed);
        if (!left || !right || !op) throw new Unsupported('arithmetic syntax error');
        const operator = op.node.type;
        if (/^([*/%+\-&^|]|<<|>>)?=$/.test(operator) && operator !== '==' && operator !== '!=') {
          const target = this.arith(left.node);
          if (target.t !== 'var') throw new Unsupported('arithmetic syntax error: assignment to a non-variable');
          return { t: 'assign', op: operator, name: target.name, value: this.arith(right.node) };
        }
        return { t: 'binary', op: operator, left: this.arith(left.node), right: this.arith(right.node) };
      }
      case 'unary_expression': {
        const kids = children(node);
        const op = kids.find((c) => !c.node.isNamed);
        const arg = kids.find((c) => c.node.isNamed);
        if (!op || !arg) throw new Unsupported('arithmetic syntax error');
        if (op.node.type === '++' || op.node.type === '--') {
          const target = this.arith(arg.node);
          if (target.t !== 'var') throw new Unsupported('arithmetic syntax error');
          return { t: 'incdec', op: op.node.type, prefix: true, name: target.name };
        }
        return { t: 'unary', op: op.node.type, arg: this.arith(arg.node) };
      }
      case 'postfix_expression': {
        const kids = children(node);
        const op = kids.find((c) => !c.node.isNamed);
        const arg = kids.find((c) => c.node.isNamed);
        const target = arg ? this.arith(arg.node) : undefined;
        if (!op || target?.t !== 'var' || (op.node.type !== '++' && op.node.type !== '--'))
          throw new Unsupported('arithmetic syntax error');
        return { t: 'incdec', op: op.node.type, prefix: false, name: target.name };
      }
      case 'ternary_expression': {
        const kids = children(node);
        const get = (f: string): Arith => {
          const c = kids.find((k) => k.field === f);
          if (!c) throw new Unsupported('arithmetic syntax error');
          return this.arith(c.node);
        };
        return {
          t: 'ternary',
          condition: get('condition'),
          consequence: get('consequence'),
          alternative: get('alternative'),
        };
      }
      default:
        return { t: 'word', word: this.word(node) };
    }
  }
}

/**
 * Puts redirections on the command they belong to. tree-sitter-bash hangs `a && b > f` and `a | b > f` on the
 * whole list or pipeline; in sh they are the last command's.
 */
function attach(cmd: Command, redirects: Redirect[], extra: Word[]): Command {
  switch (cmd.type) {
    case 'simple':
      cmd.redirects.push(...redirects);
      cmd.words.push(...extra);
      return cmd;
    case 'and':
    case 'or':
      cmd.right = attach(cmd.right, redirects, extra);
      return cmd;
    case 'pipeline':
      cmd.commands[cmd.commands.length - 1] = attach(cmd.commands.at(-1)!, redirects, extra);
      return cmd;
    case 'not':
      cmd.command = attach(cmd.command, redirects, extra);
      return cmd;
    default:
      return { type: 'redirected', command: cmd, redirects };
  }
}

/**
 * Unquoted text: a backslash quotes the next character (and joins lines before a newline); `~` at the start of
 * a word is the home directory.
 */
function unquoted(text: string, tilde: boolean): Part[] {
  const parts: Part[] = [];
  let plain = '';
  let i = 0;
  if (tilde && (text === '~' || text.startsWith('~/'))) {
    parts.push({ t: 'tilde' });
    i = 1;
  }
  for (; i < text.length; i++) {
    const c = text[i]!;
    if (c === '\\' && i + 1 < text.length) {
      if (plain) parts.push({ t: 'text', text: plain, quoted: false });
      plain = '';
      const next = text[++i]!;
      if (next !== '\n') parts.push({ t: 'text', text: next, quoted: true });
    } else plain += c;
  }
  if (plain) parts.push({ t: 'text', text: plain, quoted: false });
  return parts;
}

/** Here-document text: backslash escapes only $ ` \ and newline. */
function heredocText(text: string): string {
  return text.replace(/\\([$`\\\n])/g, (_m, c: string) => (c === '\n' ? '' : c));
}
