import { queryBool } from '../api/query-params.js';

/**
 * What a request asks to do, in RBAC's terms (k8s.io/apiserver's RequestInfoFactory): for /api and /apis paths a
 * verb (from the method, with list/watch/deletecollection when no name is given), API group and version, namespace,
 * resource, subresource and name; anything else is a non-resource request (verb = the method, lower-cased).
 * It is worked out from the path alone, before routing: an unknown resource is authorized like any other.
 */
export interface RequestAttributes {
  resourceRequest: boolean;
  /** The URL path, for non-resource requests. */
  path: string;
  verb: string;
  apiGroup: string;
  apiVersion: string;
  namespace: string;
  resource: string;
  subresource: string;
  name: string;
}

const NAMESPACE_SUBRESOURCES = new Set(['status', 'finalize']);

function methodVerb(method: string): string {
  switch (method) {
    case 'POST':
      return 'create';
    case 'GET':
    case 'HEAD':
      return 'get';
    case 'PUT':
      return 'update';
    case 'PATCH':
      return 'patch';
    case 'DELETE':
      return 'delete';
    default:
      return '';
  }
}

/** The name a list or watch is narrowed to by `fieldSelector=metadata.name=X` (so resourceNames rules apply). */
function exactName(fieldSelector: string | null): string | undefined {
  if (!fieldSelector) return undefined;
  let found: string | undefined;
  for (const term of fieldSelector.split(',')) {
    const match = /^\s*metadata\.name\s*(==|=)\s*(.*?)\s*$/.exec(term);
    if (match) found = match[2];
  }
  if (found === undefined || found === '' || found === '.' || found === '..' || /[/%]/.test(found)) return undefined;
  return found;
}

export function requestAttributes(method: string, rawUrl: string): RequestAttributes {
  const url = new URL(rawUrl, 'http://localhost');
  const info: RequestAttributes = {
    resourceRequest: false,
    path: url.pathname,
    verb: method.toLowerCase(),
    apiGroup: '',
    apiVersion: '',
    namespace: '',
    resource: '',
    subresource: '',
    name: '',
  };
  let parts = url.pathname.split('/').filter((s) => s !== '');
  try {
    parts = parts.map((s) => decodeURIComponent(s));
  } catch {
    return info;
  }
  if (parts.length < 3 || (parts[0] !== 'api' && parts[0] !== 'apis')) return info;
  let rest = parts.slice(1);
  let group = '';
  if (parts[0] === 'apis') {
    if (rest.length < 3) return info;
    group = rest[0]!;
    rest = rest.slice(1);
  }
  const version = rest[0]!;
  rest = rest.slice(1);
  let verb: string;
  if (rest[0] === 'watch' || rest[0] === 'proxy') {
    if (rest.length < 2) return info;
    verb = rest[0];
    rest = rest.slice(1);
  } else verb = methodVerb(method);
  let namespace = '';
  if (rest[0] === 'namespaces' && rest.length > 1) {
    namespace = rest[1]!;
    if (rest.length > 2 && !NAMESPACE_SUBRESOURCES.has(rest[2]!)) rest = rest.slice(2);
  }
  const resource = rest[0] ?? '';
  let name = rest[1] ?? '';
  const subresource = rest.length >= 3 && verb !== 'proxy' ? rest[2]! : '';
  if (name === '' && verb === 'get') {
    verb = queryBool(url.searchParams.getAll('watch')) ? 'watch' : 'list';
    name = exactName(url.searchParams.get('fieldSelector')) ?? '';
  }
  if (name === '' && verb === 'delete') verb = 'deletecollection';
  return {
    resourceRequest: true,
    path: url.pathname,
    verb,
    apiGroup: group,
    apiVersion: version,
    namespace,
    resource,
    subresource,
    name,
  };
}
