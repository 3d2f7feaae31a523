/**
 * The controller's service client (src/controller/service-api.ts) against a real app on
 * loopback (memory store): a status read sends the ETag of the last answer (If-None-Match),
 * a 304 is answered from that answer, a change is read in full, and a machine the service
 * no longer has is null again.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { ServiceApi } from "../../src/controller/service-api.ts";
import { buildApp } from "../../src/service/app.ts";
import { appConfig } from "../service/app-config.ts";

const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const recipient = await identityToRecipient(await generateX25519Identity());

/** The app on loopback (memory store), and each status read's answer as "200", "304 conditional", ... */
async function listening() {
  const app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      statusReports: { coalesceMs: 0, maxHeldMachines: 1 },
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
    }),
  });
  const answers: string[] = [];
  app.addHook("onResponse", async (request, reply) => {
    if (request.url.endsWith("/status") && request.method === "GET")
      answers.push(`${reply.statusCode}${request.headers["if-none-match"] ? " conditional" : ""}`);
  });
  const origin = new URL(await app.listen({ host: "127.0.0.1", port: 0 }));
  return { app, answers, origin };
}

test("status reads send If-None-Match; a 304 answers from the last body, a change is read again", async () => {
  const { app, answers, origin } = await listening();
  try {
    const api = new ServiceApi({ server: origin, token: ADMIN });
    const m = { namespace: "ns", name: "m1" };
    assert.equal(await api.status(m), null, "nothing published yet");
    await api.publish(m, new TextEncoder().encode("payload"));
    const first = await api.status(m);
    const second = await api.status(m);
    assert.equal(first?.phase, "published");
    assert.deepEqual(second, first, "the 304 is answered from the body it named");
    assert.notEqual(second, first, "a fresh object each time: no caller shares one");
    const republished = await app.inject({
      method: "PUT",
      url: "/v1/machines/ns/m1/config",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/octet-stream" },
      payload: "payload 2",
    });
    assert.equal(republished.statusCode, 200, republished.body);
    const third = await api.status(m);
    assert.notDeepEqual(third, first, "the republish is read in full");
    assert.equal(await api.deleteConfig(m), true);
    assert.deepEqual(answers, ["404", "200", "304 conditional", "200 conditional"]);
  } finally {
    await app.close();
  }
});

test("the kept status answers are bounded: past the bound the least recently read one is read in full", async () => {
  const { app, answers, origin } = await listening();
  try {
    const probe = new ServiceApi({ server: origin, token: ADMIN });
    const a = { namespace: "ns", name: "a" };
    const b = { namespace: "ns", name: "b" };
    await probe.publish(a, new TextEncoder().encode("payload"));
    await probe.publish(b, new TextEncoder().encode("payload"));
    const oneAnswer = (
      await app.inject({
        method: "GET",
        url: "/v1/machines/ns/a/status",
        headers: { authorization: `Bearer ${ADMIN}` },
      })
    ).body.length;
    answers.splice(0);
    // Room for one answer (and a little), not two.
    const api = new ServiceApi({ server: origin, token: ADMIN, statusCacheBytes: oneAnswer + 16 });
    await api.status(a);
    await api.status(a);
    await api.status(b); // a goes
    await api.status(a);
    await api.status(a);
    assert.deepEqual(answers, ["200", "304 conditional", "200", "200", "304 conditional"]);
  } finally {
    await app.close();
  }
});

test("a publish names its Cluster API objects: the status and the list show them; a name that is not a Kubernetes name is 400", async () => {
  const { app, origin } = await listening();
  try {
    const api = new ServiceApi({ server: origin, token: ADMIN });
    const capi = { cluster: "prod-eu", machine: "prod-eu-md-0-7f9c", bootsealConfig: "prod-eu-md-0-7f9c-bs" };
    await api.publish(
      { namespace: "ns", name: "prod-eu-md-0-7f9c" },
      new TextEncoder().encode("p"),
      undefined,
      capi,
    );
    await api.publish({ namespace: "ns", name: "plain" }, new TextEncoder().encode("p"));
    const read = async (url: string) =>
      (await app.inject({ method: "GET", url, headers: { authorization: `Bearer ${ADMIN}` } })).json();
    assert.deepEqual((await read("/v1/machines/ns/prod-eu-md-0-7f9c/status")).config.capi, capi);
    const items = (await read("/v1/machines")).items as { name: string; capi?: unknown }[];
    assert.deepEqual(
      items.map((i) => [i.name, i.capi]),
      [
        ["plain", undefined],
        ["prod-eu-md-0-7f9c", capi],
      ],
    );
    for (const bad of [
      "capiCluster=Prod",
      "capiMachine=a%20b",
      `capiBootsealConfig=${"a".repeat(254)}`,
      "capiCluster=",
    ]) {
      const res = await app.inject({
        method: "PUT",
        url: `/v1/machines/ns/plain/config?${bad}`,
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/octet-stream" },
        payload: "p",
      });
      assert.equal(res.statusCode, 400, bad);
      assert.equal(res.json().code, "BAD_INPUT", bad);
    }
  } finally {
    await app.close();
  }
});
