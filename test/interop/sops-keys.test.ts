/**
 * Key changes across the two tools: `sops updatekeys`/`sops rotate` on a bootseal file and
 * bootseal's on a sops file keep the other side able to decrypt; --extract and stdin work.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { createHarness, extraAgeKey, type Harness, ok } from "./harness.ts";

const PLAIN =
  "token: abcdef.0123456789abcdef\nnested:\n    port: 6443\n    list:\n        - a\n        - b\n";

let h: Harness;
let second: { recipient: string; keyFile: string };
before(() => {
  h = createHarness();
  second = extraAgeKey(h);
});
after(() => h?.cleanup());

function caseDir(name: string, recipients: string[]): string {
  const dir = join(h.dir, name);
  mkdirSync(dir);
  writeFileSync(join(dir, ".sops.yaml"), `creation_rules:\n  - age: ${recipients.join(",")}\n`);
  writeFileSync(join(dir, "doc.yaml"), PLAIN);
  return dir;
}

const onlySecond = () => ({ SOPS_AGE_KEY_FILE: second.keyFile });

for (const [writer, updater] of [
  ["bootseal", "sops"],
  ["sops", "bootseal"],
] as const) {
  test(`${updater} updatekeys on a ${writer} file: the added key opens it with both tools`, async () => {
    const dir = caseDir(`updatekeys-${writer}`, [h.ageRecipient]);
    const enc = ok(await h[writer](["encrypt", "doc.yaml"], { cwd: dir }), `${writer} encrypt`);
    writeFileSync(join(dir, "enc.yaml"), enc);
    writeFileSync(
      join(dir, ".sops.yaml"),
      `creation_rules:\n  - age: ${h.ageRecipient},${second.recipient}\n`,
    );
    ok(await h[updater](["updatekeys", "-y", "enc.yaml"], { cwd: dir }), `${updater} updatekeys`);
    const updated = readFileSync(join(dir, "enc.yaml"), "utf8");
    assert.ok(updated.includes(second.recipient), "the new recipient is in the metadata");
    for (const tool of ["sops", "bootseal"] as const) {
      const out = ok(
        await h[tool](["decrypt", "enc.yaml"], { cwd: dir, env: onlySecond() }),
        `${tool} decrypt with the added key`,
      );
      assert.equal(out.toString(), PLAIN);
    }
  });

  test(`${updater} rotate on a ${writer} file: new data key, --add-age works, both tools decrypt`, async () => {
    const dir = caseDir(`rotate-${writer}`, [h.ageRecipient]);
    const enc = ok(await h[writer](["encrypt", "doc.yaml"], { cwd: dir }), `${writer} encrypt`);
    writeFileSync(join(dir, "enc.yaml"), enc);
    ok(
      await h[updater](["rotate", "-i", "--add-age", second.recipient, "enc.yaml"], { cwd: dir }),
      `${updater} rotate`,
    );
    const rotated = readFileSync(join(dir, "enc.yaml"), "utf8");
    const tokenCiphertext = (text: string) => /token: (ENC\[[^\]]+\])/.exec(text)?.[1];
    assert.notEqual(
      tokenCiphertext(rotated),
      tokenCiphertext(enc.toString()),
      "values are re-encrypted under a new data key",
    );
    for (const tool of ["sops", "bootseal"] as const) {
      for (const env of [{}, onlySecond()]) {
        const out = ok(
          await h[tool](["decrypt", "enc.yaml"], { cwd: dir, env }),
          `${tool} decrypt after rotate`,
        );
        assert.equal(out.toString(), PLAIN);
      }
    }
  });
}

test("bootseal rotate --rm-age removes a key: that key no longer opens the file", async () => {
  const dir = caseDir("rotate-rm", [h.ageRecipient, second.recipient]);
  writeFileSync(
    join(dir, "enc.yaml"),
    ok(await h.sops(["encrypt", "doc.yaml"], { cwd: dir }), "sops encrypt"),
  );
  ok(
    await h.bootseal(["rotate", "-i", "--rm-age", second.recipient, "enc.yaml"], { cwd: dir }),
    "bootseal rotate",
  );
  assert.ok(!readFileSync(join(dir, "enc.yaml"), "utf8").includes(second.recipient));
  const denied = await h.sops(["decrypt", "enc.yaml"], { cwd: dir, env: onlySecond() });
  assert.notEqual(denied.status, 0, "sops cannot open it with the removed key");
  const ours = await h.bootseal(["decrypt", "enc.yaml"], { cwd: dir, env: onlySecond() });
  assert.equal(ours.status, 128, "bootseal: no key available");
  assert.equal(ok(await h.sops(["decrypt", "enc.yaml"], { cwd: dir }), "sops decrypt").toString(), PLAIN);
});

test("--extract and stdin behave like sops", async () => {
  const dir = caseDir("extract", [h.ageRecipient]);
  writeFileSync(
    join(dir, "enc.yaml"),
    ok(await h.sops(["encrypt", "doc.yaml"], { cwd: dir }), "sops encrypt"),
  );
  for (const path of ['["token"]', '["nested"]["port"]', '["nested"]["list"][1]']) {
    const ref = ok(await h.sops(["decrypt", "--extract", path, "enc.yaml"], { cwd: dir }), "sops extract");
    const ours = ok(
      await h.bootseal(["decrypt", "--extract", path, "enc.yaml"], { cwd: dir }),
      "bootseal extract",
    );
    assert.equal(ours.toString(), ref.toString(), `--extract ${path}`);
  }
  const input = readFileSync(join(dir, "enc.yaml"));
  const viaStdin = ok(
    await h.bootseal(["decrypt", "--input-type", "yaml", "-"], { cwd: dir, input }),
    "stdin",
  );
  assert.equal(viaStdin.toString(), PLAIN);
  const missing = await h.bootseal(["decrypt", "--extract", '["nope"]', "enc.yaml"], { cwd: dir });
  assert.equal(missing.status, EXIT_CODES.USAGE, "sops: 1, error truncating tree");
});
