/**
 * The install script (/usr/local/libexec/bootseal-install) taken out of the generated stubs
 * and run for real, under bash and under sh, against a loopback HTTP server that serves a
 * fake artifact and an Ed25519 signature made here with node:crypto. It must install the
 * right artifact, refuse a flipped byte or a wrong signature, never leave a refused file in
 * place, and never run what it downloaded.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHash, sign } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { parse } from "yaml";
import {
  ENV_PATH,
  INSTALL_SCRIPT,
  INSTALL_SCRIPT_PATH,
  PUBKEY_PATH,
  renderUserdata,
  type UserdataParams,
} from "../../../src/service/userdata/index.ts";
import { tempDir } from "../../peers/cli.ts";
import { ed25519 } from "./fixtures.ts";

type Reply = { status: number; body: Buffer };

const routes = new Map<string, Reply>();
const hits: string[] = [];
let server: Server;
let base = "";

before(async () => {
  server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    hits.push(path);
    const reply = routes.get(path) ?? { status: 404, body: Buffer.from("not found\n") };
    res.writeHead(reply.status, { "content-length": reply.body.length });
    res.end(reply.body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((resolve) => server.close(() => resolve())));

const signer = ed25519();
const other = ed25519();
/** A fake executable: if anything ever runs it, it leaves a marker next to itself. */
const ARTIFACT = Buffer.from('#!/bin/sh\necho ran > "$(dirname "$0")/RAN"\n');
const sha256 = (b: Buffer): string => createHash("sha256").update(b).digest("hex");
const ed25519Sign = (b: Buffer, key = signer.privateKey): Buffer => sign(null, b, key);

/** Env-file lines KEY='value' (the only form the stubs write) to an environment. */
function parseEnvFile(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([A-Z][A-Z0-9_]*)='([^'\n\\]*)'$/.exec(line);
    assert.ok(m, `not a KEY='value' line: ${line}`);
    env[m[1]!] = m[2]!;
  }
  return env;
}

/**
 * The script, env file and public key as the cloud-init stub writes them (the env file and the
 * key the same in Ignition, which downloads the executable itself and has no script).
 */
function fromStubs(params: UserdataParams): { script: string; env: Record<string, string>; pub: string } {
  const cc = parse(renderUserdata("cloud-init", params).body) as {
    write_files: { path: string; content: string }[];
  };
  const file = (p: string): string => cc.write_files.find((f) => f.path === p)!.content;
  const ign = JSON.parse(renderUserdata("ignition", params).body) as {
    storage: { files: { path: string; contents: { source: string } }[] };
  };
  assert.ok(
    !ign.storage.files.some((f) => f.path === INSTALL_SCRIPT_PATH),
    "Ignition has no download script",
  );
  for (const p of [ENV_PATH, PUBKEY_PATH]) {
    const src = ign.storage.files.find((f) => f.path === p)!.contents.source;
    assert.equal(Buffer.from(src.replace("data:;base64,", ""), "base64").toString("utf8"), file(p), p);
  }
  return { script: file(INSTALL_SCRIPT_PATH), env: parseEnvFile(file(ENV_PATH)), pub: file(PUBKEY_PATH) };
}

type Case = {
  artifact?: Reply;
  signature?: Reply;
  /** The SHA-256 pinned in the user data (default: of ARTIFACT). */
  pinned?: string;
  /** A file already at the install path before the run. */
  existing?: Buffer;
};

let counter = 0;

async function install(
  shell: string,
  c: Case,
): Promise<{ code: number | null; stderr: string; dir: string; bin: string; remove: () => void }> {
  const id = `c${++counter}`;
  if (c.artifact) routes.set(`/${id}/bootseal`, c.artifact);
  if (c.signature) routes.set(`/${id}/bootseal.sig`, c.signature);
  const params: UserdataParams = {
    serviceUrl: "https://bootseal.example.com:7480",
    machine: { namespace: "cluster-a", name: "worker-0" },
    auth: { method: "token", token: "Zt4qK1v9bX_3mN-0pLwR8sYcJ2hFgE5aUoT7iD6kQxM" },
    artifact: {
      // A presigned-URL look-alike that would run commands if a shell ever expanded it.
      url: `${base}/${id}/bootseal?X-Amz-Signature=a%2Fb&x=$(touch$IFS.pwned)&y=;touch$IFS.pwned;`,
      sha256: c.pinned ?? sha256(ARTIFACT),
      sha512: createHash("sha512").update(ARTIFACT).digest("hex"),
      signatureUrl: `${base}/${id}/bootseal.sig?$(touch$IFS.pwned)`,
      publicKeyPem: signer.publicKeyPem,
    },
  };
  const { script, env, pub } = fromStubs(params);
  const { dir, remove } = tempDir("install");
  const scriptFile = join(dir, "bootseal-install");
  const pubFile = join(dir, "artifact.pub");
  const bin = join(dir, "usr/local/bin/bootseal");
  writeFileSync(scriptFile, script, { mode: 0o755 });
  writeFileSync(pubFile, pub);
  if (c.existing) {
    mkdirSync(join(dir, "usr/local/bin"), { recursive: true });
    writeFileSync(bin, c.existing, { mode: 0o755 });
  }
  const child = spawn(shell, [scriptFile], {
    cwd: dir,
    env: { PATH: process.env.PATH, ...env, BOOTSEAL_BIN: bin, BOOTSEAL_ARTIFACT_PUBKEY: pubFile },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.on("error", reject);
    child.on("close", (status) => {
      clearTimeout(timer);
      resolve(status);
    });
  });
  // Whatever happened: nothing downloaded ran, no hostile URL was expanded by a shell.
  assert.ok(!existsSync(join(dir, "usr/local/bin/RAN")), "the downloaded file was executed");
  assert.ok(!existsSync(join(dir, ".pwned")), "a URL was expanded by a shell");
  return { code, stderr, dir, bin, remove };
}

function assertRefused(r: Awaited<ReturnType<typeof install>>, why: RegExp, existing?: Buffer): void {
  assert.notEqual(r.code, 0, r.stderr);
  assert.match(r.stderr, why);
  if (existing) assert.deepEqual(readFileSync(r.bin), existing, "the installed executable was replaced");
  else assert.ok(!existsSync(r.bin), "a refused executable was installed");
  // No left-over download next to the install path.
  const left = readdirSync(join(r.dir, "usr/local/bin")).filter((n) => n.includes("download"));
  assert.deepEqual(left, []);
}

const ok = (body: Buffer): Reply => ({ status: 200, body });

test("the script carries no per-machine value (it reads the environment only)", () => {
  assert.ok(!INSTALL_SCRIPT.includes("example"));
  assert.match(INSTALL_SCRIPT, /^#!\/bin\/sh\n/);
  // Order in the text: hash check, then signature check, then chmod and rename.
  const at = (s: string): number => {
    const i = INSTALL_SCRIPT.indexOf(s);
    assert.ok(i >= 0, s);
    return i;
  };
  assert.ok(at("sha256sum -c --status -;") < at("openssl pkeyutl -verify"));
  assert.ok(at("openssl pkeyutl -verify") < at('chmod 0755 -- "$tmp"'));
  assert.ok(at('chmod 0755 -- "$tmp"') < at('mv -f -- "$tmp" "$bin"'));
});

for (const shell of ["bash", "sh"]) {
  describe(`install script under ${shell}`, () => {
    test("the right artifact and signature: installed, mode 0755, same bytes", async (t) => {
      const r = await install(shell, { artifact: ok(ARTIFACT), signature: ok(ed25519Sign(ARTIFACT)) });
      t.after(r.remove);
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(readFileSync(r.bin), ARTIFACT);
      assert.equal(statSync(r.bin).mode & 0o7777, 0o755);
      assert.deepEqual(
        readdirSync(join(r.dir, "usr/local/bin")).filter((n) => n !== "bootseal"),
        [],
        "no left-over download",
      );
      assert.match(r.stderr, /SHA-256 and signature verified/);
    });

    test("one flipped byte: refused on the hash, nothing installed", async (t) => {
      const flipped = Buffer.from(ARTIFACT);
      flipped[12] = flipped[12]! ^ 0x01;
      const r = await install(shell, { artifact: ok(flipped), signature: ok(ed25519Sign(ARTIFACT)) });
      t.after(r.remove);
      assertRefused(r, /SHA-256 mismatch/);
    });

    test("right hash, signature by another key: refused, nothing installed", async (t) => {
      const r = await install(shell, {
        artifact: ok(ARTIFACT),
        signature: ok(ed25519Sign(ARTIFACT, other.privateKey)),
      });
      t.after(r.remove);
      assertRefused(r, /signature check failed/);
    });

    test("a substituted artifact whose hash was pinned, without a valid signature: refused", async (t) => {
      const evil = Buffer.from('#!/bin/sh\necho evil > "$(dirname "$0")/RAN"\n');
      const r = await install(shell, {
        artifact: ok(evil),
        signature: ok(ed25519Sign(ARTIFACT)),
        pinned: sha256(evil),
      });
      t.after(r.remove);
      assertRefused(r, /signature check failed/);
    });

    test("a truncated signature: refused, and an older executable stays in place", async (t) => {
      const old = Buffer.from("#!/bin/sh\n# old\n");
      const r = await install(shell, {
        artifact: ok(ARTIFACT),
        signature: ok(ed25519Sign(ARTIFACT).subarray(0, 63)),
        existing: old,
      });
      t.after(r.remove);
      assertRefused(r, /signature check failed/, old);
    });

    test("no signature on the server (404): refused", async (t) => {
      const r = await install(shell, { artifact: ok(ARTIFACT) });
      t.after(r.remove);
      assertRefused(r, /404/);
    });

    test("already installed at the pinned hash: nothing downloaded", async (t) => {
      const before = hits.length;
      const r = await install(shell, { existing: ARTIFACT });
      t.after(r.remove);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(hits.length, before, "the server was asked for something");
      assert.match(r.stderr, /installed at the pinned SHA-256/);
    });
  });
}
