/**
 * The cloud-init stub: valid for the real `cloud-init schema`, read by PyYAML (cloud-init's
 * own YAML 1.1 loader) into exactly the files and commands we meant, token mode 0600.
 */
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { parse } from "yaml";
import {
  checkParams,
  ENV_PATH,
  INSTALL_SCRIPT,
  INSTALL_SCRIPT_PATH,
  PUBKEY_PATH,
  renderUserdata,
  SYSTEMD_UNIT,
  TOKEN_PATH,
  UNIT_PATH,
  type UserdataParams,
} from "../../../src/service/userdata/index.ts";
import { envFile } from "../../../src/service/userdata/linux-files.ts";
import { peer } from "../../helpers/peers.ts";
import { run, tempDir } from "../../peers/cli.ts";
import { ed25519, hostileParams, realisticParams, tokenOf } from "./fixtures.ts";

type WriteFile = { path: string; content: string; owner: string; permissions: string };
type CloudConfig = { write_files: WriteFile[]; runcmd: string[][] };

const { publicKeyPem } = ed25519();

/** Loads a document with the Python and PyYAML that cloud-init itself runs on. */
function pyyamlLoad(file: string): unknown {
  const cloudInit = peer("CLOUD_INIT_BIN");
  const shebang = readFileSync(cloudInit, "utf8").split("\n")[0] ?? "";
  const python = /^#!\s*(\S+)/.exec(shebang)?.[1];
  assert.ok(python, `no interpreter in ${cloudInit}`);
  const r = run(python, [
    "-c",
    "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))))",
    file,
  ]);
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

function schema(file: string): { status: number | null; output: string } {
  const r = run(peer("CLOUD_INIT_BIN"), ["schema", "--config-file", file]);
  return { status: r.status, output: r.stdout + r.stderr };
}

function expectedFiles(params: UserdataParams): WriteFile[] {
  const p = checkParams(params);
  const f = (path: string, content: string, permissions: string): WriteFile => ({
    path,
    owner: "root:root",
    permissions,
    content,
  });
  return [
    f(TOKEN_PATH, tokenOf(p), "0600"),
    f(ENV_PATH, envFile(p), "0644"),
    f(PUBKEY_PATH, p.publicKeyPem, "0644"),
    f(INSTALL_SCRIPT_PATH, INSTALL_SCRIPT, "0755"),
    f(UNIT_PATH, SYSTEMD_UNIT, "0644"),
  ];
}

describe("cloud-init stub", () => {
  const all = [realisticParams(publicKeyPem), ...hostileParams(publicKeyPem)];

  test("content type and #cloud-config header", () => {
    const r = renderUserdata("cloud-init", realisticParams(publicKeyPem));
    assert.equal(r.contentType, "text/cloud-config; charset=utf-8");
    assert.ok(r.body.startsWith("#cloud-config\n"));
  });

  all.forEach((params, i) => {
    test(`params #${i}: cloud-init schema accepts it; PyYAML reads exactly the intended document`, (t) => {
      const { dir, remove } = tempDir("cloud-init");
      t.after(remove);
      const file = join(dir, "user-data.yaml");
      const { body } = renderUserdata("cloud-init", params);
      writeFileSync(file, body);

      const s = schema(file);
      assert.equal(s.status, 0, s.output);
      assert.match(s.output, /Valid cloud-config/);

      const expected: CloudConfig = {
        write_files: expectedFiles(params),
        runcmd: [
          ["systemctl", "daemon-reload"],
          ["systemctl", "enable", "--now", "bootseal-fetch.service"],
        ],
      };
      // cloud-init's loader (YAML 1.1) and the yaml package (1.2) agree on every value.
      assert.deepEqual(pyyamlLoad(file), expected);
      assert.deepEqual(parse(body), expected);

      const doc = expected.write_files;
      const token = doc.find((f) => f.path === TOKEN_PATH)!;
      assert.equal(token.permissions, "0600");
      assert.equal(token.owner, "root:root");
      assert.equal(token.content, tokenOf(params));
      assert.equal(
        doc.find((f) => f.path === UNIT_PATH)!.content,
        readFileSync(new URL("../../../deploy/systemd/bootseal-fetch.service", import.meta.url), "utf8"),
      );
      // The token is in the token file only.
      assert.equal(body.split(tokenOf(params)).length - 1, 1);
    });
  });

  test("cloud-init schema does reject a broken document (the check is live)", (t) => {
    const { dir, remove } = tempDir("cloud-init");
    t.after(remove);
    const file = join(dir, "bad.yaml");
    const { body } = renderUserdata("cloud-init", realisticParams(publicKeyPem));
    writeFileSync(
      file,
      body.replace('permissions: "0600"', "permissions: 384").replace("runcmd:", "runcmd: 5\nx:"),
    );
    const s = schema(file);
    assert.notEqual(s.status, 0, s.output);
    assert.match(s.output, /permissions/);
  });
});
