/** Smoke test of fake-gcs-server with @google-cloud/storage: put/get and generation preconditions. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError, Storage } from "@google-cloud/storage";
import { peer, uniqueName } from "../helpers/peers.ts";

/** The HTTP status a refused write answers with. */
async function refusedStatus(p: Promise<unknown>): Promise<number> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ApiError, `expected an ApiError, got ${String(err)}`);
    return err.code ?? 0;
  }
  assert.fail("the write succeeded but should have been refused");
}

test("fake-gcs-server: put, get and generation preconditions", async (t) => {
  const storage = new Storage({ apiEndpoint: peer("GCS_ENDPOINT"), projectId: "test" });
  const [bucket] = await storage.createBucket(uniqueName("smoke"));
  t.after(async () => {
    await bucket.deleteFiles({ force: true });
    await bucket.delete();
  });
  const save = (name: string, body: string, ifGenerationMatch?: number | string) =>
    bucket.file(name).save(body, {
      resumable: false,
      ...(ifGenerationMatch === undefined ? {} : { preconditionOpts: { ifGenerationMatch } }),
    });
  const generation = async (name: string) => Number((await bucket.file(name).getMetadata())[0].generation);

  await t.test("put and get round-trip the bytes", async () => {
    const body = '{"ignition":{"version":"3.4.0"}}\n';
    await save("configs/default/plain", body);
    const [got] = await bucket.file("configs/default/plain").download();
    assert.equal(got.toString("utf8"), body);
  });

  await t.test("ifGenerationMatch: 0 creates once, then is refused with 412", async () => {
    await save("configs/default/create", "one", 0);
    assert.equal(await refusedStatus(save("configs/default/create", "two", 0)), 412);
    const [got] = await bucket.file("configs/default/create").download();
    assert.equal(got.toString(), "one");
  });

  await t.test("ifGenerationMatch: <current> replaces, a stale generation is refused with 412", async () => {
    await save("configs/default/replace", "v1");
    const g1 = await generation("configs/default/replace");
    await save("configs/default/replace", "v2", g1);
    const g2 = await generation("configs/default/replace");
    assert.notEqual(g2, g1);
    assert.equal(await refusedStatus(save("configs/default/replace", "v3", g1)), 412);
    const [got] = await bucket.file("configs/default/replace").download();
    assert.equal(got.toString(), "v2");
  });

  await t.test("a race of creates has exactly one winner; the losers get 412", async () => {
    const racers = 6;
    const results = await Promise.allSettled(
      Array.from({ length: racers }, (_, i) => save("configs/default/race", `racer-${i}`, 0)),
    );
    assert.equal(results.filter((r) => r.status === "fulfilled").length, 1);
    for (const r of results) {
      if (r.status === "rejected") assert.equal(await refusedStatus(Promise.reject(r.reason)), 412);
    }
  });
});
