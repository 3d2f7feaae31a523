/**
 * The TokenReview cache on its own, against a fake TokenReview endpoint (plain HTTP, counting
 * requests; the real API server is in controller-k8s.test.ts): positive reviews are reused
 * until cacheTtl or the token's exp, concurrent reviews of one token are shared, negative
 * ones are never kept, and a 5xx is KEY_UNAVAILABLE.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { kubernetesReviewer } from "../../src/service/controllers/token-review.ts";

const jwt = (claims: Record<string, unknown>, tag: string) =>
  `${Buffer.from('{"alg":"RS256"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.${tag}`;

test("fake TokenReview endpoint: the review cache is bounded by cacheTtl and exp, shared, positive only", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "bootseal-review-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "token"), "reviewer-credential\n");
  // The client refuses plain HTTP: a self-signed certificate for 127.0.0.1 (as mtls.test.ts).
  execFileSync(
    "openssl",
    ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"].concat([
      "-addext",
      "subjectAltName=IP:127.0.0.1",
      "-keyout",
      "key.pem",
      "-out",
      "cert.pem",
    ]),
    { cwd: dir, stdio: "ignore" },
  );
  const cert = readFileSync(join(dir, "cert.pem"), "utf8");
  const seen: string[] = [];
  let failing = false;
  const server = createServer({ cert, key: readFileSync(join(dir, "key.pem")) }, (req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString();
    });
    req.on("end", () => {
      assert.equal(req.headers.authorization, "Bearer reviewer-credential");
      const token = JSON.parse(body).spec.token as string;
      seen.push(token);
      if (failing) {
        res.writeHead(500, { "content-type": "application/json" }).end("{}");
        return;
      }
      const good = token.endsWith(".good");
      const status = good
        ? {
            authenticated: true,
            user: { username: "system:serviceaccount:ci:deployer" },
            audiences: ["bootseal"],
          }
        : { authenticated: false, error: "invalid" };
      res
        .writeHead(201, { "content-type": "application/json" })
        .end(JSON.stringify({ apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", status }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const { port } = server.address() as { port: number };
  let now = Date.parse("2026-01-01T00:00:00Z");
  const reviewer = kubernetesReviewer(
    {
      server: `https://127.0.0.1:${port}`,
      caPem: cert,
      tokenFile: join(dir, "token"),
      audiences: ["bootseal"],
      cacheTtlMs: 10_000,
    },
    () => now,
  );
  const sec = Math.floor(now / 1000);
  const long = jwt({ exp: sec + 3600 }, "good");

  const users = await Promise.all([1, 2, 3, 4, 5].map(() => reviewer.review(long)));
  assert.deepEqual(new Set(users.map((u) => u.username)), new Set(["system:serviceaccount:ci:deployer"]));
  assert.equal(seen.length, 1, "five concurrent reviews of one token: one request");
  now += 9_000;
  await reviewer.review(long);
  assert.equal(seen.length, 1, "within cacheTtl: from the cache");
  now += 2_000;
  await reviewer.review(long);
  assert.equal(seen.length, 2, "past cacheTtl: asked again");

  const soon = jwt({ exp: sec + 13 }, "good"); // expires 2 s after `now`
  await reviewer.review(soon);
  now += 3_000;
  await reviewer.review(soon);
  assert.equal(seen.filter((s) => s === soon).length, 2, "never reused past the token's exp");

  const bad = jwt({ exp: sec + 3600 }, "bad");
  for (let i = 0; i < 2; i++) await assert.rejects(reviewer.review(bad), { code: "UNAUTHORIZED" });
  assert.equal(seen.filter((s) => s === bad).length, 2, "negative answers are not kept");

  failing = true;
  const fresh = jwt({ exp: sec + 3600, n: 1 }, "good");
  await assert.rejects(reviewer.review(fresh), (err: Error & { code?: string }) => {
    assert.equal(err.code, "KEY_UNAVAILABLE");
    assert.doesNotMatch(err.message, /good|reviewer-credential/);
    return true;
  });
  await reviewer.review(long); // still cached from before: served while the API server fails
});
