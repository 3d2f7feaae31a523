/**
 * The Ignition stub: accepted by Ignition's own validator with no error and no warning, and
 * decoding to exactly the files of the cloud-init stub (token mode 0600) and the unit.
 */
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import {
  checkParams,
  IGNITION_SPEC_VERSION,
  renderUserdata,
  SYSTEMD_UNIT,
  TOKEN_PATH,
} from "../../../src/service/userdata/index.ts";
import { linuxFiles } from "../../../src/service/userdata/linux-files.ts";
import { peer } from "../../helpers/peers.ts";
import { run, tempDir } from "../../peers/cli.ts";
import { ed25519, hostileParams, realisticParams } from "./fixtures.ts";

type IgnFile = {
  path: string;
  mode: number;
  user: { id: number };
  group: { id: number };
  contents: { source: string };
};
type IgnConfig = {
  ignition: { version: string };
  storage: { files: IgnFile[] };
  systemd: { units: { name: string; enabled: boolean; contents: string }[] };
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

describe("Ignition stub", () => {
  const all = [realisticParams(publicKeyPem), ...hostileParams(publicKeyPem)];

  test("content type, spec version", () => {
    const r = renderUserdata("ignition", realisticParams(publicKeyPem));
    assert.equal(r.contentType, "application/vnd.coreos.ignition+json; charset=utf-8");
    assert.equal((JSON.parse(r.body) as IgnConfig).ignition.version, IGNITION_SPEC_VERSION);
  });

  all.forEach((params, i) => {
    test(`params #${i}: Ignition's validator accepts it with no warning; files decode as intended`, () => {
      const { body } = renderUserdata("ignition", params);
      const v = validate(body);
      assert.equal(v.status, 0, v.output);
      assert.equal(v.output, "", "no error and no warning");

      const config = JSON.parse(body) as IgnConfig;
      const expected = linuxFiles(checkParams(params)).filter((f) => !f.path.startsWith("/etc/systemd/"));
      assert.deepEqual(
        config.storage.files.map((f) => ({
          path: f.path,
          mode: f.mode,
          content: decodeDataUrl(f.contents.source),
        })),
        expected.map((f) => ({ path: f.path, mode: f.mode, content: f.content })),
      );
      for (const f of config.storage.files) {
        assert.deepEqual([f.user, f.group], [{ id: 0 }, { id: 0 }]);
      }
      const token = config.storage.files.find((f) => f.path === TOKEN_PATH)!;
      assert.equal(token.mode, 0o600);
      assert.equal(decodeDataUrl(token.contents.source), params.bootstrapToken);
      assert.deepEqual(config.systemd.units, [
        { name: "bootseal-fetch.service", enabled: true, contents: SYSTEMD_UNIT },
      ]);
    });
  });

  test("the validator does report a broken config (the check is live)", () => {
    const config = JSON.parse(renderUserdata("ignition", realisticParams(publicKeyPem)).body) as IgnConfig;
    config.storage.files[0]!.path = "etc/bootseal/token";
    config.storage.files[1]!.mode = 0o4755;
    const v = validate(JSON.stringify(config));
    assert.notEqual(v.status, 0);
    assert.match(v.output, /path not absolute/);
    assert.match(v.output, /warning/);
  });
});
