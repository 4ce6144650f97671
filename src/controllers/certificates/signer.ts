import { isPlainObject, type KubeObject } from '../../api/types.js';
import {
  certificateUsages,
  parseCertificateRequest,
  requestSignatureProblem,
  type CertificateRequest,
} from '../../api/x509.js';
import { rfc3339 } from '../../clock/clock.js';
import { Resources } from '../../client/client.js';
import { ReconcileLoop, type Controller, type ControllerContext } from '../../runtime/controller.js';

/**
 * kube-controller-manager's csrsigning: an approved CertificateSigningRequest for one of the kubernetes.io signers
 * it runs gets a certificate from the cluster CA in status.certificate, or, when the request breaks that signer's
 * rules, a Failed condition saying which. Requests not approved, denied, failed, already issued or for other signers
 * are left alone. A request that does not parse or whose signature is wrong is retried with back-off, as there.
 */

export const KUBE_APISERVER_CLIENT = 'kubernetes.io/kube-apiserver-client';
export const KUBE_APISERVER_CLIENT_KUBELET = 'kubernetes.io/kube-apiserver-client-kubelet';
export const KUBELET_SERVING = 'kubernetes.io/kubelet-serving';

/** --cluster-signing-duration's default: what a request without spec.expirationSeconds gets, and the most any gets. */
const CERTIFICATE_TTL_MS = 365 * 24 * 3600 * 1000;
/** The least a request gets, twice the signers' five-minute backdating. */
const MIN_TTL_MS = 10 * 60 * 1000;

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const strings = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : []);

/** A signer's rules for a request (isRequestForSignerFn): nothing, or why it fails. */
type SignerRules = (request: CertificateRequest, usages: readonly string[]) => string | undefined;

const sameSet = (usages: readonly string[], allowed: readonly string[]): boolean => {
  const have = new Set(usages);
  return have.size === allowed.length && allowed.every((u) => have.has(u));
};

const NODE_ORGANIZATION_PROBLEM = 'subject organization is not system:nodes';
const NODE_NAME_PROBLEM = 'subject common name does not begin with system:node:';
const isNodesOnly = (r: CertificateRequest): boolean =>
  r.organizations.length === 1 && r.organizations[0] === 'system:nodes';

/** validAPIServerClientUsages: client auth, and at most digital signature and key encipherment besides. */
const apiServerClient: SignerRules = (_request, usages) => {
  for (const usage of usages)
    if (usage !== 'digital signature' && usage !== 'key encipherment' && usage !== 'client auth')
      return `invalid usage for client certificate: ${usage}`;
  return usages.includes('client auth') ? undefined : 'missing required usage for client certificate: client auth';
};

/** ValidateKubeletClientCSR: a node's identity, no subject alternative names, exactly the client usages. */
export const kubeletClientProblem: SignerRules = (r, usages) => {
  if (!isNodesOnly(r)) return NODE_ORGANIZATION_PROBLEM;
  if (r.dnsNames.length > 0) return 'DNS subjectAltNames are not allowed';
  if (r.emailAddresses.length > 0) return 'Email subjectAltNames are not allowed';
  if (r.ipAddresses.length > 0) return 'IP subjectAltNames are not allowed';
  if (r.uris.length > 0) return 'URI subjectAltNames are not allowed';
  if (!r.commonName.startsWith('system:node:')) return NODE_NAME_PROBLEM;
  if (
    !sameSet(usages, ['digital signature', 'key encipherment', 'client auth']) &&
    !sameSet(usages, ['digital signature', 'client auth'])
  )
    return 'usages did not match [client auth digital signature key encipherment]';
  return undefined;
};

/** ValidateKubeletServingCSR: a node's identity, a DNS name or IP (and no email or URI), exactly the serving usages. */
const kubeletServing: SignerRules = (r, usages) => {
  if (!isNodesOnly(r)) return NODE_ORGANIZATION_PROBLEM;
  if (r.dnsNames.length === 0 && r.ipAddresses.length === 0) return 'DNS or IP subjectAltName is required';
  if (r.emailAddresses.length > 0) return 'Email subjectAltNames are not allowed';
  if (r.uris.length > 0) return 'URI subjectAltNames are not allowed';
  if (
    !sameSet(usages, ['digital signature', 'key encipherment', 'server auth']) &&
    !sameSet(usages, ['digital signature', 'server auth'])
  )
    return 'usages did not match [digital signature key encipherment server auth]';
  if (!r.commonName.startsWith('system:node:')) return NODE_NAME_PROBLEM;
  return undefined;
};

const SIGNERS: ReadonlyMap<string, SignerRules> = new Map([
  [KUBE_APISERVER_CLIENT, apiServerClient],
  [KUBE_APISERVER_CLIENT_KUBELET, kubeletClientProblem],
  [KUBELET_SERVING, kubeletServing],
]);

/** What a request asks for, or the most a signer gives (signer.duration). */
export function certificateTtlMs(expirationSeconds: unknown): number {
  if (typeof expirationSeconds !== 'number') return CERTIFICATE_TTL_MS;
  return Math.min(CERTIFICATE_TTL_MS, Math.max(MIN_TTL_MS, expirationSeconds * 1000));
}

function conditions(csr: KubeObject): Obj[] {
  const list = obj(csr.status).conditions;
  return Array.isArray(list) ? list.map(obj) : [];
}

/** IsCertificateRequestApproved and not HasTrueCondition(Failed): what the signers act on. */
function readyToSign(csr: KubeObject): boolean {
  const types = conditions(csr);
  return (
    types.some((c) => c.type === 'Approved') &&
    !types.some((c) => c.type === 'Denied') &&
    !types.some((c) => c.type === 'Failed' && c.status === 'True')
  );
}

/**
 * The plan for one request: nothing to do, a Failed condition's message, or the signing request for the CA.
 * Throws (to be retried) when the request does not parse or is not signed by its key.
 */
export function planSigning(
  csr: KubeObject,
):
  | { action: 'none' }
  | { action: 'fail'; message: string }
  | { action: 'sign'; request: CertificateRequest; ttlMs: number } {
  if (!readyToSign(csr)) return { action: 'none' };
  const status = obj(csr.status);
  if (typeof status.certificate === 'string' && status.certificate !== '') return { action: 'none' };
  const spec = obj(csr.spec);
  const rules = SIGNERS.get(String(spec.signerName));
  if (!rules) return { action: 'none' };
  let request: CertificateRequest;
  try {
    request = parseCertificateRequest(Buffer.from(String(spec.request ?? ''), 'base64').toString('latin1'));
  } catch (err) {
    throw new Error(`unable to parse csr "${csr.metadata.name}": ${err instanceof Error ? err.message : String(err)}`);
  }
  const usages = strings(spec.usages);
  const problem = rules(request, usages);
  if (problem !== undefined) return { action: 'fail', message: problem };
  const signature = requestSignatureProblem(request);
  if (signature !== undefined)
    throw new Error(`error auto signing csr: unable to verify certificate request signature: ${signature}`);
  return { action: 'sign', request, ttlMs: certificateTtlMs(spec.expirationSeconds) };
}

export function csrSigningController(ctx: ControllerContext): Controller {
  const csrs = ctx.informers.for(Resources.certificatesigningrequests);
  const loop = new ReconcileLoop('csrsigning', ctx, reconcile);
  const sign = ctx.certificates?.sign?.bind(ctx.certificates);
  csrs.addEventHandler({
    add: (csr) => loop.queue.add(csr.metadata.name!),
    update: (_old, csr) => loop.queue.add(csr.metadata.name!),
  });

  async function reconcile(name: string): Promise<void> {
    const csr = csrs.get(undefined, name);
    if (!csr || !sign) return;
    const plan = planSigning(csr);
    if (plan.action === 'none') return;
    const status = obj(csr.status);
    if (plan.action === 'fail') {
      const now = rfc3339(ctx.clock.now());
      const failed = {
        type: 'Failed',
        status: 'True',
        reason: 'SignerValidationFailure',
        message: plan.message,
        lastUpdateTime: now,
        lastTransitionTime: now,
      };
      await ctx.client.updateStatus(Resources.certificatesigningrequests, {
        ...csr,
        status: { ...status, conditions: [...conditions(csr), failed] },
      });
      return;
    }
    const { keyUsages, extKeyUsages } = certificateUsages(strings(obj(csr.spec).usages));
    const certificate = await sign({
      subject: plan.request.subject,
      publicKey: plan.request.publicKey,
      altNames: plan.request.altNames,
      keyUsages,
      extKeyUsages,
      ttlMs: plan.ttlMs,
    });
    await ctx.client.updateStatus(Resources.certificatesigningrequests, {
      ...csr,
      status: { ...status, certificate: Buffer.from(certificate).toString('base64') },
    });
  }

  return { name: 'csrsigning', start: async () => loop.start(), stop: () => loop.stop() };
}
