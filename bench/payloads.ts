/**
 * Request bodies for the create benchmark (~1.5 KB each, like a small real manifest) and the objects loaded
 * for the list benchmark. Everything is deterministic so runs compare.
 */

const TARGET_BYTES = 1500;

/** Pads `fill` (a string field of `make`'s object) so that the JSON text is exactly `bytes` long. */
function padTo(bytes: number, make: (fill: string) => unknown): string {
  const base = JSON.stringify(make(''));
  const missing = bytes - Buffer.byteLength(base);
  if (missing < 0) throw new Error(`payload is already ${Buffer.byteLength(base)} bytes, more than ${bytes}`);
  const filler = 'lorem ipsum dolor sit amet consectetur adipiscing elit '
    .repeat(Math.ceil(missing / 55) + 1)
    .slice(0, missing);
  return JSON.stringify(make(filler));
}

export function configMapBody(bytes = TARGET_BYTES): string {
  return padTo(bytes, (fill) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      generateName: 'bench-cm-',
      labels: { 'app.kubernetes.io/name': 'bench', 'app.kubernetes.io/component': 'backend', team: 'platform' },
      annotations: { 'bench.kube-sim.io/purpose': 'create throughput' },
    },
    data: {
      'log-level': 'info',
      'max-connections': '512',
      'feature-flags': 'alpha=false,beta=true,gamma=true',
      'app.properties':
        'server.port=8080\nserver.shutdown=graceful\nspring.datasource.url=jdbc:postgresql://db:5432/app\n',
      'notes.txt': fill,
    },
  }));
}

export function podBody(bytes = TARGET_BYTES): string {
  return padTo(bytes, (fill) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'bench-pod-',
      labels: {
        'app.kubernetes.io/name': 'web',
        'app.kubernetes.io/instance': 'web-1',
        'pod-template-hash': '7d9c8b6f5',
      },
      annotations: { 'bench.kube-sim.io/notes': fill },
    },
    spec: {
      containers: [
        {
          name: 'web',
          image: 'registry.example.com/team/web:1.27.3',
          ports: [{ name: 'http', containerPort: 8080, protocol: 'TCP' }],
          env: [
            { name: 'LOG_LEVEL', value: 'info' },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '500m', memory: '256Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 8080 }, periodSeconds: 5 },
          volumeMounts: [{ name: 'config', mountPath: '/etc/web', readOnly: true }],
        },
      ],
      volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
    },
  }));
}

export const LIST_NAMESPACES = 100;
/** Distinct values of the `shard` label; with 100,000 objects each value selects 100 of them. */
export const LIST_SHARDS = 1000;

export function listNamespace(n: number): string {
  return `bench-${String(n).padStart(3, '0')}`;
}

/**
 * The i-th object loaded for the list benchmark, as JSON text (the loader parses each one, as the HTTP path
 * would, so no strings are shared between objects): namespaces are filled one after another
 * (total/LIST_NAMESPACES each), and `shard` cycles so that a shard's objects are spread over every namespace.
 */
export function listObject(i: number, total: number): { namespace: string; json: string } {
  const perNamespace = Math.ceil(total / LIST_NAMESPACES);
  const namespace = listNamespace(Math.floor(i / perNamespace));
  const json = JSON.stringify({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name: `cm-${String(i).padStart(6, '0')}`,
      labels: { app: 'bench', shard: `s${i % LIST_SHARDS}`, tier: i % 2 === 0 ? 'frontend' : 'backend' },
    },
    data: {
      'log-level': 'info',
      'max-connections': '512',
      'app.properties':
        'server.port=8080\nserver.shutdown=graceful\nspring.datasource.url=jdbc:postgresql://db:5432/app\n',
      'notes.txt': LIST_NOTES,
    },
  });
  return { namespace, json };
}

const LIST_NOTES = 'lorem ipsum dolor sit amet consectetur adipiscing elit '.repeat(12);
