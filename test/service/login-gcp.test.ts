/**
 * Machine login with GCP, end to end: the real `bootseal fetch --auth gcp` (its own process),
 * whose instance identity token comes from a FAKE Compute Engine metadata server reached through
 * GCE_METADATA_HOST (test/fakes/gce-metadata.ts), logs in at the real service app on loopback,
 * which verifies the token against a FAKE Google JWKS endpoint (test/fakes/jwks-server.ts), both
 * signing with a key made for this run (no real Google can run here).
 *
 * Allowed instance: login, fetch, write, report succeeded. An instance bound to another
 * machine: 403. A token for another audience: 401. JWKS down: 503, retried to the deadline.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { identityVerifiers, loginFlags } from "../../src/service/identity/index.ts";
import {
  EXAMPLE_INSTANCE,
  type GceMetadataFake,
  IDENTITY_PATH,
  startGceMetadata,
} from "../fakes/gce-metadata.ts";
import { type JwksServer, makeTestKey, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { type AgeKey, ageKey, tempDir } from "../fetcher/helpers.ts";
import { freePort } from "../helpers/ports.ts";
import { fetchWithLogin, loginService, phasesOf, publishAs } from "./login-harness.ts";

const AUDIENCE = "https://bootseal-gcp.login.test";
const _sha = (s: string) => createHash("sha256").update(s).digest("hex");

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let signing: TestKey;
let jwks: JwksServer;
let web: GceMetadataFake;
let db: GceMetadataFake;
let app: FastifyInstance;
let url: string;

function machineAuth(jwksUrl: string) {
  return parseMachineAuth(
    {
      audience: AUDIENCE,
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      gcp: { jwksUrl, cooldown: 0 },
      bindings: [
        {
          method: "gcp",
          match: { project: EXAMPLE_INSTANCE.projectId, instanceName: "web-*" },
          machines: "prod/*",
        },
        {
          method: "gcp",
          match: { project: EXAMPLE_INSTANCE.projectId, instanceName: "db-1" },
          machines: "prod/db",
        },
      ],
    },
    undefined,
  );
}

function serviceWith(jwksUrl: string): FastifyInstance {
  return loginService(key.recipient, machineAuth(jwksUrl));
}

before(async () => {
  dir = await tempDir("login-gcp");
  key = await ageKey(dir.path, "machine");
  signing = await makeTestKey("gcp-test-key-1");
  jwks = await startJwksServer([signing], { shape: "google" });
  web = await startGceMetadata(signing, EXAMPLE_INSTANCE);
  db = await startGceMetadata(signing, {
    ...EXAMPLE_INSTANCE,
    instanceName: "db-1",
    instanceId: "5340508760561261531",
  });
  app = serviceWith(jwks.url);
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});

after(async () => {
  await app?.close();
  await Promise.all([jwks?.close(), web?.close(), db?.close()]);
  await dir?.remove();
});

const publish = (machine: string, payload: string, svc: FastifyInstance = app) =>
  publishAs(svc, machine, payload);

const phases = (machine: string, svc: FastifyInstance = app) => phasesOf(svc, machine);

async function fetchAs(
  machine: string,
  metadata: GceMetadataFake,
  options: { base?: string; serverId?: string; deadline?: string } = {},
) {
  return fetchWithLogin({
    dir: dir.path,
    base: options.base ?? url,
    machine,
    method: "gcp",
    serverId: options.serverId ?? AUDIENCE,
    deadline: options.deadline,
    env: { GCE_METADATA_HOST: metadata.host, SOPS_AGE_KEY_FILE: key.file },
  });
}

test("gcp (fake metadata server, fake JWKS): an allowed instance logs in, fetches, writes and reports", async () => {
  await publish("prod/web-1", "the web-1 secret\n");
  const before = web.requests.length;
  const { r, root } = await fetchAs("prod/web-1", web);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "the web-1 secret\n");
  assert.match(r.stderr, /\/v1\/machines\/prod\/web-1\/login \(gcp login\): ok/);
  assert.ok(!/bst\.|eyJ/.test(r.stderr), "neither the token nor the identity token is logged");
  assert.deepEqual(await phases("prod/web-1"), [
    "published",
    "fetching",
    "decrypted",
    "written",
    "succeeded",
  ]);
  // The fetcher asked for a full-format token for this service's audience.
  const asked = web.requests.slice(before).at(-1);
  assert.equal(asked?.query.get("audience"), AUDIENCE);
  assert.equal(asked?.query.get("format"), "full");
  assert.equal(asked?.headers["metadata-flavor"], "Google");
});

test("gcp (fake metadata server, fake JWKS): an instance bound to another machine is refused 403", async () => {
  await publish("prod/web-2", "the web-2 secret\n");
  const { r, root } = await fetchAs("prod/web-2", db);
  assert.equal(r.code, EXIT_CODES.FORBIDDEN, r.stderr);
  assert.match(
    r.stderr,
    /projects\/bootseal-test-1\/zones\/europe-west1-b\/instances\/db-1 is not bound to machine prod\/web-2/,
  );
  assert.deepEqual(await readdir(root), []);
  assert.deepEqual(await phases("prod/web-2"), ["published"]);
});

test("gcp (fake metadata server, fake JWKS): a token for another audience is refused 401", async () => {
  await publish("prod/web-3", "the web-3 secret\n");
  const { r, root } = await fetchAs("prod/web-3", web, { serverId: "https://another-bootseal.test" });
  assert.equal(r.code, EXIT_CODES.UNAUTHORIZED, r.stderr);
  assert.match(r.stderr, /gcp identity token: claim "aud" does not verify/);
  assert.deepEqual(await readdir(root), []);
  assert.deepEqual(await phases("prod/web-3"), ["published"]);
});

test("gcp (fake metadata server): JWKS down is 503, retried until the deadline, then KEY_UNAVAILABLE", async () => {
  const closed = `http://127.0.0.1:${await freePort()}/oauth2/v3/certs`;
  const down = serviceWith(closed);
  try {
    const downUrl = await down.listen({ host: "127.0.0.1", port: 0 });
    await publish("prod/web-4", "the web-4 secret\n", down);
    const token = await fetch(
      `http://${web.host}${IDENTITY_PATH}?audience=${encodeURIComponent(AUDIENCE)}&format=full`,
      { headers: { "metadata-flavor": "Google" } },
    ).then((res) => res.text());
    const res = await down.inject({
      method: "POST",
      url: "/v1/machines/prod/web-4/login",
      payload: { method: "gcp", credential: token },
    });
    assert.equal(res.statusCode, 503, res.body);
    assert.equal(res.json().code, "KEY_UNAVAILABLE");
    const { r, root } = await fetchAs("prod/web-4", web, { base: downUrl, deadline: "12s" });
    assert.equal(r.code, EXIT_CODES.KEY_UNAVAILABLE, r.stderr);
    assert.match(r.stderr, /login\): KEY_UNAVAILABLE: .*cannot get the signing keys.*retrying in/);
    assert.match(r.stderr, /gave up after [2-9] attempts/);
    assert.deepEqual(await readdir(root), []);
  } finally {
    await down.close();
  }
});

test("gcp: the stub passes only the method and the audience; GCP verifies without configuration, Azure needs a tenant", () => {
  const config = machineAuth("https://keys.example/certs");
  assert.deepEqual(loginFlags(config, "gcp"), ["--auth", "gcp", "--server-id", AUDIENCE]);
  const bare = parseMachineAuth({ tokenTtl: "1h", aws: { region: "us-east-1" }, bindings: [] }, undefined);
  assert.equal(bare.gcp.timeoutMs, 5_000);
  assert.equal(bare.azure, undefined);
  assert.deepEqual([...identityVerifiers(bare).keys()].sort(), ["aws-iam", "gcp"]);
});
