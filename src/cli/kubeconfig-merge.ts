import type { MergeResult } from '../client/kubeconfig.js';

/** What `sim serve --name` and `sim kubeconfig --merge` say after merging: where, and how to go back. */
export function mergeMessage(merged: MergeResult, server: string): string {
  const where = `context ${merged.context} (${server}) written to ${merged.file}`;
  if (merged.switched)
    return merged.previous
      ? `${where}, now the current context (it was "${merged.previous}": kubectl config use-context ${merged.previous} goes back)`
      : `${where}, now the current context: kubectl get ns`;
  if (merged.previous && merged.previous !== merged.context)
    return `${where}; the current context stays "${merged.previous}": kubectl --context ${merged.context} get ns`;
  return `${where}, the current context: kubectl get ns`;
}
