/**
 * The RE2 table (./re2-cases.ts) against the real sops 3.13.2, which evaluates encrypted_regex
 * with Go's regexp.MatchString: the same keys must be encrypted, and a pattern Go refuses
 * encrypts nothing in sops (it drops the compile error) while we refuse it outright.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { compileRule } from "../../../src/envelope/sops/walk.ts";
import { type SopsPeer, startSopsPeer } from "./codecs/sops-peer.ts";
import { CASES, REFUSED } from "./re2-cases.ts";

describe("the real sops selects the same keys", () => {
  let sops: SopsPeer;
  before(() => {
    sops = startSopsPeer();
  });
  after(() => sops.cleanup());

  /** Which of `keys` sops encrypts under `--encrypted-regex pattern` (top-level keys). */
  const sopsEncrypts = (pattern: string, keys: readonly string[]): boolean[] => {
    const doc = Object.fromEntries(keys.map((k) => [k, "v"]));
    const out = sops.encrypt(new TextEncoder().encode(JSON.stringify(doc)), "json", [
      "--encrypted-regex",
      pattern,
    ]);
    const parsed = JSON.parse(new TextDecoder().decode(out)) as Record<string, string>;
    return keys.map((k) => String(parsed[k]).startsWith("ENC["));
  };

  test("on every table case (one sops run per pattern)", () => {
    const byPattern = new Map<string, [string, boolean][]>();
    for (const [pattern, input, want] of CASES) {
      byPattern.set(pattern, [...(byPattern.get(pattern) ?? []), [input, want]]);
    }
    for (const [pattern, rows] of byPattern) {
      const keys = rows.map(([input]) => input);
      const select = compileRule({ kind: "encrypted_regex", value: pattern });
      const ours = keys.map((k) => select([k], [], false));
      assert.deepEqual(
        ours,
        rows.map(([, want]) => want),
        `table for ${pattern}`,
      );
      assert.deepEqual(sopsEncrypts(pattern, keys), ours, `sops on ${pattern}`);
    }
  });

  test("sops encrypts nothing for a pattern Go refuses; we refuse it outright", () => {
    for (const [pattern, key] of REFUSED) {
      assert.deepEqual(sopsEncrypts(pattern, [key]), [false], `sops on ${pattern}`);
      assert.throws(() => compileRule({ kind: "encrypted_regex", value: pattern }), { code: "BAD_INPUT" });
    }
  });
});
