/**
 * What the end-to-end machine login tests share (login-gcp, login-azure): the service app
 * with a machine's age key and a machine-auth configuration, a controller's publish and status
 * read, and the real `bootseal fetch --auth METHOD` run as its own process.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { MemoryStore } from "../../providers/stores/memory.ts";
import type { MachineAuthConfig } from "../../src/config/machine-auth.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import type { CloudAuthMethod } from "../../src/machine/identity-login.ts";
import { buildApp } from "../../src/service/app.ts";
import { machineEnv, run } from "../fetcher/helpers.ts";
import { appConfig } from "./app-config.ts";

export const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

/** The service app: one age rule (the machine's key), an admin controller, this login config. */
export function loginService(recipient: string, machineAuth: MachineAuthConfig): FastifyInstance {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${recipient}\n`, "t"),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      rateLimit: { authFailuresPerMinute: 100 },
      machineAuth,
    }),
  });
}

export async function publishAs(svc: FastifyInstance, machine: string, payload: string): Promise<void> {
  const res = await svc.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
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
