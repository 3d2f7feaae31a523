/**
 * `bootseal fetch --auth aws-iam` end to end: the real fetcher, each run its own process with
 * a role's temporary credentials in its environment (the SDK's default chain picks them up),
 * against the real service app on loopback whose STS is moto's. The machine has no bootstrap
 * token: it logs in once, fetches, decrypts with its age key, writes, and reports with the
 * token the login gave it. Another role is refused (403, nothing written, nothing reported),
 * and --auth needs a service URL.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { assumeRole, createRole, MOTO_ACCOUNT, MOTO_REGION, motoEndpoint } from "../helpers/moto-iam.ts";
import { uniqueName } from "../helpers/peers.ts";
import { freePort } from "../helpers/ports.ts";
import { appConfig } from "../service/app-config.ts";
import { type AgeKey, ageKey, machineEnv, run, tempDir } from "./helpers.ts";

const AUDIENCE = "bootseal-e2e-login";
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

let dir: { path: string; remove: () => Promise<void> };
let key: AgeKey;
let app: FastifyInstance;
let url: string;
let allowed: Record<string, string>;
let other: Record<string, string>;
let roleArnText: string;

/** The service app with its STS at `stsEndpoint`. */
function serviceWith(stsEndpoint: string): FastifyInstance {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${key.recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      machineAuth: parseMachineAuth(
        {
          audience: AUDIENCE,
          tokenTtl: "1h",
          aws: { stsEndpoint, region: MOTO_REGION },
          bindings: [{ method: "aws-iam", match: { arn: roleArnText }, machines: "prod/*" }],
        },
        undefined,
      ),
    }),
  });
}

function awsEnv(c: { accessKeyId: string; secretAccessKey: string; sessionToken?: string }) {
  return {
    AWS_ACCESS_KEY_ID: c.accessKeyId,
    AWS_SECRET_ACCESS_KEY: c.secretAccessKey,
    AWS_SESSION_TOKEN: c.sessionToken as string,
    // No shared config or instance metadata to fall back on: the environment is the chain.
    AWS_EC2_METADATA_DISABLED: "true",
  };
}

before(async () => {
  dir = await tempDir("auth-aws");
  key = await ageKey(dir.path, "machine");
  const role = uniqueName("fetch-role");
  const stranger = uniqueName("stranger-role");
  allowed = awsEnv(await assumeRole(await createRole(role), "boot"));
  other = awsEnv(await assumeRole(await createRole(stranger), "boot"));
  roleArnText = `arn:aws:iam::${MOTO_ACCOUNT}:role/${role}`;
  app = serviceWith(motoEndpoint());
  url = await app.listen({ host: "127.0.0.1", port: 0 });
});

after(async () => {
  await app?.close();
  await dir?.remove();
});

async function publish(machine: string, payload: string, svc: FastifyInstance = app): Promise<void> {
  const res = await svc.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
    payload,
  });
  assert.equal(res.statusCode, 201, res.body);
}

async function phases(machine: string): Promise<string[]> {
  const res = await app.inject({
    method: "GET",
    url: `/v1/machines/${machine}/status`,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { history: { phase: string }[] }).history.map((h) => h.phase);
}

async function fetchAs(
  machine: string,
  env: Record<string, string>,
  from = `${url}/v1/machines/${machine}/config`,
  extra: { sts?: string; deadline?: string } = {},
) {
  const root = join(dir.path, `root-${machine.replace("/", "-")}-${Math.random().toString(36).slice(2, 8)}`);
  await mkdir(root);
  const r = await run(
    [
      "fetch",
      "--from",
      from,
      "--auth",
      "aws-iam",
      "--server-id",
      AUDIENCE,
      "--aws-sts-endpoint",
      extra.sts ?? motoEndpoint(),
      "--aws-sts-region",
      MOTO_REGION,
      "--out",
      "/etc/bootseal/secret.txt",
      "--root",
      root,
      "--deadline",
      extra.deadline ?? "60s",
    ],
    machineEnv({ ...env, SOPS_AGE_KEY_FILE: key.file }),
  );
  return { r, root };
}

test("an allowed role logs in, fetches, writes and reports succeeded with no bootstrap token", async () => {
  await publish("prod/node-1", "the node-1 secret\n");
  const { r, root } = await fetchAs("prod/node-1", allowed);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "the node-1 secret\n");
  assert.match(r.stderr, /\/v1\/machines\/prod\/node-1\/login \(aws-iam login\): ok/);
  assert.ok(!r.stderr.includes(allowed.AWS_SECRET_ACCESS_KEY as string));
  assert.ok(!/bst\./.test(r.stderr), "the minted token is never logged");
  assert.deepEqual(await phases("prod/node-1"), [
    "published",
    "fetching",
    "decrypted",
    "written",
    "succeeded",
  ]);

  // The next boot: the marker makes it a no-op, no login at all.
  const again = await run(
    [
      "fetch",
      "--from",
      `${url}/v1/machines/prod/node-1/config`,
      "--auth",
      "aws-iam",
      "--out",
      "/x",
      "--root",
      root,
    ],
    machineEnv(allowed),
  );
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /already bootstrapped/);
  assert.doesNotMatch(again.stderr, /login/);
});

test("another role is refused: exit FORBIDDEN, nothing written, nothing reported", async () => {
  await publish("prod/node-2", "the node-2 secret\n");
  const { r, root } = await fetchAs("prod/node-2", other);
  assert.equal(r.code, EXIT_CODES.FORBIDDEN, r.stderr);
  assert.match(r.stderr, /not bound to machine prod\/node-2/);
  assert.deepEqual(await readdir(root), []);
  assert.deepEqual(await phases("prod/node-2"), ["published"]);
});

test("--auth aws-iam with a store source is a usage error", async () => {
  const { r } = await fetchAs("prod/node-3", allowed, "file:///nonexistent/configs/prod/node-3");
  assert.equal(r.code, EXIT_CODES.USAGE, r.stderr);
  assert.match(r.stderr, /--auth aws-iam logs in at the service/);
});

test("STS down: the login is retried (503) until the deadline, then KEY_UNAVAILABLE, nothing written", async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const down = serviceWith(closed);
  try {
    const downUrl = await down.listen({ host: "127.0.0.1", port: 0 });
    await publish("prod/node-4", "the node-4 secret\n", down);
    const { r, root } = await fetchAs("prod/node-4", allowed, `${downUrl}/v1/machines/prod/node-4/config`, {
      sts: closed,
      // The service answers 503 with Retry-After: 5, which the fetcher honours.
      deadline: "12s",
    });
    assert.equal(r.code, EXIT_CODES.KEY_UNAVAILABLE, r.stderr);
    assert.match(r.stderr, /login\): KEY_UNAVAILABLE: .*AWS STS is unavailable.*retrying in/);
    assert.match(r.stderr, /gave up after [2-9] attempts/);
    assert.deepEqual(await readdir(root), []);
  } finally {
    await down.close();
  }
});
