/**
 * A bootstrap token reaches the config it was issued for and no other (tokens.ts
 * `configEtag`). A republish stores the new config before it replaces the token record, so
 * without the binding the old token, uses left, could fetch the new config in between; with
 * it that fetch is 401 whatever the uses. A token minted later for the same publish (POST
 * …/userdata) is bound to that publish's config and fetches it.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { appConfig } from "./app-config.ts";

const recipient = await identityToRecipient(await generateX25519Identity());
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
/** A fetcher artifact the stubs name (never downloaded here). */
const LINUX = {
  url: "https://dl.example.com/bootseal-linux-x64",
  sha256: "1a".repeat(32),
  sha512: "3c".repeat(64),
  signatureUrl: "https://dl.example.com/bootseal-linux-x64.sig",
  publicKeyPem:
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAm7KJd/5RnzYFvx+tZSDt1WIy8pJsO1tu5QxaNmsYMWc=\n-----END PUBLIC KEY-----",
};

/** A store whose next token-record write waits for `held` (a republish cut in two). */
function pausingTokenWrites(inner: ObjectStore) {
  const gate: { held: Promise<void> | null; release: () => void; reached: () => void } = {
    held: null,
    release: () => {},
    reached: () => {},
  };
  const store: ObjectStore = {
    url: inner.url,
    get: (k, o) => inner.get(k, o),
    head: (k, o) => inner.head(k, o),
    put: async (k, b, c, o) => {
      const held = k.startsWith("tokens/") ? gate.held : null;
      if (held) {
        gate.held = null; // one write waits: the republish's, not a fetch's after it
        gate.reached();
        await held;
      }
      return inner.put(k, b, c, o);
    },
    delete: (k, c, o) => inner.delete(k, c, o),
    list: (p, o) => inner.list(p, o),
  };
  return { store, gate };
}

const apps: { close(): Promise<unknown> }[] = [];
after(async () => {
  for (const a of apps) await a.close();
});

function service(store: ObjectStore) {
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      trustProxy: false,
      oneTimeFetch: "off",
      fetcherArtifact: LINUX,
      publicUrl: "https://bootseal.example.com",
    }),
  });
  apps.push(app);
  return app;
}

const publish = (app: ReturnType<typeof service>, body: string) =>
  app.inject({
    method: "PUT",
    url: "/v1/machines/ns/m1/config",
    headers: { ...bearer(ADMIN), "content-type": "text/plain" },
    payload: body,
  });
const fetchWith = (app: ReturnType<typeof service>, token: string) =>
  app.inject({ method: "GET", url: "/v1/machines/ns/m1/config", headers: bearer(token) });

test("a republish in progress: the old token, uses left, cannot fetch the new config", async () => {
  const inner = new MemoryStore();
  const { store, gate } = pausingTokenWrites(inner);
  const app = service(store);
  const first = await publish(app, "#cloud-config\n# one\n");
  assert.equal(first.statusCode, 201, first.body);
  const old = (first.json() as { bootstrapToken: string }).bootstrapToken;
  const fetched = await fetchWith(app, old);
  assert.equal(fetched.statusCode, 200, fetched.body);
  const oldEtag = fetched.headers.etag;

  // The second publish stops right before it writes its token record.
  let release = () => {};
  gate.held = new Promise<void>((r) => {
    release = r;
  });
  const reached = new Promise<void>((r) => {
    gate.reached = r;
  });
  const second = publish(app, "#cloud-config\n# two\n");
  await reached;
  try {
    await oldTokenMeetsNewConfig(inner, app, old);
  } finally {
    release();
  }
  const done = await second;
  assert.equal(done.statusCode, 200, done.body);
  const fresh = (done.json() as { bootstrapToken: string }).bootstrapToken;
  const now = await fetchWith(app, fresh);
  assert.equal(now.statusCode, 200, now.body);
  assert.notEqual(now.headers.etag, oldEtag);
  assert.equal((await fetchWith(app, old)).statusCode, 401);
});

/** Between the republish's config write and its token write. */
async function oldTokenMeetsNewConfig(inner: MemoryStore, app: ReturnType<typeof service>, old: string) {
  const stored = JSON.parse(Buffer.from((await inner.get("tokens/ns/m1.json"))?.body ?? []).toString());
  assert.equal(stored.sha256, sha(old), "the old token record is still in place");
  assert.ok(stored.usesLeft > 0);
  const between = await fetchWith(app, old);
  assert.equal(between.statusCode, 401, between.body);
  assert.match((between.json() as { message: string }).message, /another published config/);
  const after = JSON.parse(Buffer.from((await inner.get("tokens/ns/m1.json"))?.body ?? []).toString());
  assert.equal(after.usesLeft, stored.usesLeft, "the refused fetch spent nothing");
}

test("a token minted for the current publish (POST …/userdata) fetches it; the one it replaced does not", async () => {
  const app = service(new MemoryStore());
  const res = await publish(app, "#cloud-config\n# three\n");
  const published = (res.json() as { bootstrapToken: string }).bootstrapToken;
  const minted = await app.inject({
    method: "POST",
    url: "/v1/machines/ns/m1/userdata?format=cloud-init",
    headers: bearer(ADMIN),
  });
  assert.equal(minted.statusCode, 200, minted.body);
  const token = /bst\.ns\.m1\.[A-Za-z0-9_-]{43}/.exec(minted.body)?.[0];
  assert.ok(token, "the stub carries the minted token");
  assert.equal((await fetchWith(app, token)).statusCode, 200);
  assert.equal((await fetchWith(app, published)).statusCode, 401);
});
