/**
 * The output cap (issue #10 H1: a 237-byte publish stored a 72.8 MiB document no machine could
 * fetch): no codec writes a document larger than MAX_DOCUMENT_BYTES, whatever tree it is
 * given, and an oversized one stops with TOO_LARGE while it is being written. The trees here
 * share one large string many times over, as alias expansion or encryption can make them, so
 * building them costs nothing; writing them would be hundreds of megabytes.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { codecFor } from "../../src/envelope/sops/codecs/index.ts";
import type { Branch, Entry, Mapping, Value } from "../../src/envelope/sops/document.ts";
import { BootsealError } from "../../src/errors.ts";
import { MAX_DOCUMENT_BYTES } from "../../src/limits.ts";

const MiB = 1024 * 1024;
const big = "x".repeat(MiB);
const str = (value: string): Value => ({ kind: "scalar", type: "str", value });
const entries = (n: number, value: (i: number) => Value): Entry[] =>
  Array.from({ length: n }, (_, i) => ({ kind: "entry", key: `k${i}`, value: value(i) }));
/** `n` keys, each holding the same 1 MiB string: n MiB of output at least. */
const flat = (n: number): Branch => ({ kind: "map", items: entries(n, () => str(big)) });
const metadata: Mapping = { kind: "map", items: [{ kind: "entry", key: "version", value: str("3.13.2") }] };

function tooLarge(fn: () => unknown): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof BootsealError, String(err));
    assert.equal(err.code, "TOO_LARGE", err.message);
    assert.match(err.message, /larger than 64 MiB/);
    assert.ok(!err.message.includes("xxxx"));
    return true;
  });
}

describe("every codec refuses to write more than MAX_DOCUMENT_BYTES", () => {
  for (const format of ["yaml", "json", "dotenv"] as const) {
    test(`${format}: output far over the cap`, () => {
      const codec = codecFor(format);
      // 2 GiB: far over the cap (V8 could not even hold the string), stopped early, not a
      // RangeError; each call costs writing the first 64 MiB.
      tooLarge(() =>
        format === "json" ? codec.emitEncrypted([flat(2048)], metadata) : codec.emitPlain([flat(2048)]),
      );
    });
  }

  test("ini: sections of shared values, and one long key name padding every line of its section", () => {
    const ini = codecFor("ini");
    const sections = (n: number): Branch => ({
      kind: "map",
      items: entries(n, () => ({ kind: "map", items: entries(1, () => str(big)) })),
    });
    tooLarge(() => ini.emitPlain([sections(70)]));
    // 200,000 short keys after one 1 KiB name: 200 MiB of padding from ~1 MiB of tree.
    const padded: Branch = {
      kind: "map",
      items: [
        {
          kind: "entry",
          key: "s",
          value: {
            kind: "map",
            items: [
              { kind: "entry", key: "n".repeat(1024), value: str("v") },
              ...entries(200_000, () => str("v")),
            ],
          },
        },
      ],
    };
    tooLarge(() => ini.emitPlain([padded]));
  });

  test("yaml: deep indentation cannot multiply a small tree past the cap", () => {
    // 250 levels of 4-space indentation: every scalar line is ~1 KiB, 100,000 of them.
    let value: Value = { kind: "seq", items: Array.from({ length: 100_000 }, () => str("v")) };
    for (let d = 0; d < 250; d++) value = { kind: "map", items: [{ kind: "entry", key: "k", value }] };
    const branch: Branch = { kind: "map", items: [{ kind: "entry", key: "top", value }] };
    tooLarge(() => codecFor("yaml").emitPlain([branch]));
  });

  test("binary: data larger than the cap", () => {
    const data: Branch = { kind: "map", items: [{ kind: "entry", key: "data", value: str(big.repeat(65)) }] };
    tooLarge(() => codecFor("binary").emitPlain([data]));
  });

  test("a document just under the cap is written", () => {
    const n = Math.floor(MAX_DOCUMENT_BYTES / MiB) - 1;
    const out = codecFor("json").emitPlain([flat(n)]);
    assert.ok(out.byteLength > (n - 1) * MiB && out.byteLength <= MAX_DOCUMENT_BYTES);
  });

  test("ini: a section of 200,000 keys reads and writes in linear time (no per-key search)", {
    timeout: 120_000,
  }, () => {
    const lines = Array.from({ length: 200_000 }, (_, i) => `k${i} = v`);
    const text = `[s]\n${lines.join("\n")}\n`;
    const ini = codecFor("ini");
    const [branch] = ini.parsePlain(new TextEncoder().encode(text));
    const section = branch?.items[1]; // after the DEFAULT section
    assert.ok(section?.kind === "entry" && section.value.kind === "map");
    assert.equal(section.value.items.length, 200_000);
    assert.ok(ini.emitPlain([branch!]).byteLength > text.length);
  });
});
