/**
 * A value now, or later. The write path is synchronous until something in it has to wait (an admission webhook,
 * a conversion webhook): then, and only then, the rest of it runs as a promise's continuation. Writes that meet
 * no webhook pay no promise, no microtask and no closure beyond the step functions themselves.
 */
export type MaybePromise<T> = T | Promise<T>;

/** Runs `next` on the value at once, or once it has arrived. A synchronous throw stays synchronous. */
export function then<T, U>(value: MaybePromise<T>, next: (value: T) => MaybePromise<U>): MaybePromise<U> {
  return value instanceof Promise ? value.then(next) : next(value);
}

/**
 * Runs `step` on each item in order, waiting for the ones that answer with a promise; a synchronous run stays
 * synchronous. `step` answering with a promise is the rare case: the loop continues from that item once it has
 * settled.
 */
export function eachInOrder<T>(
  items: readonly T[],
  step: (item: T, index: number) => MaybePromise<void>,
): MaybePromise<void> {
  const from = (start: number): MaybePromise<void> => {
    for (let i = start; i < items.length; i++) {
      const result = step(items[i]!, i);
      if (result instanceof Promise) return result.then(() => from(i + 1));
    }
  };
  return from(0);
}

/**
 * The value of a read or write that must not wait (the server's own, which no webhook sees): a promise is a bug.
 */
export function sync<T>(value: MaybePromise<T>): T {
  if (value instanceof Promise) throw new Error('a synchronous read or write met an asynchronous step');
  return value;
}

/**
 * A write nobody waits for (the server's own bookkeeping): where it turned out to wait (etcd), its failure goes to
 * `onError` rather than becoming an unhandled rejection that would stop the process.
 */
export function settle(value: MaybePromise<unknown>, onError: (err: unknown) => void): void {
  if (value instanceof Promise) value.catch(onError);
}

/** Waits for those of `values` that are promises (none: at once). */
export function allOf(values: ReadonlyArray<MaybePromise<unknown>>): MaybePromise<void> {
  const pending = values.filter((v) => v instanceof Promise);
  if (pending.length > 0) return Promise.all(pending).then(() => undefined);
}
