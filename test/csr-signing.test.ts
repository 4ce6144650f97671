import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import type { KubeObject } from '../src/api/types.js';
import { certificateUsages, parseCertificateRequest, requestSignatureProblem } from '../src/api/x509.js';
import { ClusterCertificateAuthority } from '../src/cluster/certificate-authority.js';
import { csrDeleteAt } from '../src/controllers/certificates/cleaner.js';
import { certificateTtlMs, planSigning } from '../src/controllers/certificates/signer.js';

// The csrsigning controller's plan and the CA's signing, without a cluster: requests made by openssl as a user makes
// them, each signer's rules with kube-controller-manager's messages, and certificates that openssl and Node read back.

const OPENSSL = '/usr/bin/openssl';
const missing = existsSync(OPENSSL) ? undefined : `openssl not installed (${OPENSSL}): no certificate requests to make`;
const dir = mkdtempSync(join(tmpdir(), 'kube-sim-csr-'));
after(() => rmSync(dir, { recursive: true, force: true }));

let serial = 0;
/** A key and a PEM request for `subject` (and subjectAltNames such as `DNS:node-1,IP:10.0.0.1`), made by openssl. */
function request(subject: string, options: { san?: string; key?: 'rsa' | 'ec' | 'ed25519' } = {}): string {
  const name = join(dir, `r${serial++}`);
  const key = options.key ?? 'ec';
  const algorithm =
    key === 'rsa'
      ? ['-newkey', 'rsa:2048']
      : key === 'ed25519'
        ? ['-newkey', 'ed25519']
        : ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1'];
  const san = options.san ? ['-addext', `subjectAltName=${options.san}`] : [];
  execFileSync(
    OPENSSL,
    ['req', '-new', ...algorithm, '-nodes', '-keyout', `${name}.key`, '-subj', subject, ...san, '-out', `${name}.csr`],
    {
      stdio: 'ignore',
    },
  );
  return readFileSync(`${name}.csr`, 'utf8');
}

function csr(pemText: string, signerName: string, usages: string[], status: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: 'certificates.k8s.io/v1',
    kind: 'CertificateSigningRequest',
    metadata: { name: 'r', creationTimestamp: '2026-01-01T12:00:00Z' },
    spec: { request: Buffer.from(pemText).toString('base64'), signerName, usages },
    status,
  };
}

const approved = { conditions: [{ type: 'Approved', status: 'True', reason: 'KubectlApprove' }] };

describe('certificate signing requests', { skip: missing ?? false }, () => {
  it('a request reads as Go reads it: the subject, the names, the key; the signature checks out', () => {
    const text = request('/O=dev/O=qa/CN=jane', {
      san: 'DNS:jane.example.com,IP:10.0.0.7,email:jane@example.com,URI:spiffe://x/jane',
    });
    const r = parseCertificateRequest(text);
    assert.equal(r.commonName, 'jane');
    assert.deepEqual(r.organizations, ['dev', 'qa']);
    assert.deepEqual(r.dnsNames, ['jane.example.com']);
    assert.deepEqual(r.ipAddresses, ['10.0.0.7']);
    assert.deepEqual(r.emailAddresses, ['jane@example.com']);
    assert.deepEqual(r.uris, ['spiffe://x/jane']);
    assert.equal(requestSignatureProblem(r), undefined);
    for (const key of ['rsa', 'ed25519'] as const)
      assert.equal(requestSignatureProblem(parseCertificateRequest(request('/CN=k', { key }))), undefined, key);
    // A request whose signature is not its key's.
    const other = parseCertificateRequest(request('/CN=jane'));
    assert.equal(requestSignatureProblem({ ...r, signature: other.signature }), 'x509: ECDSA verification failure');

    assert.throws(() => parseCertificateRequest('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'), {
      message: 'PEM block type must be CERTIFICATE REQUEST',
    });
  });

  it('any damage to a request is a malformed request, never another exception', () => {
    const good = Buffer.from(
      request('/O=system:nodes/CN=system:node:n1', { san: 'DNS:n1,IP:10.0.0.1' }).split('\n').slice(1, -2).join(''),
      'base64',
    );
    const pemOf = (der: Uint8Array) =>
      `-----BEGIN CERTIFICATE REQUEST-----\n${Buffer.from(der).toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(good.length - 1), fc.integer({ min: 0, max: 255 })), { maxLength: 4 }),
        fc.nat(good.length),
        (edits, cut) => {
          const der = Buffer.from(good.subarray(0, Math.max(1, cut)));
          for (const [at, byte] of edits) if (at < der.length) der[at] = byte;
          try {
            const r = parseCertificateRequest(pemOf(der));
            requestSignatureProblem(r);
          } catch (err) {
            assert.ok(err instanceof Error && /^x509: /.test(err.message), String(err));
          }
        },
      ),
      { numRuns: 2000, seed: Number(process.env.KUBE_SIM_TEST_SEED ?? 24) },
    );
  });

  it("each signer's rules, with kube-controller-manager's messages", () => {
    const client = request('/O=dev/CN=jane');
    const node = request('/O=system:nodes/CN=system:node:n1', { san: 'DNS:n1,IP:10.0.0.1' });
    const fail = (o: KubeObject) => {
      const plan = planSigning(o);
      return plan.action === 'fail' ? plan.message : plan.action;
    };
    const apiClient = 'kubernetes.io/kube-apiserver-client';
    assert.equal(fail(csr(client, apiClient, ['client auth'], approved)), 'sign');
    assert.equal(
      fail(csr(client, apiClient, ['digital signature', 'key encipherment', 'client auth'], approved)),
      'sign',
    );
    assert.equal(
      fail(csr(client, apiClient, ['client auth', 'server auth'], approved)),
      'invalid usage for client certificate: server auth',
    );
    assert.equal(
      fail(csr(client, apiClient, ['digital signature'], approved)),
      'missing required usage for client certificate: client auth',
    );

    const serving = 'kubernetes.io/kubelet-serving';
    assert.equal(fail(csr(node, serving, ['digital signature', 'server auth'], approved)), 'sign');
    assert.equal(
      fail(csr(client, serving, ['digital signature', 'server auth'], approved)),
      'subject organization is not system:nodes',
    );
    assert.equal(
      fail(csr(request('/O=system:nodes/CN=system:node:n1'), serving, ['digital signature', 'server auth'], approved)),
      'DNS or IP subjectAltName is required',
    );
    assert.equal(
      fail(csr(node, serving, ['server auth'], approved)),
      'usages did not match [digital signature key encipherment server auth]',
    );
    assert.equal(
      fail(
        csr(
          request('/O=system:nodes/CN=n1', { san: 'DNS:n1' }),
          serving,
          ['digital signature', 'server auth'],
          approved,
        ),
      ),
      'subject common name does not begin with system:node:',
    );

    const kubelet = 'kubernetes.io/kube-apiserver-client-kubelet';
    assert.equal(
      fail(csr(request('/O=system:nodes/CN=system:node:n1'), kubelet, ['digital signature', 'client auth'], approved)),
      'sign',
    );
    assert.equal(
      fail(csr(node, kubelet, ['digital signature', 'client auth'], approved)),
      'DNS subjectAltNames are not allowed',
    );

    // Nothing to do: not approved, denied, failed, issued, or another signer's.
    assert.equal(fail(csr(client, apiClient, ['client auth'])), 'none');
    assert.equal(
      fail(
        csr(client, apiClient, ['client auth'], {
          conditions: [...approved.conditions, { type: 'Failed', status: 'True' }],
        }),
      ),
      'none',
    );
    assert.equal(fail(csr(client, apiClient, ['client auth'], { ...approved, certificate: 'eA==' })), 'none');
    assert.equal(fail(csr(client, 'example.com/my-signer', ['client auth'], approved)), 'none');
    // A request that does not parse is an error to retry, as in kube-controller-manager.
    assert.throws(() => planSigning(csr('garbage', apiClient, ['client auth'], approved)), {
      message: 'unable to parse csr "r": PEM block type must be CERTIFICATE REQUEST',
    });

    assert.equal(certificateTtlMs(undefined), 365 * 24 * 3600 * 1000);
    assert.equal(certificateTtlMs(60), 600 * 1000);
    assert.equal(certificateTtlMs(86400), 86400 * 1000);
  });

  it('the CA signs what the request names, with the usages asked for, valid for the time asked for', async () => {
    const ca = new ClusterCertificateAuthority();
    const caCert = new X509Certificate(await ca.certificate());
    const r = parseCertificateRequest(request('/O=system:nodes/CN=system:node:n1', { san: 'DNS:n1,IP:10.0.0.1' }));
    const { keyUsages, extKeyUsages } = certificateUsages(['server auth', 'key encipherment', 'digital signature']);
    const before = Date.now();
    const pemText = await ca.sign({
      subject: r.subject,
      publicKey: r.publicKey,
      altNames: r.altNames,
      keyUsages,
      extKeyUsages,
      ttlMs: 3600 * 1000,
    });
    const cert = new X509Certificate(pemText);
    assert.ok(cert.checkIssued(caCert) && cert.verify(caCert.publicKey));
    assert.equal(cert.subject, 'O=system:nodes\nCN=system:node:n1');
    assert.equal(cert.subjectAltName, 'DNS:n1, IP Address:10.0.0.1');
    assert.deepEqual(cert.keyUsage, ['1.3.6.1.5.5.7.3.1']);
    assert.equal(cert.ca, false);
    // Backdated five minutes; an hour is short-lived, so it ends an hour from now.
    const notBefore = Date.parse(cert.validFrom);
    const notAfter = Date.parse(cert.validTo);
    assert.ok(Math.abs(notBefore - (before - 5 * 60_000)) < 5000, cert.validFrom);
    assert.ok(Math.abs(notAfter - (before + 3600_000)) < 5000, cert.validTo);
    const text = execFileSync(OPENSSL, ['x509', '-noout', '-text'], { input: pemText }).toString();
    assert.match(text, /X509v3 Key Usage: critical\n\s+Digital Signature, Key Encipherment\n/);
    // A year is long: the five backdated minutes come off its end.
    const long = new X509Certificate(
      await ca.sign({
        subject: r.subject,
        publicKey: r.publicKey,
        altNames: [],
        keyUsages: [],
        extKeyUsages: [],
        ttlMs: certificateTtlMs(undefined),
      }),
    );
    assert.ok(
      Math.abs(Date.parse(long.validTo) - (before + certificateTtlMs(undefined) - 5 * 60_000)) < 5000,
      long.validTo,
    );
    assert.doesNotMatch(
      execFileSync(OPENSSL, ['x509', '-noout', '-text'], { input: long.toString() }).toString(),
      /Key Usage/,
    );
  });

  it('csrcleaner: an issued or denied request goes an hour after, an unhandled one after a day, a failed one stays', () => {
    const at = (t: string) => Date.parse(t);
    const made = csr('', 'x/y', []);
    assert.equal(csrDeleteAt(made), at('2026-01-02T12:00:00Z'));
    const denied = csr('', 'x/y', [], {
      conditions: [{ type: 'Denied', status: 'True', lastUpdateTime: '2026-01-01T12:30:00Z' }],
    });
    assert.equal(csrDeleteAt(denied), at('2026-01-01T13:30:00Z'));
    const approvedAt = { type: 'Approved', status: 'True', lastUpdateTime: '2026-01-01T12:10:00Z' };
    assert.equal(csrDeleteAt(csr('', 'x/y', [], { conditions: [approvedAt] })), undefined);
    assert.equal(
      csrDeleteAt(csr('', 'x/y', [], { conditions: [approvedAt, { type: 'Failed', status: 'True' }] })),
      undefined,
    );
    assert.equal(
      csrDeleteAt(csr('', 'x/y', [], { conditions: [approvedAt], certificate: 'eA==' })),
      at('2026-01-01T13:10:00Z'),
    );
  });
});
