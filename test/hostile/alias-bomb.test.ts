/**
 * Issue #10 H1: nested YAML aliases ("billion laughs") on every entry point that reads YAML:
 * the codec itself, the service (a plaintext publish with ?format=yaml and a pre-encrypted
 * application/sops+yaml upload), `bootseal encrypt` and `bootseal decrypt` as processes,
 * `bootseal fetch` from a file:// source, and `rotate --store` over a file store holding such
 * objects. Each is refused with BAD_INPUT (or TOO_LARGE for text that expands past the cap),
 * quickly, with a one-line message that shows neither content nor a stack trace; a document
 * with a few aliases still reads as before.
 */
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { openStore } from "../../providers/stores/index.ts";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { StoredObject } from "../../providers/stores/object-store.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { yamlCodec } from "../../src/envelope/sops/codecs/yaml.ts";
import { parseYamlGeneral } from "../../src/envelope/sops/codecs/yaml-parse.ts";
import { MAX_ALIAS_EXPANSION_NODES, MAX_DOCUMENT_BYTES } from "../../src/limits.ts";
import { buildApp } from "../../src/service/app.ts";
import { auditLoggerTo } from "../../src/service/plugins/audit.ts";
import { type AgeKey, ageKey, encrypt, machineEnv, run, tempDir } from "../fetcher/helpers.ts";
import { appConfig } from "../service/app-config.ts";
import {
  assertCleanMessage,
  assertRefused,
  blockSeqBomb,
  bombs,
  flowSeqBomb,
  mapBomb,
  mergeBomb,
} from "./hostile-yaml.ts";

const utf8 = (s: string) => new TextEncoder().encode(s);
const clean = (text: string) => assertCleanMessage(text, (ok, m) => assert.ok(ok, m));

const refused = assertRefused;

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let other: AgeKey;
/** The `sops:` block of a real encrypted YAML document, to make bombs look encrypted. */
let metadata: string;

before(async () => {
  dir = await tempDir("alias-bomb");
  key = await ageKey(dir.path, "k1");
  other = await ageKey(dir.path, "k2");
  const doc = Buffer.from(
    await encrypt("x: 1\n", ["--age", key.recipient, "--input-type", "yaml", "--output-type", "yaml"]),
  ).toString("utf8");
  metadata = doc.slice(doc.indexOf("\nsops:") + 1);
  assert.ok(metadata.startsWith("sops:"));
});
after(async () => {
  await dir.remove();
});

/** A bomb with sops metadata after it: what decrypt, fetch, rotate and an upload read. */
const encryptedBomb = (text: string) => `${text}${metadata}`;

describe("the YAML codec", () => {
  for (const bomb of bombs()) {
    test(`refuses ${bomb.label}`, () => {
      refused(() => yamlCodec.parsePlain(utf8(bomb.text)), "BAD_INPUT", /excessive aliasing/);
      refused(
        () => yamlCodec.parseEncrypted(utf8(encryptedBomb(bomb.text))),
        "BAD_INPUT",
        /excessive aliasing/,
      );
      refused(() => parseYamlGeneral(bomb.text), "BAD_INPUT", /excessive aliasing/);
    });
  }

  test("refuses a document whose aliases expand a large string past the document cap", () => {
    // Few nodes (the node budget does not apply), but 70 copies of 1 MiB.
    const big = "x".repeat(1024 * 1024);
    const text = `a: &a "${big}"\nb: [${Array(70).fill("*a").join(",")}]\n`;
    assert.ok(70 * big.length > MAX_DOCUMENT_BYTES);
    refused(() => yamlCodec.parsePlain(utf8(text)), "TOO_LARGE", /expands to more than 64 MiB/);
  });

  test("the fixed ceiling holds where go-yaml's ratio alone would allow more", () => {
    // 1,000 keys aliased 60 times: 98% of the nodes come from aliases (under go-yaml's 99%),
    // but that is 120,000 expanded nodes.
    const keys = Array.from({ length: 1000 }, (_, k) => `  k${k}: v\n`).join("");
    const text = `a: &a\n${keys}b: [${Array(60).fill("*a").join(",")}]\n`;
    assert.ok(60 * 2001 > MAX_ALIAS_EXPANSION_NODES);
    refused(() => yamlCodec.parsePlain(utf8(text)), "BAD_INPUT", /excessive aliasing/);
    // 40 of them (80,000 nodes) are within both.
    const fewer = `a: &a\n${keys}b: [${Array(40).fill("*a").join(",")}]\n`;
    const [branch] = yamlCodec.parsePlain(utf8(fewer));
    const b = branch?.items[1];
    assert.ok(b?.kind === "entry" && b.value.kind === "seq" && b.value.items.length === 40);
  });

  test("small bombs below the ratio threshold still expand (go-yaml's rule starts at 1,000 nodes)", () => {
    for (const make of [flowSeqBomb, blockSeqBomb, mapBomb, mergeBomb]) {
      const [branch] = yamlCodec.parsePlain(utf8(make(3, 9)));
      assert.equal(branch?.items.length, 3);
    }
  });

  test("a document with a few aliases and a merge key reads as before", () => {
    const text = [
      "base: &base",
      "  image: nginx",
      "  port: 80",
      "web:",
      "  <<: *base",
      "  name: web",
      "list: [*base, *base]",
      "",
    ].join("\n");
    const [branch] = yamlCodec.parsePlain(utf8(text));
    const out = new TextDecoder().decode(yamlCodec.emitPlain([branch!]));
    assert.equal(
      out,
      [
        "base:",
        "    image: nginx",
        "    port: 80",
        "web:",
        "    !!merge <<:",
        "        image: nginx",
        "        port: 80",
        "    name: web",
        "list:",
        "    - image: nginx",
        "      port: 80",
        "    - image: nginx",
        "      port: 80",
        "",
      ].join("\n"),
    );
  });
});

const identity = await generateX25519Identity();
const recipient = await identityToRecipient(identity);
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";

async function service() {
  const store = new MemoryStore();
  const audit = new PassThrough();
  const lines: string[] = [];
  audit.on("data", (c: Buffer) => lines.push(c.toString()));
  const { createHash } = await import("node:crypto");
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: createHash("sha256").update(ADMIN).digest("hex"), scopes: [...SCOPES] },
      ],
    }),
    audit: auditLoggerTo(audit),
  });
  return { app, store, audit: lines };
}

async function storedKeys(store: MemoryStore): Promise<string[]> {
  const keys: string[] = [];
  for await (const info of store.list("")) keys.push(info.key);
  return keys;
}

describe("the service", () => {
  for (const bomb of bombs().filter((b) => /levels of 9/.test(b.label))) {
    test(`PUT ?format=yaml with ${bomb.label}: 400 BAD_INPUT, nothing stored`, async () => {
      const { app, store, audit } = await service();
      const res = await app.inject({
        method: "PUT",
        url: "/v1/machines/prod/worker-0/config?format=yaml",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
        payload: bomb.text,
      });
      assert.equal(res.statusCode, 400, res.body);
      const body = res.json() as { code: string; message: string };
      assert.equal(body.code, "BAD_INPUT");
      assert.match(body.message, /excessive aliasing/);
      clean(res.body);
      clean(audit.join(""));
      assert.deepEqual(await storedKeys(store), []);
      await app.close();
    });
  }

  test("an application/sops+yaml upload with aliases: 400 BAD_INPUT, nothing stored", async () => {
    const doc = Buffer.from(
      await encrypt("x: 1\n", ["--age", recipient, "--input-type", "yaml", "--output-type", "yaml"]),
    ).toString("utf8");
    const sops = doc.slice(doc.indexOf("\nsops:") + 1);
    for (const make of [flowSeqBomb, mapBomb, mergeBomb]) {
      const { app, store } = await service();
      const res = await app.inject({
        method: "PUT",
        url: "/v1/machines/prod/worker-0/config",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "application/sops+yaml" },
        payload: `${make(7, 9)}${sops}`,
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal((res.json() as { code: string }).code, "BAD_INPUT");
      assert.match(res.body, /excessive aliasing/);
      clean(res.body);
      assert.deepEqual(await storedKeys(store), []);
      await app.close();
    }
  });

  test("two bombs in parallel are both refused and the service still answers", async () => {
    const { app } = await service();
    const put = () =>
      app.inject({
        method: "PUT",
        url: "/v1/machines/prod/worker-0/config?format=yaml",
        headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
        payload: flowSeqBomb(7, 9),
      });
    const answers = await Promise.all([put(), put()]);
    assert.deepEqual(
      answers.map((a) => a.statusCode),
      [400, 400],
    );
    const ok = await app.inject({
      method: "PUT",
      url: "/v1/machines/prod/worker-0/config?format=yaml",
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
      payload: "base: &b {x: 1}\nuse: *b\n",
    });
    assert.equal(ok.statusCode, 201, ok.body);
    await app.close();
  });
});

/** The reproducer in each shape: what the process-level entry points are run with. */
const REPRODUCERS = [flowSeqBomb, blockSeqBomb, mapBomb, mergeBomb].map((make) => make(7, 9));

describe("bootseal encrypt and decrypt (processes)", () => {
  test("encrypt refuses each bomb as unparseable plaintext (READ_FAILED, sops's exit 2)", async () => {
    for (const [i, text] of REPRODUCERS.entries()) {
      const file = join(dir.path, `plain-${i}.yaml`);
      await writeFile(file, text);
      const r = await run(["encrypt", "--age", key.recipient, file], machineEnv());
      assert.equal(r.code, EXIT_CODES.READ_FAILED, r.stderr);
      assert.match(r.stderr, /excessive aliasing/);
      assert.equal(r.stdout, "");
      clean(r.stderr);
    }
  });

  test("decrypt refuses each bomb with the BAD_INPUT exit code", async () => {
    for (const [i, text] of REPRODUCERS.entries()) {
      const file = join(dir.path, `enc-${i}.yaml`);
      await writeFile(file, encryptedBomb(text));
      const r = await run(["decrypt", file], machineEnv({ SOPS_AGE_KEY: key.identity }));
      assert.equal(r.code, EXIT_CODES.BAD_INPUT, r.stderr);
      assert.match(r.stderr, /excessive aliasing/);
      assert.equal(r.stdout, "");
      clean(r.stderr);
    }
  });
});

describe("bootseal fetch from a file:// source", () => {
  test("each bomb fails with the BAD_INPUT exit code and writes nothing", async () => {
    for (const [i, text] of REPRODUCERS.entries()) {
      const file = join(dir.path, `fetch-${i}.sops.yaml`);
      await writeFile(file, encryptedBomb(text));
      const root = join(dir.path, `root-${i}`);
      await mkdir(root);
      const r = await run(
        ["fetch", "--from", `file://${file}`, "--apply", "--root", root],
        machineEnv({ SOPS_AGE_KEY: key.identity }),
      );
      assert.equal(r.code, EXIT_CODES.BAD_INPUT, r.stderr);
      assert.match(r.stderr, /excessive aliasing/);
      clean(r.stderr + r.stdout);
    }
  });
});

describe("rotate --store over a file store", () => {
  test("an object holding a bomb is reported failed and left byte-identical; the others rotate", async () => {
    const storeDir = join(dir.path, "store");
    await mkdir(storeDir, { recursive: true });
    const url = `file://${storeDir}`;
    const store = openStore(url, { env: {} });
    const good = await encrypt("token: fine\n", [
      "--age",
      key.recipient,
      "--input-type",
      "yaml",
      "--output-type",
      "yaml",
    ]);
    await store.put("configs/ns/good", good, { ifNoneMatch: "*" }, { contentType: "application/sops+yaml" });
    const bombKeys = REPRODUCERS.map((_, i) => `configs/ns/bomb${i}`);
    for (const [i, text] of REPRODUCERS.entries()) {
      await store.put(
        bombKeys[i] as string,
        utf8(encryptedBomb(text)),
        { ifNoneMatch: "*" },
        {
          contentType: "application/sops+yaml",
        },
      );
    }
    const before = new Map<string, StoredObject>();
    for (const k of bombKeys) before.set(k, (await store.get(k)) as StoredObject);

    const r = await run(
      ["rotate", "--store", url, "--add-age", other.recipient],
      machineEnv({ SOPS_AGE_KEY: key.identity }),
    );
    assert.equal(r.code, EXIT_CODES.BAD_INPUT, r.stdout + r.stderr);
    for (const k of bombKeys) {
      assert.match(r.stdout, new RegExp(`^failed ${k}: BAD_INPUT .*excessive aliasing`, "m"));
      const now = (await store.get(k)) as StoredObject;
      assert.deepEqual(now.body, before.get(k)?.body, `${k} untouched`);
      assert.equal(now.etag, before.get(k)?.etag);
    }
    assert.match(r.stdout, /^rotated 1, unchanged 0, skipped 0, failed 4$/m);
    clean(r.stdout + r.stderr);
    const rotated = (await store.get("configs/ns/good")) as StoredObject;
    assert.notDeepEqual(rotated.body, good);
    assert.ok(Buffer.from(rotated.body).includes(other.recipient));
  });
});
