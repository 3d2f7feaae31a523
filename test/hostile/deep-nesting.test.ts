/**
 * Deep nesting (issue #10 H1, the stack half): every reader refuses a document nested deeper
 * than MAX_NESTING_DEPTH with BAD_INPUT and a one-line message, in every collection style and
 * format (YAML flow, block, explicit keys; JSON; the flattened metadata names of dotenv and
 * INI), before anything recursive touches it; aliases cannot build a deeper tree than the text
 * has; a document at the limit still goes all the way through (parse, encrypt, emit, decrypt).
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { after, before, describe, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { main } from "../../src/cli/main.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import { parseYamlGeneral } from "../../src/envelope/sops/codecs/yaml-parse.ts";
import { MAX_NESTING_DEPTH } from "../../src/limits.ts";
import { buildApp } from "../../src/service/app.ts";
import { type AgeKey, ageKey, encrypt, machineEnv, run, tempDir } from "../fetcher/helpers.ts";
import { appConfig } from "../service/app-config.ts";
import { assertCleanMessage, assertRefused, deepDocuments, deepJson } from "./hostile-yaml.ts";

const utf8 = (s: string) => new TextEncoder().encode(s);
const clean = (text: string) => assertCleanMessage(text, (ok, m) => assert.ok(ok, m));
const HOSTILE = 100_000;
const TOO_DEEP = /nesting (deeper than 256 levels|too deep)/;

const refused = (fn: () => unknown, pattern = TOO_DEEP): void => assertRefused(fn, "BAD_INPUT", pattern);

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let yamlMetadata: string;
let jsonMetadata: string;

before(async () => {
  dir = await tempDir("deep-nesting");
  key = await ageKey(dir.path, "k1");
  const yaml = Buffer.from(
    await encrypt("x: 1\n", ["--age", key.recipient, "--input-type", "yaml", "--output-type", "yaml"]),
  ).toString("utf8");
  yamlMetadata = yaml.slice(yaml.indexOf("\nsops:") + 1);
  const json = JSON.parse(
    Buffer.from(
      await encrypt('{"x": 1}', ["--age", key.recipient, "--input-type", "json", "--output-type", "json"]),
    ).toString("utf8"),
  ) as { sops: unknown };
  jsonMetadata = JSON.stringify(json.sops);
});
after(async () => {
  await dir.remove();
});

const yaml = codecFor("yaml");
const json = codecFor("json");
/** A deep JSON text with sops metadata: `{"a": [[…]], "sops": {…}}`. */
const jsonWithMetadata = (text: string) => `${text.slice(0, -1)}, "sops": ${jsonMetadata}}`;

describe("YAML", () => {
  for (const doc of deepDocuments(HOSTILE)) {
    test(`${HOSTILE} levels of ${doc.label}: BAD_INPUT`, () => {
      refused(() => yaml.parsePlain(utf8(doc.text)));
      refused(() => yaml.parseEncrypted(utf8(`${doc.text}${yamlMetadata}`)));
      refused(() => parseYamlGeneral(doc.text));
    });
  }

  test("the limit is exact: the top mapping and 255 levels below it read; one more is refused", () => {
    const at = deepDocuments(MAX_NESTING_DEPTH - 1).filter((d) => d.label !== "explicit keys");
    for (const doc of at) {
      if (doc.label === "mixed flow") continue; // two levels per step
      const [branch] = yaml.parsePlain(utf8(doc.text));
      assert.ok(branch, doc.label);
      // and it is written out again (the emitter recurses too)
      assert.ok(yaml.emitPlain([branch]).length > 0);
    }
    for (const doc of deepDocuments(MAX_NESTING_DEPTH)) {
      // `? ` is a level of its own with no mapping around it: one more to be too deep.
      if (doc.label === "explicit keys") continue;
      refused(() => yaml.parsePlain(utf8(doc.text)));
    }
    const keys = deepDocuments(MAX_NESTING_DEPTH + 1).find((d) => d.label === "explicit keys");
    refused(() => yaml.parsePlain(utf8(keys!.text)));
  });

  test("block mappings indented one column per level (the fast path's shape) are refused too", () => {
    const depth = 3 * MAX_NESTING_DEPTH;
    const lines = Array.from({ length: depth }, (_, d) => `${" ".repeat(d)}k:`);
    const text = `${lines.join("\n")} v\n`;
    refused(() => yaml.parsePlain(utf8(text)));
  });

  test("aliases cannot build a tree deeper than the limit", () => {
    const half = 200;
    // Each level nests the previous anchor 200 levels further down: 2,000 levels in all.
    let text = `l0: &l0 ${"[".repeat(half)}1${"]".repeat(half)}\n`;
    for (let i = 1; i < 10; i++) text += `l${i}: &l${i} ${"[".repeat(half)}*l${i - 1}${"]".repeat(half)}\n`;
    refused(() => yaml.parsePlain(utf8(text)));
  });
});

describe("JSON", () => {
  for (const doc of deepJson(HOSTILE)) {
    test(`${HOSTILE} levels of ${doc.label}: BAD_INPUT`, () => {
      refused(() => json.parsePlain(utf8(doc.text)));
      refused(() => json.parseEncrypted(utf8(jsonWithMetadata(doc.text))));
    });
  }

  test("the same limit as YAML: 256 levels read, 257 are refused", () => {
    const [ok] = deepJson(MAX_NESTING_DEPTH - 1);
    const [branch] = json.parsePlain(utf8(ok!.text));
    assert.ok(branch);
    assert.ok(json.emitPlain([branch]).length > 0);
    assert.ok(yaml.emitPlain([branch]).length > 0, "and converts to YAML");
    const [deep] = deepJson(MAX_NESTING_DEPTH);
    refused(() => json.parsePlain(utf8(deep!.text)));
  });
});

describe("flattened metadata (dotenv, INI)", () => {
  const deepName = `version__map_${"a__map_".repeat(HOSTILE)}b`;
  test("a dotenv metadata name with 100,000 steps: BAD_INPUT", () => {
    const text = `x=1\nsops_${deepName}=v\nsops_version=3.13.2\n`;
    refused(() => codecFor("dotenv").parseEncrypted(utf8(text)), /nests deeper than 256 levels/);
  });
  test("an INI [sops] key with 100,000 steps: BAD_INPUT", () => {
    const text = `[s]\nx = 1\n\n[sops]\n${deepName} = v\nversion = 3.13.2\n`;
    refused(() => codecFor("ini").parseEncrypted(utf8(text)), /nests deeper than 256 levels/);
  });
  test("list steps count too", () => {
    const text = `x=1\nsops_k${"__list_0".repeat(HOSTILE)}=v\n`;
    refused(() => codecFor("dotenv").parseEncrypted(utf8(text)), /nests deeper than 256 levels/);
  });
});

const identity = await generateX25519Identity();
const recipient = await identityToRecipient(identity);
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";

function service() {
  const store = new MemoryStore();
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: createHash("sha256").update(ADMIN).digest("hex"), scopes: [...SCOPES] },
      ],
    }),
  });
  return { app, store };
}

describe("the service", () => {
  const put = (app: ReturnType<typeof service>["app"], url: string, contentType: string, payload: string) =>
    app.inject({
      method: "PUT",
      url,
      headers: { authorization: `Bearer ${ADMIN}`, "content-type": contentType },
      payload,
    });

  test("deep plaintext publishes (?format=yaml, ?format=json) get 400 BAD_INPUT; one at the limit is stored", async () => {
    const { app, store } = service();
    for (const doc of deepDocuments(HOSTILE)) {
      const res = await put(app, "/v1/machines/prod/m0/config?format=yaml", "text/plain", doc.text);
      assert.equal(res.statusCode, 400, `${doc.label}: ${res.body}`);
      assert.equal((res.json() as { code: string }).code, "BAD_INPUT");
      assert.match(res.body, TOO_DEEP);
      clean(res.body);
    }
    for (const doc of deepJson(HOSTILE)) {
      const res = await put(app, "/v1/machines/prod/m0/config?format=json", "text/plain", doc.text);
      assert.equal(res.statusCode, 400, `${doc.label}: ${res.body}`);
      assert.match(res.body, TOO_DEEP);
      clean(res.body);
    }
    const keys: string[] = [];
    for await (const info of store.list("")) keys.push(info.key);
    assert.deepEqual(keys, []);
    const [atLimit] = deepDocuments(MAX_NESTING_DEPTH - 1);
    const ok = await put(app, "/v1/machines/prod/m0/config?format=yaml", "text/plain", atLimit!.text);
    assert.equal(ok.statusCode, 201, ok.body);
    await app.close();
  });

  test("deep pre-encrypted uploads get 400 BAD_INPUT", async () => {
    const { app } = service();
    const [flow] = deepDocuments(HOSTILE);
    const y = await put(
      app,
      "/v1/machines/prod/m0/config",
      "application/sops+yaml",
      `${flow!.text}${yamlMetadata}`,
    );
    assert.equal(y.statusCode, 400, y.body);
    assert.match(y.body, TOO_DEEP);
    clean(y.body);
    const [arrays] = deepJson(HOSTILE);
    const j = await put(
      app,
      "/v1/machines/prod/m0/config",
      "application/sops+json",
      jsonWithMetadata(arrays!.text),
    );
    assert.equal(j.statusCode, 400, j.body);
    assert.match(j.body, TOO_DEEP);
    clean(j.body);
    await app.close();
  });
});

describe("a document at the limit goes all the way through", () => {
  test("encrypt, then decrypt, in YAML and JSON: the same plaintext back", async () => {
    const [yamlDoc] = deepDocuments(MAX_NESTING_DEPTH - 1);
    const [jsonDoc] = deepJson(MAX_NESTING_DEPTH - 1);
    for (const [type, plain] of [
      ["yaml", yamlDoc!.text],
      ["json", jsonDoc!.text],
    ] as const) {
      const enc = await encrypt(plain, ["--age", key.recipient, "--input-type", type, "--output-type", type]);
      const file = join(dir.path, `limit.${type}`);
      await writeFile(file, enc);
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      const out: Buffer[] = [];
      stdout.on("data", (c: Buffer) => out.push(c));
      const code = await main(["decrypt", file], {
        stdin: new PassThrough(),
        stdout,
        stderr,
        env: { SOPS_AGE_KEY: key.identity },
        cwd: dir.path,
      });
      assert.equal(code, 0, type);
      const back = Buffer.concat(out).toString();
      const again = codecFor(type).emitPlain(codecFor(type).parsePlain(utf8(plain)));
      assert.equal(back, Buffer.from(again).toString(), type);
    }
  });
});

describe("the CLI (processes)", () => {
  test("encrypt (READ_FAILED, sops's 2) and decrypt (BAD_INPUT) refuse deep YAML and JSON", async () => {
    const [flow] = deepDocuments(HOSTILE);
    const [arrays] = deepJson(HOSTILE);
    const cases = [
      ["encrypt", "deep.yaml", flow!.text],
      ["encrypt", "deep.json", arrays!.text],
      ["decrypt", "deep.enc.yaml", `${flow!.text}${yamlMetadata}`],
      ["decrypt", "deep.enc.json", jsonWithMetadata(arrays!.text)],
    ] as const;
    for (const [command, name, text] of cases) {
      const file = join(dir.path, name);
      await writeFile(file, text);
      const args = command === "encrypt" ? ["encrypt", "--age", key.recipient, file] : ["decrypt", file];
      const r = await run(args, machineEnv({ SOPS_AGE_KEY: key.identity }));
      const expected = command === "encrypt" ? EXIT_CODES.READ_FAILED : EXIT_CODES.BAD_INPUT;
      assert.equal(r.code, expected, `${command} ${name}: ${r.stderr}`);
      assert.match(r.stderr, TOO_DEEP);
      assert.equal(r.stdout, "");
      clean(r.stderr);
    }
  });

  test("fetch from a file:// source holding a deep document: BAD_INPUT, nothing written", async () => {
    const [flow] = deepDocuments(HOSTILE);
    const file = join(dir.path, "fetch-deep.sops.yaml");
    await writeFile(file, `${flow!.text}${yamlMetadata}`);
    const root = join(dir.path, "root");
    await mkdir(root);
    const r = await run(
      ["fetch", "--from", `file://${file}`, "--apply", "--root", root],
      machineEnv({ SOPS_AGE_KEY: key.identity }),
    );
    assert.equal(r.code, EXIT_CODES.BAD_INPUT, r.stderr);
    assert.match(r.stderr, TOO_DEEP);
    clean(r.stderr + r.stdout);
  });
});
