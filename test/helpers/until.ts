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

/**
 * The service at `base` once /readyz says ready (200): a served process hashes and signs its
 * fetcher executables first, and says so (503, `checks.artifacts`) until then.
 */
export async function whenReady(base: string): Promise<{ status: string; checks: Record<string, string> }> {
  let body: { status: string; checks: Record<string, string> } = { status: "", checks: {} };
  await until(`${base}/readyz to answer 200`, async () => {
    const res = await fetch(`${base}/readyz`);
    body = (await res.json()) as typeof body;
    return res.status === 200;
  });
  return body;
}
