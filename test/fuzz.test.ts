import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { Api, cmPath, configMap, type StatusBody } from './helpers/http.js';
import { serverFor } from './helpers/server.js';

/**
 * Property-based fuzzing of a running server: thousands of random requests (methods, paths from real and random
 * segments, query parameters, content types, bodies) must never get a 5xx, every error must be a v1 Status whose
 * code is the HTTP status, the server must stay up, and the data written before the fuzzing must come out
 * byte-identical. The fuzz requests name only the namespaces FUZZ_NAMESPACES and objects whose names start with
 * "fuzz", and never a collection that spans namespaces with DELETE, so the kept data is out of their reach by
 * construction; everything else about them is random.
 *
 * KUBE_SIM_TEST_SEED replays a run (failures print the seed and the shrunk request); KUBE_SIM_FUZZ_RUNS changes
 * the number of requests.
 */

const SEED = process.env.KUBE_SIM_TEST_SEED ? Number(process.env.KUBE_SIM_TEST_SEED) : Date.now() % 2 ** 31;
const RUNS = process.env.KUBE_SIM_FUZZ_RUNS ? Number(process.env.KUBE_SIM_FUZZ_RUNS) : 3000;
/** Requests sent at once in each property run: concurrency finds what sequential requests cannot. */
const BATCH = 4;

const FUZZ_NAMESPACES = ['fuzz', 'fuzz-b', 'fuzz-missing'];
const KEPT_NAMESPACE = 'keep';

/** Every built-in resource under its group version, and a few that do not exist. */
const RESOURCES: Array<[prefix: string, resource: string, namespaced: boolean]> = [
  ['/api/v1', 'configmaps', true],
  ['/api/v1', 'secrets', true],
  ['/api/v1', 'pods', true],
  ['/api/v1', 'services', true],
  ['/api/v1', 'events', true],
  ['/api/v1', 'serviceaccounts', true],
  ['/api/v1', 'persistentvolumeclaims', true],
  ['/api/v1', 'resourcequotas', true],
  ['/api/v1', 'limitranges', true],
  ['/api/v1', 'endpoints', true],
  ['/api/v1', 'nodes', false],
  ['/api/v1', 'persistentvolumes', false],
  ['/api/v1', 'namespaces', false],
  ['/apis/apps/v1', 'deployments', true],
  ['/apis/apps/v1', 'replicasets', true],
  ['/apis/apps/v1', 'statefulsets', true],
  ['/apis/apps/v1', 'daemonsets', true],
  ['/apis/batch/v1', 'jobs', true],
  ['/apis/batch/v1', 'cronjobs', true],
  ['/apis/coordination.k8s.io/v1', 'leases', true],
  ['/apis/rbac.authorization.k8s.io/v1', 'roles', true],
  ['/apis/rbac.authorization.k8s.io/v1', 'clusterroles', false],
  ['/apis/events.k8s.io/v1', 'events', true],
  ['/apis/apiextensions.k8s.io/v1', 'customresourcedefinitions', false],
  ['/apis/authorization.k8s.io/v1', 'selfsubjectaccessreviews', false],
  ['/apis/nonsense.example.com/v1', 'widgets', true],
  ['/api/v2', 'configmaps', true],
];
const SUBRESOURCES = [
  'status',
  'scale',
  'log',
  'exec',
  'binding',
  'eviction',
  'finalize',
  'token',
  'attach',
  'proxy',
  '%2e%2e',
  'x',
];
const KINDS = [
  'ConfigMap',
  'Secret',
  'Pod',
  'Service',
  'Deployment',
  'Namespace',
  'Node',
  'ClusterRole',
  'Job',
  'Lease',
  'Eviction',
  'Binding',
  'Scale',
  'DeleteOptions',
  'Status',
  'Widget',
];
const CONTENT_TYPES = [
  'application/json',
  'application/yaml',
  'application/merge-patch+json',
  'application/strategic-merge-patch+json',
  'application/json-patch+json',
  'application/apply-patch+yaml',
  'application/vnd.kubernetes.protobuf',
  'text/plain',
  'application/json; charset=latin1',
  'multipart/form-data; boundary=x',
  '*/*',
  ';;;',
];
const ACCEPTS = [
  'application/json',
  'application/json;as=Table;v=v1;g=meta.k8s.io',
  'application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io',
  'application/json;as=Table;v=v9;g=meta.k8s.io',
  'application/yaml',
  'application/vnd.kubernetes.protobuf',
  'application/vnd.kubernetes.protobuf;stream=watch',
  'text/html',
  '*/*',
  'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
  ',,,;q=x',
];

const garbage = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom(
    '',
    '-1',
    '0',
    '1',
    '99999999999999999999',
    '1e3',
    '0x10',
    'NaN',
    'true',
    '%',
    '..',
    '\u0000',
    '\uffff',
    'a=b,c!=d',
    'x in (a,b)',
    '!x',
    'metadata.name=fuzz-a',
    'spec.nodeName=',
    'status.phase!=Running',
  ),
);
const fuzzName = fc.oneof(
  fc.constantFrom('fuzz-a', 'fuzz-b', 'fuzz-c'),
  fc.string({ maxLength: 10 }).map((s) => `fuzz${s}`),
  fc.constantFrom('fuzz%2e', 'fuzz%2Fx', 'FUZZ', 'fuzz.x.y'),
);
const namespace = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...FUZZ_NAMESPACES) },
  { weight: 1, arbitrary: fc.string({ maxLength: 8 }).map((s) => `fuzz-${encodeURIComponent(s)}`) },
);

/** A path: mostly structured from real segments, sometimes random segments after a real prefix. */
const pathArb = fc
  .oneof(
    {
      weight: 8,
      arbitrary: fc.record({
        resource: fc.constantFrom(...RESOURCES),
        ns: namespace,
        name: fc.option(fuzzName, { freq: 2 }),
        sub: fc.option(fc.constantFrom(...SUBRESOURCES), { freq: 4 }),
        watchPrefix: fc.boolean(),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        prefix: fc.constantFrom(
          '/api',
          '/apis',
          '/api/v1',
          '/apis/apps',
          '/openapi/v3',
          '/sim/v1',
          '/version',
          '/healthz',
          '/',
        ),
        segments: fc.array(
          fc.oneof(
            fc.string({ maxLength: 10 }),
            fc.constantFrom('namespaces', 'fuzz', 'configmaps', 'watch', 'status', '%', '%zz', '..', ''),
          ),
          { maxLength: 5 },
        ),
      }),
    },
  )
  .map((p) => {
    if ('segments' in p)
      return {
        path: `${p.prefix.replace(/\/$/, '')}/${p.segments.map((s) => (s.includes('%') ? s : encodeURIComponent(s))).join('/')}`,
        namespaced: true,
        named: true,
        random: true,
      };
    const [prefix, resource, namespaced] = p.resource;
    const scope = namespaced ? `/namespaces/${p.ns}` : '';
    const named = p.name !== null;
    let path = `${prefix}${p.watchPrefix ? '/watch' : ''}${scope}/${resource}`;
    if (named) path += `/${p.name}${p.sub !== null ? `/${p.sub}` : ''}`;
    return { path, namespaced, named, random: false };
  });

const queryArb = fc.dictionary(
  fc.constantFrom(
    'labelSelector',
    'fieldSelector',
    'limit',
    'continue',
    'resourceVersion',
    'resourceVersionMatch',
    'watch',
    'timeoutSeconds',
    'dryRun',
    'fieldManager',
    'force',
    'fieldValidation',
    'allowWatchBookmarks',
    'sendInitialEvents',
    'propagationPolicy',
    'gracePeriodSeconds',
    'pretty',
    'container',
    'follow',
    'tailLines',
    'command',
    'stdout',
    'includeObject',
  ),
  fc.oneof(
    garbage,
    fc.constantFrom(
      'All',
      'true',
      'Strict',
      'NotOlderThan',
      'Exact',
      'Background',
      'Orphan',
      'Foreground',
      '1',
      '2',
      'Object',
      'None',
    ),
  ),
  { maxKeys: 4 },
);

/** A plausible object of a random kind, then mutated: fields dropped, retyped, or filled with random JSON. */
const objectArb = fc
  .record({
    kind: fc.constantFrom(...KINDS),
    apiVersion: fc.constantFrom(
      'v1',
      'apps/v1',
      'batch/v1',
      'rbac.authorization.k8s.io/v1',
      'policy/v1',
      'nope/v0',
      '',
    ),
    name: fuzzName,
    ns: fc.option(namespace),
    labels: fc.option(
      fc.dictionary(fc.string({ maxLength: 70 }), fc.oneof(fc.string({ maxLength: 70 }), fc.jsonValue()), {
        maxKeys: 3,
      }),
    ),
    rv: fc.option(fc.oneof(garbage, fc.nat().map(String))),
    extra: fc.dictionary(
      fc.constantFrom(
        'spec',
        'data',
        'status',
        'stringData',
        'rules',
        'subsets',
        'target',
        'metadata',
        'items',
        'type',
        'binaryData',
        'immutable',
      ),
      fc.jsonValue({ maxDepth: 3 }),
      { maxKeys: 3 },
    ),
  })
  .map((o) => {
    const metadata: Record<string, unknown> = { name: o.name };
    if (o.ns !== null) metadata.namespace = o.ns;
    if (o.labels !== null) metadata.labels = o.labels;
    if (o.rv !== null) metadata.resourceVersion = o.rv;
    return { apiVersion: o.apiVersion, kind: o.kind, metadata, ...o.extra };
  });

const jsonPatchArb = fc.array(
  fc.record({
    op: fc.constantFrom('add', 'remove', 'replace', 'move', 'copy', 'test', 'bogus'),
    path: fc.constantFrom(
      '/metadata/labels/a',
      '/data',
      '/data/k',
      '/spec',
      '/metadata/name',
      '/metadata/namespace',
      '',
      '/',
      '/metadata/resourceVersion',
      '/x/0/-',
      '/metadata/labels/~1~0',
    ),
    value: fc.jsonValue({ maxDepth: 2 }),
    from: fc.constantFrom('/data', '/metadata', '/nope'),
  }),
  { maxLength: 3 },
);

const bodyArb = fc.oneof(
  fc.constant(undefined),
  objectArb.map((o) => JSON.stringify(o)),
  objectArb.map((o) => JSON.stringify(o)),
  jsonPatchArb.map((p) => JSON.stringify(p)),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
  fc.string({ maxLength: 60 }),
  fc.uint8Array({ maxLength: 60 }).map((b) => Buffer.from(b)),
  fc
    .tuple(fc.constantFrom(...KINDS), fuzzName)
    .map(
      ([kind, name]) =>
        `apiVersion: v1\nkind: ${kind}\nmetadata:\n  name: "${name.replaceAll('"', '')}"\ndata: {a: *x}\n`,
    ),
);

/** Writes that mostly succeed, so that updates, patches and deletes meet objects that exist: ConfigMaps in a fuzz namespace. */
const configMapWriteArb = fc
  .record({
    method: fc.constantFrom('POST', 'PUT', 'PATCH', 'DELETE'),
    ns: fc.constantFrom('fuzz', 'fuzz-b'),
    name: fc.constantFrom('fuzz-a', 'fuzz-b', 'fuzz-c'),
    data: fc.dictionary(
      fc.stringMatching(/^[-._a-zA-Z0-9]{1,8}$/),
      fc.oneof(fc.string({ maxLength: 20 }), fc.jsonValue({ maxDepth: 1 })),
      { maxKeys: 3 },
    ),
    labels: fc.dictionary(
      fc.stringMatching(/^[a-z0-9]([-a-z0-9.]{0,6}[a-z0-9])?$/),
      fc.oneof(fc.stringMatching(/^[a-z0-9]{0,8}$/), fc.string({ maxLength: 8 })),
      { maxKeys: 2 },
    ),
    rv: fc.option(fc.oneof(fc.nat({ max: 3000 }).map(String), garbage), { freq: 2 }),
    patchType: fc.constantFrom(
      'application/merge-patch+json',
      'application/strategic-merge-patch+json',
      'application/apply-patch+yaml',
      'application/json-patch+json',
    ),
    query: queryArb,
  })
  .map((w): FuzzRequest => {
    const metadata: Record<string, unknown> = { name: w.name, labels: w.labels };
    if (w.rv !== null) metadata.resourceVersion = w.rv;
    const object = { apiVersion: 'v1', kind: 'ConfigMap', metadata, data: w.data };
    const collection = `/api/v1/namespaces/${w.ns}/configmaps`;
    const path = w.method === 'POST' ? collection : `${collection}/${w.name}`;
    const target = { path, namespaced: true, named: w.method !== 'POST', random: false };
    if (w.method === 'PATCH') {
      const body =
        w.patchType === 'application/json-patch+json'
          ? JSON.stringify([{ op: 'replace', path: '/data', value: w.data }])
          : JSON.stringify(object);
      return {
        method: w.method,
        target,
        query: { fieldManager: 'fuzz', ...w.query },
        contentType: w.patchType,
        accept: null,
        body,
      };
    }
    return {
      method: w.method,
      target,
      query: w.query,
      contentType: 'application/json',
      accept: null,
      body: JSON.stringify(object),
    };
  });

const randomRequestArb = fc.record({
  method: fc.constantFrom('GET', 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS'),
  target: pathArb,
  query: queryArb,
  contentType: fc.oneof(
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 3, arbitrary: fc.constantFrom('application/json', 'application/merge-patch+json') },
    { weight: 3, arbitrary: fc.constantFrom(...CONTENT_TYPES) },
  ),
  accept: fc.oneof({ weight: 5, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom(...ACCEPTS) }),
  body: bodyArb,
});
type FuzzRequest = (typeof randomRequestArb extends fc.Arbitrary<infer T> ? T : never) & {
  /** Why the request is invalid, when it is built to be: the server must refuse it with a 4xx. */
  invalid?: string;
};

/** Objects the fuzzing must not change: DELETEs built invalid are sent to them, and must delete nothing. */
const KEPT_TARGETS = [
  `/api/v1/namespaces/${KEPT_NAMESPACE}/configmaps/cm-0`,
  `/api/v1/namespaces/${KEPT_NAMESPACE}/configmaps/cm-3`,
  `/api/v1/namespaces/${KEPT_NAMESPACE}/secrets/secret`,
  `/api/v1/namespaces/${KEPT_NAMESPACE}/pods/pod`,
  `/apis/apps/v1/namespaces/${KEPT_NAMESPACE}/deployments/deploy`,
  `/api/v1/namespaces/${KEPT_NAMESPACE}/configmaps`,
  '/apis/rbac.authorization.k8s.io/v1/clusterroles/kept-role',
  '/api/v1/persistentvolumes/kept-pv',
  `/api/v1/namespaces/${KEPT_NAMESPACE}`,
];

const notAnInt = garbage.filter((v) => v !== '' && !/^[+-]?\d+$/.test(v));
const notAUint = garbage.filter((v) => v !== '' && !/^\d+$/.test(v));
const notInteger = fc.oneof(
  fc.string({ maxLength: 5 }),
  fc.boolean(),
  fc.constantFrom(1.5, -0.25, [], {}, [1], { a: 1 }),
);
const notString = fc.oneof(fc.integer(), fc.boolean(), fc.constantFrom([], {}, ['x'], { a: 'b' }, 2.5));
const notBool = fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.constantFrom([], {}, [true]));

/** DeleteOptions Go cannot decode (400) or ValidateDeleteOptions refuses (422), among well-typed fields. */
const badDeleteOptionsArb = fc
  .record({
    base: fc.record(
      {
        kind: fc.constant('DeleteOptions'),
        apiVersion: fc.constantFrom('v1', 'meta.k8s.io/v1'),
        gracePeriodSeconds: fc.nat({ max: 30 }),
      },
      { requiredKeys: [] },
    ),
    bad: fc.oneof(
      notInteger.map((v) => ({ gracePeriodSeconds: v })),
      notString.map((v) => ({ propagationPolicy: v })),
      fc.constantFrom('Bogus', 'orphan', '').map((v) => ({ propagationPolicy: v })),
      fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.constantFrom([], [{}])).map((v) => ({ preconditions: v })),
      notString.map((v) => ({ preconditions: { uid: v } })),
      notString.map((v) => ({ preconditions: { resourceVersion: v } })),
      fc.oneof(fc.string({ maxLength: 5 }), fc.integer(), fc.constantFrom({}, [1], ['x'], ['All', 'x'])).map((v) => ({
        dryRun: v,
      })),
      notBool.map((v) => ({ orphanDependents: v })),
      notBool.map((v) => ({ ignoreStoreReadErrorWithClusterBreakingPotential: v })),
      fc.constantFrom(
        { orphanDependents: true, propagationPolicy: 'Orphan' },
        { orphanDependents: false, propagationPolicy: 'Background' },
      ),
      fc.oneof(notString, fc.constantFrom('Pod', 'Bogus')).map((v) => ({ kind: v })),
      notString.map((v) => ({ apiVersion: v })),
    ),
  })
  .map(({ base, bad }) => JSON.stringify({ ...base, ...bad }));

/**
 * Requests built to be invalid, each for one stated reason, most aimed at the kept objects: the server must refuse
 * every one with a 4xx (and, at the end, still hold every kept object as it was).
 */
const invalidRequestArb: fc.Arbitrary<FuzzRequest> = fc.oneof(
  fc.record({ path: fc.constantFrom(...KEPT_TARGETS), body: badDeleteOptionsArb }).map(
    ({ path, body }): FuzzRequest => ({
      method: 'DELETE',
      target: { path, namespaced: true, named: true, random: false },
      query: {},
      contentType: 'application/json',
      accept: null,
      body,
      invalid: 'DeleteOptions that do not decode or validate',
    }),
  ),
  fc
    .record({
      path: fc.constantFrom(...KEPT_TARGETS),
      param: fc.oneof(
        notAnInt.map((v) => ({ gracePeriodSeconds: v })),
        fc.constantFrom('Bogus', 'background').map((v) => ({ propagationPolicy: v })),
        fc.constantFrom('x', 'all').map((v) => ({ dryRun: v })),
        fc.constant({ propagationPolicy: 'Orphan', orphanDependents: 'true' }),
      ),
    })
    .map(
      ({ path, param }): FuzzRequest => ({
        method: 'DELETE',
        target: { path, namespaced: true, named: true, random: false },
        query: param,
        contentType: null,
        accept: null,
        body: undefined,
        invalid: 'DeleteOptions in the query that do not convert or validate',
      }),
    ),
  fc
    .record({
      path: fc.constantFrom(cmPath('fuzz'), cmPath(KEPT_NAMESPACE), cmPath(KEPT_NAMESPACE, 'cm-1')),
      watch: fc.boolean(),
      param: fc.oneof(
        notAUint.map((v) => ({ resourceVersion: v })),
        fc.constantFrom('bogus', 'exact', '').map((v) => ({ resourceVersion: '1', resourceVersionMatch: v || 'x' })),
        fc.constant({ resourceVersionMatch: 'NotOlderThan' }),
        fc.constant({ resourceVersion: '0', resourceVersionMatch: 'Exact' }),
      ),
    })
    .map(({ path, watch, param }): FuzzRequest => {
      // A named GET has no ListOptions: only its resourceVersion can be wrong.
      const named = path.endsWith('cm-1');
      const query: Record<string, string> = named
        ? { resourceVersion: (param as Record<string, string>).resourceVersion ?? 'x' }
        : { ...param, ...(watch ? { watch: 'true' } : {}) };
      if (named && /^\d+$/.test(query.resourceVersion!)) query.resourceVersion = `${query.resourceVersion}x`;
      return {
        method: 'GET',
        target: { path, namespaced: true, named, random: false },
        query,
        contentType: null,
        accept: null,
        body: undefined,
        invalid: 'a resourceVersion that is no uint64, or ListOptions ValidateListOptions refuses',
      };
    }),
  fc
    .record({
      param: fc.oneof(
        notAnInt.map((v) => ({ limit: v })),
        notAnInt.map((v) => ({ timeoutSeconds: v })),
        fc.constantFrom('!!', 'a in (', 'x,,y').map((v) => ({ labelSelector: v })),
        fc.constantFrom('spec.bogus=x', 'metadata.name').map((v) => ({ fieldSelector: v })),
        fc.constant({ sendInitialEvents: 'true' }),
      ),
    })
    .map(
      ({ param }): FuzzRequest => ({
        method: 'GET',
        target: { path: cmPath(KEPT_NAMESPACE), namespaced: true, named: false, random: false },
        query: param,
        contentType: null,
        accept: null,
        body: undefined,
        invalid: 'list options that do not convert or validate',
      }),
    ),
  fc
    .record({
      method: fc.constantFrom('POST', 'PUT', 'PATCH'),
      param: fc.oneof(
        fc.constantFrom('x', 'all', '').map((v) => ({ dryRun: v || 'none' })),
        fc.constantFrom('bogus', 'strict').map((v) => ({ fieldValidation: v })),
        fc.constant({ fieldManager: 'm'.repeat(129) }),
      ),
      body: objectArb.map((o) => JSON.stringify({ ...o, kind: 'ConfigMap', apiVersion: 'v1' })),
    })
    .map(({ method, param, body }): FuzzRequest => {
      const path = method === 'POST' ? cmPath(KEPT_NAMESPACE) : cmPath(KEPT_NAMESPACE, 'cm-2');
      return {
        method,
        target: { path, namespaced: true, named: method !== 'POST', random: false },
        query: param,
        contentType: method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
        accept: null,
        body,
        invalid: 'write options ValidateCreateOptions / UpdateOptions / PatchOptions refuse',
      };
    }),
  fc
    .record({
      method: fc.constantFrom('POST', 'PUT'),
      body: fc.oneof(
        fc.string({ maxLength: 20 }).filter((t) => {
          try {
            JSON.parse(t);
            return false;
          } catch {
            return true;
          }
        }),
        fc.constantFrom('[]', '[{}]', '"x"', '7', 'true', '{"kind":5}', '{"apiVersion":[]}', '{"data":"x"}'),
      ),
    })
    .map(({ method, body }): FuzzRequest => {
      const path = method === 'POST' ? cmPath(KEPT_NAMESPACE) : cmPath(KEPT_NAMESPACE, 'cm-4');
      return {
        method,
        target: { path, namespaced: true, named: method === 'PUT', random: false },
        query: {},
        contentType: 'application/json',
        accept: null,
        body,
        invalid: 'a body that does not decode into a ConfigMap',
      };
    }),
  fc.constantFrom('{"data":', '[{"op":', 'x', '{"data":{"a":1}}}').chain((body) =>
    fc
      .constantFrom(
        'application/merge-patch+json',
        'application/json-patch+json',
        'application/strategic-merge-patch+json',
      )
      .map(
        (contentType): FuzzRequest => ({
          method: 'PATCH',
          target: { path: cmPath(KEPT_NAMESPACE, 'cm-4'), namespaced: true, named: true, random: false },
          query: {},
          contentType,
          accept: null,
          body,
          invalid: 'a patch that is not JSON',
        }),
      ),
  ),
  fc.constant<FuzzRequest>({
    method: 'PATCH',
    target: { path: cmPath(KEPT_NAMESPACE, 'cm-0'), namespaced: true, named: true, random: false },
    query: { force: 'true' },
    contentType: 'application/merge-patch+json',
    accept: null,
    body: '{"data":{"index":"changed"}}',
    invalid: 'force on a patch that is not an apply',
  }),
  fc.constantFrom(false, true).map(
    (binary): FuzzRequest => ({
      method: 'POST',
      target: { path: cmPath(KEPT_NAMESPACE), namespaced: true, named: false, random: false },
      query: {},
      contentType: 'application/json',
      accept: null,
      body: JSON.stringify({
        ...configMap('fuzz-too-big', binary ? {} : { big: 'x'.repeat(1024 * 1024 + 1) }),
        ...(binary ? { binaryData: { big: Buffer.alloc(1024 * 1024 + 1).toString('base64') } } : {}),
      }),
      invalid: 'ConfigMap data over 1 MiB',
    }),
  ),
);

const requestArb: fc.Arbitrary<FuzzRequest> = fc.oneof(
  { weight: 6, arbitrary: randomRequestArb },
  { weight: 2, arbitrary: configMapWriteArb },
  { weight: 2, arbitrary: invalidRequestArb },
);

/** What Kubernetes answers with 5xx on purpose: 504 for a resourceVersion the server has not reached. */
function deliberate5xx(status: number, body: StatusBody | undefined): boolean {
  return (
    status === 504 &&
    body?.reason === 'Timeout' &&
    (body.details?.causes ?? []).some((c) => c.reason === 'ResourceVersionTooLarge')
  );
}

/**
 * Whether a DELETE of this path can only reach fuzz objects: it names a fuzz namespace, or a fuzz object (maybe
 * with a subresource). Judged on the path as fetch sends it, after `..` and `%2e%2e` are resolved, so that
 * `persistentvolumes/fuzz-a/%2e%2e` (the whole collection) is not mistaken for a fuzz object.
 */
function deletesOnlyFuzz(path: string): boolean {
  // Appended to an origin, not resolved against it: a path such as "//" would read as a host-relative URL.
  const segments = new URL(`http://x${path}`).pathname.split('/');
  const nsIndex = segments.indexOf('namespaces');
  if (nsIndex >= 0 && segments[nsIndex + 1]?.startsWith('fuzz')) return true;
  return (
    segments.length >= 2 &&
    (segments.at(-1)!.startsWith('fuzz') || (segments.at(-2)!.startsWith('fuzz') && segments.length > 4))
  );
}

test('fuzzing: thousands of random requests never get a 5xx, errors are Status objects, kept data is untouched', {
  timeout: 240_000,
}, async (t) => {
  const server = await serverFor(t, ['--nodes', '0', '--seed', String(SEED)]);
  const api = new Api(server.url);

  // The data the fuzzing must not change: namespaced and cluster-scoped, of several kinds.
  await api.namespace(KEPT_NAMESPACE);
  for (const ns of ['fuzz', 'fuzz-b']) await api.namespace(ns);
  // kube-root-ca.crt is the namespace's from the start (the root-ca-cert-publisher's).
  const kept: string[] = [`/api/v1/namespaces/${KEPT_NAMESPACE}`, cmPath(KEPT_NAMESPACE, 'kube-root-ca.crt')];
  for (let i = 0; i < 5; i++) {
    await api.create(
      cmPath(KEPT_NAMESPACE),
      configMap(`cm-${i}`, { index: String(i), blob: 'x'.repeat(100 * i) }, { app: 'kept', tier: String(i % 2) }),
    );
    kept.push(cmPath(KEPT_NAMESPACE, `cm-${i}`));
  }
  await api.create(`/api/v1/namespaces/${KEPT_NAMESPACE}/secrets`, {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: 'secret' },
    stringData: { password: 'hunter2' },
  });
  await api.create(`/api/v1/namespaces/${KEPT_NAMESPACE}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'pod', labels: { app: 'kept' } },
    spec: { containers: [{ name: 'c', image: 'nginx' }] },
  });
  await api.create(`/apis/apps/v1/namespaces/${KEPT_NAMESPACE}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'deploy' },
    spec: {
      replicas: 0,
      selector: { matchLabels: { app: 'd' } },
      template: { metadata: { labels: { app: 'd' } }, spec: { containers: [{ name: 'c', image: 'nginx' }] } },
    },
  });
  await api.create('/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'kept-role' },
    rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get'] }],
  });
  await api.create('/api/v1/persistentvolumes', {
    apiVersion: 'v1',
    kind: 'PersistentVolume',
    metadata: { name: 'kept-pv' },
    spec: { capacity: { storage: '1Gi' }, accessModes: ['ReadWriteOnce'], hostPath: { path: '/tmp/x' } },
  });
  kept.push(
    `/api/v1/namespaces/${KEPT_NAMESPACE}/secrets/secret`,
    `/api/v1/namespaces/${KEPT_NAMESPACE}/pods/pod`,
    '/apis/rbac.authorization.k8s.io/v1/clusterroles/kept-role',
    '/api/v1/persistentvolumes/kept-pv',
  );
  // Let the controllers finish with the kept objects (the deployment's status, the namespace's) before recording them.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  kept.push(`/apis/apps/v1/namespaces/${KEPT_NAMESPACE}/deployments/deploy`);
  const recorded = new Map<string, string>();
  for (const path of kept) {
    const reply = await api.request(path);
    assert.equal(reply.status, 200, `${path}: ${reply.text}`);
    recorded.set(path, reply.text);
  }

  let sent = 0;
  let invalidSent = 0;
  const statuses = new Map<number, number>();
  const send = async (r: FuzzRequest): Promise<void> => {
    const search = new URLSearchParams(r.query).toString();
    // A random DELETE may only reach fuzz objects; one built invalid is sent wherever it was aimed (kept objects).
    const method = r.method === 'DELETE' && !r.invalid && !deletesOnlyFuzz(r.target.path) ? 'GET' : r.method;
    const headers: Record<string, string> = {};
    if (r.contentType !== null) headers['content-type'] = r.contentType;
    if (r.accept !== null) headers.accept = r.accept;
    const hasBody = r.body !== undefined && method !== 'GET' && method !== 'HEAD';
    const controller = new AbortController();
    const url = `${server.url}${r.target.path}${search ? `?${search}` : ''}`;
    const description = `${method} ${r.target.path}${search ? `?${search}` : ''} ${JSON.stringify(headers)} body=${hasBody ? JSON.stringify(String(r.body)).slice(0, 300) : '-'}`;
    let res: Response;
    try {
      res = await fetch(url, { method, headers, body: hasBody ? r.body : undefined, signal: controller.signal });
    } catch (err) {
      // A URL fetch itself refuses (a malformed one) never reached the server; anything else is the server's fault.
      if (
        err instanceof TypeError &&
        /Invalid URL|invalid/i.test(String((err as Error).message)) &&
        !(err as { cause?: unknown }).cause
      )
        return;
      throw new Error(
        `${description}: ${String(err)} ${String((err as { cause?: unknown }).cause ?? '')}\nserver log:\n${server.stderr().slice(-2000)}`,
      );
    }
    sent++;
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    if (r.invalid) {
      invalidSent++;
      if (res.status < 400 || res.status >= 500)
        assert.fail(
          `built invalid (${r.invalid}), yet answered ${res.status}: ${description}\n→ ${(await res.text()).slice(0, 300)}`,
        );
    }
    if (res.status < 400) {
      // A watch or a followed log streams: a moment of it is enough.
      const timer = setTimeout(() => controller.abort(), 50);
      await res.text().catch(() => undefined);
      clearTimeout(timer);
      return;
    }
    const text = await res.text();
    let body: StatusBody | undefined;
    try {
      body = JSON.parse(text) as StatusBody;
    } catch {
      body = undefined;
    }
    assert.ok(
      res.status < 500 || deliberate5xx(res.status, body),
      `${description}\n→ ${res.status} ${text.slice(0, 500)}\nserver log:\n${server.stderr().slice(-3000)}`,
    );
    if (method === 'HEAD') return;
    assert.ok(
      body && body.kind === 'Status' && body.apiVersion === 'v1' && body.status === 'Failure',
      `${description}\n→ ${res.status}: not a v1 Status: ${text.slice(0, 300)}`,
    );
    assert.equal(body.code, res.status, `${description}\n→ Status code ${body.code} on HTTP ${res.status}`);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/, description);
  };

  await fc
    .assert(
      fc.asyncProperty(fc.array(requestArb, { minLength: BATCH, maxLength: BATCH }), async (batch) => {
        await Promise.all(batch.map(send));
        assert.equal((await api.request('/healthz')).text, 'ok', 'the server is still up');
      }),
      { seed: SEED, numRuns: Math.ceil(RUNS / BATCH), interruptAfterTimeLimit: 150_000 },
    )
    .catch((err: unknown) => {
      const cause = err instanceof Error && err.cause instanceof Error ? `\ncaused by: ${err.cause.message}` : '';
      throw new Error(
        `fuzzing failed; replay with KUBE_SIM_TEST_SEED=${SEED}\n${String(err instanceof Error ? err.message : err)}${cause}`,
      );
    });
  t.diagnostic(
    `seed ${SEED}: ${sent} requests answered (${invalidSent} built invalid, all refused); statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`,
  );
  assert.ok(sent >= RUNS * 0.9, `only ${sent} of ${RUNS} requests were sent`);

  // Every kept object reads back byte for byte as before, and the kept namespace holds nothing new.
  for (const [path, text] of recorded)
    assert.equal((await api.request(path)).text, text, `${path} changed during the fuzzing`);
  const names = (await api.list(cmPath(KEPT_NAMESPACE))).items.map((o) => o.metadata.name);
  assert.deepEqual(names, ['cm-0', 'cm-1', 'cm-2', 'cm-3', 'cm-4', 'kube-root-ca.crt']);
  assert.equal(
    server.stderr().includes('internal error'),
    false,
    `the server logged an internal error:\n${server.stderr().slice(-3000)}`,
  );
});
