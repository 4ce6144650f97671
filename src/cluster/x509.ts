import { createHash, createPublicKey, randomBytes, sign, type KeyObject } from 'node:crypto';

/**
 * X.509 certificates written with node:crypto and a DER writer of a few lines: what the cluster CA needs at start
 * (a self-signed CA) and what its signers issue. An X.509 library costs more to import than the whole of this takes
 * to run, and the CA is made while the server starts, so it is written by hand here; reading CSRs, which needs a
 * real ASN.1 parser, is left to pkijs, loaded when the first CSR is signed.
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

export const EXT_KEY_USAGES: Record<string, string> = {
  'server auth': '1.3.6.1.5.5.7.3.1',
  'client auth': '1.3.6.1.5.5.7.3.2',
  'code signing': '1.3.6.1.5.5.7.3.3',
  'email protection': '1.3.6.1.5.5.7.3.4',
  timestamping: '1.3.6.1.5.5.7.3.8',
  'ocsp signing': '1.3.6.1.5.5.7.3.9',
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
};

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
  const extensions = [
    extension(OID.basicConstraints, true, der.sequence(...(template.ca ? [der.boolean(true)] : []))),
    extension(OID.keyUsage, true, keyUsage(template.keyUsages)),
  ];
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
