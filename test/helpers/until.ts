/** Polls (bounded: `tries` x `everyMs`) until `check` is true: waiting for an observable event, never a fixed sleep. */
export async function until(
  what: string,
  check: () => boolean | Promise<boolean>,
  { tries = 1200, everyMs = 100 }: { tries?: number; everyMs?: number } = {},
): Promise<void> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}
