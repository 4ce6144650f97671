import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { ROOT } from './server.js';

/**
 * Starts the seed article's shell controller (fixtures/seed/config-watcher-controller.sh) against `kubeApi`,
 * watching the default namespace; it is killed with its curl and jq children when the test ends.
 */
export interface SeedScript {
  output(): string;
  /**
   * Waits up to `seconds` for the script to delete a pod. Its watch may open after the change a test made, so
   * once a second `relabel` is called with a new label (a label change is a MODIFIED too) to make it act.
   */
  nudgeUntilItActs(relabel: (label: string) => Promise<unknown>, seconds: number): Promise<void>;
}

export function startSeedScript(t: Pick<TestContext, 'after'>, kubeApi: string): SeedScript {
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
  return {
    output: () => output,
    nudgeUntilItActs: async (relabel, seconds) => {
      const deadline = Date.now() + seconds * 1000;
      for (let i = 0; Date.now() < deadline && !output.includes('Deleting pod'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 250));
        if (i % 4 === 3) await relabel(`nudge=${i}`);
      }
    },
  };
}
