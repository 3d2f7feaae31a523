/**
 * A publish that brings the machine's TPM endorsement key (X-Bootseal-Tpm-Ek, optionally
 * X-Bootseal-Tpm-Pcrs) to a creation rule whose tpm key is `publish`: the stored document's tpm
 * entry is that EK under the rule's (or the publish's) PCR policy, beside the rule's other keys;
 * every mismatch between the rule and the publish is a 400 that stores nothing. The policy
 * digests are checked against the key kind's own `--tpm-ek KEY#PCR=HEX` entries here; the
 * swtpm end to end (sealed, unsealed inside the TPM) is in login-tpm.test.ts.
 */
import assert from "node:assert/strict";
import { createHash, generateKeyPairSync } from "node:crypto";
import { test } from "node:test";
import type { FastifyInstance } from "fastify";
import { tpmSealedKeyType } from "../../providers/keys/tpm-sealed.ts";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { appConfig } from "./app-config.ts";

const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const AGE = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";
const PCR7 = "3d458cfe55cc03ea1f443f1562beec8df51c75e14a9fcf9a7234a13f198e7969";
const PCR16 = "00".repeat(32);

function spki(type: "rsa" | "ec", size?: number): string {
  const { publicKey } =
    type === "rsa"
      ? generateKeyPairSync("rsa", { modulusLength: size ?? 2048 })
      : generateKeyPairSync("ec", { namedCurve: "P-256" });
  return publicKey.export({ format: "der", type: "spki" }).toString("base64");
}

function service(rules: string): FastifyInstance {
  return buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(rules, "t"),
      controllers: [
        { name: "admin", tokenSha256: createHash("sha256").update(ADMIN).digest("hex"), scopes: [...SCOPES] },
      ],
    }),
  });
}

function publish(app: FastifyInstance, machine: string, headers: Record<string, string>) {
  return app.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain", ...headers },
    payload: "join token\n",
  });
}

async function storedKeys(app: FastifyInstance, machine: string): Promise<Record<string, unknown>> {
  const res = await app.inject({
    method: "GET",
    url: `/v1/machines/${machine}/config`,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  return (JSON.parse(res.body) as { sops: Record<string, unknown> }).sops;
}

/** The policy digest `--tpm-ek EK#PCR=HEX…` gives: the key kind's own entry for the same policy. */
function policyOf(ek: string, pcrs: string): string {
  const [key] = tpmSealedKeyType.fromUserInput(`${ek}${pcrs}`, {});
  return (key?.id ?? "").split(":policy:")[1] ?? "";
}

test("tpm_ek: publish#7=… in the rule: the publish's EK (RSA 2048 and ECC P-256) under the rule's PCR 7 policy, beside the rule's age key", async () => {
  const app = service(`creation_rules:\n  - age: ${AGE}\n    tpm_ek: "publish#7=${PCR7}"\n`);
  for (const [machine, ek] of [
    ["prod/rsa-1", spki("rsa")],
    ["prod/ecc-1", spki("ec")],
  ] as const) {
    const res = await publish(app, machine, { "x-bootseal-tpm-ek": ek });
    assert.equal(res.statusCode, 201, res.body);
    const sops = await storedKeys(app, machine);
    const [tpm] = sops.tpm as { ek_public: string; pcrs: string; policy: string; enc: string }[];
    assert.equal(tpm?.ek_public, ek);
    assert.equal(tpm?.pcrs, "sha256:7");
    assert.equal(tpm?.policy, policyOf(ek, `#7=${PCR7}`));
    assert.ok((tpm?.enc.length ?? 0) > 100, "a sealed data key");
    assert.equal((sops.age as unknown[]).length, 1, "the rule's age key stays beside it");
  }
  await app.close();
});

test("X-Bootseal-Tpm-Pcrs replaces the rule's policy; a rule without PCRs and a publish without them seal with no policy", async () => {
  const app = service(`creation_rules:\n  - tpm_ek: "publish#7=${PCR7}"\n`);
  const ek = spki("rsa");
  const res = await publish(app, "prod/pcrs-1", {
    "x-bootseal-tpm-ek": ek,
    "x-bootseal-tpm-pcrs": `16=${PCR16},7=${PCR7}`,
  });
  assert.equal(res.statusCode, 201, res.body);
  const [tpm] = (await storedKeys(app, "prod/pcrs-1")).tpm as { pcrs: string; policy: string }[];
  assert.equal(tpm?.pcrs, "sha256:7,16");
  assert.equal(tpm?.policy, policyOf(ek, `#7=${PCR7}#16=${PCR16}`));
  await app.close();

  const bare = service(`creation_rules:\n  - key_groups:\n      - tpm:\n          - ek: publish\n`);
  assert.equal((await publish(bare, "prod/bare-1", { "x-bootseal-tpm-ek": ek })).statusCode, 201);
  const [plain] = (await storedKeys(bare, "prod/bare-1")).tpm as Record<string, unknown>[];
  assert.equal(plain?.ek_public, ek);
  assert.equal(plain?.policy, undefined, "no policy without PCRs");
  await bare.close();
});

test("the rule and the publish must agree, and the headers must be well formed: each is a 400 that stores nothing", async () => {
  const waiting = service(`creation_rules:\n  - tpm_ek: "publish#7=${PCR7}"\n`);
  const ageOnly = service(`creation_rules:\n  - age: ${AGE}\n`);
  const ek = spki("rsa");
  const cases: [FastifyInstance, Record<string, string>, RegExp][] = [
    [waiting, {}, /seals to the machine's TPM \(tpm_ek: publish\): send its EK in X-Bootseal-Tpm-Ek/],
    [ageOnly, { "x-bootseal-tpm-ek": ek }, /has no tpm key to seal to/],
    [waiting, { "x-bootseal-tpm-ek": "not base64!" }, /x-bootseal-tpm-ek: expected base64 DER/],
    [
      waiting,
      { "x-bootseal-tpm-ek": Buffer.from("x".repeat(64)).toString("base64") },
      /not an EK public key/,
    ],
    [waiting, { "x-bootseal-tpm-ek": spki("rsa", 1024) }, /tpm: /],
    [waiting, { "x-bootseal-tpm-pcrs": `7=${PCR7}` }, /x-bootseal-tpm-pcrs: only with x-bootseal-tpm-ek/],
    [waiting, { "x-bootseal-tpm-ek": ek, "x-bootseal-tpm-pcrs": "7=abc" }, /sha256 digest in hex/],
    [waiting, { "x-bootseal-tpm-ek": ek, "x-bootseal-tpm-pcrs": `24=${PCR7}` }, /PCR 24 is not 0-23/],
    [
      waiting,
      { "x-bootseal-tpm-ek": ek, "x-bootseal-tpm-pcrs": `7=${PCR7},7=${PCR16}` },
      /PCR 7 is given twice/,
    ],
  ];
  for (const [app, headers, message] of cases) {
    const res = await publish(app, "prod/bad-1", headers);
    assert.equal(res.statusCode, 400, `${JSON.stringify(headers)}: ${res.body}`);
    const body = res.json() as { code: string; message: string };
    assert.equal(body.code, "BAD_INPUT");
    assert.match(body.message, message);
    const stored = await app.inject({
      method: "GET",
      url: "/v1/machines/prod/bad-1/config",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    assert.equal(stored.statusCode, 404, "nothing stored");
  }
  await waiting.close();
  await ageOnly.close();
});

test("POST /v1/check seals a throwaway EK under a `tpm_ek: publish` rule's policy: usable, named as the EK each publish sends", async () => {
  const app = service(`creation_rules:\n  - tpm_ek: "publish#7=${PCR7}"\n`);
  const res = await app.inject({
    method: "POST",
    url: "/v1/check",
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  assert.equal(res.statusCode, 200, res.body);
  const { checks } = res.json() as { checks: { name: string; ok: boolean; message: string }[] };
  assert.deepEqual(
    checks.find((c) => c.name === "rule 1 tpm"),
    { name: "rule 1 tpm", ok: true, message: "tpm: the EK each publish sends: wraps a data key" },
  );
  await app.close();
});
