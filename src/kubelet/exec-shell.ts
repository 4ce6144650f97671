import type { ShellContext } from './shell/index.js';

/**
 * The shell `kubectl exec` reaches in a simulated container (and, later, what a container's command runs in):
 * shell/ holds the parser (tree-sitter-bash), the interpreter and the commands. It is loaded on the first exec,
 * not at start-up: most runs of kube-sim never exec into a container.
 */
export type { ShellContext };

/** Runs `argv` in a container with the given environment and filesystem; resolves to the exit code. */
export async function runInContainer(argv: string[], ctx: ShellContext): Promise<number> {
  const { runCommand } = await import('./shell/index.js');
  return runCommand(argv, { ...ctx, env: new Map(ctx.env) });
}
