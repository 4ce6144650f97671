import type { KubeObject } from '../api/types.js';
import type { PolicyRule } from './authorizer.js';

/**
 * The default ClusterRoles and ClusterRoleBindings kube-apiserver bootstraps (plugin/pkg/auth/authorizer/rbac/
 * bootstrappolicy) that matter to a simulated cluster: cluster-admin for system:masters, discovery, the public
 * info endpoints, self reviews, delegated authentication (system:auth-delegator, bound to no one by default), and
 * the user-facing admin/edit/view roles, aggregated from system:aggregate-to-*.
 */
const RW = ['create', 'delete', 'deletecollection', 'patch', 'update'];
const READ = ['get', 'list', 'watch'];
const rule = (apiGroups: string[], resources: string[], verbs: string[]): PolicyRule => ({
  apiGroups,
  resources,
  verbs,
});

const BOOTSTRAP_LABELS = { 'kubernetes.io/bootstrapping': 'rbac-defaults' };
const AUTOUPDATE = { 'rbac.authorization.kubernetes.io/autoupdate': 'true' };

function clusterRole(
  name: string,
  rules: PolicyRule[] | null,
  labels: Record<string, string> = {},
  aggregateFrom?: string,
): KubeObject {
  const role: KubeObject = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name, labels: { ...BOOTSTRAP_LABELS, ...labels }, annotations: { ...AUTOUPDATE } },
  };
  if (aggregateFrom) role.aggregationRule = { clusterRoleSelectors: [{ matchLabels: { [aggregateFrom]: 'true' } }] };
  role.rules = rules ?? [];
  return role;
}

function clusterRoleBinding(name: string, role: string, groups: string[]): KubeObject {
  return {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name, labels: { ...BOOTSTRAP_LABELS }, annotations: { ...AUTOUPDATE } },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role },
    subjects: groups.map((g) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name: g })),
  };
}

const TO_ADMIN = 'rbac.authorization.k8s.io/aggregate-to-admin';
const TO_EDIT = 'rbac.authorization.k8s.io/aggregate-to-edit';
const TO_VIEW = 'rbac.authorization.k8s.io/aggregate-to-view';

export const bootstrapClusterRoles: readonly KubeObject[] = [
  clusterRole('cluster-admin', [rule(['*'], ['*'], ['*']), { nonResourceURLs: ['*'], verbs: ['*'] }]),
  clusterRole('admin', null, {}, TO_ADMIN),
  clusterRole('edit', null, { [TO_ADMIN]: 'true' }, TO_EDIT),
  clusterRole('view', null, { [TO_EDIT]: 'true' }, TO_VIEW),
  clusterRole(
    'system:aggregate-to-admin',
    [
      rule(['authorization.k8s.io'], ['localsubjectaccessreviews'], ['create']),
      rule(['rbac.authorization.k8s.io'], ['rolebindings', 'roles'], [...RW, ...READ].sort()),
    ],
    { [TO_ADMIN]: 'true' },
  ),
  clusterRole(
    'system:aggregate-to-edit',
    [
      rule([''], ['pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy', 'secrets', 'services/proxy'], READ),
      rule([''], ['serviceaccounts'], ['impersonate']),
      rule([''], ['pods', 'pods/attach', 'pods/exec', 'pods/portforward', 'pods/proxy'], RW),
      rule([''], ['pods/eviction'], ['create']),
      rule(
        [''],
        [
          'configmaps',
          'events',
          'persistentvolumeclaims',
          'replicationcontrollers',
          'replicationcontrollers/scale',
          'secrets',
          'serviceaccounts',
          'services',
          'services/proxy',
        ],
        RW,
      ),
      rule([''], ['serviceaccounts/token'], ['create']),
      rule(
        ['apps'],
        [
          'daemonsets',
          'deployments',
          'deployments/rollback',
          'deployments/scale',
          'replicasets',
          'replicasets/scale',
          'statefulsets',
          'statefulsets/scale',
        ],
        RW,
      ),
      rule(['autoscaling'], ['horizontalpodautoscalers'], RW),
      rule(['batch'], ['cronjobs', 'jobs'], RW),
      rule(['policy'], ['poddisruptionbudgets'], RW),
      rule(['networking.k8s.io'], ['ingresses', 'networkpolicies'], RW),
      rule(['coordination.k8s.io'], ['leases'], [...RW, ...READ].sort()),
    ],
    { [TO_EDIT]: 'true' },
  ),
  clusterRole(
    'system:aggregate-to-view',
    [
      rule(
        [''],
        [
          'configmaps',
          'endpoints',
          'persistentvolumeclaims',
          'persistentvolumeclaims/status',
          'pods',
          'replicationcontrollers',
          'replicationcontrollers/scale',
          'serviceaccounts',
          'services',
          'services/status',
        ],
        READ,
      ),
      rule(
        [''],
        [
          'bindings',
          'events',
          'limitranges',
          'namespaces/status',
          'pods/log',
          'pods/status',
          'replicationcontrollers/status',
          'resourcequotas',
          'resourcequotas/status',
        ],
        READ,
      ),
      rule([''], ['namespaces'], READ),
      rule(['discovery.k8s.io'], ['endpointslices'], READ),
      rule(
        ['apps'],
        [
          'controllerrevisions',
          'daemonsets',
          'daemonsets/status',
          'deployments',
          'deployments/scale',
          'deployments/status',
          'replicasets',
          'replicasets/scale',
          'replicasets/status',
          'statefulsets',
          'statefulsets/scale',
          'statefulsets/status',
        ],
        READ,
      ),
      rule(['autoscaling'], ['horizontalpodautoscalers', 'horizontalpodautoscalers/status'], READ),
      rule(['batch'], ['cronjobs', 'cronjobs/status', 'jobs', 'jobs/status'], READ),
      rule(['policy'], ['poddisruptionbudgets', 'poddisruptionbudgets/status'], READ),
      rule(['networking.k8s.io'], ['ingresses', 'ingresses/status', 'networkpolicies'], READ),
    ],
    { [TO_VIEW]: 'true' },
  ),
  // For servers that delegate authentication and authorization to this one (kube-rbac-proxy, aggregated APIs).
  clusterRole('system:auth-delegator', [
    rule(['authentication.k8s.io'], ['tokenreviews'], ['create']),
    rule(['authorization.k8s.io'], ['subjectaccessreviews'], ['create']),
  ]),
  clusterRole('system:basic-user', [
    rule(['authorization.k8s.io'], ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'], ['create']),
    rule(['authentication.k8s.io'], ['selfsubjectreviews'], ['create']),
  ]),
  // What kubelets ask for their certificates with, and the virtual subresources csrapproving checks before it
  // approves a kubelet's client certificate.
  clusterRole('system:node-bootstrapper', [
    rule(['certificates.k8s.io'], ['certificatesigningrequests'], ['create', 'get', 'list', 'watch']),
  ]),
  clusterRole('system:certificates.k8s.io:certificatesigningrequests:nodeclient', [
    rule(['certificates.k8s.io'], ['certificatesigningrequests/nodeclient'], ['create']),
  ]),
  clusterRole('system:certificates.k8s.io:certificatesigningrequests:selfnodeclient', [
    rule(['certificates.k8s.io'], ['certificatesigningrequests/selfnodeclient'], ['create']),
  ]),
  clusterRole('system:discovery', [
    {
      nonResourceURLs: [
        '/api',
        '/api/*',
        '/apis',
        '/apis/*',
        '/healthz',
        '/livez',
        '/openapi',
        '/openapi/*',
        '/readyz',
        '/version',
        '/version/',
      ],
      verbs: ['get'],
    },
  ]),
  // Read access to the monitoring endpoints: /metrics, and the health checks one by one (/livez/etcd …).
  clusterRole('system:monitoring', [
    {
      nonResourceURLs: [
        '/healthz',
        '/healthz/*',
        '/livez',
        '/livez/*',
        '/metrics',
        '/metrics/slis',
        '/readyz',
        '/readyz/*',
      ],
      verbs: ['get'],
    },
  ]),
  clusterRole('system:public-info-viewer', [
    { nonResourceURLs: ['/healthz', '/livez', '/readyz', '/version', '/version/'], verbs: ['get'] },
  ]),
];

/** The bootstrap-token group kubeadm (and so kind) makes kubelets join with. */
const KUBEADM_BOOTSTRAPPERS = 'system:bootstrappers:kubeadm:default-node-token';

export const bootstrapClusterRoleBindings: readonly KubeObject[] = [
  clusterRoleBinding('cluster-admin', 'cluster-admin', ['system:masters']),
  // kubeadm's (a kind cluster has them): joining kubelets may ask for a client certificate and have it approved,
  // and nodes have their renewals approved.
  clusterRoleBinding('kubeadm:kubelet-bootstrap', 'system:node-bootstrapper', [KUBEADM_BOOTSTRAPPERS]),
  clusterRoleBinding(
    'kubeadm:node-autoapprove-bootstrap',
    'system:certificates.k8s.io:certificatesigningrequests:nodeclient',
    [KUBEADM_BOOTSTRAPPERS],
  ),
  clusterRoleBinding(
    'kubeadm:node-autoapprove-certificate-rotation',
    'system:certificates.k8s.io:certificatesigningrequests:selfnodeclient',
    ['system:nodes'],
  ),
  clusterRoleBinding('system:basic-user', 'system:basic-user', ['system:authenticated']),
  clusterRoleBinding('system:discovery', 'system:discovery', ['system:authenticated']),
  clusterRoleBinding('system:monitoring', 'system:monitoring', ['system:monitoring']),
  clusterRoleBinding('system:public-info-viewer', 'system:public-info-viewer', [
    'system:authenticated',
    'system:unauthenticated',
  ]),
];
