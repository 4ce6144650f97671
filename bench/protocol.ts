/** Messages between bench/run.ts (which hosts the servers) and the load-generating worker thread. */

export interface ThroughputJob {
  op: 'throughput';
  origin: string;
  path: string;
  body: string;
  connections: number;
  warmupMs: number;
  durationMs: number;
  expectStatus: number;
}

export interface ThroughputResult {
  requests: number;
  errors: number;
  /** First unexpected status and body, to explain errors. */
  firstError?: string;
  elapsedMs: number;
  /** Per-request latency in ms, measured phase only. */
  latencyMs: number[];
  /** Event-loop utilisation of the worker thread during the measured phase (1 = the client was saturated). */
  clientElu: number;
}

/** Sequential GETs on one connection; the first `warmup` are not timed, the very first is reported apart. */
export interface LatencyJob {
  op: 'latency';
  origin: string;
  path: string;
  warmup: number;
  reps: number;
}

export interface LatencyResult {
  /** Latency of the first request (cold caches), ms. */
  firstMs: number;
  /** Items in the first response (parsed once to check what the query returns). */
  items: number;
  bytes: number;
  latencyMs: number[];
}

/** Walks a whole list with limit/continue; every page is timed. */
export interface PaginateJob {
  op: 'paginate';
  origin: string;
  path: string;
  limit: number;
  warmupWalks: number;
  walks: number;
}

export interface PaginateResult {
  pages: number;
  itemsPerWalk: number;
  pageLatencyMs: number[];
  walkMs: number[];
}

export type Job = ThroughputJob | LatencyJob | PaginateJob;
export type JobResult = ThroughputResult | LatencyResult | PaginateResult;

/** `measuring` and `stopped` bracket a throughput job's measured phase, so the host can time its own thread over it. */
export type WorkerMessage =
  | { type: 'measuring' }
  | { type: 'stopped' }
  | { type: 'done'; result: JobResult }
  | { type: 'failed'; message: string };
