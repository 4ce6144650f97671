import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { kubectlMissing } from './helpers/kubectl.js';
import { track } from './helpers/processes.js';
import { ROOT, startServer, type SimServer } from './helpers/server.js';

// docs/walkthrough.md run as it is written: its `sh` blocks in order in one bash session (kubectl, npx sim, the
// article's script with curl and jq), each `text` block checked against the output of the block before it. A block
// after `<!-- walkthrough: server -->` is the server a reader starts in a terminal of their own: the test starts it
// with the same arguments on an ephemeral port, and puts that port in place of the page's 8080 and 8001.

const PAGE = join(ROOT, 'docs', 'walkthrough.md');
const SERVER_MARK = '<!-- walkthrough: server -->';

type Block = { kind: 'server'; args: string[] } | { kind: 'sh'; code: string } | { kind: 'text'; expected: string[] };

/** The page's blocks, in order. */
function blocks(markdown: string): Block[] {
  const out: Block[] = [];
  const lines = markdown.split('\n');
  let server = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.trim() === SERVER_MARK) server = true;
    const fence = /^```(\w+)\s*$/.exec(line);
    if (!fence) continue;
    const body: string[] = [];
    for (i++; i < lines.length && lines[i] !== '```'; i++) body.push(lines[i]!);
    if (fence[1] === 'sh' && server) {
      const command = body.join(' ').trim();
      assert.match(command, /^npx sim serve\b/, `a server block starts sim serve: ${command}`);
      out.push({ kind: 'server', args: shellWords(command.slice('npx sim serve'.length)) });
    } else if (fence[1] === 'sh') out.push({ kind: 'sh', code: body.join('\n') });
    else if (fence[1] === 'text') out.push({ kind: 'text', expected: body.filter((l) => l.trim() !== '') });
    server = false;
  }
  return out;
}

/** Words as bash splits them (quotes and all). */
function shellWords(text: string): string[] {
  const r = spawnSync('bash', ['-c', `set -- ${text}; for w in "$@"; do printf '%s\\0' "$w"; done`], {
    encoding: 'utf8',
  });
  return r.stdout.split('\0').slice(0, -1);
}

/** A line as compared: runs of spaces as one, the random parts of pod names and ages as placeholders. */
function normalize(line: string): string {
  return line
    .trim()
    .replace(/\s+/g, ' ')
    .replace(/\b([a-z][a-z0-9-]*?)-[a-z0-9]{8,10}-[a-z0-9]{5}\b/g, '$1-HASH-ID')
    .replace(/(^| )(\d+m)?\d+s(?= |$)/g, '$1AGE')
    .replace(/(^| )\d+[mhd](?= |$)/g, '$1AGE');
}

/** Whether the expected lines appear in the output, in order (other lines may come between). */
function missingLine(expected: readonly string[], output: string): string | undefined {
  const actual = output.split('\n').map(normalize);
  let at = 0;
  for (const line of expected) {
    const pattern = new RegExp(
      `^${normalize(line)
        .split('…')
        .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    const found = actual.findIndex((l, i) => i >= at && pattern.test(l));
    if (found < 0) return line;
    at = found + 1;
  }
  return undefined;
}

/** One bash for the whole page, as a reader's terminal: variables, `cd` and background jobs carry over. */
class Session {
  private readonly child: ChildProcess;
  private output = '';
  private waiting: { marker: RegExp; resolve: (out: string) => void } | undefined;
  private readonly home = mkdtempSync(join(tmpdir(), 'kube-sim-walkthrough-'));

  constructor() {
    this.child = track(
      spawn('bash', ['--noprofile', '--norc'], {
        cwd: ROOT,
        detached: true,
        stdio: ['pipe', 'pipe', 'pipe'],
        // A home of its own: no kubeconfig, no kubectl cache of the reader's.
        env: { ...process.env, HOME: this.home, KUBECONFIG: '/dev/null', KUBECACHEDIR: join(this.home, 'cache') },
      }),
    );
    const take = (chunk: string): void => {
      this.output += chunk;
      const w = this.waiting;
      const m = w?.marker.exec(this.output);
      if (w && m) {
        this.waiting = undefined;
        const out = this.output.slice(0, m.index);
        this.output = this.output.slice(m.index + m[0].length);
        w.resolve(out + (m[1] === '0' ? '' : `\n(exit status ${m[1]})`));
      }
    };
    this.child.stdout!.setEncoding('utf8').on('data', take);
    this.child.stderr!.setEncoding('utf8').on('data', take);
    this.child.stdin!.write('exec 2>&1\nset -e\n');
  }

  /** Runs a block; resolves with what it printed (and its status when not 0). */
  run(code: string): Promise<string> {
    const id = Math.random().toString(36).slice(2);
    return new Promise((resolve, reject) => {
      this.waiting = { marker: new RegExp(`__end_${id}__ (\\d+)\\n`), resolve };
      this.child.once('exit', (code) => reject(new Error(`the shell exited (${code}):\n${this.output}`)));
      this.child.stdin!.write(`${code}\necho "__end_${id}__ $?"\n`);
    });
  }

  close(): void {
    try {
      process.kill(-this.child.pid!, 'SIGKILL'); // the shell, and the script it left in the background
    } catch {
      // gone already
    }
    rmSync(this.home, { recursive: true, force: true });
  }
}

const missing =
  kubectlMissing() ??
  (['curl', 'jq'].find((tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status !== 0) !== undefined
    ? 'curl or jq is not installed: part 2 of the walkthrough runs the article script, which needs both'
    : undefined);

let server: SimServer | undefined;
let session: Session | undefined;
after(async () => {
  session?.close();
  await server?.stop();
  rmSync(join(ROOT, 'kube-sim.kubeconfig'), { force: true }); // the page writes it where it runs (git ignores it)
});

test('docs/walkthrough.md runs as it is written', { skip: missing, timeout: 240_000 }, async () => {
  const page = blocks(readFileSync(PAGE, 'utf8'));
  assert.ok(page.filter((b) => b.kind === 'server').length === 2, 'two parts, a server each');
  session = new Session();
  let last: { code: string; output: string } | undefined;
  for (const block of page) {
    if (block.kind === 'server') {
      await server?.stop();
      const args = [...block.args];
      const port = args.indexOf('--port');
      if (port >= 0) args.splice(port, 2);
      server = await startServer(args);
      last = undefined;
    } else if (block.kind === 'sh') {
      assert.ok(server, 'a server runs before the first command');
      const code = block.code.replace(/(127\.0\.0\.1|localhost):(8080|8001)\b/g, `127.0.0.1:${server.port}`);
      // The article's script finds the API at KUBE_API, by default the ambassador's localhost:8001.
      const output = await session.run(`export KUBE_API=http://127.0.0.1:${server.port}\n${code}`);
      assert.doesNotMatch(output, /\(exit status \d+\)$/, `the block failed:\n${code}\n---\n${output}`);
      last = { code, output };
    } else {
      assert.ok(last, 'an output block follows a command block');
      let line = missingLine(block.expected, last.output);
      // What a reader sees a moment later: a read (`kubectl get`) may run before the kubelet's event is written.
      for (let tries = 0; line !== undefined && /^kubectl get\b/.test(last.code) && tries < 20; tries++) {
        await new Promise((resolve) => setTimeout(resolve, 500));
        last = {
          code: last.code,
          output: await session.run(`export KUBE_API=http://127.0.0.1:${server!.port}\n${last.code}`),
        };
        line = missingLine(block.expected, last.output);
      }
      assert.equal(
        line,
        undefined,
        `${block.expected.join('\n')}\n--- not in the output of ---\n${last.code}\n---\n${last.output}`,
      );
    }
  }
});
