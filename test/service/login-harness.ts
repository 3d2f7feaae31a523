/**
 * What the end-to-end machine login tests share (login-gcp, login-azure): the service app
 * with a machine's age key and a machine-auth configuration, a controller's publish and status
 * read, the real `bootseal fetch --auth METHOD` run as its own process, and the contract every
 * cloud's login meets (cloudLoginContract): an allowed machine logs in, fetches, writes and
 * reports; one bound to another machine is refused 403; a token for another audience 401; the
 * issuer's keys down 503, retried to the deadline.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import type { MachineAuthConfig } from "../../src/config/machine-auth.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import type { CloudAuthMethod } from "../../src/machine/identity-login.ts";
import { buildApp } from "../../src/service/app.ts";
import { type JwksServer, makeTestKey, startJwksServer, type TestKey } from "../fakes/jwks-server.ts";
import { type AgeKey, ageKey, machineEnv, run, tempDir } from "../fetcher/helpers.ts";
import { freePort } from "../helpers/ports.ts";
import { appConfig } from "./app-config.ts";

export const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** A service with machine login; its one creation rule seals to `recipient` (an age recipient), or `rules` as given. */
export function loginService(
  recipient: string,
  machineAuth: MachineAuthConfig,
  rules?: string,
): FastifyInstance {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(rules ?? `creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      rateLimit: { authFailuresPerMinute: 100 },
      machineAuth,
    }),
  });
}

export async function publishAs(
  svc: FastifyInstance,
  machine: string,
  payload: string,
  headers: Record<string, string> = {},
): Promise<void> {
  const res = await svc.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain", ...headers },
    payload,
  });
  assert.equal(res.statusCode, 201, res.body);
}

export async function phasesOf(svc: FastifyInstance, machine: string): Promise<string[]> {
  const res = await svc.inject({
    method: "GET",
    url: `/v1/machines/${machine}/status`,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { history: { phase: string }[] }).history.map((h) => h.phase);
}

/** `bootseal fetch --auth METHOD --out /etc/bootseal/secret.txt` into a fresh root under `dir`. */
export async function fetchWithLogin(o: {
  readonly dir: string;
  readonly base: string;
  readonly machine: string;
  readonly method: CloudAuthMethod;
  readonly serverId: string;
  readonly deadline?: string | undefined;
  readonly extra?: readonly string[] | undefined;
  readonly env: Record<string, string>;
}) {
  const root = join(o.dir, `root-${o.machine.replace("/", "-")}-${Math.random().toString(36).slice(2, 8)}`);
  await mkdir(root);
  const r = await run(
    [
      "fetch",
      "--from",
      `${o.base}/v1/machines/${o.machine}/config`,
      "--auth",
      o.method,
      "--server-id",
      o.serverId,
      ...(o.extra ?? []),
      "--out",
      "/etc/bootseal/secret.txt",
      "--root",
      root,
      "--deadline",
      o.deadline ?? "60s",
    ],
    machineEnv(o.env),
  );
  return { r, root };
}

/** A cloud's fake metadata endpoint: what it was asked, and its end. */
export interface MetadataFake {
  readonly requests: readonly { readonly query: URLSearchParams }[];
  close(): Promise<void>;
}

/** One cloud's login, as the contract drives it (login-gcp.test.ts, login-azure.test.ts). */
export interface CloudLogin<Fake extends MetadataFake> {
  readonly method: CloudAuthMethod;
  /** Test names begin with it: `gcp (fake metadata server, fake JWKS)`. */
  readonly label: string;
  /** The label of the case where the JWKS is down: `gcp (fake metadata server)`. */
  readonly labelJwksDown: string;
  readonly audience: string;
  readonly kid: string;
  readonly jwks: Parameters<typeof startJwksServer>[1];
  /** The machine-auth configuration with these JWKS and extra cloud settings. */
  machineAuth(jwksUrl: string, cloud?: Record<string, unknown>): MachineAuthConfig;
  /** `web` (web-1, bound to prod/*) and `db` (db-1, bound to prod/db only). */
  startFakes(signing: TestKey): Promise<{ web: Fake; db: Fake }>;
  /** The fetcher's environment that points it at the fake. */
  env(fake: Fake): Record<string, string>;
  /** What the fetcher asked the fake for (its last request), checked. */
  checkAsked(asked: Fake["requests"][number] | undefined): void;
  /** A credential straight from the fake, for this audience. */
  credentialFrom(fake: Fake, audience: string): Promise<string>;
  /** The JWKS URL path of a port where nothing listens. */
  readonly closedJwksPath: string;
  /** What a machine of this cloud is called in the test names. */
  readonly machineWord: "instance" | "VM";
  /** What the machine's own token is called in the "not logged" message. */
  readonly tokenName: string;
  /** stderr of a machine bound to another machine (db for prod/web-2). */
  readonly notBound: RegExp;
  /** stderr of a token for another audience. */
  readonly wrongAudience: RegExp;
}

/** The contract's running service and fakes, for a cloud's own cases. */
export interface LoginFixture<Fake extends MetadataFake> {
  readonly dir: string;
  readonly key: AgeKey;
  readonly jwks: JwksServer;
  readonly web: Fake;
  readonly db: Fake;
  readonly app: FastifyInstance;
  serviceWith(jwksUrl: string, cloud?: Record<string, unknown>): FastifyInstance;
  publish(machine: string, payload: string, svc?: FastifyInstance): Promise<void>;
  phases(machine: string, svc?: FastifyInstance): Promise<string[]>;
  fetchAs(
    machine: string,
    fake: Fake,
    options?: { base?: string; serverId?: string; deadline?: string; extra?: string[] },
  ): Promise<{ r: Awaited<ReturnType<typeof run>>; root: string }>;
}

/** The four cases every cloud's login meets; returns the fixture (set once `before` ran). */
export function cloudLoginContract<Fake extends MetadataFake>(cloud: CloudLogin<Fake>): LoginFixture<Fake> {
  let dir: { path: string; remove: () => Promise<void> };
  let key: AgeKey;
  let jwks: JwksServer;
  let fakes: { web: Fake; db: Fake };
  let app: FastifyInstance;
  let url: string;

  const serviceWith = (jwksUrl: string, extra: Record<string, unknown> = {}) =>
    loginService(key.recipient, cloud.machineAuth(jwksUrl, extra));
  const fixture: LoginFixture<Fake> = {
    get dir() {
      return dir.path;
    },
    get key() {
      return key;
    },
    get jwks() {
      return jwks;
    },
    get web() {
      return fakes.web;
    },
    get db() {
      return fakes.db;
    },
    get app() {
      return app;
    },
    serviceWith,
    publish: (machine, payload, svc = app) => publishAs(svc, machine, payload),
    phases: (machine, svc = app) => phasesOf(svc, machine),
    fetchAs: (machine, fake, options = {}) =>
      fetchWithLogin({
        dir: dir.path,
        base: options.base ?? url,
        machine,
        method: cloud.method,
        serverId: options.serverId ?? cloud.audience,
        deadline: options.deadline,
        extra: options.extra,
        env: { ...cloud.env(fake), SOPS_AGE_KEY_FILE: key.file },
      }),
  };
  const { publish, phases, fetchAs } = fixture;

  before(async () => {
    dir = await tempDir(`login-${cloud.method}`);
    key = await ageKey(dir.path, "machine");
    const signing = await makeTestKey(cloud.kid);
    jwks = await startJwksServer([signing], cloud.jwks);
    fakes = await cloud.startFakes(signing);
    app = serviceWith(jwks.url);
    url = await app.listen({ host: "127.0.0.1", port: 0 });
  });

  after(async () => {
    await app?.close();
    await Promise.all([jwks?.close(), fakes?.web.close(), fakes?.db.close()]);
    await dir?.remove();
  });

  const { label, method, machineWord } = cloud;
  const aMachine = `${/^[aeiou]/i.test(machineWord) ? "an" : "a"} ${machineWord}`;

  test(`${label}: an allowed ${machineWord} logs in, fetches, writes and reports`, async () => {
    await publish("prod/web-1", "the web-1 secret\n");
    const before = fakes.web.requests.length;
    const { r, root } = await fetchAs("prod/web-1", fakes.web);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "the web-1 secret\n");
    assert.match(r.stderr, new RegExp(`/v1/machines/prod/web-1/login \\(${method} login\\): ok`));
    assert.ok(!/bst\.|eyJ/.test(r.stderr), `neither the token nor the ${cloud.tokenName} is logged`);
    assert.deepEqual(await phases("prod/web-1"), [
      "published",
      "fetching",
      "decrypted",
      "written",
      "succeeded",
    ]);
    cloud.checkAsked(fakes.web.requests.slice(before).at(-1));
  });

  test(`${label}: ${aMachine} bound to another machine is refused 403`, async () => {
    await publish("prod/web-2", "the web-2 secret\n");
    const { r, root } = await fetchAs("prod/web-2", fakes.db);
    assert.equal(r.code, EXIT_CODES.FORBIDDEN, r.stderr);
    assert.match(r.stderr, cloud.notBound);
    assert.deepEqual(await readdir(root), []);
    assert.deepEqual(await phases("prod/web-2"), ["published"]);
  });

  test(`${label}: a token for another audience is refused 401`, async () => {
    await publish("prod/web-3", "the web-3 secret\n");
    const { r, root } = await fetchAs("prod/web-3", fakes.web, { serverId: "https://another-bootseal.test" });
    assert.equal(r.code, EXIT_CODES.UNAUTHORIZED, r.stderr);
    assert.match(r.stderr, cloud.wrongAudience);
    assert.deepEqual(await readdir(root), []);
    assert.deepEqual(await phases("prod/web-3"), ["published"]);
  });

  test(`${cloud.labelJwksDown}: JWKS down is 503, retried until the deadline, then KEY_UNAVAILABLE`, async () => {
    const closed = `http://127.0.0.1:${await freePort()}${cloud.closedJwksPath}`;
    const down = serviceWith(closed);
    try {
      const downUrl = await down.listen({ host: "127.0.0.1", port: 0 });
      await publish("prod/web-4", "the web-4 secret\n", down);
      const credential = await cloud.credentialFrom(fakes.web, cloud.audience);
      const res = await down.inject({
        method: "POST",
        url: "/v1/machines/prod/web-4/login",
        payload: { method, credential },
      });
      assert.equal(res.statusCode, 503, res.body);
      assert.equal(res.json().code, "KEY_UNAVAILABLE");
      const { r, root } = await fetchAs("prod/web-4", fakes.web, { base: downUrl, deadline: "12s" });
      assert.equal(r.code, EXIT_CODES.KEY_UNAVAILABLE, r.stderr);
      assert.match(r.stderr, /login\): KEY_UNAVAILABLE: .*cannot get the signing keys.*retrying in/);
      assert.match(r.stderr, /gave up after [2-9] attempts/);
      assert.deepEqual(await readdir(root), []);
    } finally {
      await down.close();
    }
  });

  return fixture;
}
