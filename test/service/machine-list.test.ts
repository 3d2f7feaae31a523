/**
 * GET /v1/machines carries each machine's current boot (src/machine/boot-summary.ts): when its
 * phase began, when this boot reached each phase and, failed, its reason's first line and
 * exit code. Checked against the same machine's status route (its history) on the real app.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { appConfig } from "./app-config.ts";

const ADMIN = "list-admin-token-0123456789abcdefghijklmno";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });

test("the list's since, reached and failure agree with the status history; a republish starts a new boot", async () => {
  const recipient = await identityToRecipient(await generateX25519Identity());
  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: ["admin"] }],
    }),
  });
  const publish = async (name: string) => {
    const res = await app.inject({
      method: "PUT",
      url: `/v1/machines/prod/${name}/config`,
      headers: { ...bearer(ADMIN), "content-type": "text/plain" },
      payload: "a: b\n",
    });
    assert.ok(res.statusCode < 300, res.body);
    return (res.json() as { bootstrapToken: string }).bootstrapToken;
  };
  const report = async (name: string, token: string, payload: Record<string, unknown>) => {
    const res = await app.inject({
      method: "POST",
      url: `/v1/machines/prod/${name}/status`,
      headers: bearer(token),
      payload,
    });
    assert.ok(res.statusCode < 300, res.body);
  };

  const first = await publish("web-1");
  await report("web-1", first, { phase: "fetching" });
  await report("web-1", first, {
    phase: "failed",
    exitCode: 1,
    message: "kubeadm join: connection refused\nmore",
  });
  const ok = await publish("web-2");
  await report("web-2", ok, { phase: "running" });
  await report("web-2", ok, { phase: "running", attempt: 2 });
  // web-2 again: a new version, its boot starts over.
  const again = await publish("web-2");
  await report("web-2", again, { phase: "fetching" });
  await report("web-2", again, { phase: "succeeded", exitCode: 0 });

  const list = await app.inject({ url: "/v1/machines", headers: bearer(ADMIN) });
  assert.equal(list.statusCode, 200, list.body);
  const items = (list.json() as { items: Record<string, unknown>[] }).items;
  for (const item of items) {
    const status = await app.inject({ url: `/v1/machines/prod/${item.name}/status`, headers: bearer(ADMIN) });
    const record = status.json() as {
      version: number;
      history: { phase: string; at: string; version: number }[];
    };
    const boot = record.history.filter((h) => h.version === record.version);
    const firstOf = (p: string) => boot.find((h) => h.phase === p)?.at;
    if (item.name === "web-1") {
      assert.deepEqual(item.reached, {
        published: firstOf("published"),
        fetching: firstOf("fetching"),
        failed: firstOf("failed"),
      });
      assert.equal(item.since, firstOf("failed"));
      assert.deepEqual(item.failure, { reason: "kubeadm join: connection refused", exitCode: 1 });
    } else {
      // Not the first boot's `running`: only this version's phases.
      assert.deepEqual(Object.keys(item.reached as object), ["published", "fetching", "succeeded"]);
      assert.equal((item.reached as { published: string }).published, firstOf("published"));
      assert.equal(item.since, firstOf("succeeded"));
      assert.equal(item.failure, undefined);
    }
  }
  await app.close();
});
