/**
 * Machine login with a SPIFFE JWT-SVID, end to end: the real `bootseal fetch --auth spiffe`
 * (its own process) reads a JWT-SVID minted by the spiffe peer (go-spiffe and go-jose; not
 * SPIRE) from --spiffe-jwt-file, logs in at the real service app on loopback, which fetches
 * the trust bundle from the peer's https_web bundle endpoint (go-spiffe's federation handler).
 * An allowed machine logs in, fetches, writes, reports; one bound to another machine is 403;
 * a JWT-SVID for another audience, an expired one, one of an untrusted trust domain are 401.
 */
import assert from "node:assert/strict";
import { chmod, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { BootsealError } from "../../src/errors.ts";
import { identityVerifiers, loginFlags } from "../../src/service/identity/index.ts";
import { type AgeKey, ageKey, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { mint, newDomain, webEndpoint } from "../helpers/spiffe-issuer.ts";
import { fetchWithLogin, loginService, phasesOf, publishAs } from "./login-harness.ts";

const AUDIENCE = "https://bootseal-spiffe.login.test";
const T = { timeout: 90_000 };

function machineAuth(td: string) {
  return parseMachineAuth(
    {
      audience: AUDIENCE,
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      spiffe: {
        trustDomains: [
          {
            name: td,
            bundleEndpoint: {
              url: webEndpoint(td),
              profile: "https_web",
              caFile: peer("SPIFFE_WEB_CA_FILE"),
            },
          },
        ],
        cooldown: 0,
      },
      bindings: [
        { method: "spiffe", match: { id: `spiffe://${td}/node/web-*` }, machines: "prod/*" },
        { method: "spiffe", match: { trustDomain: td, path: "/node/db-1" }, machines: "prod/db" },
      ],
    },
    undefined,
  );
}

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let td: string;
let app: FastifyInstance;
let url: string;

before(async () => {
  dir = await tempDir("login-spiffe");
  key = await ageKey(dir.path, "machine");
  ({ td } = await newDomain("login"));
  app = loginService(key.recipient, machineAuth(td));
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});

after(async () => {
  await app?.close();
  await dir?.remove();
});

/** A JWT-SVID in an owner-only file, as the machine's SPIFFE tooling would leave it. */
async function svidFile(token: string): Promise<string> {
  const path = join(dir.path, `svid-${Math.random().toString(36).slice(2, 8)}`);
  await writeFile(path, `${token}\n`);
  await chmod(path, 0o600);
  return path;
}

async function fetchWith(machine: string, token: string, deadline = "30s") {
  return fetchWithLogin({
    dir: dir.path,
    base: url,
    machine,
    method: "spiffe",
    serverId: AUDIENCE,
    deadline,
    extra: ["--spiffe-jwt-file", await svidFile(token)],
    env: { SOPS_AGE_KEY_FILE: key.file },
  });
}

test(
  "spiffe (go-spiffe peer): an allowed machine logs in with its JWT-SVID, fetches, writes and reports",
  T,
  async () => {
    await publishAs(app, "prod/web-1", "the web-1 secret\n");
    const token = await mint({ td, sub: `spiffe://${td}/node/web-1`, aud: [AUDIENCE] });
    const { r, root } = await fetchWith("prod/web-1", token);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "the web-1 secret\n");
    assert.match(r.stderr, /\/v1\/machines\/prod\/web-1\/login \(spiffe login\): ok/);
    assert.ok(!/bst\.|eyJ/.test(r.stderr), "neither the bootstrap token nor the JWT-SVID is logged");
    assert.deepEqual(await phasesOf(app, "prod/web-1"), [
      "published",
      "fetching",
      "decrypted",
      "written",
      "succeeded",
    ]);
  },
);

test("spiffe (go-spiffe peer): a SPIFFE ID bound to another machine is refused 403", T, async () => {
  await publishAs(app, "prod/web-2", "the web-2 secret\n");
  const token = await mint({ td, sub: `spiffe://${td}/node/db-1`, aud: [AUDIENCE] });
  const { r, root } = await fetchWith("prod/web-2", token);
  assert.equal(r.code, EXIT_CODES.FORBIDDEN, r.stderr);
  assert.match(
    r.stderr,
    new RegExp(`spiffe://${td.replace(/\./g, "\\.")}/node/db-1 is not bound to machine prod/web-2`),
  );
  assert.deepEqual(await readdir(root), []);
  assert.deepEqual(await phasesOf(app, "prod/web-2"), ["published"]);
});

test(
  "spiffe (go-spiffe peer): another audience, expired, an untrusted trust domain are refused 401",
  T,
  async () => {
    await publishAs(app, "prod/web-3", "the web-3 secret\n");
    const other = await newDomain("untrusted");
    const cases: [string, RegExp][] = [
      [
        await mint({ td, sub: `spiffe://${td}/node/web-3`, aud: ["https://another-bootseal.test"] }),
        /claim "aud" does not verify/,
      ],
      [
        await mint({ td, sub: `spiffe://${td}/node/web-3`, aud: [AUDIENCE], iatOffset: -900, ttl: 300 }),
        /expired/,
      ],
      [
        await mint({ td: other.td, sub: `spiffe://${other.td}/node/web-3`, aud: [AUDIENCE] }),
        /trust domain is not one of machineAuth\.spiffe\.trustDomains/,
      ],
    ];
    for (const [token, text] of cases) {
      const { r, root } = await fetchWith("prod/web-3", token);
      assert.equal(r.code, EXIT_CODES.UNAUTHORIZED, r.stderr);
      assert.match(r.stderr, text);
      assert.deepEqual(await readdir(root), []);
    }
    assert.deepEqual(await phasesOf(app, "prod/web-3"), ["published"]);
  },
);

test("spiffe: the stub passes the method and the audience; a spiffe binding needs machineAuth.spiffe", () => {
  const config = machineAuth(td);
  assert.deepEqual(loginFlags(config, "spiffe"), ["--auth", "spiffe", "--server-id", AUDIENCE]);
  assert.ok(identityVerifiers(config).has("spiffe"));
  const bare = parseMachineAuth({ tokenTtl: "1h", aws: { region: "us-east-1" }, bindings: [] }, undefined);
  assert.equal(identityVerifiers(bare).has("spiffe"), false);
  assert.throws(
    () =>
      parseMachineAuth(
        {
          audience: AUDIENCE,
          tokenTtl: "1h",
          aws: { region: "us-east-1" },
          bindings: [{ method: "spiffe", match: { trustDomain: td }, machines: "prod/*" }],
        },
        undefined,
      ),
    (e: unknown) =>
      e instanceof BootsealError && e.code === "USAGE" && /needs machineAuth\.spiffe/.test(e.message),
  );
});
