import assert from "node:assert/strict";
import test from "node:test";
import fc from "fast-check";
import {
  contentTypeOf,
  detectFormat,
  isEncryptedConfig,
  mediaTypeOf,
  SOPS_JSON,
  SOPS_YAML,
  sniffFormat,
} from "../../src/envelope/document.ts";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text);

const YAML_DOC = bytes("a: ENC[AES256_GCM,data:x]\nsops:\n  version: 3.9.0\n");
const JSON_DOC = bytes('{\n\t"a": "ENC[x]",\n\t"sops": {"version": "3.9.0"}\n}');
const BINARY_DOC = bytes('{\n\t"data": "ENC[x]",\n\t"sops": {"version": "3.9.0"}\n}');

test("sniffFormat: `{` is JSON, {data, sops} is binary, anything else YAML", () => {
  assert.equal(sniffFormat(YAML_DOC), "yaml");
  assert.equal(sniffFormat(JSON_DOC), "json");
  assert.equal(sniffFormat(BINARY_DOC), "binary");
  // Whitespace and a UTF-8 BOM before the brace do not hide it.
  assert.equal(sniffFormat(new Uint8Array([0xef, 0xbb, 0xbf, 0x0a, ...BINARY_DOC])), "binary");
  // Broken JSON stays "json" so the JSON codec reports the error with its line number.
  assert.equal(sniffFormat(bytes('{"data": ')), "json");
  assert.equal(sniffFormat(bytes('{"data": "x"}')), "json");
  assert.equal(sniffFormat(new Uint8Array()), "yaml");
});

test("detectFormat: a named format, then the content type, then the file name, then the bytes", () => {
  assert.equal(detectFormat(YAML_DOC, { format: "binary", contentType: SOPS_YAML }), "binary");
  assert.equal(detectFormat(YAML_DOC, { format: "nonsense" }), "yaml", "an unknown name is ignored");
  assert.equal(detectFormat(BINARY_DOC, { contentType: `${SOPS_JSON}; charset=utf-8` }), "binary");
  assert.equal(detectFormat(JSON_DOC, { contentType: SOPS_YAML, fileName: "x.json" }), "yaml");
  assert.equal(
    detectFormat(YAML_DOC, { contentType: "application/octet-stream", fileName: "x.env" }),
    "dotenv",
  );
  assert.equal(detectFormat(JSON_DOC, { fileName: "x.bin" }), "binary", "sops: unknown suffixes are binary");
  assert.equal(detectFormat(JSON_DOC), "json");
  assert.equal(detectFormat(YAML_DOC, { fileName: "" }), "yaml");
});

test("contentTypeOf and mediaTypeOf agree on the stored formats", () => {
  assert.equal(contentTypeOf("yaml"), SOPS_YAML);
  assert.equal(contentTypeOf("json"), SOPS_JSON);
  assert.equal(contentTypeOf("binary"), SOPS_JSON);
  assert.equal(mediaTypeOf(" Application/SOPS+JSON ; q=1"), SOPS_JSON);
  assert.equal(mediaTypeOf(undefined), "");
});

test("isEncryptedConfig: a JSON object of kind EncryptedConfig, never a SOPS document", () => {
  assert.equal(
    isEncryptedConfig(bytes('  {"apiVersion": "bootseal.dev/v1alpha1", "kind": "EncryptedConfig"}')),
    true,
  );
  assert.equal(isEncryptedConfig(JSON_DOC), false);
  assert.equal(isEncryptedConfig(bytes('kind: EncryptedConfig\n"kind": "EncryptedConfig"')), false);
});

/** The format by a whole parse (what sniffFormat did before it scanned the top-level keys first). */
function parsedFormat(bytes: Uint8Array): "yaml" | "json" | "binary" {
  const text = new TextDecoder().decode(bytes);
  if (!/^\s*\{/.test(text)) return "yaml";
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return "json";
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return "json";
  const keys = Object.keys(parsed).sort();
  return keys.length === 2 && keys[0] === "data" && keys[1] === "sops" ? "binary" : "json";
}

/** Whether the codec of `format` loads the encrypted bytes, or the error it reports. */
function loadOutcome(format: "json" | "binary", b: Uint8Array): string {
  try {
    codecFor(format).parseEncrypted(b);
    return "loaded";
  } catch (err) {
    return String((err as Error).message);
  }
}

test("sniffFormat: the top-level key scan agrees with a whole parse on valid JSON; on broken JSON either answer loads alike", () => {
  const key = fc.constantFrom(
    '"data"',
    '"sops"',
    '"d\\u0061ta"',
    '"so\\u0070s"',
    '"x"',
    '"da\\"ta"',
    '""',
    '"\\\\"',
    '"data\\\\"',
    '"sops "',
  );
  const space = fc.constantFrom("", " ", "\n\t", "\r\n  ");
  const object = fc
    .array(fc.tuple(space, key, space, fc.json(), space), { maxLength: 5 })
    .map((entries) => `{${entries.map(([a, k, b, v, c]) => `${a}${k}${b}:${v}${c}`).join(",")}}`);
  const document = fc.tuple(
    fc.constantFrom("", " ", "\ufeff", "\n"),
    object,
    fc.nat(),
    fc.nat(),
    fc.string(),
  );
  let broken = 0;
  fc.assert(
    fc.property(document, ([head, text, cut, at, noise]) => {
      const variants = [
        head + text,
        head + text.slice(0, cut % (text.length + 1)),
        head + text.slice(0, at % (text.length + 1)) + noise + text.slice(at % (text.length + 1)),
      ];
      for (const variant of variants) {
        const b = bytes(variant);
        const sniffed = sniffFormat(b);
        const parsed = parsedFormat(b);
        if (sniffed === parsed) continue;
        // Only broken JSON may differ, and then both codecs refuse it with the same words.
        assert.equal(parsed, "json", JSON.stringify(variant));
        assert.equal(sniffed, "binary", JSON.stringify(variant));
        const refusal = loadOutcome("json", b);
        assert.notEqual(refusal, "loaded", JSON.stringify(variant));
        assert.equal(loadOutcome("binary", b), refusal, JSON.stringify(variant));
        broken++;
      }
    }),
    { numRuns: 3000 },
  );
  assert.ok(broken > 0, "some broken documents were told apart by the scan alone");
  // The common fetch: a JSON document's first key settles it without a parse.
  assert.equal(sniffFormat(bytes('{"a": 1, "data": "x", "sops": {}, ')), "json");
  assert.equal(sniffFormat(bytes('{"data": "}\\"", "sops": {"data": [1, {"x": "]"}]}}')), "binary");
});
