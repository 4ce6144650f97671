import { createPrivateKey, generateKeyPairSync, X509Certificate, type KeyObject } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirectories } from '../api/directories.js';
import { wallClock } from '../clock/clock.js';
import type { CertificateAuthority, SigningRequest } from '../runtime/controller.js';
import {
  distinguishedName,
  issueCertificate,
  KEY_USAGE_BITS,
  pem,
  spkiOf,
  subjectOf,
  type Issuer,
} from '../api/x509.js';

/**
 * The cluster CA: the one `sim serve --tls` serves with (given as PEM), else one kept under --data (`tls/ca.crt`,
 * `tls/ca.key`), else one made for this process. One made here is an ECDSA P-256 key and a self-signed certificate
 * (CN=kube-sim-ca, ten years), which take a millisecond or two, so it is made as the cluster starts and every
 * namespace's kube-root-ca.crt is there before the first request. Key material comes from the OS's secure random
 * source, never the seeded RNG; validity is wall-clock time, which clients check against theirs.
 */
export interface CaPem {
  cert: string;
  key: string;
}

export interface CaOptions {
  /** The CA to use (`--tls`'s). */
  pem?: CaPem;
  /** Where to keep a CA made here, and to find one made before. */
  dir?: string;
}

const DAY_MS = 24 * 3600 * 1000;
/** The signers backdate what they issue by five minutes, for clients whose clocks are a little behind. */
const BACKDATE_MS = 5 * 60 * 1000;
const SHORT_MS = 8 * 3600 * 1000;

export function generateCa(): CaPem {
  const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const publicKey = spkiOf(privateKey);
  const name = distinguishedName('kube-sim-ca');
  const now = wallClock.now();
  const cert = issueCertificate(
    {
      subject: name,
      publicKey,
      // An hour of slack for clients whose clock is a little behind.
      notBefore: now - 3600 * 1000,
      notAfter: now + 3650 * DAY_MS,
      ca: true,
      keyUsages: [KEY_USAGE_BITS['digital signature']!, KEY_USAGE_BITS['cert sign']!, KEY_USAGE_BITS['crl sign']!],
    },
    { name, key: privateKey, publicKey },
  );
  return { cert: pem('CERTIFICATE', cert), key: privateKey.export({ type: 'sec1', format: 'pem' }).toString() };
}

export class ClusterCertificateAuthority implements CertificateAuthority {
  private loaded: { pem: CaPem; issuer: Issuer; cert: X509Certificate } | undefined;

  constructor(private readonly options: CaOptions = {}) {}

  async certificate(): Promise<string> {
    return this.load().pem.cert;
  }

  async sign(request: SigningRequest): Promise<string> {
    const { issuer, cert } = this.load();
    const now = wallClock.now();
    const caNotAfter = Date.parse(cert.validTo);
    const notBefore = now - BACKDATE_MS;
    if (notBefore >= caNotAfter || now >= caNotAfter)
      throw new Error(`the signer has expired: NotAfter=${new Date(caNotAfter).toISOString()}`);
    // A short-lived certificate keeps all of its time; a long one gives back what backdating added.
    const end = request.ttlMs < SHORT_MS ? now + request.ttlMs : now + request.ttlMs - BACKDATE_MS;
    const der = issueCertificate(
      {
        subject: request.subject,
        publicKey: request.publicKey,
        notBefore,
        notAfter: Math.min(end, caNotAfter),
        keyUsages: request.keyUsages,
        extKeyUsages: request.extKeyUsages,
        altNames: request.altNames,
      },
      issuer,
    );
    return pem('CERTIFICATE', der);
  }

  /** The CA's certificate and key as the signers use them; read or made on first use. */
  load(): { pem: CaPem; issuer: Issuer; cert: X509Certificate } {
    if (this.loaded) return this.loaded;
    let ca = this.options.pem;
    const dir = this.options.dir;
    if (!ca && dir !== undefined) {
      const certFile = join(dir, 'ca.crt');
      const keyFile = join(dir, 'ca.key');
      if (existsSync(certFile) && existsSync(keyFile))
        ca = { cert: readFileSync(certFile, 'utf8'), key: readFileSync(keyFile, 'utf8') };
      else {
        ca = generateCa();
        makeDirectories(dir, 0o700);
        writeFileSync(keyFile, ca.key, { mode: 0o600 });
        writeFileSync(certFile, ca.cert);
      }
    }
    ca ??= generateCa();
    const cert = new X509Certificate(ca.cert);
    const key: KeyObject = createPrivateKey(ca.key);
    this.loaded = { pem: ca, cert, issuer: { name: subjectOf(cert.raw), key, publicKey: spkiOf(key) } };
    return this.loaded;
  }
}
