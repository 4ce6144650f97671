import { isIP } from 'node:net';
import { FieldErrors, type StatusCause } from '../../api/errors.js';
import { validateNonSpecialIp } from '../../api/ip.js';
import { deepEqual, isPlainObject, type KubeObject } from '../../api/types.js';
import { checkDns1123Label, checkDns1123Subdomain, checkQualifiedName, validateLabels } from '../../api/validation.js';
import { ageOf, col } from '../printers.js';
import type { KindInfo } from '../types.js';

/** discovery.k8s.io/v1 EndpointSlice, validated and printed as kube-apiserver does. */
type Obj = Record<string, unknown>;

const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});

/** The EndpointSlice API's limits: endpoints per slice, addresses per endpoint, ports per slice. */
export const MAX_SLICE_ENDPOINTS = 1000;
const MAX_ADDRESSES = 100;
const MAX_PORTS = 20000;
const MAX_TOPOLOGY_LABELS = 16;
const ADDRESS_TYPES = ['FQDN', 'IPv4', 'IPv6'];
const PROTOCOLS = ['SCTP', 'TCP', 'UDP'];

function tooMany(field: string, actual: number, max: number): StatusCause {
  return { reason: 'FieldValueTooMany', message: `Too many: ${actual}: must have at most ${max} items`, field };
}

/** IsFullyQualifiedDomainName. */
function checkFqdn(value: string, at: string): StatusCause[] {
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  if (name === '') return [FieldErrors.required(at, '')];
  const causes: StatusCause[] = [];
  if (name.split('.').length < 2)
    causes.push(FieldErrors.invalid(at, value, 'should be a domain with at least two segments separated by dots'));
  for (const label of name.split('.'))
    for (const p of checkDns1123Label(label)) causes.push(FieldErrors.invalid(at, value, p));
  return causes;
}

function validateEndpoints(o: KubeObject, addressType: string): StatusCause[] {
  const endpoints = list(o.endpoints);
  if (endpoints.length > MAX_SLICE_ENDPOINTS) return [tooMany('endpoints', endpoints.length, MAX_SLICE_ENDPOINTS)];
  const causes: StatusCause[] = [];
  endpoints.forEach((e, i) => {
    const at = `endpoints[${i}]`;
    const endpoint = obj(e);
    const addresses = list(endpoint.addresses);
    if (addresses.length === 0) causes.push(FieldErrors.required(`${at}.addresses`, 'must contain at least 1 address'));
    else if (addresses.length > MAX_ADDRESSES) causes.push(tooMany(`${at}.addresses`, addresses.length, MAX_ADDRESSES));
    addresses.forEach((a, j) => {
      const address = String(a);
      const path = `${at}.addresses[${j}]`;
      if (addressType === 'IPv4') {
        if (isIP(address) !== 4) causes.push(FieldErrors.invalid(path, address, 'must be a valid IPv4 address'));
        causes.push(...validateNonSpecialIp(address, path));
      } else if (addressType === 'IPv6') {
        if (isIP(address) !== 6) causes.push(FieldErrors.invalid(path, address, 'must be a valid IPv6 address'));
        causes.push(...validateNonSpecialIp(address, path));
      } else if (addressType === 'FQDN') causes.push(...checkFqdn(address, path));
    });
    if (typeof endpoint.nodeName === 'string')
      for (const p of checkDns1123Subdomain(endpoint.nodeName))
        causes.push(FieldErrors.invalid(`${at}.nodeName`, endpoint.nodeName, p));
    const topology = endpoint.deprecatedTopology;
    if (isPlainObject(topology) && Object.keys(topology).length > MAX_TOPOLOGY_LABELS)
      causes.push(tooMany(`${at}.deprecatedTopology`, Object.keys(topology).length, MAX_TOPOLOGY_LABELS));
    causes.push(...validateLabels(topology, `${at}.deprecatedTopology`));
    if (typeof endpoint.hostname === 'string')
      for (const p of checkDns1123Label(endpoint.hostname))
        causes.push(FieldErrors.invalid(`${at}.hostname`, endpoint.hostname, p));
  });
  return causes;
}

function validatePorts(o: KubeObject): StatusCause[] {
  const ports = list(o.ports);
  if (ports.length > MAX_PORTS) return [tooMany('ports', ports.length, MAX_PORTS)];
  const causes: StatusCause[] = [];
  const names = new Set<string>();
  ports.forEach((p, i) => {
    const at = `ports[${i}]`;
    const port = obj(p);
    const name = typeof port.name === 'string' ? port.name : '';
    if (name !== '') for (const m of checkDns1123Label(name)) causes.push(FieldErrors.invalid(`${at}.name`, name, m));
    if (names.has(name)) causes.push(FieldErrors.duplicate(`${at}.name`, name));
    names.add(name);
    if (port.protocol === undefined) causes.push(FieldErrors.required(`${at}.protocol`, ''));
    else if (!PROTOCOLS.includes(String(port.protocol)))
      causes.push(FieldErrors.notSupported(`${at}.protocol`, port.protocol, PROTOCOLS));
    if (typeof port.appProtocol === 'string')
      for (const m of checkQualifiedName(port.appProtocol))
        causes.push(FieldErrors.invalid(`${at}.appProtocol`, port.appProtocol, m));
  });
  return causes;
}

function validateEndpointSlice(o: KubeObject): StatusCause[] {
  const addressType = typeof o.addressType === 'string' ? o.addressType : '';
  const causes = [...validateEndpoints(o, addressType), ...validatePorts(o)];
  if (addressType === '') causes.push(FieldErrors.required('addressType', ''));
  else if (!ADDRESS_TYPES.includes(addressType))
    causes.push(FieldErrors.notSupported('addressType', addressType, ADDRESS_TYPES));
  return causes;
}

/** listWithMoreString: the first three, `+ N more...`, `<unset>` for none. */
function firstThree(values: string[]): string {
  if (values.length > 3) return `${values.slice(0, 3).join(',')} + ${values.length - 3} more...`;
  return values.length === 0 ? '<unset>' : values.join(',');
}

export const endpointSlices: KindInfo = {
  group: 'discovery.k8s.io',
  version: 'v1',
  kind: 'EndpointSlice',
  resource: 'endpointslices',
  singular: 'endpointslice',
  namespaced: true,
  generation: true,
  strategy: {
    // SetDefaults_EndpointPort: an unnamed port is named "", its protocol TCP.
    defaults(o) {
      for (const p of list(o.ports)) {
        if (!isPlainObject(p)) continue;
        p.name ??= '';
        p.protocol ??= 'TCP';
      }
    },
    validate: validateEndpointSlice,
    validateUpdate(next, old) {
      return next.addressType === old.addressType
        ? []
        : [FieldErrors.invalid('addressType', next.addressType, 'field is immutable')];
    },
    // Anything but metadata changed, or the labels (endpointSliceStrategy.PrepareForUpdate).
    bumpsGeneration(next, old) {
      return (
        !deepEqual(next.endpoints, old.endpoints) ||
        !deepEqual(next.ports, old.ports) ||
        next.addressType !== old.addressType ||
        !deepEqual(next.metadata.labels ?? {}, old.metadata.labels ?? {})
      );
    },
  },
  columns: [
    col('AddressType', (o) => String(o.addressType ?? ''), {
      description:
        'addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.',
    }),
    col(
      'Ports',
      (o) =>
        firstThree(
          list(o.ports).map((p) => {
            const port = obj(p);
            if (typeof port.port === 'number') return String(port.port);
            return typeof port.name === 'string' ? port.name : '*';
          }),
        ),
      { description: 'ports specifies the list of network ports exposed by each endpoint in this slice.' },
    ),
    col('Endpoints', (o) => firstThree(list(o.endpoints).flatMap((e) => list(obj(e).addresses).map(String))), {
      description: 'endpoints is a list of unique endpoints in this slice.',
    }),
    col('Age', (o, now) => ageOf(o.metadata.creationTimestamp, now), {
      description: 'CreationTimestamp is a timestamp representing the server time when this object was created.',
    }),
  ],
  noAge: true,
};
