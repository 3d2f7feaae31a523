/**
 * HuaweiCloud KMS (`hckms`) keys side by side with the real sops 3.13.3, both pointed at the
 * hand-written FAKE KMS test/fakes/hckms-fake.ts (started in this process) through the SDK's
 * own setting HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1, with the same HUAWEICLOUD_SDK_* credentials:
 * the flag, SOPS_HUAWEICLOUD_KMS_IDS, `.sops.yaml` (creation rule list and key_groups
 * mapping), each tool opening the other's files, the metadata layout, and the failures.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { startHckmsFake } from "../fakes/hckms-fake.ts";
import { type ChildResult, runChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";
import { BOOTSEAL_MAIN, ok } from "./harness.ts";

const PLAIN = "join_token: abcdef.0123456789abcdef\nnested:\n    port: 6443\n";
const dir = mkdtempSync(join(tmpdir(), "bootseal-hckms-interop-"));
let server: Server;
let url: string;
let keyA: string;
let keyB: string;

function baseEnv(over: Record<string, string> = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: dir,
    HUAWEICLOUD_SDK_AK: "fake-ak",
    HUAWEICLOUD_SDK_SK: "fake-sk",
    HUAWEICLOUD_SDK_PROJECT_ID: "proj-1",
    HUAWEICLOUD_SDK_REGION_KMS_TR_WEST_1: url,
    ...over,
  };
}
const sops = (args: string[], env = baseEnv(), cwd = dir): Promise<ChildResult> =>
  runChild(peer("SOPS_3_13_3_BIN"), args, { env, cwd });
const bootseal = (args: string[], env = baseEnv(), cwd = dir): Promise<ChildResult> =>
  runChild(process.execPath, [BOOTSEAL_MAIN, ...args], { env, cwd });

/** The hckms part of a document's sops metadata, dates and ciphertexts replaced by their shape. */
function hckmsShape(doc: string): string {
  const start = doc.indexOf("    hckms:\n");
  assert.ok(start >= 0, `no hckms list in:\n${doc}`);
  const rest = doc.slice(start).split("\n");
  const block = [rest[0] as string];
  for (const line of rest.slice(1)) {
    if (!line.startsWith("        ")) break;
    block.push(line);
  }
  return block
    .join("\n")
    .replace(/created_at: "[^"]+"/g, "created_at: DATE")
    .replace(/enc: \S+/g, "enc: CIPHERTEXT");
}

before(async () => {
  const fake = await startHckmsFake();
  ({ server, url } = fake);
  keyA = `tr-west-1:${fake.createKey()}`;
  keyB = `tr-west-1:${fake.createKey()}`;
  writeFileSync(join(dir, "plain.yaml"), PLAIN);
});
after(() => {
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("hckms: bootseal and sops 3.13.3 (fake KMS)", () => {
  test("--hckms: each tool decrypts the other's file; the metadata entries are laid out alike", async () => {
    const bySops = ok(
      await sops(["encrypt", "--hckms", `${keyA},${keyB}`, "plain.yaml"]),
      "sops encrypt",
    ).toString();
    const byUs = ok(
      await bootseal(["encrypt", "--hckms", `${keyA},${keyB}`, "plain.yaml"]),
      "bootseal encrypt",
    ).toString();
    assert.equal(hckmsShape(byUs), hckmsShape(bySops));
    writeFileSync(join(dir, "by-sops.yaml"), bySops);
    writeFileSync(join(dir, "by-us.yaml"), byUs);
    assert.equal(ok(await bootseal(["decrypt", "by-sops.yaml"]), "bootseal decrypt").toString(), PLAIN);
    assert.equal(ok(await sops(["decrypt", "by-us.yaml"]), "sops decrypt").toString(), PLAIN);
  });

  test("SOPS_HUAWEICLOUD_KMS_IDS names the keys for both", async () => {
    const env = baseEnv({ SOPS_HUAWEICLOUD_KMS_IDS: keyA });
    const byUs = ok(await bootseal(["encrypt", "plain.yaml"], env), "bootseal encrypt").toString();
    assert.ok(byUs.includes(`key_id: ${keyA}`));
    writeFileSync(join(dir, "env.yaml"), byUs);
    assert.equal(ok(await sops(["decrypt", "env.yaml"]), "sops decrypt").toString(), PLAIN);
  });

  test(".sops.yaml: a creation rule's hckms list and a key group's key_id mapping", async () => {
    const rules = join(dir, "rules");
    rmSync(rules, { recursive: true, force: true });
    writeFileSync(join(dir, "x"), "");
    const { mkdirSync } = await import("node:fs");
    mkdirSync(rules);
    writeFileSync(
      join(rules, ".sops.yaml"),
      `creation_rules:\n  - path_regex: short\\.yaml$\n    hckms:\n      - ${keyA}\n` +
        `  - path_regex: groups\\.yaml$\n    key_groups:\n      - hckms:\n          - key_id: ${keyB}\n`,
    );
    for (const name of ["short.yaml", "groups.yaml"]) {
      writeFileSync(join(rules, name), PLAIN);
      const bySops = ok(await sops(["encrypt", name], baseEnv(), rules), `sops encrypt ${name}`).toString();
      const byUs = ok(
        await bootseal(["encrypt", name], baseEnv(), rules),
        `bootseal encrypt ${name}`,
      ).toString();
      assert.equal(hckmsShape(byUs), hckmsShape(bySops), name);
      writeFileSync(join(rules, `us-${name}`), byUs);
      writeFileSync(join(rules, `sops-${name}`), bySops);
      assert.equal(
        ok(await sops(["decrypt", `us-${name}`], baseEnv(), rules), "sops decrypt").toString(),
        PLAIN,
      );
      assert.equal(
        ok(await bootseal(["decrypt", `sops-${name}`], baseEnv(), rules), "bootseal decrypt").toString(),
        PLAIN,
      );
    }
  });

  test("failures: a malformed key id and a wrong secret key fail in both, with the same exit codes", async () => {
    const badId = await Promise.all([
      sops(["encrypt", "--hckms", "tr-west-1", "plain.yaml"]),
      bootseal(["encrypt", "--hckms", "tr-west-1", "plain.yaml"]),
    ]);
    assert.notEqual(badId[0].status, 0);
    assert.equal(badId[1].status, badId[0].status, `sops: ${badId[0].stderr}\nbootseal: ${badId[1].stderr}`);
    assert.match(badId[0].stderr, /invalid key ID format: expected 'region:key-uuid', got "tr-west-1"/);
    assert.match(badId[1].stderr, /invalid key ID format: expected 'region:key-uuid', got "tr-west-1"/);

    const wrong = baseEnv({ HUAWEICLOUD_SDK_SK: "wrong" });
    const denied = await Promise.all([
      sops(["decrypt", "by-sops.yaml"], wrong),
      bootseal(["decrypt", "by-sops.yaml"], wrong),
    ]);
    assert.notEqual(denied[0].status, 0);
    assert.equal(
      denied[1].status,
      denied[0].status,
      `sops: ${denied[0].stderr}\nbootseal: ${denied[1].stderr}`,
    );
  });
});
