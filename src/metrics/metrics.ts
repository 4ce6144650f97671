import { Registry } from 'prom-client';
import {
  CounterFamily,
  exponentialBuckets,
  GaugeFamily,
  HistogramFamily,
  type CounterSeries,
  type HistogramSeries,
  type Labels,
} from './families.js';

/** What `/metrics` answers with: the Prometheus text format 0.0.4, as kube-apiserver serves it. */
export const EXPOSITION_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** kube-apiserver's apiserver_request_duration_seconds buckets (endpoints/metrics/metrics.go). */
export const REQUEST_DURATION_BUCKETS: readonly number[] = [
  0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 45, 60,
];

/** client-go's work queue duration buckets: 10 ns to 10 s, by tens (workqueue/metrics.go). */
export const WORK_QUEUE_BUCKETS: readonly number[] = exponentialBuckets(10e-9, 10, 10);

/** The verbs apiserver_request_total reports (metrics.go's validRequestMethods as kube-apiserver reports them). */
export type RequestVerb = 'GET' | 'LIST' | 'WATCH' | 'POST' | 'PUT' | 'PATCH' | 'APPLY' | 'DELETE' | 'CONNECT';
/** metrics.go's CleanScope: a named object (or a create), a namespace, or the whole cluster. */
export type RequestScope = 'resource' | 'namespace' | 'cluster';

/** metrics.go's cleanDryRun: none, All (the one valid value), or invalid. */
export type DryRun = '' | 'All' | 'invalid';

const SCOPE_INDEX: Readonly<Record<RequestScope, number>> = { resource: 0, namespace: 1, cluster: 2 };
const DRY_RUN_INDEX: Readonly<Record<DryRun, number>> = { '': 0, All: 1, invalid: 2 };

/** One (verb, dry run, group, version, resource, subresource, scope) of API requests: their counts by code and durations. */
export class RequestSeries {
  private readonly codes = new Map<number, CounterSeries>();
  private open: CounterSeries | undefined;
  /** WATCH and CONNECT requests are long-running: counted open while they are, not in flight. */
  readonly longRunningVerb: boolean;

  constructor(
    private readonly families: RequestFamilies,
    private readonly labels: RequestLabels,
    readonly duration: HistogramSeries,
  ) {
    this.longRunningVerb = labels.verb === 'WATCH' || labels.verb === 'CONNECT';
  }

  /** A request of this series answered with `code` after `seconds`. */
  done(code: number, seconds: number): void {
    let counter = this.codes.get(code);
    if (!counter) {
      const { component, dry_run, group, resource, scope, subresource, verb, version } = this.labels;
      const labels = { code: String(code), component, dry_run, group, resource, scope, subresource, verb, version };
      this.codes.set(code, (counter = this.families.total.series(labels)));
    }
    counter.value++;
    this.duration.observe(seconds);
  }

  /** The gauge of open long-running requests like these (watches, CONNECTs), whatever their dry run. */
  get longRunning(): CounterSeries {
    if (!this.open) {
      const { component, group, resource, scope, subresource, verb, version } = this.labels;
      this.open = this.families.longRunning.series({ component, group, resource, scope, subresource, verb, version });
    }
    return this.open;
  }
}

/** apiserver_request_duration_seconds' labels (apiserver_request_total's but the code). */
interface RequestLabels {
  readonly component: string;
  readonly dry_run: string;
  readonly group: string;
  readonly resource: string;
  readonly scope: string;
  readonly subresource: string;
  readonly verb: string;
  readonly version: string;
}

interface RequestFamilies {
  total: CounterFamily;
  durations: HistogramFamily;
  longRunning: GaugeFamily;
}

/**
 * Cells found by a kind's table row, a subresource, a verb and a small index, through nested maps keyed by values
 * the server holds anyway: finding one allocates nothing once it exists.
 */
class RequestCells<C> {
  private readonly byKind = new WeakMap<object, Map<string, Map<RequestVerb, Array<C | undefined>>>>();

  /** The cells of a kind, subresource and verb (made on first use). */
  cells(kind: object, subresource: string, verb: RequestVerb): Array<C | undefined> {
    let bySubresource = this.byKind.get(kind);
    if (!bySubresource) this.byKind.set(kind, (bySubresource = new Map()));
    let byVerb = bySubresource.get(subresource);
    if (!byVerb) bySubresource.set(subresource, (byVerb = new Map()));
    let cells = byVerb.get(verb);
    if (!cells) byVerb.set(verb, (cells = []));
    return cells;
  }
}

/**
 * kube-apiserver's request metrics. A request's series is found by nested lookups on values the server already
 * holds (its kind's table row, verb and scope constants), so counting a request allocates nothing once its
 * series exists.
 */
export class ApiRequestMetrics {
  private readonly requests = new RequestCells<RequestSeries>();
  private readonly families: RequestFamilies;
  /** Requests being served now, and the most at once since the last scrape, read-only and mutating. */
  private readonly inflight = { readOnly: 0, mutating: 0, maxReadOnly: 0, maxMutating: 0 };

  constructor(registry: Registry) {
    const total = new CounterFamily(
      registry,
      'apiserver_request_total',
      'Counter of apiserver requests broken out for each verb, dry run value, group, version, resource, scope, component, and HTTP response code.',
      ['code', 'component', 'dry_run', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'],
    );
    const durations = new HistogramFamily(
      registry,
      'apiserver_request_duration_seconds',
      'Response latency distribution in seconds for each verb, dry run value, group, version, resource, subresource, scope and component.',
      ['component', 'dry_run', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'],
      REQUEST_DURATION_BUCKETS,
    );
    const longRunning = new GaugeFamily(
      registry,
      'apiserver_longrunning_requests',
      'Gauge of all active long-running apiserver requests broken out by verb, group, version, resource, scope and component. Not all requests are tracked this way.',
      ['component', 'group', 'resource', 'scope', 'subresource', 'verb', 'version'],
    );
    this.families = { total, durations, longRunning };
    const inflight = this.inflight;
    new GaugeFamily(
      registry,
      'apiserver_current_inflight_requests',
      'Maximal number of currently used inflight request limit of this apiserver per request kind in last second.',
      ['request_kind'],
      (set) => {
        set({ request_kind: 'mutating' }, inflight.maxMutating);
        set({ request_kind: 'readOnly' }, inflight.maxReadOnly);
        inflight.maxMutating = inflight.mutating;
        inflight.maxReadOnly = inflight.readOnly;
      },
    );
  }

  /** The series a request to `kind` (any object that stands for the resource: the registry's row) is counted in. */
  series(
    kind: object,
    group: string,
    version: string,
    resource: string,
    subresource: string,
    verb: RequestVerb,
    scope: RequestScope,
    dryRun: DryRun,
  ): RequestSeries {
    const cells = this.requests.cells(kind, subresource, verb);
    const index = SCOPE_INDEX[scope] * 3 + DRY_RUN_INDEX[dryRun];
    let series = cells[index];
    if (!series) {
      const labels = { component: 'apiserver', dry_run: dryRun, group, resource, scope, subresource, verb, version };
      cells[index] = series = new RequestSeries(this.families, labels, this.families.durations.series(labels));
    }
    return series;
  }

  /** A request that is not long-running starts being served. */
  begin(mutating: boolean): void {
    const f = this.inflight;
    if (mutating) {
      if (++f.mutating > f.maxMutating) f.maxMutating = f.mutating;
    } else if (++f.readOnly > f.maxReadOnly) f.maxReadOnly = f.readOnly;
  }

  end(mutating: boolean): void {
    if (mutating) this.inflight.mutating--;
    else this.inflight.readOnly--;
  }
}

/** client-go's work queue metrics for one queue name (queues of one name share them, as in client-go). */
export class WorkQueueMetrics {
  readonly depth: CounterSeries;
  readonly adds: CounterSeries;
  readonly retries: CounterSeries;
  readonly queueDuration: HistogramSeries;
  readonly workDuration: HistogramSeries;

  constructor(families: WorkQueueFamilies, name: string) {
    const labels = { name };
    this.depth = families.depth.series(labels);
    this.adds = families.adds.series(labels);
    this.retries = families.retries.series(labels);
    this.queueDuration = families.queueDuration.series(labels);
    this.workDuration = families.workDuration.series(labels);
  }
}

interface WorkQueueFamilies {
  depth: GaugeFamily;
  adds: CounterFamily;
  retries: CounterFamily;
  queueDuration: HistogramFamily;
  workDuration: HistogramFamily;
}

/** What kube-scheduler reports of its queues and attempts. */
export class SchedulerMetrics {
  readonly scheduled: CounterSeries;
  readonly unschedulable: CounterSeries;
  readonly error: CounterSeries;

  constructor(
    registry: Registry,
    profile: string,
    pending: () => { active: number; backoff: number; unschedulable: number },
  ) {
    const attempts = new CounterFamily(
      registry,
      'scheduler_schedule_attempts_total',
      "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled, while 'error' means an internal scheduler problem.",
      ['profile', 'result'],
    );
    this.scheduled = attempts.series({ profile, result: 'scheduled' });
    this.unschedulable = attempts.series({ profile, result: 'unschedulable' });
    this.error = attempts.series({ profile, result: 'error' });
    new GaugeFamily(
      registry,
      'scheduler_pending_pods',
      "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the scheduler attempted to schedule and failed.",
      ['queue'],
      (set) => {
        const counts = pending();
        set({ queue: 'active' }, counts.active);
        set({ queue: 'backoff' }, counts.backoff);
        set({ queue: 'unschedulable' }, counts.unschedulable);
      },
    );
  }
}

/**
 * One cluster's metrics (a process may run several clusters: tests do): the API server's, the work queues' of its
 * controllers, the scheduler's and what the cluster keeps of its objects. `/metrics` prints them all, as one
 * scrape of each component of a cluster would.
 */
export class Metrics {
  private readonly registry = new Registry();
  readonly requests = new ApiRequestMetrics(this.registry);
  private readonly workQueueFamilies: WorkQueueFamilies;
  private readonly workQueues = new Map<string, WorkQueueMetrics>();
  private schedulerMetrics: SchedulerMetrics | undefined;

  constructor() {
    const r = this.registry;
    this.workQueueFamilies = {
      depth: new GaugeFamily(r, 'workqueue_depth', 'Current depth of workqueue', ['name']),
      adds: new CounterFamily(r, 'workqueue_adds_total', 'Total number of adds handled by workqueue', ['name']),
      retries: new CounterFamily(r, 'workqueue_retries_total', 'Total number of retries handled by workqueue', [
        'name',
      ]),
      queueDuration: new HistogramFamily(
        r,
        'workqueue_queue_duration_seconds',
        'How long in seconds an item stays in workqueue before being requested.',
        ['name'],
        WORK_QUEUE_BUCKETS,
      ),
      workDuration: new HistogramFamily(
        r,
        'workqueue_work_duration_seconds',
        'How long in seconds processing an item from workqueue takes.',
        ['name'],
        WORK_QUEUE_BUCKETS,
      ),
    };
  }

  /** The metrics of the work queue(s) called `name`. */
  workQueue(name: string): WorkQueueMetrics {
    let m = this.workQueues.get(name);
    if (!m) this.workQueues.set(name, (m = new WorkQueueMetrics(this.workQueueFamilies, name)));
    return m;
  }

  /** The scheduler's metrics (one scheduler per cluster; a second one shares them). */
  scheduler(
    profile: string,
    pending: () => { active: number; backoff: number; unschedulable: number },
  ): SchedulerMetrics {
    this.schedulerMetrics ??= new SchedulerMetrics(this.registry, profile, pending);
    return this.schedulerMetrics;
  }

  /** A gauge read at scrape time from state kept anyway (object counts per resource, pods per phase). */
  gauge(
    name: string,
    help: string,
    labelNames: readonly string[],
    read: (set: (labels: Labels, value: number) => void) => void,
  ): void {
    new GaugeFamily(this.registry, name, help, labelNames, read);
  }

  /** The text exposition of every metric. */
  exposition(): Promise<string> {
    return this.registry.metrics();
  }
}
