import { isIP } from 'node:net';
import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1035Label, checkDns1123Subdomain } from '../../api/validation.js';
import { col, field, selectorString, str } from '../printers.js';
import type { KindInfo, StrategyContext } from '../types.js';
import { validateLabelSelector } from './policy.js';

/** networking.k8s.io/v1 Ingress, IngressClass and NetworkPolicy, as kube-apiserver stores, validates and prints them. */
type Obj = Record<string, unknown>;

const INGRESS_CLASSES = 'networking.k8s.io/ingressclasses';
const INGRESS_CLASS_ANNOTATION = 'kubernetes.io/ingress.class';
const DEFAULT_CLASS_ANNOTATION = 'ingressclass.kubernetes.io/is-default-class';
const PATH_TYPES = ['Exact', 'ImplementationSpecific', 'Prefix'];
const INVALID_PATH_SEQUENCES = ['//', '/./', '/../', '%2f', '%2F'];
const INVALID_PATH_SUFFIXES = ['/..', '/.'];

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** A cause with a value rendered as Go's %#v renders it (field.Invalid of a non-scalar). */
function invalidRaw(path: string, rendered: string, detail: string): StatusCause {
  return { reason: 'FieldValueInvalid', message: `Invalid value: ${rendered}: ${detail}`, field: path };
}

const wildcardSubdomain = /^\*\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** IsWildcardDNS1123Subdomain. */
function checkWildcardSubdomain(value: string): string[] {
  const problems: string[] = [];
  if (value.length > 253) problems.push('must be no more than 253 characters');
  if (!wildcardSubdomain.test(value)) {
    problems.push(
      `a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, which must consist of lower case alphanumeric characters, '-' or '.' and end with an alphanumeric character (e.g. '*.example.com', regex used for validation is '\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
    );
  }
  return problems;
}

function checkHost(host: string, path: string, causes: StatusCause[]): void {
  if (/^[0-9.]+$/.test(host) || host.includes(':'))
    causes.push(FieldErrors.invalid(path, host, 'must be a DNS name, not an IP address'));
  const problems = host.includes('*') ? checkWildcardSubdomain(host) : checkDns1123Subdomain(host);
  for (const p of problems) causes.push(FieldErrors.invalid(path, host, p));
}

/** IsValidPortName (IANA_SVC_NAME). */
function checkPortName(name: string): string[] {
  const problems: string[] = [];
  if (name.length > 15) problems.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(name))
    problems.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (!/[a-z]/.test(name)) problems.push('must contain at least one letter (a-z)');
  if (name.includes('--')) problems.push('must not contain consecutive hyphens');
  if (name.startsWith('-') || name.endsWith('-')) problems.push('must not begin or end with a hyphen');
  return problems;
}

function validateBackend(backend: unknown, path: string): StatusCause[] {
  const b = obj(backend);
  const causes: StatusCause[] = [];
  if (b.resource !== undefined && b.service !== undefined)
    return [FieldErrors.invalid(path, '', 'cannot set both resource and service backends')];
  if (isPlainObject(b.resource)) {
    if (!b.resource.kind) causes.push(FieldErrors.required(`${path}.resource.kind`, ''));
    if (!b.resource.name) causes.push(FieldErrors.required(`${path}.resource.name`, ''));
    return causes;
  }
  if (!isPlainObject(b.service)) return [FieldErrors.invalid(path, '', 'resource or service backend is required')];
  const name = typeof b.service.name === 'string' ? b.service.name : '';
  if (name === '') causes.push(FieldErrors.required(`${path}.service.name`, ''));
  else for (const p of checkDns1035Label(name)) causes.push(FieldErrors.invalid(`${path}.service.name`, name, p));
  const port = obj(b.service.port);
  const portName = typeof port.name === 'string' ? port.name : '';
  const portNumber = typeof port.number === 'number' ? port.number : 0;
  if (portName && portNumber) causes.push(FieldErrors.invalid(path, '', 'cannot set both port name & port number'));
  else if (portName)
    for (const p of checkPortName(portName)) causes.push(FieldErrors.invalid(`${path}.service.port.name`, portName, p));
  else if (portNumber) {
    if (portNumber < 1 || portNumber > 65535)
      causes.push(
        FieldErrors.invalid(`${path}.service.port.number`, portNumber, 'must be between 1 and 65535, inclusive'),
      );
  } else causes.push(FieldErrors.required(path, 'port name or number is required'));
  return causes;
}

function validateHttpPath(p: Obj, path: string): StatusCause[] {
  if (p.pathType === undefined || p.pathType === null)
    return [FieldErrors.required(`${path}.pathType`, 'pathType must be specified')];
  const causes: StatusCause[] = [];
  const value = typeof p.path === 'string' ? p.path : '';
  if (p.pathType === 'Exact' || p.pathType === 'Prefix') {
    if (!value.startsWith('/')) causes.push(FieldErrors.invalid(`${path}.path`, value, 'must be an absolute path'));
    for (const seq of INVALID_PATH_SEQUENCES)
      if (value.includes(seq)) causes.push(FieldErrors.invalid(`${path}.path`, value, `must not contain '${seq}'`));
    for (const suffix of INVALID_PATH_SUFFIXES)
      if (value.endsWith(suffix))
        causes.push(FieldErrors.invalid(`${path}.path`, value, `cannot end with '${suffix}'`));
  } else if (p.pathType === 'ImplementationSpecific') {
    if (value !== '' && !value.startsWith('/'))
      causes.push(FieldErrors.invalid(`${path}.path`, value, 'must be an absolute path'));
  } else causes.push(FieldErrors.notSupported(`${path}.pathType`, p.pathType, PATH_TYPES));
  causes.push(...validateBackend(p.backend, `${path}.backend`));
  return causes;
}

/** ValidateIngressSpec and, on create, the class annotation that must agree with ingressClassName. */
function validateIngress(ingress: KubeObject): StatusCause[] {
  const spec = obj(ingress.spec);
  const rules = list(spec.rules);
  const causes: StatusCause[] = [];
  if (rules.length === 0 && spec.defaultBackend === undefined) {
    causes.push(
      invalidRaw(
        'spec',
        Array.isArray(spec.rules) ? '[]networking.IngressRule{}' : '[]networking.IngressRule(nil)',
        'either `defaultBackend` or `rules` must be specified',
      ),
    );
  }
  if (spec.defaultBackend !== undefined) causes.push(...validateBackend(spec.defaultBackend, 'spec.defaultBackend'));
  rules.forEach((rule, i) => {
    const r = obj(rule);
    const path = `spec.rules[${i}]`;
    if (typeof r.host === 'string' && r.host !== '') checkHost(r.host, `${path}.host`, causes);
    if (r.http === undefined) return;
    const paths = list(obj(r.http).paths);
    if (paths.length === 0) causes.push(FieldErrors.required(`${path}.http.paths`, ''));
    paths.forEach((p, j) => causes.push(...validateHttpPath(obj(p), `${path}.http.paths[${j}]`)));
  });
  list(spec.tls).forEach((tls, i) => {
    const t = obj(tls);
    list(t.hosts).forEach((host, j) => {
      const h = String(host);
      for (const p of h.includes('*') ? checkWildcardSubdomain(h) : checkDns1123Subdomain(h))
        causes.push(FieldErrors.invalid(`spec.tls[${i}].hosts[${j}]`, h, p));
    });
    if (typeof t.secretName === 'string' && t.secretName !== '') {
      for (const p of checkDns1123Subdomain(t.secretName))
        causes.push(FieldErrors.invalid(`spec.tls[${i}].secretName`, t.secretName, p));
    }
  });
  if (typeof spec.ingressClassName === 'string') {
    for (const p of checkDns1123Subdomain(spec.ingressClassName))
      causes.push(FieldErrors.invalid('spec.ingressClassName', spec.ingressClassName, p));
  }
  return causes;
}

/**
 * The DefaultIngressClass admission plugin: a new Ingress that names no class (neither ingressClassName nor the
 * legacy annotation) gets the default IngressClass, the newest one if several are marked default.
 */
function defaultIngressClass(ingress: KubeObject, ctx: StrategyContext): void {
  const spec = isPlainObject(ingress.spec) ? ingress.spec : (ingress.spec = {});
  if (spec.ingressClassName !== undefined && spec.ingressClassName !== null) return;
  if (ingress.metadata.annotations?.[INGRESS_CLASS_ANNOTATION] !== undefined) return;
  const newest = newestDefault(ctx.objects(INGRESS_CLASSES), DEFAULT_CLASS_ANNOTATION);
  if (newest) spec.ingressClassName = newest.metadata.name;
}

/** getDefaultClass of the DefaultIngressClass and DefaultStorageClass plugins: the newest default, then by name. */
export function newestDefault(classes: readonly KubeObject[], ...annotations: string[]): KubeObject | undefined {
  const defaults = classes.filter((c) => annotations.some((a) => c.metadata.annotations?.[a] === 'true'));
  defaults.sort((a, b) => {
    const ta = Date.parse(a.metadata.creationTimestamp ?? '');
    const tb = Date.parse(b.metadata.creationTimestamp ?? '');
    return ta === tb ? ((a.metadata.name ?? '') < (b.metadata.name ?? '') ? -1 : 1) : tb - ta;
  });
  return defaults[0];
}

function ingressHosts(o: KubeObject): string {
  const rules = list(field(o, 'spec.rules'));
  const hosts: string[] = [];
  let more = false;
  for (const rule of rules) {
    if (hosts.length === 3) more = true;
    const host = obj(rule).host;
    if (!more && typeof host === 'string' && host !== '') hosts.push(host);
  }
  if (hosts.length === 0) return '*';
  return more ? `${hosts.join(',')} + ${rules.length - 3} more...` : hosts.join(',');
}

/** ingressLoadBalancerStatusStringer: IPs or hostnames, sorted and de-duplicated (the server prints wide). */
function ingressAddress(o: KubeObject): string {
  const seen = new Set<string>();
  for (const i of list(field(o, 'status.loadBalancer.ingress'))) {
    const e = obj(i);
    if (typeof e.ip === 'string' && e.ip !== '') seen.add(e.ip);
    else if (typeof e.hostname === 'string' && e.hostname !== '') seen.add(e.hostname);
  }
  return [...seen].sort().join(',');
}

/** ValidateIngressCreate's extra rule: the legacy class annotation must agree with ingressClassName. */
function validateClassAnnotation(o: KubeObject): StatusCause[] {
  const annotation = o.metadata.annotations?.[INGRESS_CLASS_ANNOTATION];
  const className = field(o, 'spec.ingressClassName');
  if (annotation !== undefined && typeof className === 'string' && annotation !== className) {
    return [
      FieldErrors.invalid(
        `annotations.${INGRESS_CLASS_ANNOTATION}`,
        annotation,
        'must match `ingressClassName` when both are specified',
      ),
    ];
  }
  return [];
}

const ingresses: KindInfo = {
  group: 'networking.k8s.io',
  version: 'v1',
  kind: 'Ingress',
  resource: 'ingresses',
  singular: 'ingress',
  namespaced: true,
  shortNames: ['ing'],
  status: true,
  generation: true,
  strategy: {
    prepareForCreate(o, ctx) {
      defaultIngressClass(o, ctx);
      o.status = { loadBalancer: {} };
    },
    // On create (no resourceVersion yet) ValidateIngressCreate also checks the legacy class annotation.
    validate: (o) => [
      ...validateIngress(o),
      ...(o.metadata.resourceVersion === undefined ? validateClassAnnotation(o) : []),
    ],
  },
  columns: [
    col('Class', (o) => str(o, 'spec.ingressClassName', '<none>'), {
      description: 'The name of the IngressClass resource that should be used for additional configuration',
    }),
    col('Hosts', ingressHosts, {
      description: 'Hosts that incoming requests are matched against before the ingress rule',
    }),
    col('Address', ingressAddress, {
      description: 'Address is a list containing ingress points for the load-balancer',
    }),
    col('Ports', (o) => (list(field(o, 'spec.tls')).length > 0 ? '80, 443' : '80'), {
      description: 'Ports of TLS configurations that open',
    }),
  ],
};

function validateIngressClass(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = [];
  const controller = typeof spec.controller === 'string' ? spec.controller : '';
  if (controller === '') causes.push(FieldErrors.required('spec.controller', ''));
  else if (controller.length > 250)
    causes.push({
      reason: 'FieldValueTooLong',
      message: 'Too long: may not be more than 250 bytes',
      field: 'spec.controller',
    });
  else {
    const slash = controller.indexOf('/');
    if (slash <= 0 || slash === controller.length - 1)
      causes.push(
        FieldErrors.invalid('spec.controller', controller, 'must be a domain-prefixed path (such as "acme.io/foo")'),
      );
    else
      for (const p of checkDns1123Subdomain(controller.slice(0, slash)))
        causes.push(FieldErrors.invalid('spec.controller', controller.slice(0, slash), p));
  }
  if (isPlainObject(spec.parameters)) {
    const p = spec.parameters;
    if (!p.kind) causes.push(FieldErrors.required('spec.parameters.kind', ''));
    if (!p.name) causes.push(FieldErrors.required('spec.parameters.name', ''));
    if (p.scope === 'Cluster' && p.namespace !== undefined)
      causes.push(FieldErrors.forbidden('spec.parameters.namespace', "`parameters.scope` is set to 'Cluster'"));
    else if (p.scope === 'Namespace' && !p.namespace)
      causes.push(FieldErrors.required('spec.parameters.namespace', "`parameters.scope` is set to 'Namespace'"));
    else if (p.scope !== 'Cluster' && p.scope !== 'Namespace')
      causes.push(FieldErrors.notSupported('spec.parameters.scope', p.scope, ['Cluster', 'Namespace']));
  }
  return causes;
}

const ingressClasses: KindInfo = {
  group: 'networking.k8s.io',
  version: 'v1',
  kind: 'IngressClass',
  resource: 'ingressclasses',
  singular: 'ingressclass',
  namespaced: false,
  generation: true,
  strategy: {
    defaults(o) {
      const parameters = field(o, 'spec.parameters');
      if (isPlainObject(parameters)) parameters.scope ??= 'Cluster';
    },
    validate: validateIngressClass,
    validateUpdate(next, old) {
      const controller = field(next, 'spec.controller');
      return controller !== field(old, 'spec.controller')
        ? [FieldErrors.invalid('spec.controller', controller, 'field is immutable')]
        : [];
    },
  },
  columns: [
    col('Controller', (o) => str(o, 'spec.controller'), {
      description: 'Controller that is responsible for handling this class',
    }),
    col(
      'Parameters',
      (o) => {
        const p = field(o, 'spec.parameters');
        if (!isPlainObject(p)) return '<none>';
        return `${String(p.kind ?? '')}${typeof p.apiGroup === 'string' ? `.${p.apiGroup}` : ''}/${String(p.name ?? '')}`;
      },
      { description: 'A reference to a resource with additional parameters' },
    ),
  ],
};

const POLICY_TYPES = ['Ingress', 'Egress'];
const PROTOCOLS = ['SCTP', 'TCP', 'UDP'];

/** SetDefaults_NetworkPolicy: policyTypes from the rules present, TCP for ports without a protocol. */
function defaultNetworkPolicy(o: KubeObject): void {
  const spec = isPlainObject(o.spec) ? o.spec : (o.spec = {});
  spec.podSelector ??= {};
  for (const rule of [...list(spec.ingress), ...list(spec.egress)])
    for (const port of list(obj(rule).ports)) if (isPlainObject(port)) port.protocol ??= 'TCP';
  if (list(spec.policyTypes).length === 0)
    spec.policyTypes = list(spec.egress).length > 0 ? ['Ingress', 'Egress'] : ['Ingress'];
}

/** ValidateNetworkPolicyPeer: exactly one kind of peer, or selectors without an ipBlock. */
function validatePeer(peer: Obj, path: string): StatusCause[] {
  const causes: StatusCause[] = [];
  let peers = 0;
  for (const selector of ['podSelector', 'namespaceSelector'] as const) {
    if (peer[selector] === undefined || peer[selector] === null) continue;
    peers++;
    causes.push(...validateLabelSelector(peer[selector], `${path}.${selector}`));
  }
  if (peer.ipBlock !== undefined && peer.ipBlock !== null) {
    peers++;
    causes.push(...validateIpBlock(obj(peer.ipBlock), `${path}.ipBlock`));
  }
  if (peers === 0) causes.push(FieldErrors.required(path, 'must specify a peer'));
  else if (peers > 1 && peer.ipBlock !== undefined && peer.ipBlock !== null)
    causes.push(FieldErrors.forbidden(path, 'may not specify both ipBlock and another peer'));
  return causes;
}

/** ValidateIPBlock: a CIDR, and exceptions that are strict subsets of it. */
function validateIpBlock(block: Obj, path: string): StatusCause[] {
  if (typeof block.cidr !== 'string' || block.cidr === '') return [FieldErrors.required(`${path}.cidr`, '')];
  const cidr = parseCidr(block.cidr);
  if (!cidr) return [FieldErrors.invalid(`${path}.cidr`, block.cidr, 'not a valid CIDR')];
  const causes: StatusCause[] = [];
  for (const [i, text] of list(block.except).entries()) {
    const except = typeof text === 'string' ? parseCidr(text) : undefined;
    if (!except) return [...causes, FieldErrors.invalid(`${path}.except[${i}]`, text, 'not a valid CIDR')];
    if (!cidrContains(cidr, except) || cidr.bits >= except.bits)
      causes.push(FieldErrors.invalid(`${path}.except[${i}]`, text, 'must be a strict subset of `cidr`'));
  }
  return causes;
}

interface Cidr {
  family: 4 | 6;
  address: bigint;
  bits: number;
}

/** net.ParseCIDR: an IP address and a prefix length within its family. */
function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash < 0) return undefined;
  const ip = text.slice(0, slash);
  const length = text.slice(slash + 1);
  const family = isIP(ip);
  if ((family !== 4 && family !== 6) || !/^\d{1,3}$/.test(length)) return undefined;
  const bits = Number(length);
  if (bits > (family === 4 ? 32 : 128)) return undefined;
  return { family, address: ipValue(ip, family), bits };
}

function ipValue(ip: string, family: 4 | 6): bigint {
  if (family === 4) return ip.split('.').reduce((n, part) => (n << 8n) | BigInt(Number(part)), 0n);
  // Expand "::" and an embedded dotted IPv4 tail into eight 16-bit groups.
  const [head, tail = ''] = ip.split('::');
  const groups = (part: string): string[] =>
    part === '' ? [] : part.split(':').flatMap((g) => (g.includes('.') ? ipv4Groups(g) : [g]));
  const left = groups(head!);
  const right = ip.includes('::') ? groups(tail) : [];
  const all = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function ipv4Groups(dotted: string): string[] {
  const n = ipValue(dotted, 4);
  return [(n >> 16n).toString(16), (n & 0xffffn).toString(16)];
}

/** IPNet.Contains of the other's address: the same family and the same first `cidr.bits` bits. */
function cidrContains(cidr: Cidr, other: Cidr): boolean {
  const shift = BigInt((cidr.family === 4 ? 32 : 128) - cidr.bits);
  return other.family === cidr.family && other.address >> shift === cidr.address >> shift;
}

function validateNetworkPolicy(o: KubeObject): StatusCause[] {
  const spec = obj(o.spec);
  const causes: StatusCause[] = validateLabelSelector(spec.podSelector, 'spec.podSelector');
  for (const [rules, peers] of [
    ['ingress', 'from'],
    ['egress', 'to'],
  ] as const) {
    list(spec[rules]).forEach((rule, i) => {
      list(obj(rule).ports).forEach((port, j) => {
        const p = obj(port);
        const path = `spec.${rules}[${i}].ports[${j}]`;
        if (!PROTOCOLS.includes(String(p.protocol)))
          causes.push(FieldErrors.notSupported(`${path}.protocol`, p.protocol, PROTOCOLS));
        if (typeof p.port === 'number' && (p.port < 1 || p.port > 65535))
          causes.push(FieldErrors.invalid(`${path}.port`, p.port, 'must be between 1 and 65535, inclusive'));
        if (p.endPort !== undefined && typeof p.port !== 'number')
          causes.push(FieldErrors.required(`${path}.port`, 'must be specified when endPort is specified'));
        else if (typeof p.endPort === 'number' && typeof p.port === 'number' && p.endPort < p.port)
          causes.push(FieldErrors.invalid(`${path}.endPort`, p.endPort, 'must be greater than or equal to `port`'));
      });
      list(obj(rule)[peers]).forEach((peer, j) =>
        causes.push(...validatePeer(obj(peer), `spec.${rules}[${i}].${peers}[${j}]`)),
      );
    });
  }
  const types = list(spec.policyTypes);
  if (types.length > 2)
    causes.push(FieldErrors.invalid('spec.policyTypes', types, 'may not specify more than two policyTypes'));
  else
    types.forEach((t, i) => {
      if (t !== 'Ingress' && t !== 'Egress')
        causes.push(FieldErrors.notSupported(`spec.policyTypes[${i}]`, t, POLICY_TYPES));
    });
  return causes;
}

const networkPolicies: KindInfo = {
  group: 'networking.k8s.io',
  version: 'v1',
  kind: 'NetworkPolicy',
  resource: 'networkpolicies',
  singular: 'networkpolicy',
  namespaced: true,
  shortNames: ['netpol'],
  generation: true,
  strategy: { defaults: defaultNetworkPolicy, validate: validateNetworkPolicy },
  columns: [
    col('Pod-Selector', (o) => selectorString(field(o, 'spec.podSelector')), {
      description:
        'podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in this namespace.',
    }),
  ],
};

export const networkingKinds: KindInfo[] = [ingresses, ingressClasses, networkPolicies];
