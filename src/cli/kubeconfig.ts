/** A kubeconfig with one cluster, user and context named kube-sim. */
export function kubeconfigYaml(server: string): string {
  return `apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: ${server}
users:
- name: kube-sim
  user: {}
contexts:
- name: kube-sim
  context:
    cluster: kube-sim
    user: kube-sim
    namespace: default
current-context: kube-sim
`;
}
