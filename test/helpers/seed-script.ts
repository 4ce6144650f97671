import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { ROOT } from './server.js';

/**
 * Starts the seed article's shell controller (fixtures/seed/config-watcher-controller.sh) against `kubeApi`,
 * watching the default namespace; it is killed with its curl and jq children when the test ends.
 */
export function startSeedScript(t: Pick<TestContext, 'after'>, kubeApi: string): { output(): string } {
  // Its own process group, so its curl and jq children go with it.
  const script = spawn('bash', [join(ROOT, 'fixtures/seed/config-watcher-controller.sh')], {
    env: { ...process.env, WATCH_NAMESPACE: 'default', KUBE_API: kubeApi },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let output = '';
  script.stdout.setEncoding('utf8').on('data', (c: string) => (output += c));
  t.after(() => {
    try {
      process.kill(-script.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  });
  return { output: () => output };
}
