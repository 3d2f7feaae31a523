/**
 * The `azure` verifier against a FAKE Entra ID: locally generated RSA keys published by a fake
 * JWKS endpoint in Microsoft's key shape (test/fakes/jwks-server.ts), tokens minted by the fake
 * IMDS (test/fakes/azure-imds.ts) in the managed-identity claim shape, or signed here for the
 * broken cases.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { JWTPayload } from "jose";
import { AZURE_MACHINE_AUTH_SCHEMA } from "../../src/config/machine-auth-jwt.ts";
import { schemaChecker } from "../../src/config/schema-check.ts";
import { BootsealError } from "../../src/errors.ts";
import { azureVerifier, azureVerifierFromConfig } from "../../src/service/identity/azure.ts";
import { type AzureVm, EXAMPLE_VM, startAzureImds, TOKEN_PATH } from "../fakes/azure-imds.ts";
import { signJwt, type TestKey } from "../fakes/jwks-server.ts";
import { jwtVerifierContract, rejectsWith, T } from "./identity-contract.ts";

const AUDIENCE = "api://bootseal-service";
const TENANT = EXAMPLE_VM.tenant;
const OTHER_TENANT = "11111111-2222-4333-8444-555555555555";
const VM_ID = `/subscriptions/${EXAMPLE_VM.subscription}/resourcegroups/Bootseal-RG/providers/Microsoft.Compute/virtualMachines/Web-1`;

const azure = jwtVerifierContract({
  audience: AUDIENCE,
  kids: ["nOo3ZDrODXEK1jKWhXslHR_KXEg", "kid-b", "kid-x"],
  jwks: { shape: "microsoft", tenant: TENANT },
  verifier: (jwksUrl, over = {}) => azureVerifier({ tenant: TENANT, jwksUrl, cooldownMs: 0, ...over }),
  token: (key) => imdsToken(key),
  claims: () => claims(),
  tamper(payload) {
    payload.xms_mirid = VM_ID.replace("Web-1", "Db-1");
  },
  failStatus: 503,
  checkRotated: (id) => assert.equal(id.attributes.vmName, "web-1"),
});
const ctx = azure.ctx;
const verifier = (over: Partial<Parameters<typeof azureVerifier>[0]> = {}) =>
  azureVerifier({ tenant: TENANT, jwksUrl: azure.jwks.url, cooldownMs: 0, ...over });

/** A token from the fake IMDS, over its real wire protocol. */
async function imdsToken(
  key: TestKey,
  opts: { vm?: AzureVm; version?: "1.0" | "2.0"; resource?: string; clientId?: string } = {},
): Promise<string> {
  const server = await startAzureImds(key, opts.vm ?? EXAMPLE_VM, { version: opts.version });
  try {
    const url = new URL(TOKEN_PATH, server.endpoint);
    url.searchParams.set("api-version", "2018-02-01");
    url.searchParams.set("resource", opts.resource ?? AUDIENCE);
    if (opts.clientId) url.searchParams.set("client_id", opts.clientId);
    const res = await fetch(url, { headers: { Metadata: "true" } });
    assert.equal(res.status, 200, await res.clone().text());
    return ((await res.json()) as { access_token: string }).access_token;
  } finally {
    await server.close();
  }
}

/** The v1 managed-identity claim set, signed here so a test can change one claim. */
function claims(over: JWTPayload = {}): JWTPayload {
  const iat = Math.floor(Date.now() / 1000);
  return {
    aud: AUDIENCE,
    iss: `https://sts.windows.net/${TENANT}/`,
    iat,
    nbf: iat,
    exp: iat + 86_399,
    appid: "3c2a1b0d-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
    appidacr: "2",
    idtyp: "app",
    oid: "9f4e5a1c-2b8d-4c6e-8a7f-1d2e3f4a5b6c",
    sub: "9f4e5a1c-2b8d-4c6e-8a7f-1d2e3f4a5b6c",
    tid: TENANT,
    ver: "1.0",
    xms_mirid: VM_ID,
    ...over,
  };
}

test("valid: a system-assigned identity's token from the fake IMDS names the VM", T, async () => {
  const id = await verifier().verify(await imdsToken(azure.keyA), ctx());
  assert.equal(id.method, "azure");
  assert.equal(id.principal, VM_ID);
  assert.deepEqual(id.attributes, {
    tenant: TENANT,
    subscription: EXAMPLE_VM.subscription,
    resourceGroup: "bootseal-rg",
    vmName: "web-1",
    vmResourceId: VM_ID.toLowerCase(),
    objectId: "9f4e5a1c-2b8d-4c6e-8a7f-1d2e3f4a5b6c",
    clientId: "3c2a1b0d-9e8f-4a7b-b6c5-d4e3f2a1b0c9",
  });
  assert.equal("vmId" in id.attributes, false, "the token carries no vmId");
});

test(
  "valid: a user-assigned identity's token names the VM that used it (xms_az_rid), not the identity",
  T,
  async () => {
    const uami = EXAMPLE_VM.userAssigned?.[0];
    assert.ok(uami);
    const token = await imdsToken(azure.keyA, { clientId: uami.clientId });
    const payload = JSON.parse(Buffer.from(token.split(".")[1] as string, "base64url").toString()) as Record<
      string,
      string
    >;
    assert.match(
      payload.xms_mirid as string,
      /userAssignedIdentities\/bootseal-machines$/,
      "the fake's shape",
    );
    const id = await verifier().verify(token, ctx());
    assert.equal(id.attributes.vmName, "web-1");
    assert.equal(id.attributes.objectId, uami.objectId);
    assert.equal(id.attributes.vmResourceId, VM_ID.toLowerCase());
  },
);

test(
  "valid: v2 tokens (login.microsoftonline.com issuer, azp) and a configured audience (the client id)",
  T,
  async () => {
    const appId = "c0ffee00-1234-4abc-8def-0123456789ab";
    const v = verifier({ audience: appId });
    const id = await v.verify(await imdsToken(azure.keyA, { version: "2.0", resource: appId }), ctx());
    assert.equal(id.attributes.clientId, "3c2a1b0d-9e8f-4a7b-b6c5-d4e3f2a1b0c9");
    await rejectsWith(v.verify(await imdsToken(azure.keyA), ctx()), "UNAUTHORIZED", /claim "aud"/);
  },
);

test(
  "a scale-set VM is accepted (vmName scaleSet_instance); a scale set, App Service or no resource is not",
  T,
  async () => {
    const base = `/subscriptions/${EXAMPLE_VM.subscription}/resourcegroups/pool/providers/Microsoft.Compute`;
    const vmss = await imdsToken(azure.keyA, {
      vm: { ...EXAMPLE_VM, resourceId: `${base}/virtualMachineScaleSets/Workers/virtualMachines/3` },
    });
    const id = await verifier().verify(vmss, ctx());
    assert.equal(id.attributes.vmName, "workers_3");
    assert.equal(id.attributes.vmScaleSet, "workers");
    assert.equal(id.attributes.resourceGroup, "pool");
    const wholeSet = await imdsToken(azure.keyA, {
      vm: { ...EXAMPLE_VM, resourceId: `${base}/virtualMachineScaleSets/Workers` },
    });
    await rejectsWith(verifier().verify(wholeSet, ctx()), "UNAUTHORIZED", /not a virtual machine/, wholeSet);
    const site = `/subscriptions/${EXAMPLE_VM.subscription}/resourcegroups/web/providers/Microsoft.Web/sites/shop`;
    const app = await imdsToken(azure.keyA, {
      vm: { ...EXAMPLE_VM, systemAssigned: undefined, resourceId: site },
    });
    await rejectsWith(verifier().verify(app, ctx()), "UNAUTHORIZED", /not a virtual machine/, app);
    const none = await signJwt(azure.keyA, claims({ xms_mirid: undefined }));
    await rejectsWith(verifier().verify(none, ctx()), "UNAUTHORIZED", /no "xms_mirid"/, none);
    const noOid = await signJwt(azure.keyA, claims({ oid: undefined }));
    await rejectsWith(verifier().verify(noOid, ctx()), "UNAUTHORIZED", /no "oid"/, noOid);
  },
);

test("another tenant (its issuer, or only its tid) is UNAUTHORIZED", T, async () => {
  const other = await imdsToken(azure.keyA, { vm: { ...EXAMPLE_VM, tenant: OTHER_TENANT } });
  await rejectsWith(verifier().verify(other, ctx()), "UNAUTHORIZED", /claim "iss"/, other);
  const tid = await signJwt(azure.keyA, claims({ tid: OTHER_TENANT }));
  await rejectsWith(verifier().verify(tid, ctx()), "UNAUTHORIZED", /another tenant/, tid);
});

test("wrong audience, expired, not yet valid: UNAUTHORIZED", T, async () => {
  const wrong = await imdsToken(azure.keyA, { resource: "https://management.azure.com/" });
  await rejectsWith(verifier().verify(wrong, ctx()), "UNAUTHORIZED", /claim "aud"/, wrong);
  const fresh = await imdsToken(azure.keyA);
  await rejectsWith(
    verifier().verify(fresh, ctx({ now: new Date(Date.now() + 25 * 3600_000) })),
    "UNAUTHORIZED",
    /expired/,
  );
  const iat = Math.floor(Date.now() / 1000);
  const early = await signJwt(azure.keyA, claims({ nbf: iat + 600 }));
  await rejectsWith(verifier().verify(early, ctx()), "UNAUTHORIZED", /claim "nbf"/, early);
});

test(
  "machineAuth.azure: tenant required and a GUID; durations parsed; defaults name the tenant",
  T,
  async () => {
    const check = schemaChecker(AZURE_MACHINE_AUTH_SCHEMA);
    assert.throws(
      () => check({}),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE" && /tenant/.test(e.message),
    );
    assert.throws(
      () => check({ tenant: "contoso" }),
      (e: unknown) => e instanceof BootsealError && /GUID/.test(e.message),
    );
    assert.deepEqual(check({ tenant: TENANT }), {
      tenant: TENANT,
      timeout: "5s",
      cooldown: "30s",
      cacheMaxAge: "10m",
      clockSkew: "60s",
    });
    assert.throws(
      () => azureVerifier({ tenant: "contoso.onmicrosoft.com" }),
      (e: unknown) => e instanceof BootsealError && e.code === "USAGE",
    );
    assert.throws(
      () => azureVerifierFromConfig({ tenant: TENANT, cooldown: "later" }),
      (e: unknown) =>
        e instanceof BootsealError && e.code === "USAGE" && /machineAuth\.azure\.cooldown/.test(e.message),
    );
    const v = azureVerifierFromConfig({
      tenant: TENANT.toUpperCase(),
      jwksUrl: azure.jwks.url,
      cooldown: "0s",
      timeout: "3s",
    });
    assert.equal((await v.verify(await imdsToken(azure.keyA), ctx())).attributes.tenant, TENANT);
  },
);
