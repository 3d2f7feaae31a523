/**
 * The store scheme seam, proven with a scheme that lives only in this file: `memory://NAME`
 * over the in-memory store, one StoreSchemeType (the file a real scheme would be) and one
 * registerStoreScheme line (the line a real scheme has in BUILT_IN_SCHEMES). With nothing
 * else changed it works end to end: the service's configuration accepts it and carries its
 * settings section, the service stores and serves through it, `bootseal fetch --from
 * memory://NAME/KEY` reads an object from it, `bootseal rotate --store memory://NAME` rotates
 * the documents in it, and the CLI's help lists it.
 *
 * The configuration schema and the CLI's flag tables read the registry when they load, so
 * everything that reaches them is imported after the registration (dynamic imports below).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, test } from "node:test";
import {
  oneOf,
  openStore,
  parseObjectUrl,
  parseStoreUrl,
  registerStoreScheme,
  STORE_SCHEMES,
  type StoreOptions,
  storeUrlExamples,
} from "../../../providers/stores/index.ts";
import { MemoryStore } from "../../../providers/stores/memory.ts";
import type { StoreSchemeType } from "../../../providers/stores/store-scheme.ts";
import { BootsealError } from "../../../src/errors.ts";
import { type AgeKey, ageKey, encrypt, machineEnv, tempDir } from "../../fetcher/helpers.ts";

// ---- The scheme: what a real scheme's file would hold --------------------------------------

interface MemoryLocation {
  readonly scheme: "memory";
  readonly name: string;
}

/** What the service configuration's `memory:` section sets. */
interface MemorySettings {
  readonly label?: string;
}

interface MemoryOptions extends MemorySettings {
  readonly oneAttempt?: boolean;
}

/** One store per name, shared by everything in this process (the service, fetch, rotate). */
const stores = new Map<string, MemoryStore>();
/** What each open received: the settings it resolved, and whether it was asked for one attempt. */
const opened: { name: string; label: string | undefined; oneAttempt: boolean }[] = [];

function storeNamed(name: string): MemoryStore {
  let store = stores.get(name);
  if (store === undefined) {
    store = new MemoryStore(name);
    stores.set(name, store);
  }
  return store;
}

function parseName(name: string): MemoryLocation {
  if (!/^[a-z0-9-]+$/.test(name)) throw new BootsealError("USAGE", "memory:// wants a NAME");
  return { scheme: "memory", name };
}

const memoryScheme: StoreSchemeType<"memory", MemoryLocation, "memory", MemoryOptions, MemorySettings> = {
  scheme: "memory",
  optionsKey: "memory",
  example: "memory://NAME",
  objectExample: "memory://NAME/KEY",
  parse: parseName,
  parseObject(rest, url, what) {
    const slash = rest.indexOf("/");
    if (slash < 0) throw new BootsealError("USAGE", `${what} memory:// wants a NAME and a key`);
    const { name } = parseName(rest.slice(0, slash));
    const key = rest.slice(slash + 1);
    return { storeUrl: `memory://${name}`, key, display: url, path: key, pathName: "key" };
  },
  oneAttempt: (options) => ({ ...options, oneAttempt: true }),
  open(location, options, env) {
    opened.push({
      name: location.name,
      label: options?.label ?? env.MEMORY_STORE_LABEL,
      oneAttempt: options?.oneAttempt === true,
    });
    return storeNamed(location.name);
  },
  settings: {
    properties: {
      label: { type: "string", minLength: 1, description: "a label the test reads back" },
    },
  },
};

// ---- The registry line ---------------------------------------------------------------------

registerStoreScheme(memoryScheme);

// ---- Everything that reads the registry when it loads comes after --------------------------

const { validateServiceConfig } = await import("../../../src/config/service-config.ts");
const { openServiceStore } = await import("../../../src/service/server.ts");
const { buildApp } = await import("../../../src/service/app.ts");
const { auditLoggerTo } = await import("../../../src/service/plugins/audit.ts");
const { decryptPayload } = await import("../../../src/fetcher/decrypt-payload.ts");
const { main } = await import("../../../src/cli/main.ts");

let dir: { path: string; remove: () => Promise<void> };
let r1: AgeKey;
let r2: AgeKey;
before(async () => {
  dir = await tempDir("store-registry");
  r1 = await ageKey(dir.path, "r1");
  r2 = await ageKey(dir.path, "r2");
});
after(async () => {
  await dir.remove();
});

const ADMIN = "controller-admin-token-0123456789abcdefghijkl";

/** A stream that keeps what is written to it. */
function collected(): { readonly stream: PassThrough; readonly text: () => string } {
  const stream = new PassThrough();
  let text = "";
  stream.on("data", (c: Buffer) => {
    text += c.toString();
  });
  return { stream, text: () => text };
}

/** `bootseal ARGS` in-process; its exit code and output. */
async function bootseal(
  args: readonly string[],
  env: Record<string, string | undefined>,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const [stdout, stderr] = [collected(), collected()];
  const stdin = new PassThrough();
  stdin.end();
  const code = await main(args, { stdin, stdout: stdout.stream, stderr: stderr.stream, env, cwd: dir.path });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

/** `bootseal fetch --from FROM --out /etc/bootstrap/payload` in-process into a fresh root. */
async function fetchInto(from: string, key: AgeKey): Promise<{ root: string; code: number; stderr: string }> {
  const root = join(dir.path, `root-${createHash("sha256").update(from).digest("hex").slice(0, 8)}`);
  await mkdir(root);
  const args = ["fetch", "--from", from, "--out", "/etc/bootstrap/payload", "--root", root];
  const { code, stderr } = await bootseal(args, machineEnv({ SOPS_AGE_KEY_FILE: key.file }));
  return { root, code, stderr };
}

async function markerOf(root: string): Promise<{ source: string; machine: string }> {
  return JSON.parse(await readFile(join(root, "var/lib/bootseal/bootstrap.done"), "utf8"));
}

test("the registry: the scheme parses, opens, names objects and joins the usage lists; a second registration is refused", () => {
  assert.ok(STORE_SCHEMES.includes(memoryScheme));
  assert.deepEqual(parseStoreUrl("memory://fleet"), { scheme: "memory", name: "fleet" });
  assert.equal(openStore("memory://fleet").url, "memory://fleet");
  assert.deepEqual(parseObjectUrl("memory://fleet/configs/prod/node-1", "--from"), {
    storeUrl: "memory://fleet",
    key: "configs/prod/node-1",
    display: "memory://fleet/configs/prod/node-1",
    path: "configs/prod/node-1",
    pathName: "key",
  });
  assert.deepEqual(storeUrlExamples(), [
    "file://DIR",
    "s3://BUCKET/PREFIX",
    "gs://BUCKET/PREFIX",
    "memory://NAME",
  ]);
  assert.throws(
    () => openStore("nosuch://x"),
    (err) => err instanceof BootsealError && err.message.includes(`expected ${oneOf(storeUrlExamples())}`),
  );
  // Its settings: explicit options first, then the environment; the one-attempt switch.
  opened.length = 0;
  openStore("memory://fleet", { memory: { label: "given" } } as StoreOptions);
  openStore("memory://fleet", { env: { MEMORY_STORE_LABEL: "from-env" }, oneAttempt: true });
  assert.deepEqual(opened, [
    { name: "fleet", label: "given", oneAttempt: false },
    { name: "fleet", label: "from-env", oneAttempt: true },
  ]);
  assert.throws(() => registerStoreScheme(memoryScheme), /registered already/);
});

test("serve: the configuration accepts memory:// with its settings section; publish, then read back through the app", async () => {
  const raw = {
    store: "memory://served",
    memory: { label: "from-config" },
    creation_rules: [{ age: r1.recipient }],
    controllers: [
      { name: "admin", tokenSha256: createHash("sha256").update(ADMIN).digest("hex"), scopes: ["admin"] },
    ],
    artifacts: { dir: "/nonexistent/bootseal-artifacts" },
  };
  const config = validateServiceConfig(raw);
  assert.throws(
    () => validateServiceConfig({ ...raw, memory: { colour: "red" } }),
    /memory/,
    "the section is checked by the scheme's schema",
  );
  opened.length = 0;
  const app = buildApp({
    logger: false,
    store: openServiceStore(config),
    config,
    audit: auditLoggerTo(new PassThrough().resume()),
  });
  assert.deepEqual(opened, [{ name: "served", label: "from-config", oneAttempt: false }]);
  try {
    const payload = "#cloud-config\nruncmd: [echo SERVED-VIA-MEMORY]\n";
    const put = await app.inject({
      method: "PUT",
      url: "/v1/machines/prod/node-2/config",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
      payload,
    });
    assert.equal(put.statusCode, 201, put.body);
    const { bootstrapToken, etag } = put.json() as { bootstrapToken: string; etag: string };
    const get = await app.inject({
      method: "GET",
      url: "/v1/machines/prod/node-2/config",
      headers: { authorization: `Bearer ${bootstrapToken}` },
    });
    assert.equal(get.statusCode, 200, get.body);
    assert.equal(get.headers.etag, etag);
    const stored = await storeNamed("served").get("configs/prod/node-2");
    assert.ok(stored, "the document is in the memory store, under the store layout's key");
    assert.deepEqual(Buffer.from(stored.body), get.rawPayload);

    // And the fetcher reads what the service stored, straight from the store.
    const r = await fetchInto("memory://served/configs/prod/node-2", r1);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(r.root, "etc/bootstrap/payload"), "utf8"), payload);
  } finally {
    await app.close();
  }
});

test("fetch --from memory://NAME/KEY: one attempt per store call, the payload written, the machine from the configs/ key", async () => {
  const payload = "#cloud-config\nruncmd: [echo FETCHED-VIA-MEMORY]\n";
  const doc = await encrypt(payload, ["--age", r1.recipient, "--input-type", "binary"]);
  await storeNamed("fetched").put("site/configs/prod/node-1", doc, { ifNoneMatch: "*" });
  opened.length = 0;
  const from = "memory://fetched/site/configs/prod/node-1";
  const r = await fetchInto(from, r1);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(opened, [{ name: "fetched", label: undefined, oneAttempt: true }]);
  assert.equal(await readFile(join(r.root, "etc/bootstrap/payload"), "utf8"), payload);
  const marker = await markerOf(r.root);
  assert.equal(marker.source, from);
  assert.equal(marker.machine, "prod/node-1");
  assert.match(r.stderr, /attempt 1 get memory:\/\/fetched\/site\/configs\/prod\/node-1: ok/);
});

test("rotate --store memory://NAME --add-age R2: every document opens with R2 alone, same plaintext", async () => {
  const store = storeNamed("rotated");
  const plaintexts = ["#cloud-config\n# zero\n", "#cloud-config\n# one\n", "#cloud-config\n# two\n"];
  await Promise.all(
    plaintexts.map(async (text, i) =>
      store.put(
        `configs/ns/name${i}`,
        await encrypt(text, ["--age", r1.recipient, "--input-type", "binary"]),
        {
          ifNoneMatch: "*",
        },
      ),
    ),
  );
  const run = await bootseal(["rotate", "--store", "memory://rotated", "--add-age", r2.recipient], {
    SOPS_AGE_KEY: r1.identity,
  });
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /^rotated 3, unchanged 0, skipped 0, failed 0$/m);
  for (const [i, text] of plaintexts.entries()) {
    const object = await store.get(`configs/ns/name${i}`);
    assert.ok(object);
    const opened = await decryptPayload(object.body, {
      deps: { env: { SOPS_AGE_KEY: r2.identity } },
      machine: null,
    });
    assert.equal(Buffer.from(opened).toString(), text);
  }
});

test("the CLI's help lists the scheme: serve --store, rotate --store, fetch --from", async () => {
  const serve = await bootseal(["serve", "--help"], {});
  assert.match(
    serve.stdout,
    /the object store \(file:\/\/DIR, s3:\/\/BUCKET\/PREFIX, gs:\/\/BUCKET\/PREFIX, memory:\/\/NAME\)/,
  );
  const rotate = await bootseal(["rotate", "--help"], {});
  assert.match(rotate.stdout, /rotate every document in this store \(.*memory:\/\/NAME\)/);
  const fetch = await bootseal(["fetch", "--help"], {});
  assert.match(fetch.stdout, /URL: https:\/\/HOST.*, gs:\/\/BUCKET\/KEY or memory:\/\/NAME\/KEY/);
});
