/**
 * Controller policies: each credential's scopes hold in the namespaces of its grant only, on
 * every controller route (buildApp + inject on a MemoryStore); list and events show only the
 * namespaces the caller may see; the machine token is answered only with tokens:mint.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { type ControllerConfig, validateServiceConfig } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { Policies } from "../../src/service/controllers/policies.ts";
import { appConfig } from "./app-config.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const tokenOf = (name: string) => `controller-${name}-token-0123456789abcdefghijkl`;
const bearer = (name: string) => ({ authorization: `Bearer ${tokenOf(name)}` });

const CONTROLLERS: ControllerConfig[] = [
  { name: "root", scopes: ["admin"], namespaces: ["*"] },
  { name: "team-writer", scopes: ["configs:write", "configs:read", "status:read"], namespaces: ["team-*"] },
  { name: "team-a-minter", scopes: ["configs:write", "tokens:mint"], namespaces: ["team-a"] },
  { name: "b-reader", scopes: ["status:read"], namespaces: ["team-b"] },
  { name: "b-admin", scopes: ["admin"], namespaces: ["team-b"] },
].map((c) => ({ ...c, tokenSha256: sha(tokenOf(c.name)) }) as ControllerConfig);

function app() {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: CONTROLLERS,
    }),
  });
}

type App = ReturnType<typeof app>;

async function publish(a: App, who: string, machine: string) {
  return a.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { ...bearer(who), "content-type": "text/plain" },
    payload: `secret of ${machine}\n`,
  });
}

test("namespace globs: * is any run of label characters, the rest literal; admin only in its namespaces", () => {
  const p = new Policies([
    { scopes: ["configs:write"], namespaces: ["team-*", "ops"] },
    { scopes: ["admin"], namespaces: ["lab"] },
  ]);
  assert.equal(p.allows("configs:write", "team-a"), true);
  assert.equal(p.allows("configs:write", "team-"), true);
  assert.equal(p.allows("configs:write", "ops"), true);
  assert.equal(p.allows("configs:write", "ops-2"), false);
  assert.equal(p.allows("configs:write", "my-team-a"), false);
  assert.equal(p.allows("tokens:mint", "team-a"), false);
  assert.equal(p.allows("tokens:mint", "lab"), true);
  assert.equal(p.allows("status:read", "lab"), true);
  assert.equal(p.missingEverywhere(["status:read"]), undefined);
  assert.equal(
    new Policies([{ scopes: ["configs:write"] }]).missingEverywhere(["status:read"]),
    "status:read",
  );
});

test("every controller route checks the scope in the URL's namespace", async () => {
  const a = app();
  // configs:write in team-*: publish there, not elsewhere.
  assert.equal((await publish(a, "team-writer", "team-a/m1")).statusCode, 201);
  const outside = await publish(a, "team-writer", "prod/m1");
  assert.equal(outside.statusCode, 403);
  assert.match(outside.json().message, /lacks the configs:write scope in namespace "prod"/);
  assert.equal((await publish(a, "root", "prod/m1")).statusCode, 201);
  // configs:read: fetch.
  const read = (who: string, m: string) =>
    a.inject({ method: "GET", url: `/v1/machines/${m}/config`, headers: bearer(who) });
  assert.equal((await read("team-writer", "team-a/m1")).statusCode, 200);
  assert.equal((await read("team-writer", "prod/m1")).statusCode, 403);
  assert.equal((await read("team-a-minter", "team-a/m1")).statusCode, 403, "no configs:read at all");
  // status:read: one machine's status.
  const status = (who: string, m: string) =>
    a.inject({ method: "GET", url: `/v1/machines/${m}/status`, headers: bearer(who) });
  assert.equal((await publish(a, "root", "team-b/m1")).statusCode, 201);
  assert.equal((await status("b-reader", "team-b/m1")).statusCode, 200);
  assert.equal((await status("b-reader", "team-a/m1")).statusCode, 403);
  assert.equal((await status("team-writer", "prod/m1")).statusCode, 403);
  // The machine's own status post is no controller's, whatever its grant.
  const post = await a.inject({
    method: "POST",
    url: "/v1/machines/team-b/m1/status",
    headers: { ...bearer("b-admin"), "content-type": "application/json" },
    payload: { phase: "succeeded" },
  });
  assert.equal(post.statusCode, 403);
  // admin in team-b only.
  assert.equal((await publish(a, "b-admin", "team-b/m2")).statusCode, 201);
  assert.equal((await publish(a, "b-admin", "team-a/m2")).statusCode, 403);
  // configs:write: delete.
  const del = (who: string, m: string) =>
    a.inject({ method: "DELETE", url: `/v1/machines/${m}/config`, headers: bearer(who) });
  assert.equal((await del("team-writer", "prod/m1")).statusCode, 403);
  assert.equal((await del("b-reader", "team-b/m2")).statusCode, 403);
  assert.equal((await del("team-writer", "team-a/m1")).statusCode, 204);
  // An exact namespace is not a prefix.
  assert.equal((await publish(a, "team-a-minter", "team-ab/m1")).statusCode, 403);
});

test("the machine token is in a publish's answer only with tokens:mint in that namespace", async () => {
  const a = app();
  const plain = await publish(a, "team-writer", "team-a/m1");
  assert.equal(plain.statusCode, 201);
  const body = plain.json();
  assert.equal(typeof body.etag, "string");
  assert.equal(body.bootstrapToken, undefined);
  assert.equal(body.tokenExpiresAt, undefined);
  assert.doesNotMatch(plain.body, /bst\./);
  const minted = await publish(a, "team-a-minter", "team-a/m1");
  assert.equal(minted.statusCode, 200);
  assert.match(minted.json().bootstrapToken, /^bst\.team-a\.m1\./);
  // The token works: the machine fetches with it.
  const fetched = await a.inject({
    method: "GET",
    url: "/v1/machines/team-a/m1/config",
    headers: { authorization: `Bearer ${minted.json().bootstrapToken}` },
  });
  assert.equal(fetched.statusCode, 200);
  // admin implies tokens:mint, in its own namespaces.
  assert.match((await publish(a, "b-admin", "team-b/m1")).json().bootstrapToken, /^bst\.team-b\.m1\./);
});

test("the machine list shows only the caller's namespaces; a namespace outside them is 403", async () => {
  const a = app();
  for (const m of ["prod/a", "team-a/a", "team-b/a", "team-b/b"]) {
    assert.equal((await publish(a, "root", m)).statusCode, 201);
  }
  const list = async (who: string, query = "") => {
    const r = await a.inject({ method: "GET", url: `/v1/machines${query}`, headers: bearer(who) });
    return {
      status: r.statusCode,
      ids:
        r.statusCode === 200
          ? r.json().items.map((i: { namespace: string; name: string }) => `${i.namespace}/${i.name}`)
          : r.json().code,
    };
  };
  assert.deepEqual(await list("root"), { status: 200, ids: ["prod/a", "team-a/a", "team-b/a", "team-b/b"] });
  assert.deepEqual(await list("b-reader"), { status: 200, ids: ["team-b/a", "team-b/b"] });
  assert.deepEqual(await list("team-writer"), { status: 200, ids: ["team-a/a", "team-b/a", "team-b/b"] });
  assert.deepEqual(await list("b-reader", "?limit=1"), { status: 200, ids: ["team-b/a"] });
  assert.deepEqual(await list("b-reader", "?namespace=team-b"), {
    status: 200,
    ids: ["team-b/a", "team-b/b"],
  });
  assert.deepEqual(await list("b-reader", "?namespace=team-a"), { status: 403, ids: "FORBIDDEN" });
  assert.deepEqual(await list("team-a-minter"), { status: 403, ids: "FORBIDDEN" });
});

test("events stream only the caller's namespaces; a namespace outside them is 403", async (t) => {
  const a = app();
  await a.listen({ host: "127.0.0.1", port: 0 });
  t.after(() => a.close());
  const { port } = a.server.address() as { port: number };
  const url = `http://127.0.0.1:${port}/v1/events`;
  const refused = await fetch(`${url}?namespace=team-a`, { headers: bearer("b-reader") });
  assert.equal(refused.status, 403);
  await refused.arrayBuffer();
  const stream = new AbortController();
  t.after(() => stream.abort());
  const res = await fetch(url, { headers: bearer("b-reader"), signal: stream.signal });
  assert.equal(res.status, 200);
  const reader = (res.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  const until = async (needle: string) => {
    while (!text.includes(needle)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`stream ended before ${needle}: ${text}`);
      text += Buffer.from(value).toString();
    }
  };
  await until(": connected");
  // Events arrive in order: the team-a one, published first, would be seen before team-b's.
  assert.equal((await publish(a, "root", "team-a/hidden")).statusCode, 201);
  assert.equal((await publish(a, "root", "team-b/shown")).statusCode, 201);
  await until('"name":"shown"');
  assert.doesNotMatch(text, /hidden|team-a/);
});

test("config: namespaces default to every namespace; globs are checked; bindings need an API server", () => {
  const base = {
    store: "file:///x",
    creation_rules: [{ age: recipient }],
  };
  const hash = "a".repeat(64);
  const c = validateServiceConfig({
    ...base,
    controllers: [{ name: "c", tokenSha256: hash, scopes: ["tokens:mint"] }],
  });
  assert.deepEqual(c.controllers[0]?.namespaces, ["*"]);
  assert.deepEqual(c.kubernetesBindings, []);
  assert.throws(
    () =>
      validateServiceConfig({
        ...base,
        controllers: [{ name: "c", tokenSha256: hash, scopes: ["admin"], namespaces: ["Team_A"] }],
      }),
    { code: "USAGE", message: /controllers\[0\]\.namespaces\[0\]: "Team_A" is not a namespace or glob/ },
  );
  assert.throws(
    () =>
      validateServiceConfig({
        ...base,
        controllers: [],
        kubernetesBindings: [{ serviceAccount: "ci/deployer", scopes: ["configs:write"] }],
      }),
    { code: "USAGE", message: /^kubernetesBindings: needs controllerAuth\.kubernetes/ },
  );
  assert.throws(() => validateServiceConfig({ ...base, controllers: [] }), {
    code: "USAGE",
    message: /^controllers: needs at least one controller/,
  });
  assert.throws(
    () =>
      validateServiceConfig({
        ...base,
        controllers: [{ name: "c", tokenSha256: hash, scopes: ["admin"] }],
        kubernetesBindings: [{ serviceAccount: "ci", scopes: ["admin"] }],
      }),
    { code: "USAGE", message: /serviceAccount: must be NAMESPACE\/NAME or NAMESPACE\/\*/ },
  );
});
