import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { ROOT } from './helpers/server.js';
import { runSim } from './helpers/sim.js';

/**
 * `sim completion bash|zsh|fish`, each loaded into the real shell and asked to complete command lines: bash by
 * calling the completion function as bash's programmable completion does, fish with `complete -C`, zsh through an
 * interactive shell on a pseudo-terminal (zsh/zpty) where TAB runs its completion system.
 */
async function script(t: TestContext, shell: string): Promise<string | undefined> {
  if (spawnSync('sh', ['-c', `command -v ${shell}`]).status !== 0) {
    t.skip(`${shell} is not installed (apt-get install ${shell})`);
    return undefined;
  }
  const run = await runSim(['completion', shell]);
  assert.equal(run.code, 0, run.stderr);
  const dir = mkdtempSync(join(tmpdir(), 'kube-sim-completion-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, `sim.${shell}`);
  writeFileSync(file, run.stdout);
  return file;
}

test('bash: sourced, it completes commands, options, choices and scenario files', async (t) => {
  const file = await script(t, 'bash');
  if (!file) return;
  const complete = (...words: string[]): string[] => {
    const r = spawnSync(
      'bash',
      [
        '-c',
        `source "$0"; COMP_WORDS=("$@"); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _sim; printf '%s\\n' "\${COMPREPLY[@]}"`,
        file,
        ...words,
      ],
      { cwd: join(ROOT, 'fixtures'), encoding: 'utf8' },
    );
    assert.equal(r.stderr, '');
    return r.stdout.split('\n').filter(Boolean).sort();
  };
  assert.deepEqual(complete('sim', ''), [
    'clock',
    'completion',
    'kubeconfig',
    'node',
    'record',
    'replay',
    'serve',
    'snapshot',
  ]);
  assert.deepEqual(complete('sim', 'se'), ['serve']);
  assert.deepEqual(complete('sim', 'serve', '--cl'), ['--clock', '--cluster-cidr']);
  assert.deepEqual(complete('sim', 'serve', '--clock', ''), ['real', 'virtual']);
  assert.deepEqual(complete('sim', 'serve', '--log-level', 'd'), ['debug']);
  assert.deepEqual(complete('sim', 'serve', '--port', ''), []);
  assert.ok(complete('sim', 'serve', '--data', 's').includes('scenarios'));
  assert.deepEqual(complete('sim', 'clock', ''), ['advance']);
  assert.deepEqual(complete('sim', 'clock', 'advance', '--ser'), ['--server']);
  assert.deepEqual(complete('sim', 'node', ''), ['add', 'fail', 'recover']);
  assert.deepEqual(complete('sim', 'node', 'add', '--cap'), ['--capacity']);
  assert.deepEqual(complete('sim', 'kubeconfig', '--m'), ['--merge']);
  assert.deepEqual(complete('sim', 'completion', ''), ['bash', 'fish', 'zsh']);
  // A value that happens to be a command's name is a value, not that command.
  assert.deepEqual(complete('sim', 'replay', '--server', 'serve', '--prin'), ['--print-schema']);
  const files = complete('sim', 'replay', 'scenarios/con');
  assert.deepEqual(files, ['scenarios/config-watcher.yaml']);
  assert.ok(complete('sim', 'replay', 'seed/').every((f) => /\.ya?ml$/.test(f)));
});

test('fish: sourced, complete -C lists commands with descriptions, options and choices', async (t) => {
  const file = await script(t, 'fish');
  if (!file) return;
  const complete = (line: string): string[] => {
    const r = spawnSync('fish', ['-c', `source ${file}; complete -C ${JSON.stringify(line)}`], {
      cwd: join(ROOT, 'fixtures/scenarios'),
      encoding: 'utf8',
    });
    assert.equal(r.stderr, '');
    return r.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t')[0]!)
      .sort();
  };
  assert.deepEqual(complete('sim '), [
    'clock',
    'completion',
    'kubeconfig',
    'node',
    'record',
    'replay',
    'serve',
    'snapshot',
  ]);
  assert.deepEqual(complete('sim serve --cl'), ['--clock', '--cluster-cidr']);
  assert.deepEqual(complete('sim serve --clock '), ['real', 'virtual']);
  assert.deepEqual(complete('sim clock advance --ser'), ['--server']);
  assert.deepEqual(complete('sim node '), ['add', 'fail', 'recover']);
  assert.ok(complete('sim replay ').includes('config-watcher.yaml'));
});

test('zsh: sourced after compinit, TAB completes in an interactive shell', async (t) => {
  const file = await script(t, 'zsh');
  if (!file) return;
  const lines = [
    'sim se',
    'sim serve --clo',
    'sim serve --clock vi',
    'sim clock adv',
    'sim completion f',
    'sim node add --cap',
    'sim replay scenarios/config-w',
  ];
  // Keys are read in order: TAB completes, ^T prints the line between markers, ^U clears it for the next.
  const driver = `
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='> '; autoload -Uz compinit; compinit -u -D; source ${file}; unsetopt beep"
zpty -w z 'show() { print -r -- "<<$BUFFER>>"; }; zle -N show; bindkey "^T" show; print READY$((6 * 7))'
out=
# zle drops what was typed before its prompt: wait for the set-up to have run.
for ((i = 0; i < 300; i++)); do
  while zpty -rt z chunk 2>/dev/null; do out+=$chunk; done
  [[ $out == *READY42* ]] && break
  sleep 0.1
done
sleep 0.2
for line in ${lines.map((l) => JSON.stringify(l)).join(' ')}; do zpty -w -n z "$line"$'\\t\\x14\\x15'; done
for ((i = 0; i < 200; i++)); do
  while zpty -rt z chunk 2>/dev/null; do out+=$chunk; done
  (( \${#\${(f)"$(print -r -- "$out" | grep -ao '<<sim[^>]*>>')"}} >= ${lines.length} )) && break
  sleep 0.1
done
print -r -- "$out" | grep -ao '<<sim[^>]*>>'
zpty -d z
`;
  const r = spawnSync('zsh', ['-f', '-c', driver], { cwd: join(ROOT, 'fixtures'), encoding: 'utf8', timeout: 60_000 });
  assert.deepEqual(
    r.stdout.split('\n').filter(Boolean),
    [
      '<<sim serve >>',
      '<<sim serve --clock >>',
      '<<sim serve --clock virtual >>',
      '<<sim clock advance >>',
      '<<sim completion fish >>',
      '<<sim node add --capacity >>',
      '<<sim replay scenarios/config-watcher.yaml >>',
    ],
    r.stderr,
  );
});
