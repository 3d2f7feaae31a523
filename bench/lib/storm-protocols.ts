/**
 * The requests of each boot storm step, per kind of target: bootseal's machine API (and the
 * no-op server, which answers the same routes) and OpenBao's KV v2 with per-machine tokens.
 */
import { randomBytes } from "node:crypto";
import { BAO_MOUNT, MACHINE_ROLE, machinePolicy } from "./openbao.ts";
import type { Answer, HttpClient, Machine, Protocol } from "./storm-client.ts";

export const NAMESPACE = "storm";

/** A cloud-config of exactly `bytes` bytes naming the machine (random filler, made once). */
export function payloadMaker(bytes: number): (name: string) => string {
  const filler = randomBytes(bytes).toString("base64");
  return (name) => {
    const head = `#cloud-config\n# machine ${name}\nwrite_files:\n  - path: /etc/storm/blob\n    content: `;
    const body = `${head}${filler.slice(0, Math.max(0, bytes - head.length - 1))}\n`;
    if (Buffer.byteLength(body) !== bytes)
      throw new Error(`payload of ${bytes} bytes: too small for its header`);
    return body;
  };
}

const json = (a: Answer): Record<string, unknown> =>
  JSON.parse(a.body.toString("utf8")) as Record<string, unknown>;

/** Whether a fetched body is a SOPS document with encrypted data and a MAC (as the fetcher gets it). */
export function sopsDocumentProblem(a: Answer): string | undefined {
  let doc: Record<string, unknown>;
  try {
    doc = json(a);
  } catch {
    return `fetch: not JSON (content-type ${a.headers["content-type"]})`;
  }
  const sops = doc.sops as Record<string, unknown> | undefined;
  if (!sops || typeof sops.mac !== "string" || !sops.mac.startsWith("ENC[AES256_GCM,"))
    return "fetch: no SOPS MAC";
  if (!Array.isArray(sops.age) || sops.age.length === 0) return "fetch: no age recipient stanza";
  const values = Object.entries(doc).filter(([k]) => k !== "sops");
  if (values.length === 0) return "fetch: a SOPS document without data";
  for (const [k, v] of values) {
    if (typeof v !== "string" || !v.startsWith("ENC[AES256_GCM,"))
      return `fetch: value ${k} is not encrypted`;
  }
  return undefined;
}

/** bootseal's API; `verify` false for the no-op server (its fixed body is no document). */
export function bootsealProtocol(
  controller: string,
  payload: (name: string) => string,
  verify: boolean,
): Protocol {
  const path = (m: Machine, what: string) => `/v1/machines/${NAMESPACE}/${m.name}/${what}`;
  return {
    async publish(c, m) {
      const a = await c.call({
        affinity: m.name,
        method: "PUT",
        path: path(m, "config"),
        headers: { authorization: `Bearer ${controller}`, "content-type": "application/octet-stream" },
        body: payload(m.name),
      });
      const token = json(a).bootstrapToken;
      if (typeof token !== "string") throw new Error("publish: no bootstrapToken in the answer");
      return token;
    },
    fetch: (c, m, token) =>
      c.call({
        affinity: m.name,
        method: "GET",
        path: path(m, "config"),
        headers: { authorization: `Bearer ${token}` },
      }),
    async status(c, m, token, phase) {
      await c.call({
        affinity: m.name,
        method: "POST",
        path: path(m, "status"),
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ phase, message: "boot storm" }),
      });
    },
    verify: (_m, a) => (verify ? sopsDocumentProblem(a) : undefined),
  };
}

export type BaoPolicy = "template" | "per-machine";

/**
 * OpenBao: publish = write the secret, then create the machine's token: with --bao-policy
 * template (default) one request to the machine role naming the machine as the token's entity
 * alias (the templated policy then grants that machine's paths only); with per-machine, write
 * the machine's own ACL policy and create a token with only that policy. Both: TTL 1 h like
 * bootseal's, `uses` 0 = no use count. fetch = read the secret with that token; status = a
 * KV v2 write to the machine's status path with that token.
 */
export function openBaoProtocol(
  controller: string,
  payload: (name: string) => string,
  uses: number,
  policy: BaoPolicy,
): Protocol {
  const kv = (m: Machine, what: string) => `/v1/${BAO_MOUNT}/data/m/${m.name}/${what}`;
  const as = (token: string) => ({ "x-vault-token": token, "content-type": "application/json" });
  const makeToken = async (c: HttpClient, m: Machine): Promise<Answer> => {
    if (policy === "template") {
      return c.call({
        affinity: m.name,
        method: "POST",
        path: `/v1/auth/token/create/${MACHINE_ROLE}`,
        headers: as(controller),
        body: JSON.stringify({ entity_alias: m.name }),
      });
    }
    await c.call({
      affinity: m.name,
      method: "PUT",
      path: `/v1/sys/policies/acl/m-${m.name}`,
      headers: as(controller),
      body: JSON.stringify({ policy: machinePolicy(m.name) }),
    });
    return c.call({
      affinity: m.name,
      method: "POST",
      path: "/v1/auth/token/create",
      headers: as(controller),
      body: JSON.stringify({ policies: [`m-${m.name}`], no_default_policy: true, ttl: "1h", num_uses: uses }),
    });
  };
  return {
    async publish(c, m) {
      await c.call({
        affinity: m.name,
        method: "PUT",
        path: kv(m, "config"),
        headers: as(controller),
        body: JSON.stringify({ data: { payload: payload(m.name) } }),
      });
      const a = await makeToken(c, m);
      const token = (json(a).auth as { client_token?: unknown } | undefined)?.client_token;
      if (typeof token !== "string") throw new Error("publish: no client_token in the answer");
      return token;
    },
    fetch: (c, m, token) =>
      c.call({
        affinity: m.name,
        method: "GET",
        path: kv(m, "config"),
        headers: { "x-vault-token": token },
      }),
    async status(c, m, token, phase) {
      await c.call({
        affinity: m.name,
        method: "PUT",
        path: kv(m, "status"),
        headers: as(token),
        body: JSON.stringify({ data: { phase, message: "boot storm" } }),
      });
    },
    verify(m, a) {
      const data = (json(a).data as { data?: { payload?: unknown } } | undefined)?.data;
      return data?.payload === payload(m.name) ? undefined : "fetch: not the secret that was written";
    },
  };
}
