/**
 * A dependency loaded on first use and then kept. The cloud SDKs and OpenPGP.js cost tens to
 * hundreds of milliseconds to load; most CLI runs never touch them (docs/benchmarks.md).
 * A failed load is not cached, so the next caller tries again.
 */
export interface LazyModule<T> {
  load(): Promise<T>;
  /** The module once a load has finished, for synchronous code (error mappers) that runs after it. */
  readonly loaded: T | undefined;
}

export function lazyModule<T>(importer: () => Promise<T>): LazyModule<T> {
  let pending: Promise<T> | undefined;
  let value: T | undefined;
  return {
    load() {
      pending ??= importer().then(
        (module) => {
          value = module;
          return module;
        },
        (err: unknown) => {
          pending = undefined;
          throw err;
        },
      );
      return pending;
    },
    get loaded() {
      return value;
    },
  };
}
