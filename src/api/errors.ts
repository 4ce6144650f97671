/**
 * The error catalog: every failure a client can see is one of these, rendered as a Kubernetes Status with
 * the code, reason and message shape kube-apiserver uses (k8s.io/apimachinery/pkg/api/errors).
 */
export interface GroupResource {
  group: string;
  resource: string;
}

export interface StatusCause {
  reason: string;
  message: string;
  field?: string;
}

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  uid?: string;
  causes?: StatusCause[];
  retryAfterSeconds?: number;
}

export interface Status {
  kind: 'Status';
  apiVersion: 'v1';
  metadata: Record<string, never>;
  status: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  details?: StatusDetails;
  code: number;
}

export class ApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: StatusDetails,
  ) {
    // A client error (4xx) is an answer, not a fault: in-process controllers meet thousands of NotFound and
    // Conflict errors, and capturing a stack is costly. Server errors keep theirs (the server logs it).
    const stackTraceLimit = Error.stackTraceLimit;
    if (code < 500) Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = stackTraceLimit;
    this.name = 'ApiError';
  }

  /**
   * The request itself is wrong (400 BadRequest, 422 Invalid): sent again unchanged, it gets the same answer, so a
   * reconcile that got this is not retried until what it reads changes. Everything else may pass on a retry: a
   * conflict or a timeout, and also a 403 or 404 (quota freed, a namespace created, a cache catching up).
   */
  get terminal(): boolean {
    return this.code === 400 || this.code === 422;
  }

  /** The Status as kube-apiserver writes it: Go's field order, and no empty field (omitempty). */
  toStatus(): Status {
    const status: Status = { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure' } as Status;
    if (this.message) status.message = this.message;
    if (this.reason) status.reason = this.reason;
    const details = this.details && orderedDetails(this.details);
    if (details) status.details = details;
    status.code = this.code;
    return status;
  }
}

/**
 * StatusDetails in metav1's field order (name, group, kind, uid, causes, retryAfterSeconds) without its empty fields,
 * as encoding/json writes the struct; undefined when nothing is left (the pointer is nil).
 */
export function orderedDetails(details: StatusDetails): StatusDetails | undefined {
  const out: StatusDetails = {};
  if (details.name) out.name = details.name;
  if (details.group) out.group = details.group;
  if (details.kind) out.kind = details.kind;
  if (details.uid) out.uid = details.uid;
  if (details.causes?.length) out.causes = details.causes.map(orderedCause);
  if (details.retryAfterSeconds) out.retryAfterSeconds = details.retryAfterSeconds;
  return out;
}

function orderedCause(cause: StatusCause): StatusCause {
  const out = {} as StatusCause;
  if (cause.reason) out.reason = cause.reason;
  if (cause.message) out.message = cause.message;
  if (cause.field) out.field = cause.field;
  return out;
}

/** The call's result, or undefined when what it acted on is gone (a 404): a delete or status write racing a delete. */
export async function ignoreNotFound<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (err) {
    if (err instanceof ApiError && err.code === 404) return undefined;
    throw err;
  }
}

/** "configmaps" for the core group, "deployments.apps" for others: how Kubernetes names a resource in messages. */
export function qualifiedResource(gr: GroupResource): string {
  return gr.group ? `${gr.resource}.${gr.group}` : gr.resource;
}

function detailsFor(gr: GroupResource, name: string): StatusDetails {
  const details: StatusDetails = { name, kind: gr.resource };
  if (gr.group) details.group = gr.group;
  return details;
}

export const Errors = {
  notFound(gr: GroupResource, name: string): ApiError {
    return new ApiError(404, 'NotFound', `${qualifiedResource(gr)} "${name}" not found`, detailsFor(gr, name));
  },

  alreadyExists(gr: GroupResource, name: string): ApiError {
    return new ApiError(
      409,
      'AlreadyExists',
      `${qualifiedResource(gr)} "${name}" already exists`,
      detailsFor(gr, name),
    );
  },

  conflict(
    gr: GroupResource,
    name: string,
    why = 'the object has been modified; please apply your changes to the latest version and try again',
  ): ApiError {
    return new ApiError(
      409,
      'Conflict',
      `Operation cannot be fulfilled on ${qualifiedResource(gr)} "${name}": ${why}`,
      detailsFor(gr, name),
    );
  },

  /** 422 with one cause per field error; `kind` is the object's Kind, as in `ConfigMap "x" is invalid: …`. */
  invalid(group: string, kind: string, name: string, causes: StatusCause[]): ApiError {
    const rendered = causes.map((c) => (c.field ? `${c.field}: ${c.message}` : c.message));
    const summary = rendered.length === 1 ? rendered[0] : `[${rendered.join(', ')}]`;
    const details: StatusDetails = { name, kind, causes };
    if (group) details.group = group;
    return new ApiError(422, 'Invalid', `${kind}${group ? `.${group}` : ''} "${name}" is invalid: ${summary}`, details);
  },

  badRequest(message: string): ApiError {
    return new ApiError(400, 'BadRequest', message);
  },

  /** apierrors.NewForbidden: `pods "x" is forbidden: …`, `pods is forbidden: …`, and `forbidden: …` without a resource (a path). */
  forbidden(gr: GroupResource, name: string, why: string): ApiError {
    if (!gr.resource) return new ApiError(403, 'Forbidden', `forbidden: ${why}`, {});
    const target = name ? `${qualifiedResource(gr)} "${name}"` : qualifiedResource(gr);
    const details = detailsFor(gr, name);
    if (!name) delete details.name;
    return new ApiError(403, 'Forbidden', `${target} is forbidden: ${why}`, details);
  },

  /** 401 for a request without valid credentials where anonymous access is not allowed. */
  unauthorized(): ApiError {
    return new ApiError(401, 'Unauthorized', 'Unauthorized');
  },

  methodNotAllowed(): ApiError {
    return new ApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');
  },

  notAcceptable(): ApiError {
    return new ApiError(
      406,
      'NotAcceptable',
      'only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf',
    );
  },

  /** A watch or continue token from before the retained history. */
  expired(message: string): ApiError {
    return new ApiError(410, 'Expired', message);
  },

  tooLarge(limitBytes: number): ApiError {
    return new ApiError(413, 'RequestEntityTooLarge', `Request entity too large: limit is ${limitBytes}`);
  },

  unsupportedMediaType(contentType: string): ApiError {
    return new ApiError(
      415,
      'UnsupportedMediaType',
      `the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/vnd.kubernetes.protobuf, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got "${contentType}")`,
    );
  },

  unprocessable(message: string): ApiError {
    return new ApiError(422, 'Invalid', message);
  },

  pathNotFound(): ApiError {
    return new ApiError(404, 'NotFound', 'the server could not find the requested resource');
  },

  /**
   * A node's kubelet that cannot be reached (pods/log, exec, attach, portforward on a failed node): kube-apiserver
   * hands on the dial error as it is (ErrorToAPIStatus of a non-Status error: 500, StatusReasonUnknown, which is
   * empty). An answer about the cluster, not a fault of the server: it is not logged as an internal error.
   */
  kubeletUnreachable(host: string, path: string): ApiError {
    return new ApiError(
      500,
      '',
      `Get "https://${host}:10250/${path}": dial tcp ${host}:10250: connect: connection refused`,
    );
  },

  internal(message: string): ApiError {
    return new ApiError(500, 'InternalError', `Internal error occurred: ${message}`, {
      causes: [{ reason: '', message }],
    });
  },

  /** storage.NewTooLargeResourceVersionError: a list or watch from a resourceVersion the server has not reached. */
  resourceVersionTooLarge(requested: number, current: number): ApiError {
    return new ApiError(504, 'Timeout', `Too large resource version: ${requested}, current: ${current}`, {
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      retryAfterSeconds: 1,
    });
  },

  timeout(message: string): ApiError {
    return new ApiError(504, 'Timeout', message);
  },
} as const;

/** Field errors in the shape of k8s.io/apimachinery/pkg/util/validation/field. */
export const FieldErrors = {
  required(field: string, detail: string): StatusCause {
    return { reason: 'FieldValueRequired', message: `Required value${detail ? `: ${detail}` : ''}`, field };
  },
  invalid(field: string, value: unknown, detail: string): StatusCause {
    return { reason: 'FieldValueInvalid', message: `Invalid value: ${renderValue(value)}: ${detail}`, field };
  },
  notSupported(field: string, value: unknown, supported: string[]): StatusCause {
    return {
      reason: 'FieldValueNotSupported',
      message: `Unsupported value: ${renderValue(value)}: supported values: ${supported.map((s) => `"${s}"`).join(', ')}`,
      field,
    };
  },
  forbidden(field: string, detail: string): StatusCause {
    return { reason: 'FieldValueForbidden', message: `Forbidden: ${detail}`, field };
  },
  tooLong(field: string, max: number): StatusCause {
    return { reason: 'FieldValueTooLong', message: `Too long: must have at most ${max} bytes`, field };
  },
  duplicate(field: string, value: unknown): StatusCause {
    return { reason: 'FieldValueDuplicate', message: `Duplicate value: ${renderValue(value)}`, field };
  },
  notFound(field: string, value: unknown): StatusCause {
    return { reason: 'FieldValueNotFound', message: `Not found: ${renderValue(value)}`, field };
  },
} as const;

const GO_ESCAPES: Record<string, string> = {
  '\x07': '\\a',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
  '"': '\\"',
  '\\': '\\\\',
};

/**
 * strconv.Quote (what `%q` prints in field errors): `\a`, `\n`… and `\x00` for ASCII controls, `\u0085` for the
 * code points Go does not print (C1 controls, separators, format characters), the rest as it is.
 */
export function goQuote(text: string): string {
  let out = '"';
  for (const ch of text) {
    const escaped = GO_ESCAPES[ch];
    if (escaped) out += escaped;
    else if (ch < ' ' || ch === '\x7f') out += `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`;
    else if (/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}]|[^\P{Zs} ]/u.test(ch)) {
      const code = ch.codePointAt(0)!;
      out += code > 0xffff ? `\\U${code.toString(16).padStart(8, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
    } else out += ch;
  }
  return `${out}"`;
}

function renderValue(value: unknown): string {
  if (typeof value === 'string') return goQuote(value);
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (value === null || value === undefined) return 'null';
  return JSON.stringify(value);
}

/**
 * A write of the server's own that may lose a race harmlessly (the object changed or went meanwhile, 409 or 404; or,
 * with several API servers over etcd, another one made it first): the loss is no error, the racing change brings
 * whoever cares back. Other failures are thrown, or rejected when the write waited.
 */
export function raceTolerant(write: () => unknown): unknown {
  const lostRace = (err: unknown): undefined => {
    if (err instanceof ApiError && (err.code === 409 || err.code === 404)) return undefined;
    throw err;
  };
  try {
    const result = write();
    return result instanceof Promise ? result.catch(lostRace) : result;
  } catch (err) {
    return lostRace(err);
  }
}
