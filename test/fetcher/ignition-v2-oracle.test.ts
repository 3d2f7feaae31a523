/**
 * Differential for Ignition spec 2.x payloads: each config of ignition-v2-cases.ts that
 * bootseal applies is translated to 3.1.0 (ignition-v2.ts, ign-converter's rules) and applied
 * by Ignition's own files stage (`ignition-apply --root DIR --offline`, Ignition v2.27.0, the
 * `ignition` peer) to one copy of a starting root, while bootseal applies the 2.x config itself
 * to another: files, directories and links byte for byte, mode for mode, owner for owner, hard
 * links as hard links, Ignition's "enable" presets against bootseal's systemctl enable calls.
 * (ign-converter itself is not run: the Go module proxy does not serve it; see docs/fetcher.md.)
 */
import { describe, test } from "node:test";
import type { V2Config } from "../../src/fetcher/payloads/ignition-v2.ts";
import { V2_CASES } from "./ignition-v2-cases.ts";
import { assertAppliedAsIgnition } from "./ignition-v2-oracle.ts";

describe("Ignition 2.x payloads against ignition-apply on their 3.1.0 translation", {
  timeout: 300_000,
}, () => {
  for (const [name, config] of V2_CASES.filter(([, , want]) => want === "ok")) {
    test(name, async () => {
      await assertAppliedAsIgnition(config as V2Config);
    });
  }
});
