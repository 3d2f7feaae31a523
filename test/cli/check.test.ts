/**
 * `bootseal check` (the built CLI, dist/cli/main.js) against a real `bootseal serve` (the
 * built dist too): a healthy deployment all green, then each failure made real and seen on
 * its own line with exit 50 (CHECK_FAILED).
 */
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";

import { createServer, request } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { stringify } from "yaml";
import { clockLine } from "../../src/cli/check/service-checks.ts";
import { REPO, tempDir } from "../fetcher/helpers.ts";
import { runChild, stopChild } from "../helpers/child.ts";
import { peer } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { until } from "../helpers/until.ts";

const DIST = join(REPO, "dist/cli/main.js");
const AGE_KEY = join(REPO, "test/fixtures/json/age-test.agekey");
const AGE_RECIPIENT = "age1mgj95snch0hlfpn9nweym8zrha47lxwhwhrjhrcq9dx2h0wr5y5q7dc5r5";
const TOKEN = "check-admin-token-0123456789abcdefghijklmn";
const READER = "check-reader-token-0123456789abcdefghijklm";
const sha = (t: string) => createHash("sha256").update(t).digest("hex");

interface Served {
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

async function serve(dir: string, config: Record<string, unknown>): Promise<Served> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const file = join(dir, `serve-${port}.yaml`);
  writeFileSync(file, stringify({ publicUrl: url, ...config }));
  const child = spawn(process.execPath, [DIST, "serve", "--config", file, "--listen", `127.0.0.1:${port}`], {
    stdio: ["ignore", "ignore", "pipe"],
    env: { PATH: process.env.PATH },
    cwd: dir,
  });
  let log = "";
  child.stderr?.on("data", (c: Buffer) => {
    log += c.toString();
  });
  await until(
    "serve answers",
    async () => {
      if (child.exitCode !== null) throw new Error(`serve exited: ${log}`);
      return (await fetch(`${url}/healthz`).catch(() => null))?.status === 200;
    },
    { tries: 300 },
  );
  return {
    url,
    child,
    stop: async () => {
      await stopChild(child);
    },
  };
}

function baseConfig(dir: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    store: `file://${join(dir, "store")}`,
    creation_rules: [{ age: AGE_RECIPIENT }],
    controllers: [
      { name: "ops", tokenSha256: sha(TOKEN), scopes: ["admin"] },
      { name: "reader", tokenSha256: sha(READER), scopes: ["status:read"] },
    ],
    artifacts: { dir: join(dir, "sea"), signingKeyFile: join(dir, "keys/artifact.pem") },
    audit: { path: join(dir, "audit.log") },
    ...extra,
  };
}

async function check(args: string[], env: Record<string, string> = {}) {
  const r = await runChild(process.execPath, [DIST, "check", ...args], {
    env: { PATH: process.env.PATH, ...env },
  });
  return { status: r.status, out: r.stdout.toString(), err: r.stderr };
}

/** The line of check `name` (text output: no terminal, so `ok`/`FAIL`/`warn`). */
function lineOf(out: string, name: string): string {
  const line = out.split("\n").find((l) => new RegExp(`^  (ok  |FAIL|warn)  ${name}\\s`).test(l));
  assert.ok(line, `no line ${name} in:\n${out}`);
  return line;
}

describe("bootseal check against a real serve (dist)", { timeout: 180_000 }, () => {
  let dir: string;
  let remove: () => Promise<void>;
  let healthy: Served;
  const tokenFile = () => join(dir, "token");

  before(async () => {
    assert.ok(existsSync(DIST), "dist/cli/main.js is missing: run npm run build");
    ({ path: dir, remove } = await tempDir("check"));
    mkdirSync(join(dir, "sea"));
    writeFileSync(join(dir, "sea/bootseal-linux-x64"), "#!/bin/sh\necho a fetcher stand-in\n");
    writeFileSync(tokenFile(), `${TOKEN}\n`, { mode: 0o600 });
    writeFileSync(join(dir, "reader-token"), `${READER}\n`, { mode: 0o600 });
    healthy = await serve(dir, baseConfig(dir));
  });
  after(async () => {
    await healthy?.stop();
    await remove?.();
  });

  test("a healthy deployment: every line ok, exit 0, no secret printed", async () => {
    const configFile = join(dir, "serve-local.yaml");
    writeFileSync(configFile, stringify({ ...baseConfig(dir), publicUrl: healthy.url }));
    const r = await check(
      [
        "--server",
        healthy.url,
        "--token-file",
        tokenFile(),
        "--config",
        configFile,
        "--machine-url",
        healthy.url,
      ],
      { SOPS_AGE_KEY_FILE: AGE_KEY },
    );
    assert.equal(r.status, 0, r.out + r.err);
    for (const name of [
      "service",
      "clock",
      "ready",
      "credential",
      "store",
      "rule 1 age",
      "bootseal-linux-x64",
    ])
      assert.match(lineOf(r.out, name), /^ {2}ok/);
    assert.match(lineOf(r.out, "public url"), /^ {2}ok .*answers from here/);
    assert.match(lineOf(r.out, "login bindings"), /^ {2}ok/);
    assert.match(r.out, /wraps and unwraps a data key/);
    assert.match(r.out, /, 0 failed\n$/);
    assert.doesNotMatch(r.out + r.err, new RegExp(`${TOKEN}|AGE-SECRET-KEY`));
  });

  test("--json: the same checks as one object", async () => {
    const r = await check(["--server", healthy.url, "--token-file", tokenFile(), "--json"]);
    assert.equal(r.status, 0, r.err);
    const doc = JSON.parse(r.out) as { ok: boolean; checks: { name: string; outcome: string }[] };
    assert.equal(doc.ok, true);
    assert.ok(doc.checks.some((c) => c.name === "store" && c.outcome === "ok"));
  });

  test("an age key without its identity here is a warning (encrypt-only), not a failure", async () => {
    const configFile = join(dir, "serve-local.yaml");
    const r = await check(["--config", configFile]);
    assert.equal(r.status, 0, r.out + r.err);
    assert.match(lineOf(r.out, "rule 1 age"), /^ {2}warn .*no credential here to unwrap/);
  });

  test("a wrong token: the credential line fails, exit 50", async () => {
    writeFileSync(join(dir, "wrong"), "not-the-token-0123456789abcdefghijkl\n", { mode: 0o600 });
    const r = await check(["--server", healthy.url, "--token-file", join(dir, "wrong")]);
    assert.equal(r.status, 50, r.out);
    assert.match(lineOf(r.out, "credential"), /^ {2}FAIL .*401 UNAUTHORIZED/);
    assert.match(r.err, /^bootseal: \d+ checks: .* 1 failed\n$/);
  });

  test("a token without admin: store and keys not checked, a warning", async () => {
    const r = await check(["--server", healthy.url, "--token-file", join(dir, "reader-token")]);
    assert.equal(r.status, 0, r.out);
    assert.match(lineOf(r.out, "credential"), /^ {2}warn .*lacks the admin scope/);
  });

  test("the server down: its line fails, exit 50", async () => {
    const port = await freePort();
    const r = await check(["--server", `http://127.0.0.1:${port}`, "--token-file", tokenFile()]);
    assert.equal(r.status, 50, r.out);
    assert.match(lineOf(r.out, "service"), /^ {2}FAIL .*ECONNREFUSED/);
  });

  test("publicUrl unreachable from here: its line fails", async () => {
    const port = await freePort();
    const r = await check([
      "--server",
      healthy.url,
      "--token-file",
      tokenFile(),
      "--machine-url",
      `http://127.0.0.1:${port}`,
    ]);
    assert.equal(r.status, 50, r.out);
    assert.match(lineOf(r.out, "public url"), /^ {2}FAIL .*ECONNREFUSED/);
  });

  test("missing artifacts: no executable served and no fetcherArtifact", async () => {
    const empty = join(dir, "empty");
    mkdirSync(empty);
    const s = await serve(empty, baseConfig(empty, { artifacts: { dir: join(empty, "sea") } }));
    try {
      const r = await check(["--server", s.url, "--token-file", tokenFile()]);
      assert.equal(r.status, 50, r.out);
      assert.match(lineOf(r.out, "artifacts"), /^ {2}FAIL .*serves no fetcher executable/);
    } finally {
      await s.stop();
    }
  });

  test("an artifact signed with another key than the pinned one fails its signature", async () => {
    const other = join(dir, "other.pub.pem");
    const { generateSigningKey } = await import("../../src/artifact/signing.ts");
    writeFileSync(other, generateSigningKey().publicPem);
    const r = await check([
      "--server",
      healthy.url,
      "--token-file",
      tokenFile(),
      "--artifact-public-key",
      other,
    ]);
    assert.equal(r.status, 50, r.out);
    assert.match(lineOf(r.out, "signing key"), /^ {2}FAIL .*another key/);
    assert.match(lineOf(r.out, "bootseal-linux-x64"), /^ {2}FAIL .*signature does not verify/);
  });

  test("a tampered signature (a proxy double rewriting .sig) fails the artifact's line", async () => {
    const proxy = await rewritingProxy(healthy.url, (path, body, headers) => {
      if (path.endsWith(".sig")) {
        const b = Buffer.from(body);
        b[0] = (b[0] ?? 0) ^ 1;
        return { body: b, headers };
      }
      return { body, headers };
    });
    try {
      const r = await check(["--server", proxy.url, "--token-file", tokenFile()]);
      assert.equal(r.status, 50, r.out);
      assert.match(lineOf(r.out, "bootseal-linux-x64"), /^ {2}FAIL .*signature does not verify/);
    } finally {
      proxy.close();
    }
  });

  test("clock skew (a proxy double rewriting the Date header two hours ahead) fails the clock line", async () => {
    const proxy = await rewritingProxy(healthy.url, (_path, body, headers) => ({
      body,
      headers: { ...headers, date: new Date(Date.now() + 2 * 3600_000).toUTCString() },
    }));
    try {
      const r = await check(["--server", proxy.url, "--token-file", tokenFile()]);
      assert.equal(r.status, 50, r.out);
      assert.match(lineOf(r.out, "clock"), /^ {2}FAIL .*120m ahead of this one/);
    } finally {
      proxy.close();
    }
  });

  test("a malformed login binding: its own line fails", async () => {
    const file = join(dir, "bad-binding.yaml");
    writeFileSync(
      file,
      stringify({
        ...baseConfig(dir),
        machineAuth: {
          audience: "https://bootseal.example",
          bindings: [{ method: "aws-iam", match: { account: "1" }, machines: "Team_A/*" }],
        },
      }),
    );
    const r = await check(["--config", file]);
    assert.equal(r.status, 50, r.out);
    assert.match(lineOf(r.out, "login bindings"), /^ {2}FAIL .*machineAuth\.bindings\[0\]\.machines\[0\]/);
  });

  test("a creation rule whose key cannot wrap (a malformed age recipient) fails in the config check", async () => {
    const file = join(dir, "bad-key.yaml");
    writeFileSync(file, stringify({ ...baseConfig(dir), creation_rules: [{ age: "age1notarecipient" }] }));
    const r = await check(["--config", file]);
    assert.equal(r.status, 50, r.out);
    assert.ok(/^ {2}FAIL {2}(config|rule 1 age) /m.test(r.out), r.out);
  });

  test("a creation rule on the real OpenBao transit: the service's token wraps and unwraps (ok); a token without transit rights fails the line", async () => {
    const vault = { VAULT_ADDR: peer("VAULT_ADDR"), VAULT_TOKEN: peer("VAULT_TOKEN") };
    const file = join(dir, "transit.yaml");
    // The openbao peer makes transit/keys/bootseal-smoke at start.
    const rule = { hc_vault_transit_uri: `${vault.VAULT_ADDR}/v1/transit/keys/bootseal-smoke` };
    writeFileSync(file, stringify({ ...baseConfig(dir), creation_rules: [rule] }));
    const good = await check(["--config", file], vault);
    assert.equal(good.status, 0, good.out);
    assert.match(lineOf(good.out, "rule 1 hc_vault"), /^ {2}ok {2}.*wraps and unwraps a data key/);
    // A token with only OpenBao's default policy: no transit rights.
    const created = await fetch(`${vault.VAULT_ADDR}/v1/auth/token/create`, {
      method: "POST",
      headers: { "X-Vault-Token": vault.VAULT_TOKEN },
      body: JSON.stringify({ policies: ["default"], no_default_policy: false, ttl: "10m" }),
    });
    assert.equal(created.status, 200);
    const weak = ((await created.json()) as { auth: { client_token: string } }).auth.client_token;
    const bad = await check(["--config", file], { VAULT_ADDR: vault.VAULT_ADDR, VAULT_TOKEN: weak });
    assert.equal(bad.status, 50, bad.out);
    assert.match(lineOf(bad.out, "rule 1 hc_vault"), /^ {2}FAIL /);
    for (const secret of [vault.VAULT_TOKEN, weak])
      assert.ok(!bad.out.includes(secret), "no Vault token printed");
  });

  test("an unwritable store (a file store on a read-only bind mount) fails the store line", async () => {
    const ro = join(dir, "ro");
    mkdirSync(join(ro, "store"), { recursive: true });
    const probe = await runChild(
      "unshare",
      ["-m", "sh", "-c", `mount --bind -o ro ${ro}/store ${ro}/store`],
      {
        env: { PATH: process.env.PATH },
      },
    ).catch(() => null);
    // The suite runs as root in a container (scripts/test.sh): a missing mount namespace is a failure.
    assert.equal(probe?.status, 0, "unshare -m and a read-only bind mount (root in a container)");
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const file = join(ro, "serve.yaml");
    writeFileSync(
      file,
      stringify({ ...baseConfig(ro), store: `file://${join(ro, "store")}`, publicUrl: url }),
    );
    // The service's own mount namespace: the store directory is read-only for it alone.
    const child = spawn(
      "unshare",
      [
        "-m",
        "sh",
        "-c",
        `mount --bind -o ro "$0/store" "$0/store" && exec "$1" "$2" serve --config "$3" --listen 127.0.0.1:${port}`,
        ro,
        process.execPath,
        DIST,
        file,
      ],
      { stdio: "ignore", env: { PATH: process.env.PATH }, cwd: ro },
    );
    try {
      await until(
        "serve on a read-only store answers",
        async () => (await fetch(`${url}/healthz`).catch(() => null))?.status === 200,
        { tries: 300 },
      );
      const r = await check(["--server", url, "--token-file", tokenFile()]);
      assert.equal(r.status, 50, r.out);
      assert.match(lineOf(r.out, "store"), /^ {2}FAIL /);
      assert.match(lineOf(r.out, "rule 1 age"), /^ {2}ok/);
    } finally {
      await stopChild(child);
    }
  });
});

/**
 * A test double in front of the service: an HTTP proxy that hands every answer to `rewrite`
 * (a tampered `.sig`, a Date header far off) before passing it on.
 */
async function rewritingProxy(
  target: string,
  rewrite: (
    path: string,
    body: Buffer,
    headers: Record<string, string | string[] | undefined>,
  ) => { body: Buffer; headers: Record<string, string | string[] | undefined> },
): Promise<{ url: string; close(): void }> {
  const server = createServer((req, res) => {
    const upstream = request(
      new URL(req.url ?? "/", target),
      { method: req.method, headers: { ...req.headers, host: new URL(target).host } },
      (up) => {
        const chunks: Buffer[] = [];
        up.on("data", (c: Buffer) => chunks.push(c));
        up.on("end", () => {
          const out = rewrite(req.url ?? "/", Buffer.concat(chunks), { ...up.headers });
          const headers: Record<string, string | string[] | undefined> = {
            ...out.headers,
            "content-length": String(out.body.length),
          };
          delete headers["transfer-encoding"];
          res.writeHead(up.statusCode ?? 502, headers as Record<string, string>);
          res.end(out.body);
        });
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const address = server.address() as { port: number };
  return { url: `http://127.0.0.1:${address.port}`, close: () => server.close() };
}

describe("the clock line", () => {
  const now = Date.parse("2030-01-01T00:00:00Z");
  test("agrees within a second, warns above 5 s, fails above 60 s", () => {
    assert.equal(clockLine("s", new Date(now).toUTCString(), now).outcome, "ok");
    assert.equal(clockLine("s", new Date(now - 10_000).toUTCString(), now).outcome, "warn");
    const far = clockLine("s", new Date(now + 2 * 3600_000).toUTCString(), now);
    assert.equal(far.outcome, "fail");
    assert.match(far.message, /120m ahead/);
    assert.equal(clockLine("s", undefined, now).outcome, "warn");
  });
});
