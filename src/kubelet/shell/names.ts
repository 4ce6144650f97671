/** The shells a container may name (all of them the exec shell): light, so that callers need not load the shell. */
export const SHELL_NAMES: ReadonlySet<string> = new Set(['sh', 'bash', 'ash', 'dash', 'zsh', 'ksh', 'mksh']);
