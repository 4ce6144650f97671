/**
 * Resource quantities (k8s.io/apimachinery/pkg/api/resource): "500m", "2", "128Mi", "1G", "1e3". Parsed to
 * milli-units, which is what the scheduler compares (cpu in millicores; memory and pods in milli-bytes and
 * milli-pods, so every resource adds and compares the same way).
 */
const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = {
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

const PATTERN = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/;

/** The quantity in milli-units (rounded up, as Quantity.MilliValue does), or undefined when it does not parse. */
export function parseMilli(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? Math.ceil(value * 1000) : undefined;
  if (typeof value !== 'string') return undefined;
  const match = PATTERN.exec(value.trim());
  if (!match) return undefined;
  const base = Number(match[1]);
  let factor = 1;
  if (match[2] !== undefined) factor = BINARY[match[2]] ?? DECIMAL[match[2]]!;
  else if (match[3] !== undefined) factor = 10 ** Number(match[3]);
  return Math.ceil(base * factor * 1000 - 1e-6);
}

/** A milli-unit amount back as a quantity string: "250m", "2", or whole binary units for large byte counts. */
export function formatMilli(milli: number, binary = false): string {
  if (milli % 1000 !== 0) return `${milli}m`;
  const value = milli / 1000;
  if (binary && value !== 0) {
    for (const suffix of ['Ei', 'Pi', 'Ti', 'Gi', 'Mi', 'Ki']) {
      const unit = BINARY[suffix]!;
      if (value % unit === 0) return `${value / unit}${suffix}`;
    }
  }
  return String(value);
}
