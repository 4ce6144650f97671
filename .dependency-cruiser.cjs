/**
 * The layer map of src/, checked by `npm run lint:layers` (part of `npm test`). Each folder of src/ may import
 * itself and the folders listed for it, nothing else; the list is the map. Imports point down, never up, so no
 * two folders can import each other; the last rule says so outright, for every folder and sub-folder.
 *
 *   cli         the commands; the top
 *   cluster     the composition root: builds the store, registry, server, runtime and components, wires them
 *   scenario    scripted runs against any API server through the client (the embedded target: cluster)
 *   server      HTTP only: REST, watch, discovery, OpenAPI, derived from the registry; no component code
 *   controllers, scheduler, kubelet   components: they see the cluster as an out-of-process one would
 *   runtime     informers' users: work queue, reconcile runner, expectations, controller manager
 *   client      the client interface (HTTP implementation, informers)
 *   registry    the table of kinds and a strategy per kind, over storage
 *   auth        authentication and authorization; reads objects through narrow ports, never the registry
 *   storage     the store, watch history, persistence, JSON encoding and interning
 *   metrics     the Prometheus series the server and components count in (prom-client); a leaf
 *   api, clock  leaves: object helpers, errors, selectors, the version; time and the seeded RNG
 */
const layers = {
  cli: ['cluster', 'server', 'scenario', 'client', 'auth', 'kubelet', 'api', 'clock'],
  cluster: [
    'server',
    'controllers',
    'scheduler',
    'kubelet',
    'runtime',
    'client',
    'registry',
    'auth',
    'storage',
    'metrics',
    'api',
    'clock',
  ],
  scenario: ['cluster', 'client', 'api', 'clock'],
  server: ['registry', 'auth', 'storage', 'metrics', 'api', 'clock'],
  controllers: ['runtime', 'client', 'api', 'clock'],
  scheduler: ['runtime', 'client', 'metrics', 'api', 'clock'],
  kubelet: ['runtime', 'client', 'api', 'clock'],
  runtime: ['client', 'metrics', 'api', 'clock'],
  client: ['api', 'clock'],
  registry: ['storage', 'auth', 'api', 'clock'],
  auth: ['api', 'clock'],
  storage: ['api', 'clock'],
  metrics: [],
  api: [],
  clock: [],
};

/**
 * Imports the map does not allow yet, each with the work that removes it: the layer's rule lets it import that
 * one file until then.
 */
const pending = [];
const pendingFor = (layer) => pending.filter((p) => p.from === layer).map((p) => `|${p.to.replaceAll('.', '\\.')}$`);

const folders = Object.keys(layers);

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    ...Object.entries(layers).map(([layer, below]) => ({
      name: `layer-${layer}`,
      severity: 'error',
      comment: below.length
        ? `src/${layer}/ may import only ${below.map((b) => `src/${b}/`).join(', ')}`
        : `src/${layer}/ is a leaf: it imports nothing else of src/`,
      from: { path: `^src/${layer}/` },
      to: { path: '^src/', pathNot: `^(src/(${[layer, ...below].join('|')})/${pendingFor(layer).join('')})` },
    })),
    {
      name: 'scenario-cluster-only-embedded',
      severity: 'error',
      comment: 'only the embedded target (scenario/target.ts) starts a cluster; the rest of a scenario uses the client',
      from: { path: '^src/scenario/', pathNot: '^src/scenario/target\\.ts$' },
      to: { path: '^src/cluster/' },
    },
    {
      name: 'unknown-folder',
      severity: 'error',
      comment: 'every folder of src/ has its place in the layer map (.dependency-cruiser.cjs)',
      from: { path: '^src/', pathNot: `^src/(${folders.join('|')})/` },
      to: {},
    },
    {
      name: 'no-folder-cycle',
      severity: 'error',
      comment: 'two folders import each other, directly or through others',
      scope: 'folder',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
