import {
  createHash,
  createPublicKey,
  generateKeyPairSync,
  randomBytes,
  sign,
  verify,
  type KeyObject,
} from 'node:crypto';
import { isIP } from 'node:net';

/**
 * X.509 certificates written with node:crypto and a DER writer of a few lines: what the cluster CA needs at start
 * (a self-signed CA) and what its signers issue, and the certificate requests (PKCS #10) they are asked to sign,
 * read with a DER reader that checks every length. An X.509 library costs more to import than the whole of this
 * takes to run, and the CA is made while the server starts, so it is written by hand here.
 */

// ---------------------------------------------------------------------------------------------------
// DER

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

export function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

export const der = {
  sequence: (...items: Buffer[]) => tlv(0x30, ...items),
  set: (...items: Buffer[]) => tlv(0x31, ...items),
  /** A non-negative integer from its big-endian bytes (a leading zero keeps it positive). */
  integer(bytes: Buffer | number): Buffer {
    let b = typeof bytes === 'number' ? Buffer.from([bytes]) : bytes;
    let i = 0;
    while (i < b.length - 1 && b[i] === 0 && b[i + 1]! < 0x80) i++;
    b = b.subarray(i);
    return tlv(0x02, b[0]! >= 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
  },
  boolean: (value: boolean) => tlv(0x01, Buffer.from([value ? 0xff : 0])),
  oid(dotted: string): Buffer {
    const [a, b, ...rest] = dotted.split('.').map(Number);
    const out = [a! * 40 + b!];
    for (const n of rest) {
      const bytes = [n & 0x7f];
      for (let v = Math.floor(n / 128); v > 0; v = Math.floor(v / 128)) bytes.unshift(0x80 | (v & 0x7f));
      out.push(...bytes);
    }
    return tlv(0x06, Buffer.from(out));
  },
  utf8: (s: string) => tlv(0x0c, Buffer.from(s, 'utf8')),
  printable: (s: string) => tlv(0x13, Buffer.from(s, 'latin1')),
  ia5: (s: string) => tlv(0x16, Buffer.from(s, 'latin1')),
  octets: (b: Buffer) => tlv(0x04, b),
  bits: (b: Buffer, unused = 0) => tlv(0x03, Buffer.from([unused]), b),
  /** UTCTime before 2050, GeneralizedTime from then on (RFC 5280 4.1.2.5). */
  time(ms: number): Buffer {
    const iso = new Date(Math.floor(ms / 1000) * 1000).toISOString();
    const digits = iso.replace(/[-:T]/g, '').replace(/\.\d+Z$/, 'Z');
    const year = Number(iso.slice(0, 4));
    return year < 2050 ? tlv(0x17, Buffer.from(digits.slice(2), 'latin1')) : tlv(0x18, Buffer.from(digits, 'latin1'));
  },
  /** [n] EXPLICIT. */
  explicit: (n: number, ...content: Buffer[]) => tlv(0xa0 | n, ...content),
  /** [n] IMPLICIT of a primitive (a GeneralName's dNSName, iPAddress …). */
  implicit: (n: number, bytes: Buffer) => tlv(0x80 | n, bytes),
};

/** One TLV of a DER buffer: its tag and where its content lies. */
export function readTlv(buf: Buffer, offset = 0): { tag: number; start: number; end: number } {
  const tag = buf[offset]!;
  let len = buf[offset + 1]!;
  let start = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[start + i]!;
    start += n;
  }
  return { tag, start, end: start + len };
}

/** The TLVs directly inside a constructed one (as whole encodings). */
export function children(buf: Buffer, outer: { start: number; end: number }): Buffer[] {
  const out: Buffer[] = [];
  for (let at = outer.start; at < outer.end; ) {
    const t = readTlv(buf, at);
    out.push(buf.subarray(at, t.end));
    at = t.end;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// certificates

const OID = {
  commonName: '2.5.4.3',
  organization: '2.5.4.10',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  subjectAltName: '2.5.29.17',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  sha256WithRsa: '1.2.840.113549.1.1.11',
};

/**
 * Extended key usages by the names CertificateSigningRequest usages use, in the order of Go's x509.ExtKeyUsage
 * constants (the order a signed certificate lists them in); `s/mime` is email protection.
 */
export const EXT_KEY_USAGES: Record<string, string> = {
  any: '2.5.29.37.0',
  'server auth': '1.3.6.1.5.5.7.3.1',
  'client auth': '1.3.6.1.5.5.7.3.2',
  'code signing': '1.3.6.1.5.5.7.3.3',
  'email protection': '1.3.6.1.5.5.7.3.4',
  's/mime': '1.3.6.1.5.5.7.3.4',
  'ipsec end system': '1.3.6.1.5.5.7.3.5',
  'ipsec tunnel': '1.3.6.1.5.5.7.3.6',
  'ipsec user': '1.3.6.1.5.5.7.3.7',
  timestamping: '1.3.6.1.5.5.7.3.8',
  'ocsp signing': '1.3.6.1.5.5.7.3.9',
  'microsoft sgc': '1.3.6.1.4.1.311.10.3.3',
  'netscape sgc': '2.16.840.1.113730.4.1',
};

/** KeyUsage bits (RFC 5280 4.2.1.3), by the names CertificateSigningRequest usages use. */
export const KEY_USAGE_BITS: Record<string, number> = {
  'digital signature': 0,
  'content commitment': 1,
  'key encipherment': 2,
  'data encipherment': 3,
  'key agreement': 4,
  'cert sign': 5,
  'crl sign': 6,
  'encipher only': 7,
  'decipher only': 8,
  signing: 0,
};

/**
 * A CertificateSigningRequest's usages as a certificate's key usage bits and extended key usage OIDs, each once and
 * in Go's order (authority.keyUsagesFromStrings); undefined names come back as `unknown`.
 */
export function certificateUsages(usages: readonly string[]): {
  keyUsages: number[];
  extKeyUsages: string[];
  unknown: string[];
} {
  const bits = new Set<number>();
  const extended = new Set<string>();
  const unknown: string[] = [];
  for (const usage of usages) {
    const bit = KEY_USAGE_BITS[usage];
    const oid = EXT_KEY_USAGES[usage];
    if (bit !== undefined) bits.add(bit);
    else if (oid !== undefined) extended.add(oid);
    else unknown.push(usage);
  }
  const order = [...new Set(Object.values(EXT_KEY_USAGES))];
  return {
    keyUsages: [...bits].sort((a, b) => a - b),
    extKeyUsages: order.filter((oid) => extended.has(oid)),
    unknown,
  };
}

function keyUsage(bits: readonly number[]): Buffer {
  const highest = Math.max(...bits);
  const bytes = Buffer.alloc(highest >= 8 ? 2 : 1);
  for (const b of bits) bytes[b >> 3]! |= 0x80 >> (b & 7);
  // Trailing zero bits are not encoded (DER's named bit lists).
  let unused = 0;
  const last = bytes[bytes.length - 1]!;
  while (unused < 7 && (last & (1 << unused)) === 0) unused++;
  return der.bits(bytes, unused);
}

function extension(oid: string, critical: boolean, value: Buffer): Buffer {
  return der.sequence(der.oid(oid), ...(critical ? [der.boolean(true)] : []), der.octets(value));
}

/** A Name of a CN and any Os, each its own RDN, as Go's pkix.Name writes them (O before CN). */
export function distinguishedName(commonName: string, organizations: readonly string[] = []): Buffer {
  return der.sequence(
    ...organizations.map((o) => der.set(der.sequence(der.oid(OID.organization), der.utf8(o)))),
    der.set(der.sequence(der.oid(OID.commonName), der.utf8(commonName))),
  );
}

function signatureAlgorithm(key: KeyObject): Buffer {
  return key.asymmetricKeyType === 'ec'
    ? der.sequence(der.oid(OID.ecdsaWithSha256))
    : der.sequence(der.oid(OID.sha256WithRsa), tlv(0x05));
}

/** SHA-1 of the subjectPublicKey bits, the usual key identifier (RFC 5280 4.2.1.2 (1)). */
export function keyIdentifier(spki: Buffer): Buffer {
  const outer = readTlv(spki);
  const [, bitString] = children(spki, outer);
  const bits = readTlv(bitString!);
  return createHash('sha1')
    .update(bitString!.subarray(bits.start + 1, bits.end))
    .digest();
}

export interface CertificateTemplate {
  /** The subject Name, DER (distinguishedName, or a CSR's as it was). */
  subject: Buffer;
  /** The subject's public key as SubjectPublicKeyInfo DER. */
  publicKey: Buffer;
  notBefore: number;
  notAfter: number;
  ca?: boolean;
  keyUsages: readonly number[];
  extKeyUsages?: readonly string[];
  /** Subject alternative names as GeneralName DER (a CSR's, copied). */
  altNames?: readonly Buffer[];
}

export interface Issuer {
  /** Its subject Name, DER: the issued certificate's issuer. */
  name: Buffer;
  key: KeyObject;
  /** Its SubjectPublicKeyInfo DER (for the authority key identifier). */
  publicKey: Buffer;
}

/** Issues a certificate signed by `issuer` (self-signed when the issuer's key is the template's own). */
export function issueCertificate(template: CertificateTemplate, issuer: Issuer): Buffer {
  const algorithm = signatureAlgorithm(issuer.key);
  const extensions = [extension(OID.basicConstraints, true, der.sequence(...(template.ca ? [der.boolean(true)] : [])))];
  // No key usage at all is no extension (Go writes none for a zero KeyUsage), not an empty bit string.
  if (template.keyUsages.length > 0) extensions.push(extension(OID.keyUsage, true, keyUsage(template.keyUsages)));
  if (template.extKeyUsages?.length)
    extensions.push(extension(OID.extKeyUsage, false, der.sequence(...template.extKeyUsages.map(der.oid))));
  extensions.push(extension(OID.subjectKeyId, false, der.octets(keyIdentifier(template.publicKey))));
  if (!issuer.publicKey.equals(template.publicKey))
    extensions.push(
      extension(OID.authorityKeyId, false, der.sequence(der.implicit(0, keyIdentifier(issuer.publicKey)))),
    );
  if (template.altNames?.length)
    extensions.push(extension(OID.subjectAltName, false, der.sequence(...template.altNames)));
  const serial = randomBytes(16);
  serial[0]! &= 0x7f;
  const tbs = der.sequence(
    der.explicit(0, der.integer(2)),
    der.integer(serial),
    algorithm,
    issuer.name,
    der.sequence(der.time(template.notBefore), der.time(template.notAfter)),
    template.subject,
    template.publicKey,
    der.explicit(3, der.sequence(...extensions)),
  );
  const signature = sign('sha256', tbs, issuer.key);
  return der.sequence(tbs, algorithm, der.bits(signature));
}

export function pem(label: string, bytes: Buffer): string {
  return `-----BEGIN ${label}-----\n${bytes.toString('base64').replace(/.{64}/g, '$&\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;
}

/** The subject Name of a certificate, DER, as it is written in it (the issuer of what it signs). */
export function subjectOf(certificate: Buffer): Buffer {
  const [tbs] = children(certificate, readTlv(certificate));
  const parts = children(tbs!, readTlv(tbs!));
  // version [0], serial, signature, issuer, validity, subject.
  const offset = parts[0]![0] === 0xa0 ? 1 : 0;
  return parts[offset + 4]!;
}

export function spkiOf(key: KeyObject): Buffer {
  return createPublicKey(key).export({ type: 'spki', format: 'der' });
}

// ---------------------------------------------------------------------------------------------------
// certificate requests (PKCS #10, RFC 2986)

interface Element {
  tag: number;
  /** Where the element's encoding begins, and its content's bounds. */
  from: number;
  start: number;
  end: number;
}

function malformed(): Error {
  return new Error('x509: malformed certificate request');
}

/** A DER reader for client input: every length is checked against what is there, and anything off is malformed. */
class DerReader {
  constructor(private readonly buf: Buffer) {}

  at(from: number, limit = this.buf.length): Element {
    if (from + 2 > limit) throw malformed();
    const tag = this.buf[from]!;
    let len = this.buf[from + 1]!;
    let start = from + 2;
    if (len & 0x80) {
      const n = len & 0x7f;
      if (n === 0 || n > 4 || start + n > limit) throw malformed();
      len = 0;
      for (let i = 0; i < n; i++) len = len * 256 + this.buf[start + i]!;
      start += n;
    }
    if (start + len > limit) throw malformed();
    return { tag, from, start, end: start + len };
  }

  /** The elements directly inside `outer`. */
  items(outer: Element): Element[] {
    const out: Element[] = [];
    for (let at = outer.start; at < outer.end; ) {
      const item = this.at(at, outer.end);
      out.push(item);
      at = item.end;
    }
    return out;
  }

  content(e: Element): Buffer {
    return this.buf.subarray(e.start, e.end);
  }

  whole(e: Element): Buffer {
    return this.buf.subarray(e.from, e.end);
  }

  oid(e: Element | undefined): string {
    if (e?.tag !== 0x06 || e.end === e.start) throw malformed();
    const bytes = this.content(e);
    const parts = [Math.min(2, Math.floor(bytes[0]! / 40)), bytes[0]! - 40 * Math.min(2, Math.floor(bytes[0]! / 40))];
    let n = 0;
    for (let i = 1; i < bytes.length; i++) {
      n = n * 128 + (bytes[i]! & 0x7f);
      if ((bytes[i]! & 0x80) === 0) {
        parts.push(n);
        n = 0;
      }
    }
    return parts.join('.');
  }
}

/** A directory string as Go's asn1 reads it: UTF8, Printable, IA5 and T61 strings, and BMP strings (UTF-16BE). */
function directoryString(tag: number, bytes: Buffer): string {
  if (tag === 0x1e) {
    if (bytes.length % 2 !== 0) throw malformed();
    return Buffer.from(bytes).swap16().toString('utf16le');
  }
  return bytes.toString(tag === 0x14 ? 'latin1' : 'utf8');
}

function ipText(bytes: Buffer): string {
  if (bytes.length === 4) return [...bytes].join('.');
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(bytes.readUInt16BE(i).toString(16));
  return groups.join(':');
}

export interface CertificateRequest {
  /** The subject Name, DER, as the request wrote it (and so as the certificate will). */
  subject: Buffer;
  /** The subject's CN (the last one, as Go's pkix.Name keeps it) and its Os, in order. */
  commonName: string;
  organizations: string[];
  /** SubjectPublicKeyInfo, DER. */
  publicKey: Buffer;
  dnsNames: string[];
  emailAddresses: string[];
  ipAddresses: string[];
  uris: string[];
  /** The subject alternative names as GeneralName DER, in the order Go writes them (DNS, email, IP, URI). */
  altNames: Buffer[];
  /** What the signature covers, the signature algorithm's OID and the signature. */
  signed: Buffer;
  signatureAlgorithm: string;
  signature: Buffer;
}

const PKCS9_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
/** The GeneralName choices a certificate keeps ([1] rfc822Name, [2] dNSName, [6] URI, [7] iPAddress). */
const GENERAL_NAMES: Record<number, 'email' | 'dns' | 'uri' | 'ip'> = {
  129: 'email',
  130: 'dns',
  134: 'uri',
  135: 'ip',
};

/** x509.ParseCertificateRequest of the PEM block capihelper.ParseCSR reads; throws Go's messages. */
export function parseCertificateRequest(pemText: string): CertificateRequest {
  const block = /-----BEGIN ([A-Z0-9 ]+)-----\r?\n([\s\S]*?)-----END \1-----/.exec(pemText);
  if (block?.[1] !== 'CERTIFICATE REQUEST') throw new Error('PEM block type must be CERTIFICATE REQUEST');
  const r = new DerReader(Buffer.from(block[2]!.replace(/\s+/g, ''), 'base64'));
  const outer = r.at(0);
  if (outer.tag !== 0x30) throw malformed();
  const [info, algorithm, signature] = r.items(outer);
  if (info?.tag !== 0x30 || algorithm?.tag !== 0x30 || signature?.tag !== 0x03 || signature.end === signature.start)
    throw malformed();
  const [version, subject, spki, attributes] = r.items(info);
  if (version?.tag !== 0x02 || subject?.tag !== 0x30 || spki?.tag !== 0x30) throw malformed();
  const names = { dns: [] as Buffer[], email: [] as Buffer[], ip: [] as Buffer[], uri: [] as Buffer[] };
  const texts = { dns: [] as string[], email: [] as string[], ip: [] as string[], uri: [] as string[] };
  const request: CertificateRequest = {
    subject: r.whole(subject),
    commonName: '',
    organizations: [],
    publicKey: r.whole(spki),
    dnsNames: texts.dns,
    emailAddresses: texts.email,
    ipAddresses: texts.ip,
    uris: texts.uri,
    altNames: [],
    signed: r.whole(info),
    signatureAlgorithm: r.oid(r.items(algorithm)[0]),
    signature: r.content(signature).subarray(1),
  };
  for (const rdn of r.items(subject))
    for (const pair of r.items(rdn)) {
      const [type, value] = r.items(pair);
      if (!value) throw malformed();
      const oid = r.oid(type);
      const text = directoryString(value.tag, r.content(value));
      if (oid === OID.commonName) request.commonName = text;
      else if (oid === OID.organization) request.organizations.push(text);
    }
  if (attributes?.tag === 0xa0)
    for (const attribute of r.items(attributes)) {
      const [type, values] = r.items(attribute);
      if (r.oid(type) !== PKCS9_EXTENSION_REQUEST || values?.tag !== 0x31) continue;
      for (const extensions of r.items(values))
        for (const ext of r.items(extensions)) {
          const parts = r.items(ext);
          const value = parts.at(-1);
          if (value?.tag !== 0x04) throw malformed();
          if (r.oid(parts[0]) !== OID.subjectAltName) continue;
          for (const name of r.items(r.at(value.start, value.end))) {
            const bytes = r.content(name);
            const kind = GENERAL_NAMES[name.tag];
            if (kind === undefined) continue;
            if (kind === 'ip' && bytes.length !== 4 && bytes.length !== 16)
              throw new Error(`x509: cannot parse IP address of length ${bytes.length}`);
            names[kind].push(r.whole(name));
            texts[kind].push(kind === 'ip' ? ipText(bytes) : bytes.toString('latin1'));
          }
        }
    }
  request.altNames = [...names.dns, ...names.email, ...names.ip, ...names.uri];
  return request;
}

/** The hash of each signature algorithm CertificateRequest.CheckSignature verifies (SHA-1 included, as Go's). */
const SIGNATURE_HASHES: Record<string, string | null> = {
  '1.2.840.113549.1.1.5': 'sha1',
  '1.2.840.113549.1.1.11': 'sha256',
  '1.2.840.113549.1.1.12': 'sha384',
  '1.2.840.113549.1.1.13': 'sha512',
  '1.2.840.10045.4.1': 'sha1',
  '1.2.840.10045.4.3.2': 'sha256',
  '1.2.840.10045.4.3.3': 'sha384',
  '1.2.840.10045.4.3.4': 'sha512',
  '1.3.101.112': null,
};

/** CertificateRequest.CheckSignature: the request is signed by the key it names; a problem is Go's message. */
export function requestSignatureProblem(request: CertificateRequest): string | undefined {
  const hash = SIGNATURE_HASHES[request.signatureAlgorithm];
  if (hash === undefined) return 'x509: cannot verify signature: algorithm unimplemented';
  let key: KeyObject;
  try {
    key = createPublicKey({ key: request.publicKey, format: 'der', type: 'spki' });
  } catch {
    return 'x509: unsupported public key';
  }
  let good = false;
  try {
    good = verify(hash, request.signed, key, request.signature);
  } catch {
    good = false;
  }
  if (good) return undefined;
  if (key.asymmetricKeyType === 'ec') return 'x509: ECDSA verification failure';
  if (key.asymmetricKeyType === 'ed25519') return 'x509: Ed25519 verification failure';
  return 'crypto/rsa: verification error';
}

/** An IP address as an iPAddress GeneralName wants it: 4 or 16 bytes. */
export function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.concat(all.map((g) => Buffer.from(g.padStart(4, '0'), 'hex')));
}

export interface Validity {
  notBefore: number;
  notAfter: number;
}

/**
 * A serving certificate for DNS names and IP addresses, signed by `issuer`: an ECDSA P-256 key (made in a
 * millisecond, where RSA-2048 takes a tenth of a second and more), its PEM and the key's (SEC 1).
 */
export function issueServingCertificate(
  issuer: Issuer,
  commonName: string,
  names: { dns: Iterable<string>; ips: Iterable<string> },
  validity: Validity,
): { cert: string; key: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const cert = issueCertificate(
    {
      subject: distinguishedName(commonName),
      publicKey: spkiOf(privateKey),
      ...validity,
      keyUsages: [KEY_USAGE_BITS['digital signature']!, KEY_USAGE_BITS['key encipherment']!],
      extKeyUsages: [EXT_KEY_USAGES['server auth']!],
      altNames: [
        ...[...names.dns].map((name) => der.implicit(2, Buffer.from(name, 'latin1'))),
        ...[...names.ips].map((ip) => der.implicit(7, ipBytes(ip))),
      ],
    },
    issuer,
  );
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'sec1', format: 'pem' }).toString() };
}

/** A new self-signed CA (ECDSA P-256) named `commonName`: what it signs with, and its certificate's PEM. */
export function newCertificateAuthority(commonName: string, validity: Validity): { issuer: Issuer; cert: string } {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const name = distinguishedName(commonName);
  const issuer = { name, key: privateKey, publicKey: spkiOf(privateKey) };
  const cert = issueCertificate(
    {
      subject: name,
      publicKey: issuer.publicKey,
      ...validity,
      ca: true,
      keyUsages: [KEY_USAGE_BITS['digital signature']!, KEY_USAGE_BITS['cert sign']!, KEY_USAGE_BITS['crl sign']!],
    },
    issuer,
  );
  return { issuer, cert: pem('CERTIFICATE', cert) };
}
