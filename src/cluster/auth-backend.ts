import { raceTolerant } from '../api/errors.js';
import { settle } from '../api/maybe-async.js';
import type { AuthBackend } from '../auth/api-auth.js';
import { serviceAccountTokens } from '../registry/serviceaccount-token.js';
import { resourceKey } from '../registry/types.js';
import type { Cluster } from './cluster.js';

/** ApiAuth's view of a cluster: its store for RBAC's objects, the cluster's token issuer, and the bootstrap writes. */
export function authBackend(cluster: Cluster): AuthBackend {
  return {
    policy: cluster.store,
    tokens: serviceAccountTokens(cluster.api),
    ensure: (resource, obj) => {
      const info = cluster.kind('rbac.authorization.k8s.io', 'v1', resource);
      if (!cluster.store.get(resourceKey(info), undefined, obj.metadata.name!))
        settle(
          raceTolerant(() => cluster.api.create(info, undefined, structuredClone(obj), { internal: true })),
          (err) => cluster.log('error', `could not create ${resource} ${obj.metadata.name}: ${String(err)}`),
        );
    },
  };
}
