/**
 * The service's own fetcher executables (/v1/artifacts/): a stand-in directory of arbitrary
 * bytes named like the executables, the signing key generated on first use (mode 0600), every
 * signature checked with node:crypto against the served key, SHA256SUMS against the bytes,
 * conditional GETs, fixed names only, and the user-data stubs pointing at these URLs.
 */
import assert from "node:assert/strict";
import { createHash, createPublicKey, randomBytes, verify } from "node:crypto";
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { MAX_ARTIFACT_BYTES } from "../../src/artifact/signing.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { type AppConfig, buildApp } from "../../src/service/app.ts";
import { artifactCatalog, loadArtifacts } from "../../src/service/artifacts.ts";
import { appConfig } from "./app-config.ts";

const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (b: string | Buffer, alg = "sha256") => createHash(alg).update(b).digest("hex");
const RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";

const root = mkdtempSync(join(tmpdir(), "bootseal-artifacts-"));
after(() => rmSync(root, { recursive: true, force: true }));

const EXES = {
  "bootseal-linux-x64": randomBytes(300_000),
  "bootseal-linux-arm64": randomBytes(200_001),
  "bootseal-windows-x64.exe": randomBytes(100_003),
};

function artifactDir(name: string, files: Partial<typeof EXES> = EXES): string {
  const dir = join(root, name);
  for (const [file, bytes] of Object.entries(files)) {
    writeFileSync(join(dir, file), bytes, { flag: "w" });
  }
  return dir;
}

function app(dir: string, keyFile: string, extra: Partial<AppConfig> = {}) {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${RECIPIENT}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      artifacts: { dir, signingKeyFile: keyFile },
      bootstrapToken: { ttlMs: 3_600_000, uses: 3, derivationKey: randomBytes(32) },
      publicUrl: "https://bootseal.example.com:7480",
      ...extra,
    }),
  });
}

function mkdir(name: string): void {
  mkdirSync(join(root, name), { recursive: true });
}

test("every executable, its signature, SHA256SUMS and the key: served, verified with node:crypto", async () => {
  mkdir("all");
  const dir = artifactDir("all");
  const keyFile = join(root, "keys-all", "artifact-signing.pem");
  const a = app(dir, keyFile);
  const keyRes = await a.inject({ url: "/v1/artifacts/signing-key.pem" });
  assert.equal(keyRes.statusCode, 200, keyRes.body);
  // Generated on first use, private to the service.
  assert.equal(statSync(keyFile).mode & 0o777, 0o600);
  assert.equal(statSync(join(root, "keys-all")).mode & 0o777, 0o700);
  const publicKey = createPublicKey(keyRes.body);
  assert.equal(publicKey.asymmetricKeyType, "ed25519");
  assert.equal(
    String(createPublicKey(readFileSync(keyFile)).export({ type: "spki", format: "pem" })),
    keyRes.body,
    "the served key is the key file's",
  );

  const sums = await a.inject({ url: "/v1/artifacts/SHA256SUMS" });
  assert.equal(sums.statusCode, 200);
  assert.equal(
    sums.body,
    Object.keys(EXES)
      .sort()
      .map((f) => `${sha(EXES[f as keyof typeof EXES])}  ${f}\n`)
      .join(""),
  );

  for (const [file, bytes] of Object.entries(EXES)) {
    const res = await a.inject({ url: `/v1/artifacts/${file}` });
    assert.equal(res.statusCode, 200, file);
    assert.equal(res.headers["content-length"], String(bytes.length));
    assert.equal(res.headers["content-type"], "application/octet-stream");
    assert.equal(res.headers.etag, `"${sha(bytes)}"`);
    assert.ok(res.rawPayload.equals(bytes), `${file}: the same bytes`);
    const sig = await a.inject({ url: `/v1/artifacts/${file}.sig` });
    assert.equal(sig.statusCode, 200);
    assert.equal(sig.rawPayload.length, 64);
    assert.ok(verify(null, res.rawPayload, publicKey, sig.rawPayload), `${file}: the signature verifies`);
    const flipped = Buffer.from(res.rawPayload);
    flipped[7] = (flipped[7] ?? 0) ^ 1;
    assert.ok(!verify(null, flipped, publicKey, sig.rawPayload), "the check is live");
    // A conditional GET with the ETag: 304, no body.
    const again = await a.inject({
      url: `/v1/artifacts/${file}`,
      headers: { "if-none-match": res.headers.etag! },
    });
    assert.equal(again.statusCode, 304);
    assert.equal(again.rawPayload.length, 0);
  }
  await a.close();

  // A second service with the same key file signs with the same key.
  const b = app(dir, keyFile);
  assert.equal((await b.inject({ url: "/v1/artifacts/signing-key.pem" })).body, keyRes.body);
  await b.close();
});

test("fixed names only: anything else is 404 and no file outside the directory is read", async () => {
  mkdir("names");
  const dir = artifactDir("names", { "bootseal-linux-x64": EXES["bootseal-linux-x64"] });
  writeFileSync(join(dir, "secret.txt"), "not an artifact");
  const a = app(dir, join(root, "keys-names", "k.pem"));
  for (const url of [
    "/v1/artifacts/secret.txt",
    "/v1/artifacts/..%2F..%2Fetc%2Fpasswd",
    "/v1/artifacts/bootseal-linux-arm64",
    "/v1/artifacts/bootseal-linux-arm64.sig",
    "/v1/artifacts/.sig",
    "/v1/artifacts/bootseal-linux-x64.sig.sig",
  ]) {
    const res = await a.inject({ url });
    assert.equal(res.statusCode, 404, `${url}: ${res.body}`);
    assert.equal((res.json() as { code: string }).code, "NOT_FOUND");
    assert.ok(!res.body.includes("not an artifact"));
  }
  assert.equal((await a.inject({ url: "/v1/artifacts/bootseal-linux-x64" })).statusCode, 200);
  await a.close();
});

test("an executable changed after it was hashed is refused (503), never served against the old pin", async () => {
  mkdir("changed");
  const dir = artifactDir("changed", { "bootseal-linux-x64": EXES["bootseal-linux-x64"] });
  const a = app(dir, join(root, "keys-changed", "k.pem"));
  assert.equal((await a.inject({ url: "/v1/artifacts/bootseal-linux-x64" })).statusCode, 200);
  writeFileSync(join(dir, "bootseal-linux-x64"), randomBytes(1000));
  utimesSync(join(dir, "bootseal-linux-x64"), new Date(), new Date(Date.now() + 60_000));
  const res = await a.inject({ url: "/v1/artifacts/bootseal-linux-x64" });
  assert.equal(res.statusCode, 503, res.body);
  assert.match(res.body, /restart the service/);
  await a.close();
});

test("loading: one buffer for files of different sizes (digests and signatures of each file's own bytes); over the cap is TOO_LARGE before any read", async () => {
  mkdir("sizes");
  // Smallest first: a later, larger file must not be cut to the first one's length, and an
  // earlier, smaller one must not be signed with the larger one's bytes after it.
  const dir = artifactDir("sizes", {
    "bootseal-windows-x64.exe": randomBytes(5),
    "bootseal-linux-x64": randomBytes(70_001),
    "bootseal-linux-arm64": randomBytes(3),
  });
  const set = await loadArtifacts(dir, join(root, "keys-sizes", "k.pem"));
  const publicKey = createPublicKey(set.publicKeyPem as string);
  for (const a of set.byPlatform.values()) {
    const bytes = readFileSync(a.path);
    assert.equal(a.size, bytes.length, a.file);
    assert.equal(a.sha256, sha(bytes), a.file);
    assert.equal(a.sha512, sha(bytes, "sha512"), a.file);
    assert.ok(verify(null, bytes, publicKey, a.signature), a.file);
  }
  assert.equal(set.byPlatform.size, 3);

  mkdir("too-large");
  const big = join(root, "too-large", "bootseal-linux-x64");
  writeFileSync(big, "");
  truncateSync(big, MAX_ARTIFACT_BYTES + 1); // sparse: nothing is written
  await assert.rejects(
    loadArtifacts(join(root, "too-large"), join(root, "keys-big", "k.pem")),
    (err: unknown) => {
      assert.ok(err instanceof BootsealError && err.code === "TOO_LARGE", String(err));
      return true;
    },
  );
});

async function publish(a: ReturnType<typeof app>, machine: string): Promise<void> {
  const put = await a.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
    payload: "#cloud-config\n",
  });
  assert.equal(put.statusCode, 201, put.body);
}

test("user-data stubs point at the served executables: Linux x64 and arm64, Windows; pins match", async () => {
  mkdir("stubs");
  const dir = artifactDir("stubs");
  const a = app(dir, join(root, "keys-stubs", "k.pem"));
  await publish(a, "prod/w1");
  const get = (q: string) =>
    a.inject({ url: `/v1/machines/prod/w1/userdata?${q}`, headers: { authorization: `Bearer ${ADMIN}` } });
  const base = "https://bootseal.example.com:7480/v1/artifacts";
  const cc = await get("format=cloud-init");
  assert.equal(cc.statusCode, 200, cc.body);
  assert.ok(cc.body.includes(`BOOTSEAL_ARTIFACT_URL='${base}/bootseal-linux-x64'`), cc.body);
  assert.ok(cc.body.includes(`BOOTSEAL_ARTIFACT_SHA256='${sha(EXES["bootseal-linux-x64"])}'`));
  assert.ok(cc.body.includes(`BOOTSEAL_ARTIFACT_SIGNATURE_URL='${base}/bootseal-linux-x64.sig'`));
  const arm = await get("format=cloud-init&arch=arm64");
  assert.ok(arm.body.includes(`BOOTSEAL_ARTIFACT_SHA256='${sha(EXES["bootseal-linux-arm64"])}'`));
  const ign = await get("format=ignition");
  assert.equal(ign.statusCode, 200, ign.body);
  const files = (JSON.parse(ign.body) as { storage: { files: { path: string; contents: unknown }[] } })
    .storage.files;
  assert.deepEqual(files.find((f) => f.path === "/usr/local/bin/bootseal")?.contents, {
    source: `${base}/bootseal-linux-x64`,
    verification: { hash: `sha512-${sha(EXES["bootseal-linux-x64"], "sha512")}` },
  });
  const ps = await get("format=powershell");
  assert.equal(ps.statusCode, 200, ps.body);
  assert.ok(ps.body.includes(`$ArtifactUrl = '${base}/bootseal-windows-x64.exe'`));
  assert.ok(ps.body.includes(`$ArtifactSha256 = '${sha(EXES["bootseal-windows-x64.exe"])}'`));
  await a.close();
});

test("a format whose executable is missing: 501 naming npm run build:sea; the others still answer", async () => {
  mkdir("linux-only");
  const dir = artifactDir("linux-only", { "bootseal-linux-x64": EXES["bootseal-linux-x64"] });
  const a = app(dir, join(root, "keys-linux-only", "k.pem"));
  await publish(a, "prod/w2");
  const get = (q: string) =>
    a.inject({ url: `/v1/machines/prod/w2/userdata?${q}`, headers: { authorization: `Bearer ${ADMIN}` } });
  for (const q of ["format=powershell", "format=ignition&arch=arm64"]) {
    const res = await get(q);
    assert.equal(res.statusCode, 501, `${q}: ${res.body}`);
    assert.equal((res.json() as { code: string }).code, "UNSUPPORTED");
    assert.match(res.body, /npm run build:sea/);
  }
  assert.equal((await get("format=cloud-init")).statusCode, 200);
  // The operator's own artifact is still honoured over the served one.
  await a.close();
  const own = {
    url: "https://dl.example.com/bootseal.exe",
    sha256: "2b".repeat(32),
    signatureUrl: "https://dl.example.com/bootseal.exe.sig",
    publicKeyPem: String(
      createPublicKey(readFileSync(join(root, "keys-linux-only", "k.pem"))).export({
        type: "spki",
        format: "pem",
      }),
    ),
  };
  const b = app(dir, join(root, "keys-linux-only", "k.pem"), { fetcherArtifactWindows: own });
  await publish(b, "prod/w3");
  const ps = await b.inject({
    url: "/v1/machines/prod/w3/userdata?format=powershell",
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(ps.statusCode, 200, ps.body);
  assert.ok(ps.body.includes(`$ArtifactUrl = '${own.url}'`));
  await b.close();
});

test("a catalog closed while it loads stops reading and rejects with AbortError (a SIGTERM at start does not wait for the hashing)", async () => {
  mkdir("closing");
  const dir = artifactDir("closing", { "bootseal-linux-x64": randomBytes(1_000_000) });
  const catalog = artifactCatalog({ dir, signingKeyFile: join(root, "keys-closing", "k.pem") });
  const loading = catalog.get();
  catalog.close();
  await assert.rejects(loading, { name: "AbortError" });
  await assert.rejects(catalog.ready(), { code: "SERVICE_UNAVAILABLE" }, "never ready once closed");
});
