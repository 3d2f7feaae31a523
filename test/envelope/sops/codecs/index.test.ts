/**
 * The codec registry: sops' path rules (cmd/sops/formats/formats.go) and one codec per format.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { binaryCodec } from "../../../../src/envelope/sops/codecs/binary.ts";
import { FORMATS, type Format } from "../../../../src/envelope/sops/codecs/codec.ts";
import { codecFor, formatFromPath } from "../../../../src/envelope/sops/codecs/index.ts";
import { jsonCodec } from "../../../../src/envelope/sops/codecs/json.ts";
import { type SopsPeer, startSopsPeer } from "./sops-peer.ts";

describe("codec registry", () => {
  it("codecFor gives a codec of that format for every format", () => {
    for (const format of FORMATS) assert.equal(codecFor(format).format, format);
    assert.equal(codecFor("json"), jsonCodec);
    assert.equal(codecFor("binary"), binaryCodec);
  });

  const cases: [string, Format][] = [
    ["a.yaml", "yaml"],
    ["dir.d/a.yml", "yaml"],
    ["a.json", "json"],
    ["/etc/x/.env", "dotenv"],
    ["prod.env", "dotenv"],
    ["a.ini", "ini"],
    // Case-sensitive suffixes, as in sops: anything else is binary.
    ["a.YAML", "binary"],
    ["a.Json", "binary"],
    ["a.json.bak", "binary"],
    ["a.txt", "binary"],
    ["Makefile", "binary"],
    ["", "binary"],
    ["yaml", "binary"],
  ];
  for (const [path, format] of cases) {
    it(`formatFromPath(${JSON.stringify(path)}) = ${format}`, () =>
      assert.equal(formatFromPath(path), format));
  }
});

describe("codec registry: sops agrees on binary vs JSON by file name", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  for (const name of ["x.json", "x.JSON", "x.json.bak", "noext"]) {
    it(name, () => {
      const file = join(sops.dir, name);
      writeFileSync(file, '{"data": "d", "k": "v"}');
      const out = sops.run(["encrypt", "--age", sops.recipients[0], file]);
      const { branches } = jsonCodec.parseEncrypted(new Uint8Array(out));
      const keys = branches[0]?.items.map((i) => (i.kind === "entry" ? i.key : "#"));
      // A JSON file keeps its two keys; a binary one becomes the single `data` value.
      assert.deepEqual(keys, formatFromPath(name) === "json" ? ["data", "k"] : ["data"]);
    });
  }
});
