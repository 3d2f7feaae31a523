/**
 * Machine login with Azure, end to end: the real `bootseal fetch --auth azure` (its own
 * process), whose managed-identity token comes from a FAKE Azure IMDS reached through
 * BOOTSEAL_AZURE_IMDS_ENDPOINT (test/fakes/azure-imds.ts), logs in at the real service app on
 * loopback, which verifies the token against a FAKE Entra tenant JWKS endpoint
 * (test/fakes/jwks-server.ts), both signing with a key made for this run (no real Entra ID can
 * run here).
 *
 * The login contract (login-harness.ts): allowed VM: login, fetch, write, report succeeded
 * (bindings written in another case than the token's still match: ARM ids are
 * case-insensitive). A VM bound to another machine: 403. A token for another audience: 401.
 * JWKS down: 503, retried to the deadline. Also: an app ID URI audience reaches the machine as
 * --azure-resource; without a tenant there are no Azure logins.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { parseMachineAuth, type RawMachineAuth } from "../../src/config/machine-auth.ts";
import { applyEnv, validateServiceConfig } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { buildApp } from "../../src/service/app.ts";
import { loginFlags } from "../../src/service/identity/index.ts";
import { type AzureImdsFake, EXAMPLE_VM, startAzureImds, TOKEN_PATH } from "../fakes/azure-imds.ts";
import { appConfig } from "./app-config.ts";
import { cloudLoginContract } from "./login-harness.ts";

const AUDIENCE = "https://bootseal-azure.login.test";
const APP_ID_URI = "api://bootseal-machines";
const TENANT = EXAMPLE_VM.tenant;

function raw(jwksUrl: string, azure: Record<string, unknown> = {}): RawMachineAuth {
  return {
    audience: AUDIENCE,
    tokenTtl: "1h",
    aws: { region: "us-east-1" },
    azure: { tenant: TENANT.toUpperCase(), jwksUrl, cooldown: 0, ...azure },
    bindings: [
      {
        method: "azure",
        // Written as the portal shows them; the verifier proves them lower-cased.
        match: {
          subscription: EXAMPLE_VM.subscription.toUpperCase(),
          resourceGroup: "Bootseal-RG",
          vmName: "WEB-*",
        },
        machines: "prod/*",
      },
      {
        method: "azure",
        match: { subscription: EXAMPLE_VM.subscription, vmName: "db-1" },
        machines: "prod/db",
      },
    ],
  };
}

const login = cloudLoginContract<AzureImdsFake>({
  method: "azure",
  label: "azure (fake IMDS, fake JWKS)",
  labelJwksDown: "azure (fake IMDS)",
  audience: AUDIENCE,
  kid: "azure-test-key-1",
  jwks: { shape: "microsoft", tenant: TENANT },
  machineAuth: (jwksUrl, azure) => parseMachineAuth(raw(jwksUrl, azure), undefined),
  startFakes: async (signing) => ({
    web: await startAzureImds(signing, EXAMPLE_VM),
    db: await startAzureImds(signing, { ...EXAMPLE_VM, vmName: "Db-1" }),
  }),
  env: (fake) => ({ BOOTSEAL_AZURE_IMDS_ENDPOINT: fake.endpoint }),
  checkAsked(asked) {
    // The fetcher asked IMDS for a token for this service, with the header IMDS requires.
    assert.equal(asked?.path, TOKEN_PATH);
    assert.equal(asked?.query.get("resource"), AUDIENCE);
    assert.equal(asked?.headers.metadata, "true");
  },
  credentialFrom: async (fake, audience) => {
    const answer = await fetch(
      `${fake.endpoint}${TOKEN_PATH}?api-version=2018-02-01&resource=${encodeURIComponent(audience)}`,
      { headers: { metadata: "true" } },
    ).then((res) => res.json() as Promise<{ access_token: string }>);
    return answer.access_token;
  },
  closedJwksPath: `/${TENANT}/discovery/v2.0/keys`,
  machineWord: "VM",
  tokenName: "access token",
  notBound: /virtualMachines\/Db-1 is not bound to machine prod\/web-2/,
  wrongAudience: /azure managed-identity token: claim "aud" does not verify/,
});
const { publish, fetchAs } = login;

test("azure (fake IMDS, fake JWKS): an app ID URI audience reaches the machine as --azure-resource", async () => {
  const svc = login.serviceWith(login.jwks.url, { audience: APP_ID_URI });
  try {
    const base = await svc.listen({ host: "127.0.0.1", port: 0 });
    await publish("prod/web-5", "the web-5 secret\n", svc);
    const flags = loginFlags(
      parseMachineAuth(raw(login.jwks.url, { audience: APP_ID_URI }), undefined),
      "azure",
    );
    assert.deepEqual(flags, ["--auth", "azure", "--server-id", AUDIENCE, "--azure-resource", APP_ID_URI]);
    // Without it the machine asks for the server id, which this service does not accept.
    const without = await fetchAs("prod/web-5", login.web, { base });
    assert.equal(without.r.code, EXIT_CODES.UNAUTHORIZED, without.r.stderr);
    const { r, root } = await fetchAs("prod/web-5", login.web, { base, extra: flags.slice(4) });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "the web-5 secret\n");
    assert.equal(login.web.requests.at(-1)?.query.get("resource"), APP_ID_URI);
  } finally {
    await svc.close();
  }
});

test("azure: without machineAuth.azure there are no Azure logins, and an azure binding is a usage error", async () => {
  const bare = { tokenTtl: "1h", aws: { region: "us-east-1" }, audience: AUDIENCE };
  assert.throws(
    () =>
      parseMachineAuth(
        { ...bare, bindings: [{ method: "azure", match: { vmName: "web-1" }, machines: "prod/*" }] },
        undefined,
      ),
    (err: unknown) =>
      err instanceof BootsealError && err.code === "USAGE" && /machineAuth\.azure\.tenant/.test(err.message),
  );
  // vmId is not in the token: a binding on it would match nothing, so it is refused.
  assert.throws(
    () =>
      parseMachineAuth(
        {
          ...raw(login.jwks.url),
          bindings: [{ method: "azure", match: { vmId: "x" }, machines: "prod/*" }],
        },
        undefined,
      ),
    (err: unknown) => err instanceof BootsealError && err.code === "USAGE" && /vmId/.test(err.message),
  );
  const svc = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${login.key.recipient}\n`, "t"),
      machineAuth: parseMachineAuth({ ...bare, bindings: [] }, undefined),
    }),
  });
  try {
    const res = await svc.inject({
      method: "POST",
      url: "/v1/machines/prod/web-6/login",
      payload: { method: "azure", credential: "a.b.c" },
    });
    assert.equal(res.statusCode, 501, res.body);
    assert.equal(res.json().code, "UNSUPPORTED");
  } finally {
    await svc.close();
  }
});

test("machineAuth.gcp and machineAuth.azure load through the service configuration schema and its variables", () => {
  const base = {
    store: "file://./store",
    creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
    controllers: [{ name: "ci", tokenSha256: "a".repeat(64), scopes: ["configs:write"] }],
    publicUrl: "https://bootseal.example.com/base",
  };
  const plain = validateServiceConfig(base, login.dir).machineAuth;
  // The schema's defaults: Google's keys; no tenant, no Azure.
  assert.equal(plain.gcp.jwksUrl, "https://www.googleapis.com/oauth2/v3/certs");
  assert.equal(plain.gcp.issuer, "https://accounts.google.com");
  assert.equal(plain.gcp.cooldownMs, 30_000);
  assert.equal(plain.azure, undefined);
  const c = validateServiceConfig(
    applyEnv(
      {
        ...base,
        machineAuth: {
          azure: { tenant: TENANT.toUpperCase() },
          bindings: [{ method: "azure", match: { vmName: "Web-1" }, machines: "prod/web-1" }],
        },
      },
      { BOOTSEAL_MACHINE_AUTH_AZURE_COOLDOWN: "2m", BOOTSEAL_MACHINE_AUTH_GCP_TIMEOUT: "3s" },
    ),
    login.dir,
  ).machineAuth;
  assert.equal(c.audience, "https://bootseal.example.com");
  assert.equal(c.azure?.tenant, TENANT);
  assert.equal(c.azure?.cooldownMs, 120_000);
  assert.equal(c.gcp.timeoutMs, 3_000);
  assert.deepEqual(c.bindings[0]?.match, { vmName: "web-1" });
  assert.throws(
    () => validateServiceConfig({ ...base, machineAuth: { azure: { tenant: "contoso" } } }, login.dir),
    (err: unknown) => err instanceof BootsealError && /machineAuth\.azure\.tenant/.test(err.message),
  );
});
