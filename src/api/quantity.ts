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

/**
 * An exact quantity, as k8s.io/apimachinery's resource.Quantity keeps one for arithmetic (quota usage, LimitRange
 * bounds): the value in nano-units, and the format its canonical string takes (the suffix family it was written in).
 * Milli-units as a float lose bytes past 9 PB (requests.storage of a namespace); a bigint does not.
 */
export type QuantityFormat = 'DecimalSI' | 'BinarySI' | 'DecimalExponent';

export interface Quantity {
  readonly nanos: bigint;
  readonly format: QuantityFormat;
}

const NANOS_PER_UNIT = 1_000_000_000n;
const DECIMAL_EXPONENTS: Record<string, number> = { n: -9, u: -6, m: -3, '': 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };
const BINARY_EXPONENTS: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const QUANTITY = /^([+-]?)(\d+\.?\d*|\.\d+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?$/;

export const ZERO_QUANTITY: Quantity = { nanos: 0n, format: 'DecimalSI' };

/** resource.ParseQuantity: undefined when the text is not a quantity; precision below a nano-unit is rounded up. */
export function parseQuantity(value: unknown): Quantity | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? parseQuantity(String(value)) : undefined;
  if (typeof value !== 'string') return undefined;
  const match = QUANTITY.exec(value);
  if (!match) return undefined;
  const [, sign, number, suffix, exponent] = match;
  const [whole = '', fraction = ''] = number!.split('.');
  // digits × 10^(decimal exponent) × 2^(binary exponent), with the fraction's digits folded into the decimal exponent.
  let digits = BigInt(`${whole}${fraction}` || '0');
  let decimal = -fraction.length;
  let binary = 0;
  let format: QuantityFormat = 'DecimalSI';
  if (suffix !== undefined && BINARY_EXPONENTS[suffix] !== undefined) {
    binary = BINARY_EXPONENTS[suffix]!;
    format = 'BinarySI';
  } else if (suffix !== undefined) decimal += DECIMAL_EXPONENTS[suffix]!;
  else if (exponent !== undefined) {
    const e = Number(exponent);
    if (Math.abs(e) > 1000) return undefined;
    decimal += e;
    format = 'DecimalExponent';
  }
  digits <<= BigInt(binary);
  // To nano-units: × 10^(decimal + 9), rounding a remainder up (away from zero, as Quantity rounds up).
  const shift = decimal + 9;
  let nanos: bigint;
  if (shift >= 0) nanos = digits * 10n ** BigInt(shift);
  else {
    const divisor = 10n ** BigInt(-shift);
    nanos = digits / divisor + (digits % divisor === 0n ? 0n : 1n);
  }
  return { nanos: sign === '-' ? -nanos : nanos, format };
}

/** Quantity.String(): the canonical form kube-apiserver stores and prints ("1500m", "2", "1536Mi", "100k"). */
export function formatQuantity(q: Quantity): string {
  const negative = q.nanos < 0n;
  const magnitude = negative ? -q.nanos : q.nanos;
  if (magnitude === 0n) return '0';
  let body: string;
  const whole = magnitude % NANOS_PER_UNIT === 0n;
  // BinarySI only for whole values of at least 1024: smaller or fractional ones are shown as DecimalSI.
  if (q.format === 'BinarySI' && whole && magnitude >= 1024n * NANOS_PER_UNIT) {
    let value = magnitude / NANOS_PER_UNIT;
    let exponent = 0;
    while (exponent < 60 && value % 1024n === 0n) {
      value /= 1024n;
      exponent += 10;
    }
    const suffix = Object.keys(BINARY_EXPONENTS).find((s) => BINARY_EXPONENTS[s] === exponent) ?? '';
    body = `${value}${suffix}`;
  } else {
    // The largest exponent, a multiple of 3, that leaves an integer mantissa (from nano-units, exponent -9).
    let mantissa = magnitude;
    let exponent = -9;
    while (mantissa % 1000n === 0n) {
      mantissa /= 1000n;
      exponent += 3;
    }
    if (q.format === 'DecimalExponent') body = exponent === 0 ? `${mantissa}` : `${mantissa}e${exponent}`;
    else if (exponent > 18) body = `${mantissa * 10n ** BigInt(exponent - 18)}E`;
    else {
      const suffix = Object.keys(DECIMAL_EXPONENTS).find((s) => DECIMAL_EXPONENTS[s] === exponent)!;
      body = `${mantissa}${suffix}`;
    }
  }
  return negative ? `-${body}` : body;
}

/** Quantity.Add: the sum keeps the first operand's format, unless it was zero (then it takes the second's). */
export function addQuantities(a: Quantity, b: Quantity): Quantity {
  return { nanos: a.nanos + b.nanos, format: a.nanos === 0n ? b.format : a.format };
}

export function subtractQuantities(a: Quantity, b: Quantity): Quantity {
  return { nanos: a.nanos - b.nanos, format: a.nanos === 0n ? b.format : a.format };
}

export function compareQuantities(a: Quantity, b: Quantity): number {
  return a.nanos < b.nanos ? -1 : a.nanos > b.nanos ? 1 : 0;
}

/** Quantity.MilliValue: rounded up to a whole milli-unit. */
export function milliValue(q: Quantity): bigint {
  const milli = q.nanos / 1_000_000n;
  return q.nanos > 0n && q.nanos % 1_000_000n !== 0n ? milli + 1n : milli;
}

/** Quantity.Value: rounded up to a whole unit. */
export function unitValue(q: Quantity): bigint {
  const units = q.nanos / NANOS_PER_UNIT;
  return q.nanos > 0n && q.nanos % NANOS_PER_UNIT !== 0n ? units + 1n : units;
}
