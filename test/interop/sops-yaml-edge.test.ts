/**
 * The YAML and metadata edge cases of issue #15, side by side with the real sops 3.13.2 and
 * 3.13.3 (same plaintext, same age key):
 * - comments inside YAML lists: what sops 3.13.3 encrypts, bootseal decrypts to the bytes
 *   sops prints, and the reverse; both write the same shape (`- ENC[…,type:comment]` items);
 *   sops 3.13.2 fails its own MAC on such files (its regression), and on bootseal's too;
 * - comments elsewhere keep interoperating with sops 3.13.2 as well;
 * - `%YAML`/`%TAG` directives: both accept or both refuse;
 * - which selection rule the metadata records: none for binary input, the default
 *   `unencrypted_suffix: _unencrypted` for every other format, also from a `.sops.yaml` rule
 *   without a selection option, and after `rotate` of a document that records none.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { runChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";
import { createHarness, type Harness, ok, type RunResult } from "./harness.ts";

const TIMEOUT = 120_000;

/** Comments inside lists in every position sops distinguishes (stores/yaml/store.go). */
const LIST_CASES: Record<string, string> = {
  first: "list:\n  # c\n  - x\n",
  between: "list:\n  - x\n  # c1\n  # c2\n\n  # c3\n  - y\n  #\n  - z\n# top end\n",
  nested:
    "a:\n  - - a\n    # in nested\n    - b\n    # end nested\n  # after nested\n  - k: v\n    # in map item\n    j: w\n  # tail\n",
  unencrypted: "list_unencrypted:\n  # c\n  - x\nother:\n  # d\n  - y\n",
  inline: "list: # after key\n  - x # inline x\n  - [a, b] # flow\n  - {k: v} # flowmap\n",
  multidoc: "a: 1\n---\nlist:\n  # doc2\n  - x\n",
  empty: "list:\n  - x\n  # c\n  -\n  # d\n  -\n  - y\nb:\n  # e\n  - !!str\n  - z\n",
  typed: "list:\n  # c\n  - 1\n  - true\n  - 2024-01-01T00:00:00Z\n  - 1.5\n",
  dedented: "x:\n  - - k: v\n    # tail\ny:\n  - k: v\n  # foot\n\nz: 1\n",
};

/** Comments outside lists: sops 3.13.2 handles these too. */
const PLAIN_CASES: Record<string, string> = {
  top: "# top\na: 1 # inline\n# between\nb:\n  # nested\n  c: 2\n# end\n",
  blank: "a: 1\n\n# after blank\n\nb: 2\n",
};

const DIRECTIVES: Record<string, string> = {
  "yaml-1.1": "%YAML 1.1\n---\na: 1\n",
  "yaml-1.2": "%YAML 1.2\n---\na: 1\n",
  "yaml-twice": "%YAML 1.1\n%YAML 1.1\n---\na: 1\n",
  "tag-ok": '%TAG !e! tag:yaml.org,2002:\n---\na: !e!int "5"\n',
  "tag-twice": "%TAG !e! tag:x,2000:\n%TAG !e! tag:y,2000:\n---\na: 1\n",
  unknown: "%FOO bar\n---\na: 1\n",
  "second-doc": "a: 1\n---\n%YAML 1.2\n---\nb: 1\n",
};

/** The encrypted document without its metadata and with every ENC[] reduced to its type. */
const shape = (bytes: Buffer): string =>
  bytes
    .toString("utf8")
    .split(/^sops:$/m)[0]!
    .replace(/ENC\[AES256_GCM,data:[^,]*,iv:[^,]*,tag:[^,]*,type:([a-z]+)\]/g, "ENC[$1]");

describe("YAML and metadata edge cases against sops 3.13.2 and 3.13.3", { timeout: 600_000 }, () => {
  let h: Harness;
  let sops3: (args: string[], opts?: { cwd?: string }) => Promise<RunResult>;
  let n = 0;
  /** A fresh directory holding `name` with `content`. */
  const place = (name: string, content: string): { dir: string; file: string } => {
    const dir = join(h.dir, `case-${n++}`);
    mkdirSync(dir);
    writeFileSync(join(dir, name), content);
    return { dir, file: join(dir, name) };
  };

  before(() => {
    h = createHarness();
    const bin = peer("SOPS_3_13_3_BIN");
    sops3 = (args, opts = {}) => runChild(bin, args, { env: h.env, cwd: opts.cwd ?? h.dir });
  });
  after(() => h?.cleanup());

  /** Both directions with one sops; returns the two encrypted files. */
  async function bothWays(
    content: string,
    sopsOf: (args: string[]) => Promise<RunResult>,
  ): Promise<{ bySops: string; byBootseal: string; printed: Buffer }> {
    const { dir, file } = place("doc.yaml", content);
    const bySops = join(dir, "sops.enc.yaml");
    const byBootseal = join(dir, "bootseal.enc.yaml");
    writeFileSync(bySops, ok(await sopsOf(["encrypt", "--age", h.ageRecipient, file]), "sops encrypt"));
    writeFileSync(
      byBootseal,
      ok(await h.bootseal(["encrypt", "--age", h.ageRecipient, file]), "bootseal encrypt"),
    );
    const printed = ok(await sopsOf(["decrypt", bySops]), "sops decrypt (its own file)");
    assert.deepEqual(ok(await h.bootseal(["decrypt", bySops]), "bootseal decrypt (sops's file)"), printed);
    assert.equal(shape(readFileSync(byBootseal)), shape(readFileSync(bySops)), "encrypted shape");
    return { bySops, byBootseal, printed };
  }

  describe("comments inside lists (sops 3.13.3)", () => {
    for (const [name, content] of Object.entries(LIST_CASES)) {
      test(name, { timeout: TIMEOUT }, async () => {
        const { byBootseal, bySops, printed } = await bothWays(content, (a) => sops3(a));
        assert.deepEqual(ok(await sops3(["decrypt", byBootseal]), "sops decrypt (bootseal's file)"), printed);
        assert.deepEqual(
          ok(await h.bootseal(["decrypt", byBootseal]), "bootseal decrypt (its own)"),
          printed,
        );
        // sops 3.13.2's regression: it hashes the decrypted comment and fails the MAC (51).
        if (shape(readFileSync(bySops)).includes("- ENC[comment]")) {
          assert.equal((await h.sops(["decrypt", bySops])).status, 51);
          assert.equal((await h.sops(["decrypt", byBootseal])).status, 51);
        }
      });
    }
  });

  describe("comments elsewhere (sops 3.13.2 and 3.13.3)", () => {
    for (const [name, content] of Object.entries(PLAIN_CASES)) {
      for (const [version, run] of [
        ["3.13.2", (a: string[]) => h.sops(a)],
        ["3.13.3", (a: string[]) => sops3(a)],
      ] as const) {
        test(`${name} with sops ${version}`, { timeout: TIMEOUT }, async () => {
          const { byBootseal, printed } = await bothWays(content, run);
          assert.deepEqual(ok(await run(["decrypt", byBootseal]), "sops decrypt (bootseal's file)"), printed);
        });
      }
    }
  });

  describe("directives: both tools accept or both refuse", () => {
    for (const [name, content] of Object.entries(DIRECTIVES)) {
      test(name, { timeout: TIMEOUT }, async () => {
        const { file } = place("doc.yaml", content);
        const args = ["encrypt", "--age", h.ageRecipient, file];
        const [s2, s3, b] = [await h.sops(args), await sops3(args), await h.bootseal(args)];
        assert.equal(s2.status === 0, s3.status === 0, "sops 3.13.2 and 3.13.3 agree");
        assert.equal(b.status === 0, s3.status === 0, `bootseal: ${b.stderr.trim()}`);
        if (s3.status === 0) assert.equal(shape(b.stdout), shape(s3.stdout));
        else {
          // One line naming the YAML problem, never a stack trace, and sops's exit code.
          assert.match(b.stderr.trim(), /^bootseal: Error unmarshalling file: yaml: line \d+: [^\n]+$/);
          assert.equal(b.status, s3.status, "the same exit code as sops 3.13.3");
        }
      });
    }
  });

  describe("the selection rule recorded in the metadata", () => {
    const FILES: Record<string, string> = {
      "doc.bin": "binary payload\n",
      "doc.env": "A=1\n",
      "doc.ini": "[s]\na = 1\n",
      "doc.yaml": "a: 1\n",
      "doc.json": '{"a": 1}\n',
    };
    const rules = (bytes: Buffer): string[] =>
      [
        ...bytes
          .toString("utf8")
          .matchAll(/(?:^|[\s"])(?:sops_)?((?:un)?encrypted_(?:suffix|regex|comment_regex))\b/gm),
      ].map((m) => m[1]!);

    for (const [name, content] of Object.entries(FILES)) {
      test(`${name}: flags, a .sops.yaml rule without a selection option, and one with`, {
        timeout: TIMEOUT,
      }, async () => {
        const { dir, file } = place(name, content);
        const byFlag = ["encrypt", "--age", h.ageRecipient, file];
        const s = ok(await sops3(byFlag), "sops encrypt");
        const b = ok(await h.bootseal(byFlag), "bootseal encrypt");
        assert.deepEqual(rules(b), rules(s));
        assert.deepEqual(rules(s), name === "doc.bin" ? [] : ["unencrypted_suffix"]);

        writeFileSync(join(dir, ".sops.yaml"), `creation_rules:\n  - age: ${h.ageRecipient}\n`);
        const byConfig = ["encrypt", file];
        const sc = ok(await sops3(byConfig, { cwd: dir }), "sops encrypt (.sops.yaml)");
        const bc = ok(await h.bootseal(byConfig, { cwd: dir }), "bootseal encrypt (.sops.yaml)");
        assert.deepEqual(rules(bc), rules(sc));
        assert.deepEqual(rules(sc), rules(s));

        writeFileSync(
          join(dir, ".sops.yaml"),
          `creation_rules:\n  - age: ${h.ageRecipient}\n    encrypted_regex: "^a$"\n`,
        );
        const sr = ok(await sops3(byConfig, { cwd: dir }), "sops encrypt (encrypted_regex)");
        const br = ok(await h.bootseal(byConfig, { cwd: dir }), "bootseal encrypt (encrypted_regex)");
        assert.deepEqual(rules(br), rules(sr));
        assert.deepEqual(rules(sr), name === "doc.bin" ? [] : ["encrypted_regex"]);
      });
    }

    test("rotate of a binary document that records none writes the default, in both", {
      timeout: TIMEOUT,
    }, async () => {
      const { dir, file } = place("doc.bin", "binary payload\n");
      const enc = join(dir, "doc.enc.bin");
      writeFileSync(enc, ok(await sops3(["encrypt", "--age", h.ageRecipient, file]), "sops encrypt"));
      assert.deepEqual(rules(readFileSync(enc)), []);
      const s = ok(await sops3(["rotate", enc]), "sops rotate");
      const b = ok(await h.bootseal(["rotate", enc]), "bootseal rotate");
      assert.deepEqual(rules(s), ["unencrypted_suffix"]);
      assert.deepEqual(rules(b), rules(s));
    });
  });
});
