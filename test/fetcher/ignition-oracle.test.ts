/**
 * Differential: Ignition's own files stage (`ignition-apply --root DIR --offline`, Ignition
 * v2.27.0 built from the module proxy) and bootseal's Ignition payload on the same configs
 * and the same starting root: files, directories and links byte for byte, mode for mode, owner
 * for owner, hard links as hard links; Ignition's presets ("enable X") against bootseal's
 * systemctl enable calls. A config bootseal refuses leaves its root untouched, and the refusal
 * is Ignition's too: a BAD_INPUT is invalid for the validator, an unused key for it, or fails
 * ignition-apply; an UNSUPPORTED config is valid Ignition that a post-boot fetcher does not do.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { gzipSync } from "node:zlib";
import fc from "fast-check";
import { peer } from "../helpers/peers.ts";
import { run, tempDir } from "../peers/cli.ts";
import { HAND_PICKED, sha512, unit, v } from "./ignition-cases.ts";
import { dataUrl, makeRoot, type Outcome, ours, snapshot } from "./ignition-fixture.ts";

const PRESET = "etc/systemd/system-preset";

function validate(text: string): { status: number | null; output: string } {
  const { dir, remove } = tempDir("ign-validate");
  try {
    writeFileSync(join(dir, "c.ign"), text);
    const r = run(peer("IGNITION_VALIDATE_BIN"), [join(dir, "c.ign")]);
    return { status: r.status, output: r.stdout + r.stderr };
  } finally {
    remove();
  }
}

interface Compared {
  readonly mine: Outcome;
  readonly theirsOk: boolean;
  readonly valid: boolean;
}

async function compare(config: unknown): Promise<Compared> {
  const text = typeof config === "string" ? config : JSON.stringify(config);
  const a = tempDir("ign-theirs");
  const b = tempDir("ign-ours");
  try {
    makeRoot(a.dir);
    makeRoot(b.dir);
    writeFileSync(join(a.dir, "..", `${a.dir.split("/").pop()}.ign`), text);
    const cfgFile = join(a.dir, "..", `${a.dir.split("/").pop()}.ign`);
    const theirs = run(peer("IGNITION_APPLY_BIN"), ["--root", a.dir, "--offline", cfgFile], {
      env: { container: "bootseal-test" },
    });
    const before = snapshot(b.dir);
    const mine = await ours(b.dir, text);
    const v = validate(text);
    const why = `${text.slice(0, 1500)}\nignition-apply: ${(theirs.stdout + theirs.stderr).slice(-1500)}\nvalidator: ${v.output}\nours: ${JSON.stringify(mine)}`;
    if (mine.ok) {
      assert.equal(v.status, 0, `accepted by bootseal, refused by the validator: ${why}`);
      assert.equal(theirs.status, 0, `applied by bootseal, refused by ignition-apply: ${why}`);
      assert.deepEqual(
        snapshot(b.dir),
        snapshot(a.dir, (p) => p === PRESET || p.startsWith(`${PRESET}/`)),
        why,
      );
      const preset = join(a.dir, PRESET, "20-ignition.preset");
      const masked = new Set(
        ((config as { systemd?: { units?: { name: string; mask?: boolean }[] } }).systemd?.units ?? [])
          .filter((u) => u.mask === true)
          .map((u) => u.name),
      );
      const theirEnables = existsSync(preset)
        ? readFileSync(preset, "utf8")
            .split("\n")
            .filter((l) => l.startsWith("enable "))
            .map((l) => l.slice(7))
            .filter((n) => !masked.has(n))
        : [];
      const myEnables = mine.calls.filter((c) => c[2] === "enable").flatMap((c) => c.slice(3));
      assert.deepEqual(myEnables.sort(), theirEnables.sort(), why);
    } else {
      assert.deepEqual(snapshot(b.dir), before, `refused, yet the root changed: ${why}`);
      if (mine.code === "BAD_INPUT" || mine.code === "PATH_NOT_ALLOWED") {
        assert.ok(
          v.status !== 0 || /unused key/.test(v.output) || theirs.status !== 0,
          `refused as ${mine.code}, yet Ignition takes it: ${why}`,
        );
      } else {
        assert.equal(mine.code, "UNSUPPORTED", why);
        assert.equal(v.status, 0, `UNSUPPORTED, yet not valid Ignition: ${why}`);
      }
    }
    return { mine, theirsOk: theirs.status === 0, valid: v.status === 0 };
  } finally {
    a.remove();
    b.remove();
    const cfgFile = `${a.dir}.ign`;
    if (existsSync(cfgFile)) run("rm", ["-f", cfgFile]);
  }
}

describe("Ignition payloads against ignition-apply and ignition-validate", { timeout: 600_000 }, () => {
  for (const [name, config, want] of HAND_PICKED) {
    test(name, async () => {
      const r = await compare(config);
      assert.equal(r.mine.ok ? "ok" : (r.mine as { code: string }).code, want, JSON.stringify(r.mine));
    });
  }

  test("generated configs (fast-check, bounded)", async () => {
    const text = fc.oneof(fc.string({ maxLength: 20 }), fc.constant(""), fc.constant("line\n"));
    const owner = fc.option(
      fc.oneof(
        fc.record({ id: fc.constantFrom(0, 500, 1234) }),
        fc.record({ name: fc.constantFrom("root", "core", "docker") }),
      ),
      { nil: undefined },
    );
    const resource = fc.tuple(text, fc.boolean(), fc.boolean(), fc.boolean()).map(([t, gzip, hash, pct]) => {
      const raw = Buffer.from(t);
      const body = gzip ? gzipSync(raw) : raw;
      return {
        source: pct && !gzip ? `data:,${encodeURIComponent(t)}` : dataUrl(body),
        ...(gzip ? { compression: "gzip" } : {}),
        ...(hash ? { verification: { hash: sha512(raw) } } : {}),
      };
    });
    const mode = fc.option(fc.integer({ min: 0, max: 0o777 }), { nil: undefined });
    const file = fc.record(
      {
        path: fc.constantFrom(
          "/etc/existing.conf",
          "/etc/gen/a.conf",
          "/etc/gen/sub/c",
          "/var/lib/gen/d",
          "/etc/exdir/e",
          "/etc/exdir",
          "/etc/localtime",
        ),
        overwrite: fc.boolean(),
        contents: resource,
        append: fc.array(resource, { maxLength: 2 }),
        mode,
        user: owner,
        group: owner,
      },
      { requiredKeys: ["path"] },
    );
    const dir = fc.record(
      {
        path: fc.constantFrom(
          "/etc/gen",
          "/etc/gen/sub",
          "/etc/exdir",
          "/var/lib/gen/dd",
          "/etc/newdir",
          "/etc/existing.conf",
        ),
        mode,
        user: owner,
        group: owner,
      },
      { requiredKeys: ["path"] },
    );
    const link = fc.record(
      {
        path: fc.constantFrom("/etc/gen/l1", "/etc/l2", "/etc/localtime", "/etc/gen/sub"),
        target: fc.constantFrom("/etc/existing.conf", "/etc/gen/a.conf", "relative"),
        hard: fc.boolean(),
        overwrite: fc.boolean(),
      },
      { requiredKeys: ["path", "target"] },
    );
    const unitArb = fc.record(
      {
        name: fc.constantFrom("a.service", "b.timer", "old.service", "masked.service"),
        enabled: fc.boolean(),
        mask: fc.boolean(),
        contents: fc.constant(unit),
        dropins: fc.constant([{ name: "10-x.conf", contents: "[Unit]\n" }]),
      },
      { requiredKeys: ["name"] },
    );
    const config = fc.record({
      ignition: fc.constantFrom(0, 1, 2, 3, 4).map(v),
      storage: fc.record({
        files: fc.uniqueArray(file, { selector: (f) => f.path, maxLength: 4 }),
        directories: fc.uniqueArray(dir, { selector: (d) => d.path, maxLength: 2 }),
        links: fc.uniqueArray(link, { selector: (l) => l.path, maxLength: 2 }),
      }),
      systemd: fc.record({ units: fc.uniqueArray(unitArb, { selector: (u) => u.name, maxLength: 2 }) }),
    });
    let accepted = 0;
    let refused = 0;
    await fc.assert(
      fc.asyncProperty(config, async (c) => {
        const r = await compare(c);
        if (r.mine.ok) accepted++;
        else refused++;
      }),
      { numRuns: 40, seed: 20261202, endOnFailure: true },
    );
    assert.ok(accepted > 0 && refused > 0, `accepted ${accepted}, refused ${refused}`);
  });
});
