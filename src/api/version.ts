/**
 * The Kubernetes version this server speaks: /version, the OpenAPI documents and the simulated kubelets' node
 * info all report it, and the `kubectl` dispatcher picks its client by it.
 */
export const KUBERNETES_VERSION = { major: '1', minor: '32', gitVersion: 'v1.32.0' };
