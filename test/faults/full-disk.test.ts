/**
 * A full disk under the file store: the store directory is a 2 MiB tmpfs mounted by the test
 * (as root). Filled to the last byte, a publish (a new machine and a republish) answers 503
 * STORE_UNAVAILABLE `{code, message}` with `Retry-After`, nothing half-written is left (no
 * temporary or lock file), the old version of the republished config is still served byte for
 * byte, the new machine has no config; once space is freed the same publish succeeds.
 * When the mount is refused (not root, no tmpfs) that test is skipped with the reason; the
 * second test injects ENOSPC into the store the app is built on, and runs everywhere.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { FileStore } from "../../providers/stores/file.ts";
import type { ObjectStore } from "../../providers/stores/object-store.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { buildApp } from "../../src/service/app.ts";
import { type AgeKey, ageKey, tempDir } from "../fetcher/helpers.ts";
import { type Service, startService } from "../helpers/serve-process.ts";
import { whenReady } from "../helpers/until.ts";
import { appConfig } from "../service/app-config.ts";
import { call, decryptWithAge, serviceConfig } from "./helpers.ts";

let dir: { path: string; remove: () => Promise<void> };
let mnt: string;
let mounted = false;
let mountError = "";
let service: Service | undefined;
let operator: AgeKey;
const token = randomBytes(24).toString("hex");

before(async () => {
  dir = await tempDir("faults-disk");
  mnt = join(dir.path, "mnt");
  await mkdir(mnt);
  try {
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt], { stdio: "pipe" });
    mounted = true;
  } catch (err) {
    mountError = String((err as { stderr?: Buffer }).stderr ?? err).trim();
    return;
  }
  operator = await ageKey(dir.path, "operator");
  const config = join(dir.path, "serve.yaml");
  await writeFile(
    config,
    serviceConfig({
      store: `file://${join(mnt, "store")}`,
      recipient: operator.recipient,
      tokenSha256: createHash("sha256").update(token).digest("hex"),
      dataDir: join(dir.path, "data"),
      audit: join(dir.path, "audit.log"),
    }),
  );
  service = await startService(config, { PATH: process.env.PATH, HOME: dir.path });
});

after(async () => {
  await service?.stop();
  if (mounted) execFileSync("umount", ["-l", mnt]);
  await dir?.remove();
});

/** Fills the file system: big writes, then smaller, down to one byte, until each fails ENOSPC. */
async function fill(path: string): Promise<void> {
  const fh = await open(path, "w");
  try {
    for (const size of [65536, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x5a);
      for (let i = 0; i < 4096; i++) {
        try {
          await fh.write(chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "ENOSPC") throw err;
          break;
        }
      }
    }
  } finally {
    await fh.close().catch(() => {});
  }
}

async function allFiles(d: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(d, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(join(e.parentPath, e.name));
  }
  return out;
}

const machine = (name: string) => `${service?.url}/v1/machines/default/${name}/config`;

test("a full disk: 503 STORE_UNAVAILABLE, nothing half-written, the old version still served", {
  timeout: 300_000,
}, async (t) => {
  if (!mounted) {
    t.skip(`mount -t tmpfs refused: ${mountError}`);
    return;
  }
  const first = await call(machine("keep"), { method: "PUT", token, body: "version one\n" });
  assert.equal(first.status, 201, first.body.toString());
  const before = await call(machine("keep"), { token });
  assert.equal(before.status, 200);

  const filler = join(mnt, "filler");
  await fill(filler);
  const secret = `secret-${randomBytes(8).toString("hex")}`;
  const payload = `${secret}\n${"x".repeat(200_000)}\n`;
  for (const name of ["keep", "fresh"]) {
    const r = await call(machine(name), { method: "PUT", token, body: payload });
    assert.equal(r.status, 503, `${name}: ${r.body.toString()}`);
    assert.equal(r.headers.get("retry-after"), "5");
    const body = r.json<{ code: string; message: string }>();
    assert.deepEqual(Object.keys(body).sort(), ["code", "message"]);
    assert.equal(body.code, "STORE_UNAVAILABLE");
    assert.ok(!r.body.toString().includes(secret));
    assert.ok(!/\n\s+at /.test(body.message), "no stack trace");
  }
  const kept = await call(machine("keep"), { token });
  assert.equal(kept.status, 200);
  assert.ok(kept.body.equals(before.body), "the old version is served byte for byte");
  assert.equal((await decryptWithAge(dir.path, kept.body, operator.file)).toString(), "version one\n");
  assert.equal((await call(machine("fresh"), { token })).status, 404);
  const stray = (await allFiles(join(mnt, "store"))).filter((f) => /\.bootseal-/.test(f));
  assert.deepEqual(stray, [], "no temporary or lock file left");
  assert.ok(!service?.log().includes(secret), "no payload in the log");

  await rm(filler);
  const again = await call(machine("keep"), { method: "PUT", token, body: payload });
  assert.equal(again.status, 200, again.body.toString());
  const now = await call(machine("keep"), { token });
  assert.equal((await decryptWithAge(dir.path, now.body, operator.file)).toString(), payload);
  assert.equal((await whenReady(service?.url as string)).status, "ready");
});

test("an injected ENOSPC (runs where mount is refused too): 503, the old version still served", {
  timeout: 120_000,
}, async () => {
  const storeDir = join(dir.path, "injected");
  const real = new FileStore(storeDir);
  const state = { full: false };
  const store: ObjectStore = {
    url: real.url,
    get: (k, o) => real.get(k, o),
    head: (k, o) => real.head(k, o),
    list: (p, o) => real.list(p, o),
    delete: (k, c, o) => real.delete(k, c, o),
    put: (k, b, c, o) => {
      // What the file store raises for ENOSPC (providers/stores/file-errors.ts, fsError).
      if (state.full) {
        const cause = Object.assign(new Error("no space left on device"), { code: "ENOSPC" });
        return Promise.reject(
          new BootsealError("STORE_UNAVAILABLE", "file store: cannot write an object (ENOSPC)", { cause }),
        );
      }
      return real.put(k, b, c, o);
    },
  };
  const recipient = await identityToRecipient(await generateX25519Identity());
  const app = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [
        { name: "c", tokenSha256: createHash("sha256").update(token).digest("hex"), scopes: [...SCOPES] },
      ],
    }),
  });
  try {
    const put = (name: string, payload: string) =>
      app.inject({
        method: "PUT",
        url: `/v1/machines/default/${name}/config`,
        headers: { authorization: `Bearer ${token}` },
        payload,
      });
    const get = (name: string) =>
      app.inject({
        method: "GET",
        url: `/v1/machines/default/${name}/config`,
        headers: { authorization: `Bearer ${token}` },
      });
    assert.equal((await put("keep", "one\n")).statusCode, 201);
    const old = (await get("keep")).rawPayload;
    state.full = true;
    for (const name of ["keep", "fresh"]) {
      const r = await put(name, "secret-two\n");
      assert.equal(r.statusCode, 503, r.body);
      assert.equal(r.headers["retry-after"], "5");
      assert.deepEqual(Object.keys(r.json()).sort(), ["code", "message"]);
      assert.equal(r.json().code, "STORE_UNAVAILABLE");
      assert.ok(!r.body.includes("secret-two"));
    }
    assert.ok((await get("keep")).rawPayload.equals(old), "the old version is served byte for byte");
    assert.equal((await get("fresh")).statusCode, 404);
    state.full = false;
    assert.equal((await put("keep", "two\n")).statusCode, 200);
  } finally {
    await app.close();
  }
});
