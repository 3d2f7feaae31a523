/**
 * The systemd unit: one source of truth (src/service/userdata/systemd-unit.ts), copied byte
 * for byte to deploy/systemd/bootseal-fetch.service, with the directives the machine-side
 * issue asks for, and clean under `systemd-analyze verify`.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { isBootsealError } from "../../../src/errors.ts";
import {
  checkParams,
  INSTALL_SCRIPT_PATH,
  MACHINE_DROPIN,
  SYSTEMD_UNIT,
  UNIT_NAME,
  VERIFY_DROPIN,
} from "../../../src/service/userdata/index.ts";
import { machineDropin, VERIFY_DROPIN_TEXT } from "../../../src/service/userdata/systemd-unit.ts";
import { tempDir } from "../../peers/cli.ts";
import { ed25519, realisticParams } from "./fixtures.ts";

const DEPLOY_UNIT = new URL("../../../deploy/systemd/bootseal-fetch.service", import.meta.url);

/** Section -> key -> values (a key may repeat), comments and blank lines dropped. */
function parseUnit(text: string): Map<string, Map<string, string[]>> {
  const sections = new Map<string, Map<string, string[]>>();
  let current: Map<string, string[]> | undefined;
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const header = /^\[(\w+)\]$/.exec(line);
    if (header) {
      current = new Map();
      sections.set(header[1]!, current);
      continue;
    }
    const kv = /^([A-Za-z]+)=(.*)$/.exec(line);
    assert.ok(kv && current, `unexpected unit line: ${line}`);
    const values = current.get(kv[1]!) ?? [];
    values.push(kv[2]!);
    current.set(kv[1]!, values);
  }
  return sections;
}

/** systemd-analyze verify of a unit in a throwaway root that has the system units and the executables. */
function analyze(
  unitText: string,
  dropins: Record<string, string> = {},
): { status: number | null; output: string } {
  const { dir, remove } = tempDir("systemd-verify");
  try {
    mkdirSync(join(dir, "usr/lib/systemd"), { recursive: true });
    cpSync("/lib/systemd/system", join(dir, "usr/lib/systemd/system"), {
      recursive: true,
      dereference: false,
    });
    for (const exe of [INSTALL_SCRIPT_PATH, "/usr/local/bin/bootseal", "/usr/bin/openssl"]) {
      mkdirSync(join(dir, exe, ".."), { recursive: true });
      writeFileSync(join(dir, exe), "#!/bin/sh\n");
      chmodSync(join(dir, exe), 0o755);
    }
    mkdirSync(join(dir, "etc/systemd/system"), { recursive: true });
    writeFileSync(join(dir, "etc/systemd/system", UNIT_NAME), unitText);
    mkdirSync(join(dir, "etc/systemd/system", `${UNIT_NAME}.d`), { recursive: true });
    for (const [name, text] of Object.entries(dropins)) {
      writeFileSync(join(dir, "etc/systemd/system", `${UNIT_NAME}.d`, name), text);
    }
    const r = spawnSync(
      "systemd-analyze",
      ["verify", "--man=no", `--root=${dir}`, `/etc/systemd/system/${UNIT_NAME}`],
      { encoding: "utf8", timeout: 60_000 },
    );
    if (r.error)
      throw new Error(`systemd-analyze could not run (Debian package systemd): ${r.error.message}`);
    return { status: r.status, output: (r.stdout + r.stderr).trim() };
  } finally {
    remove();
  }
}

describe("bootseal-fetch.service", () => {
  test("deploy/systemd/bootseal-fetch.service is byte-identical to SYSTEMD_UNIT", () => {
    assert.ok(readFileSync(DEPLOY_UNIT).equals(Buffer.from(SYSTEMD_UNIT, "utf8")));
  });

  test("has the directives of the machine-side issue", () => {
    const unit = parseUnit(SYSTEMD_UNIT);
    const u = unit.get("Unit")!;
    const s = unit.get("Service")!;
    assert.deepEqual(u.get("Wants"), ["network-online.target"]);
    assert.deepEqual(u.get("After"), ["network-online.target"]);
    assert.deepEqual(u.get("Before"), ["kubelet.service"]);
    assert.ok(u.get("StartLimitBurst") && u.get("StartLimitIntervalSec"), "restart has a limit");
    assert.deepEqual(s.get("Type"), ["oneshot"]);
    assert.deepEqual(s.get("RemainAfterExit"), ["yes"]);
    assert.deepEqual(s.get("Restart"), ["on-failure"]);
    assert.deepEqual(s.get("EnvironmentFile"), ["/etc/bootseal/fetch.env"]);
    assert.deepEqual(s.get("ExecStartPre"), [INSTALL_SCRIPT_PATH]);
    assert.deepEqual(s.get("ExecStart"), [
      // biome-ignore lint/suspicious/noTemplateCurlyInString: systemd's ${VAR}, not a template
      "/usr/local/bin/bootseal fetch --from ${BOOTSEAL_SERVER}/v1/machines/${BOOTSEAL_MACHINE}/config --token-file /etc/bootseal/token --apply --root /",
    ]);
    assert.deepEqual(unit.get("Install")!.get("WantedBy"), ["multi-user.target"]);
  });

  test("systemd-analyze verify: no error, no warning", () => {
    const r = analyze(SYSTEMD_UNIT);
    assert.equal(r.status, 0, r.output);
    assert.equal(r.output, "");
  });

  test("with the machine drop-in (a hostile bootstrap command, a cloud identity) and the verify drop-in: clean", () => {
    const params = realisticParams(ed25519().publicKeyPem);
    for (const command of [`kubeadm join "a b" 'c' $HOME \\ %n ; & | \\"`, "echo ok"]) {
      for (const auth of [params.auth, { method: "gcp" as const }]) {
        const dropin = machineDropin(checkParams({ ...params, auth, command }));
        assert.ok(dropin);
        const r = analyze(SYSTEMD_UNIT, { [MACHINE_DROPIN]: dropin, [VERIFY_DROPIN]: VERIFY_DROPIN_TEXT });
        assert.equal(r.status, 0, r.output);
        assert.equal(r.output, "", `${command}: no warning`);
      }
    }
    // No command and a token: the unit's own line, no drop-in.
    assert.equal(machineDropin(checkParams(params)), null);
  });

  test("skipModules: each module one --skip-module word before --exec, repeats dropped; a bad name is BAD_INPUT", () => {
    const params = realisticParams(ed25519().publicKeyPem);
    const dropin = machineDropin(checkParams({ ...params, skipModules: ["ntp", "mounts", "ntp"] }));
    assert.ok(dropin);
    assert.match(
      dropin,
      /--token-file \/etc\/bootseal\/token --skip-module ntp --skip-module mounts --apply|--skip-module ntp --skip-module mounts/,
    );
    assert.equal(dropin.match(/--skip-module/g)?.length, 2);
    const withExec = machineDropin(checkParams({ ...params, skipModules: ["ntp"], command: "echo ok" }));
    assert.match(withExec ?? "", /--skip-module ntp --exec /);
    const r = analyze(SYSTEMD_UNIT, { [MACHINE_DROPIN]: dropin });
    assert.equal(r.status, 0, r.output);
    for (const bad of [
      ["NTP"],
      ["ntp mounts"],
      ["n;tp"],
      [""],
      Array.from({ length: 17 }, (_, i) => `m${"x".repeat(i)}`),
    ]) {
      assert.throws(
        () => checkParams({ ...params, skipModules: bad }),
        (err: unknown) => isBootsealError(err) && err.code === "BAD_INPUT",
        JSON.stringify(bad),
      );
    }
  });

  test("systemd-analyze verify does report a broken unit (the check is live)", () => {
    const r = analyze(
      SYSTEMD_UNIT.replace("RestartSec=20s", "RestartSec=soon").replace("Type=oneshot", "Type=nope"),
    );
    assert.match(r.output, /RestartSec|soon/);
    assert.match(r.output, /Type|nope/);
  });
});
