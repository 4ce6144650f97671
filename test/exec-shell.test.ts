import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { VirtualClock } from '../src/clock/clock.js';
import { runInContainer } from '../src/kubelet/exec-shell.js';
import { ContainerDisks, ContainerFs, FsLayer } from '../src/kubelet/filesystem.js';
import { InputTooLarge, Reader } from '../src/kubelet/shell/io.js';

// The exec shell on its own: scripts as client test suites and the Kubernetes docs write them, stdin that
// arrives a line at a time, a terminal session, the container's files and their limits.

const T0 = Date.UTC(2024, 0, 2, 3, 4, 5);

/** An exec's stdin the test feeds chunk by chunk; `end()` is the client closing it. */
class Keyboard {
  private chunks: Array<Uint8Array | undefined> = [];
  private waiting?: (chunk: Uint8Array | undefined) => void;

  read = (): Promise<Uint8Array | undefined> => {
    if (this.chunks.length > 0) return Promise.resolve(this.chunks.shift());
    return new Promise((resolve) => (this.waiting = resolve));
  };

  type(text: string): void {
    this.push(Buffer.from(text));
  }

  end(): void {
    this.push(undefined);
  }

  private push(chunk: Uint8Array | undefined): void {
    const w = this.waiting;
    this.waiting = undefined;
    if (w) w(chunk);
    else this.chunks.push(chunk);
  }
}

function container(): { fs: ContainerFs; clock: VirtualClock } {
  const clock = new VirtualClock(T0);
  const fs = new ContainerFs(new FsLayer(false), () => clock.now());
  for (const d of ['/etc', '/tmp', '/root']) fs.mkdir(d);
  fs.write('/etc/hostname', 'web-1\n');
  return { fs, clock };
}

interface Session {
  out: () => string;
  err: () => string;
  done: Promise<number>;
  /** Resolves once stdout holds `text`; fails after a second of wall time (the shell never answered). */
  until(text: string): Promise<void>;
}

function start(
  argv: string[],
  options: { stdin?: Keyboard; tty?: boolean; fs?: ContainerFs; clock?: VirtualClock; closed?: Promise<void> } = {},
): Session {
  const made = options.fs && options.clock ? { fs: options.fs, clock: options.clock } : container();
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  const done = runInContainer(argv, {
    env: new Map([
      ['MESSAGE', 'Hello'],
      ['HOME', '/root'],
    ]),
    fs: made.fs,
    clock: made.clock,
    startedAt: T0 - 3 * 3600_000 - 25 * 60_000,
    io: {
      stdout: (d) => {
        out += Buffer.from(d).toString();
        for (const w of waiters.splice(0)) w();
      },
      stderr: (d) => {
        err += Buffer.from(d).toString();
      },
      ...(options.stdin ? { stdin: { read: options.stdin.read } } : {}),
      ...(options.tty ? { tty: true } : {}),
      closed: options.closed ?? new Promise(() => undefined),
    },
  });
  return {
    out: () => out,
    err: () => err,
    done,
    until: (text) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no ${JSON.stringify(text)} in ${JSON.stringify(out)}`)), 2000);
        const check = (): void => {
          if (out.includes(text)) {
            clearTimeout(timer);
            resolve();
          } else waiters.push(check);
        };
        check();
      }),
  };
}

async function sh(
  script: string,
  fs?: ContainerFs,
  clock?: VirtualClock,
): Promise<{ code: number; out: string; err: string }> {
  const s = start(['sh', '-c', script], fs && clock ? { fs, clock } : {});
  const code = await s.done;
  return { code, out: s.out(), err: s.err() };
}

describe('the exec shell', () => {
  test('loops over command substitutions, on the cluster clock', async () => {
    assert.deepEqual(await sh('for i in $(seq 1 3); do date; done'), {
      code: 0,
      out: 'Tue Jan  2 03:04:05 UTC 2024\n'.repeat(3),
      err: '',
    });
    assert.equal((await sh('for i in `seq 2 2 6`; do printf "%s," $i; done; echo')).out, '2,4,6,\n');
    assert.equal((await sh('i=0; while [ $i -lt 3 ]; do i=$((i+1)); done; echo $i')).out, '3\n');
    assert.equal((await sh('i=5; until [ "$i" -le 2 ]; do i=$((i-1)); done; echo $i')).out, '2\n');
    assert.equal((await sh('for ((i=0; i<3; i++)); do echo -n $i; done; echo')).out, '012\n');
    assert.equal(
      (await sh('for i in 1 2 3 4; do [ $i = 2 ] && continue; [ $i = 4 ] && break; echo $i; done')).out,
      '1\n3\n',
    );
  });

  test('if, case, functions with local variables and return, and (( ))', async () => {
    assert.equal((await sh('if [ -d /tmp ]; then echo dir; elif true; then echo no; else echo no; fi')).out, 'dir\n');
    assert.equal((await sh('if [ -f /nope ]; then echo no; else echo missing; fi')).out, 'missing\n');
    assert.equal(
      (
        await sh(
          'for x in start stop halt other; do case "$x" in start) echo s;; stop|halt) echo t;; *) echo "?";; esac; done',
        )
      ).out,
      's\nt\nt\n?\n',
    );
    assert.equal(
      (
        await sh(
          'f() { local n=$1; [ "$n" -le 1 ] && { echo 1; return; }; echo $(( n * $(f $((n-1))) )); }; n=9; f 5; echo $n',
        )
      ).out,
      '120\n9\n',
    );
    assert.equal((await sh('g() { return 3; }; g; echo $?')).out, '3\n');
    assert.equal(
      (await sh('x=4; (( x > 3 )) && echo big; echo $((2**10)) $((7/2)) $((-7%3)) $((x++)) $x')).out,
      'big\n1024 3 -1 4 5\n',
    );
  });

  test('&&, ||, ;, !, pipelines, $? and exit codes', async () => {
    assert.deepEqual(await sh('echo "$MESSAGE" && false || echo fallback; exit 4'), {
      code: 4,
      out: 'Hello\nfallback\n',
      err: '',
    });
    assert.deepEqual(await sh('false; echo $?; ! true; echo $?; true | false; echo $?'), {
      code: 0,
      out: '1\n1\n1\n',
      err: '',
    });
    assert.deepEqual(await sh('frobnicate --now; echo $?'), {
      code: 0,
      out: '127\n',
      err: 'sh: frobnicate: not found\n',
    });
    assert.deepEqual(await sh('exit 3'), { code: 3, out: '', err: '' });
    assert.deepEqual(await sh('set -e; false; echo not reached'), { code: 1, out: '', err: '' });
    assert.equal((await sh('printf "b\\na\\nb\\n" | sort | uniq -c | sort -r | head -1')).out, '      2 b\n');
    // a writer whose reader has gone stops (SIGPIPE), so an endless producer ends
    assert.equal((await sh('yes | head -n 2; seq 1 1000000000 | head -1')).out, 'y\ny\n1\n');
  });

  test('redirections: files, appending, 2>&1, >/dev/null, <, here-documents and here-strings', async () => {
    const { fs, clock } = container();
    const r = await sh(
      'echo one > /tmp/f; echo two >> /tmp/f; ls /nope > /tmp/err 2>&1; echo gone >/dev/null; wc -l < /tmp/f; cat /tmp/err; echo x >&2 2>/dev/null',
      fs,
      clock,
    );
    assert.deepEqual(r, { code: 0, out: "2\nls: cannot access '/nope': No such file or directory\n", err: 'x\n' });
    assert.equal(fs.read('/tmp/f').toString(), 'one\ntwo\n');
    assert.equal(
      (await sh('ls /nope 2>&1 >/dev/null | tr a-z A-Z')).out,
      "LS: CANNOT ACCESS '/NOPE': NO SUCH FILE OR DIRECTORY\n",
    );
    assert.equal(
      (
        await sh(
          'cat <<EOF\nto $MESSAGE\n  indented\nEOF\ncat <<-"EOF"\n\t$raw\n\tEOF\nread w <<< "here string"; echo "$w"',
        )
      ).out,
      'to Hello\n  indented\n$raw\nhere string\n',
    );
    assert.deepEqual(await sh('echo x > /etc/nope/f'), {
      code: 1,
      out: '',
      err: 'sh: /etc/nope/f: No such file or directory\n',
    });
  });

  test('quoting, word splitting, globbing and parameter expansion', async () => {
    const { fs, clock } = container();
    for (const f of ['a.txt', 'b.txt', 'c.log']) fs.write(`/tmp/${f}`, '');
    const out = async (script: string): Promise<string> => (await sh(script, fs, clock)).out;
    assert.equal(
      await out('x="a b  c"; for w in $x; do echo "[$w]"; done; echo "[$x]" \'[$x]\''),
      '[a]\n[b]\n[c]\n[a b  c] [$x]\n',
    );
    assert.equal(
      await out('echo /tmp/*.txt "/tmp/*.txt" /tmp/*.none'),
      '/tmp/a.txt /tmp/b.txt /tmp/*.txt /tmp/*.none\n',
    );
    assert.equal(await out('cd /tmp && echo *.log && pwd'), 'c.log\n/tmp\n');
    assert.equal(
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script, expanded by the exec shell
      await out('f=archive.tar.gz; echo ${f%.gz} ${f%%.*} ${f#*.} ${#f} ${unset:-default} ${f:+set} ${f/tar/zip}'),
      'archive.tar archive tar.gz 14 default set archive.zip.gz\n',
    );
    assert.equal(
      await out('echo "$(echo "nested $(echo deep)")" `echo back` $\'a\\tb\' a\\ b ~ ~/x'),
      'nested deep back a\tb a b /root /root/x\n',
    );
    assert.equal(
      await out('set -- one "two three"; echo $#; for a in "$@"; do echo "<$a>"; done'),
      '2\n<one>\n<two three>\n',
    );
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell script, expanded by the exec shell
    assert.deepEqual(await sh('echo ${missing:?is required}'), { code: 1, out: '', err: 'sh: missing: is required\n' });
  });

  test('the commands: seq, uptime, sleep, cat, head, tail, wc, grep, printf, test, env, ls, mkdir, rm, touch', async () => {
    const { fs, clock } = container();
    const run = (script: string) => sh(script, fs, clock);
    assert.equal((await run('seq 3; seq -s, 2 4; seq 5 -2 1 | tr "\\n" " "')).out, '1\n2\n3\n2,3,4\n5 3 1 ');
    assert.equal((await run('uptime')).out, ' 03:04:05 up  3:25,  0 users,  load average: 0.00, 0.00, 0.00\n');
    assert.equal(
      (await run('seq 10 > /tmp/n; head -n 2 /tmp/n; tail -3 /tmp/n; tail -n +9 /tmp/n; wc -l /tmp/n')).out,
      '1\n2\n8\n9\n10\n9\n10\n10 /tmp/n\n',
    );
    assert.equal((await run('printf "%-4s|%5.1f|%03d|%x\\n" ab 3.14159 7 255')).out, 'ab  |  3.1|007|ff\n');
    assert.equal(
      (await run('printf "web-1\\nweb-2\\ndb-1\\n" | grep -n "^web" ; echo a | grep -q b || echo none')).out,
      '1:web-1\n2:web-2\nnone\n',
    );
    assert.equal((await run('echo x | grep -c "\\(x\\)\\{1\\}"; echo aab | grep -E -o "a+"')).out, '1\naa\n');
    assert.equal(
      (await run('[ 2 -gt 1 ] && test -n "x" && [ ! -e /nope ] && [ "a" != "b" -a -d /etc ] && echo ok')).out,
      'ok\n',
    );
    assert.deepEqual(await run('[ 1 -eq x ]'), { code: 2, out: '', err: '[: x: integer expression expected\n' });
    assert.equal((await run('env -i A=1 B=2 env; A=3 printenv A; printenv MESSAGE')).out, 'A=1\nB=2\n3\nHello\n');
    assert.equal(
      (await run('mkdir -p /data/a/b && touch /data/a/b/f /data/g && ls /data /data/a/b; ls -d /data')).out,
      '/data:\na\ng\n\n/data/a/b:\nf\n/data\n',
    );
    assert.deepEqual(await run('mkdir /data'), {
      code: 1,
      out: '',
      err: "mkdir: cannot create directory '/data': File exists\n",
    });
    assert.deepEqual(await run('rm /data; rm -r /data && ls /data'), {
      code: 2,
      out: '',
      err: "rm: cannot remove '/data': Is a directory\nls: cannot access '/data': No such file or directory\n",
    });
    assert.match(
      (await run('touch /tmp/t; ls -l /tmp/t')).out,
      /^-rw-r--r-- 1 root root {8}0 Jan {2}2 03:04 \/tmp\/t\n$/,
    );
    // sleep waits on the cluster clock
    const sleeping = start(['sh', '-c', 'sleep 30; echo woke'], { fs, clock });
    await clock.advance(29_000);
    assert.equal(sleeping.out(), '');
    await clock.advance(1_000);
    assert.equal(await sleeping.done, 0);
    assert.equal(sleeping.out(), 'woke\n');
  });

  test('sh reading stdin runs each command as its line arrives, before stdin ends; commands share that input', async () => {
    const keys = new Keyboard();
    const s = start(['sh'], { stdin: keys });
    keys.type('echo one\n');
    await s.until('one\n');
    keys.type('read name\nKubernetes\necho "hello $name"\n');
    await s.until('hello Kubernetes\n');
    keys.type('for i in 1 2\n');
    keys.type('do echo "n$i"; done\n');
    await s.until('n1\nn2\n');
    keys.type('cat | tr a-z A-Z\nstreamed\n');
    await s.until('STREAMED\n');
    keys.end();
    assert.equal(await s.done, 0);
    assert.equal(s.out(), 'one\nhello Kubernetes\nn1\nn2\nSTREAMED\n');
  });

  test('a syntax error in a stdin script, and exit, end the shell with their status', async () => {
    const keys = new Keyboard();
    const s = start(['sh'], { stdin: keys });
    keys.type('echo before\nexit 7\necho after\n');
    assert.equal(await s.done, 7);
    assert.equal(s.out(), 'before\n');
    const k2 = new Keyboard();
    const s2 = start(['sh'], { stdin: k2 });
    k2.type('echo )\necho ok\n');
    k2.end();
    assert.equal(await s2.done, 2);
    assert.match(s2.err(), /^sh: syntax error: unexpected "\)"\n$/);
  });

  test('a terminal session: prompt, echo, line editing, history, Ctrl-C interrupts, canonical input, exit', async () => {
    const keys = new Keyboard();
    const { fs, clock } = container();
    const s = start(['sh'], { stdin: keys, tty: true, fs, clock });
    await s.until('/ # ');
    keys.type('echo hi\r');
    await s.until('hi\r\n/ # ');
    keys.type('sleep 100\r');
    await s.until('sleep 100\r\n');
    keys.type('\x03');
    await s.until('^C\r\n/ # ');
    keys.type('cat\r');
    keys.type('typed\r');
    await s.until('typed\r\ntyped\r\n');
    keys.type('\x04');
    keys.type('ech\x7f\x7fcho edited\r');
    await s.until('edited\r\n');
    keys.type('\x1b[A\r');
    await s.until('edited\r\nedited\r\n');
    keys.type('cd /tmp\r');
    await s.until('/tmp # ');
    keys.type('exit 5\r');
    assert.equal(await s.done, 5);
  });

  test('any command on a terminal: CR LF output and canonical input that Ctrl-D ends', async () => {
    const keys = new Keyboard();
    const s = start(['cat'], { stdin: keys, tty: true });
    keys.type('abc\r');
    await s.until('abc\r\nabc\r\n');
    keys.type('\x04');
    assert.equal(await s.done, 0);
    const ls = start(['ls', '/'], { tty: true, stdin: new Keyboard() });
    assert.equal(await ls.done, 0);
    assert.equal(ls.out(), 'etc\r\nroot\r\ntmp\r\n');
  });

  test('the client going away stops what runs', async () => {
    let gone!: () => void;
    const closed = new Promise<void>((resolve) => (gone = resolve));
    const s = start(['sh', '-c', 'while true; do :; done'], { closed });
    await new Promise((r) => setTimeout(r, 50));
    gone();
    assert.equal(await s.done, 130);
  });

  test('tar packs and unpacks within the container, and says what GNU tar says', async () => {
    const { fs, clock } = container();
    const r = await sh(
      'mkdir -p /src/d && echo A > /src/a && echo B > /src/d/b && cd /src && tar czf /tmp/x.tgz . && mkdir /dst && tar xzf /tmp/x.tgz -C /dst && cat /dst/a /dst/d/b && tar tzf /tmp/x.tgz',
      fs,
      clock,
    );
    assert.deepEqual(r, { code: 0, out: 'A\nB\n./\n./a\n./d/\n./d/b\n', err: '' });
    assert.deepEqual(await sh('echo garbage | tar xf -', fs, clock), {
      code: 2,
      out: '',
      err: 'tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors\n',
    });
  });
});

describe('bounded input', () => {
  test('a line longer than the bound fails instead of growing without end', async () => {
    let sent = 0;
    const endless = new Reader({ read: async () => (sent++ < 100 ? Buffer.from('x'.repeat(1000)) : undefined) });
    await assert.rejects(endless.line(10_000), InputTooLarge);
    const short = new Reader({ read: async () => (sent++ < 102 ? Buffer.from('ab\ncd') : undefined) });
    assert.deepEqual(await short.line(10_000), { text: 'ab', terminated: true });
  });
});

describe('container filesystems', () => {
  test('writes are bounded by the container, pod and kubelet quotas: past them, ENOSPC', async () => {
    const disks = new ContainerDisks({ container: 10_000, pod: 15_000, total: 100_000 });
    const clock = new VirtualClock(T0);
    const a = new ContainerFs(disks.layer('pod-1', 'a', 0).layer, () => clock.now());
    const r = await sh('printf "%09000d" 0 > /big && echo ok; printf "%02000d" 0 > /more; echo $?', a, clock);
    assert.deepEqual(r, { code: 0, out: 'ok\n1\n', err: 'printf: write error: No space left on device\n' });
    // the pod's other container shares the pod's quota
    const b = new ContainerFs(disks.layer('pod-1', 'b', 0).layer, () => clock.now());
    assert.equal((await sh('printf "%07000d" 0 > /f; echo $?', b, clock)).out, '1\n');
    // a restarted container starts from a fresh layer; the pod going frees everything
    assert.equal(disks.layer('pod-1', 'a', 1).fresh, true);
    disks.remove('pod-1');
    assert.equal(disks.used, 0);
  });

  test('ConfigMap mounts are read-only', async () => {
    const clock = new VirtualClock(T0);
    const config = new FsLayer(true);
    ContainerFs.fill(config, 'app.conf', 'mode=fast\n');
    const fs = new ContainerFs(new FsLayer(false), () => clock.now());
    fs.mount('/etc/config', config);
    assert.deepEqual(
      await sh('cat /etc/config/app.conf; echo x > /etc/config/new; rm /etc/config/app.conf', fs, clock),
      {
        code: 1,
        out: 'mode=fast\n',
        err: "sh: /etc/config/new: Read-only file system\nrm: cannot remove '/etc/config/app.conf': Read-only file system\n",
      },
    );
  });
});
