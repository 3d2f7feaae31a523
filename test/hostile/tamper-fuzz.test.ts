/**
 * Issue #10 "Tests": a bounded tamper fuzz. 20,000 seeded mutations of real encrypted
 * documents (the sops vectors with their keys; documents made here for yaml, json, dotenv, ini
 * and binary, under the default rule, encrypted_regex, mac_only_encrypted and two Shamir
 * groups; two EncryptedConfigs, one bound to a machine id), decrypted the way a machine does,
 * in process; every 100th also through the fetcher's decryptPayload. Each one is refused with a
 * specific BootsealError (one line, no plaintext), or gives exactly the original plaintext, or
 * differs only where the SOPS MAC by design does not look (tamper-engine.ts says exactly what
 * that allows). Deterministic: a violation names its seed and index (reproduce it with
 * `node bench/tamper-fuzz.ts --seed S --start I --mutations 1`). The million-mutation run is
 * bench/tamper-fuzz.ts.
 */
import assert from "node:assert/strict";
import { before, describe, test } from "node:test";
import { BootsealError } from "../../src/errors.ts";
import {
  buildSubjects,
  decryptCore,
  decryptViaPayload,
  emptyReport,
  type FuzzReport,
  judge,
  OPERATORS,
  runFuzz,
  type Subject,
} from "./tamper-engine.ts";

const SEED = 0x5eed10;
const CHUNK = 5_000;
const CHUNKS = 4;
const PAYLOAD_EVERY = 100;
const TIMEOUT = 240_000;

let subjects: Subject[];
const report: FuzzReport = emptyReport();
const latin1 = (b: Uint8Array) => Buffer.from(b).toString("latin1");
const bytesOf = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

function subject(name: string): Subject {
  const s = subjects.find((x) => x.name === name);
  assert.ok(s, name);
  return s;
}

before(
  async () => {
    subjects = await buildSubjects();
  },
  { timeout: 120_000 },
);

describe("tamper fuzz", { timeout: TIMEOUT * (CHUNKS + 2) }, () => {
  test("every genuine document decrypts (no_mac.yaml is refused)", () => {
    assert.ok(subjects.length >= 20);
    for (const format of ["yaml", "json", "dotenv", "ini", "binary", "envelope"]) {
      assert.ok(
        subjects.some((s) => s.format === format && s.original !== null),
        format,
      );
    }
    for (const s of subjects) {
      if (s.name === "no_mac.yaml") assert.equal(s.original, null);
      else assert.ok(s.original !== null && s.original.length > 0, s.name);
    }
  });

  test("the oracle catches a changed plaintext", async () => {
    const s = subject("made.yaml");
    const original = s.original;
    assert.ok(original);
    const changed = bytesOf(latin1(original).replace("hunter2", "hunter3"));
    const out = await judge(s, async () => ({ bytes: changed, branches: null }));
    assert.equal(out.kind, "violation");
    const bin = subject("made.bin");
    const wrapped = await judge(bin, async () => ({ bytes: bytesOf(`{"data":"x"}`), branches: null }));
    assert.equal(wrapped.kind, "violation");
    const other = await judge(s, async () => {
      throw new TypeError("boom");
    });
    assert.equal(other.kind, "violation");
    const internal = await judge(s, async () => {
      throw new BootsealError("INTERNAL", "x");
    });
    assert.equal(internal.kind, "violation");
  });

  for (let c = 0; c < CHUNKS; c++) {
    test(`mutations ${c * CHUNK} to ${(c + 1) * CHUNK - 1}: refused, or the original plaintext`, {
      timeout: TIMEOUT,
    }, async () => {
      const before = report.violations.length;
      await runFuzz(
        { subjects, mutations: CHUNK, seed: SEED, start: c * CHUNK, payloadEvery: PAYLOAD_EVERY },
        report,
      );
      const found = report.violations.slice(before, before + 10);
      assert.deepEqual(found, [], JSON.stringify(found, null, 1));
    });
  }

  test("the corpus reached every operator, both paths and many error codes", () => {
    assert.equal(report.mutations, CHUNK * CHUNKS);
    for (const op of OPERATORS) {
      const per = report.byOperator[op] ?? {};
      const n = Object.values(per).reduce((a, b) => a + b, 0);
      assert.ok(n > 100, `${op}: ${n}`);
    }
    const keys = Object.keys(report.outcomes);
    const payload = keys
      .filter((k) => k.startsWith("payload "))
      .reduce((a, k) => a + (report.outcomes[k] ?? 0), 0);
    assert.ok(payload >= 150, `decryptPayload sample: ${payload}`);
    for (const code of ["BAD_INPUT", "MAC_MISMATCH", "NO_KEY_AVAILABLE", "NO_MAC"]) {
      assert.ok((report.outcomes[`refused:${code}`] ?? 0) > 0, code);
    }
    assert.ok((report.outcomes.same ?? 0) > 0, "some mutations are outside the authenticated data");
    assert.equal(report.violations.length, 0);
  });
});

describe("regressions found by the fuzz", () => {
  test("binary: a duplicate `data` key with an empty value in front is refused, not written as JSON", async () => {
    // fluxcd file.txt with `"data": [],` added before its data (outside the MAC); the
    // json-or-binary decision looked at the first `data` only, and the machine wrote the
    // wrapper `{"data": [], "data": "value"}` instead of the payload.
    for (const name of ["fluxcd-file.txt", "example.txt", "made.bin"]) {
      const s = subject(name);
      const text = latin1(s.bytes);
      const at = text.indexOf('"data"');
      assert.ok(at > 0);
      for (const empty of ["[]", "{}", "null", '""']) {
        const bytes = bytesOf(`${text.slice(0, at)}"data": ${empty},\n${text.slice(at)}`);
        for (const attempt of [decryptCore, decryptViaPayload]) {
          await assert.rejects(attempt(s, bytes), (err: unknown) => {
            assert.ok(err instanceof BootsealError);
            assert.equal(err.code, "BAD_INPUT");
            return true;
          });
        }
      }
    }
  });

  test("a key id that quotes the document (an enc swapped into recipient or fp) is one line and cut", async () => {
    // NO_KEY_AVAILABLE listed every failure with the entry's own recipient/fp and the
    // provider's reason quoting it: a multi-line message holding whole armour blocks.
    const cases: [string, RegExp, RegExp][] = [
      ["fluxcd-env.env", /^sops_age__list_0__map_enc=(.*)$/m, /^(sops_age__list_0__map_recipient=).*$/m],
      ["format.enc.ini", /^pgp__list_0__map_enc\s*=\s*(.*)$/m, /^(pgp__list_0__map_fp\s*=\s*).*$/m],
    ];
    for (const [name, encRe, idRe] of cases) {
      const s = subject(name);
      const text = latin1(s.bytes);
      const enc = encRe.exec(text)?.[1];
      assert.ok(enc && idRe.test(text), name);
      const bytes = bytesOf(text.replace(idRe, (_, head: string) => `${head}${enc}`));
      await assert.rejects(decryptCore(s, bytes), (err: unknown) => {
        assert.ok(err instanceof BootsealError);
        assert.equal(err.code, "NO_KEY_AVAILABLE");
        assert.ok(!err.message.includes("\n"), err.message);
        assert.ok(err.message.length < 1000, `${err.message.length} characters`);
        return true;
      });
    }
  });

  test("an encrypted comment whose IV, tag or data was changed is refused, not written verbatim", async () => {
    // decryptComment kept any comment that did not decrypt (pre-3.0 plaintext comments), so a
    // flipped bit in an encrypted comment put `#ENC[…]` text into the machine's output.
    const s = subject("made.yaml");
    const text = latin1(s.bytes);
    for (const part of ["data", "iv", "tag"]) {
      const m = new RegExp(`#\\s*ENC\\[AES256_GCM,[^\\]]*?${part}:(.)`).exec(text);
      assert.ok(m?.[1], part);
      const at = (m.index ?? 0) + m[0].length - 1;
      const bytes = bytesOf(`${text.slice(0, at)}${m[1] === "A" ? "B" : "A"}${text.slice(at + 1)}`);
      for (const attempt of [decryptCore, decryptViaPayload]) {
        await assert.rejects(attempt(s, bytes), { code: "DECRYPTION_FAILED" });
      }
    }
  });

  test("the `type:` of an encrypted value is outside the MAC (as in sops): the value stays, its type may not", async () => {
    // Documented in docs/security.md: `type:bool` -> `type:bytes` decrypts (the MAC hashes
    // the canonical text `False` either way) and JSON shows the bytes as base64.
    const s = subject("made.json");
    const text = latin1(s.bytes);
    const bytes = bytesOf(text.replace("type:bool]", "type:str]"));
    assert.notEqual(latin1(bytes), text);
    const out = await judge(s, () => decryptCore(s, bytes));
    assert.equal(out.kind, "outside-mac");
  });
});
