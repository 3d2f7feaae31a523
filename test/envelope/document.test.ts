import assert from "node:assert/strict";
import test from "node:test";
import {
  contentTypeOf,
  detectFormat,
  isEncryptedConfig,
  mediaTypeOf,
  SOPS_JSON,
  SOPS_YAML,
  sniffFormat,
} from "../../src/envelope/document.ts";

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
