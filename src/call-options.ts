/** Options every I/O call of a key or a store accepts (layer 0: imports nothing of ours). */
export interface CallOptions {
  readonly signal?: AbortSignal;
}
