import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createDecipheriv, randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import fc from "fast-check";
import * as vaultPort from "shamir-secret-sharing";
import { ageKeyType } from "../../../providers/keys/age.ts";
import { resolverFor } from "../../../providers/keys/index.ts";
import { unwrapDataKey, wrapDataKey } from "../../../src/envelope/sops/key-groups.ts";
import type { KeyEntry } from "../../../src/envelope/sops/master-key.ts";
import { combine, gfInv, gfMul, split } from "../../../src/envelope/sops/shamir.ts";
import { BootsealError } from "../../../src/errors.ts";
import { peer } from "../../helpers/peers.ts";

function code(c: string) {
  return (err: unknown) => err instanceof BootsealError && err.code === c;
}

describe("GF(2^8) arithmetic", () => {
  test("matches the FIPS-197 worked products (AES polynomial 0x11B)", () => {
    assert.equal(gfMul(0x57, 0x83), 0xc1);
    assert.equal(gfMul(0x57, 0x13), 0xfe);
    assert.equal(gfMul(0x57, 0x02), 0xae);
    assert.equal(gfMul(0, 0xff), 0);
  });

  test("every non-zero element has an inverse", () => {
    for (let a = 1; a < 256; a++) assert.equal(gfMul(a, gfInv(a)), 1, `a=${a}`);
  });
});

describe("split / combine", () => {
  test("share layout: y-bytes then x = index + 1", () => {
    const secret = randomBytes(32);
    const shares = split(secret, 4, 3);
    assert.equal(shares.length, 4);
    shares.forEach((s, i) => {
      assert.equal(s.length, 33);
      assert.equal(s[32], i + 1);
    });
  });

  test("property: any threshold-sized or larger subset recovers the secret", () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 48 }),
        fc.integer({ min: 2, max: 12 }),
        fc.integer({ min: 0, max: 1000 }),
        fc.integer({ min: 0, max: 1000 }),
        (secret, count, t, pick) => {
          const threshold = 2 + (t % (count - 1));
          const shares = split(secret, count, threshold);
          // A rotated window of size >= threshold, so different subsets get exercised.
          const size = threshold + (pick % (count - threshold + 1));
          const subset = Array.from({ length: size }, (_, i) => shares[(pick + i) % count] as Uint8Array);
          assert.deepEqual(combine(subset), Uint8Array.from(secret));
        },
      ),
      { numRuns: 300 },
    );
  });

  test("fewer shares than the threshold give something else", () => {
    const secret = randomBytes(32);
    const shares = split(secret, 5, 3);
    assert.notDeepEqual(combine(shares.slice(0, 2)), Uint8Array.from(secret));
  });

  test("the npm Vault port uses the same field and layout, in both directions", async () => {
    for (let run = 0; run < 20; run++) {
      // The package insists on a plain Uint8Array (a Buffer fails its prototype check).
      const secret = Uint8Array.from(randomBytes(32));
      const theirs = await vaultPort.split(secret, 5, 3);
      assert.deepEqual(combine(theirs.slice(1, 4)), Uint8Array.from(secret));
      const ours = split(secret, 5, 3);
      assert.deepEqual(
        await vaultPort.combine([ours[0], ours[2], ours[4]] as Uint8Array[]),
        Uint8Array.from(secret),
      );
    }
  });

  test("errors: bad counts, thresholds and shares", () => {
    const s = randomBytes(32);
    assert.throws(() => split(s, 1, 2), code("USAGE"));
    assert.throws(() => split(s, 256, 2), code("USAGE"));
    assert.throws(() => split(s, 3, 1), code("USAGE"));
    assert.throws(() => split(s, 3, 4), code("USAGE"));
    assert.throws(() => split(new Uint8Array(0), 3, 2), code("BAD_INPUT"));
    const shares = split(s, 3, 2);
    assert.throws(() => combine([shares[0] as Uint8Array]), code("BAD_INPUT"));
    assert.throws(
      () => combine([shares[0] as Uint8Array, (shares[1] as Uint8Array).subarray(1)]),
      code("BAD_INPUT"),
    );
    assert.throws(
      () => combine([shares[0] as Uint8Array, Uint8Array.from(shares[0] as Uint8Array)]),
      code("BAD_INPUT"),
    );
    const zeroX = Uint8Array.from(shares[1] as Uint8Array);
    zeroX[32] = 0;
    assert.throws(() => combine([shares[0] as Uint8Array, zeroX]), code("BAD_INPUT"));
  });
});

// Interoperability with the real sops: a 3-group document, threshold 2, one age key per group.
describe("sops key groups interop", () => {
  const dir = mkdtempSync(join(tmpdir(), "bootseal-shamir-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const sops = peer("SOPS_BIN");
  const keygen = peer("AGE_KEYGEN_BIN");
  const identities: string[] = [];
  const recipients: string[] = [];
  for (let i = 0; i < 3; i++) {
    const file = join(dir, `k${i}.txt`);
    execFileSync(keygen, ["-o", file], { stdio: "ignore" });
    identities.push(readFileSync(file, "utf8"));
    recipients.push(execFileSync(keygen, ["-y", file], { encoding: "utf8" }).trim());
  }
  const config = join(dir, "sops.yaml");
  writeFileSync(
    config,
    `creation_rules:\n  - shamir_threshold: 2\n    key_groups:\n${recipients.map((r) => `      - age: [${r}]\n`).join("")}`,
  );
  const plain = join(dir, "plain.json");
  writeFileSync(plain, `{"secret":"hello shamir","nested":{"x":"y"}}\n`);
  const cleanEnv = { PATH: process.env.PATH, HOME: dir, XDG_CONFIG_HOME: dir };
  const encrypted = execFileSync(sops, ["--config", config, "encrypt", plain], {
    env: cleanEnv,
    encoding: "utf8",
  });
  const doc = JSON.parse(encrypted) as {
    secret: string;
    sops: { shamir_threshold: number; key_groups: { age: { recipient: string; enc: string }[] }[] };
  };
  const groups: KeyEntry[][] = doc.sops.key_groups.map((g) =>
    g.age.map((e) => ({ kind: "age", enc: e.enc, fields: new Map(Object.entries(e)) })),
  );

  function decryptLeaf(value: string, aad: string, dataKey: Uint8Array): string {
    const m = /^ENC\[AES256_GCM,data:([^,]*),iv:([^,]+),tag:([^,]+),type:str\]$/.exec(value);
    assert.ok(m);
    const decipher = createDecipheriv("aes-256-gcm", dataKey, Buffer.from(m[2] as string, "base64"), {
      authTagLength: 16,
    });
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(Buffer.from(m[3] as string, "base64"));
    return Buffer.concat([
      decipher.update(Buffer.from(m[1] as string, "base64")),
      decipher.final(),
    ]).toString();
  }

  test("sops's shares: each group unwraps to x = i+1 and two of three recover the data key", async () => {
    assert.equal(doc.sops.shamir_threshold, 2);
    const shares: Uint8Array[] = [];
    for (let i = 0; i < 3; i++) {
      const key = ageKeyType.fromMetadata(groups[i]?.[0] as KeyEntry, {
        env: { SOPS_AGE_KEY: identities[i] },
      });
      const share = await key.unwrap(groups[i]?.[0]?.enc as string);
      assert.ok(share);
      assert.equal(share.length, 33);
      assert.equal(share[32], i + 1);
      shares.push(share);
    }
    const all = combine(shares);
    assert.deepEqual(combine([shares[0], shares[2]] as Uint8Array[]), all);
    assert.equal(decryptLeaf(doc.secret, "secret:", all), "hello shamir");

    // The same through unwrapDataKey, with only groups 1 and 3 holding an identity here.
    const env = { SOPS_AGE_KEY: `${identities[0]}\n${identities[2]}` };
    const dataKey = await unwrapDataKey(groups, resolverFor({ env }), { threshold: 2 });
    assert.deepEqual(dataKey, all);
  });

  test("our shares of sops's data key, spliced into the file, open with sops decrypt", async () => {
    const env = { SOPS_AGE_KEY: identities.join("\n") };
    const dataKey = await unwrapDataKey(groups, resolverFor({ env }), { threshold: 2 });
    const keys = recipients.map((r) => ageKeyType.fromUserInput(r, {}));
    const entries = await wrapDataKey(dataKey, keys, { threshold: 2 });
    entries.forEach((group, i) => {
      const target = doc.sops.key_groups[i]?.age[0];
      assert.ok(target);
      assert.equal(group[0]?.fields.get("recipient"), target.recipient);
      target.enc = group[0]?.enc as string;
    });
    const spliced = join(dir, "spliced.json");
    writeFileSync(spliced, JSON.stringify(doc, null, "\t"));
    // Identities of groups 2 and 3 only: sops must combine two of our shares.
    const sopsEnv = { ...cleanEnv, SOPS_AGE_KEY: `${identities[1]}\n${identities[2]}` };
    const out = execFileSync(sops, ["decrypt", spliced], { env: sopsEnv, encoding: "utf8" });
    assert.deepEqual(JSON.parse(out), { secret: "hello shamir", nested: { x: "y" } });
    // And with a single identity sops must refuse: one share is below the threshold.
    const oneEnv = { ...cleanEnv, SOPS_AGE_KEY: identities[0] };
    assert.throws(() => execFileSync(sops, ["decrypt", spliced], { env: oneEnv, stdio: "pipe" }));
  });
});
