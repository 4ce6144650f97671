/**
 * Image references as the kubelet reads them (distribution/reference's ParseNormalizedNamed, which the kubelet's
 * applyDefaultImageTag calls): what is not a reference leaves the container waiting in InvalidImageName with the
 * parser's error, and the rest is named as containerd names it (docker.io/library/nginx:latest for "nginx").
 */

const alphanumeric = '[a-z0-9]+';
const separator = '(?:[._]|__|[-]+)';
const pathComponent = `${alphanumeric}(?:${separator}${alphanumeric})*`;
const domainNameComponent = '(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])';
const domainName = `${domainNameComponent}(?:\\.${domainNameComponent})*`;
const host = `(?:${domainName}|\\[(?:[a-fA-F0-9:]+)\\])`;
const domainAndPort = `${host}(?::[0-9]+)?`;
const tag = '[\\w][\\w.-]{0,127}';
const digest = '[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}';
const name = `(?:${domainAndPort}/)?${pathComponent}(?:/${pathComponent})*`;
const REFERENCE = new RegExp(`^(${name})(?::(${tag}))?(?:@(${digest}))?$`);
const IDENTIFIER = /^[a-f0-9]{64}$/;
const NAME_TOTAL_LENGTH_MAX = 255;
/** go-digest's algorithms and the length of their hex encodings. */
const DIGEST_LENGTHS: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };

/** splitDockerDomain: the registry (docker.io when the first part names none) and the rest, library/ for official images. */
function splitDomain(ref: string): { domain: string; remainder: string } {
  const slash = ref.indexOf('/');
  const first = slash < 0 ? '' : ref.slice(0, slash);
  let domain: string;
  let remainder: string;
  if (slash < 0 || (!/[.:]/.test(first) && first !== 'localhost' && first.toLowerCase() === first)) {
    domain = 'docker.io';
    remainder = ref;
  } else {
    domain = first;
    remainder = ref.slice(slash + 1);
  }
  if (domain === 'index.docker.io') domain = 'docker.io';
  if (domain === 'docker.io' && !remainder.includes('/')) remainder = `library/${remainder}`;
  return { domain, remainder };
}

/** go-digest's Validate of a digest the reference grammar accepted. */
function digestError(value: string): string | undefined {
  const colon = value.indexOf(':');
  const expected = DIGEST_LENGTHS[value.slice(0, colon)];
  if (expected === undefined) return 'unsupported digest algorithm';
  const hex = value.slice(colon + 1);
  if (hex.length !== expected) return 'invalid checksum digest length';
  if (!/^[a-f0-9]+$/.test(hex)) return 'invalid checksum digest format';
  return undefined;
}

/** ParseNormalizedNamed's error for a reference it refuses (`invalid reference format`, …); undefined when it parses. */
export function referenceError(image: string): string | undefined {
  if (IDENTIFIER.test(image)) return `invalid repository name (${image}), cannot specify 64-byte hexadecimal strings`;
  const { domain, remainder } = splitDomain(image);
  const colon = remainder.indexOf(':');
  const remote = colon < 0 ? remainder : remainder.slice(0, colon);
  if (remote.toLowerCase() !== remote) return `invalid reference format: repository name (${remote}) must be lowercase`;
  const full = `${domain}/${remainder}`;
  const m = REFERENCE.exec(full);
  if (!m) return REFERENCE.test(full.toLowerCase()) ? 'repository name must be lowercase' : 'invalid reference format';
  if (m[1]!.length > NAME_TOTAL_LENGTH_MAX) return 'repository name must not be more than 255 characters';
  return m[3] === undefined ? undefined : digestError(m[3]);
}

/** The kubelet's InvalidImageName message for a reference it cannot parse, or undefined. */
export function invalidImageMessage(image: string): string | undefined {
  const error = referenceError(image);
  if (error === undefined) return undefined;
  return `Failed to apply default image tag "${image}": couldn't parse image name "${image}": ${error}`;
}

/** The image reference as containerd reports it: docker.io/library/nginx:latest for "nginx". */
export function normalizeImage(image: string): string {
  const { domain, remainder } = splitDomain(image);
  const ref = `${domain}/${remainder}`;
  const lastSegment = ref.slice(ref.lastIndexOf('/') + 1);
  return ref.includes('@') || lastSegment.includes(':') ? ref : `${ref}:latest`;
}

/** The repository of a normalized reference, without its tag or digest: docker.io/library/nginx. */
export function repositoryOf(normalized: string): string {
  const at = normalized.indexOf('@');
  if (at >= 0) return normalized.slice(0, at);
  const colon = normalized.lastIndexOf(':');
  return colon > normalized.lastIndexOf('/') ? normalized.slice(0, colon) : normalized;
}
