/**
 * The oracle for an Ignition spec 2.x config: translated to 3.1.0 (ignition-v2.ts, ign-converter's
 * rules) and applied by Ignition's own files stage (`ignition-apply --root DIR --offline`, the
 * `ignition` peer) to one starting root, while bootseal applies the 2.x config itself to
 * another: files, directories and links byte for byte, mode for mode, owner for owner, and
 * Ignition's "enable" presets against bootseal's systemctl enable calls.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { translateV2, type V2Config } from "../../src/fetcher/payloads/ignition-v2.ts";
import { peer } from "../helpers/peers.ts";
import { run } from "../peers/cli.ts";
import { makeRoot, ours, snapshot, tempDir } from "./ignition-fixture.ts";

const PRESET = "etc/systemd/system-preset";

export async function assertAppliedAsIgnition(config: V2Config): Promise<void> {
  const minor = Number((config as unknown as { ignition: { version: string } }).ignition.version[2]);
  const translated = JSON.stringify(translateV2(config, minor));
  const a = tempDir("ign2-theirs");
  const b = tempDir("ign2-ours");
  try {
    makeRoot(a.dir);
    makeRoot(b.dir);
    const cfgFile = `${a.dir}.ign`;
    writeFileSync(cfgFile, translated);
    const theirs = run(peer("IGNITION_APPLY_BIN"), ["--root", a.dir, "--offline", cfgFile], {
      env: { container: "bootseal-test" },
    });
    run("rm", ["-f", cfgFile]);
    const mine = await ours(b.dir, JSON.stringify(config));
    const why = `${translated.slice(0, 1500)}\nignition-apply: ${(theirs.stdout + theirs.stderr).slice(-1500)}\nours: ${JSON.stringify(mine)}`;
    assert.equal(theirs.status, 0, why);
    assert.ok(mine.ok, why);
    assert.deepEqual(
      snapshot(b.dir),
      snapshot(a.dir, (p) => p === PRESET || p.startsWith(`${PRESET}/`)),
      why,
    );
    const preset = join(a.dir, PRESET, "20-ignition.preset");
    const theirEnables = existsSync(preset)
      ? readFileSync(preset, "utf8")
          .split("\n")
          .filter((l) => l.startsWith("enable "))
          .map((l) => l.slice(7))
      : [];
    const myEnables = mine.ok ? mine.calls.filter((c) => c[2] === "enable").flatMap((c) => c.slice(3)) : [];
    assert.deepEqual(myEnables.sort(), theirEnables.sort(), why);
  } finally {
    a.remove();
    b.remove();
  }
}
