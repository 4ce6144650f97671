import { Counter, Gauge, Histogram, type MetricType, type Registry } from 'prom-client';

/**
 * Metric families whose series are plain objects: a caller finds its series once (by its label values) and keeps
 * it, and counting is then `series.value++` or `series.observe(seconds)` — no label hashing, no allocation. The
 * families hand their series to prom-client's registry at scrape time in the shape its own metrics do, so the
 * text exposition (escaping, `_bucket`/`_sum`/`_count`, `le`) is the library's.
 *
 * Labels are printed in the order given; callers give them sorted by name, as Go's client prints them.
 */
export type Labels = Readonly<Record<string, string>>;

export interface CounterSeries {
  readonly labels: Labels;
  value: number;
}

export class HistogramSeries {
  /** Observations per bucket (not cumulative), the last one above every bound (+Inf). */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    readonly labels: Labels,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}

/** A family's series by their label values, each made on first use. */
class SeriesTable<S extends { readonly labels: Labels }> {
  private readonly all = new Map<string, S>();

  constructor(private readonly make: (labels: Labels) => S) {}

  find(labels: Labels): S {
    const key = JSON.stringify(Object.values(labels));
    let s = this.all.get(key);
    if (!s) this.all.set(key, (s = this.make(labels)));
    return s;
  }

  values(): IterableIterator<S> {
    return this.all.values();
  }
}

const noCollect = (): void => undefined;

/**
 * A family as prom-client's registry reads it. Its typings declare `type` a numeric enum, but its own metrics
 * report the strings the text format prints (`# TYPE x counter`), and the registry prints what it is given.
 */
function snapshot<V>(name: string, help: string, type: 'counter' | 'gauge' | 'histogram', values: V[]) {
  return { name, help, type: type as unknown as MetricType, aggregator: 'sum' as const, collect: noCollect, values };
}

function valuesOf(table: SeriesTable<CounterSeries>) {
  return [...table.values()].map((s) => ({ labels: s.labels, value: s.value }));
}

export class CounterFamily extends Counter {
  private readonly table = new SeriesTable<CounterSeries>((labels) => ({ labels, value: 0 }));

  constructor(
    registry: Registry,
    private readonly familyName: string,
    private readonly familyHelp: string,
    labelNames: readonly string[],
  ) {
    super({ name: familyName, help: familyHelp, labelNames, registers: [registry] });
  }

  /** The series of these labels (made on first use): keep it, and add to its value. */
  series(labels: Labels): CounterSeries {
    return this.table.find(labels);
  }

  override async get() {
    return snapshot(this.familyName, this.familyHelp, 'counter', valuesOf(this.table));
  }
}

export class GaugeFamily extends Gauge {
  private readonly table = new SeriesTable<CounterSeries>((labels) => ({ labels, value: 0 }));

  constructor(
    registry: Registry,
    private readonly familyName: string,
    private readonly familyHelp: string,
    labelNames: readonly string[],
    /** Read at scrape time, for gauges that are cheaper to read than to keep (a queue's length). */
    private readonly read?: (set: (labels: Labels, value: number) => void) => void,
  ) {
    super({ name: familyName, help: familyHelp, labelNames, registers: [registry] });
  }

  /** The series of these labels (made on first use): keep it, and set or move its value. */
  series(labels: Labels): CounterSeries {
    return this.table.find(labels);
  }

  override async get() {
    this.read?.((labels, value) => {
      this.table.find(labels).value = value;
    });
    return snapshot(this.familyName, this.familyHelp, 'gauge', valuesOf(this.table));
  }
}

export class HistogramFamily extends Histogram {
  private readonly table = new SeriesTable<HistogramSeries>((labels) => new HistogramSeries(labels, this.bounds));

  constructor(
    registry: Registry,
    private readonly familyName: string,
    private readonly familyHelp: string,
    labelNames: readonly string[],
    private readonly bounds: readonly number[],
  ) {
    super({ name: familyName, help: familyHelp, labelNames, buckets: [...bounds], registers: [registry] });
  }

  series(labels: Labels): HistogramSeries {
    return this.table.find(labels);
  }

  /** What the registry prints a histogram from (prom-client's own histograms answer it too). */
  getForPromString() {
    return this.get();
  }

  override async get() {
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const s of this.table.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.bounds.length; i++) {
        cumulative += s.counts[i]!;
        const le = i < this.bounds.length ? String(this.bounds[i]) : '+Inf';
        values.push({ labels: { ...s.labels, le }, value: cumulative, metricName: `${this.familyName}_bucket` });
      }
      values.push({ labels: s.labels, value: s.sum, metricName: `${this.familyName}_sum` });
      values.push({ labels: s.labels, value: s.count, metricName: `${this.familyName}_count` });
    }
    return snapshot(this.familyName, this.familyHelp, 'histogram', values);
  }
}

/** `count` bounds from `start`, each `factor` times the last (Go's prometheus.ExponentialBuckets). */
export function exponentialBuckets(start: number, factor: number, count: number): number[] {
  const bounds: number[] = [];
  for (let i = 0, b = start; i < count; i++, b *= factor) bounds.push(Number(b.toPrecision(12)));
  return bounds;
}
