/**
 * Ends a long-running command (`serve`, `controller`) the way a finished program ends: the
 * exit code is set and the event loop allowed to run dry, so V8 tears its heap down before
 * Node stops its worker threads. `process.exit()` stops the workers first and can hang for
 * ever when a concurrent compile job is waiting for a garbage collection at that moment
 * (nodejs/node#54918, #64274): CI caught `bootseal serve` stuck in exit after SIGTERM, its
 * main thread joining a baseline-compiler thread parked in AwaitCollectionBackground.
 *
 * A client library's keep-alive socket can keep the loop running: after 2 s the
 * process exits anyway (by then no compile job of the shutdown is likely to be in flight).
 */
const LINGER_MS = 2000;

export function exitWhenIdle(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), LINGER_MS).unref();
}
