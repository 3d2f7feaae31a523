/**
 * The Ignition stub: accepted by Ignition's own validator with no error and no warning at
 * spec 3.0.0 and rewritten to every other version it claims, decoding to exactly the files of
 * the cloud-init stub (token mode 0600; no download script), the executable delivered by
 * Ignition itself (remote source, SHA-512 verification.hash) with its signature, and the unit
 * with its verify drop-in.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  BIN_PATH,
  checkParams,
  IGNITION_CLAIMED_VERSIONS,
  IGNITION_SPEC_VERSION,
  INSTALL_SCRIPT_PATH,
  MACHINE_DROPIN,
  renderUserdata,
  SIGNATURE_PATH,
  SYSTEMD_UNIT,
  TOKEN_PATH,
  type UserdataParams,
  VERIFY_DROPIN,
} from "../../../src/service/userdata/index.ts";
import { linuxFiles } from "../../../src/service/userdata/linux-files.ts";
import { peer } from "../../helpers/peers.ts";
import { run, tempDir } from "../../peers/cli.ts";
import { ed25519, hostileParams, realisticParams, tokenOf } from "./fixtures.ts";

type IgnFile = {
  path: string;
  mode: number;
  user: { id: number };
  group: { id: number };
  contents: { source: string; verification?: { hash: string } };
};
type IgnUnit = {
  name: string;
  enabled: boolean;
  contents: string;
  dropins: { name: string; contents: string }[];
};
type IgnConfig = {
  ignition: { version: string };
  storage: { files: IgnFile[] };
  systemd: { units: IgnUnit[] };
};

const { publicKeyPem } = ed25519();

function validate(text: string): { status: number | null; output: string } {
  const { dir, remove } = tempDir("ignition");
  try {
    const file = join(dir, "config.ign");
    writeFileSync(file, text);
    const r = run(peer("IGNITION_VALIDATE_BIN"), [file]);
    return { status: r.status, output: (r.stdout + r.stderr).trim() };
  } finally {
    remove();
  }
}

function decodeDataUrl(url: string): string {
  const m = /^data:;base64,([A-Za-z0-9+/=]*)$/.exec(url);
  assert.ok(m, `not a base64 data URL: ${url.slice(0, 40)}`);
  return Buffer.from(m[1]!, "base64").toString("utf8");
}

/** Every claimed version: the same config with only ignition.version changed validates cleanly. */
function assertValidAtEveryVersion(body: string): void {
  for (const version of IGNITION_CLAIMED_VERSIONS) {
    const config = JSON.parse(body) as IgnConfig;
    config.ignition.version = version;
    const v = validate(JSON.stringify(config));
    assert.equal(v.status, 0, `${version}: ${v.output}`);
    assert.equal(v.output, "", `${version}: no error and no warning`);
  }
}

const withCommand = (p: UserdataParams, command: string): UserdataParams => ({ ...p, command });

describe("Ignition stub", () => {
  const all = [realisticParams(publicKeyPem), ...hostileParams(publicKeyPem)];

  test("content type, spec version 3.0.0, the lowest claimed", () => {
    const r = renderUserdata("ignition", realisticParams(publicKeyPem));
    assert.equal(r.contentType, "application/vnd.coreos.ignition+json; charset=utf-8");
    assert.equal((JSON.parse(r.body) as IgnConfig).ignition.version, IGNITION_SPEC_VERSION);
    assert.equal(IGNITION_SPEC_VERSION, "3.0.0");
    assert.equal(IGNITION_CLAIMED_VERSIONS[0], IGNITION_SPEC_VERSION);
  });

  all.forEach((params, i) => {
    test(`params #${i}: valid at every claimed version with no warning; files decode as intended`, () => {
      const { body } = renderUserdata("ignition", params);
      assertValidAtEveryVersion(body);

      const config = JSON.parse(body) as IgnConfig;
      const p = checkParams(params);
      const expected = linuxFiles(p).filter(
        (f) => f.path !== INSTALL_SCRIPT_PATH && !f.path.startsWith("/etc/systemd/"),
      );
      const inline = config.storage.files.filter((f) => f.contents.source.startsWith("data:"));
      assert.deepEqual(
        inline.map((f) => ({ path: f.path, mode: f.mode, content: decodeDataUrl(f.contents.source) })),
        expected.map((f) => ({ path: f.path, mode: f.mode, content: f.content })),
      );
      for (const f of config.storage.files) assert.deepEqual([f.user, f.group], [{ id: 0 }, { id: 0 }]);
      const token = config.storage.files.find((f) => f.path === TOKEN_PATH)!;
      assert.equal(token.mode, 0o600);
      assert.equal(decodeDataUrl(token.contents.source), tokenOf(params));
      // Ignition downloads the executable, pinned by its SHA-512, and the signature beside it.
      const bin = config.storage.files.find((f) => f.path === BIN_PATH)!;
      assert.deepEqual(bin.contents, {
        source: p.artifactUrl,
        verification: { hash: `sha512-${p.artifactSha512}` },
      });
      assert.equal(bin.mode, 0o755);
      const sig = config.storage.files.find((f) => f.path === SIGNATURE_PATH)!;
      assert.deepEqual(sig.contents, { source: p.signatureUrl });
      assert.ok(!config.storage.files.some((f) => f.path === INSTALL_SCRIPT_PATH), "no download script");
      assert.equal(config.systemd.units.length, 1);
      const unit = config.systemd.units[0]!;
      assert.deepEqual(
        [unit.name, unit.enabled, unit.contents],
        ["bootseal-fetch.service", true, SYSTEMD_UNIT],
      );
      assert.deepEqual(
        unit.dropins.map((d) => d.name),
        [VERIFY_DROPIN],
      );
      const verify = unit.dropins[0]!.contents;
      assert.match(verify, /^ExecStartPre=$/m, "the install script is replaced");
      assert.match(
        verify,
        /^ExecStartPre=\/usr\/bin\/openssl pkeyutl -verify -pubin -inkey \/etc\/bootseal\/artifact\.pub -rawin -in \/usr\/local\/bin\/bootseal -sigfile \/etc\/bootseal\/bootseal\.sig$/m,
      );
    });
  });

  test("a bootstrap command and a cloud identity: the machine drop-in, no token file, still valid", () => {
    const params: UserdataParams = {
      ...withCommand(
        realisticParams(publicKeyPem),
        `kubeadm join --config "/run/kubeadm/join.yaml" $HOME 100%`,
      ),
      auth: { method: "aws-iam" },
    };
    const { body } = renderUserdata("ignition", params);
    assertValidAtEveryVersion(body);
    const config = JSON.parse(body) as IgnConfig;
    assert.ok(!config.storage.files.some((f) => f.path === TOKEN_PATH), "no token file");
    const unit = config.systemd.units[0]!;
    assert.deepEqual(
      unit.dropins.map((d) => d.name),
      [MACHINE_DROPIN, VERIFY_DROPIN],
    );
    const execStart = unit.dropins[0]!.contents.split("\n").filter((l) => l.startsWith("ExecStart="));
    assert.deepEqual(execStart, [
      "ExecStart=",
      `ExecStart=/usr/local/bin/bootseal fetch --from \${BOOTSEAL_SERVER}/v1/machines/\${BOOTSEAL_MACHINE}/config --auth aws-iam --apply --root / --exec "kubeadm join --config \\"/run/kubeadm/join.yaml\\" $$HOME 100%%"`,
    ]);
  });

  test("no SHA-512 for the executable: refused (Ignition pins it)", () => {
    const params = realisticParams(publicKeyPem);
    delete params.artifact.sha512;
    assert.throws(() => renderUserdata("ignition", params), /sha512/);
  });

  test("the validator does report a broken config (the check is live)", () => {
    const config = JSON.parse(renderUserdata("ignition", realisticParams(publicKeyPem)).body) as IgnConfig;
    config.storage.files[0]!.path = "etc/bootseal/token";
    config.storage.files[1]!.mode = 0o4755;
    const v = validate(JSON.stringify(config));
    assert.notEqual(v.status, 0);
    assert.match(v.output, /path not absolute/);
    assert.match(v.output, /warning/);
    // And a feature a claimed version lacks is reported at that version.
    const old = JSON.parse(renderUserdata("ignition", realisticParams(publicKeyPem)).body) as IgnConfig;
    (old.storage as Record<string, unknown>).luks = [{ name: "data", device: "/dev/vdb" }];
    assert.match(validate(JSON.stringify(old)).output, /unused key luks/, "luks is not in spec 3.0.0");
  });
});
