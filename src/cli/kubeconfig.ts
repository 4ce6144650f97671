/**
 * A kubeconfig with one cluster, user and context named kube-sim. For a plain-http server it says
 * insecure-skip-tls-verify: @kubernetes/client-node (1.0 on) refuses http:// clusters without it, and kubectl
 * ignores it when there is no TLS.
 */
export function kubeconfigYaml(server: string, token?: string, caCertPem?: string): string {
  // An https server: trust its CA (sim serve --tls makes one); plain http: skip verification as above.
  const skipVerify = caCertPem !== undefined
    ? `\n    certificate-authority-data: ${Buffer.from(caCertPem).toString('base64')}`
    : server.startsWith('http:') ? '\n    insecure-skip-tls-verify: true' : '';
  // A bearer token (sim serve --auth); kubectl sends it over TLS only.
  const user = token === undefined ? ' {}' : `\n    token: ${JSON.stringify(token)}`;
  return `apiVersion: v1
kind: Config
clusters:
- name: kube-sim
  cluster:
    server: ${server}${skipVerify}
users:
- name: kube-sim
  user:${user}
contexts:
- name: kube-sim
  context:
    cluster: kube-sim
    user: kube-sim
    namespace: default
current-context: kube-sim
`;
}
